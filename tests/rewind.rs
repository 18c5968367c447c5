//! Views as of an earlier log time (`as_of`) against the oracle over the
//! events with `ts` up to that time, deleted posts never coming back.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::api::{processed, Server};
use common::oracle::{Mode, Oracle};
use common::{check_all, generated_log};
use feedlog::api::http::ApiConfig;
use feedlog::core::codec::{self, Format};
use feedlog::core::event::{Event, Ts, UserId};
use feedlog::ops::asof::{LogRewind, Retention};
use feedlog::Rewind;
use serde_json::Value;

/// `generated_log` with reposts added and every time scrambled (many
/// equal, none in log order), so that "up to T" is no prefix of the log.
fn scrambled_log(users: u64, events: u64, seed: u64) -> String {
    let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut out = String::new();
    for (i, line) in generated_log(users, events).lines().enumerate() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        v["ts"] = (1_000 + next() % (events * 2)).into();
        out += &v.to_string();
        out.push('\n');
        if i % 9 == 0 {
            let (a, b) = (next() % users + 1, next() % users + 1);
            let ts = 1_000 + next() % (events * 2);
            let of = next() % (i as u64 + 1) + 1;
            out += &format!(
                r#"{{"type":"repost","author":{a},"post_id":{},"of_author":{b},"of_post_id":{of},"ts":{ts}}}"#,
                1_000_000 + i
            );
            out.push('\n');
        }
    }
    out
}

/// The events of a JSON-lines log, in order.
fn events_of(log: &str) -> Vec<Event> {
    log.lines()
        .filter_map(|l| codec::decode_event(Format::Json.as_u8(), l.as_bytes()).ok())
        .collect()
}

/// The oracle of the view as of `t`: the events with `ts <= t`, then
/// every deletion of a later time (a deleted post never comes back).
fn oracle_as_of(events: &[Event], t: u64) -> Oracle {
    let mut o = Oracle::with_partitions(1);
    o.positions_unknown = true;
    let later = events
        .iter()
        .filter(|e| e.ts().0 > t && matches!(e, Event::DeletePost { .. }));
    for e in events.iter().filter(|e| e.ts().0 <= t).chain(later) {
        o.apply(e);
    }
    o
}

// Proves every view of every user as of times before the first event, between events, at a time many events share and after the last equals the oracle over the events up to that time (deletions of any time applied), and the timeline changes between each two of those times equal the oracles' difference, each with the oracle's why.
#[test]
fn every_view_as_of_a_time_equals_the_oracle_up_to_it() {
    for (users, events, seed, partitions) in [(30, 700, 1, 3), (8, 400, 2, 1), (50, 900, 3, 4)] {
        as_of_matches(users, events, seed, partitions);
    }
}

/// The views as of several times of a scrambled log of `users` and
/// `events` (`seed`) on `partitions` partitions, and the changes between
/// them, against the oracle.
fn as_of_matches(users: u64, events: u64, seed: u64, partitions: u32) {
    let dir = tempfile::tempdir().unwrap();
    let log = scrambled_log(users, events, seed);
    let events = events_of(&log);
    let processor = processed(dir.path(), &log, partitions);
    let rewind = LogRewind::of(processor.data_dir(), Retention::Forever);
    let max_user = events.iter().map(|e| e.actor().0).max().unwrap_or(0);
    let mut times: Vec<u64> = events.iter().map(|e| e.ts().0).collect();
    times.sort_unstable();
    let (first, last) = (times[0], times[times.len() - 1]);
    let shared = *times
        .windows(2)
        .find(|w| w[0] == w[1])
        .expect("a time many events share")
        .first()
        .unwrap();
    let mut before: Option<(u64, feedlog::Reader, Oracle)> = None;
    for t in [
        first - 1,
        first,
        times[times.len() / 3],
        shared,
        last,
        last + 10,
    ] {
        let reader = rewind.at(Ts(t)).unwrap();
        let oracle = oracle_as_of(&events, t);
        if let Err(e) = check_all(&reader, &oracle, max_user, 7) {
            panic!("as of {t} (seed {seed}): {e}");
        }
        if let Some((t0, r0, o0)) = &before {
            for u in 1..=max_user {
                changes_match(u, (*t0, r0, o0), (t, &reader, &oracle));
            }
        }
        before = Some((t, reader, oracle));
    }
}

/// `timeline/changes` of `u` from `t0` to `t1` against the two oracles:
/// the entries that entered and left, in timeline order, each with the
/// oracle's why as of `t1`.
fn changes_match(
    u: u64,
    (t0, r0, o0): (u64, &feedlog::Reader, &Oracle),
    (t1, r1, o1): (u64, &feedlog::Reader, &Oracle),
) {
    let got = feedlog::api::query::changes((r0, r1), UserId(u), (t0, t1)).unwrap();
    let got = serde_json::to_value(&got).unwrap();
    let key = |e: &Value| {
        (
            e["author"].as_u64().unwrap(),
            e["post_id"].as_u64().unwrap(),
        )
    };
    let (then, now) = (
        o0.timeline_entries(u, Mode::Newest),
        o1.timeline_entries(u, Mode::Newest),
    );
    let missing = |a: &[Value], b: &[Value]| -> Vec<Value> {
        let keys: Vec<_> = b.iter().map(key).collect();
        a.iter()
            .filter(|e| !keys.contains(&key(e)))
            .cloned()
            .collect()
    };
    for (side, want) in [
        ("entered", missing(&now, &then)),
        ("left", missing(&then, &now)),
    ] {
        let listed = got[side].as_array().unwrap();
        let got_keys: Vec<_> = listed.iter().map(key).collect();
        let want_keys: Vec<_> = want.iter().map(key).collect();
        assert_eq!(got_keys, want_keys, "{side} for {u} from {t0} to {t1}");
        for (c, e) in listed.iter().zip(&want) {
            assert_eq!(c["ts"], e["ts"], "{side} for {u}: {c}");
            let why = o1.why(u, key(e));
            assert!(
                o1.same_positions(std::slice::from_ref(&c["why"]), std::slice::from_ref(&why)),
                "{side} for {u} from {t0} to {t1}: {c}, want why {why}"
            );
        }
    }
    assert_eq!(got["truncated"], false);
}

// Proves the HTTP routes answer as of a time with every page linking pages as of it, the built state is kept for the next request, and a time older than the history kept is a 410 naming from when it is kept.
#[test]
fn as_of_over_http_pages_on_its_time_and_refuses_beyond_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let log = scrambled_log(12, 300, 0);
    let events = events_of(&log);
    let processor = processed(dir.path(), &log, 2);
    let cfg = ApiConfig {
        max_limit: 1000,
        ..ApiConfig::default()
    };
    let server = Server::start(&processor, cfg);
    let t = {
        let mut times: Vec<u64> = events.iter().map(|e| e.ts().0).collect();
        times.sort_unstable();
        times[times.len() / 2]
    };
    let oracle = oracle_as_of(&events, t);
    let plain = |u: u64| -> Vec<(u64, u64, u64)> {
        let f = |e: &Value, k: &str| e[k].as_u64().unwrap();
        let entries = oracle.timeline_entries(u, Mode::None);
        entries
            .iter()
            .map(|e| (f(e, "author"), f(e, "post_id"), f(e, "ts")))
            .collect()
    };
    let user = (1..=12).max_by_key(|u| plain(*u).len()).unwrap();
    let want = plain(user);
    assert!(want.len() > 3, "a timeline of several pages: {want:?}");
    let mut path = format!("/v1/users/{user}/timeline?as_of={t}&limit=2&reposts=none");
    let mut got = Vec::new();
    loop {
        let resp = server.client.get(&path);
        assert_eq!(resp.status, 200, "{path}: {:?}", resp.json());
        let page = resp.json().unwrap();
        for i in page["items"].as_array().unwrap() {
            let f = |k: &str| i[k].as_u64().unwrap();
            got.push((f("author"), f("post_id"), f("ts")));
        }
        let link = resp.header("link").unwrap_or_default();
        for l in link.split(", ") {
            assert!(l.contains(&format!("?as_of={t}&")), "{link}");
        }
        let next = link.split(", ").find(|l| l.ends_with(r#"rel="next""#));
        let Some(next) = next else { break };
        path = next[1..next.find('>').unwrap()].to_string();
    }
    assert_eq!(got, want);
    let counters: Value = server
        .client
        .json(&format!("/v1/users/{user}/counters?as_of={t}"))
        .unwrap();
    let (followers, followees, posts) = oracle.counters(user);
    assert_eq!(
        (
            counters["followers"].as_u64(),
            counters["followees"].as_u64(),
            counters["posts"].as_u64()
        ),
        (Some(followers), Some(followees), Some(posts))
    );
    // Changes from before every event: the whole timeline as of t entered.
    let c = server
        .client
        .json(&format!("/v1/users/{user}/timeline/changes?from=0&to={t}"))
        .unwrap();
    let entered: Vec<(u64, u64)> = c["entered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["author"].as_u64().unwrap(),
                e["post_id"].as_u64().unwrap(),
            )
        })
        .collect();
    let all: Vec<(u64, u64)> = oracle
        .timeline_entries(user, Mode::Newest)
        .iter()
        .map(|e| {
            (
                e["author"].as_u64().unwrap(),
                e["post_id"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(entered, all);
    assert_eq!(c["left"], serde_json::json!([]));
    let resp = server
        .client
        .get(&format!("/v1/users/{user}/timeline/changes?from=5&to=4"));
    assert_eq!(resp.status, 400, "{:?}", resp.json());
    // Explain knows positions of the current state only.
    let resp = server
        .client
        .get(&format!("/v1/users/{user}/timeline?as_of={t}&explain=1"));
    assert_eq!(resp.status, 400, "{:?}", resp.json());
    // The CLI answers the same as of the same time.
    let args = [
        "query",
        "counters",
        &user.to_string(),
        "--as-of",
        &t.to_string(),
    ];
    let (code, out, err) = common::feedlog(dir.path(), &args, None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), counters);
    drop(server);
    // Retention: one log-time unit back from the newest event.
    let newest = events.iter().map(|e| e.ts().0).max().unwrap();
    let api = feedlog::processor_api(&processor, Retention::Span(1), ApiConfig::default());
    let server = Server::serve(api);
    let resp = server
        .client
        .get(&format!("/v1/users/{user}/timeline?as_of={}", newest - 2));
    let body = resp.json().unwrap();
    assert_eq!(resp.status, 410, "{body}");
    assert_eq!(body["error"]["code"], "history_gone", "{body}");
    let kept_from = format!("kept from log time {}", newest - 1);
    assert!(body.to_string().contains(&kept_from), "{body}");
    let resp = server
        .client
        .get(&format!("/v1/users/{user}/posts?as_of={newest}"));
    assert_eq!(resp.status, 200, "{:?}", resp.json());
}
