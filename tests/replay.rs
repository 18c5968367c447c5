//! Replay tooling through the `feedlog` binary: `rebuild --into` beside a
//! live state, `verify` of the two.

mod common;

use common::{feedlog, generated_log};
use feedlog::datadir::DataDir;
use feedlog::state::{Cf, Kv, Store, StoreOptions};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A live data directory: a generated log produced into 4 partitions,
/// processed with a SIGKILL mid-run (so committed effects are re-shipped,
/// duplicates the receivers skip) and a restart to the end.
fn live_state(dir: &Path, users: u64, events: u64) {
    let log = generated_log(users, events);
    let (code, _, err) = feedlog(dir, &["produce", "--partitions", "4"], Some(log.as_bytes()));
    assert_eq!(code, 0, "{err}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_feedlog"))
        .arg("--data")
        .arg(dir)
        .args(["run", "--inbox-cap", "5", "--no-sync"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !dir.join("log/effects").exists() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(150));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let (code, _, err) = feedlog(dir, &["run", "--until-idle", "--inbox-cap", "5"], None);
    assert_eq!(code, 0, "{err}");
}

/// `verify A B`: (exit code, stdout).
fn verify(a: &Path, b: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_feedlog"))
        .arg("verify")
        .arg(a)
        .arg(b)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
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

// Proves a rebuild from the log (with a different inbox cap) has the same view digests as the live state that was crashed and restarted; a second rebuild, killed halfway and resumed, ends byte-identical.
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
    let (code, out) = verify(&live, &a);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("identical"), "{out}");

    // Killed at its first progress line (records replayed and committed),
    // then run again.
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
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let progress = std::io::BufRead::lines(stderr)
        .map(|l| l.unwrap())
        .find(|l| l.contains(" records ("))
        .expect("a progress line before the rebuild ends");
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
    let cache = rocksdb::Cache::new_lru_cache(1 << 20);
    let (p, user) = (0..dir.partitions())
        .find_map(|p| {
            let store = Store::open(
                &dir.state_dir(p),
                p,
                dir.partitions(),
                &cache,
                &StoreOptions::default(),
            )
            .unwrap();
            let first = store
                .scan(Cf::Users, &[], &[0xff; 9])
                .next()
                .map(|r| r.unwrap());
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
