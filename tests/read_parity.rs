//! `feedlog query` and the HTTP API take the same reads with the same
//! parameters and answer them alike: every parameter of the table of reads
//! (`feedlog::api::reads`) given to every read, checked against both, and
//! the table in docs/cli.md rendered from it.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::api::{processed, Server};
use common::{feedlog, generated_log};
use feedlog::api::http::ApiConfig;
use feedlog::api::reads::{self, Read};
use serde_json::{json, Value};
use std::collections::BTreeSet;

const T0: u64 = 1_700_000_000_000;

/// A generated log with reposts, so the three repost modes differ, and
/// more than one mute and block of user 1.
fn log() -> String {
    let mut log = generated_log(12, 400);
    for (i, (reposter, author)) in [(3u64, 1u64), (4, 1), (5, 2), (3, 2)].iter().enumerate() {
        let ts = T0 + 3_000 + i as u64;
        log += &format!(
            r#"{{"type":"repost","author":{reposter},"post_id":{},"of_author":{author},"of_post_id":{},"ts":{ts}}}"#,
            9_000 + i,
            // A post of the author in the generated log, or an unknown one.
            i + 1
        );
        log.push('\n');
    }
    // User 1's newest post, liked by three users: pages of likers.
    log += &format!(
        r#"{{"type":"post","author":1,"post_id":8000,"ts":{}}}"#,
        T0 + 3_050
    );
    log.push('\n');
    for liker in [5u64, 6, 7] {
        let ts = T0 + 3_060 + liker;
        log += &format!(r#"{{"type":"like","user":{liker},"author":1,"post_id":8000,"ts":{ts}}}"#);
        log.push('\n');
    }
    // Two replies to it: pages of replies.
    for (replier, id) in [(5u64, 8101u64), (6, 8102)] {
        let ts = T0 + 3_070 + replier;
        log += &format!(
            r#"{{"type":"post","author":{replier},"post_id":{id},"reply_to":{{"author":1,"post_id":8000}},"ts":{ts}}}"#
        );
        log.push('\n');
    }
    // A post mentioning user 1: a mention among the notifications.
    log += &format!(
        r#"{{"type":"post","author":4,"post_id":8103,"mentions":[1,2],"ts":{}}}"#,
        T0 + 3_080
    );
    log.push('\n');
    // Pages of mutes and blocks, for their cursors.
    for (i, (kind, target)) in [("mute", 7), ("mute", 8), ("block", 9), ("block", 10)]
        .iter()
        .enumerate()
    {
        let ts = T0 + 3_100 + i as u64;
        log += &format!(r#"{{"type":"{kind}","user":1,"target":{target},"ts":{ts}}}"#);
        log.push('\n');
    }
    log
}

/// The values each parameter is tried with, for `read` of `user`: good
/// ones (a real cursor where the read pages) and bad ones.
fn values(client: &common::http::Client, read: &Read, user: u64) -> Vec<Vec<(String, String)>> {
    let s = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let mid = (T0 + 1_400).to_string();
    let page_of = |query: &str| {
        let route = read.route.replace("{id}", &user.to_string());
        client.get(&format!("{route}?{query}")).json().unwrap()
    };
    let paged = read.takes.contains(&"cursor");
    let first = if paged {
        page_of("limit=1")
    } else {
        Value::Null
    };
    let next = first["next_cursor"].as_str().map(String::from);
    let second = match &next {
        Some(c) => page_of(&format!("limit=1&cursor={c}")),
        None => Value::Null,
    };
    let prev = second["prev_cursor"].as_str().map(String::from);
    let mut out = vec![
        s(&[("limit", "2")]),
        s(&[("limit", "0")]),
        s(&[("limit", "x")]),
        s(&[("cursor", "garbage")]),
        s(&[("newer_than", "garbage")]),
        s(&[("reposts", "first")]),
        s(&[("reposts", "none")]),
        s(&[("reposts", "sideways")]),
        s(&[("replies", "all")]),
        s(&[("replies", "none"), ("reposts", "first")]),
        s(&[("replies", "some")]),
        s(&[("explain", "1")]),
        s(&[("explain", "maybe")]),
        s(&[("counts", "0")]),
        s(&[("counts", "maybe")]),
        s(&[("viewer", "3")]),
        s(&[("counts", "0"), ("viewer", "3")]),
        s(&[("as_of", &mid)]),
        s(&[("as_of", "x")]),
        s(&[("explain", "1"), ("as_of", &mid)]),
        s(&[("ids", "1,2")]),
        s(&[("author", "1"), ("post_id", "1")]),
        s(&[("author", "1"), ("post_id", "777777")]),
        s(&[("author", "1")]),
        s(&[("from", "1"), ("to", &mid)]),
        s(&[("from", &mid), ("to", "1")]),
        s(&[("to", &mid)]),
        s(&[("after", "marker")]),
        s(&[("limit", "1"), ("after", "marker")]),
        s(&[("after", "garbage")]),
        s(&[("after", "marker"), ("newer_than", "y")]),
        s(&[("max", "5")]),
        s(&[("max", "1"), ("reposts", "none")]),
        s(&[("max", "0")]),
        s(&[("max", "10001")]),
        s(&[("max", "x")]),
        s(&[("grouped", "0")]),
        s(&[("grouped", "maybe")]),
        s(&[("types", "like,mention")]),
        s(&[("types", "like,like")]),
        s(&[("types", "pokes")]),
    ];
    if let Some(c) = &next {
        out.push(s(&[("limit", "1"), ("cursor", c)]));
        out.push(s(&[("cursor", "x"), ("newer_than", "y")]));
    }
    if let Some(p) = &prev {
        out.push(s(&[("limit", "1"), ("newer_than", p)]));
        out.push(s(&[("limit", "1"), ("after", p)]));
    }
    if read.route.contains("{post_id}") {
        // The user's newest post, one never posted, and viewers good and bad.
        let posts = client
            .get(&format!("/v1/users/{user}/posts?limit=1"))
            .json()
            .unwrap();
        let newest = posts["items"][0]["post_id"]
            .as_u64()
            .unwrap_or(1)
            .to_string();
        for viewer in [None, Some("1"), Some("3"), Some("0"), Some("x")] {
            for post in [newest.as_str(), "777777"] {
                let mut pairs = vec![("post_id", post)];
                pairs.extend(viewer.map(|v| ("viewer", v)));
                out.push(s(&pairs));
            }
        }
        out.push(s(&[("post_id", "x")]));
        if read.takes.contains(&"cursor") {
            let route = read.route.replace("{id}", &user.to_string());
            let route = route.replace("{post_id}", &newest);
            let page = client.get(&format!("{route}?limit=1")).json().unwrap();
            out.push(s(&[("post_id", &newest), ("limit", "1")]));
            out.push(s(&[("post_id", &newest), ("cursor", "garbage")]));
            if let Some(c) = page["next_cursor"].as_str() {
                out.push(s(&[("post_id", &newest), ("limit", "1"), ("cursor", c)]));
            }
        }
    }
    out
}

/// The HTTP path and query of `read` of `user` given `pairs`: a parameter
/// the route's path holds goes there (`None` when it is not given).
fn http_path(read: &Read, user: u64, pairs: &[(String, String)]) -> Option<String> {
    let mut route = read.route.replace("{id}", &user.to_string());
    let mut query = Vec::new();
    for (k, v) in pairs {
        let slot = format!("{{{k}}}");
        match route.contains(&slot) {
            true => route = route.replace(&slot, v),
            false => query.push(format!("{k}={v}")),
        }
    }
    (!route.contains('{')).then(|| format!("{route}?{}", query.join("&")))
}

// Proves every read `query` answers, given every parameter of the table (good and bad values, alone and in pairs), answers over `query VIEW USER --flags`, over a `query -` line and over HTTP the same JSON, or the same error code and message.
#[test]
fn every_read_answers_the_same_over_the_cli_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let processor = processed(dir.path(), &log(), 4);
    let cfg = ApiConfig {
        max_limit: feedlog::api::query::MAX_LIMIT,
        ..ApiConfig::default()
    };
    let server = Server::start(&processor, cfg);
    let client = &server.client;
    let mut lines = String::new();
    let mut expected = Vec::new();
    let mut answered = BTreeSet::new();
    for read in reads::ALL.iter().filter(|r| r.not_in_cli.is_none()) {
        for user in [1u64, 3] {
            for pairs in values(client, read, user) {
                let Some(path) = http_path(read, user, &pairs) else {
                    continue;
                };
                let r = client.get(&path);
                let http = r.json().unwrap();
                assert!(
                    r.status == 200 || http["error"]["code"].is_string(),
                    "{path}: {http}"
                );
                if r.status == 200 {
                    answered.insert((
                        read.name,
                        pairs.iter().map(|p| p.0.clone()).collect::<Vec<_>>(),
                    ));
                }
                // The same over `query -`, values as strings (as --string-ids answers them).
                let mut line = json!({"view": read.name, "user": user.to_string()});
                for (k, v) in &pairs {
                    line[k] = json!(v);
                }
                lines += &format!("{line}\n");
                expected.push((path.clone(), http.clone()));
                // And as flags, for the first user.
                if user != 1 || k_is_a_bad_flag(&pairs) {
                    continue;
                }
                let mut args = vec![
                    "query".to_string(),
                    read.name.to_string(),
                    user.to_string(),
                    "--history-retention".into(),
                    "forever".into(),
                ];
                for (k, v) in &pairs {
                    match k.as_str() {
                        "explain" if v == "1" => args.push("--explain".into()),
                        _ => args.extend([format!("--{}", k.replace('_', "-")), v.clone()]),
                    }
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let (code, out, err) = feedlog(dir.path(), &args, None);
                if r.status == 200 {
                    assert_eq!(code, 0, "{args:?}: {err}");
                    let cli: Value = serde_json::from_str(&out).unwrap();
                    assert_eq!(cli, http, "{args:?}");
                } else {
                    assert_eq!(code, 2, "{args:?}: {err}");
                    let message = http["error"]["message"].as_str().unwrap();
                    assert!(err.contains(message), "{args:?}: {err} / {message}");
                }
            }
        }
    }
    let args = ["query", "-", "--history-retention", "forever"];
    let (code, out, err) = feedlog(dir.path(), &args, Some(lines.as_bytes()));
    assert_eq!(code, 0, "{err}");
    let answers: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), expected.len(), "{err}");
    for ((path, http), cli) in expected.iter().zip(&answers) {
        assert_eq!(cli, http, "{path}");
    }
    // Every parameter a read takes was answered at least once, not only refused.
    for read in reads::ALL.iter().filter(|r| r.not_in_cli.is_none()) {
        for p in read.takes {
            assert!(
                answered
                    .iter()
                    .any(|(name, ps)| name == &read.name && ps.iter().any(|k| k == p)),
                "{} {p} never answered",
                read.name
            );
        }
    }
}

/// Pairs with no flag form: `--explain maybe` is clap's to refuse (a flag
/// takes no value), and a parameter no read of `query` takes has no flag.
fn k_is_a_bad_flag(pairs: &[(String, String)]) -> bool {
    let cli = |k: &str| {
        reads::ALL
            .iter()
            .any(|r| r.not_in_cli.is_none() && r.takes.contains(&k))
    };
    pairs
        .iter()
        .any(|(k, v)| (k == "explain" && v != "1") || !cli(k))
}

// Proves `query --help` names every read `query` answers and has a flag for every parameter those reads take.
#[test]
fn query_help_names_every_read_and_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let (code, help, err) = feedlog(dir.path(), &["query", "--help"], None);
    assert_eq!(code, 0, "{err}");
    for read in reads::ALL.iter().filter(|r| r.not_in_cli.is_none()) {
        assert!(help.contains(read.name), "{}: {help}", read.name);
        for p in read.takes {
            let flag = format!("--{}", p.replace('_', "-"));
            assert!(help.contains(&flag), "{flag}: {help}");
        }
    }
}

/// The table docs/cli.md shows, from the table of reads.
fn rendered() -> String {
    let mut t = String::from("| Read | HTTP | `feedlog query` | Takes |\n|---|---|---|---|\n");
    for r in reads::ALL {
        let cli = match r.not_in_cli {
            None if r.name == "why" => "`query why USER AUTHOR POST_ID`".to_string(),
            None if r.route.contains("{post_id}") => {
                format!("`query {} AUTHOR POST_ID`", r.name)
            }
            None => format!("`query {} USER`", r.name),
            Some(why) => format!("— ({why})"),
        };
        let takes: Vec<String> = r.takes.iter().map(|p| format!("`{p}`")).collect();
        t += &format!(
            "| {} | `GET {}` | {cli} | {} |\n",
            r.name,
            r.route,
            takes.join(", ")
        );
    }
    t
}

// Proves docs/cli.md's table of reads is the table the binary parses with.
#[test]
fn the_docs_table_of_reads_is_the_binarys() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    let table = rendered();
    assert!(doc.contains(&table), "docs/cli.md should hold:\n{table}");
}
