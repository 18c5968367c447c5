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
    let mut kept = links(super::route::TIMELINE, user, mode, limit, next, prev).into_bytes();
    kept.push(b'\n');
    serde_json::to_writer(&mut kept, page).ok()?;
    kept.shrink_to_fit();
    Some(Bytes::from(kept))
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
