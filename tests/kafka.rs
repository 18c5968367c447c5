//! Kafka mode against librdkafka's in-process broker (MockCluster): several
//! feedlog processors in one consumer group, members joining and leaving,
//! broker outages and duplicate deliveries — at quiescence every view equals
//! the oracle. With `FEEDLOG_TEST_KAFKA=host:port` the same bodies also run
//! against a real broker.

mod common;

use common::http::Client;
use common::oracle::Oracle;
use common::{check_all, generated_log};
use feedlog::cluster::{status, Cluster, ClusterConfig, Status};
use feedlog::codec::{self, Format};
use feedlog::handover;
use feedlog::http::ApiConfig;
use feedlog::log::kafka::{send_when_room, KafkaConfig, FORMAT_HEADER};
use feedlog::partition::partition_for;
use feedlog::processor::ProcessorConfig;
use feedlog::query::Reader;
use feedlog::state::{meta, Store};
use feedlog::task::StepStats;
use feedlog::{Event, UserId};
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A processor running on its own thread, with its own data directory.
struct Member {
    cancel: Arc<AtomicBool>,
    thread: Option<JoinHandle<StepStats>>,
}

impl Member {
    fn start(data: PathBuf, cfg: ClusterConfig) -> Member {
        let cancel = Arc::new(AtomicBool::new(false));
        let c = cancel.clone();
        let thread = std::thread::spawn(move || {
            let cluster = Cluster::open(&data, cfg).expect("open the processor");
            cluster.run(&c, false).expect("run the processor")
        });
        Member {
            cancel,
            thread: Some(thread),
        }
    }

    /// A member that also serves the read API on an ephemeral port (and
    /// announces it); returns the member and a client of its API.
    fn start_serving(data: PathBuf, mut cfg: ClusterConfig) -> (Member, Client) {
        let (rt, listener, addr) = common::http::ephemeral_listener();
        cfg.api = Some(format!("http://{addr}"));
        let cancel = Arc::new(AtomicBool::new(false));
        let c = cancel.clone();
        let thread = std::thread::spawn(move || {
            let cluster = Cluster::open(&data, cfg).expect("open the processor");
            let api = feedlog::http::cluster_api(
                &cluster,
                ApiConfig {
                    max_limit: 1000,
                    ..ApiConfig::default()
                },
            )
            .expect("the API");
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let server = std::thread::spawn(move || {
                rt.block_on(feedlog::http::serve(listener, api, async {
                    let _ = rx.await;
                }))
            });
            let stats = cluster.run(&c, false).expect("run the processor");
            let _ = tx.send(());
            let _ = server.join();
            stats
        });
        (
            Member {
                cancel,
                thread: Some(thread),
            },
            Client { addr },
        )
    }

    /// Leaves the group gracefully (finishes, commits, announces); what it did.
    fn stop(&mut self) -> StepStats {
        self.cancel.store(true, Ordering::SeqCst);
        match self.thread.take() {
            Some(t) => t.join().expect("processor thread"),
            None => StepStats::default(),
        }
    }
}

fn sum(stats: &[StepStats]) -> StepStats {
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

fn config(brokers: &str, group: &str, prefix: &str, member: &str) -> ClusterConfig {
    let mut kafka = KafkaConfig::new(brokers, group);
    kafka.topic_prefix = prefix.to_string();
    let mut cfg = ClusterConfig::new(kafka);
    cfg.member = member.to_string();
    cfg.session_timeout = Duration::from_secs(6);
    cfg.commit_interval = Duration::from_millis(200);
    cfg.processor = ProcessorConfig {
        inbox_cap: 4,
        fanout_chunk: 3,
        sync: false,
        cache_bytes: 8 << 20,
        ..ProcessorConfig::default()
    };
    cfg
}

/// Writes JSON-lines events as an independent client would: key = the
/// actor, partition chosen by librdkafka's Java-compatible murmur2
/// partitioner; JSON without a header, every third event as bincode with
/// the format header. Actors with id ≡ 5 (mod 7) are written to a partition
/// that does not own them (all of their events to the same one).
fn produce(brokers: &str, topic: &str, partitions: u32, lines: &str) -> Oracle {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("partitioner", "murmur2_random")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let mut oracle = Oracle::default();
    for (i, line) in lines.lines().enumerate() {
        let event = codec::decode_event(Format::Json.as_u8(), line.as_bytes()).ok();
        if let Some(e) = &event {
            oracle.apply(e);
        }
        let actor = event.map_or(UserId(1), |e| e.actor());
        let key = actor.to_string();
        let as_bincode = event.filter(|_| i % 3 == 0);
        let payload: Vec<u8> = match as_bincode {
            Some(e) => codec::event_to_bincode(&e),
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
            rec = rec.partition(((partition_for(actor, partitions) + 1) % partitions) as i32);
        }
        send_when_room(&producer, rec).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    oracle
}

/// Waits until the group has consumed both topics to their end.
fn wait_idle(kafka: &KafkaConfig, within: Duration) -> Status {
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
fn final_reader(members: &[&Path], status: &Status) -> Reader {
    let cache = rocksdb::Cache::new_lru_cache(8 << 20);
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
                    Store::open_read_only(&dir, p, n, &cache).ok()
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

fn create_topics(
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
struct Broker {
    brokers: String,
    prefix: String,
    _mock: Option<MockCluster<'static, rdkafka::producer::DefaultProducerContext>>,
}

impl Broker {
    fn mock(partitions: i32) -> Broker {
        let mock = MockCluster::new(1).unwrap();
        create_topics(&mock, "", partitions);
        Broker {
            brokers: mock.bootstrap_servers(),
            prefix: String::new(),
            _mock: Some(mock),
        }
    }

    /// The real broker, or None (with a message) when none is configured.
    fn real(partitions: u32) -> Option<Broker> {
        let Ok(brokers) = std::env::var("FEEDLOG_TEST_KAFKA") else {
            eprintln!("skipped: set FEEDLOG_TEST_KAFKA=host:port to run this test against a real broker (.ci/run does when tansu is installed)");
            return None;
        };
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
        Some(b)
    }

    fn topic(&self, t: &str) -> String {
        format!("{}{t}", self.prefix)
    }

    fn group(&self, g: &str) -> String {
        format!("{}{g}", self.prefix)
    }

    fn config(&self, group: &str, member: &str) -> ClusterConfig {
        config(&self.brokers, &self.group(group), &self.prefix, member)
    }
}

fn max_user(log: &str) -> u64 {
    log.lines()
        .filter_map(|l| codec::decode_event(Format::Json.as_u8(), l.as_bytes()).ok())
        .map(|e| match e {
            Event::Follow {
                follower, followee, ..
            }
            | Event::Unfollow {
                follower, followee, ..
            } => follower.0.max(followee.0),
            Event::Post { author, .. } | Event::DeletePost { author, .. } => author.0,
        })
        .max()
        .unwrap_or(1)
}

// Proves two, then three processors in one group (one added and one removed while events stream in) end with every view equal to the oracle, misrouted events forwarded, a new member rebuilding what it got from the log.
#[test]
fn members_join_and_leave_mid_stream() {
    members_join_and_leave(&Broker::mock(4), 4);
}

// Proves the same as members_join_and_leave_mid_stream against a real Kafka-compatible broker (FEEDLOG_TEST_KAFKA), with topics made by `feedlog topics apply`.
#[test]
fn real_broker_members_join_and_leave_mid_stream() {
    if let Some(b) = Broker::real(4) {
        members_join_and_leave(&b, 4);
    }
}

fn members_join_and_leave(b: &Broker, partitions: u32) {
    let brokers = &b.brokers;
    let events = b.topic("events");
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3).map(|i| tmp.path().join(format!("m{i}"))).collect();
    let log = generated_log(60, 2400);
    let lines: Vec<&str> = log.lines().collect();
    let thirds: Vec<String> = lines
        .chunks(lines.len().div_ceil(3))
        .map(|c| c.join("\n"))
        .collect();
    let cfg = |i: usize| b.config("g", &format!("m{i}"));
    let kafka = cfg(9).kafka;
    let mut m0 = Member::start(dirs[0].clone(), cfg(0));
    let mut m1 = Member::start(dirs[1].clone(), cfg(1));
    produce(brokers, &events, partitions, &thirds[0]);
    wait_idle(&kafka, Duration::from_secs(120));
    // A member with an empty directory joins while events stream in: what
    // it is given, it rebuilds from the log (quietly below the group's
    // positions) before answering anything.
    let mut m2 = Member::start(dirs[2].clone(), cfg(2));
    produce(brokers, &events, partitions, &thirds[1]);
    std::thread::sleep(Duration::from_secs(4));
    produce(brokers, &events, partitions, &thirds[2]);
    let s0 = m0.stop();
    let s = wait_idle(&kafka, Duration::from_secs(120));
    assert!(
        s.partitions
            .iter()
            .all(|p| p.owner.as_deref() != Some("m0")),
        "a member that left owns nothing: {s:?}"
    );
    let (s1, s2) = (m1.stop(), m2.stop());
    assert!(
        s2.replayed > 0,
        "the new member rebuilt from the log: {s2:?}"
    );
    let t = sum(&[s0, s1, s2]);
    assert!(t.forwarded > 0, "misrouted events were forwarded: {t:?}");
    let (oracle, max_user) = common::oracle_of(&log);
    let reader = final_reader(&[&dirs[0], &dirs[1], &dirs[2]], &s);
    check_all(&reader, &oracle, max_user, 7).unwrap();
}

// Proves Kafka handover through checkpoints: a member that joins with an empty directory seeds the partitions it is given from the checkpoints their previous owner wrote when it gave them up, replays none of what the group had processed, and every view equals the oracle.
#[test]
fn handover_seeds_from_checkpoints() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("feedlog=info")
        .with_test_writer()
        .try_init();
    let b = Broker::mock(4);
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("m{i}"))).collect();
    let checkpoints = tmp.path().join("checkpoints");
    let cfg = |i: usize| {
        let mut c = b.config("gc", &format!("m{i}"));
        c.checkpoints = Some(checkpoints.clone());
        c
    };
    let kafka = cfg(9).kafka;
    let log = generated_log(60, 3000);
    let lines: Vec<&str> = log.lines().collect();
    let (first, second) = lines.split_at(lines.len() / 2);
    let mut m0 = Member::start(dirs[0].clone(), cfg(0));
    produce(&b.brokers, &b.topic("events"), 4, &first.join("\n"));
    wait_idle(&kafka, Duration::from_secs(120));
    let mut m1 = Member::start(dirs[1].clone(), cfg(1));
    let start = Instant::now();
    while !status(&kafka)
        .map(|s| {
            s.partitions
                .iter()
                .any(|p| p.owner.as_deref() == Some("m1"))
        })
        .unwrap_or(false)
    {
        assert!(start.elapsed() < Duration::from_secs(60), "m1 got nothing");
        std::thread::sleep(Duration::from_millis(100));
    }
    produce(&b.brokers, &b.topic("events"), 4, &second.join("\n"));
    let s = wait_idle(&kafka, Duration::from_secs(120));
    let taken: Vec<u32> = s
        .partitions
        .iter()
        .filter(|p| p.owner.as_deref() == Some("m1"))
        .map(|p| p.partition)
        .collect();
    let (_, s1) = (m0.stop(), m1.stop());
    assert_eq!(
        s1.replayed, 0,
        "the new member replayed nothing the group had processed: {s1:?}"
    );
    for p in &taken {
        let dir = checkpoints.join(format!("p{p:05}"));
        assert!(
            std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()),
            "partition {p} was handed over through a checkpoint in {}",
            dir.display()
        );
    }
    // Partitions m1 owns at the end are read from m1's stores: m0's copies
    // stopped at the handover.
    let (oracle, max_user) = common::oracle_of(&log);
    let reader = final_reader(&[&dirs[0], &dirs[1]], &s);
    check_all(&reader, &oracle, max_user, 7).unwrap();
}

// Proves a group reset (`reset --kafka` through the binary, and the library call): refused while a processor of the group runs; a group reset to the checkpoints (the newest discarded) makes the processor drop its stores, seed them from the older checkpoints and process only the log after them; a group reset to the start makes it process the whole log again and emit its outputs again; after each, every view equals the oracle.
#[test]
fn group_reset_to_checkpoints_and_to_start() {
    use feedlog::cluster::{reset_group, GroupResetTo};
    let b = Broker::mock(4);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m0");
    let checkpoints = tmp.path().join("checkpoints");
    let cfg = |group: &str| {
        let mut c = b.config(group, "m0");
        c.checkpoints = Some(checkpoints.clone());
        c
    };
    let log = generated_log(60, 3000);
    let lines: Vec<&str> = log.lines().collect();
    let (first, second) = lines.split_at(lines.len() / 2);
    let (oracle, max_user) = common::oracle_of(&log);
    // Records read from `events` (forwarded copies included: they are
    // written there too).
    let events_in =
        |s: &StepStats| s.events.iter().sum::<u64>() + s.forwarded + s.dead_letters + s.duplicates;
    let run_to_idle = |group: &str| {
        let mut m = Member::start(dir.clone(), cfg(group));
        let s = wait_idle(&cfg(group).kafka, Duration::from_secs(120));
        (m.stop(), s)
    };

    let mut m = Member::start(dir.clone(), cfg("gw"));
    produce(&b.brokers, &b.topic("events"), 4, &first.join("\n"));
    wait_idle(&cfg("gw").kafka, Duration::from_secs(120));
    let refused = feedlog_kafka(&b, "gw", None, &["reset", "--to-start"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("stop every processor"),
        "{err}"
    );
    m.stop();
    let at_first: Vec<(u64, u64)> = (0..4)
        .map(|p| {
            handover::list_in(&checkpoints, p)
                .last()
                .unwrap()
                .1
                .positions
        })
        .collect();
    produce(&b.brokers, &b.topic("events"), 4, &second.join("\n"));
    run_to_idle("gw");
    // Discard the newest checkpoint of every partition: the reset goes back
    // to the ones taken after the first half.
    for p in 0..4 {
        let all = handover::list_in(&checkpoints, p);
        assert_eq!(all.len(), 2, "partition {p}: {all:?}");
        std::fs::remove_dir_all(&all[1].0).unwrap();
    }
    // The in-process broker refuses commits from outside any group it has
    // seen (real brokers accept them once the group is empty), so each reset
    // goes to a group it has not seen; the processor brings its data
    // directory from group gw.
    let to_checkpoints = GroupResetTo::Checkpoints(checkpoints.clone());
    let r = reset_group(&cfg("gr1").kafka, &to_checkpoints).unwrap();
    let positions: Vec<(u64, u64)> = r.positions.iter().map(|(at, _)| *at).collect();
    assert_eq!(positions, at_first);
    let (s, st) = run_to_idle("gr1");
    assert_eq!(s.replayed, 0, "seeded at the group's positions: {s:?}");
    let after_checkpoint: u64 = st
        .partitions
        .iter()
        .zip(&at_first)
        .map(|(ps, at)| ps.events.end - at.0)
        .sum();
    assert_eq!(
        events_in(&s),
        after_checkpoint,
        "only the events after the checkpoints were processed again: {s:?}"
    );
    check_all(&final_reader(&[&dir], &st), &oracle, max_user, 7).unwrap();

    let out = feedlog_kafka(&b, "gr2", None, &["reset", "--to-start"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for p in 0..4 {
        assert!(
            said.contains(&format!("partition {p}: events 0 effects 0\n")),
            "{said}"
        );
    }
    let (s, st) = run_to_idle("gr2");
    let whole: u64 = st.partitions.iter().map(|ps| ps.events.end).sum();
    assert_eq!(
        events_in(&s),
        whole,
        "the whole log was processed again: {s:?}"
    );
    assert!(s.emitted > 0, "outputs were emitted again: {s:?}");
    check_all(&final_reader(&[&dir], &st), &oracle, max_user, 7).unwrap();
}

// Proves processing survives a broker outage and duplicate deliveries (cooperative rebalancing, static membership): at quiescence every view equals the oracle.
#[test]
fn broker_outage_and_duplicates() {
    let mock = MockCluster::new(1).unwrap();
    let brokers = mock.bootstrap_servers();
    let partitions = 3;
    create_topics(&mock, "", partitions);
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("m{i}"))).collect();
    let cfg = |i: usize| {
        let mut c = config(&brokers, "g2", "", &format!("m{i}"));
        c.cooperative = true;
        c.instance_id = Some(format!("m{i}"));
        c.redeliver_every = 5;
        c
    };
    let mut a = Member::start(dirs[0].clone(), cfg(0));
    let mut b = Member::start(dirs[1].clone(), cfg(1));
    let log = generated_log(50, 4000);
    let lines: Vec<&str> = log.lines().collect();
    let (first, second) = lines.split_at(lines.len() * 3 / 4);
    let kafka = config(&brokers, "g2", "", "x").kafka;
    // Wait until the members own every partition, then take the broker away
    // between two parts of the stream.
    let start = Instant::now();
    while !status(&kafka)
        .map(|s| s.partitions.iter().all(|p| p.owner.is_some()))
        .unwrap_or(false)
    {
        assert!(start.elapsed() < Duration::from_secs(60), "no assignment");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut oracle = produce(&brokers, "events", partitions as u32, &first.join("\n"));
    // No wait between the produce and the outage, so the members usually
    // still have part of the first part to process; the second part arrives
    // after the outage either way.
    mock.broker_down(1).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    mock.broker_up(1).unwrap();
    produce(&brokers, "events", partitions as u32, &second.join("\n"));
    for l in second {
        if let Ok(e) = codec::decode_event(Format::Json.as_u8(), l.as_bytes()) {
            oracle.apply(&e);
        }
    }
    let s = wait_idle(&kafka, Duration::from_secs(180));
    let t = sum(&[a.stop(), b.stop()]);
    let applied: u64 = t.events.iter().sum::<u64>() + t.forwarded;
    assert!(
        applied > lines.len() as u64,
        "redelivery made some events arrive twice: {applied} applications of {} events",
        lines.len()
    );
    let reader = final_reader(&[&dirs[0], &dirs[1]], &s);
    check_all(&reader, &oracle, max_user(&log), 7).unwrap();
}

// Proves any processor's API answers every route for every user exactly as the oracle (its own partitions, forwarded, and timelines pulled across processors), and during a handover answers either 503 with Retry-After or the right view, never a wrong or empty one.
#[test]
fn any_processor_answers_for_any_user() {
    let mock = MockCluster::new(1).unwrap();
    let brokers = mock.bootstrap_servers();
    let partitions = 4;
    create_topics(&mock, "", partitions);
    let tmp = tempfile::tempdir().unwrap();
    let dir = |i: usize| tmp.path().join(format!("m{i}"));
    let cfg = |i: usize| config(&brokers, "g3", "", &format!("m{i}"));
    let (mut m0, c0) = Member::start_serving(dir(0), cfg(0));
    let (mut m1, c1) = Member::start_serving(dir(1), cfg(1));
    let log = generated_log(40, 1500);
    let oracle = produce(&brokers, "events", partitions as u32, &log);
    let kafka = cfg(9).kafka;
    wait_idle(&kafka, Duration::from_secs(120));
    let max_user = max_user(&log);
    // Ownership announcements reach the other member's view shortly.
    let start = Instant::now();
    while c0.get("/v1/users/1/counters").status != 200
        || c1.get("/v1/users/1/counters").status != 200
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "members never route"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for c in [&c0, &c1] {
        check_all(c, &oracle, max_user, 9).unwrap();
    }

    // A third member joins: partitions move. Every answer meanwhile is the
    // right view or a 503 with Retry-After.
    let (mut m2, c2) = Member::start_serving(dir(2), cfg(2));
    let (mut right, mut unavailable) = (0, 0);
    let until = Instant::now() + Duration::from_secs(12);
    while Instant::now() < until {
        for u in 1..=max_user {
            let (f, g, p) = oracle.counters(u);
            let want = serde_json::json!({"user": u, "followers": f, "followees": g, "posts": p});
            for c in [&c0, &c1, &c2] {
                let r = c.get(&format!("/v1/users/{u}/counters"));
                match r.status {
                    200 => {
                        assert_eq!(r.json().unwrap(), want, "counters of {u} during a handover");
                        right += 1;
                    }
                    503 => {
                        assert_eq!(r.header("retry-after"), Some("1"));
                        unavailable += 1;
                    }
                    s => panic!(
                        "status {s} for user {u}: {}",
                        String::from_utf8_lossy(&r.body)
                    ),
                }
            }
        }
    }
    eprintln!("during the handover: {right} right answers, {unavailable} 503s");
    assert!(right > 0);
    wait_idle(&kafka, Duration::from_secs(120));
    let start = Instant::now();
    while c2.get("/v1/users/1/counters").status != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the new member never routes"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Users of partitions that moved, through the new member: every view.
    check_all(&c2, &oracle, max_user, 9).unwrap();
    // A stream of a user another processor serves is redirected there.
    let owner_of_1 = status(&kafka).unwrap().partitions
        [partition_for(UserId(1), partitions as u32) as usize]
        .owner
        .clone()
        .unwrap();
    let (other, _) = [("m0", &c0), ("m1", &c1), ("m2", &c2)]
        .into_iter()
        .find(|(m, _)| *m != owner_of_1)
        .unwrap();
    let c = [("m0", &c0), ("m1", &c1), ("m2", &c2)]
        .into_iter()
        .find(|(m, _)| *m == other)
        .unwrap()
        .1;
    let r = c.get("/v1/users/1/timeline/stream");
    assert_eq!(r.status, 307);
    assert!(r
        .header("location")
        .unwrap()
        .ends_with("/v1/users/1/timeline/stream"));
    m2.stop();
    m1.stop();
    m0.stop();
}

/// `feedlog --kafka BROKERS --group G --topic-prefix P ARGS`, with the data directory.
fn feedlog_kafka(
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
fn run_process(
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
fn cli_status(b: &Broker, group: &str) -> serde_json::Value {
    let out = feedlog_kafka(b, group, None, &["status"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

// Proves the binary in Kafka mode: two `feedlog run --kafka` processes, one killed with SIGKILL mid-stream (events keep arriving while it is dead) and restarted on its data directory; `feedlog status` reports idle at the end and every view equals the oracle.
#[test]
fn sigkill_one_of_two_processes() {
    sigkill_one_of_two(&Broker::mock(4), 4);
}

// Proves the same as sigkill_one_of_two_processes against a real Kafka-compatible broker (FEEDLOG_TEST_KAFKA).
#[test]
fn real_broker_sigkill_one_of_two_processes() {
    if let Some(b) = Broker::real(4) {
        sigkill_one_of_two(&b, 4);
    }
}

fn sigkill_one_of_two(b: &Broker, partitions: u32) {
    let brokers = &b.brokers;
    let events = b.topic("events");
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("p{i}"))).collect();
    let spawn = |i: usize| {
        run_process(b, "gk", &dirs[i], &format!("p{i}"), &[])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut p0 = spawn(0);
    let mut p1 = spawn(1);
    let log = generated_log(60, 4000);
    let lines: Vec<&str> = log.lines().collect();
    // Three parts: the first while both run, the second while p0 is dead, the
    // third after its restart. The kill is mid-stream by construction: events
    // arrive after it, whatever the processing speed.
    let third = lines.len() / 3;
    let (first, rest) = lines.split_at(third);
    let (second, last) = rest.split_at(third);
    // Kill p0 once the group is processing.
    let start = Instant::now();
    while cli_status(b, "gk")["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["owner"].is_null())
    {
        assert!(start.elapsed() < Duration::from_secs(60), "no assignment");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut oracle = produce(brokers, &events, partitions, &first.join("\n"));
    std::thread::sleep(Duration::from_millis(100));
    p0.kill().unwrap(); // SIGKILL
    p0.wait().unwrap();
    produce(brokers, &events, partitions, &second.join("\n"));
    let mut p0 = spawn(0);
    produce(brokers, &events, partitions, &last.join("\n"));
    for l in second.iter().chain(last) {
        if let Ok(e) = codec::decode_event(Format::Json.as_u8(), l.as_bytes()) {
            oracle.apply(&e);
        }
    }
    let s = wait_idle(&b.config("gk", "x").kafka, Duration::from_secs(180));
    assert_eq!(cli_status(b, "gk")["idle"], true);
    for p in [&mut p0, &mut p1] {
        std::process::Command::new("kill")
            .args(["-TERM", &p.id().to_string()])
            .status()
            .unwrap();
        assert!(
            p.wait().unwrap().success(),
            "a processor stops cleanly on SIGTERM"
        );
    }
    let reader = final_reader(&[&dirs[0], &dirs[1]], &s);
    check_all(&reader, &oracle, max_user(&log), 7).unwrap();
}

// Proves a crashed processor's successor seeds from its periodic checkpoints: two `feedlog run --kafka --checkpoints DIR --checkpoint-every 1` processes, one killed with SIGKILL once the group is idle; the survivor takes its partitions over, replays none of what the group had processed (its summary says 0 replayed), and every view equals the oracle.
#[test]
fn crashed_owner_succeeded_from_periodic_checkpoints() {
    let b = Broker::mock(4);
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("p{i}"))).collect();
    let checkpoints = tmp.path().join("checkpoints");
    let spawn = |i: usize| {
        let cps = checkpoints.to_str().unwrap();
        let args = ["--checkpoints", cps, "--checkpoint-every", "1"];
        run_process(&b, "gp", &dirs[i], &format!("p{i}"), &args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut p0 = spawn(0);
    let p1 = spawn(1);
    let kafka = b.config("gp", "x").kafka;
    let log = generated_log(60, 3000);
    let lines: Vec<&str> = log.lines().collect();
    let (first, second) = lines.split_at(lines.len() * 2 / 3);
    let start = Instant::now();
    while cli_status(&b, "gp")["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["owner"] != "p0" && p["owner"] != "p1")
    {
        assert!(start.elapsed() < Duration::from_secs(60), "no assignment");
        std::thread::sleep(Duration::from_millis(200));
    }
    produce(&b.brokers, &b.topic("events"), 4, &first.join("\n"));
    wait_idle(&kafka, Duration::from_secs(120));
    // Idle, and a checkpoint period (plus a commit) later: p0's newest
    // checkpoints are at the positions the group committed.
    std::thread::sleep(Duration::from_millis(2500));
    p0.kill().unwrap(); // SIGKILL
    p0.wait().unwrap();
    produce(&b.brokers, &b.topic("events"), 4, &second.join("\n"));
    let start = Instant::now();
    let s = loop {
        let s = wait_idle(&kafka, Duration::from_secs(120));
        if s.partitions
            .iter()
            .all(|p| p.owner.as_deref() == Some("p1"))
        {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "p1 did not take every partition: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    std::process::Command::new("kill")
        .args(["-TERM", &p1.id().to_string()])
        .status()
        .unwrap();
    let out = p1.wait_with_output().unwrap();
    assert!(out.status.success(), "p1 stops cleanly on SIGTERM");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains(" 0 replayed after handovers"),
        "the survivor replayed nothing the group had processed: {summary}"
    );
    let (oracle, max_user) = common::oracle_of(&log);
    let reader = final_reader(&[&dirs[0], &dirs[1]], &s);
    check_all(&reader, &oracle, max_user, 7).unwrap();
}

/// Writes `lines` to `events` with kcat, each keyed by its actor; with
/// `partitioner` None, kcat's own default (CRC32 of the key, not the Java
/// client's murmur2), so most events land in a partition that does not own
/// their actor.
fn kcat_produce(b: &Broker, lines: &[&str], partitioner: Option<&str>) {
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

// Proves JSON events written by an independent client (kcat: no format header; half with the Java partitioner, half with kcat's CRC32 one, so misrouted) are processed like feedlog's own: every view equals the oracle.
#[test]
fn kcat_json_events_are_processed_like_feedlogs_own() {
    if std::process::Command::new("kcat")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("skipped: kcat is not installed (`./scripts/setup.sh --tests` installs it with apt-get)");
        return;
    }
    let b = Broker::mock(4);
    let tmp = tempfile::tempdir().unwrap();
    let log = generated_log(40, 1500);
    let lines: Vec<&str> = log.lines().collect();
    let (first, second) = lines.split_at(lines.len() / 2);
    let mut m = Member::start(tmp.path().to_path_buf(), b.config("gc", "c0"));
    kcat_produce(&b, first, Some("murmur2_random"));
    kcat_produce(&b, second, None);
    let s = wait_idle(&b.config("gc", "x").kafka, Duration::from_secs(120));
    let stats = m.stop();
    assert!(
        stats.forwarded > 0,
        "kcat's partitioner misrouted some events: {stats:?}"
    );
    assert_eq!(
        stats.dead_letters, 0,
        "every line was a valid event: {stats:?}"
    );
    let (oracle, max_user) = common::oracle_of(&log);
    let reader = final_reader(&[tmp.path()], &s);
    check_all(&reader, &oracle, max_user, 7).unwrap();
}
