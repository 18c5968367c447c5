//! A page as the API answers it: its JSON body, its `Link` header
//! (RFC 8288) with the next and previous pages, and first timeline pages
//! as the page cache keeps them.

use super::errors::ApiError;
use crate::api::query::{Page, PostItem, RepostMode};
use crate::core::event::UserId;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Serialize;

/// A `Link` header (RFC 8288) with the next (older) page and, for the
/// timeline, the previous (newer) one, as GitHub's and Mastodon's APIs
/// give them.
pub(super) fn link(
    resp: &mut Response,
    route: &str,
    user: UserId,
    mode: RepostMode,
    limit: usize,
    (next, prev): (Option<&str>, Option<&str>),
) {
    let links = links(route, user, mode, limit, next, prev);
    if !links.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&links) {
            resp.headers_mut().insert(header::LINK, v);
        }
    }
}

/// A first timeline page as the API keeps it in the page cache: its
/// `Link` header's value, a newline (compact JSON has none), and the body
/// it answers; no spare capacity. Any reader of the same stores that keeps
/// pages should keep them this way (the tests do).
pub fn kept_timeline_page(user: UserId, limit: usize, page: &Page<PostItem>) -> Option<Bytes> {
    let (next, prev) = (page.next_cursor.as_deref(), page.prev_cursor.as_deref());
    let mode = RepostMode::Newest;
    let link = links(super::route::TIMELINE, user, mode, limit, next, prev);
    // Sized up front: a plain entry is ~60 bytes; no copy to shrink it.
    let mut kept = Vec::with_capacity(link.len() + 96 + 64 * page.items.len());
    kept.extend_from_slice(link.as_bytes());
    kept.push(b'\n');
    write_timeline_page(&mut kept, page).ok()?;
    Some(Bytes::from(kept))
}

/// Appends `page` as JSON to `out`: the bytes `serde_json` writes for it,
/// the plain entries (a post, its author and its time: most of a page)
/// written directly, the others through `serde_json`.
fn write_timeline_page(out: &mut Vec<u8>, page: &Page<PostItem>) -> serde_json::Result<()> {
    let mut n = itoa::Buffer::new();
    out.extend_from_slice(b"{\"items\":[");
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if *item != PostItem::plain(item.post_id, item.author, item.ts) {
            serde_json::to_writer(&mut *out, item)?;
            continue;
        }
        out.extend_from_slice(b"{\"post_id\":");
        out.extend_from_slice(n.format(item.post_id).as_bytes());
        out.extend_from_slice(b",\"author\":");
        out.extend_from_slice(n.format(item.author).as_bytes());
        out.extend_from_slice(b",\"ts\":");
        out.extend_from_slice(n.format(item.ts).as_bytes());
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"next_cursor\":");
    serde_json::to_writer(&mut *out, &page.next_cursor)?;
    if let Some(prev) = &page.prev_cursor {
        out.extend_from_slice(b",\"prev_cursor\":");
        serde_json::to_writer(&mut *out, prev)?;
    }
    out.push(b'}');
    Ok(())
}

/// A kept page's `Link` value (`None` when it was kept as a plain JSON
/// body, which starts with `{`) and its body.
pub fn split_kept_page(kept: &Bytes) -> (Option<Bytes>, Bytes) {
    if kept.first() == Some(&b'{') {
        return (None, kept.clone());
    }
    let at = kept.iter().position(|&b| b == b'\n').unwrap_or(kept.len());
    (
        Some(kept.slice(..at)),
        kept.slice((at + 1).min(kept.len())..),
    )
}

/// The cursors of a page kept as a plain JSON body.
#[derive(serde::Deserialize)]
pub(super) struct Cursors {
    pub(super) next_cursor: Option<String>,
    #[serde(default)]
    pub(super) prev_cursor: Option<String>,
}

/// The `Link` header's value ("" for none); a timeline's in another mode
/// than the default names it.
pub(super) fn links(
    route: &str,
    user: UserId,
    mode: RepostMode,
    limit: usize,
    next: Option<&str>,
    prev: Option<&str>,
) -> String {
    let path = route.replace("{id}", &user.0.to_string());
    let mode = match mode {
        RepostMode::Newest => String::new(),
        other => format!("&reposts={}", other.as_str()),
    };
    let mut links = Vec::new();
    if let Some(c) = next {
        links.push(format!(
            r#"<{path}?limit={limit}{mode}&cursor={c}>; rel="next""#
        ));
    }
    if let Some(c) = prev {
        links.push(format!(
            r#"<{path}?limit={limit}{mode}&newer_than={c}>; rel="prev""#
        ));
    }
    links.join(", ")
}

/// A page as JSON, into a buffer sized for it up front.
pub(super) fn encode_page<T: Serialize>(page: &Page<T>) -> serde_json::Result<Vec<u8>> {
    let mut body = Vec::with_capacity(64 + 64 * page.items.len());
    serde_json::to_writer(&mut body, page)?;
    Ok(body)
}

/// A page as a JSON response.
pub(super) fn json_page<T: Serialize>(page: &Page<T>) -> Response {
    match encode_page(page) {
        Ok(body) => json_response(Bytes::from(body)),
        Err(e) => ApiError::internal(e).into_response(),
    }
}

pub(super) fn json_response(body: Bytes) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::query::RepostedBy;
    use proptest::prelude::*;

    fn item((post_id, author, ts, reposters): (u64, u64, u64, Option<u64>)) -> PostItem {
        let mut item = PostItem::plain(post_id, author, ts);
        if let Some(n) = reposters {
            item.post_ts = Some(ts / 2);
            item.reposters = Some(n);
            item.reposted_by = Some(vec![RepostedBy {
                user: n,
                post_id: n,
                ts,
            }]);
        }
        item
    }

    proptest! {
        // Proves a timeline page written directly is byte for byte what serde_json writes for it, plain entries or not, with or without cursors.
        #[test]
        fn timeline_pages_written_directly_equal_serde_json(
            items in proptest::collection::vec(any::<(u64, u64, u64, Option<u64>)>(), 0..25),
            next in proptest::option::of("[A-Za-z0-9_\\-\"\\\\]{0,40}"),
            prev in proptest::option::of("[A-Za-z0-9_\\-]{0,40}"),
        ) {
            let page = Page { items: items.into_iter().map(item).collect(), next_cursor: next, prev_cursor: prev };
            let mut ours = Vec::new();
            write_timeline_page(&mut ours, &page).unwrap();
            prop_assert_eq!(String::from_utf8(ours).unwrap(), serde_json::to_string(&page).unwrap());
        }
    }
}
