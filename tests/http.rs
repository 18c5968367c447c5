//! The HTTP read API: every route against the oracle, bad inputs,
//! readiness and metrics — and the `run --listen` and `serve` commands end
//! to end. The live timeline stream is in `http_stream.rs`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::api::{append, processed, processed_with, wide_limits, Server};
use common::http::Proc;
use common::{check_all, generated_log, oracle_of, wait_until};
use feedlog::api::http::ApiConfig;
use feedlog::core::Partition;
use feedlog::state::datadir::DataDir;
use std::time::Duration;

// Proves every route answers every user exactly as the oracle says: counters (one and batched), recent followers, and every page of every paged view.
#[test]
fn every_route_equals_the_oracle() {
    let tmp = tempfile::tempdir().unwrap();
    let log = generated_log(120, 6000);
    let processor = processed(tmp.path(), &log, 3);
    let server = Server::start(&processor, wide_limits());
    let (oracle, max_user) = oracle_of(&log);
    check_all(&server.client, &oracle, max_user, 25).unwrap();

    // Batched counters: in the order asked, repeats and unknown users included.
    let mut ids: Vec<u64> = (1..=max_user + 1).rev().collect();
    ids.push(1);
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let got = server
        .client
        .json(&format!("/v1/counters?ids={list}"))
        .unwrap();
    let got = got["counters"].as_array().unwrap();
    assert_eq!(got.len(), ids.len());
    for (c, &u) in got.iter().zip(&ids) {
        let (f, g, p) = oracle.counters(u);
        assert_eq!(
            c,
            &serde_json::json!({"user": u, "followers": f, "followees": g, "posts": p, "reposts": oracle.reposts_counter(u), "likes": oracle.likes_counter(u)})
        );
    }
}

// Proves every page of every timeline equals the oracle when most readers are asleep (their pages read by pull, inline for those who follow few users).
#[test]
fn timelines_of_sleepers_equal_the_oracle() {
    let tmp = tempfile::tempdir().unwrap();
    let log = generated_log(120, 6000);
    let config = feedlog::task::embedded::ProcessorConfig {
        // The generated log advances 7 ms per event.
        inactive_after: Some(500),
        ..Default::default()
    };
    let processor = processed_with(tmp.path(), &log, 3, config);
    let server = Server::start(&processor, wide_limits());
    let (oracle, max_user) = oracle_of(&log);
    check_all(&server.client, &oracle, max_user, 25).unwrap();
}

// Proves bad ids, cursors, limits and parameters get the documented 4xx status and error shape, never a 500, unknown users are empty views, and /openapi.json names every route this processor serves and no other.
#[test]
fn bad_inputs_get_clear_errors_never_500() {
    let tmp = tempfile::tempdir().unwrap();
    let log = generated_log(30, 800);
    let processor = processed(tmp.path(), &log, 2);
    let server = Server::start(&processor, ApiConfig::default());
    let c = server.client;
    // Real cursors, to misuse: one of user 2's timeline, one of its posts.
    let page = c.json("/v1/users/2/timeline?limit=1").unwrap();
    let timeline_cursor = page["next_cursor"].as_str().expect("two pages").to_string();
    let page = c.json("/v1/users/1/posts?limit=1").unwrap();
    let posts_cursor = page["next_cursor"].as_str().expect("two pages").to_string();
    let many: Vec<String> = (1..=1001).map(|i| i.to_string()).collect();
    let too_many = format!("/v1/counters?ids={}", many.join(","));
    let cases: Vec<(String, u16, &str)> = vec![
        ("/v1/users/abc/timeline".into(), 400, "bad_user"),
        ("/v1/users/0/timeline".into(), 400, "bad_user"),
        ("/v1/users/-3/counters".into(), 400, "bad_user"),
        ("/v1/users/1.5/posts".into(), 400, "bad_user"),
        (
            "/v1/users/18446744073709551616/counters".into(),
            400,
            "bad_user",
        ),
        ("/v1/users/%20/followers".into(), 400, "bad_user"),
        (
            "/v1/users/2/timeline?cursor=garbage".into(),
            400,
            "bad_cursor",
        ),
        ("/v1/users/2/timeline?cursor=".into(), 400, "bad_cursor"),
        (
            format!("/v1/users/3/timeline?cursor={timeline_cursor}"),
            400,
            "bad_cursor",
        ),
        (
            format!("/v1/users/2/posts?cursor={timeline_cursor}"),
            400,
            "bad_cursor",
        ),
        (
            format!("/v1/users/1/timeline?cursor={posts_cursor}"),
            400,
            "bad_cursor",
        ),
        (
            format!("/v1/users/1/followers?cursor={posts_cursor}"),
            400,
            "bad_cursor",
        ),
        ("/v1/users/1/timeline?limit=0".into(), 400, "bad_limit"),
        ("/v1/users/1/timeline?limit=201".into(), 400, "bad_limit"),
        (
            "/v1/users/1/followers/recent?limit=1000000".into(),
            400,
            "bad_limit",
        ),
        ("/v1/users/1/posts?limit=-1".into(), 400, "bad_limit"),
        ("/v1/users/1/posts?limit=ten".into(), 400, "bad_limit"),
        (
            "/v1/users/1/followees?limit=99999999999999999999999".into(),
            400,
            "bad_limit",
        ),
        ("/v1/users/1/timeline?page=2".into(), 400, "bad_query"),
        ("/v1/users/1/counters?limit=5".into(), 400, "bad_query"),
        ("/v1/counters".into(), 400, "bad_query"),
        ("/v1/counters?ids=".into(), 400, "bad_query"),
        ("/v1/counters?ids=1,x".into(), 400, "bad_user"),
        ("/v1/counters?ids=1,0".into(), 400, "bad_user"),
        (too_many, 400, "bad_query"),
        ("/v1/users/1/timeline/stream?x=1".into(), 400, "bad_query"),
        ("/v1/nothing".into(), 404, "not_found"),
        ("/v1/users/1".into(), 404, "not_found"),
    ];
    for (path, status, code) in &cases {
        let r = c.get(path);
        let body = r.json().unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert_eq!(
            (r.status, body["error"]["code"].as_str()),
            (*status, Some(*code)),
            "GET {path}: {body}"
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "GET {path}: no message: {body}"
        );
    }
    // A limit above the maximum names the maximum.
    let r = c.get("/v1/users/1/timeline?limit=201");
    assert!(r.json().unwrap()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("200"));
    // The API is read-only.
    let r = c.request("POST", "/v1/users/1/counters");
    assert_eq!(r.status, 405);
    assert_eq!(r.json().unwrap()["error"]["code"], "method_not_allowed");
    // An unknown user is an empty view, not an error.
    let unknown = 1_000_000;
    assert_eq!(
        c.json(&format!("/v1/users/{unknown}/timeline")).unwrap(),
        serde_json::json!({"items": [], "next_cursor": null})
    );
    assert_eq!(
        c.json(&format!("/v1/users/{unknown}/counters")).unwrap(),
        serde_json::json!({"user": unknown, "followers": 0, "followees": 0, "posts": 0, "reposts": 0, "likes": 0})
    );
    assert_eq!(
        c.json(&format!("/v1/users/{unknown}/followers/recent"))
            .unwrap(),
        serde_json::json!({"items": []})
    );
    // The description of the API is served and names every route this
    // processor serves: all but the internal ones of Kafka mode.
    let spec = c.json("/openapi.json").unwrap();
    for route in feedlog::api::http::ROUTES {
        let served = !route.starts_with("/v1/internal/");
        assert_eq!(
            spec["paths"].get(*route).is_some(),
            served,
            "{route} in /openapi.json"
        );
    }
}

// Proves --string-ids answers every view with the same ids as strings (timestamps, counts and cursors unchanged), and the default answers numbers.
#[test]
fn string_ids_answer_the_same_views_with_ids_as_strings() {
    let tmp = tempfile::tempdir().unwrap();
    let log = generated_log(40, 1500);
    let processor = processed(tmp.path(), &log, 2);
    let numbers = Server::start(&processor, ApiConfig::default());
    let strings = Server::start(
        &processor,
        ApiConfig {
            string_ids: true,
            ..ApiConfig::default()
        },
    );
    // The expected answer: every id field of the numeric one, as a string.
    fn quoted(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, f) in m.iter_mut() {
                    if ["post_id", "author", "user"].contains(&k.as_str()) {
                        assert!(f.is_u64(), "{k} is not a number by default: {f}");
                        *f = f.to_string().into();
                    } else {
                        quoted(f);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(quoted),
            _ => {}
        }
    }
    let mut checked = 0;
    for user in 1..=40 {
        for path in [
            format!("/v1/users/{user}/timeline?limit=7"),
            format!("/v1/users/{user}/posts"),
            format!("/v1/users/{user}/followers"),
            format!("/v1/users/{user}/followees"),
            format!("/v1/users/{user}/followers/recent"),
            format!("/v1/users/{user}/counters"),
            format!("/v1/counters?ids={user},{}", user + 1),
        ] {
            let mut want = numbers.client.json(&path).unwrap();
            quoted(&mut want);
            assert_eq!(strings.client.json(&path).unwrap(), want, "{path}");
            checked += 1;
        }
    }
    assert_eq!(checked, 280);
}

// Proves /metrics is valid Prometheus text whose counters match what was processed and requested, and /readyz follows the lag.
#[test]
fn metrics_parse_and_readiness_follows_lag() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = generated_log(40, 1500);
    for u in 1..=7 {
        log.push_str(&format!("{{\"type\":\"seen\",\"user\":{u},\"ts\":{u}}}\n"));
    }
    let processor = processed(tmp.path(), &log, 2);
    let server = Server::start(
        &processor,
        ApiConfig {
            ready_lag: 10,
            ..ApiConfig::default()
        },
    );
    let c = server.client;
    let r = c.get("/readyz");
    assert_eq!(
        (r.status, r.json().unwrap()),
        (
            200,
            serde_json::json!({"ready": true, "lag": 0, "max_lag": 10})
        )
    );
    assert_eq!(c.get("/healthz").status, 200);
    for _ in 0..3 {
        assert_eq!(c.get("/v1/users/1/timeline").status, 200);
    }
    // A user with no timeline: a materialized (empty) first page, kept at
    // the first read and answered from the page cache at the second.
    for _ in 0..2 {
        assert_eq!(c.get("/v1/users/4000000/timeline").status, 200);
    }

    let r = c.get("/metrics");
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    let text = String::from_utf8(r.body).unwrap();
    strict_exposition_format(&text);
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    let value = |name: &str, label: Option<(&str, &str)>| -> f64 {
        let s = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
            .unwrap_or_else(|| panic!("no sample {name} {label:?} in\n{text}"));
        match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{name} is {other:?}"),
        }
    };
    let count = |kind: &str| {
        log.lines()
            .filter(|l| l.contains(&format!("\"type\":\"{kind}\"")))
            .count() as f64
    };
    for kind in feedlog::core::event::EventKind::all().map(|k| k.as_str()) {
        assert_eq!(
            value("feedlog_events_applied_total", Some(("kind", kind))),
            count(kind),
            "{kind}"
        );
    }
    let lag: Vec<_> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "feedlog_lag_records")
        .collect();
    assert_eq!(lag.len(), 4, "two topics of two partitions");
    assert!(lag
        .iter()
        .all(|s| matches!(s.value, prometheus_parse::Value::Gauge(v) if v == 0.0)));
    assert!(value("feedlog_deliveries_total", None) > 0.0);
    // The hybrid fan-out's gauges are each partition's state counted.
    for p in Partition::all(2) {
        let g = feedlog::core::gauges::recount(&*processor.store(p)).unwrap();
        let label = p.to_string();
        for (name, want) in [
            ("feedlog_pulled_authors", g.pulled),
            ("feedlog_sleeping_readers", g.asleep),
            ("feedlog_pulled_copies", g.copies),
            ("feedlog_refills_awaited", g.refills),
        ] {
            let got = value(name, Some(("partition", &label)));
            assert_eq!(got, want as f64, "{name} of partition {p}");
        }
    }
    // Responses by code; the build and the process as Prometheus names them.
    assert!(value("feedlog_http_responses_total", Some(("code", "200"))) >= 5.0);
    assert_eq!(
        value(
            "feedlog_build_info",
            Some(("version", env!("CARGO_PKG_VERSION")))
        ),
        1.0
    );
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(value(name, None) > 0.0, "{name}");
    }
    let page_cache = |name: &str| -> f64 {
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == name)
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v) => v,
                ref other => panic!("{name} is {other:?}"),
            })
            .sum()
    };
    assert!(page_cache("feedlog_page_cache_hits_total") >= 1.0, "{text}");
    assert!(
        page_cache("feedlog_page_cache_misses_total") >= 2.0,
        "{text}"
    );
    let timeline_requests = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "feedlog_http_request_duration_seconds"
                && s.labels.get("route") == Some("/v1/users/:id/timeline")
        })
        .expect("a latency histogram for the timeline route");
    match &timeline_requests.value {
        prometheus_parse::Value::Histogram(buckets) => {
            assert_eq!(buckets.last().unwrap().count, 5.0, "five timeline requests");
        }
        other => panic!("not a histogram: {other:?}"),
    }

    // Unprocessed input beyond the allowed lag: not ready.
    let more: String = (0..20)
        .map(|i| {
            format!(
                "{{\"type\":\"post\",\"author\":1,\"post_id\":{},\"ts\":5}}\n",
                900_000 + i
            )
        })
        .collect();
    append(tmp.path(), &more);
    let r = c.get("/readyz");
    assert_eq!(
        (r.status, r.json().unwrap()),
        (
            503,
            serde_json::json!({"ready": false, "lag": 20, "max_lag": 10})
        )
    );
    processor
        .run(&feedlog::task::Shutdown::new(), true)
        .unwrap();
    assert_eq!(c.get("/readyz").status, 200);
}

/// Checks every line against the text exposition format (0.0.4): `# HELP`
/// and `# TYPE` before a family's samples, metric and label names well
/// formed, label values quoted, values numbers — stricter than the parser,
/// which skips what it does not understand.
fn strict_exposition_format(text: &str) {
    let name_ok = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut typed = std::collections::HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP has text");
            assert!(name_ok(name) && !help.is_empty(), "{line}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a kind");
            assert!(name_ok(name), "{line}");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(
                typed.insert(name.to_string(), kind.to_string()).is_none(),
                "two TYPEs: {line}"
            );
        } else {
            let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
            assert!(value.parse::<f64>().is_ok(), "{line}");
            let (name, labels) = match series.split_once('{') {
                Some((n, l)) => (n, l.strip_suffix('}').expect("labels close")),
                None => (series, ""),
            };
            assert!(labels.is_empty() || labels.ends_with('"'), "{line}");
            let inner = labels.strip_suffix('"').unwrap_or(labels);
            for pair in inner.split_terminator("\",") {
                let (k, v) = pair.split_once("=\"").expect("label=\"value\"");
                assert!(name_ok(k) && !v.contains('"'), "{line}");
            }
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|f| typed.get(*f).is_some_and(|k| k == "histogram"))
                })
                .unwrap_or(name);
            assert!(typed.contains_key(family), "sample before its TYPE: {line}");
        }
    }
}

// Proves `run --listen` serves while processing and `serve` beside it follows the processor's new state; both stop cleanly on SIGTERM.
#[test]
fn run_listen_and_serve_beside_it() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let log = generated_log(50, 2000);
    DataDir::create_or_open(&data, Some(2)).unwrap();
    append(&data, &log);
    let run = Proc::serving(&data, &["run", "--no-sync", "--listen", "127.0.0.1:0"]);
    let live = run.client();
    wait_until("run --listen catches up", Duration::from_secs(60), || {
        live.get("/readyz").json().unwrap()["lag"] == 0
    });
    let serve = Proc::serving(&data, &["serve", "--listen", "127.0.0.1:0"]);
    let follower = serve.client();
    let (oracle, _) = oracle_of(&log);
    let want = |o: &common::oracle::Oracle| {
        let (f, g, p) = o.counters(1);
        serde_json::json!({"user": 1, "followers": f, "followees": g, "posts": p, "reposts": o.reposts_counter(1), "likes": o.likes_counter(1)})
    };
    // `lag` 0 can come between a commit and the shipping of its messages
    // (the outbox's records are not in the `effects` log yet): the views
    // reach the oracle once those are applied.
    wait_until(
        "run --listen serves the processed state",
        Duration::from_secs(60),
        || live.json("/v1/users/1/counters").unwrap() == want(&oracle),
    );
    wait_until(
        "serve sees the processed state",
        Duration::from_secs(60),
        || follower.json("/v1/users/1/counters").unwrap() == want(&oracle),
    );
    // New events: both the processor's API and the read-only one follow.
    let more = r#"{"type":"follow","follower":4999,"followee":1,"ts":1800000000000}"#;
    append(&data, more);
    let (oracle, _) = oracle_of(&format!("{log}{more}\n"));
    wait_until(
        "run --listen applies the new follow",
        Duration::from_secs(60),
        || live.json("/v1/users/1/counters").unwrap() == want(&oracle),
    );
    wait_until(
        "serve follows the new state",
        Duration::from_secs(60),
        || follower.json("/v1/users/1/counters").unwrap() == want(&oracle),
    );
    assert_eq!(
        follower
            .json("/v1/users/1/followers/recent?limit=1")
            .unwrap(),
        serde_json::json!({"items": [{"user": 4999, "ts": 1800000000000u64}]})
    );
    assert_eq!(serve.terminate(), Some(0));
    assert_eq!(run.terminate(), Some(0));
}

// Regression: a log cut under the state left /readyz ready with lag 0. Now it is not ready and says which partition's log ends before what the state applied; a corrupt log makes it not ready too.
#[test]
fn readiness_checks_the_log_holds_the_state() {
    let tmp = tempfile::tempdir().unwrap();
    let processor = processed(tmp.path(), &generated_log(40, 1500), 2);
    let server = Server::start(&processor, ApiConfig::default());
    assert_eq!(server.client.get("/readyz").status, 200);
    let dir = DataDir::open(tmp.path()).unwrap();
    let events = dir.logs().dir(feedlog::log::Topic::Events, Partition(1));
    let end = feedlog::log::embedded::check(&events).unwrap().end;
    feedlog::log::embedded::truncate_at(&events, end / 2).unwrap();
    let r = server.client.get("/readyz");
    let body = r.json().unwrap();
    assert_eq!(r.status, 503, "{body}");
    let problem = body["problems"][0].as_str().unwrap();
    assert!(
        problem.contains("partition 1")
            && problem.contains("events")
            && problem.contains(&format!("ends at {}", end / 2)),
        "{body}"
    );
    // A corrupt segment: not ready, and the answer names it.
    let segment = events.join("00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 1;
    std::fs::write(&segment, bytes).unwrap();
    let r = server.client.get("/readyz");
    let body = r.json().unwrap();
    assert_eq!(r.status, 503, "{body}");
    assert!(
        body["problems"][0]
            .as_str()
            .unwrap()
            .contains("corrupt log segment"),
        "{body}"
    );
}

// Regression: while one partition's log was corrupt, /metrics answered 500 for the whole scrape. Now it renders everything else, leaves out that partition's lag and reports it as feedlog_log_readable 0.
#[test]
fn metrics_report_a_corrupt_log_and_keep_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let processor = processed(tmp.path(), &generated_log(40, 1500), 2);
    let server = Server::start(&processor, ApiConfig::default());
    let dir = DataDir::open(tmp.path()).unwrap();
    let segment = (dir.logs().dir(feedlog::log::Topic::Events, Partition(1)))
        .join("00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 1;
    std::fs::write(&segment, bytes).unwrap();
    let r = server.client.get("/metrics");
    let text = String::from_utf8(r.body).unwrap();
    assert_eq!(r.status, 200, "{text}");
    strict_exposition_format(&text);
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    let gauges = |name: &str| -> Vec<(String, f64)> {
        let samples = scrape.samples.iter().filter(|s| s.metric == name);
        samples
            .map(|s| match s.value {
                prometheus_parse::Value::Gauge(v) => {
                    (s.labels.get("partition").unwrap_or("").to_string(), v)
                }
                ref other => panic!("{name} is {other:?}"),
            })
            .collect()
    };
    assert_eq!(
        gauges("feedlog_log_readable"),
        vec![("0".to_string(), 1.0), ("1".to_string(), 0.0)]
    );
    let lag = gauges("feedlog_lag_records");
    assert_eq!(lag, vec![("0".to_string(), 0.0); 2], "partition 0 only");
    assert_eq!(
        gauges("feedlog_dead_letter_log_readable"),
        vec![(String::new(), 1.0)]
    );
    assert_eq!(gauges("feedlog_rocksdb_estimated_keys").len(), 2, "{text}");
}
