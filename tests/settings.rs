//! Settings and what a command writes about itself: the --config file
//! (checked, and read for every flag in both modes, under variables and
//! flags), progress lines and their pace, and log lines as JSON.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::{feedlog, generated_log};

// Proves `config check` passes a valid TLS + SCRAM file with its effective settings (secrets masked) and exits 2 with the reason for an unknown key, a mechanism librdkafka refuses, and inconsistent settings.
#[test]
fn config_check_reports_effective_settings_and_refuses_bad_files() {
    let tmp = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let good = write(
        "good.toml",
        r#"kafka = "broker-1:9094"
events_topic = "app.events"
checkpoints = "/var/lib/feedlog/checkpoints"
[kafka_options]
"security.protocol" = "SASL_SSL"
"sasl.mechanisms" = "SCRAM-SHA-512"
"sasl.username" = "feedlog"
"sasl.password" = "hunter2"
"compression.codec" = "zstd"
"#,
    );
    let (code, out, err) = feedlog(tmp.path(), &["config", "check", &good], None);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("topics: events app.events, effects effects"),
        "{out}"
    );
    assert!(out.contains("sasl.mechanisms = SCRAM-SHA-512"), "{out}");
    assert!(!out.contains("hunter2"), "the password is printed: {out}");
    for (name, text, reason) in [
        ("typo.toml", "kafka = \"b:1\"\nlistn = \"x\"\n", "unknown setting `listn`"),
        ("value.toml", "inbox_cap = \"lots\"\n", "invalid value 'lots'"),
        (
            "mechanism.toml",
            "kafka = \"b:1\"\n[kafka_options]\n\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanisms\" = \"NOPE\"\n",
            "Unsupported SASL mechanism",
        ),
        (
            "every.toml",
            "kafka = \"b:1\"\ncheckpoint_every = 5\n",
            "needs a checkpoint directory",
        ),
    ] {
        let path = write(name, text);
        let (code, out, err) = feedlog(tmp.path(), &["config", "check", &path], None);
        // A bad --config file is a command line mistake, as for `run`.
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert!(err.contains(reason), "{name}: {err}");
    }
}

// Proves any flag's setting can come from the --config file in embedded mode (here the inbox cap and the data directory), that its variable wins over the file and the flag over both, and that an unknown key stops the command before it does anything.
#[test]
fn config_file_settings_in_embedded_mode_with_flags_and_variables_on_top() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("feedlog.toml");
    let run = |data: &str, config: &str, env: Option<&str>, flag: Option<&str>| {
        std::fs::write(
            &file,
            format!("data = \"{data}\"\ninbox_cap = 3\nquiet = true\n{config}"),
        )
        .unwrap();
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_feedlog"));
        c.env_remove("FEEDLOG_INBOX_CAP")
            .env_remove("FEEDLOG_DATA")
            .env_remove("FEEDLOG_QUIET");
        if let Some(v) = env {
            c.env("FEEDLOG_INBOX_CAP", v);
        }
        c.arg("--config")
            .arg(&file)
            .args(["run", "--until-idle", "--no-sync"]);
        if let Some(v) = flag {
            c.args(["--inbox-cap", v]);
        }
        let dir = tmp.path().join(data);
        let post = br#"{"type":"post","author":1,"post_id":1,"ts":1}"#;
        if !config.contains("inbox_capp") {
            let (code, _, err) = feedlog(&dir, &["produce", "-"], Some(post));
            assert_eq!(code, 0, "{err}");
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let cap = std::fs::read_to_string(dir.join("feedlog.json"))
            .ok()
            .and_then(|j| serde_json::from_str::<serde_json::Value>(&j).ok())
            .and_then(|j| j["inbox_cap"].as_u64());
        (out.status.code(), cap, err)
    };
    let (code, cap, err) = run(&tmp.path().join("a").display().to_string(), "", None, None);
    assert_eq!((code, cap), (Some(0), Some(3)), "{err}");
    assert!(
        !err.contains("s  events "),
        "quiet came from the file: {err}"
    );
    let (code, cap, err) = run(
        &tmp.path().join("b").display().to_string(),
        "",
        Some("4"),
        None,
    );
    assert_eq!((code, cap), (Some(0), Some(4)), "{err}");
    let (code, cap, err) = run(
        &tmp.path().join("c").display().to_string(),
        "",
        Some("4"),
        Some("5"),
    );
    assert_eq!((code, cap), (Some(0), Some(5)), "{err}");
    let d = tmp.path().join("d").display().to_string();
    let (code, cap, err) = run(&d, "inbox_capp = 2\n", None, None);
    assert_eq!((code, cap), (Some(2), None), "{err}");
    assert!(err.contains("unknown setting `inbox_capp`"), "{err}");
    assert!(
        !std::path::Path::new(&d).exists(),
        "a refused file created {d}"
    );
}

// Proves `run --progress SECS` prints progress lines at that pace and `--quiet` prints none but the summary.
#[test]
fn run_progress_interval_and_quiet() {
    let log = generated_log(300, 20_000);
    let progress_lines = |args: &[&str]| {
        let tmp = tempfile::tempdir().unwrap();
        let (code, _, err) = feedlog(tmp.path(), &["produce", "-"], Some(log.as_bytes()));
        assert_eq!(code, 0, "{err}");
        let mut run = vec!["run", "--until-idle"];
        run.extend_from_slice(args);
        let (code, out, err) = feedlog(tmp.path(), &run, None);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("processed "), "no summary: {out}");
        err.lines().filter(|l| l.contains("s  events ")).count()
    };
    assert!(progress_lines(&["--progress", "0.01"]) >= 1);
    assert_eq!(progress_lines(&["--quiet", "--progress", "0.01"]), 0);
}

// Proves that with `--log-format json` every stderr line of a run (status and progress lines included) and a command's error are JSON records.
#[test]
fn json_status_and_error_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let post = br#"{"type":"post","author":1,"post_id":1,"ts":1}"#;
    let (code, _, err) = feedlog(tmp.path(), &["produce", "-"], Some(post));
    assert_eq!(code, 0, "{err}");
    let records = |err: &str| -> Vec<serde_json::Value> {
        err.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    };
    let json = ["--log-format", "json"];
    let run = [
        &json[..],
        &["run", "--until-idle", "--no-sync", "--progress", "0.01"],
    ]
    .concat();
    let (code, _, err) = feedlog(tmp.path(), &run, None);
    assert_eq!(code, 0, "{err}");
    let lines = records(&err);
    assert!(
        lines.iter().any(|v| v["level"] == "INFO"
            && v["fields"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("events to process")),
        "{err}"
    );
    let (code, _, err) = feedlog(
        tmp.path(),
        &[&json[..], &["drop-state", "nope"]].concat(),
        None,
    );
    assert_eq!(code, 1);
    let lines = records(&err);
    assert_eq!(lines.last().unwrap()["level"], "ERROR", "{err}");
}

// Proves `--log-format json` writes log lines as JSON objects (here the warning that a torn log tail was cut).
#[test]
fn json_log_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let post = |id: u64| format!("{{\"type\":\"post\",\"author\":1,\"post_id\":{id},\"ts\":1}}\n");
    let (code, _, err) = feedlog(tmp.path(), &["produce", "-"], Some(post(1).as_bytes()));
    assert_eq!(code, 0, "{err}");
    // Bytes that never became a record, at the end of user 1's partition.
    let events = tmp.path().join("log/events");
    for p in std::fs::read_dir(&events).unwrap() {
        let seg = p.unwrap().path().join("00000000000000000000.log");
        if seg.exists() && std::fs::metadata(&seg).unwrap().len() > 0 {
            let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
            std::io::Write::write_all(&mut f, &[1, 2, 3]).unwrap();
        }
    }
    let (code, _, err) = feedlog(
        tmp.path(),
        &["--log-format", "json", "produce", "-"],
        Some(post(2).as_bytes()),
    );
    assert_eq!(code, 0, "{err}");
    let warning = err
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["level"] == "WARN")
        .unwrap_or_else(|| panic!("no JSON warning in {err}"));
    assert!(warning["fields"]["message"]
        .as_str()
        .unwrap()
        .contains("torn tail"));
}

// Proves a flag only Kafka mode reads is refused in embedded mode (exit 2, the flag named) instead of ignored, from the command line or the --config file, and that `run --help` lists those flags under their own heading.
#[test]
fn kafka_only_flags_are_refused_in_embedded_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = feedlog(tmp.path(), &["produce"], Some(b""));
    assert_eq!(code, 0, "{err}");
    for (args, named) in [
        (
            &["run", "--until-idle", "--standbys", "1"][..],
            "--standbys",
        ),
        (
            &["run", "--until-idle", "--instance-id", "a"],
            "--instance-id",
        ),
        (&["run", "--until-idle", "--cooperative"], "--cooperative"),
        (
            &["run", "--until-idle", "--checkpoints", "c"],
            "--checkpoints",
        ),
        (&["--group", "g", "run", "--until-idle"], "--group"),
        (&["--topic-prefix", "p", "states"], "--topic-prefix"),
        (&["rebuild", "--into", "x", "--member", "m"], "--member"),
    ] {
        let (code, _, err) = feedlog(tmp.path(), args, None);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(named) && err.contains("Kafka mode"),
            "{args:?}: {err}"
        );
    }
    let file = tmp.path().join("f.toml");
    std::fs::write(&file, "standbys = 2\n").unwrap();
    let config = file.to_str().unwrap();
    let (code, _, err) = feedlog(
        tmp.path(),
        &["--config", config, "run", "--until-idle"],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--standbys"), "{err}");
    let (code, help, err) = feedlog(tmp.path(), &["run", "--help"], None);
    assert_eq!(code, 0, "{err}");
    let kafka = help.find("Kafka mode:").expect("a Kafka mode heading");
    for flag in [
        "--standbys",
        "--instance-id",
        "--group",
        "--kafka <BROKERS>",
    ] {
        let at = help
            .find(flag)
            .unwrap_or_else(|| panic!("{flag} in {help}"));
        assert!(at > kafka, "{flag} is not under the Kafka heading: {help}");
    }
    assert!(help.find("--inbox-cap").unwrap() < kafka, "{help}");
}

// Proves an idle `run` says once that it caught up and then prints no more progress lines (it used to print one every interval for ever), and that it prints progress again when events arrive.
#[test]
fn an_idle_run_says_it_caught_up_once_then_stays_quiet() {
    let tmp = tempfile::tempdir().unwrap();
    let log = generated_log(50, 500);
    let (code, _, err) = feedlog(tmp.path(), &["produce", "-"], Some(log.as_bytes()));
    assert_eq!(code, 0, "{err}");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_feedlog"))
        .arg("--data")
        .arg(tmp.path())
        .args(["run", "--no-sync", "--progress", "0.05"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Thirty intervals of idling, then one more event, then idling again.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let one = br#"{"type":"post","author":1,"post_id":987654321,"ts":1700000000000}"#;
    let (code, _, err) = feedlog(tmp.path(), &["produce"], Some(one));
    assert_eq!(code, 0, "{err}");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &run.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("s  events ") || l.contains("caught up"))
        .collect();
    let caught_up: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("caught up"))
        .collect();
    // Once after the log, once after the one event; nothing else while idle.
    assert_eq!(caught_up.len(), 2, "{err}");
    assert_eq!(*caught_up.last().unwrap(), lines.len() - 1, "{err}");
    // Between the two, only lines about the new event: it waits (lag) or
    // was read (one more event); a line of the idle state would be neither.
    let field = |l: &str, name: &str| -> u64 {
        let rest = &l[l.find(name).unwrap_or_else(|| panic!("{name} in {l}")) + name.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().unwrap()
    };
    let idle = field(lines[caught_up[0]], "events ");
    let between = &lines[caught_up[0] + 1..caught_up[1]];
    assert!(
        !between.is_empty(),
        "no progress line for the new event: {err}"
    );
    for l in between {
        assert!(
            field(l, "events ") > idle || field(l, "lag ") > 0,
            "a progress line while idle: {l}\n{err}"
        );
    }
}

// Proves a --config key is the flag's long name with `_` (`cors_origin` for --cors-origin, which used to be refused as unknown), that its variable's name (`cors_origins`) is taken too, that a misspelt key is still refused, and that every problem of a file is named at once, keys and (for `config check`) values (only the first was).
#[test]
fn config_keys_are_long_flag_names() {
    let tmp = tempfile::tempdir().unwrap();
    for (text, code) in [
        (
            "cors_origin = [\"https://a.example\", \"https://b.example\"]\n",
            0,
        ),
        ("cors_origins = [\"https://a.example\"]\n", 0),
        ("cors_orign = [\"https://a.example\"]\n", 2),
    ] {
        let path = tmp.path().join("c.toml");
        std::fs::write(&path, text).unwrap();
        let (got, out, err) = feedlog(
            tmp.path(),
            &["config", "check", path.to_str().unwrap()],
            None,
        );
        assert_eq!(got, code, "{text}: {out}{err}");
    }
    // Every problem of a file at once, for `config check` and for `run`.
    let path = tmp.path().join("bad.toml");
    std::fs::write(&path, "cors_orign = \"x\"\ninbox_cap = [1, 2]\nbogus = 1\n").unwrap();
    let file = path.to_str().unwrap();
    for args in [&["config", "check", file][..], &["--config", file, "run"]] {
        let (code, _, err) = feedlog(tmp.path(), args, None);
        assert_eq!(code, 2, "{args:?}: {err}");
        for named in ["`cors_orign`", "`inbox_cap`", "`bogus`"] {
            assert!(err.contains(named), "{args:?}: {named} not named: {err}");
        }
    }
    // Every value `run` refuses, at once, for `config check`.
    std::fs::write(
        &path,
        "inbox_cap = \"many\"\npull_threshold = -3\nlisten = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let (code, _, err) = feedlog(tmp.path(), &["config", "check", file], None);
    assert_eq!(code, 2, "{err}");
    for named in ["`inbox_cap`", "`pull_threshold`"] {
        assert!(err.contains(named), "{named} not named: {err}");
    }
    assert!(!err.contains("`listen`"), "{err}");
}

/// The values of the samples of `name` in a `/metrics` text, in order.
fn samples(metrics: &str, name: &str) -> Vec<u64> {
    metrics
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with([' ', '{']))
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect()
}

// Proves the memory and thread settings of `run` and `serve` reach the stores and the server: `/metrics` reports the block cache's capacity, each partition's share of the heads and page budgets (none for `serve`, whose stores follow without commits) and the HTTP threads, as asked.
#[test]
fn memory_and_thread_settings_reach_the_stores_and_the_server() {
    use common::http::Proc;
    let tmp = tempfile::tempdir().unwrap();
    let log = generated_log(50, 500);
    let (code, _, err) = feedlog(tmp.path(), &["produce", "-"], Some(log.as_bytes()));
    assert_eq!(code, 0, "{err}");
    let metrics = |p: &Proc| String::from_utf8(p.client().get("/metrics").body).unwrap();
    let run = Proc::serving(
        tmp.path(),
        &[
            "run",
            "--no-sync",
            "--listen",
            "127.0.0.1:0",
            "--block-cache-mb",
            "24",
            "--heads-mb",
            "3",
            "--page-cache-mb",
            "0",
            "--http-threads",
            "3",
        ],
    );
    let m = metrics(&run);
    assert_eq!(
        samples(&m, "feedlog_block_cache_capacity_bytes"),
        [24 << 20],
        "{m}"
    );
    assert_eq!(samples(&m, "feedlog_http_threads"), [3], "{m}");
    assert_eq!(
        samples(&m, "feedlog_page_cache_budget_bytes"),
        [0; 8],
        "{m}"
    );
    let heads = samples(&m, "feedlog_inbox_heads_budget_bytes");
    let total: u64 = heads.iter().sum();
    assert_eq!(heads.len(), 8, "{m}");
    assert!(heads.iter().all(|&h| h == heads[0]), "{heads:?}");
    // Each partition's share, rounded down to whole shards.
    assert!(
        total <= 3 << 20 && total > (3 << 20) * 99 / 100,
        "{heads:?}"
    );
    assert_eq!(run.terminate(), Some(0));

    let serve = Proc::serving(
        tmp.path(),
        &["serve", "--listen", "127.0.0.1:0", "--block-cache-mb", "40"],
    );
    let m = metrics(&serve);
    assert_eq!(
        samples(&m, "feedlog_block_cache_capacity_bytes"),
        [40 << 20],
        "{m}"
    );
    assert_eq!(
        samples(&m, "feedlog_inbox_heads_budget_bytes"),
        [0; 8],
        "{m}"
    );
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    assert_eq!(samples(&m, "feedlog_http_threads"), [cores as u64], "{m}");
}

// Proves a SIGTERM sent the moment `run` or `serve` announces its API stops it cleanly (exit 0), never killing it before the signal is watched.
#[test]
fn a_sigterm_right_after_the_api_is_announced_stops_cleanly() {
    use common::http::Proc;
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = feedlog(
        tmp.path(),
        &["produce", "-"],
        Some(generated_log(20, 100).as_bytes()),
    );
    assert_eq!(code, 0, "{err}");
    for _ in 0..3 {
        let run = Proc::serving(tmp.path(), &["run", "--no-sync", "--listen", "127.0.0.1:0"]);
        assert_eq!(run.terminate(), Some(0), "run");
        let serve = Proc::serving(tmp.path(), &["serve", "--listen", "127.0.0.1:0"]);
        assert_eq!(serve.terminate(), Some(0), "serve");
    }
}
