//! Kafka mode through the binary: `feedlog run --kafka` processes killed
//! with SIGKILL and restarted, a successor seeded from periodic checkpoints,
//! a processor paused past its session timeout that comes back and ships
//! stale records (fenced), a standby that answers a killed owner's readers
//! and takes its partitions over, events written by an independent client
//! (kcat).
//! Every view equals the oracle at quiescence.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::kafka::{
    cli_status, final_reader, free_addr, kcat_produce, max_user, owners_in, produce, run_process,
    wait_idle, Broker, KillOnDrop, Member,
};
use common::{check_all, generated_log, wait_until};
use feedlog::api::http::routing::STANDBY;
use feedlog::core::codec::{self, Format};
use feedlog::ops::status::PartitionStatus;
use feedlog::state::checkpoint::list_in;
use std::path::PathBuf;
use std::time::{Duration, Instant};

// Proves the binary in Kafka mode: two `feedlog run --kafka` processes, one killed with SIGKILL mid-stream (events keep arriving while it is dead) and restarted on its data directory; `feedlog status` reports idle at the end and every view equals the oracle.
#[test]
fn sigkill_one_of_two_processes() {
    sigkill_one_of_two(&Broker::mock(4), 4);
}

// Proves the same as sigkill_one_of_two_processes against a real Kafka-compatible broker (FEEDLOG_TEST_KAFKA) whose coordinator expels a dead member after its session.
#[test]
#[ignore = "needs a Kafka broker: FEEDLOG_TEST_KAFKA=host:port"]
fn real_broker_expiry_sigkill_one_of_two_processes() {
    sigkill_one_of_two(&Broker::real(4), 4);
}

fn sigkill_one_of_two(b: &Broker, partitions: u32) {
    let brokers = &b.brokers;
    let events = b.topic("events");
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("p{i}"))).collect();
    let spawn = |i: usize| {
        KillOnDrop(
            run_process(b, "gk", &dirs[i], &format!("p{i}"), &[])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        )
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
    p0.0.kill().unwrap(); // SIGKILL
    p0.0.wait().unwrap();
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
        p.stop(); // SIGTERM, and it exits 0
    }
    let reader = final_reader(&[&dirs[0], &dirs[1]], &s);
    check_all(&reader, &oracle, max_user(&log), 7).unwrap();
}

// Proves the fence through the binary: of two `feedlog run --kafka` processes, one stops itself (SIGSTOP) right after a commit, before shipping it; while it stays stopped past its session timeout, events keep arriving and the other takes its partitions over and processes them; then it gets SIGCONT and ships its stale records, or purges them first when it notices the lost assignment first (a race either way correct). Every view equals the oracle, and every record the receivers fenced is listed in the dead-letter log as fenced.
#[test]
fn a_paused_owner_that_comes_back_is_fenced() {
    paused_owner_comes_back(&Broker::mock(4), 4);
}

// Proves the same as a_paused_owner_that_comes_back_is_fenced against a real Kafka-compatible broker (FEEDLOG_TEST_KAFKA) whose coordinator expels a dead member after its session.
#[test]
#[ignore = "needs a Kafka broker: FEEDLOG_TEST_KAFKA=host:port"]
fn real_broker_expiry_a_paused_owner_that_comes_back_is_fenced() {
    paused_owner_comes_back(&Broker::real(4), 4);
}

/// Whether process `pid` is stopped (state `T` in `/proc/PID/stat`).
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

fn paused_owner_comes_back(b: &Broker, partitions: u32) {
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("p{i}"))).collect();
    let spawn = |i: usize, stop_after: Option<&str>| {
        let mut c = run_process(b, "gz", &dirs[i], &format!("p{i}"), &[]);
        if std::env::var_os("FEEDLOG_TEST_LOGS").is_some() {
            let log = std::fs::File::create(format!("/tmp/gz-p{i}.log")).unwrap();
            c.stderr(log).env("RUST_LOG", "info");
        }
        if let Some(n) = stop_after {
            c.env("FEEDLOG_TEST_STOP_AFTER_COMMIT", n);
        }
        if std::env::var_os("FEEDLOG_TEST_LOGS").is_none() {
            c.stdout(std::process::Stdio::null());
        }
        KillOnDrop(c.spawn().unwrap())
    };
    let mut p1 = spawn(1, None);
    // p0 stops itself in its third step with records to ship, after the
    // commit and before shipping: within the first part (a step takes up to
    // 2,048 records of each input).
    let mut p0 = spawn(0, Some("3"));
    let log = generated_log(60, 3000);
    let lines: Vec<&str> = log.lines().collect();
    let third = lines.len() / 3;
    let (first, rest) = lines.split_at(third);
    let (second, last) = rest.split_at(third);
    let start = Instant::now();
    while cli_status(b, "gz")["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["owner"] != "p0" && p["owner"] != "p1")
        || !cli_status(b, "gz")["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["owner"] == "p0")
    {
        assert!(start.elapsed() < Duration::from_secs(60), "no assignment");
        std::thread::sleep(Duration::from_millis(200));
    }
    produce(
        &b.brokers,
        &b.topic("events"),
        partitions,
        &first.join("\n"),
    );
    wait_until("p0 stopped after a commit", Duration::from_secs(60), || {
        stopped(p0.0.id())
    });
    // While p0 is stopped, events keep coming and p1 takes everything over
    // once p0's session (6 s) expires.
    produce(
        &b.brokers,
        &b.topic("events"),
        partitions,
        &second.join("\n"),
    );
    let kafka = b.config("gz", "x").kafka;
    let start = Instant::now();
    loop {
        let s = wait_idle(&kafka, Duration::from_secs(120));
        if s.partitions
            .iter()
            .all(|p| p.owner.as_deref() == Some("p1"))
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "p1 did not take every partition: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // p0 comes back: its step ships what it committed before it stopped,
    // after the process has noticed it lost its partitions.
    signal(p0.0.id(), "-CONT");
    produce(&b.brokers, &b.topic("events"), partitions, &last.join("\n"));
    std::thread::sleep(Duration::from_secs(2));
    let s = wait_idle(&kafka, Duration::from_secs(180));
    for p in [&mut p0, &mut p1] {
        signal(p.0.id(), "-TERM");
        assert!(
            p.0.wait().unwrap().success(),
            "a processor stops cleanly on SIGTERM"
        );
    }
    let (oracle, max_user) = common::oracle_of(&log);
    let reader = final_reader(&[&dirs[0], &dirs[1]], &s);
    check_all(&reader, &oracle, max_user, 7).unwrap();
    // The partitions' state counts the records they fenced, per sender.
    let fences: Vec<_> = reader
        .stores()
        .iter()
        .map(|(p, store)| (*p, feedlog::core::fence::fences(&**store).unwrap()))
        .collect();
    let counted: u64 = fences
        .iter()
        .flat_map(|(_, f)| f.iter().map(|(_, v)| v.fenced))
        .sum();
    // Whether the resumed owner's late records reached the broker is a race
    // it may lose: it purges its queue once it notices the lost assignment,
    // which is as correct (the views above are exact either way). The fence
    // itself is proved deterministically by the contract's expired-owner
    // properties; here it is reported when this run did not exercise it.
    if counted == 0 {
        eprintln!(
            "note: the resumed owner purged its late records before delivering them; \
             nothing reached a receiver to fence this run: {fences:?}"
        );
    }
    // And the dead-letter log lists them.
    let out = common::kafka::feedlog_kafka(b, "gz", None, &["dead-letters", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fenced = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"fenced: "))
        .count();
    assert!(
        fenced as u64 >= counted,
        "{counted} fenced, {fenced} listed; dead letters:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
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
        KillOnDrop(
            run_process(&b, "gp", &dirs[i], &format!("p{i}"), &args)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        )
    };
    let mut p0 = spawn(0);
    let mut p1 = spawn(1);
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
    let s = wait_idle(&kafka, Duration::from_secs(120));
    // Once p0's newest checkpoint of each of its partitions is at the
    // positions the group committed, kill it.
    let checkpointed = |p: &PartitionStatus| {
        list_in(&checkpoints, p.partition).iter().any(|(_, c)| {
            c.positions.events.0 == p.events.committed
                && c.positions.effects.0 == p.effects.committed
        })
    };
    wait_until(
        "p0's checkpoints at the committed positions",
        Duration::from_secs(60),
        || {
            s.partitions
                .iter()
                .filter(|p| p.owner.as_deref() == Some("p0"))
                .all(checkpointed)
        },
    );
    p0.0.kill().unwrap(); // SIGKILL
    p0.0.wait().unwrap();
    produce(&b.brokers, &b.topic("events"), 4, &second.join("\n"));
    let s = survivor_replayed_nothing(&kafka, &mut p1);
    let (oracle, max_user) = common::oracle_of(&log);
    let reader = final_reader(&[&dirs[0], &dirs[1]], &s);
    check_all(&reader, &oracle, max_user, 7).unwrap();
}

// Proves a processor stopped (SIGTERM) while its broker is down, with records the broker never acknowledged and a renewal of its lease due, exits within a bounded time saying so, and loses nothing: restarted once the broker is back, it reaches idle and every view equals the oracle.
#[test]
fn stopped_while_its_broker_is_down() {
    let b = Broker::mock(4);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p0");
    let stderr_path = tmp.path().join("p0.stderr");
    let spawn = |pause: bool| {
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut c = run_process(&b, "gd", &dir, "p0", &[]);
        if pause {
            // The test hook: p0 stops itself (SIGSTOP) after its third
            // commit of a step, before shipping the step's records.
            c.env("FEEDLOG_TEST_STOP_AFTER_COMMIT", "3");
        }
        KillOnDrop(
            c.stdout(std::process::Stdio::null())
                .stderr(stderr)
                .spawn()
                .unwrap(),
        )
    };
    let kafka = b.config("gd", "x").kafka;
    let mut p0 = spawn(true);
    wait_until("p0 owns every partition", Duration::from_secs(60), || {
        owners_in(&cli_status(&b, "gd")).len() == 4
    });
    let log = generated_log(80, 16_000);
    let oracle = produce(&b.brokers, &b.topic("events"), 4, &log);
    let pid = p0.0.id();
    wait_until("p0 pauses mid-stream", Duration::from_secs(60), || {
        stopped(pid)
    });
    // Down while p0 holds records it has not shipped yet; stopped, then
    // let go, it ships them to a broker that never answers.
    b.set_down(true);
    // Stopped past a third of its lease's span (1.5 s of 4.5), p0's control
    // loop renews the lease on its first turn after SIGCONT, with the
    // coordinator away: that renewal must not hold the loop.
    std::thread::sleep(Duration::from_secs(2));
    let stop = Instant::now();
    signal(pid, "-TERM");
    signal(pid, "-CONT");
    let status = loop {
        if let Some(st) = p0.0.try_wait().unwrap() {
            break st;
        }
        if stop.elapsed() >= Duration::from_secs(90) {
            // What it said shows which step of the stop did not end.
            let said = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            panic!("p0 still running 90 s after SIGTERM with its broker down; it said:\n{said}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let said = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(
        status.success() && said.contains("not waiting any longer"),
        "p0 exited {status} after {:?}, saying: {said}",
        stop.elapsed()
    );
    b.set_down(false);
    let mut p0 = spawn(false);
    let s = wait_idle(&kafka, Duration::from_secs(180));
    p0.stop();
    let reader = final_reader(&[&dir], &s);
    check_all(&reader, &oracle, max_user(&log), 7).unwrap();
}

// Proves warm standbys through the binary: two `feedlog run --kafka --standbys 1` processes each keep a copy of the other's partitions, following the group's committed positions; at idle, the survivor's copies equal the oracle; right after a SIGKILL of one, before the group reassigns anything, the survivor answers the dead owner's readers from its copies (every view as the owner answered it, marked as a standby's); then it takes its partitions over from its copies, replays none of what the group had processed (no checkpoints: without the standbys it would replay them from the start), and every view equals the oracle.
#[test]
fn a_standby_takes_over_after_its_owner_is_killed() {
    standby_takes_over(Broker::mock(4));
}

// Proves the same as a_standby_takes_over_after_its_owner_is_killed against a real Kafka-compatible broker (FEEDLOG_TEST_KAFKA) whose coordinator expels a dead member after its session.
#[test]
#[ignore = "needs a Kafka broker: FEEDLOG_TEST_KAFKA=host:port"]
fn real_broker_expiry_a_standby_takes_over_after_its_owner_is_killed() {
    standby_takes_over(Broker::real(4));
}

/// The standby test on broker `b`.
fn standby_takes_over(b: Broker) {
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("p{i}"))).collect();
    let addrs: Vec<String> = (0..2).map(|_| free_addr().to_string()).collect();
    let spawn = |i: usize| {
        let args = ["--standbys", "1", "--listen", &addrs[i]];
        KillOnDrop(
            run_process(&b, "gs", &dirs[i], &format!("p{i}"), &args)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        )
    };
    let mut p0 = spawn(0);
    let mut p1 = spawn(1);
    let kafka = b.config("gs", "x").kafka;
    let log = generated_log(60, 3000);
    let lines: Vec<&str> = log.lines().collect();
    let (first, second) = lines.split_at(lines.len() * 2 / 3);
    wait_until(
        "both processors own partitions",
        Duration::from_secs(60),
        || {
            let owners = owners_in(&cli_status(&b, "gs"));
            let has = |m: &str| owners.iter().any(|o| o == m);
            owners.len() == 4 && has("p0") && has("p1")
        },
    );
    produce(&b.brokers, &b.topic("events"), 4, &first.join("\n"));
    let mut s = wait_idle(&kafka, Duration::from_secs(120));
    // Every partition has a standby on the other processor, at the
    // group's committed positions.
    wait_until(
        "every partition's standby at the committed positions",
        Duration::from_secs(60),
        || {
            s = wait_idle(&kafka, Duration::from_secs(60));
            s.partitions.iter().all(|p| {
                let other = if p.owner.as_deref() == Some("p0") {
                    "p1"
                } else {
                    "p0"
                };
                p.standbys.len() == 1 && p.standbys[0].member == other && p.standbys[0].behind == 0
            })
        },
    );
    let (first_oracle, max_user) = common::oracle_of(&first.join("\n"));
    let copies = final_reader(&[&dirs[1]], &s);
    check_all(&copies, &first_oracle, max_user, 7)
        .expect("p1's own stores and its standbys hold the views of the log so far");
    drop(copies);
    // Every user's views as read through p1 from their owners.
    let c1 = common::http::Client {
        addr: addrs[1].parse().unwrap(),
    };
    let views = |u: u64| {
        [
            format!("/v1/users/{u}/timeline?limit=50"),
            format!("/v1/users/{u}/counters"),
            format!("/v1/users/{u}/followers/recent"),
        ]
    };
    let read = |path: &str| {
        let r = c1.get(path);
        let body = String::from_utf8_lossy(&r.body).into_owned();
        assert_eq!(r.status, 200, "{path}: {body}");
        (body, r.header(STANDBY).map(str::to_string))
    };
    let before: Vec<(u64, String, String)> = (1..=max_user)
        .flat_map(|u| views(u).map(|path| (u, path)))
        .map(|(u, path)| {
            let (body, standby) = read(&path);
            assert_eq!(standby, None, "{path}: the owners answer while they run");
            (u, path, body)
        })
        .collect();
    let dead: Vec<u32> = (s.partitions.iter())
        .filter(|p| p.owner.as_deref() == Some("p0"))
        .map(|p| p.partition.0)
        .collect();
    p0.0.kill().unwrap(); // SIGKILL
    p0.0.wait().unwrap();
    // Long before the group gives p1 the dead owner's partitions (a
    // session and a rebalance), p1 answers them from its standbys: the
    // same views, saying so.
    let killed = Instant::now();
    for (u, path, want) in &before {
        let (body, standby) = read(path);
        assert_eq!(&body, want, "{path} from p1 after p0's kill");
        let p = feedlog::core::partition::partition_for(feedlog::core::event::UserId(*u), 4);
        if dead.contains(&p.0) {
            assert!(standby.is_some(), "{path}: answered by p1's standby");
        }
    }
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "the reads took {:?}: they may have outlived the session",
        killed.elapsed()
    );
    assert!(
        (cli_status(&b, "gs")["partitions"].as_array().unwrap())
            .iter()
            .any(|p| p["owner"].as_str() == Some("p0")),
        "p0 still owns partitions to the group: the standbys answered, not a takeover"
    );
    produce(&b.brokers, &b.topic("events"), 4, &second.join("\n"));
    let s = survivor_replayed_nothing(&kafka, &mut p1);
    let (oracle, max_user) = common::oracle_of(&log);
    let reader = final_reader(&[&dirs[0], &dirs[1]], &s);
    check_all(&reader, &oracle, max_user, 7).unwrap();
}

// Proves JSON events written by an independent client (kcat: no format header; half with the Java partitioner, half with kcat's CRC32 one, so misrouted) are processed like feedlog's own: every view equals the oracle.
#[test]
#[ignore = "needs kcat"]
fn kcat_json_events_are_processed_like_feedlogs_own() {
    let kcat = std::process::Command::new("kcat").arg("-V").output();
    assert!(
        kcat.is_ok(),
        "this test needs kcat (`./scripts/setup.sh --tests` installs it with apt-get)"
    );
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

/// Waits until the survivor `p1` owns every partition and the group is
/// idle, stops it, and checks its summary: it replayed nothing the group
/// had processed. The group's status at the end.
fn survivor_replayed_nothing(
    kafka: &feedlog::log::kafka::KafkaConfig,
    p1: &mut KillOnDrop,
) -> feedlog::ops::status::Status {
    let start = Instant::now();
    let s = loop {
        let s = wait_idle(kafka, Duration::from_secs(120));
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
    let mut stdout = p1.0.stdout.take().unwrap();
    let reading = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).map(|_| text)
    });
    p1.stop(); // SIGTERM, and it exits 0
    let summary = reading.join().unwrap().unwrap();
    assert!(
        summary.contains(" 0 replayed after handovers"),
        "the survivor replayed nothing the group had processed: {summary}"
    );
    s
}
