//! Replay tooling through the `feedlog` binary: `rebuild --into` beside a
//! live state, `verify` of the two, checkpoints, `reset`, and `backfill`
//! (a rebuild swapped in) under live traffic.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::Proc;
use common::{feedlog, generated_log};
use feedlog::core::keys::UserVal;
use feedlog::core::Partition;
use feedlog::state::datadir::DataDir;
use feedlog::state::{Cf, Kv, Store, StoreOptions};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A live data directory: a generated log produced into 4 partitions,
/// processed with a SIGKILL mid-run (so committed effects are re-shipped,
/// duplicates the receivers skip) and a restart to the end, the busiest
/// authors pulled (from [`PULL`] followers), readers asleep after
/// [`SPAN`] of log time.
fn live_state(dir: &Path, users: u64, events: u64) {
    state_of(dir, users, events, (PULL, SPAN));
}

/// [`live_state`] with pull threshold and inactivity span `hybrid`.
fn state_of(dir: &Path, users: u64, events: u64, (pull, span): (&str, &str)) {
    let log = generated_log(users, events);
    let (code, _, err) = feedlog(dir, &["produce", "--partitions", "4"], Some(log.as_bytes()));
    assert_eq!(code, 0, "{err}");
    let run = [
        "--inbox-cap",
        "5",
        "--pull-threshold",
        pull,
        "--inactive-after",
        span,
    ];
    common::kill_run_once_grown(dir, &[&run[..], &["--no-sync"]].concat(), 20_000);
    let (code, _, err) = feedlog(dir, &[&["run", "--until-idle"], &run[..]].concat(), None);
    assert_eq!(code, 0, "{err}");
}

/// `verify A B`: (exit code, stdout then stderr).
fn verify(a: &Path, b: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_feedlog"))
        .arg("verify")
        .arg(a)
        .arg(b)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The `overall` digest line `verify` prints for `dir`.
fn overall(out: &str, dir: &Path) -> String {
    let prefix = format!("{}: overall ", dir.display());
    out.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no digest of {} in {out}", dir.display()))
        .to_string()
}

// Proves a rebuild from the log (with a different inbox cap and inactivity span, deciding pulled authors as the log's threshold did) has the same view digests as the live state that was crashed and restarted (readers asleep and woken), and so has a state of the same log that pushes every author to every reader; a second rebuild, killed halfway and resumed, ends byte-identical.
#[test]
fn rebuild_equals_live_and_a_killed_rebuild_resumes_to_the_same_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    live_state(&live, 300, 30_000);

    let a = tmp.path().join("a");
    let (code, out, err) = feedlog(
        &live,
        &[
            "rebuild",
            "--into",
            a.to_str().unwrap(),
            "--inbox-cap",
            "50",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("rebuilt 4 partitions"), "{out}");
    for state in [&live, &a] {
        assert!(
            users_recording(state, |u| u.pulled) > 0,
            "no author was pulled"
        );
        assert!(
            users_recording(state, |u| u.pulls > 0) > 0,
            "no reader merges copies"
        );
    }
    // The live state's readers slept and woke; the rebuild's (30 days)
    // never did.
    assert!(users_recording(&live, |u| u.wakes > 0) > 0, "nobody woke");
    assert!(users_recording(&live, |u| u.asleep) > 0, "nobody sleeps");
    assert_eq!(users_recording(&a, |u| u.asleep || u.wakes > 0), 0);
    let push = tmp.path().join("push");
    state_of(&push, 300, 30_000, ("0", "0"));
    assert_eq!(users_recording(&push, |u| u.pulled), 0);
    let (code, out) = verify(&live, &push);
    assert_eq!(code, 0, "{out}");
    let (code, out) = verify(&live, &a);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("identical"), "{out}");

    // Killed at its first progress line (records replayed and committed),
    // then run again. Progress every 0.01 s, so such a line comes well
    // before the end however fast the rebuild is (a release build replays
    // this log in about 0.1 s; checked below).
    let b = tmp.path().join("b");
    let mut child = Command::new(env!("CARGO_BIN_EXE_feedlog"))
        .arg("--data")
        .arg(&live)
        .args([
            "rebuild",
            "--into",
            b.to_str().unwrap(),
            "--inbox-cap",
            "50",
            "--progress",
            "0.01",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let progress = std::io::BufRead::lines(stderr)
        .map(|l| l.unwrap())
        // "  0.3s  DONE/TOTAL records (...)": the first with DONE > 0.
        .find(|l| {
            l.contains(" records (")
                && l.split_whitespace()
                    .nth(1)
                    .is_some_and(|d| !d.starts_with("0/"))
        })
        .expect("a progress line with records replayed before the rebuild ends");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !progress.contains("finishing"),
        "killed before the end: {progress}"
    );
    let (code, _, err) = feedlog(
        &live,
        &[
            "rebuild",
            "--into",
            b.to_str().unwrap(),
            "--inbox-cap",
            "50",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("(resuming)"),
        "the second run resumed the killed one: {err}"
    );
    let (code, out) = verify(&a, &b);
    assert_eq!(code, 0, "{out}");
    assert_eq!(overall(&out, &a), overall(&out, &b));
}

// Proves verify detects one changed follower counter and names the view and the user.
#[test]
fn verify_names_a_single_changed_counter() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    live_state(&live, 100, 5_000);
    let copy = tmp.path().join("copy");
    let (code, _, err) = feedlog(&live, &["rebuild", "--into", copy.to_str().unwrap()], None);
    assert_eq!(code, 0, "{err}");
    // Bump the followers counter of one user in the copy.
    let dir = DataDir::open(&copy).unwrap();
    let cache = feedlog::state::BlockCache::new(1 << 20);
    let (p, user) = Partition::all(dir.partitions())
        .find_map(|p| {
            let store = Store::open(
                &dir.state_dir(p),
                p,
                dir.partitions(),
                &cache,
                &StoreOptions::default(),
            )
            .unwrap();
            let first = store.scan(Cf::Users, &[], None).next().map(|r| r.unwrap());
            first.map(|(k, mut v)| {
                let followers = u64::from_be_bytes(v[..8].try_into().unwrap()) + 1;
                v[..8].copy_from_slice(&followers.to_be_bytes());
                store
                    .commit(&Default::default(), |b| b.put(Cf::Users, &k, &v))
                    .unwrap();
                (p, u64::from_be_bytes(k[..8].try_into().unwrap()))
            })
        })
        .expect("some user has a record");
    let (code, out) = verify(&live, &copy);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "DIFFERENT: partition {p}, view counters: first differing user {user}"
        )),
        "{out}"
    );
}

/// `n` more events among `users` users (deterministic per `seed`): follows,
/// unfollows, posts (ids from `first_post`) and deletes.
fn more_events(seed: u64, users: u64, n: u64, first_post: u64) -> String {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut out = String::new();
    for i in 0..n {
        let (a, b) = (next() % users + 1, next() % users + 1);
        let (ts, id) = (1_800_000_000_000 + seed * 10_000_000 + i, first_post + i);
        out += &match next() % 10 {
            0..=3 if a != b => {
                format!(r#"{{"type":"follow","follower":{b},"followee":{a},"ts":{ts}}}"#)
            }
            4 if a != b => {
                format!(r#"{{"type":"unfollow","follower":{b},"followee":{a},"ts":{ts}}}"#)
            }
            9 => format!(
                r#"{{"type":"delete_post","author":{a},"post_id":{},"ts":{ts}}}"#,
                first_post + next() % (i + 1)
            ),
            _ => format!(r#"{{"type":"post","author":{a},"post_id":{id},"ts":{ts}}}"#),
        };
        out.push('\n');
    }
    out
}

/// The "N records to replay" a rebuild announces on stderr.
fn records_to_replay(stderr: &str) -> u64 {
    let at = stderr
        .find(" records to replay")
        .expect("the rebuild's first line");
    let words: Vec<&str> = stderr[..at].split_whitespace().collect();
    words.last().unwrap().parse().unwrap()
}

fn ok(data: &Path, args: &[&str], stdin: Option<&[u8]>) -> (String, String) {
    let (code, out, err) = feedlog(data, args, stdin);
    assert_eq!(code, 0, "feedlog {args:?}: {out}{err}");
    (out, err)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

// Proves a checkpoint taken from a running processor, plus a replay of only the log after it, equals a full replay; and that a reset to that checkpoint, processed again to the end, equals it too.
#[test]
fn checkpoint_plus_tail_equals_full_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    live_state(&live, 300, 20_000);
    let c = tmp.path().join("c");
    {
        let run = Proc::serving(&live, &["run", "--no-sync", "--listen", "127.0.0.1:0"]);
        let (out, err) = ok(&live, &["checkpoint", "--into", path(&c)], None);
        assert!(
            err.contains("a processor is running"),
            "asked the processor: {err}"
        );
        assert!(out.starts_with("checkpoint of 4 partitions"), "{out}");
        ok(
            &live,
            &["produce"],
            Some(more_events(1, 300, 8_000, 1_000_000).as_bytes()),
        );
        run.terminate();
    }
    ok(&live, &["run", "--until-idle", "--no-sync"], None);

    let tail = tmp.path().join("tail");
    let (_, tail_err) = ok(
        &live,
        &[
            "rebuild",
            "--into",
            path(&tail),
            "--from-checkpoint",
            path(&c),
        ],
        None,
    );
    assert!(tail_err.contains("(from checkpoint"), "{tail_err}");
    let full = tmp.path().join("full");
    let (_, full_err) = ok(&live, &["rebuild", "--into", path(&full)], None);
    let (t, f) = (records_to_replay(&tail_err), records_to_replay(&full_err));
    assert!(t > 0 && t < f, "the tail ({t}) is part of the log ({f})");
    let (code, out) = verify(&tail, &full);
    assert_eq!(code, 0, "{out}");
    let (code, out) = verify(&live, &tail);
    assert_eq!(code, 0, "{out}");

    // Back to the checkpoint, then forward again: the same views. (The
    // effects positions differ: processing again re-emitted effects, which
    // the receivers skipped as duplicates; at the same events positions
    // verify warns about that and compares the views, which are equal.)
    // A dry run first: it names what the reset will do and changes nothing.
    let (preview, _) = ok(
        &live,
        &["reset", "--to-checkpoint", path(&c), "--dry-run"],
        None,
    );
    assert!(
        preview.contains("dry run: nothing was changed")
            && preview.contains("as state generation state.1"),
        "{preview}"
    );
    let (states, _) = ok(&live, &["states"], None);
    assert!(
        !states.contains("state.1"),
        "a dry run made a generation: {states}"
    );
    let (code, out) = verify(&live, &full);
    assert_eq!(code, 0, "a dry run moved the state: {out}");
    let (out, _) = ok(&live, &["reset", "--to-checkpoint", path(&c)], None);
    assert!(out.contains("now uses state generation state.1"), "{out}");
    // "... N records again": N.
    let again = |s: &str| {
        s.split(" records again")
            .next()
            .and_then(|h| h.rsplit(' ').next())
            .map(str::to_string)
    };
    assert_eq!(
        again(&preview),
        again(&out),
        "the dry run's count of records to process again: {preview} / {out}"
    );
    ok(&live, &["run", "--until-idle", "--no-sync"], None);
    let (code, out) = verify(&live, &full);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("re-shipped after a crash?"), "{out}");
    assert_eq!(overall(&out, &live), overall(&out, &full), "{out}");
    // A checkpoint of another directory is refused.
    let (code, _, err) = feedlog(&full, &["reset", "--to-checkpoint", path(&c)], None);
    assert_eq!(code, 1);
    assert!(err.contains("the checkpoint is of"), "{err}");
}

/// Every user record of `dir`.
fn user_records(dir: &Path) -> Vec<UserVal> {
    let d = DataDir::open(dir).unwrap();
    let cache = feedlog::state::BlockCache::new(1 << 20);
    Partition::all(d.partitions())
        .flat_map(|p| {
            let s = Store::open_read_only(
                &d.state_dir(p),
                p,
                d.partitions(),
                &cache,
                feedlog::state::Kept::NONE,
            )
            .unwrap();
            s.scan(Cf::Users, &[], None)
                .map(|r| UserVal::decode(&r.unwrap().1).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The largest inbox length any user of `dir` records.
fn max_inbox_len(dir: &Path) -> u64 {
    user_records(dir)
        .iter()
        .map(|u| u.inbox_len)
        .max()
        .unwrap_or(0)
}

/// How many users of `dir` have a record for which `f` holds.
fn users_recording(dir: &Path, f: impl Fn(&UserVal) -> bool) -> usize {
    user_records(dir).iter().filter(|u| f(u)).count()
}

/// The pull threshold of the live states.
const PULL: &str = "8";

/// The inactivity span of the live states: the generated logs advance 7 ms
/// per event, and a user acts every 100 events or so.
const SPAN: &str = "500ms";

/// Sets its flag when dropped: a reader thread of a scope stops when the
/// scope's own thread fails.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

// Proves a backfill with a new inbox cap, swapped in while events arrive and readers read (every read answered), ends equal to a full rebuild, with the new cap in force and the old state kept until dropped.
#[test]
fn backfill_under_live_traffic_equals_a_full_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    live_state(&live, 300, 20_000);
    assert!(max_inbox_len(&live) <= 5 + 1, "built with inbox cap 5");
    let run = Proc::serving(&live, &["run", "--no-sync", "--listen", "127.0.0.1:0"]);
    let serve = Proc::serving(&live, &["serve", "--listen", "127.0.0.1:0"]);
    let (client, follower) = (run.client(), serve.client());
    let done = AtomicBool::new(false);
    let (reads, failed) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            for u in (1..=300u64).cycle() {
                if done.load(Ordering::SeqCst) {
                    break;
                }
                for (c, route) in [
                    (client, "timeline?limit=20"),
                    (client, "counters"),
                    (follower, "timeline?limit=20"),
                ] {
                    let r = c.get(&format!("/v1/users/{u}/{route}"));
                    reads.fetch_add(1, Ordering::SeqCst);
                    if r.status != 200 {
                        failed.fetch_add(1, Ordering::SeqCst);
                        eprintln!(
                            "{u} {route}: {} {}",
                            r.status,
                            String::from_utf8_lossy(&r.body)
                        );
                    }
                }
            }
        });
        let producer = s.spawn(|| {
            for i in 0..6 {
                let log = more_events(i + 2, 300, 2_000, 2_000_000 + i * 10_000);
                ok(&live, &["produce"], Some(log.as_bytes()));
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        // A failure below stops the readers too (else the scope waits for them).
        let _stop = StopOnDrop(&done);
        // The readers are reading before the backfill starts...
        common::wait_until("the readers' first round", Duration::from_secs(60), || {
            reads.load(Ordering::SeqCst) >= 3
        });
        let (out, _) = ok(
            &live,
            &[
                "backfill",
                "--view",
                "timeline",
                "--inbox-cap",
                "50",
                "--no-sync",
            ],
            None,
        );
        assert!(
            out.contains("swapped: ") && out.contains("inbox cap 50"),
            "{out}"
        );
        producer.join().unwrap();
        // ...and go on reading after the swap (a full round of routes).
        let swapped = reads.load(Ordering::SeqCst);
        common::wait_until(
            "a round of reads after the swap",
            Duration::from_secs(60),
            || reads.load(Ordering::SeqCst) >= swapped + 3,
        );
        done.store(true, Ordering::SeqCst);
    });
    assert_eq!(failed.load(Ordering::SeqCst), 0, "every read was answered");
    // `serve` beside the processor moved to the new generation too.
    let started = Instant::now();
    let same = |u: u64| {
        let path = format!("/v1/users/{u}/timeline?limit=50");
        client.json(&path).unwrap() == follower.json(&path).unwrap()
    };
    // `/readyz` answers 503 while the lag is over its bound, with the lag
    // in the body all the same.
    let lag = || client.get("/readyz").json().unwrap()["lag"].clone();
    while !(lag() == 0 && (1..=300).all(same)) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "serve follows the swap"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    serve.terminate();
    run.terminate();
    ok(&live, &["run", "--until-idle", "--no-sync"], None);

    let d = DataDir::open(&live).unwrap();
    assert_eq!((d.state_name(), d.inbox_cap()), ("state.1", Some(50)));
    let max = max_inbox_len(&live);
    assert!(max > 6 && max <= 50 + 6, "the new cap is in force: {max}");
    let full = tmp.path().join("full");
    ok(&live, &["rebuild", "--into", path(&full)], None);
    let (code, out) = verify(&live, &full);
    assert_eq!(code, 0, "{out}");

    let (code, _, err) = feedlog(&live, &["run", "--until-idle", "--inbox-cap", "5"], None);
    assert_eq!(code, 1);
    assert!(err.contains("was built with inbox cap 50"), "{err}");
    let (states, _) = ok(&live, &["states"], None);
    assert!(
        states.contains("state.1") && states.contains("active"),
        "{states}"
    );
    ok(&live, &["drop-state", "state"], None);
    let (states, _) = ok(&live, &["states"], None);
    assert_eq!(states.lines().count(), 1, "{states}");
}
