//! The log conformance suite: the same bodies run against every engine
//! behind the `Log` trait — the embedded log, Kafka through librdkafka's
//! in-process mock broker, and a real broker with `FEEDLOG_TEST_KAFKA` —
//! so a partition task cannot tell them apart: records come back per
//! partition in append order with their keys, values, formats and
//! timestamps; a source starts where asked, stops at an end, and tails
//! appends; a position the log does not hold (past its end, or deleted by
//! retention) is an error, never a skip. (The mock broker cannot delete
//! records, so retention is checked on the embedded log and a real broker.)

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use feedlog::core::codec::Marker;
use feedlog::core::Partition;
use feedlog::log::kafka::mock::MockBroker;
use feedlog::log::kafka::{apply_topics, KafkaConfig, KafkaLog};
use feedlog::log::topics::Topics;
use feedlog::log::{Log, LogError, Logs, NewRecord, Offset, Record, Source, Topic};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One engine under test.
trait Engine {
    /// The log (topics `events` and `effects` with `PARTITIONS` partitions).
    fn log(&self) -> Arc<dyn Log>;
    /// Deletes the records of `events[partition]` before about `offset`, as
    /// retention would; returns the log's new first offset (> 0).
    fn retain_from(&self, partition: Partition, offset: u64) -> u64;
}

const PARTITIONS: u32 = 3;

/// How long an asynchronous engine may take to show what was appended.
const WITHIN: Duration = Duration::from_secs(60);

struct Embedded {
    _tmp: tempfile::TempDir,
    logs: Arc<Logs>,
}

impl Embedded {
    fn new() -> Embedded {
        let tmp = tempfile::tempdir().unwrap();
        let mut topics = Topics::builtin();
        // Small segments, so retention has whole segments to delete.
        topics.events.segment_bytes = 4096;
        let logs = Arc::new(Logs::new(tmp.path(), PARTITIONS, topics));
        Embedded { _tmp: tmp, logs }
    }
}

impl Engine for Embedded {
    fn log(&self) -> Arc<dyn Log> {
        self.logs.clone()
    }

    fn retain_from(&self, partition: Partition, offset: u64) -> u64 {
        // Retention deletes whole segments that end before `offset`.
        let dir = self.logs.dir(Topic::Events, partition);
        let mut bases: Vec<u64> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".log").and_then(|b| b.parse().ok())
            })
            .collect();
        bases.sort();
        let keep = bases.iter().rposition(|&b| b <= offset).unwrap();
        for b in &bases[..keep] {
            std::fs::remove_file(dir.join(format!("{b:020}.log"))).unwrap();
        }
        bases[keep]
    }
}

struct Kafka {
    _mock: Option<MockBroker>,
    cfg: KafkaConfig,
    log: Arc<KafkaLog>,
}

impl Kafka {
    fn mock() -> Kafka {
        let mock = MockBroker::start().unwrap();
        let cfg = KafkaConfig::new(&mock.bootstrap(), "conformance");
        mock.create_topics(&cfg, PARTITIONS).unwrap();
        Kafka::connect(Some(mock), cfg)
    }

    fn real() -> Kafka {
        let brokers = std::env::var("FEEDLOG_TEST_KAFKA").expect(
            "this test needs a Kafka broker: set FEEDLOG_TEST_KAFKA=host:port (.ci/run starts tansu when it is installed)",
        );
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let mut cfg = KafkaConfig::new(&brokers, "conformance");
        cfg.topic_prefix = format!("c{}-{nanos}-", std::process::id());
        apply_topics(&cfg, PARTITIONS, 1).unwrap();
        Kafka::connect(None, cfg)
    }

    fn connect(mock: Option<MockBroker>, cfg: KafkaConfig) -> Kafka {
        let log = KafkaLog::connect(cfg.clone(), Arc::new(AtomicBool::new(false))).unwrap();
        Kafka {
            _mock: mock,
            cfg,
            log: Arc::new(log),
        }
    }
}

impl Engine for Kafka {
    fn log(&self) -> Arc<dyn Log> {
        self.log.clone()
    }

    fn retain_from(&self, partition: Partition, offset: u64) -> u64 {
        use rdkafka::admin::{AdminClient, AdminOptions};
        use rdkafka::client::DefaultClientContext;
        let admin: AdminClient<DefaultClientContext> = self.cfg.client_config().create().unwrap();
        let mut tpl = rdkafka::TopicPartitionList::new();
        let name = self.cfg.name(Topic::Events);
        tpl.add_partition_offset(
            &name,
            partition.0 as i32,
            rdkafka::Offset::Offset(offset as i64),
        )
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let result = rt
            .block_on(admin.delete_records(&tpl, &opts))
            .unwrap_or_else(|e| panic!("this broker does not delete records (DeleteRecords): {e}"));
        if let Err(e) = result.elements()[0].error() {
            panic!("this broker does not delete records (DeleteRecords): {e}");
        }
        offset
    }
}

/// A record whose fields all depend on (partition, i): keys empty, short
/// and binary; values up to 64 KiB.
fn record(partition: Partition, i: u64) -> (u64, u8, Vec<u8>, Vec<u8>) {
    let key = match i % 3 {
        0 => Vec::new(),
        1 => format!("k{partition}-{i}").into_bytes(),
        _ => vec![0, 0xff, partition.0 as u8, i as u8],
    };
    let len = if i % 10 == 7 {
        64 << 10
    } else {
        (i % 50) as usize
    };
    let value = (0..len)
        .map(|j| (j as u64 ^ i ^ partition.0 as u64) as u8)
        .collect();
    (1_700_000_000_000 + i * 3, 1 + (i % 4) as u8, key, value)
}

/// Appends records `from..to` of every partition through one sink; flushed.
fn append(log: &Arc<dyn Log>, from: u64, to: u64) {
    let mut sink = log.clone().sink(true).unwrap();
    for p in Partition::all(PARTITIONS) {
        let owned: Vec<_> = (from..to).map(|i| record(p, i)).collect();
        let batch: Vec<NewRecord<'_>> = owned
            .iter()
            .map(|(ts, format, key, value)| NewRecord {
                timestamp_ms: *ts,
                format: (*format).into(),
                key,
                value,
            })
            .collect();
        for chunk in batch.chunks(7) {
            sink.append(Topic::Events, p, chunk).unwrap();
        }
    }
    sink.flush().unwrap();
}

/// Reads until `n` records arrived (or `WITHIN` passed), in calls of at
/// most 5 records, each bounded by `end`.
fn read_n(source: &mut dyn Source, n: usize, end: Option<Offset>) -> Vec<Record> {
    let start = Instant::now();
    let mut out = Vec::new();
    while out.len() < n {
        assert!(
            start.elapsed() < WITHIN,
            "only {} of {n} records within {WITHIN:?}",
            out.len()
        );
        let got = source.read(5, 1 << 20, end).unwrap();
        if got.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
        out.extend(got);
    }
    out
}

/// Asserts `got` are exactly records `from..` of `partition`, in order.
fn assert_records(got: &[Record], partition: Partition, from: u64) {
    for (r, i) in got.iter().zip(from..) {
        let (ts, format, key, value) = record(partition, i);
        assert_eq!(
            r.offset,
            Offset(i),
            "partition {partition}: offsets in append order"
        );
        assert_eq!(
            (r.timestamp_ms, r.format, &r.key, r.value.len()),
            (ts, Marker::from(format), &key, value.len()),
            "partition {partition}, offset {i}"
        );
        assert!(
            r.value == value,
            "partition {partition}, offset {i}: the value"
        );
    }
}

/// Reads from `from` until an error; panics if a record comes first.
fn read_until_error(log: &Arc<dyn Log>, partition: Partition, from: u64) -> LogError {
    let mut source = match log.source(Topic::Events, partition, Offset(from)) {
        Err(e) => return e,
        Ok(s) => s,
    };
    let start = Instant::now();
    loop {
        match source.read(10, 1 << 20, None) {
            Err(e) => return e,
            Ok(got) => assert!(
                got.is_empty(),
                "offset {from} of events[{partition}] is not held, yet a read returned {:?}",
                got.iter().map(|r| r.offset).collect::<Vec<_>>()
            ),
        }
        assert!(
            start.elapsed() < WITHIN,
            "no error within {WITHIN:?} for offset {from}, which the log does not hold"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Records come back per partition in append order, every field intact, and
/// the ends are the counts appended.
fn records_read_back_in_append_order(e: &dyn Engine) {
    let log = e.log();
    assert_eq!(log.partitions(Topic::Events), PARTITIONS);
    for p in Partition::all(PARTITIONS) {
        assert_eq!(log.end_offset(Topic::Events, p).unwrap(), Offset(0));
    }
    append(&log, 0, 60);
    for p in Partition::all(PARTITIONS) {
        assert_eq!(log.end_offset(Topic::Events, p).unwrap(), Offset(60));
        let mut source = log.source(Topic::Events, p, Offset(0)).unwrap();
        let got = read_n(source.as_mut(), 60, None);
        assert_eq!(got.len(), 60);
        assert_records(&got, p, 0);
        assert_eq!(source.position(), Offset(60));
    }
}

/// A source starts at the offset asked for, never returns a record at or
/// past `end`, and tails what is appended after it was opened.
fn sources_start_stop_and_tail(e: &dyn Engine) {
    let log = e.log();
    append(&log, 0, 30);
    for p in Partition::all(PARTITIONS) {
        let mut source = log.source(Topic::Events, p, Offset(11)).unwrap();
        assert_eq!(source.position(), Offset(11));
        let got = read_n(source.as_mut(), 9, Some(Offset(20)));
        assert_records(&got, p, 11);
        assert_eq!(got.len(), 9);
        assert_eq!(
            source.read(10, 1 << 20, Some(Offset(20))).unwrap(),
            vec![],
            "nothing at or past the end"
        );
        assert_eq!(source.position(), Offset(20));
        let got = read_n(source.as_mut(), 10, None);
        assert_records(&got, p, 20);
    }
    // Opened at the end: it sees only what comes next.
    let mut tails: Vec<_> = Partition::all(PARTITIONS)
        .map(|p| log.source(Topic::Events, p, Offset(30)).unwrap())
        .collect();
    append(&log, 30, 45);
    for (p, source) in tails.iter_mut().enumerate() {
        let got = read_n(source.as_mut(), 15, None);
        assert_records(&got, Partition(p as u32), 30);
    }
}

/// An offset past the end is an error, never a wait or a skip.
fn positions_past_the_end_are_errors(e: &dyn Engine) {
    let log = e.log();
    append(&log, 0, 40);
    let past = read_until_error(&log, Partition(0), 45);
    assert!(
        matches!(
            past,
            LogError::OffsetOutOfRange { .. } | LogError::KafkaPastEnd { .. }
        ),
        "past the end: {past}"
    );
}

/// An offset before the first one retention kept is an error, never a skip
/// to the first record held; what is held still reads.
fn positions_before_retention_are_errors(e: &dyn Engine) {
    let log = e.log();
    append(&log, 0, 120);
    let first = e.retain_from(Partition(1), 80);
    assert!(first > 0 && first <= 80, "retention kept from {first}");
    let before = read_until_error(&log, Partition(1), first - 1);
    assert!(
        matches!(
            before,
            LogError::OffsetOutOfRange { .. } | LogError::KafkaOutOfRange { .. }
        ),
        "before retention's start: {before}"
    );
    let mut source = log
        .source(Topic::Events, Partition(1), Offset(first))
        .unwrap();
    let got = read_n(source.as_mut(), (120 - first) as usize, None);
    assert_records(&got, Partition(1), first);
}

/// One #[test] per (engine, body); real-broker ones are ignored without a
/// broker. librdkafka's mock broker cannot delete records (no DeleteRecords),
/// so the retention body runs on the embedded log and a real broker only.
macro_rules! conformance {
    (all: [$($body:ident),*], retention: [$($ret:ident),*]) => {
        mod embedded {
            $(
                // Proves the body of the same name on the embedded log.
                #[test]
                fn $body() {
                    super::$body(&super::Embedded::new());
                }
            )*
            $(
                // Proves the body of the same name on the embedded log.
                #[test]
                fn $ret() {
                    super::$ret(&super::Embedded::new());
                }
            )*
        }
        mod mock_broker {
            $(
                // Proves the body of the same name on Kafka (librdkafka's mock broker).
                #[test]
                fn $body() {
                    super::$body(&super::Kafka::mock());
                }
            )*
        }
        mod real_broker {
            $(
                // Proves the body of the same name on a real Kafka-compatible broker.
                #[test]
                #[ignore = "needs a Kafka broker: FEEDLOG_TEST_KAFKA=host:port"]
                fn $body() {
                    super::$body(&super::Kafka::real());
                }
            )*
            $(
                // Proves the body of the same name on a real Kafka-compatible broker.
                #[test]
                #[ignore = "needs a Kafka broker: FEEDLOG_TEST_KAFKA=host:port"]
                fn $ret() {
                    super::$ret(&super::Kafka::real());
                }
            )*
        }
    };
}

conformance!(
    all: [
        records_read_back_in_append_order,
        sources_start_stop_and_tail,
        positions_past_the_end_are_errors
    ],
    retention: [positions_before_retention_are_errors]
);
