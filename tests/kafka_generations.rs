//! Kafka-mode generations through the binary (docs/kafka.md,
//! "Generations"): a new generation rebuilt from the `events` topic beside
//! the live group while events keep arriving and readers keep reading.
//! Every view of both generations equals the oracle at quiescence.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::kafka::{
    cli_status, feedlog_kafka, feedlog_ok, final_reader, free_addr, processor, produce, wait_idle,
    Broker, KillOnDrop,
};
use common::{check_all, generated_log, oracle_of};
use feedlog::core::kv::Kv;
use feedlog::core::{Generation, Partition};
use feedlog::state::checkpoint::list_in;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The generation rebuilt beside the deployment in these tests.
const G1: Generation = Generation(1);

// Proves `rebuild` in Kafka mode builds generation 1 beside the live group: the live processors answer every read meanwhile, events keep arriving, the rebuild shows per-partition progress and exits once caught up, its processors go on with `run --generation 1`, `verify` finds both generations identical at one cut while events keep arriving, `checkpoint` writes every partition's checkpoint at one cut, every view of both generations equals the oracle, `verify` names the partition and view of a post taken out of one generation's state, `swap` makes generation 0's processors answer from generation 1 with every read answered meanwhile, `swap --rollback` goes back, and `swap --confirm` stops generation 0's processors.
#[test]
fn a_generation_rebuilt_beside_the_live_group() {
    rebuilt_beside(&Broker::mock(4), 4);
}

// Proves the same as a_generation_rebuilt_beside_the_live_group against a real Kafka-compatible broker (FEEDLOG_TEST_KAFKA).
#[test]
#[ignore = "needs a Kafka broker: FEEDLOG_TEST_KAFKA=host:port"]
fn real_broker_a_generation_rebuilt_beside_the_live_group() {
    rebuilt_beside(&Broker::real(4), 4);
}

fn rebuilt_beside(b: &Broker, partitions: u32) {
    b.add_generation(1, partitions);
    let tmp = tempfile::tempdir().unwrap();
    let live_dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("p{i}"))).collect();
    let shadow_dir = tmp.path().join("g1");
    let addrs = [free_addr(), free_addr()];
    let mut live: Vec<KillOnDrop> = (0..2)
        .map(|i| processor(b, 0, &live_dirs[i], &format!("p{i}"), addrs[i]))
        .collect();
    let log = generated_log(60, 3000);
    let lines: Vec<&str> = log.lines().collect();
    let third = lines.len() / 3;
    let (first, rest) = lines.split_at(third);
    let (second, last) = rest.split_at(third);
    let events = b.topic("events");
    produce(&b.brokers, &events, partitions, &first.join("\n"));
    let kafka = b.config("gg", "x").kafka;
    wait_idle(&kafka, Duration::from_secs(120));
    let (_, max_user) = oracle_of(&log);
    let clients: Vec<common::http::Client> = addrs
        .iter()
        .map(|&addr| common::http::Client { addr })
        .collect();
    let start = Instant::now();
    while clients
        .iter()
        .any(|c| c.get("/v1/users/1/counters").status != 200)
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the live APIs never answer"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // The rebuild, while events arrive and readers read.
    let mut rebuild = KillOnDrop(
        feedlog_kafka(
            b,
            "gg",
            Some(&shadow_dir),
            &[
                "--generation",
                "1",
                "rebuild",
                "--until-caught-up",
                "--no-sync",
                "--progress",
                "1",
                "--session-timeout-ms",
                "6000",
                "--member",
                "r0",
            ],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let reading = AtomicBool::new(true);
    let (reads, refused) = (AtomicU64::new(0), AtomicU64::new(0));
    let (out, err) = std::thread::scope(|s| {
        s.spawn(|| {
            let mut user = 0;
            while reading.load(Ordering::SeqCst) {
                user = user % max_user + 1;
                let c = &clients[(user % 2) as usize];
                let r = c.get(&format!("/v1/users/{user}/timeline?limit=20"));
                reads.fetch_add(1, Ordering::SeqCst);
                if r.status != 200 {
                    refused.fetch_add(1, Ordering::SeqCst);
                    eprintln!(
                        "a live read answered {}: {}",
                        r.status,
                        String::from_utf8_lossy(&r.body)
                    );
                }
            }
        });
        let _stop = Stop(&reading);
        produce(&b.brokers, &events, partitions, &second.join("\n"));
        let deadline = Instant::now() + Duration::from_secs(240);
        let status = loop {
            if let Some(st) = rebuild.0.try_wait().unwrap() {
                break st;
            }
            assert!(Instant::now() < deadline, "the rebuild did not catch up");
            std::thread::sleep(Duration::from_millis(200));
        };
        reading.store(false, Ordering::SeqCst);
        let (mut out, mut err) = (String::new(), String::new());
        rebuild
            .0
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        rebuild
            .0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(status.success(), "rebuild failed: {err}");
        (out, err)
    });
    assert_eq!(
        refused.load(Ordering::SeqCst),
        0,
        "every live read is answered"
    );
    assert!(reads.load(Ordering::SeqCst) > 0);
    assert!(err.contains("caught up after"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains("generation 1: p0 ") && l.contains("p3 ")),
        "per-partition progress lines: {err}"
    );
    assert!(out.contains("generation 1 caught up"), "{out}");

    // Generation 1's processor goes on; `verify` compares both generations
    // at one cut while more events arrive.
    let mut shadow = processor(b, 1, &shadow_dir, "r0", free_addr());
    let brokers = b.brokers.clone();
    let verified = std::thread::scope(|s| {
        s.spawn(|| produce(&brokers, &events, partitions, &last.join("\n")));
        let args = [
            "--generation",
            "1",
            "verify",
            "--against",
            "0",
            "--timeout",
            "120",
        ];
        feedlog_kafka(b, "gg", None, &args).output().unwrap()
    });
    let (out, err) = (
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr),
    );
    assert!(verified.status.success(), "verify: {out}{err}");
    eprintln!(
        "verify: {}",
        err.lines()
            .filter(|l| l.contains("held"))
            .collect::<String>()
    );
    assert!(
        out.contains("identical: every view of every partition"),
        "{out}"
    );
    assert_eq!(
        out.matches("  partition ").count(),
        2 * partitions as usize,
        "{out}"
    );

    // A checkpoint of generation 0 at one cut: every partition's, at the
    // events offsets of the cut, in the group's checkpoint directory.
    let out = feedlog_ok(b, &["checkpoint"]);
    let cut_line = out
        .lines()
        .find(|l| l.starts_with("checkpointed generation 0 at one cut"));
    assert!(cut_line.is_some(), "{out}");
    let mut cut_events = Vec::new();
    for line in out.lines().filter(|l| l.starts_with("partition ")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (events, path) = (words[3], *words.last().unwrap());
        let json = std::fs::read_to_string(Path::new(path).join("checkpoint.json")).unwrap();
        let c: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(c["positions"][0].to_string(), events, "{path}: {json}");
        cut_events.push(events.to_string());
    }
    assert_eq!(cut_events.len(), partitions as usize, "{out}");
    let cut = format!("[{}]", cut_events.join(", "));
    assert!(cut_line.unwrap().contains(&cut), "{out}");
    // Both generations forward misrouted events into the one `events`
    // topic (each skips the copies it already applied): wait until neither
    // appends anything while the other settles.
    let shadow_kafka = kafka.generation(G1);
    let (live_status, shadow_status) = loop {
        let l = wait_idle(&kafka, Duration::from_secs(180));
        let s = wait_idle(&shadow_kafka, Duration::from_secs(180));
        if wait_idle(&kafka, Duration::from_secs(180)) == l {
            break (l, s);
        }
    };
    assert_eq!(cli_status(b, "gg")["idle"], true);
    for p in live.iter_mut().chain([&mut shadow]) {
        p.stop();
    }
    let (oracle, _) = oracle_of(&log);
    let dirs: Vec<&Path> = live_dirs.iter().map(PathBuf::as_path).collect();
    check_all(&final_reader(&dirs, &live_status), &oracle, max_user, 7).unwrap();
    let shadow_reader = final_reader(&[&shadow_dir], &shadow_status);
    check_all(&shadow_reader, &oracle, max_user, 7).unwrap();
    drop(shadow_reader);

    // A post taken out of generation 1's state behind its back: `verify`
    // names the partition and the view.
    let p0 = shadow_dir.join("state").join("00000");
    let author = {
        let opts = feedlog::state::StoreOptions::default();
        let cache = feedlog::state::BlockCache::new(8 << 20);
        let store = feedlog::state::Store::open(
            &p0,
            feedlog::core::Partition(0),
            partitions,
            &cache,
            &opts,
        )
        .unwrap();
        let cf = feedlog::core::kv::Cf::Outbox;
        let (key, _) = store.scan(cf, &[], None).next().unwrap().unwrap();
        let end: Vec<u8> = key.iter().copied().chain([0]).collect();
        store
            .commit(&Default::default(), |b| b.delete_range(cf, &key, &end))
            .unwrap();
        u64::from_be_bytes(key[..8].try_into().unwrap())
    };
    let mut again: Vec<KillOnDrop> = (0..2)
        .map(|i| processor(b, 0, &live_dirs[i], &format!("p{i}"), addrs[i]))
        .collect();
    again.push(processor(b, 1, &shadow_dir, "r0", free_addr()));
    let args = ["--generation", "1", "verify", "--timeout", "120"];
    let verified = feedlog_kafka(b, "gg", None, &args).output().unwrap();
    let out = String::from_utf8_lossy(&verified.stdout);
    assert_eq!(verified.status.code(), Some(1), "{out}");
    assert!(out.contains("DIFFERENT: partition 0, view posts"), "{out}");
    swap_rollback_confirm(b, &clients, author, &mut again);
}

/// The answer of `c` to `path`: 200, after 503s while a partition moves.
fn body(c: &common::http::Client, path: &str) -> Vec<u8> {
    let start = Instant::now();
    loop {
        let r = c.get(path);
        match r.status {
            200 => return r.body,
            503 if start.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(100))
            }
            st => panic!("{path}: {st} {}", String::from_utf8_lossy(&r.body)),
        }
    }
}

/// Sets `flag` to false when dropped: a reader thread in a scope stops
/// also when the scope's body panics.
struct Stop<'a>(&'a AtomicBool);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Swaps generation 1 in while readers read through generation 0's
/// processors (every read answered; the posts of `author`, which only
/// generation 1 lacks one of, show which generation answers), rolls back,
/// swaps again and confirms: generation 0's processors stop by themselves.
fn swap_rollback_confirm(
    b: &Broker,
    live: &[common::http::Client],
    author: u64,
    running: &mut [KillOnDrop],
) {
    // Generation 0's group settled (both members own partitions, idle), so
    // that no rebalance of its own moves partitions during the swap.
    let start = Instant::now();
    loop {
        let s = cli_status(b, "gg");
        let owners = common::kafka::owners_in(&s);
        let has = |m: &str| owners.iter().any(|o| o == m);
        if s["idle"] == true && has("p0") && has("p1") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "generation 0 never settles: {s}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let path = format!("/v1/users/{author}/posts?limit=200");
    let gen0 = body(&live[0], &path);
    let reading = AtomicBool::new(true);
    let (reads, refused, slowest_us) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let answered_by_1 = |c: &common::http::Client| body(c, &path) != gen0;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0;
            while reading.load(Ordering::SeqCst) {
                i += 1;
                let started = Instant::now();
                let r = live[i % 2].get(&format!("/v1/users/{}/timeline?limit=20", i % 50 + 1));
                slowest_us.fetch_max(started.elapsed().as_micros() as u64, Ordering::SeqCst);
                reads.fetch_add(1, Ordering::SeqCst);
                if r.status != 200 {
                    refused.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        let _stop = Stop(&reading);
        // A second of reads before the swap: the figures to compare with.
        std::thread::sleep(Duration::from_secs(1));
        let before = (
            reads.load(Ordering::SeqCst),
            slowest_us.swap(0, Ordering::SeqCst),
        );
        reads.store(0, Ordering::SeqCst);
        eprintln!(
            "before the swap: {} reads in 1 s, the slowest {} ms",
            before.0,
            before.1 / 1000
        );
        let out = feedlog_ok(b, &["--generation", "1", "swap"]);
        assert!(out.contains("generation 1 answers readers now"), "{out}");
        let swapped = Instant::now();
        while !live.iter().all(answered_by_1) {
            assert!(
                swapped.elapsed() < Duration::from_secs(10),
                "readers never reach generation 1"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "every processor of generation 0 forwarded to generation 1 {:?} after the swap",
            swapped.elapsed()
        );
        reading.store(false, Ordering::SeqCst);
    });
    assert_eq!(
        refused.load(Ordering::SeqCst),
        0,
        "every read during the swap is answered"
    );
    eprintln!(
        "{} reads during the swap, the slowest {} ms",
        reads.load(Ordering::SeqCst),
        slowest_us.load(Ordering::SeqCst) / 1000
    );
    let out = feedlog_ok(b, &["swap", "--rollback"]);
    assert!(out.contains("generation 0 answers readers now"), "{out}");
    let back = Instant::now();
    while live.iter().any(answered_by_1) {
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "a rollback never reaches readers"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    feedlog_ok(b, &["--generation", "1", "swap"]);
    let out = feedlog_ok(b, &["swap", "--confirm"]);
    assert!(out.contains("generation 0 retired"), "{out}");
    // Generation 0's processors stop by themselves; generation 1's runs on.
    let deadline = Instant::now() + Duration::from_secs(60);
    for p in &mut running[..2] {
        let status = loop {
            if let Some(st) = p.0.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "a retired processor kept running"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(status.success(), "a retired processor exits 0");
    }
    running[2].stop();
}

// Proves `backfill --view timeline --inbox-cap 2` in Kafka mode is one command: it rebuilds generation 1 beside the live processor with the new cap, swaps it in once caught up (the live-generation record names 1, with 0 kept for a rollback) and goes on serving it; the live processor answers every timeline read meanwhile; generation 1's state is built with the new cap and every one of its views equals the oracle (trimming never changes an answer).
#[test]
fn a_kafka_backfill_rebuilds_and_swaps_in_one_command() {
    backfill_in_one_command(Broker::mock(4));
}

// Proves the same as a_kafka_backfill_rebuilds_and_swaps_in_one_command against a real Kafka-compatible broker (FEEDLOG_TEST_KAFKA).
#[test]
#[ignore = "needs a Kafka broker: FEEDLOG_TEST_KAFKA=host:port"]
fn real_broker_a_kafka_backfill_rebuilds_and_swaps_in_one_command() {
    backfill_in_one_command(Broker::real(4));
}

/// The backfill test on broker `b`.
fn backfill_in_one_command(b: Broker) {
    // On the mock (no admin API) the generation's topics are made here; on
    // a real broker, `add_generation` makes them as the backfill would.
    b.add_generation(1, 4);
    let tmp = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut live = processor(&b, 0, &tmp.path().join("p0"), "p0", addr);
    let log = generated_log(40, 1500);
    produce(&b.brokers, &b.topic("events"), 4, &log);
    let kafka = b.config("gg", "x").kafka;
    wait_idle(&kafka, Duration::from_secs(120));
    let (oracle, max_user) = oracle_of(&log);
    let c = common::http::Client { addr };
    let read_all = || {
        for u in 1..=max_user {
            let r = c.get(&format!("/v1/users/{u}/timeline?limit=20"));
            assert_eq!(r.status, 200, "reader {u}: every read answered");
        }
    };
    common::wait_until("the live API", Duration::from_secs(30), || {
        c.get("/v1/users/1/timeline").status == 200
    });
    let g1 = tmp.path().join("g1");
    let listen = free_addr().to_string();
    let mut backfill = KillOnDrop(
        feedlog_kafka(
            &b,
            "gg",
            Some(&g1),
            &[
                "--generation",
                "1",
                "backfill",
                "--view",
                "timeline",
                "--inbox-cap",
                "2",
                "--listen",
                &listen,
                "--no-sync",
                "--session-timeout-ms",
                "6000",
                "--member",
                "b0",
                "--progress",
                "1",
            ],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(tmp.path().join("backfill.log")).unwrap())
        .spawn()
        .unwrap(),
    );
    let start = Instant::now();
    loop {
        read_all();
        let now = feedlog::ops::generation::live_generation(&kafka).unwrap();
        if now.live == G1 {
            assert_eq!(now.previous, Some(Generation::FIRST), "generation 0 kept");
            break;
        }
        let said = std::fs::read_to_string(tmp.path().join("backfill.log")).unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "the backfill never swapped generation 1 in; it said:\n{said}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    read_all();
    let s = wait_idle(&kafka.generation(G1), Duration::from_secs(60));
    backfill.stop();
    live.stop();
    let dir = feedlog::state::datadir::DataDir::open(&g1).unwrap();
    assert_eq!(
        dir.inbox_cap(),
        Some(2),
        "generation 1 is built with the new cap"
    );
    drop(dir);
    let reader = final_reader(&[&g1], &s);
    check_all(&reader, &oracle, max_user, 7).unwrap();
}

// Proves a new generation starts from a cut of the live one while it runs: `checkpoint` of generation 0 writes one cut's checkpoints; `--generation 1 reset --to-checkpoint DIR --dry-run` changes nothing, and without --dry-run seeds generation 1 from them; generation 1's processor, run with --checkpoints DIR, seeds every partition from the cut (replaying only the events after it) while events keep arriving; every view of generation 1 equals the oracle of the whole log.
#[test]
fn a_new_generation_seeded_from_a_cut_of_the_live_one() {
    seeded_from_a_cut(Broker::mock(4));
}

// Proves the same as a_new_generation_seeded_from_a_cut_of_the_live_one against a real Kafka-compatible broker (FEEDLOG_TEST_KAFKA).
#[test]
#[ignore = "needs a Kafka broker: FEEDLOG_TEST_KAFKA=host:port"]
fn real_broker_a_new_generation_seeded_from_a_cut_of_the_live_one() {
    seeded_from_a_cut(Broker::real(4));
}

/// The seed test on broker `b`.
fn seeded_from_a_cut(b: Broker) {
    b.add_generation(1, 4);
    let tmp = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut live = processor(&b, 0, &tmp.path().join("p0"), "p0", addr);
    let log = generated_log(40, 1500);
    let lines: Vec<&str> = log.lines().collect();
    let (first, second) = lines.split_at(lines.len() / 2);
    let kafka = b.config("gg", "x").kafka;
    produce(&b.brokers, &b.topic("events"), 4, &first.join("\n"));
    wait_idle(&kafka, Duration::from_secs(120));
    let c = common::http::Client { addr };
    common::wait_until("the live API", Duration::from_secs(30), || {
        c.get("/v1/users/1/counters").status == 200
    });
    let out = feedlog_ok(&b, &["checkpoint"]);
    assert!(out.contains("\ncut "), "the cut's id: {out}");
    let cps = tmp.path().join("checkpoints-g0");
    let cps = cps.to_str().unwrap();
    let seed = ["--generation", "1", "reset", "--to-checkpoint", cps];
    let out = feedlog_ok(&b, &[&seed[..], &["--dry-run"]].concat());
    assert!(out.contains("dry run: nothing was written"), "{out}");
    assert!(feedlog::ops::seed::never_ran(&kafka.generation(G1)).unwrap());
    // A broker that drops commit metadata (where the seed's epoch goes)
    // gets a refusal, the group left at the start: then generation 1
    // rebuilds from the log, and its views are checked all the same.
    let keeps = common::kafka::keeps_commit_metadata(&b);
    assert!(
        keeps || !b.is_mock(),
        "the mock broker keeps commit metadata"
    );
    if keeps {
        let out = feedlog_ok(&b, &seed);
        assert!(out.contains("seeded generation 1"), "{out}");
    } else {
        let out = feedlog_kafka(&b, "gg", None, &seed).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "a seed the broker cannot keep: {err}"
        );
        assert!(err.contains("cannot seed a generation"), "{err}");
        assert!(feedlog::ops::seed::never_ran(&kafka.generation(G1)).unwrap());
        let effects = kafka.generation(G1).name(feedlog::log::Topic::Effects);
        let mut copies = (0..4).flat_map(|p| list_in(Path::new(cps), Partition(p)));
        assert!(
            !copies.any(|(_, c)| c.identity.effects_topic.as_deref() == Some(&effects[..])),
            "the refused seed removed its copies"
        );
    }
    produce(&b.brokers, &b.topic("events"), 4, &second.join("\n"));
    let g1 = tmp.path().join("g1");
    let mut shadow = KillOnDrop(
        common::kafka::run_process(&b, "gg", &g1, "s0", &["--checkpoints", cps])
            .arg("--generation")
            .arg("1")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(tmp.path().join("g1.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let s = wait_idle(&kafka.generation(G1), Duration::from_secs(120));
    shadow.stop();
    live.stop();
    let said = std::fs::read_to_string(tmp.path().join("g1.log")).unwrap();
    assert_eq!(
        said.matches("seeded from a checkpoint").count(),
        if keeps { 4 } else { 0 },
        "every partition of generation 1 seeded from the cut (none after a refusal):\n{said}"
    );
    let (oracle, max_user) = oracle_of(&log);
    let reader = final_reader(&[&g1], &s);
    check_all(&reader, &oracle, max_user, 7).unwrap();
}
