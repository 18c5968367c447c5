//! The Kafka harness: processors on threads, the broker (mock or real), an
//! independent producer, and waits on the group's observable state.

use super::http::Client;
use super::oracle::Oracle;
use feedlog::api::http::ApiConfig;
use feedlog::api::query::Reader;
use feedlog::core::codec::{self, Format};
use feedlog::core::metrics::StepStats;
use feedlog::core::partition::partition_for;
use feedlog::log::kafka::{send_when_room, KafkaConfig, FORMAT_HEADER};
use feedlog::ops::status::{status, Status};
use feedlog::state::{meta, Store};
use feedlog::task::embedded::ProcessorConfig;
use feedlog::task::kafka::{Cluster, ClusterConfig};
use feedlog::task::Shutdown;
use feedlog::UserId;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A processor running on its own thread, with its own data directory.
pub struct Member {
    pub shutdown: Shutdown,
    pub thread: Option<JoinHandle<StepStats>>,
}

impl Member {
    pub fn start(data: PathBuf, cfg: ClusterConfig) -> Member {
        let shutdown = Shutdown::new();
        let c = shutdown.clone();
        let thread = std::thread::spawn(move || {
            let cluster = Cluster::open(&data, cfg).expect("open the processor");
            cluster.run(&c, None).expect("run the processor")
        });
        Member {
            shutdown,
            thread: Some(thread),
        }
    }

    /// A member that also serves the read API on an ephemeral port (and
    /// announces it); returns the member and a client of its API.
    pub fn start_serving(data: PathBuf, mut cfg: ClusterConfig) -> (Member, Client) {
        let (rt, listener, addr) = super::http::ephemeral_listener();
        cfg.api = Some(format!("http://{addr}"));
        let shutdown = Shutdown::new();
        let c = shutdown.clone();
        let thread = std::thread::spawn(move || {
            let cluster = Cluster::open(&data, cfg).expect("open the processor");
            let api = feedlog::ops::serve::cluster_api(
                &cluster,
                ApiConfig {
                    max_limit: 1000,
                    ..ApiConfig::default()
                },
            )
            .expect("the API");
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let server = std::thread::spawn(move || {
                rt.block_on(feedlog::api::http::serve(listener, api, async {
                    let _ = rx.await;
                }))
            });
            let stats = cluster.run(&c, None).expect("run the processor");
            let _ = tx.send(());
            let _ = server.join();
            stats
        });
        (
            Member {
                shutdown,
                thread: Some(thread),
            },
            Client { addr },
        )
    }

    /// Leaves the group gracefully (finishes, commits, announces); what it did.
    pub fn stop(&mut self) -> StepStats {
        self.shutdown.request();
        match self.thread.take() {
            Some(t) => t.join().expect("processor thread"),
            None => StepStats::default(),
        }
    }
}

pub fn sum(stats: &[StepStats]) -> StepStats {
    let mut t = StepStats::default();
    for s in stats {
        t.add(s);
    }
    t
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn config(brokers: &str, group: &str, prefix: &str, member: &str) -> ClusterConfig {
    let mut kafka = KafkaConfig::new(brokers, group);
    kafka.topic_prefix = prefix.to_string();
    let mut cfg = ClusterConfig::new(kafka);
    cfg.member = member.to_string();
    cfg.session_timeout = Duration::from_secs(6);
    cfg.commit_interval = Duration::from_millis(200);
    cfg.processor = ProcessorConfig {
        inbox_cap: 4,
        fanout_chunk: 3,
        // Low enough that the generated networks' busiest authors are
        // pulled, and pushed again as followers leave, in every Kafka test.
        pull_threshold: Some(6),
        // The generated logs advance 7 ms per event: readers fall asleep
        // and wake constantly.
        inactive_after: Some(500),
        sync: false,
        cache_bytes: 8 << 20,
        kept: feedlog::state::Kept::DEFAULT,
        ..ProcessorConfig::default()
    };
    cfg
}

/// Writes JSON-lines events as an independent client would: key = the
/// actor, partition chosen by librdkafka's Java-compatible murmur2
/// partitioner; JSON without a header, every third event as bincode with
/// the format header. Actors with id ≡ 5 (mod 7) are written to a partition
/// that does not own them (all of their events to the same one).
pub fn produce(brokers: &str, topic: &str, partitions: u32, lines: &str) -> Oracle {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("partitioner", "murmur2_random")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let mut oracle = Oracle::with_partitions(partitions);
    // Misrouted events are forwarded (and invalid lines kept): the log's
    // offsets are not the ones the oracle counts.
    oracle.positions_unknown = true;
    for (i, line) in lines.lines().enumerate() {
        let event = codec::decode_event(Format::Json.as_u8(), line.as_bytes()).ok();
        if let Some(e) = &event {
            oracle.apply(e);
        }
        let actor = event.as_ref().map_or(UserId(1), |e| e.actor());
        let key = actor.to_string();
        let as_bincode = event.filter(|_| i % 3 == 0);
        let payload: Vec<u8> = match &as_bincode {
            Some(e) => codec::event_to_bincode(e),
            None => line.as_bytes().to_vec(),
        };
        let mut rec = BaseRecord::to(topic).key(&key).payload(&payload);
        if as_bincode.is_some() {
            rec = rec.headers(OwnedHeaders::new().insert(Header {
                key: FORMAT_HEADER,
                value: Some("bincode"),
            }));
        }
        if actor.0 % 7 == 5 && partitions > 1 {
            rec = rec.partition(((partition_for(actor, partitions).0 + 1) % partitions) as i32);
        }
        send_when_room(&producer, rec).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    oracle
}

/// Waits until the group has consumed both topics to their end.
pub fn wait_idle(kafka: &KafkaConfig, within: Duration) -> Status {
    let start = Instant::now();
    let mut seen = 0;
    loop {
        match status(kafka) {
            Ok(s) if s.idle => {
                seen += 1;
                if seen == 3 {
                    return s;
                }
            }
            Ok(s) => {
                seen = 0;
                assert!(
                    start.elapsed() < within,
                    "not idle after {within:?}: {}",
                    serde_json::to_string(&s).unwrap()
                );
            }
            Err(e) => assert!(start.elapsed() < within, "status: {e}"),
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The views, from whichever member's store of each partition has applied
/// everything the log holds.
pub fn final_reader(members: &[&Path], status: &Status) -> Reader {
    let cache = feedlog::state::BlockCache::new(8 << 20);
    let n = status.partitions.len() as u32;
    let stores = status
        .partitions
        .iter()
        .map(|ps| {
            let p = ps.partition;
            let stores: Vec<Store> = members
                .iter()
                .filter_map(|d| {
                    let dir = d.join("state").join(format!("{p:05}"));
                    Store::open_read_only(&dir, p, n, &cache, feedlog::state::Kept::NONE).ok()
                })
                .collect();
            let at = |s: &Store| {
                (
                    s.meta_u64(meta::POS_EVENTS).unwrap(),
                    s.meta_u64(meta::POS_EFFECTS).unwrap(),
                )
            };
            let seen: Vec<_> = stores.iter().map(at).collect();
            stores
                .into_iter()
                .find(|s| at(s) == (ps.events.end, ps.effects.end))
                .map(Arc::new)
                .unwrap_or_else(|| {
                    panic!("no member holds partition {p} at the end of the log: {ps:?}; stores at {seen:?}")
                })
        })
        .collect();
    Reader::new(stores)
}

pub fn create_topics(
    mock: &MockCluster<'_, rdkafka::producer::DefaultProducerContext>,
    prefix: &str,
    partitions: i32,
) {
    for (t, n) in [
        ("events", partitions),
        ("effects", partitions),
        ("dead-letter", 1),
        ("members", 1),
    ] {
        mock.create_topic(&format!("{prefix}{t}"), n, 1).unwrap();
    }
}

/// The broker a test runs against: librdkafka's in-process mock, or the
/// real broker named by `FEEDLOG_TEST_KAFKA` (topics and group under a
/// fresh prefix, created with `feedlog topics apply`).
pub struct Broker {
    pub brokers: String,
    pub prefix: String,
    _mock: Option<MockCluster<'static, rdkafka::producer::DefaultProducerContext>>,
}

impl Broker {
    pub fn mock(partitions: i32) -> Broker {
        let mock = MockCluster::new(1).unwrap();
        create_topics(&mock, "", partitions);
        Broker {
            brokers: mock.bootstrap_servers(),
            prefix: String::new(),
            _mock: Some(mock),
        }
    }

    /// Takes the mock broker down (every connection refused) or back up.
    pub fn set_down(&self, down: bool) {
        let mock = self
            ._mock
            .as_ref()
            .expect("only the mock broker goes down on request");
        match down {
            true => mock.broker_down(1).unwrap(),
            false => mock.broker_up(1).unwrap(),
        }
    }

    /// The real broker named by `FEEDLOG_TEST_KAFKA`; tests that use it are
    /// `#[ignore]`d and fail here, loudly, when run without one.
    pub fn real(partitions: u32) -> Broker {
        let brokers = std::env::var("FEEDLOG_TEST_KAFKA").expect(
            "this test needs a Kafka broker: set FEEDLOG_TEST_KAFKA=host:port (.ci/run starts tansu when it is installed)",
        );
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let b = Broker {
            brokers,
            prefix: format!("t{}-{nanos}-", std::process::id()),
            _mock: None,
        };
        // `topics apply` creates every topic, then finds them as specified.
        let apply = || {
            feedlog_kafka(
                &b,
                "-",
                None,
                &["topics", "apply", "--partitions", &partitions.to_string()],
            )
            .output()
            .unwrap()
        };
        let first = apply();
        let out = String::from_utf8_lossy(&first.stdout);
        assert!(
            first.status.success(),
            "{out}{}",
            String::from_utf8_lossy(&first.stderr)
        );
        assert_eq!(out.matches(": created").count(), 4, "{out}");
        let again = apply();
        let out = String::from_utf8_lossy(&again.stdout);
        assert!(again.status.success(), "{out}");
        assert_eq!(out.matches(": ok").count(), 4, "{out}");
        b
    }

    pub fn topic(&self, t: &str) -> String {
        format!("{}{t}", self.prefix)
    }

    /// Creates generation `g`'s own topics (docs/kafka.md, "Generations"):
    /// on the mock directly (it has no admin API), on a real broker with
    /// `feedlog --generation G topics apply`.
    pub fn add_generation(&self, g: u32, partitions: u32) {
        match &self._mock {
            Some(mock) => {
                for (t, n) in [("effects", partitions), ("dead-letter", 1), ("members", 1)] {
                    let name = format!("{}g{g}.{t}", self.prefix);
                    mock.create_topic(&name, n as i32, 1).unwrap();
                }
            }
            None => {
                let g = g.to_string();
                let out = feedlog_kafka(self, "-", None, &["--generation", &g, "topics", "apply"])
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(out.status.success(), "{text}");
                assert_eq!(text.matches(": created").count(), 3, "{text}");
            }
        }
    }

    /// Whether this is librdkafka's in-process mock broker.
    pub fn is_mock(&self) -> bool {
        self._mock.is_some()
    }

    pub fn group(&self, g: &str) -> String {
        format!("{}{g}", self.prefix)
    }

    pub fn config(&self, group: &str, member: &str) -> ClusterConfig {
        config(&self.brokers, &self.group(group), &self.prefix, member)
    }
}

pub fn max_user(log: &str) -> u64 {
    super::oracle_of(log).1.max(1)
}

/// `feedlog --kafka BROKERS --group G --topic-prefix P ARGS`, with the data directory.
pub fn feedlog_kafka(
    b: &Broker,
    group: &str,
    data: Option<&Path>,
    args: &[&str],
) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_feedlog"));
    if let Some(d) = data {
        c.arg("--data").arg(d);
    }
    c.args([
        "--kafka",
        &b.brokers,
        "--group",
        &b.group(group),
        "--topic-prefix",
        &b.prefix,
    ]);
    c.args(args);
    c
}

/// `feedlog run --kafka` as a processor named `member` on `dir` (no fsync,
/// 6 s session timeout, logs discarded), with `extra` flags.
pub fn run_process(
    b: &Broker,
    group: &str,
    dir: &Path,
    member: &str,
    extra: &[&str],
) -> std::process::Command {
    let mut args = vec![
        "run",
        "--no-sync",
        "--session-timeout-ms",
        "6000",
        "--member",
        member,
    ];
    args.extend_from_slice(extra);
    let mut c = feedlog_kafka(b, group, Some(dir), &args);
    c.stderr(std::process::Stdio::null());
    c
}

/// `feedlog status` through the binary, parsed.
pub fn cli_status(b: &Broker, group: &str) -> serde_json::Value {
    let out = feedlog_kafka(b, group, None, &["status"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The owners `feedlog status` (as [`cli_status`] parses it) names, one
/// per owned partition.
pub fn owners_in(status: &serde_json::Value) -> Vec<String> {
    status["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["owner"].as_str().map(str::to_string))
        .collect()
}

/// Writes `lines` to `events` with kcat, each keyed by its actor; with
/// `partitioner` None, kcat's own default (CRC32 of the key, not the Java
/// client's murmur2), so most events land in a partition that does not own
/// their actor.
pub fn kcat_produce(b: &Broker, lines: &[&str], partitioner: Option<&str>) {
    use std::io::Write;
    let mut c = std::process::Command::new("kcat");
    c.args(["-P", "-b", &b.brokers, "-t", &b.topic("events"), "-K", "|"]);
    if let Some(p) = partitioner {
        c.args(["-X", &format!("partitioner={p}")]);
    }
    let mut child = c.stdin(std::process::Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        let actor =
            codec::decode_event(Format::Json.as_u8(), line.as_bytes()).map_or(1, |e| e.actor().0);
        writeln!(stdin, "{actor}|{line}").unwrap();
    }
    drop(stdin);
    assert!(child.wait().unwrap().success(), "kcat failed");
}

/// The stored records of the user a check failure names (`timeline of U`,
/// ...), with their pulled followees: what a failure report needs.
pub fn records_of(reader: &Reader, diff: &str) -> String {
    let Some(user) = diff
        .split_whitespace()
        .skip_while(|w| *w != "of")
        .nth(1)
        .and_then(|u| u.trim_end_matches(':').parse::<u64>().ok())
    else {
        return "(no user named)".into();
    };
    let mut out = String::new();
    for (p, store) in reader.stores() {
        let snap = store.snapshot();
        let rec = feedlog::core::views::user(&snap, UserId(user)).unwrap();
        let pulls: Vec<UserId> = feedlog::core::views::pulls(&snap, UserId(user))
            .map(|r| r.unwrap())
            .collect();
        out += &format!("\npartition {p}: user {user} {rec:?}, pulled followees {pulls:?}");
    }
    out
}

/// A child process killed (SIGKILL) when dropped: a failed check never
/// leaves processors running.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl KillOnDrop {
    /// SIGTERM, and the process must exit 0.
    pub fn stop(&mut self) {
        let ok = std::process::Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -TERM");
        assert!(self.0.wait().unwrap().success(), "stops cleanly on SIGTERM");
    }
}

/// A loopback address nothing listens on now.
pub fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `feedlog run --kafka` of `generation` on `dir`, serving its API at `addr`.
pub fn processor(
    b: &Broker,
    generation: u32,
    dir: &Path,
    member: &str,
    addr: std::net::SocketAddr,
) -> KillOnDrop {
    let listen = addr.to_string();
    let g = generation.to_string();
    // The generation's checkpoint directory, shared by its processors.
    let cps = dir.parent().unwrap().join(format!("checkpoints-g{g}"));
    let cps = cps.to_str().unwrap();
    let args = ["--listen", &listen, "--checkpoints", cps];
    let mut c = run_process(b, "gg", dir, member, &args);
    c.arg("--generation").arg(&g);
    KillOnDrop(c.stdout(std::process::Stdio::null()).spawn().unwrap())
}

/// Runs `feedlog ARGS` for the deployment of group `gg`; its stdout.
pub fn feedlog_ok(b: &Broker, args: &[&str]) -> String {
    let out = feedlog_kafka(b, "gg", None, args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "feedlog {args:?}: {text}{err}");
    text
}

/// Whether broker `b` keeps the metadata of committed offsets (feedlog's
/// epochs travel there): a scratch group commits offset 0 of `events`[0]
/// with metadata and reads it back.
pub fn keeps_commit_metadata(b: &Broker) -> bool {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &b.brokers)
        .set("group.id", b.group("metadata-probe"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let topic = b.topic("events");
    let mut tpl = TopicPartitionList::new();
    let mut e = tpl.add_partition(&topic, 0);
    e.set_offset(Offset::Offset(0)).unwrap();
    e.set_metadata("probe");
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
    let back = consumer
        .committed_offsets(tpl, std::time::Duration::from_secs(30))
        .unwrap();
    back.elements().first().map(|e| e.metadata().to_string()) == Some("probe".into())
}
