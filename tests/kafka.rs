//! Kafka mode against librdkafka's in-process broker (MockCluster): several
//! feedlog processors in one consumer group, members joining and leaving,
//! broker outages and duplicate deliveries — at quiescence every view equals
//! the oracle. With `FEEDLOG_TEST_KAFKA=host:port` the same bodies also run
//! against a real broker.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::kafka::{
    config, create_topics, feedlog_kafka, final_reader, max_user, produce, records_of, sum,
    wait_idle, Broker, Member,
};
use common::{check_all, generated_log, wait_until};
use feedlog::core::codec::{self, Format};
use feedlog::core::metrics::StepStats;
use feedlog::core::partition::partition_for;
use feedlog::core::position::Positions;
use feedlog::core::Partition;
use feedlog::log::kafka::PartitionState;
use feedlog::ops::status::status;
use feedlog::task::kafka::Cluster;
use feedlog::UserId;
use rdkafka::mocking::MockCluster;
use std::path::PathBuf;
use std::time::{Duration, Instant};

// Proves two, then three processors in one group (one added and one removed while events stream in) end with every view equal to the oracle, misrouted events forwarded, a new member rebuilding what it got from the log, the busiest authors pulled, readers asleep and woken.
#[test]
fn members_join_and_leave_mid_stream() {
    members_join_and_leave(&Broker::mock(4), 4);
}

// Proves the same as members_join_and_leave_mid_stream against a real Kafka-compatible broker (FEEDLOG_TEST_KAFKA), with topics made by `feedlog topics apply`.
#[test]
#[ignore = "needs a Kafka broker: FEEDLOG_TEST_KAFKA=host:port"]
fn real_broker_members_join_and_leave_mid_stream() {
    members_join_and_leave(&Broker::real(4), 4);
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
    wait_until("m2 to own a partition", Duration::from_secs(60), || {
        status(&kafka).is_ok_and(|s| {
            s.partitions
                .iter()
                .any(|p| p.owner.as_deref() == Some("m2"))
        })
    });
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
    // The test config's pull threshold pulls the busiest authors.
    let pulled = reader.stores().iter().any(|(_, store)| {
        feedlog::core::views::users(&store.snapshot()).any(|r| r.unwrap().1.pulled)
    });
    assert!(pulled, "some author is pulled");
    // And its inactivity span puts readers asleep; every woken one was
    // refilled.
    let (mut woke, mut waiting) = (0, 0);
    for (_, store) in reader.stores() {
        for r in feedlog::core::views::users(&store.snapshot()) {
            let u = r.unwrap().1;
            woke += u.wakes;
            waiting += u.refills;
        }
    }
    assert!(woke > 0, "some reader fell asleep and woke");
    assert_eq!(waiting, 0, "no reader still waits for a refill");
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
    let taken: Vec<Partition> = s
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
    use feedlog::ops::reset::{reset_group, GroupResetTo};
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
    let events_in = |s: &StepStats| s.events.total() + s.forwarded + s.dead_letters + s.duplicates;
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
    let preview = feedlog_kafka(&b, "gw", None, &["reset", "--to-start", "--dry-run"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&preview.stdout);
    assert!(
        preview.status.success() && said.contains("dry run") && said.contains("would refuse now"),
        "{said}{}",
        String::from_utf8_lossy(&preview.stderr)
    );
    m.stop();
    let at_first: Vec<Positions> = Partition::all(4)
        .map(|p| {
            feedlog::state::checkpoint::list_in(&checkpoints, p)
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
    for p in Partition::all(4) {
        let all = feedlog::state::checkpoint::list_in(&checkpoints, p);
        assert_eq!(all.len(), 2, "partition {p}: {all:?}");
        std::fs::remove_dir_all(&all[1].0).unwrap();
    }
    // The in-process broker refuses commits from outside any group it has
    // seen (real brokers accept them once the group is empty), so each reset
    // goes to a group it has not seen; the processor brings its data
    // directory from group gw.
    let to_checkpoints = GroupResetTo::Checkpoints(checkpoints.clone());
    let preview = reset_group(&cfg("gr1").kafka, &to_checkpoints, false).unwrap();
    let r = reset_group(&cfg("gr1").kafka, &to_checkpoints, true).unwrap();
    let positions: Vec<Positions> = r.positions.iter().map(|(at, _)| *at).collect();
    assert_eq!(positions, at_first);
    assert!(r.executed && !preview.executed);
    let previewed: Vec<Positions> = preview.positions.iter().map(|(at, _)| *at).collect();
    assert_eq!(
        previewed, positions,
        "the preview showed the positions the reset committed"
    );
    let (s, st) = run_to_idle("gr1");
    assert_eq!(s.replayed, 0, "seeded at the group's positions: {s:?}");
    let after_checkpoint: u64 = st
        .partitions
        .iter()
        .zip(&at_first)
        .map(|(ps, at)| ps.events.end - at.events.0)
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
    for p in Partition::all(4) {
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
    let applied: u64 = t.events.total() + t.forwarded;
    assert!(
        applied > lines.len() as u64,
        "redelivery made some events arrive twice: {applied} applications of {} events",
        lines.len()
    );
    let reader = final_reader(&[&dirs[0], &dirs[1]], &s);
    if let Err(diff) = check_all(&reader, &oracle, max_user(&log), 7) {
        panic!("{diff}\nrecords: {}", records_of(&reader, diff.as_str()));
    }
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
    // Until the new member owns partitions and every partition serves again
    // (after at least one full pass).
    let start = Instant::now();
    loop {
        let moved = status(&kafka).is_ok_and(|s| {
            s.partitions
                .iter()
                .any(|p| p.owner.as_deref() == Some("m2"))
                && s.partitions
                    .iter()
                    .all(|p| p.state == Some(PartitionState::Serving))
        });
        for u in 1..=max_user {
            let (f, g, p) = oracle.counters(u);
            let want = serde_json::json!({"user": u, "followers": f, "followees": g, "posts": p, "reposts": oracle.reposts_counter(u), "likes": oracle.likes_counter(u)});
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
        if moved {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the handover to m2 never completed"
        );
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
    // A paged answer another processor gives keeps its Link header.
    let u = (1..=max_user)
        .find(|&u| oracle.timeline(u).len() >= 2)
        .expect("a timeline of two entries");
    let links: Vec<Option<String>> = [&c0, &c1, &c2]
        .iter()
        .map(|c| {
            let r = c.get(&format!("/v1/users/{u}/timeline?limit=1"));
            assert_eq!(r.status, 200);
            r.header("link").map(str::to_string)
        })
        .collect();
    assert!(
        links[0]
            .as_deref()
            .is_some_and(|l| l.contains(r#"rel="next""#)),
        "{links:?}"
    );
    assert!(links.iter().all(|l| *l == links[0]), "{links:?}");
    // A stream (the timeline's, the notifications') of a user another
    // processor serves is redirected there, its query kept.
    let owner_of_1 = status(&kafka).unwrap().partitions
        [partition_for(UserId(1), partitions as u32).index()]
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
    for stream in [
        "/v1/users/1/timeline/stream",
        "/v1/users/1/notifications/stream?limit=5",
    ] {
        let r = c.get(stream);
        assert_eq!(r.status, 307, "{stream}");
        assert!(r.header("location").unwrap().ends_with(stream), "{stream}");
    }
    m2.stop();
    m1.stop();
    m0.stop();
}

// Proves a partition store that does not decode stops a Kafka-mode processor (an error naming the partition and the bad value, answered "stop") instead of restarting its task for ever; a broker away is retried (broker_outage_and_duplicates).
#[test]
fn a_corrupt_store_stops_the_processor_for_an_operator() {
    let mock = MockCluster::new(1).unwrap();
    let brokers = mock.bootstrap_servers();
    create_topics(&mock, "", 2);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m0");
    produce(&brokers, "events", 2, &generated_log(20, 200));
    let mut member = Member::start(dir.clone(), config(&brokers, "gc", "", "m0"));
    wait_idle(
        &config(&brokers, "gc", "", "x").kafka,
        Duration::from_secs(60),
    );
    member.stop();
    let state = feedlog::state::datadir::DataDir::open(&dir)
        .unwrap()
        .state_dir(Partition(1));
    let store = feedlog::state::Store::open(
        &state,
        Partition(1),
        2,
        &feedlog::state::BlockCache::new(8 << 20),
        &feedlog::state::StoreOptions::default(),
    )
    .unwrap();
    store
        .commit(&Default::default(), |b| {
            b.put(feedlog::core::kv::Cf::Meta, b"pos/events", &[1, 2, 3])
        })
        .unwrap();
    drop(store);
    let cluster = Cluster::open(&dir, config(&brokers, "gc", "", "m0")).unwrap();
    let shutdown = feedlog::Shutdown::new();
    let stop_later = shutdown.clone();
    let guard = std::thread::spawn(move || {
        // Bounds the test: the processor must have stopped by itself.
        std::thread::sleep(Duration::from_secs(90));
        stop_later.request();
    });
    let started = Instant::now();
    let err = cluster
        .run(&shutdown, None)
        .expect_err("a corrupt store must stop the processor");
    assert!(
        started.elapsed() < Duration::from_secs(80),
        "it stopped only when asked to: {err}"
    );
    assert_eq!(err.disposition(), feedlog::core::Disposition::Stop, "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("partition 1: ") && text.contains("corrupt value"),
        "{text}"
    );
    drop(guard);
}

// Proves an owner cut off from the brokers stops answering reads for its partitions once its lease runs out (three quarters of the session timeout after the last commit the coordinator accepted), before the coordinator could give them to another member, and answers again once the brokers are back.
#[test]
fn an_owner_cut_off_from_the_brokers_stops_serving_within_its_lease() {
    let mock = MockCluster::new(1).unwrap();
    let brokers = mock.bootstrap_servers();
    create_topics(&mock, "", 2);
    let tmp = tempfile::tempdir().unwrap();
    produce(&brokers, "events", 2, &generated_log(20, 200));
    // A session of 12 s: the lease is 9 s, renewed every 3 s.
    let mut cfg = config(&brokers, "gl", "", "m0");
    cfg.session_timeout = Duration::from_secs(12);
    let (mut member, client) = Member::start_serving(tmp.path().join("m0"), cfg);
    wait_idle(
        &config(&brokers, "gl", "", "x").kafka,
        Duration::from_secs(60),
    );
    wait_until("the member serves", Duration::from_secs(30), || {
        client.get("/v1/users/1/counters").status == 200
    });
    mock.broker_down(1).unwrap();
    let cut = Instant::now();
    // The lease ends at most 9 s after the cut (it runs 9 s from the last
    // accepted commit, made every 3 s); librdkafka declares the session
    // lost only a session timeout (12 s) after its last heartbeat.
    std::thread::sleep(Duration::from_millis(9_600));
    let (during, at) = (client.get("/v1/users/1/counters").status, cut.elapsed());
    mock.broker_up(1).unwrap();
    assert_eq!(
        during, 503,
        "{at:?} into the cut, past the lease, it answered"
    );
    wait_until("the member serves again", Duration::from_secs(60), || {
        client.get("/v1/users/1/counters").status == 200
    });
    member.stop();
}
