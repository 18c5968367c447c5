//! The read API under hostile and careless clients: oversize and malformed
//! requests, slow and excess connections, tokens, CORS, exposure beyond
//! loopback, and page limits as `/openapi.json` states them. Every refusal
//! is the JSON error shape; the server keeps serving.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::api::{processed, Server};
use common::generated_log;
use feedlog::api::http::ApiConfig;
use std::time::{Duration, Instant};

/// Sends raw bytes on a new connection and reads until the server closes
/// it (or `wait` passes): the status and the body.
fn raw_exchange(addr: std::net::SocketAddr, bytes: &[u8], wait: Duration) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    // The server may close before the whole oversize request is sent.
    let _ = s.write_all(bytes);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

// Proves oversize URLs and heads, bad bodies, malformed requests and non-UTF-8 paths all get the JSON error shape, never an empty body.
#[test]
fn hostile_requests_get_json_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let processor = processed(tmp.path(), &generated_log(10, 100), 2);
    let server = Server::start(&processor, ApiConfig::default());
    let addr = server.client.addr;
    let ids: Vec<String> = (1..=100_000).map(|i| i.to_string()).collect();
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (
            format!("GET /v1/users/1/timeline?x={} HTTP/1.1\r\n\r\n", "a".repeat(100 << 10)).into_bytes(),
            414,
            "uri_too_long",
        ),
        (
            format!("GET /v1/counters?ids={} HTTP/1.1\r\n\r\n", ids.join(",")).into_bytes(),
            414,
            "uri_too_long",
        ),
        (
            format!("GET /healthz HTTP/1.1\r\nX-Big: {}\r\n\r\n", "b".repeat(100 << 10)).into_bytes(),
            431,
            "headers_too_large",
        ),
        (
            b"GET /v1/users/%ff%fe/counters HTTP/1.1\r\nConnection: close\r\n\r\n".to_vec(),
            400,
            "bad_path",
        ),
        (b"\x16\x03\x01 not http at all\r\n\r\n".to_vec(), 400, "bad_request"),
        (
            b"POST /v1/counters HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n".to_vec(),
            413,
            "body_too_large",
        ),
        (
            b"POST /v1/counters HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
            411,
            "body_not_accepted",
        ),
        (
            b"GET /v1/internal/outboxes?authors=1&from_ts=0&from_post=0&limit=1 HTTP/1.1\r\nConnection: close\r\n\r\n".to_vec(),
            404,
            "not_found",
        ),
    ];
    for (request, status, code) in cases {
        let (got, body) = raw_exchange(addr, &request, Duration::from_secs(20));
        let head = String::from_utf8_lossy(&request[..request.len().min(40)]).into_owned();
        assert_eq!(got, status, "{head}…: {body}");
        let v: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{head}…: not JSON ({e}): {body:?}"));
        assert_eq!(v["error"]["code"], code, "{head}…");
    }
    // The server still answers afterwards.
    assert_eq!(server.client.get("/healthz").status, 200);
}

// Proves slow clients (slowloris) and idle keep-alive connections are closed after the header timeout, and connections over the limit get a JSON 503 while the server keeps serving.
#[test]
fn slow_and_excess_connections_are_bounded() {
    use std::io::{Read, Write};
    let tmp = tempfile::tempdir().unwrap();
    let processor = processed(tmp.path(), &generated_log(10, 100), 2);
    let mut cfg = ApiConfig::default();
    cfg.limits.header_timeout = Duration::from_secs(1);
    cfg.limits.max_connections = 30;
    let server = Server::start(&processor, cfg);
    let addr = server.client.addr;
    // 21 slowloris clients that never finish their request line, and one
    // idle keep-alive connection after a whole request.
    let mut slow: Vec<std::net::TcpStream> = (0..21)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /v1/users/1/time").unwrap();
            s
        })
        .collect();
    let mut idle = std::net::TcpStream::connect(addr).unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    slow.push(idle);
    for (i, s) in slow.iter_mut().enumerate() {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let start = Instant::now();
        let mut buf = Vec::new();
        // Ends (EOF or reset) once the server closes the connection.
        let _ = s.read_to_end(&mut buf);
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "connection {i} was held open"
        );
    }
    // 500 connections at once against a server whose header timeout
    // outlasts the test: the 30 it accepts stay held, so exactly the other
    // 470 must be answered 503 (polled until they are, whatever the pace).
    let mut cfg = ApiConfig::default();
    cfg.limits.header_timeout = Duration::from_secs(120);
    cfg.limits.max_connections = 30;
    let server = Server::start(&processor, cfg);
    let addr = server.client.addr;
    let mut open = Vec::new();
    for _ in 0..500 {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /v1/users/1/tim").unwrap();
        s.set_nonblocking(true).unwrap();
        open.push((s, Vec::new(), false));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut refused = 0;
    while refused < 470 {
        assert!(
            Instant::now() < deadline,
            "only {refused} of 500 refused with a limit of 30"
        );
        for (s, buf, done) in open.iter_mut().filter(|(_, _, done)| !*done) {
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk) {
                Ok(0) => *done = true,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => panic!("a refused connection failed before its 503 was read: {e}"),
            }
            let text = String::from_utf8_lossy(buf);
            if let Some((_, body)) = text.split_once("\r\n\r\n") {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
                    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
                    assert_eq!(v["error"]["code"], "too_many_connections");
                    refused += 1;
                    *done = true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let held = open.iter().filter(|(_, buf, _)| buf.is_empty()).count();
    assert_eq!(
        held, 30,
        "the connections within the limit are held, not refused"
    );
    drop(open);
    // Once they are gone, requests are served again.
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.client.get("/healthz").status != 200 {
        assert!(Instant::now() < deadline, "the server did not recover");
        std::thread::sleep(Duration::from_millis(50));
    }
}

// Proves a token protects every route but the probes and the description (constant-time checked, 401 with the JSON shape), and CORS is off unless an origin is configured.
#[test]
fn token_and_cors() {
    let tmp = tempfile::tempdir().unwrap();
    let processor = processed(tmp.path(), &generated_log(10, 100), 2);
    let server = Server::start(
        &processor,
        ApiConfig {
            token: Some("s3cret".into()),
            cors_origins: vec!["https://app.example".into()],
            ..ApiConfig::default()
        },
    );
    let addr = server.client.addr;
    let ask = |path: &str, extra: &str| {
        raw_exchange(
            addr,
            format!("GET {path} HTTP/1.1\r\nConnection: close\r\n{extra}\r\n").as_bytes(),
            Duration::from_secs(10),
        )
    };
    for extra in [
        "",
        "Authorization: Bearer wrong\r\n",
        "Authorization: s3cret\r\n",
    ] {
        let (status, body) = ask("/v1/users/1/counters", extra);
        assert_eq!(status, 401, "{extra}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&body).unwrap()["error"]["code"],
            "unauthorized"
        );
    }
    let (status, _) = ask("/v1/users/1/counters", "Authorization: Bearer s3cret\r\n");
    assert_eq!(status, 200);
    for public in ["/healthz", "/readyz", "/openapi.json"] {
        assert_eq!(ask(public, "").0, 200, "{public}");
    }
    assert_eq!(ask("/metrics", "").0, 401);
    // CORS: the configured origin may read; another may not; preflights answer.
    let r = server.client.request("GET", "/healthz");
    assert_eq!(
        r.header("access-control-allow-origin"),
        None,
        "no Origin, no CORS header"
    );
    let (_, _) = ask("/healthz", "Origin: https://evil.example\r\n");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    use std::io::{Read, Write};
    s.write_all(b"OPTIONS /v1/users/1/counters HTTP/1.1\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: GET\r\nConnection: close\r\n\r\n").unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    assert!(buf.starts_with("HTTP/1.1 204"), "{buf}");
    assert!(
        buf.to_ascii_lowercase()
            .contains("access-control-allow-origin: https://app.example"),
        "{buf}"
    );
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(
        b"GET /healthz HTTP/1.1\r\nOrigin: https://evil.example\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    assert!(
        !buf.to_ascii_lowercase()
            .contains("access-control-allow-origin"),
        "{buf}"
    );
}

// Proves the API refuses to listen beyond loopback without a token unless told to.
#[test]
fn exposure_needs_a_token() {
    use feedlog::api::http::exposure_error;
    let any: std::net::SocketAddr = "0.0.0.0:8080".parse().unwrap();
    let lo: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let open = ApiConfig::default();
    assert!(exposure_error(&any, &open).is_some_and(|e| e.contains("--api-token")));
    assert!(exposure_error(&lo, &open).is_none());
    let with_token = ApiConfig {
        token: Some("t".into()),
        ..ApiConfig::default()
    };
    assert!(exposure_error(&any, &with_token).is_none());
    let insecure = ApiConfig {
        allow_unauthenticated_remote: true,
        ..ApiConfig::default()
    };
    assert!(exposure_error(&any, &insecure).is_none());
}

// Proves /openapi.json states what the handlers do: each paged route answers its documented default page size when no limit is given, accepts the documented maximum, and refuses one more and 0.
#[test]
fn openapi_limits_match_the_handlers() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 150u64;
    let mut log = String::new();
    for i in 1..=n {
        let ts = 1_700_000_000_000 + i;
        log += &format!("{{\"type\":\"post\",\"author\":1,\"post_id\":{i},\"ts\":{ts}}}\n");
        log += &format!(
            "{{\"type\":\"follow\",\"follower\":{},\"followee\":1,\"ts\":{ts}}}\n",
            i + 1
        );
        log += &format!(
            "{{\"type\":\"follow\",\"follower\":1,\"followee\":{},\"ts\":{ts}}}\n",
            i + 1
        );
        // Mutes and blocks of users nobody follows and who act on
        // nothing (a block would void the follows, a mute hide the
        // notifications).
        log += &format!(
            "{{\"type\":\"mute\",\"user\":1,\"target\":{},\"ts\":{ts}}}\n",
            i + 2000
        );
        log += &format!(
            "{{\"type\":\"block\",\"user\":1,\"target\":{},\"ts\":{ts}}}\n",
            i + 1000
        );
        // 150 likers of user 1's post 1.
        log += &format!(
            "{{\"type\":\"like\",\"user\":{},\"author\":1,\"post_id\":1,\"ts\":{ts}}}\n",
            i + 1
        );
        // 150 replies to it.
        log += &format!(
            "{{\"type\":\"post\",\"author\":{},\"post_id\":{},\"reply_to\":{{\"author\":1,\"post_id\":1}},\"ts\":{ts}}}\n",
            i + 1,
            10_000 + i
        );
    }
    let processor = processed(tmp.path(), &log, 3);
    let max = 120;
    let server = Server::start(
        &processor,
        ApiConfig {
            max_limit: max,
            ..ApiConfig::default()
        },
    );
    let c = &server.client;
    let spec = c.json("/openapi.json").unwrap();
    let mut paged = 0;
    for (route, item) in spec["paths"].as_object().unwrap() {
        let op = &item["get"];
        let Some(limit) = op["parameters"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == "limit"))
        else {
            continue;
        };
        if route.starts_with("/v1/internal/") {
            continue;
        }
        paged += 1;
        // User 2 follows 1 (a timeline of 150 posts); user 1 has 150 of everything else
        // (followers, followees, posts, mutes, blocks, notifications), and its post 1 150 likers and replies.
        let stream = route.ends_with("/stream");
        let user = if route.ends_with("/timeline") || route.ends_with("/timeline/stream") {
            "2"
        } else {
            "1"
        };
        let path = route.replace("{id}", user).replace("{post_id}", "1");
        let count = |query: &str| {
            let at = format!("{path}{query}");
            // The stream's window is its opening page (after a comment);
            // a refusal is an ordinary answer.
            if stream && !query.contains("limit=0") && !query.contains(&format!("={}", max + 1)) {
                let mut events = c.events(&at);
                let page = std::iter::from_fn(|| events.next(std::time::Duration::from_secs(10)))
                    .find(|e| e.event != "comment")
                    .expect("the stream's page");
                let body: serde_json::Value = serde_json::from_str(&page.data).unwrap();
                return (events.status, body["items"].as_array().map(Vec::len), body);
            }
            let r = c.get(&at);
            let body = r.json().unwrap();
            (r.status, body["items"].as_array().map(Vec::len), body)
        };
        let default = limit["schema"]["default"].as_u64().unwrap() as usize;
        assert_eq!(limit["schema"]["maximum"], max, "{route}");
        let (status, items, body) = count("");
        assert_eq!(
            (status, items),
            (200, Some(default)),
            "{route} with no limit: {body}"
        );
        let (status, items, body) = count(&format!("?limit={max}"));
        assert_eq!(
            (status, items),
            (200, Some(max)),
            "{route} at the maximum: {body}"
        );
        for bad in [max + 1, 0] {
            let (status, _, body) = count(&format!("?limit={bad}"));
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (400, Some("bad_limit")),
                "{route} with limit {bad}: {body}"
            );
        }
    }
    assert_eq!(
        paged, 12,
        "timeline, its stream, posts, a post's likers and replies, notifications, their stream, followers, followees, recent followers, mutes, blocks"
    );
}

/// The document's schemas as strict JSON Schema: every object refuses
/// properties it does not list, so an answer's undocumented field fails as
/// a missing one does (and an OpenAPI 3.0 `nullable`, should one appear,
/// becomes a `null` type).
fn strict(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(o) = v.as_object_mut() {
        if o.remove("nullable") == Some(serde_json::Value::Bool(true)) {
            if let Some(t) = o.get("type").cloned() {
                o.insert("type".into(), serde_json::json!([t, "null"]));
            }
        }
        if o.get("type") == Some(&"object".into()) && o.contains_key("properties") {
            o.entry("additionalProperties").or_insert(false.into());
        }
        for (_, child) in o.iter_mut() {
            *child = strict(child.take());
        }
    } else if let Some(a) = v.as_array_mut() {
        for child in a.iter_mut() {
            *child = strict(child.take());
        }
    }
    v
}

// Proves every JSON answer of every documented route, with ids as numbers and as strings, and every 400 they give, matches the response schema /openapi.json states for it: no field missing, none undocumented, every type right; the internal routes, which an embedded processor answers 404, are not in its document.
#[test]
fn every_answer_matches_its_documented_schema() {
    let tmp = tempfile::tempdir().unwrap();
    // User 2 (whose views are checked) also mutes, with and without an
    // end, and blocks, so those answers have items of every shape.
    let filters = [
        r#"{"type":"mute","user":2,"target":3,"ts":1800000000000,"until":1900000000000}"#,
        r#"{"type":"mute","user":2,"target":4,"ts":1800000000001}"#,
        r#"{"type":"block","user":2,"target":5,"ts":1800000000002}"#,
    ];
    let log = format!(
        "{}\n{}",
        generated_log(40, 1500).trim_end(),
        filters.join("\n")
    );
    let processor = processed(tmp.path(), &log, 2);
    for string_ids in [false, true] {
        let server = Server::start(
            &processor,
            ApiConfig {
                string_ids,
                ..ApiConfig::default()
            },
        );
        let c = &server.client;
        let spec = c.json("/openapi.json").unwrap();
        let components = strict(spec["components"].clone());
        // The post a `/v1/posts/{id}/{post_id}` check reads.
        let post_id = std::cell::RefCell::new(String::new());
        let check = |route: &str, status: u16, query: &str| {
            let path = route
                .replace("{id}", "2")
                .replace("{post_id}", &post_id.borrow());
            let r = c.get(&format!("{path}{query}"));
            assert_eq!(
                r.status,
                status,
                "{path}{query}: {}",
                String::from_utf8_lossy(&r.body)
            );
            let doc = &spec["paths"][route]["get"]["responses"][status.to_string()];
            let schema = strict(doc["content"]["application/json"]["schema"].clone());
            assert!(!schema.is_null(), "{route}: no JSON schema for {status}");
            let mut root = serde_json::json!({"components": components});
            root.as_object_mut()
                .unwrap()
                .extend(schema.as_object().unwrap().clone());
            let v = jsonschema::draft202012::new(&root)
                .unwrap_or_else(|e| panic!("{route} {status}: not a schema: {e}"));
            let body = r.json().unwrap();
            let errors: Vec<String> = v
                .iter_errors(&body)
                .map(|e| format!("{e} at {}", e.instance_path()))
                .collect();
            assert!(
                errors.is_empty(),
                "{path}{query} ({status}, string ids {string_ids}): {errors:?}\n{body}"
            );
        };
        let mut checked = 0;
        for (route, item) in spec["paths"].as_object().unwrap() {
            let responses = &item["get"]["responses"];
            if responses["200"]["content"]["application/json"].is_null() || route == "/openapi.json"
            {
                continue;
            }
            let query = match route.as_str() {
                "/v1/counters" => "?ids=1,2,3",
                r if r.ends_with("/timeline") || r.ends_with("/posts") => "?limit=3",
                r if r.ends_with("/timeline/changes") => "?from=1700000003000&to=1800000000003",
                _ => "",
            };
            if route.ends_with("/timeline/why") {
                // Answers of several shapes: in, unknown, own post, muted.
                let id = |v: &serde_json::Value| match v.as_u64() {
                    Some(n) => n.to_string(),
                    None => v.as_str().unwrap().to_string(),
                };
                let entry = &c.json("/v1/users/2/timeline?limit=1").unwrap()["items"][0];
                let own = &c.json("/v1/users/2/posts?limit=1").unwrap()["items"][0];
                let muted = &c.json("/v1/users/3/posts?limit=1").unwrap()["items"][0];
                for post in [entry, own, muted].into_iter().filter(|p| !p.is_null()) {
                    let q = format!(
                        "?author={}&post_id={}",
                        id(&post["author"]),
                        id(&post["post_id"])
                    );
                    check(route, 200, &q);
                }
                check(route, 200, "?author=1&post_id=999999999");
                check(route, 400, "?author=x&post_id=1");
                checked += 1;
                continue;
            }
            if route.contains("{post_id}") {
                // User 2's newest post, with and without a viewer; one
                // never posted (404); a bad viewer (400).
                let own = &c.json("/v1/users/2/posts?limit=1").unwrap()["items"][0]["post_id"];
                let own = own
                    .as_u64()
                    .map_or_else(|| own.as_str().unwrap().to_string(), |n| n.to_string());
                // A post's likers: pages, and a bad limit.
                let cases = match route.ends_with("/likes") {
                    false => [(own.as_str(), 200, ""), (own.as_str(), 200, "?viewer=3")],
                    true => [(own.as_str(), 200, ""), (own.as_str(), 200, "?limit=2")],
                };
                let refused = match route.ends_with("/likes") {
                    false => "?viewer=x",
                    true => "?limit=x",
                };
                let cases = cases
                    .into_iter()
                    .chain([("999999999", 404, ""), (own.as_str(), 400, refused)]);
                for (post, status, q) in cases {
                    *post_id.borrow_mut() = post.to_string();
                    check(route, status, q);
                }
                checked += 1;
                continue;
            }
            if route.ends_with("/timeline") {
                check(route, 200, "?limit=3&explain=1");
            }
            // Served in Kafka mode only: an embedded processor's document
            // leaves them out, and they answer 404.
            assert!(!route.starts_with("/v1/internal/"), "{route} documented");
            check(route, 200, query);
            if !responses["400"].is_null() {
                let bad = if route == "/v1/counters" {
                    "?ids=x"
                } else {
                    "?limit=0"
                };
                check(route, 400, bad);
            }
            checked += 1;
        }
        assert!(checked >= 10, "{checked} routes checked");
        let internal = c.get("/v1/internal/outboxes?authors=1&from_ts=0&from_post=0&limit=1");
        assert_eq!(internal.status, 404);
    }
}
