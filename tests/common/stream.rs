//! Helpers of the timeline stream's tests: a fresh stream's opening, a
//! server pushed by commits alone, and the check that nothing is pending.

use super::api::{append_and_process, Server};
use super::http::EventStream;
use feedlog::api::http::ApiConfig;
use feedlog::Processor;
use std::path::Path;
use std::time::Duration;

/// Asserts that nothing is pending on `stream`: commits a marker post by
/// `author` (followed by the stream's user) at `ts` (newer than any entry
/// sent), and the next event other than a comment must be the marker's
/// entry. Anything wrongly sent before would arrive first; waiting a while
/// for "nothing" would pass when it is merely slow.
pub fn nothing_before_a_marker(
    stream: &mut EventStream,
    dir: &Path,
    processor: &Processor,
    author: u64,
    ts: u64,
) {
    let marker = 9_000_000 + ts;
    let line = format!(r#"{{"type":"post","author":{author},"post_id":{marker},"ts":{ts}}}"#);
    append_and_process(dir, processor, &[&line]);
    loop {
        let e = stream
            .next(Duration::from_secs(10))
            .expect("the marker within 10 s of its commit");
        if e.event == "comment" {
            continue;
        }
        let data: serde_json::Value = serde_json::from_str(&e.data).unwrap();
        assert_eq!(
            (e.event.as_str(), data["post_id"].as_u64()),
            ("entry", Some(marker)),
            "something came before the marker: {data}"
        );
        return;
    }
}

/// An entry without its counts and the reader's flags.
pub fn without_counts(mut entry: serde_json::Value) -> serde_json::Value {
    if let Some(o) = entry.as_object_mut() {
        o.remove("counts");
        o.remove("viewer");
    }
    entry
}

/// Reads a fresh stream's opening: the `subscribed` comment, then the
/// page the client's copy starts from; returns the page.
pub fn opened(stream: &mut EventStream) -> serde_json::Value {
    let comment = stream.next(Duration::from_secs(10)).map(|e| e.event);
    assert_eq!(
        comment,
        Some("comment".into()),
        "the stream opens with a comment"
    );
    let page = stream
        .next(Duration::from_secs(10))
        .expect("the opening page");
    assert_eq!(page.event, "page", "then the page: {}", page.data);
    serde_json::from_str(&page.data).unwrap()
}

/// A server over `processor` whose streams poll only once an hour: what
/// they send comes from the processor's commits.
pub fn pushed_only(processor: &Processor) -> Server {
    let cfg = ApiConfig {
        stream_poll: Duration::from_secs(3600),
        ..ApiConfig::default()
    };
    Server::start(processor, cfg)
}
