//! The notifications stream, and the unread counts both streams send.

use crate::common::api::{append_and_process, processed, Server};
use crate::common::http::EventStream;
use crate::common::stream::{opened, pushed_only};
use serde_json::{json, Value};
use std::time::Duration;

/// The next event other than a comment, which must be `event`: its data.
fn expect(stream: &mut EventStream, event: &str) -> Value {
    loop {
        let e = stream
            .next(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("no {event} within 10 s"));
        if e.event == "comment" {
            continue;
        }
        assert_eq!(e.event, event, "expected {event}, got {}", e.data);
        return serde_json::from_str(&e.data).unwrap();
    }
}

/// `GET path` as a stream's page lists it: `{items, next_cursor}`.
fn page_of(server: &Server, path: &str) -> Value {
    let page = server.client.json(path).unwrap();
    json!({ "items": page["items"], "next_cursor": page["next_cursor"] })
}

fn unread(feed: &str, n: u64, capped: bool) -> Value {
    json!({ "feed": feed, "unread": n, "capped": capped })
}

// Proves the notifications stream opens with the first page and the unread count, sends the page again whenever it changes (a like joins its group in place, an unlike leaves it, a deleted post takes its group away, a follow joins the follows' group) and only then, each time equal to `GET …/notifications`, and sends the unread count only when a new group or a `seen` of the feed moves it; a stream of one act per entry and one kind gets its own page and the same count.
#[test]
fn the_notifications_stream_sends_the_page_when_it_changes_and_the_unread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let log = [
        r#"{"type":"post","author":1,"post_id":10,"ts":1000}"#,
        r#"{"type":"follow","follower":2,"followee":1,"ts":1100}"#,
    ]
    .join("\n");
    let processor = processed(tmp.path(), &log, 2);
    let server = pushed_only(&processor);
    let path = "/v1/users/1/notifications?limit=5";
    let mut stream = server
        .client
        .events("/v1/users/1/notifications/stream?limit=5");
    assert_eq!(stream.status, 200);
    stream.unread = true;
    let first = opened(&mut stream);
    assert_eq!(first, page_of(&server, path));
    assert_eq!(first["items"][0]["kind"], "follow", "{first}");
    assert_eq!(
        expect(&mut stream, "unread"),
        unread("notifications", 1, false)
    );
    let step = |lines: &[&str]| append_and_process(tmp.path(), &processor, lines);
    let like = |kind: &str, user: u64, ts: u64| {
        format!(r#"{{"type":"{kind}","user":{user},"author":1,"post_id":10,"ts":{ts}}}"#)
    };
    // A new group: the page, then the count.
    step(&[&like("like", 3, 2000)]);
    let page = expect(&mut stream, "page");
    assert_eq!(page, page_of(&server, path));
    assert_eq!(page["items"][0]["actors"], json!([3]), "{page}");
    assert_eq!(
        expect(&mut stream, "unread"),
        unread("notifications", 2, false)
    );
    // A like joins the group: the page only (the count stays 2).
    step(&[&like("like", 4, 2100)]);
    let page = expect(&mut stream, "page");
    assert_eq!(page, page_of(&server, path));
    assert_eq!(page["items"][0]["actors"], json!([4, 3]), "{page}");
    // A `seen` up to the like group: the count only, 0.
    let place = &page["items"][0]["place"];
    let seen = format!(
        r#"{{"type":"seen","user":1,"ts":2200,"feed":"notifications","read_up_to":{place}}}"#
    );
    step(&[&seen]);
    assert_eq!(
        expect(&mut stream, "unread"),
        unread("notifications", 0, false)
    );
    // An unlike, then the post deleted: the page each time, the count
    // stays 0 (the follows' group is below the marker).
    step(&[&like("unlike", 4, 2300)]);
    let page = expect(&mut stream, "page");
    assert_eq!(page, page_of(&server, path));
    assert_eq!(page["items"][0]["actors"], json!([3]), "{page}");
    step(&[r#"{"type":"delete_post","author":1,"post_id":10,"ts":2400}"#]);
    let page = expect(&mut stream, "page");
    assert_eq!(page, page_of(&server, path));
    assert_eq!(page["items"].as_array().unwrap().len(), 1, "{page}");
    // A follow within 12 hours joins the follows' group, now above the
    // marker: the page, then the count.
    step(&[r#"{"type":"follow","follower":5,"followee":1,"ts":3000}"#]);
    let page = expect(&mut stream, "page");
    assert_eq!(page, page_of(&server, path));
    assert_eq!(page["items"][0]["actors"], json!([5, 2]), "{page}");
    assert_eq!(
        expect(&mut stream, "unread"),
        unread("notifications", 1, false)
    );
    // One act per entry and one kind: the page as asked, the count of
    // every group of every kind all the same.
    let asked = "limit=5&grouped=0&types=follow";
    let mut acts = server
        .client
        .events(&format!("/v1/users/1/notifications/stream?{asked}"));
    acts.unread = true;
    let page = opened(&mut acts);
    let want = page_of(&server, &format!("/v1/users/1/notifications?{asked}"));
    assert_eq!(page, want);
    assert_eq!(page["items"].as_array().unwrap().len(), 2, "{page}");
    assert_eq!(
        expect(&mut acts, "unread"),
        unread("notifications", 1, false)
    );
}

// Proves the timeline stream sends the home unread count after its opening page and whenever it changes: new entries raise it up to `max` (then `capped`), a `seen` of the home feed lowers it, and a deleted entry above the marker takes it to 0.
#[test]
fn the_timeline_stream_sends_the_home_unread_count_when_it_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let log = [
        r#"{"type":"follow","follower":1,"followee":2,"ts":1000}"#,
        r#"{"type":"post","author":2,"post_id":10,"ts":1100}"#,
        r#"{"type":"post","author":2,"post_id":11,"ts":1200}"#,
    ]
    .join("\n");
    let processor = processed(tmp.path(), &log, 2);
    let server = pushed_only(&processor);
    let mut stream = server.client.events("/v1/users/1/timeline/stream?max=3");
    assert_eq!(stream.status, 200);
    stream.unread = true;
    opened(&mut stream);
    assert_eq!(expect(&mut stream, "unread"), unread("home", 2, false));
    let step = |lines: &[&str]| append_and_process(tmp.path(), &processor, lines);
    step(&[r#"{"type":"post","author":2,"post_id":12,"ts":1300}"#]);
    assert_eq!(expect(&mut stream, "entry")["post_id"], 12);
    assert_eq!(expect(&mut stream, "unread"), unread("home", 3, false));
    step(&[r#"{"type":"post","author":2,"post_id":13,"ts":1400}"#]);
    assert_eq!(expect(&mut stream, "entry")["post_id"], 13);
    assert_eq!(expect(&mut stream, "unread"), unread("home", 3, true));
    step(&[
        r#"{"type":"seen","user":1,"ts":1500,"feed":"home","read_up_to":{"ts":1300,"post_id":12,"author":2}}"#,
    ]);
    assert_eq!(expect(&mut stream, "unread"), unread("home", 1, false));
    step(&[r#"{"type":"delete_post","author":2,"post_id":13,"ts":1600}"#]);
    assert_eq!(expect(&mut stream, "delete")["post_id"], 13);
    assert_eq!(expect(&mut stream, "unread"), unread("home", 0, false));
    let markers = server.client.json("/v1/users/1/markers").unwrap();
    assert_eq!(markers["feeds"][0]["unread"], 0, "{markers}");
}

// Proves the unread count without a marker is every entry of the timeline, on the markers route and on the stream, for a timeline longer than a first page (past what an inbox head holds at first).
#[test]
fn without_a_marker_every_entry_is_unread() {
    let tmp = tempfile::tempdir().unwrap();
    let mut lines = vec![
        r#"{"type":"follow","follower":1,"followee":2,"ts":1000}"#.to_string(),
        r#"{"type":"follow","follower":1,"followee":3,"ts":1001}"#.to_string(),
    ];
    for i in 0..30u64 {
        let (author, ts) = (2 + i % 2, 2000 + i);
        lines.push(format!(
            r#"{{"type":"post","author":{author},"post_id":{},"ts":{ts}}}"#,
            100 + i
        ));
    }
    let processor = processed(tmp.path(), &lines.join("\n"), 2);
    let server = pushed_only(&processor);
    let markers = server.client.json("/v1/users/1/markers").unwrap();
    assert_eq!(markers["feeds"][0]["unread"], 30, "{markers}");
    let mut stream = server.client.events("/v1/users/1/timeline/stream");
    stream.unread = true;
    opened(&mut stream);
    assert_eq!(expect(&mut stream, "unread"), unread("home", 30, false));
    append_and_process(
        tmp.path(),
        &processor,
        &[r#"{"type":"post","author":3,"post_id":500,"ts":9000}"#],
    );
    assert_eq!(expect(&mut stream, "entry")["post_id"], 500);
    assert_eq!(expect(&mut stream, "unread"), unread("home", 31, false));
    let markers = server.client.json("/v1/users/1/markers").unwrap();
    assert_eq!(markers["feeds"][0]["unread"], 31, "{markers}");
}

// Proves a stream's unread count is bounded by 100 when `max` is not given (`capped`), while the markers route counts up to its own default of 1,000.
#[test]
fn a_streams_unread_count_stops_at_100_by_default() {
    let tmp = tempfile::tempdir().unwrap();
    let mut lines = vec![r#"{"type":"follow","follower":1,"followee":2,"ts":1000}"#.to_string()];
    for i in 0..105u64 {
        lines.push(format!(
            r#"{{"type":"post","author":2,"post_id":{},"ts":{}}}"#,
            100 + i,
            2000 + i
        ));
    }
    let processor = processed(tmp.path(), &lines.join("\n"), 2);
    let server = pushed_only(&processor);
    let markers = server.client.json("/v1/users/1/markers").unwrap();
    assert_eq!(markers["feeds"][0]["unread"], 105, "{markers}");
    let mut stream = server.client.events("/v1/users/1/timeline/stream");
    stream.unread = true;
    opened(&mut stream);
    assert_eq!(expect(&mut stream, "unread"), unread("home", 100, true));
}
