//! Following a timeline as it grows: the live stream (server-sent events:
//! what it sends, in which order, how a client resumes it) and pages of
//! the entries newer than a cursor; the notifications stream and the
//! unread counts both streams send (`feeds`).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;
mod feeds;

use common::api::{append, append_and_process, processed, Server};
use common::http::{Sse, StreamCopy};
use common::stream::{nothing_before_a_marker, opened, pushed_only, without_counts};
use feedlog::api::http::ApiConfig;
use std::time::Duration;

/// The posts of a page's items, newest first.
fn posts(page: &serde_json::Value) -> Vec<u64> {
    let items = page["items"].as_array().unwrap();
    items
        .iter()
        .map(|i| i["post_id"].as_u64().unwrap())
        .collect()
}

// Proves a timeline stream opens with the first page, then sends each post made after subscription, once, and nothing from before it.
#[test]
fn timeline_stream_delivers_posts_made_after_subscription() {
    let tmp = tempfile::tempdir().unwrap();
    let log = [
        r#"{"type":"follow","follower":1,"followee":2,"ts":1000}"#,
        r#"{"type":"follow","follower":1,"followee":3,"ts":1001}"#,
        r#"{"type":"post","author":2,"post_id":10,"ts":1002}"#,
        r#"{"type":"post","author":3,"post_id":11,"ts":1003}"#,
    ]
    .join("\n");
    let processor = processed(tmp.path(), &log, 2);
    let server = Server::start(&processor, ApiConfig::default());
    let mut stream = server.client.events("/v1/users/1/timeline/stream");
    assert_eq!(stream.status, 200);
    assert!(stream
        .headers
        .iter()
        .any(|(k, v)| k == "content-type" && v.starts_with("text/event-stream")));
    assert_eq!(posts(&opened(&mut stream)), vec![11, 10]);
    // Nothing old arrives.
    nothing_before_a_marker(&mut stream, tmp.path(), &processor, 2, 1500);
    // One post processed before the next, so that they arrive in their
    // time order whichever partition is faster.
    for lines in [
        vec![r#"{"type":"post","author":3,"post_id":12,"ts":2000}"#],
        vec![
            r#"{"type":"post","author":2,"post_id":13,"ts":2001}"#,
            r#"{"type":"post","author":4,"post_id":14,"ts":2002}"#,
        ],
    ] {
        append(tmp.path(), &lines.join("\n"));
        processor
            .run(&feedlog::task::Shutdown::new(), true)
            .unwrap();
    }
    let mut got = Vec::new();
    while let Some(Sse { event, data, .. }) = stream.next(Duration::from_secs(5)) {
        assert_eq!(event, "entry", "{data}");
        got.push(without_counts(serde_json::from_str(&data).unwrap()));
        if got.len() == 2 {
            break;
        }
    }
    assert_eq!(
        got,
        vec![
            serde_json::json!({"post_id": 12, "author": 3, "ts": 2000}),
            serde_json::json!({"post_id": 13, "author": 2, "ts": 2001}),
        ]
    );
    // Author 4 is not followed: nothing more comes.
    nothing_before_a_marker(&mut stream, tmp.path(), &processor, 3, 3000);
}

// Proves the stream is woken by the processor's commits (its poll interval is an hour) and announces retracted entries, a deleted post and an unfollowed author's (also one from its opening page), as delete events without an id.
#[test]
fn timeline_stream_is_pushed_by_commits_and_announces_deletes() {
    let tmp = tempfile::tempdir().unwrap();
    let log = [
        r#"{"type":"follow","follower":1,"followee":2,"ts":1000}"#,
        r#"{"type":"follow","follower":1,"followee":3,"ts":1001}"#,
        r#"{"type":"post","author":2,"post_id":10,"ts":1002}"#,
    ]
    .join("\n");
    let processor = processed(tmp.path(), &log, 2);
    let server = pushed_only(&processor);
    let mut stream = server.client.events("/v1/users/1/timeline/stream");
    assert_eq!(stream.status, 200);
    assert_eq!(posts(&opened(&mut stream)), vec![10]);
    let step = |lines: &[&str]| append_and_process(tmp.path(), &processor, lines);
    // Collects `n` events (no comments), as (event, data, id).
    let mut take = |n: usize| {
        let mut got = Vec::new();
        while got.len() < n {
            let Some(Sse { event, data, id }) = stream.next(Duration::from_secs(10)) else {
                panic!("only {got:?} within 10 s of a commit");
            };
            if event != "comment" {
                let data: serde_json::Value = serde_json::from_str(&data).unwrap();
                got.push((event, data["post_id"].as_u64().unwrap(), id));
            }
        }
        got.sort();
        got
    };
    step(&[
        r#"{"type":"post","author":2,"post_id":11,"ts":2000}"#,
        r#"{"type":"post","author":3,"post_id":12,"ts":2001}"#,
        r#"{"type":"post","author":3,"post_id":13,"ts":2002}"#,
    ]);
    let entry = |p: u64, ts: u64, a: u64| ("entry".to_string(), p, Some(format!("{ts}:{p}:{a}")));
    assert_eq!(
        take(3),
        vec![entry(11, 2000, 2), entry(12, 2001, 3), entry(13, 2002, 3)]
    );
    // Post 12 deleted; author 2 unfollowed (posts 10 and 11 leave); a new
    // post by 3.
    step(&[
        r#"{"type":"delete_post","author":3,"post_id":12,"ts":3000}"#,
        r#"{"type":"unfollow","follower":1,"followee":2,"ts":3001}"#,
        r#"{"type":"post","author":3,"post_id":14,"ts":3002}"#,
    ]);
    let delete = |p: u64| ("delete".to_string(), p, None);
    assert_eq!(
        take(4),
        vec![delete(10), delete(11), delete(12), entry(14, 3002, 3)]
    );
    nothing_before_a_marker(&mut stream, tmp.path(), &processor, 3, 4000);
}

// Proves stream entries carry ids and a reconnect with Last-Event-ID gets every entry it missed, oldest first, then the page, before the live ones; an id it cannot read starts the stream fresh.
#[test]
fn timeline_stream_resumes_from_last_event_id() {
    let tmp = tempfile::tempdir().unwrap();
    let post = |author: u64, id: u64, ts: u64| {
        format!(r#"{{"type":"post","author":{author},"post_id":{id},"ts":{ts}}}"#)
    };
    let log = [
        r#"{"type":"follow","follower":1,"followee":2,"ts":1000}"#.to_string(),
        r#"{"type":"follow","follower":1,"followee":3,"ts":1001}"#.to_string(),
        post(2, 10, 1002),
    ]
    .join("\n");
    let processor = processed(tmp.path(), &log, 2);
    let server = Server::start(&processor, ApiConfig::default());
    let run = |lines: &[String]| {
        append(tmp.path(), &lines.join("\n"));
        processor
            .run(&feedlog::task::Shutdown::new(), true)
            .unwrap();
    };
    let entries = |stream: &mut common::http::EventStream, n: usize| {
        let mut got = Vec::new();
        while got.len() < n {
            let e = stream.next(Duration::from_secs(10)).expect("an entry");
            if e.event == "entry" {
                let data: serde_json::Value = serde_json::from_str(&e.data).unwrap();
                got.push((e.id.unwrap(), data["post_id"].as_u64().unwrap()));
            }
        }
        got
    };
    let mut stream = server.client.events("/v1/users/1/timeline/stream");
    // Opened before the post: it comes as an entry, not in the page.
    opened(&mut stream);
    run(&[post(3, 12, 2000)]);
    assert_eq!(entries(&mut stream, 1), vec![("2000:12:3".to_string(), 12)]);
    drop(stream);
    // Missed while away.
    run(&[post(2, 13, 2001), post(3, 14, 2002), post(4, 99, 2003)]);
    let mut again = server.client.events_with(
        "/v1/users/1/timeline/stream",
        &[("Last-Event-ID", "2000:12:3")],
    );
    assert_eq!(again.status, 200);
    assert_eq!(
        entries(&mut again, 2),
        vec![("2001:13:2".to_string(), 13), ("2002:14:3".to_string(), 14)]
    );
    // Then the page (no id: its newest entry was sent with one).
    let page = again.next(Duration::from_secs(10)).expect("the page");
    assert_eq!((page.event.as_str(), page.id), ("page", None));
    // Then live.
    run(&[post(2, 15, 2004)]);
    assert_eq!(entries(&mut again, 1), vec![("2004:15:2".to_string(), 15)]);
    let mut fresh = server.client.events_with(
        "/v1/users/1/timeline/stream",
        &[("Last-Event-ID", "yesterday")],
    );
    assert_eq!(fresh.status, 200);
    assert_eq!(posts(&opened(&mut fresh)), vec![15, 14, 13, 12, 10]);
    // Nothing old.
    nothing_before_a_marker(&mut fresh, tmp.path(), &processor, 2, 3000);
}

// Proves newer_than pages walk a timeline upwards exactly (the entries just newer than the anchor, then further up, then none until new ones arrive), next_cursor leads back down, and Link headers name both directions.
#[test]
fn newer_than_pages_and_link_headers() {
    let tmp = tempfile::tempdir().unwrap();
    let post = |id: u64| {
        format!(
            r#"{{"type":"post","author":2,"post_id":{id},"ts":{}}}"#,
            1000 + id
        )
    };
    let mut log = vec![r#"{"type":"follow","follower":1,"followee":2,"ts":1}"#.to_string()];
    log.extend((1..=30).map(post));
    let processor = processed(tmp.path(), &log.join("\n"), 2);
    let server = Server::start(&processor, ApiConfig::default());
    let c = &server.client;
    let ids = |page: &serde_json::Value| -> Vec<u64> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["post_id"].as_u64().unwrap())
            .collect()
    };
    let path = "/v1/users/1/timeline?limit=10";
    let r = c.get(path);
    let top = r.json().unwrap();
    assert_eq!(ids(&top), (21..=30).rev().collect::<Vec<_>>());
    let (next, prev) = (
        top["next_cursor"].as_str().unwrap(),
        top["prev_cursor"].as_str().unwrap(),
    );
    assert_eq!(
        r.header("link").unwrap(),
        format!(
            r#"</v1/users/1/timeline?limit=10&cursor={next}>; rel="next", </v1/users/1/timeline?limit=10&newer_than={prev}>; rel="prev""#
        )
    );
    // The same page again (kept by the page cache) carries the same header.
    assert_eq!(c.get(path).header("link"), r.header("link"));
    // Nothing newer yet: an empty page that says to poll with the same cursor.
    let none = c.json(&format!("{path}&newer_than={prev}")).unwrap();
    assert_eq!(
        (ids(&none), none["prev_cursor"].as_str()),
        (vec![], Some(prev))
    );
    append(
        tmp.path(),
        &(31..=45).map(post).collect::<Vec<_>>().join("\n"),
    );
    processor
        .run(&feedlog::task::Shutdown::new(), true)
        .unwrap();
    let above = c.json(&format!("{path}&newer_than={prev}")).unwrap();
    assert_eq!(ids(&above), (31..=40).rev().collect::<Vec<_>>());
    let higher = c
        .json(&format!(
            "{path}&newer_than={}",
            above["prev_cursor"].as_str().unwrap()
        ))
        .unwrap();
    assert_eq!(ids(&higher), (41..=45).rev().collect::<Vec<_>>());
    let down = c
        .json(&format!(
            "{path}&cursor={}",
            above["next_cursor"].as_str().unwrap()
        ))
        .unwrap();
    assert_eq!(ids(&down), (21..=30).rev().collect::<Vec<_>>());
    let both = c.get(&format!("{path}&cursor={next}&newer_than={prev}"));
    assert_eq!(both.status, 400);
}

// Proves a kept first page splits back into its Link value and body, with or without links, and that a page kept as plain JSON by another reader is recognised as one.
#[test]
fn kept_pages_split_into_link_and_body() {
    use bytes::Bytes;
    use feedlog::api::http::{kept_timeline_page, split_kept_page};
    use feedlog::api::query::{Page, PostItem};
    use feedlog::UserId;
    let page = |next: Option<&str>, prev: Option<&str>| Page {
        items: vec![PostItem::plain(7, 2, 9)],
        next_cursor: next.map(str::to_string),
        prev_cursor: prev.map(str::to_string),
    };
    for (next, prev) in [(Some("N"), Some("P")), (None, Some("P")), (None, None)] {
        let p = page(next, prev);
        let kept = kept_timeline_page(UserId(3), 10, &p).unwrap();
        let (link, body) = split_kept_page(&kept);
        assert_eq!(body, Bytes::from(serde_json::to_vec(&p).unwrap()));
        let link = String::from_utf8(link.unwrap().to_vec()).unwrap();
        assert_eq!(
            link.contains(r#"cursor=N>; rel="next""#),
            next.is_some(),
            "{link}"
        );
        assert_eq!(
            link.contains(r#"newer_than=P>; rel="prev""#),
            prev.is_some(),
            "{link}"
        );
    }
    let plain = Bytes::from(serde_json::to_vec(&page(Some("N"), None)).unwrap());
    assert_eq!(split_kept_page(&plain), (None, plain.clone()));
}

// Proves a repost by a followed user sends its post again at its new place with the reposter listed (no delete before it), and taking the repost back sends it again at the original's place without an id.
#[test]
fn timeline_stream_moves_entries_with_reposts() {
    let tmp = tempfile::tempdir().unwrap();
    let log = [
        r#"{"type":"follow","follower":1,"followee":2,"ts":1000}"#,
        r#"{"type":"follow","follower":1,"followee":3,"ts":1001}"#,
        r#"{"type":"post","author":2,"post_id":10,"ts":1002}"#,
    ]
    .join("\n");
    let processor = processed(tmp.path(), &log, 2);
    let server = pushed_only(&processor);
    let mut stream = server.client.events("/v1/users/1/timeline/stream");
    assert_eq!(posts(&opened(&mut stream)), vec![10]);
    let step = |lines: &[&str]| append_and_process(tmp.path(), &processor, lines);
    // An entry sent again only for its counts (a repost counted at its
    // original's partition in another commit than the move) is skipped:
    // the counts have a test of their own.
    let mut last = std::collections::HashMap::new();
    let mut next = || loop {
        let Some(Sse { event, data, id }) = stream.next(Duration::from_secs(10)) else {
            panic!("nothing within 10 s of a commit");
        };
        if event != "comment" {
            let data = without_counts(serde_json::from_str(&data).unwrap());
            if event == "entry"
                && last.insert(data["post_id"].clone(), data.clone()) == Some(data.clone())
            {
                continue;
            }
            return (event, data, id);
        }
    };
    // A new post, then user 3 reposts the old one: it moves to the top.
    step(&[r#"{"type":"post","author":2,"post_id":11,"ts":2000}"#]);
    let (event, data, id) = next();
    assert_eq!(
        (event.as_str(), data["post_id"].as_u64()),
        ("entry", Some(11))
    );
    assert_eq!(id.as_deref(), Some("2000:11:2"));
    step(&[r#"{"type":"repost","author":3,"post_id":50,"of_author":2,"of_post_id":10,"ts":3000}"#]);
    let (event, data, id) = next();
    assert_eq!(event, "entry");
    assert_eq!(
        data,
        serde_json::json!({"post_id": 10, "author": 2, "ts": 3000, "post_ts": 1002,
            "reposted_by": [{"user": 3, "post_id": 50, "ts": 3000}], "reposters": 1})
    );
    assert_eq!(id.as_deref(), Some("3000:10:2"));
    // The repost taken back: the entry goes back to its own time, below
    // post 11; sent again without an id, and no delete.
    step(&[r#"{"type":"delete_post","author":3,"post_id":50,"ts":4000}"#]);
    let (event, data, id) = next();
    assert_eq!(
        (event.as_str(), data, id),
        (
            "entry",
            serde_json::json!({"post_id": 10, "author": 2, "ts": 1002}),
            None
        )
    );
    // Deleting the original now is a delete of that entry.
    step(&[r#"{"type":"delete_post","author":2,"post_id":10,"ts":5000}"#]);
    let (event, data, _) = next();
    assert_eq!(
        (event.as_str(), data),
        (
            "delete",
            serde_json::json!({"post_id": 10, "author": 2, "ts": 1002})
        )
    );
    nothing_before_a_marker(&mut stream, tmp.path(), &processor, 3, 6000);
}

// Proves a mute removes the muted author's streamed entries with `delete` events and the unmute sends them again (without an id: they sit below the newest entry sent), while other authors' entries stay.
#[test]
fn timeline_stream_announces_a_mute_and_its_undo() {
    let tmp = tempfile::tempdir().unwrap();
    let log = [
        r#"{"type":"follow","follower":1,"followee":2,"ts":1000}"#,
        r#"{"type":"follow","follower":1,"followee":3,"ts":1001}"#,
    ]
    .join("\n");
    let processor = processed(tmp.path(), &log, 2);
    let server = pushed_only(&processor);
    let mut stream = server.client.events("/v1/users/1/timeline/stream");
    assert_eq!(stream.status, 200);
    assert!(posts(&opened(&mut stream)).is_empty());
    let step = |lines: &[&str]| append_and_process(tmp.path(), &processor, lines);
    let mut take = |n: usize| {
        let mut got = Vec::new();
        while got.len() < n {
            let Some(Sse { event, data, id }) = stream.next(Duration::from_secs(10)) else {
                panic!("only {got:?} within 10 s of a commit");
            };
            if event != "comment" {
                let data: serde_json::Value = serde_json::from_str(&data).unwrap();
                got.push((event, data["post_id"].as_u64().unwrap(), id.is_some()));
            }
        }
        got.sort();
        got
    };
    step(&[r#"{"type":"post","author":2,"post_id":11,"ts":2000}"#]);
    assert_eq!(take(1), vec![("entry".to_string(), 11, true)]);
    step(&[r#"{"type":"post","author":3,"post_id":12,"ts":2001}"#]);
    assert_eq!(take(1), vec![("entry".to_string(), 12, true)]);
    step(&[r#"{"type":"mute","user":1,"target":2,"ts":2002}"#]);
    assert_eq!(take(1), vec![("delete".to_string(), 11, false)]);
    step(&[r#"{"type":"unmute","user":1,"target":2,"ts":2003}"#]);
    assert_eq!(take(1), vec![("entry".to_string(), 11, false)]);
    nothing_before_a_marker(&mut stream, tmp.path(), &processor, 3, 3000);
}

// Proves a client that applies the stream's events holds the timeline's first page after every commit, on a log with mutes and unmutes, a timed mute that ends, hidden and shown reposts, reposts taken back, deletions, entries that arrive below the newest (late posts, a new followee's older posts) and entries that fall below the window.
#[test]
fn the_stream_keeps_a_client_copy_equal_to_the_first_page() {
    let tmp = tempfile::tempdir().unwrap();
    let log = [
        r#"{"type":"follow","follower":1,"followee":2,"ts":1000}"#,
        r#"{"type":"follow","follower":1,"followee":3,"ts":1001}"#,
        r#"{"type":"follow","follower":1,"followee":4,"ts":1002}"#,
        r#"{"type":"post","author":2,"post_id":10,"ts":1100}"#,
        r#"{"type":"post","author":3,"post_id":11,"ts":1200}"#,
        r#"{"type":"post","author":5,"post_id":12,"ts":1300}"#,
        r#"{"type":"post","author":5,"post_id":13,"ts":1400}"#,
    ]
    .join("\n");
    let processor = processed(tmp.path(), &log, 2);
    let server = pushed_only(&processor);
    let limit = 4;
    let mut stream = server
        .client
        .events(&format!("/v1/users/1/timeline/stream?limit={limit}"));
    assert_eq!(stream.status, 200);
    let mut client = StreamCopy {
        limit,
        items: Vec::new(),
    };
    let steps: Vec<Vec<&str>> = vec![
        vec![
            r#"{"type":"post","author":2,"post_id":20,"ts":2000}"#,
            r#"{"type":"post","author":3,"post_id":21,"ts":2001}"#,
            r#"{"type":"post","author":2,"post_id":22,"ts":2002}"#,
        ],
        // Posts arriving below the newest, one of them below the window.
        vec![
            r#"{"type":"post","author":3,"post_id":23,"ts":1999}"#,
            r#"{"type":"post","author":3,"post_id":24,"ts":1050}"#,
        ],
        vec![r#"{"type":"mute","user":1,"target":2,"ts":2100}"#],
        vec![r#"{"type":"unmute","user":1,"target":2,"ts":2101}"#],
        // A repost moves a post up; hidden, it goes back; shown, up again.
        vec![
            r#"{"type":"repost","author":3,"post_id":30,"of_author":2,"of_post_id":10,"ts":2200}"#,
        ],
        vec![r#"{"type":"hide_reposts","user":1,"target":3,"ts":2201}"#],
        vec![r#"{"type":"show_reposts","user":1,"target":3,"ts":2202}"#],
        vec![r#"{"type":"delete_post","author":3,"post_id":30,"ts":2203}"#],
        vec![r#"{"type":"delete_post","author":2,"post_id":22,"ts":2204}"#],
        // A new followee's older posts come in below the newest.
        vec![r#"{"type":"follow","follower":1,"followee":5,"ts":2300}"#],
        // A timed mute, then log time passes its end (the reader's own
        // events move its partition's clock).
        vec![r#"{"type":"mute","user":1,"target":3,"ts":2400,"until":2500}"#],
        vec![r#"{"type":"seen","user":1,"ts":2600}"#],
        vec![r#"{"type":"unfollow","follower":1,"followee":2,"ts":2700}"#],
    ];
    let mut marker = None;
    for (n, lines) in steps.iter().enumerate() {
        // Each step ends with a new marker post by 4, newer than every
        // other entry and older than the timed mute (the previous marker
        // deleted, so markers do not fill the window): once its entry has
        // come, the stream has read past every commit of the step.
        let ts = 2210 + n as u64;
        let post = 9_000 + n as u64;
        let mut all: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        if let Some((p, t)) = marker {
            all.push(format!(
                r#"{{"type":"delete_post","author":4,"post_id":{p},"ts":{t}}}"#
            ));
        }
        all.push(format!(
            r#"{{"type":"post","author":4,"post_id":{post},"ts":{ts}}}"#
        ));
        marker = Some((post, ts));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        append_and_process(tmp.path(), &processor, &all);
        loop {
            let e = stream
                .next(Duration::from_secs(10))
                .unwrap_or_else(|| panic!("step {n}: no marker within 10 s of its commit"));
            if e.event == "comment" {
                continue;
            }
            client.apply(&e);
            let data: serde_json::Value = serde_json::from_str(&e.data).unwrap();
            if e.event == "entry" && data["post_id"].as_u64() == Some(post) {
                break;
            }
        }
        let page = server
            .client
            .json(&format!("/v1/users/1/timeline?limit={limit}&counts=0"))
            .unwrap();
        let items = page["items"].as_array().unwrap().clone();
        // Counts change by other partitions' commits, which may come after
        // the marker's: they have a test of their own below.
        let mut copy = client.items.clone();
        for i in &mut copy {
            let i = i.as_object_mut().unwrap();
            assert!(
                i.remove("counts").is_some() && i.remove("viewer").is_some(),
                "{i:?}"
            );
        }
        assert_eq!(copy, items, "after step {n} ({lines:?})");
        // The timed mute hides author 3 until the reader's log time passes
        // its end.
        let by_3 = items.iter().any(|i| i["author"] == 3);
        match lines[0] {
            l if l.contains(r#""until":2500"#) => assert!(!by_3, "muted: {items:?}"),
            l if l.contains(r#""type":"seen""#) => assert!(by_3, "mute over: {items:?}"),
            _ => {}
        }
    }
}

// Proves the stream's entries carry their counts and the reader's flags, and a like, a reply and the reader's own repost of a post on the first page send its entry again with them changed.
#[test]
fn the_stream_sends_an_entry_again_when_its_counts_change() {
    let tmp = tempfile::tempdir().unwrap();
    let log = [
        r#"{"type":"follow","follower":1,"followee":2,"ts":1000}"#,
        r#"{"type":"post","author":2,"post_id":10,"ts":1100}"#,
    ]
    .join("\n");
    let processor = processed(tmp.path(), &log, 2);
    let server = pushed_only(&processor);
    let mut stream = server.client.events("/v1/users/1/timeline/stream");
    let page = opened(&mut stream);
    let counts = |v: &serde_json::Value| (v["counts"].clone(), v["viewer"].clone());
    let zero = serde_json::json!({"likes": 0, "replies": 0, "reposts": 0});
    let unset = serde_json::json!({"liked": false, "reposted": false});
    assert_eq!(counts(&page["items"][0]), (zero, unset));
    append_and_process(
        tmp.path(),
        &processor,
        &[
            r#"{"type":"like","user":3,"author":2,"post_id":10,"ts":1200}"#,
            r#"{"type":"like","user":1,"author":2,"post_id":10,"ts":1201}"#,
            r#"{"type":"post","author":4,"post_id":40,"reply_to":{"author":2,"post_id":10},"ts":1202}"#,
            r#"{"type":"repost","author":1,"post_id":50,"of_author":2,"of_post_id":10,"ts":1203}"#,
        ],
    );
    let want = (
        serde_json::json!({"likes": 2, "replies": 1, "reposts": 1}),
        serde_json::json!({"liked": true, "reposted": true}),
    );
    // Each change may come in a read of its own: the last entry sent has
    // them all.
    let mut last = None;
    while last.as_ref() != Some(&want) {
        let e = stream
            .next(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("no entry with {want:?} within 10 s; the last {last:?}"));
        if e.event == "entry" {
            let data: serde_json::Value = serde_json::from_str(&e.data).unwrap();
            assert_eq!(
                (data["post_id"].as_u64(), e.id.as_deref()),
                (Some(10), None),
                "{data}"
            );
            last = Some(counts(&data));
        }
    }
}
