//! Crashes and faults, through the binary: SIGKILLs of `run` and `produce`
//! at random points, a corrupted log segment, a full disk, an API exposed
//! without a token. Each ends with every view equal to the oracle of what
//! the log holds, or with a refusal that names the problem. Bounded in
//! time, loopback only.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::oracle::Oracle;
use common::{check_all, feedlog, generated_log, oracle_of};
use feedlog::core::codec;
use feedlog::core::Partition;
use feedlog::log::Topic;
use feedlog::state::datadir::DataDir;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A small deterministic generator (xorshift), for kill points.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn spawn(data: &Path, args: &[&str], stdin: Option<&Path>) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_feedlog"));
    cmd.arg("--data")
        .arg(data)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(f) = stdin {
        cmd.stdin(std::fs::File::open(f).unwrap());
    }
    cmd.spawn().unwrap()
}

/// Kills `child` with SIGKILL after `ms` (or lets it finish first).
fn kill_after(mut child: std::process::Child, ms: u64) {
    let deadline = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = child.kill();
    child.wait().unwrap();
}

fn ok(data: &Path, args: &[&str], stdin: Option<&[u8]>) -> String {
    let (code, out, err) = feedlog(data, args, stdin);
    assert_eq!(code, 0, "feedlog {args:?}: {out}{err}");
    out + &err
}

/// The oracle of what the `events` log of `data` holds: every partition's
/// events in log order, each at its place there (the oracle depends only
/// on each actor's order, and an actor's events are all in one partition).
fn oracle_of_log(data: &Path) -> (Oracle, u64) {
    let dir = DataDir::open(data).unwrap();
    let logs = dir.logs();
    let (mut o, mut max_user) = (Oracle::with_partitions(dir.partitions()), 0);
    for p in Partition::all(dir.partitions()) {
        let mut r = logs.reader(Topic::Events, p, 0).unwrap();
        loop {
            let batch = r.read(10_000, usize::MAX).unwrap();
            if batch.is_empty() {
                break;
            }
            for rec in batch {
                if let Ok(e) = codec::decode_event(rec.format, &rec.value) {
                    let at = common::oracle::At {
                        partition: p.0,
                        offset: rec.offset.0,
                    };
                    o.apply_at(&e, at);
                    max_user = max_user.max(e.actor().0);
                }
            }
        }
    }
    (o, max_user)
}

fn check_views(data: &Path, oracle: &Oracle, max_user: u64) {
    let reader = feedlog::api::query::Reader::open(&DataDir::open(data).unwrap()).unwrap();
    check_all(&reader, oracle, max_user, 25).unwrap();
}

// Proves 22 SIGKILLs of `run` at random points (with and without fsync) lose nothing: the restarted run ends with every view equal to the oracle, the log reads cleanly, and a clean rebuild has the same digests.
#[test]
fn run_killed_22_times_at_random_points() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let log = generated_log(200, 15_000);
    ok(
        &data,
        &["produce", "--partitions", "4"],
        Some(log.as_bytes()),
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..22 {
        let args: &[&str] = if i % 2 == 0 {
            &["run", "--inbox-cap", "5", "--no-sync"]
        } else {
            &["run", "--inbox-cap", "5"]
        };
        kill_after(spawn(&data, args, None), 20 + rng.below(400));
    }
    ok(&data, &["run", "--until-idle", "--inbox-cap", "5"], None);
    let (oracle, max_user) = oracle_of(&log);
    check_views(&data, &oracle, max_user);
    let out = ok(&data, &["log", "check"], None);
    assert!(out.contains("every partition reads cleanly"), "{out}");
    let clean = tmp.path().join("clean");
    ok(&data, &["rebuild", "--into", clean.to_str().unwrap()], None);
    let (code, out, err) = feedlog(
        Path::new("."),
        &["verify", data.to_str().unwrap(), clean.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
}

// Proves SIGKILLs of `produce` at random points leave every partition a clean prefix of what it wrote (no record cut below what was synced, nothing corrupt), and processing what the log holds gives the oracle's views.
#[test]
fn produce_killed_at_random_points() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    ok(&data, &["produce", "--partitions", "4"], Some(b""));
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    let big = generated_log(300, 60_000);
    let lines: Vec<&str> = big.lines().collect();
    for i in 0..6 {
        let chunk: String = lines[i * 10_000..(i + 1) * 10_000]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        let file: PathBuf = tmp.path().join(format!("chunk{i}.jsonl"));
        std::fs::write(&file, chunk).unwrap();
        let before = synced_ends(&data);
        kill_after(spawn(&data, &["produce"], Some(&file)), 5 + rng.below(150));
        let out = ok(&data, &["log", "check"], None);
        assert!(!out.contains("CORRUPT"), "{out}");
        for (p, (b, a)) in before.iter().zip(synced_ends(&data)).enumerate() {
            assert!(a >= *b, "partition {p} lost records: {b} -> {a}");
        }
    }
    // One complete produce after the kills: all of it is accepted.
    let last = "{\"type\":\"post\",\"author\":1,\"post_id\":999999999,\"ts\":1}\n";
    let out = ok(&data, &["produce"], Some(last.as_bytes()));
    assert!(out.contains("accepted 1 events"), "{out}");
    ok(&data, &["run", "--until-idle", "--inbox-cap", "5"], None);
    let (oracle, max_user) = oracle_of_log(&data);
    assert!(
        oracle.counters(1).2 >= 1,
        "the last produce's post is in the log"
    );
    check_views(&data, &oracle, max_user);
}

/// The records each `events` partition holds now (read through the log).
fn synced_ends(data: &Path) -> Vec<u64> {
    let dir = DataDir::open(data).unwrap();
    Partition::all(dir.partitions())
        .map(|p| {
            feedlog::log::embedded::check(&dir.logs().dir(Topic::Events, p))
                .unwrap()
                .end
        })
        .collect()
}

fn flip_byte_in_the_middle(segment: &Path) -> u64 {
    let mut bytes = std::fs::read(segment).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    std::fs::write(segment, &bytes).unwrap();
    at as u64
}

// Regression: a flipped byte in a log segment made `produce` cut committed events and `run` go on over the hole. Now produce, run and log check refuse by the segment's name; repair refuses below the state's position unless forced; after a forced cut and a reset that regenerates the effects, the views equal the oracle of what remains.
#[test]
fn corrupted_segment_is_refused_never_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let log = generated_log(100, 8_000);
    ok(
        &data,
        &["produce", "--partitions", "2"],
        Some(log.as_bytes()),
    );
    ok(&data, &["run", "--until-idle", "--no-sync"], None);
    let segment = data.join("log/events/00000/00000000000000000000.log");
    let len = std::fs::metadata(&segment).unwrap().len();
    flip_byte_in_the_middle(&segment);
    // produce: one more event for partition 0 is refused, nothing is cut.
    let actor = (1..)
        .find(|u| feedlog::core::partition::partition_for(feedlog::UserId(*u), 2) == Partition(0))
        .unwrap();
    let one = format!("{{\"type\":\"post\",\"author\":{actor},\"post_id\":77777777,\"ts\":5}}\n");
    let (code, _, err) = feedlog(&data, &["produce"], Some(one.as_bytes()));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("corrupt log segment") && err.contains("00000000000000000000.log"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        len,
        "nothing was cut"
    );
    // run refuses too, by name.
    let (code, _, err) = feedlog(&data, &["run", "--until-idle"], None);
    assert_ne!(code, 0);
    assert!(err.contains("corrupt log segment"), "{err}");
    // log check names it and the offset to cut at.
    let (code, out, _) = feedlog(&data, &["log", "check"], None);
    assert_eq!(code, 1, "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("events[0]"))
        .unwrap()
        .to_string();
    assert!(line.contains("CORRUPT at byte"), "{line}");
    let offset: u64 = line
        .split("--truncate-at ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.trim_end_matches('`').parse().ok())
        .unwrap_or_else(|| panic!("no offset in {line}"));
    let cut = ["log", "repair", "--topic", "events", "--partition", "0"];
    let at = offset.to_string();
    let (code, _, err) = feedlog(&data, &[&cut[..], &["--truncate-at", &at]].concat(), None);
    assert_eq!(code, 1);
    assert!(
        err.contains("refusing to cut") && err.contains("has applied up to"),
        "{err}"
    );
    let out = ok(
        &data,
        &[&cut[..], &["--truncate-at", &at, "--force"]].concat(),
        None,
    );
    assert!(out.contains("--regenerate-effects"), "{out}");
    ok(
        &data,
        &["reset", "--to-start", "--regenerate-effects"],
        None,
    );
    ok(&data, &["run", "--until-idle", "--no-sync"], None);
    let out = ok(&data, &["log", "check"], None);
    assert!(out.contains("every partition reads cleanly"), "{out}");
    let (oracle, max_user) = oracle_of_log(&data);
    check_views(&data, &oracle, max_user);
}

// Regression: the dead-letter writer reopened per append and cut the log at a flipped byte. Now a produce with a bad line refuses by the dead-letter segment's name and the log keeps every record; `dead-letters` prints them before the damage.
#[test]
fn corrupted_dead_letter_log_is_refused_never_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let bad: String = (0..500)
        .map(|i| format!("{{\"type\":\"nope\",\"n\":{i}}}\n"))
        .collect();
    let out = ok(&data, &["produce"], Some(bad.as_bytes()));
    assert!(
        out.contains("500 records went to the dead-letter log"),
        "{out}"
    );
    let out = ok(&data, &["dead-letters"], None);
    assert_eq!(
        out.lines().filter(|l| l.starts_with('#')).count(),
        500,
        "{out}"
    );
    assert!(out.contains("unknown event type"), "{out}");
    let segment = data.join("log/dead-letter/00000/00000000000000000000.log");
    let len = std::fs::metadata(&segment).unwrap().len();
    flip_byte_in_the_middle(&segment);
    let (code, _, err) = feedlog(&data, &["produce"], Some(b"not json\n"));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("corrupt log segment") && err.contains("dead-letter"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        len,
        "nothing was cut"
    );
}

// Regression: with a damaged dead-letter log, a produce of good, bad and good lines appended the good ones and then failed on the bad one, losing its dead letter. Now the dead-letter log is checked first: the whole produce is refused and the events log does not grow.
#[test]
fn damaged_dead_letter_log_refuses_the_whole_produce() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let mut input: String = (0..500)
        .map(|i| format!("{{\"type\":\"nope\",\"n\":{i}}}\n"))
        .collect();
    input += "{\"type\":\"post\",\"author\":1,\"post_id\":1,\"ts\":1}\n";
    let out = ok(
        &data,
        &["produce", "--partitions", "2"],
        Some(input.as_bytes()),
    );
    assert!(out.contains("accepted 1 events"), "{out}");
    let segment = data.join("log/dead-letter/00000/00000000000000000000.log");
    flip_byte_in_the_middle(&segment);
    let events = synced_ends(&data);
    let mixed = concat!(
        "{\"type\":\"post\",\"author\":1,\"post_id\":2,\"ts\":2}\n",
        "not json\n",
        "{\"type\":\"post\",\"author\":2,\"post_id\":3,\"ts\":3}\n",
    );
    for stdin in [
        mixed,
        "{\"type\":\"post\",\"author\":1,\"post_id\":4,\"ts\":4}\n",
    ] {
        let (code, _, err) = feedlog(&data, &["produce"], Some(stdin.as_bytes()));
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("corrupt log segment") && err.contains("dead-letter"),
            "{err}"
        );
        assert_eq!(synced_ends(&data), events, "no event was appended");
    }
}

// Regression: a 20 MB line aborted produce halfway. It goes to the dead-letter log as an excerpt with its size and file:line, and the lines around it are accepted.
#[test]
fn oversize_line_is_a_dead_letter_and_produce_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let huge = format!(
        "{{\"type\":\"post\",\"author\":1,\"post_id\":5,\"ts\":1,\"pad\":\"{}\"}}",
        "x".repeat(20 << 20)
    );
    let input = format!(
        "\u{feff}{{\"type\":\"follow\",\"follower\":2,\"followee\":1,\"ts\":1}}\n{huge}\n{{\"type\":\"post\",\"author\":1,\"post_id\":6,\"ts\":2}}\n"
    );
    let file = tmp.path().join("in.jsonl");
    std::fs::write(&file, &input).unwrap();
    let out = ok(&data, &["produce", file.to_str().unwrap()], None);
    assert!(
        out.contains("accepted 2 events") && out.contains("1 records went to the dead-letter log"),
        "{out}"
    );
    let dl = ok(&data, &["dead-letters", "--json"], None);
    let v: serde_json::Value = serde_json::from_str(dl.lines().next().unwrap()).unwrap();
    assert!(
        v["reason"].as_str().unwrap().contains("record too large"),
        "{v}"
    );
    assert_eq!(v["source"]["input"], format!("{}:2", file.display()));
    assert_eq!(v["payload_bytes"], huge.len());
    assert!(v["payload"].as_str().unwrap().len() <= codec::DEAD_LETTER_EXCERPT);
    ok(&data, &["run", "--until-idle", "--no-sync"], None);
    let (oracle, max_user) = oracle_of_log(&data);
    assert_eq!(oracle.timeline(2), vec![(6, 1, 2)]);
    check_views(&data, &oracle, max_user);
    // A missing input file creates no data directory.
    let none = tmp.path().join("none");
    let (code, _, err) = feedlog(&none, &["produce", "/no/such/file"], None);
    assert_eq!(code, 1, "{err}");
    assert!(!none.exists());
}

/// Mounts a tmpfs of `mb` MB at `at`; false when this machine does not let
/// the test mount one (not root, no mount privilege).
fn mount_tmpfs(at: &Path, mb: u64) -> bool {
    std::fs::create_dir_all(at).unwrap();
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
        .arg(at)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

// Proves a full disk stops `run` with a message that names it and exit code 75 (run it again later), and once there is room again the run resumes and the views equal the oracle (nothing lost).
#[test]
#[ignore = "needs root: mounts a 12 MB tmpfs"]
fn disk_full_stops_run_clearly_then_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("small");
    assert!(
        mount_tmpfs(&mnt, 12),
        "this test needs to mount a tmpfs (root, or the mount privilege)"
    );
    let _unmount = Unmount(mnt.clone());
    let data = mnt.join("d");
    let log = generated_log(400, 16_000);
    ok(
        &data,
        &["produce", "--partitions", "2"],
        Some(log.as_bytes()),
    );
    let (code, _, err) = feedlog(&data, &["run", "--until-idle", "--inbox-cap", "800"], None);
    assert_ne!(
        code, 0,
        "the run fit in 12 MB; make the workload bigger: {err}"
    );
    assert_eq!(code, 75, "a full disk passes: {err}");
    assert!(
        err.contains("No space left on device") || err.contains("os error 28"),
        "{err}"
    );
    let grown = Command::new("mount")
        .args(["-o", "remount,size=512m"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(grown.success());
    ok(&data, &["run", "--until-idle", "--inbox-cap", "800"], None);
    let (oracle, max_user) = oracle_of(&log);
    check_views(&data, &oracle, max_user);
}

// Proves an empty 8-partition state costs a few MB on disk, not RocksDB's preallocated write-ahead logs.
#[test]
fn an_empty_state_is_small() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    ok(&data, &["produce", "--partitions", "8"], Some(b""));
    ok(&data, &["run", "--until-idle"], None);
    let out = Command::new("du")
        .args(["-sk"])
        .arg(&data)
        .output()
        .unwrap();
    let kb: u64 = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        kb < 8 * 1024,
        "an empty 8-partition data directory takes {kb} KB"
    );
}

// Proves `run --listen` refuses to serve beyond loopback without a token, naming the fix, and serves with one.
#[test]
fn api_beyond_loopback_needs_a_token() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    ok(&data, &["produce"], Some(b""));
    let (code, _, err) = feedlog(
        &data,
        &["run", "--until-idle", "--listen", "0.0.0.0:0"],
        None,
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("--api-token") && err.contains("--insecure-no-auth"),
        "{err}"
    );
    let server = common::http::Proc::serving(
        &data,
        &["run", "--listen", "0.0.0.0:0", "--api-token", "t0ken"],
    );
    let port = server.1.rsplit(':').next().unwrap().to_string();
    let c = common::http::Client {
        addr: format!("127.0.0.1:{port}").parse().unwrap(),
    };
    assert_eq!(c.get("/v1/users/1/counters").status, 401);
    assert_eq!(c.get("/healthz").status, 200);
}
