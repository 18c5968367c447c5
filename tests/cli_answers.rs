//! What the `feedlog` binary answers a user at the edges: its exit codes,
//! a reader of its output that goes away, `query` options that mirror the
//! API's, and the log positions explain names.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::feedlog;
use feedlog::state::datadir::DataDir;
use std::path::Path;

// Regression: `dead-letters | head` ended with "error: Broken pipe" and exit 1. A reader that stops reading now ends the command quietly with exit 0.
#[test]
fn dead_letters_into_a_closed_pipe_ends_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    // More output than a pipe buffers, so the command must meet the closed pipe.
    let bad: String = (0..3000).map(|i| format!("not json {i}\n")).collect();
    let (code, _, err) = feedlog(&data, &["produce"], Some(bad.as_bytes()));
    assert_eq!(code, 0, "{err}");
    let (code, err) = into_closed_pipe(&data, &["dead-letters"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("error"), "{err}");
}

/// Runs `feedlog --data DATA ARGS` with its stdout a pipe nobody reads
/// (closed at once); (exit code, stderr).
fn into_closed_pipe(data: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_feedlog"))
        .arg("--data")
        .arg(data)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// Proves the exit codes docs/cli.md "Exit codes" lists: 0 done; 1 a setting that contradicts the state; 2 the command line's own mistakes, a bad --config file and a query that cannot be answered (history no longer kept); 75 a data directory another process holds; 0 and no panic when the reader of stdout has gone.
#[test]
fn exit_codes_are_the_documented_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let events = [
        r#"{"type":"follow","follower":1,"followee":2,"ts":1700000000000}"#,
        // 40 days later.
        r#"{"type":"post","author":2,"post_id":10,"ts":1703456000000}"#,
    ]
    .join("\n");
    let (code, _, err) = feedlog(&data, &["produce"], Some(events.as_bytes()));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = feedlog(&data, &["run", "--until-idle", "--quiet"], None);
    assert_eq!(code, 0, "{err}");
    let code_of = |args: &[&str]| {
        let (code, _, err) = feedlog(&data, args, None);
        (code, err)
    };
    // 1: a setting that contradicts the state.
    let (code, err) = code_of(&["run", "--until-idle", "--quiet", "--inbox-cap", "7"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("inbox cap"), "{err}");
    // 2: the command line's own mistakes.
    let d = data.to_str().unwrap();
    for args in [
        &["query", "timeline"][..],
        &["query", "why", "1", "2"],
        &["query", "timeline", "1", "2"],
        &[
            "query",
            "timeline",
            "1",
            "--explain",
            "--as-of",
            "1700000001000",
        ],
        &["verify", d],
        &["checkpoint"],
        &["rebuild"],
        &["--generation", "3", "status"],
        &["run", "--no-such-flag"],
    ] {
        let (code, err) = code_of(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let bad = tmp.path().join("bad.toml");
    std::fs::write(&bad, "inbox_cap = [").unwrap();
    let (code, err) = code_of(&["--config", bad.to_str().unwrap(), "run", "--until-idle"]);
    assert_eq!(code, 2, "{err}");
    // 2: a query that cannot be answered: a time older than the history
    // kept (30 days before the newest event by default), as HTTP's 410.
    let (code, err) = code_of(&["query", "timeline", "1", "--as-of", "1700000001000"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("history"), "{err}");
    let (code, err) = code_of(&[
        "query",
        "timeline",
        "1",
        "--as-of",
        "1700000001000",
        "--history-retention",
        "forever",
    ]);
    assert_eq!(code, 0, "{err}");
    // 75: another process holds the data directory (its first status
    // line comes after it took the lock).
    let mut held = std::process::Command::new(env!("CARGO_BIN_EXE_feedlog"))
        .arg("--data")
        .arg(&data)
        .args(["run", "--progress", "3600"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    let stderr = held.stderr.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stderr), &mut first).unwrap();
    assert!(first.contains("partitions"), "{first}");
    let (code, err) = code_of(&["run", "--until-idle", "--quiet"]);
    held.kill().unwrap();
    held.wait().unwrap();
    assert_eq!(code, 75, "{err}");
    assert!(err.contains("another process is running"), "{err}");
    // A reader of stdout that has gone ends the command quietly.
    let (code, err) = into_closed_pipe(&data, &["query", "timeline", "1"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

// Proves `query timeline --reposts MODE` answers as the reader does for each mode (newest, first, none: three different pages on this log), that --reposts and --explain refuse other views with exit 2, and that the unknown-view error lists every view as `--help` spells them.
#[test]
fn query_timeline_takes_the_repost_modes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let t = 1_700_000_000_000u64;
    let events = [
        format!(r#"{{"type":"follow","follower":1,"followee":2,"ts":{t}}}"#),
        format!(
            r#"{{"type":"follow","follower":1,"followee":3,"ts":{}}}"#,
            t + 1
        ),
        format!(
            r#"{{"type":"post","author":2,"post_id":10,"ts":{}}}"#,
            t + 2
        ),
        format!(
            r#"{{"type":"post","author":2,"post_id":11,"ts":{}}}"#,
            t + 3
        ),
        format!(
            r#"{{"type":"repost","author":3,"post_id":90,"of_author":2,"of_post_id":10,"ts":{}}}"#,
            t + 4
        ),
    ]
    .join("\n");
    let (code, _, err) = feedlog(&data, &["produce"], Some(events.as_bytes()));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = feedlog(&data, &["run", "--until-idle", "--quiet"], None);
    assert_eq!(code, 0, "{err}");
    let reader = feedlog::api::query::Reader::open(&DataDir::open(&data).unwrap()).unwrap();
    let mut pages = Vec::new();
    for mode in ["newest", "first", "none"] {
        let (code, out, err) = feedlog(&data, &["query", "timeline", "1", "--reposts", mode], None);
        assert_eq!(code, 0, "{mode}: {err}");
        let m = feedlog::api::query::RepostMode::parse(mode).unwrap();
        let mut page = reader.timeline_in(feedlog::UserId(1), m, 20, None).unwrap();
        reader
            .decorate(&mut page.items, Some(feedlog::UserId(1)))
            .unwrap();
        assert_eq!(out.trim(), serde_json::to_string(&page).unwrap(), "{mode}");
        pages.push(out);
    }
    assert!(
        pages[0] != pages[1] && pages[1] != pages[2] && pages[0] != pages[2],
        "{pages:?}"
    );
    for args in [
        &["query", "posts", "2", "--reposts", "none"][..],
        &["query", "posts", "2", "--explain"],
        &["query", "timeline", "1", "--reposts", "sideways"],
    ] {
        let (code, _, err) = feedlog(&data, args, None);
        assert_eq!(code, 2, "{args:?}: {err}");
    }
    let (code, _, err) = feedlog(&data, &["query", "nope", "1"], None);
    assert_eq!(code, 2, "{err}");
    let (_, help, _) = feedlog(&data, &["query", "--help"], None);
    for view in [
        "timeline",
        "posts",
        "counters",
        "recent-followers",
        "followers",
        "followees",
        "mutes",
        "blocks",
    ] {
        assert!(
            err.contains(view) && help.contains(view),
            "{view}: {err}\n{help}"
        );
    }
}

// Proves `log show` reads the event at each position `query timeline --explain` names (the post and the follow it cites, byte for byte as produced), and that a position past a partition's end or a partition that does not exist exits 2.
#[test]
fn log_show_reads_the_events_explain_names() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let follow = r#"{"type":"follow","follower":1,"followee":2,"ts":1700000000000}"#;
    let post = r#"{"type":"post","author":2,"post_id":10,"ts":1700000000001}"#;
    let input = format!("{follow}\n{post}\n");
    let (code, _, err) = feedlog(&data, &["produce"], Some(input.as_bytes()));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = feedlog(&data, &["run", "--until-idle", "--quiet"], None);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = feedlog(&data, &["query", "timeline", "1", "--explain"], None);
    assert_eq!(code, 0, "{err}");
    let page: serde_json::Value = serde_json::from_str(&out).unwrap();
    let why = &page["items"][0]["why"][0];
    for (position, event) in [(&why["event"], post), (&why["follow_event"], follow)] {
        let (p, o) = (
            position["partition"].to_string(),
            position["offset"].to_string(),
        );
        let args = ["log", "show", "--partition", &p, "--offset", &o];
        let (code, out, err) = feedlog(&data, &args, None);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(out.trim(), event, "{args:?}");
    }
    for args in [
        &["log", "show", "--partition", "0", "--offset", "1000"][..],
        &["log", "show", "--partition", "99", "--offset", "0"],
    ] {
        let (code, _, err) = feedlog(&data, args, None);
        assert_eq!(code, 2, "{args:?}: {err}");
    }
}
