//! A page as the API answers it: its JSON body, its `Link` header
//! (RFC 8288) with the next and previous pages, and first timeline pages
//! as the page cache keeps them.

use super::errors::ApiError;
use crate::api::query::{Counts, Flags, Page, PostItem, RepostMode};
use crate::core::event::{PostId, UserId};
use crate::core::keys::PostRef;
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

/// The `Link` header of a page of `route` for `user` of `limit` whose
/// next page starts at `next`, repeating the parameters `kept`
/// (`&name=value…`) before the cursor.
pub(super) fn link_keeping(
    resp: &mut Response,
    (route, user, limit): (&str, UserId, usize),
    next: Option<&str>,
    kept: &str,
) {
    let links = links(route, user, RepostMode::Newest, limit, next, None)
        .replace("&cursor=", &format!("{kept}&cursor="));
    if !links.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&links) {
            resp.headers_mut().insert(header::LINK, v);
        }
    }
}

/// A timeline page as the API keeps it in the page cache: its `Link`
/// header's value, a newline (compact JSON has none), its index (each
/// entry's `end:author:post_id`, `end` the offset in the body of the
/// brace closing the entry, comma-separated), a newline, and the body it
/// answers without counts; no spare capacity. The index lets an answer put
/// each entry's counts and the reader's flags, read when it is served, in
/// place ([`with_counts`]). Any reader of the same stores that keeps pages
/// should keep them this way (the tests do).
pub fn kept_timeline_page(user: UserId, limit: usize, page: &Page<PostItem>) -> Option<Bytes> {
    let (next, prev) = (page.next_cursor.as_deref(), page.prev_cursor.as_deref());
    let mode = RepostMode::Newest;
    let link = links(super::route::TIMELINE, user, mode, limit, next, prev);
    let mut body = Vec::with_capacity(96 + 64 * page.items.len());
    let ends = write_timeline_page(&mut body, page).ok()?;
    let mut n = itoa::Buffer::new();
    let mut index = Vec::with_capacity(32 * ends.len());
    for (i, (end, item)) in ends.iter().zip(&page.items).enumerate() {
        if i > 0 {
            index.push(b',');
        }
        for (j, v) in [*end as u64, item.author, item.post_id]
            .into_iter()
            .enumerate()
        {
            if j > 0 {
                index.push(b':');
            }
            index.extend_from_slice(n.format(v).as_bytes());
        }
    }
    let mut kept = Vec::with_capacity(link.len() + index.len() + 2 + body.len());
    kept.extend_from_slice(link.as_bytes());
    kept.push(b'\n');
    kept.extend_from_slice(&index);
    kept.push(b'\n');
    kept.extend_from_slice(&body);
    Some(Bytes::from(kept))
}

/// Appends `page` as JSON to `out`: the bytes `serde_json` writes for it,
/// the plain entries (a post, its author and its time: most of a page)
/// written directly, the others through `serde_json`. Returns the offset
/// in `out` of each entry's closing brace.
fn write_timeline_page(out: &mut Vec<u8>, page: &Page<PostItem>) -> serde_json::Result<Vec<usize>> {
    let mut n = itoa::Buffer::new();
    let mut ends = Vec::with_capacity(page.items.len());
    out.extend_from_slice(b"{\"items\":[");
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if *item != PostItem::plain(item.post_id, item.author, item.ts) {
            serde_json::to_writer(&mut *out, item)?;
            ends.push(out.len() - 1);
            continue;
        }
        out.extend_from_slice(b"{\"post_id\":");
        out.extend_from_slice(n.format(item.post_id).as_bytes());
        out.extend_from_slice(b",\"author\":");
        out.extend_from_slice(n.format(item.author).as_bytes());
        out.extend_from_slice(b",\"ts\":");
        out.extend_from_slice(n.format(item.ts).as_bytes());
        ends.push(out.len());
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"next_cursor\":");
    serde_json::to_writer(&mut *out, &page.next_cursor)?;
    if let Some(prev) = &page.prev_cursor {
        out.extend_from_slice(b",\"prev_cursor\":");
        serde_json::to_writer(&mut *out, prev)?;
    }
    out.push(b'}');
    Ok(ends)
}

/// A kept page, split: its `Link` value and index (`None` when it was
/// kept as a plain JSON body, which starts with `{`), and its body.
pub struct KeptPage {
    /// The `Link` header's value.
    pub link: Option<Bytes>,
    /// Each entry's closing brace's offset in `body`, and its post.
    pub index: Option<Vec<(usize, PostRef)>>,
    /// The page's JSON, without counts.
    pub body: Bytes,
}

impl KeptPage {
    /// Splits a page [`kept_timeline_page`] kept (or a plain JSON body).
    pub fn split(kept: &Bytes) -> KeptPage {
        if kept.first() == Some(&b'{') {
            let body = kept.clone();
            return KeptPage {
                link: None,
                index: None,
                body,
            };
        }
        let line = |from: usize| {
            let at = kept[from..].iter().position(|&b| b == b'\n');
            at.map_or(kept.len(), |at| from + at)
        };
        let end_link = line(0);
        let end_index = line((end_link + 1).min(kept.len()));
        let index = std::str::from_utf8(&kept[(end_link + 1).min(kept.len())..end_index]).ok();
        KeptPage {
            link: Some(kept.slice(..end_link)),
            index: index.and_then(parse_index),
            body: kept.slice((end_index + 1).min(kept.len())..),
        }
    }

    /// The body with each entry's counts and the reader's flags put in
    /// (`counts[i]` and `flags[i]` for the `i`th entry): what `serde_json`
    /// writes for the page with them.
    pub fn with_counts(&self, counts: &[Counts], flags: Option<&[Flags]>) -> Option<Bytes> {
        let index = self.index.as_ref()?;
        if counts.len() != index.len() || flags.is_some_and(|f| f.len() != index.len()) {
            return None;
        }
        let mut out = Vec::with_capacity(self.body.len() + 72 * index.len());
        let mut n = itoa::Buffer::new();
        let mut from = 0;
        for (i, &(end, _)) in index.iter().enumerate() {
            out.extend_from_slice(self.body.get(from..end)?);
            out.extend_from_slice(b",\"counts\":{\"likes\":");
            out.extend_from_slice(n.format(counts[i].likes).as_bytes());
            out.extend_from_slice(b",\"replies\":");
            out.extend_from_slice(n.format(counts[i].replies).as_bytes());
            out.extend_from_slice(b",\"reposts\":");
            out.extend_from_slice(n.format(counts[i].reposts).as_bytes());
            out.push(b'}');
            if let Some(f) = flags {
                out.extend_from_slice(b",\"viewer\":{\"liked\":");
                out.extend_from_slice(if f[i].liked { b"true" } else { b"false" });
                out.extend_from_slice(b",\"reposted\":");
                out.extend_from_slice(if f[i].reposted { b"true" } else { b"false" });
                out.push(b'}');
            }
            from = end;
        }
        out.extend_from_slice(self.body.get(from..)?);
        Some(Bytes::from(out))
    }

    /// The posts of the entries, in order.
    pub fn roots(&self) -> Option<Vec<PostRef>> {
        Some(self.index.as_ref()?.iter().map(|&(_, r)| r).collect())
    }
}

/// An index line of [`kept_timeline_page`].
fn parse_index(s: &str) -> Option<Vec<(usize, PostRef)>> {
    if s.is_empty() {
        return Some(Vec::new());
    }
    s.split(',')
        .map(|e| {
            let mut f = e.split(':').map(|x| x.parse::<u64>().ok());
            let (end, a, p) = (f.next()??, f.next()??, f.next()??);
            Some((usize::try_from(end).ok()?, (UserId(a), PostId(p))))
        })
        .collect()
}

/// A kept page's `Link` value (`None` when it was kept as a plain JSON
/// body) and its body without counts.
pub fn split_kept_page(kept: &Bytes) -> (Option<Bytes>, Bytes) {
    let k = KeptPage::split(kept);
    (k.link, k.body)
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

        // Proves a kept page with counts and flags put in at serve time is byte for byte what serde_json writes for the page carrying them, and splits back into its link and roots.
        #[test]
        fn kept_pages_with_counts_equal_serde_json(
            items in proptest::collection::vec(any::<(u64, u64, u64, Option<u64>)>(), 0..25),
            engaged in proptest::collection::vec(any::<(u64, u64, u64, bool, bool)>(), 25),
            viewer in any::<bool>(),
            next in proptest::option::of("[A-Za-z0-9_\\-]{0,40}"),
        ) {
            let mut page = Page { items: items.into_iter().map(item).collect(), next_cursor: next, prev_cursor: None };
            let kept = KeptPage::split(&kept_timeline_page(UserId(7), 20, &page).unwrap());
            let n = page.items.len();
            let counts: Vec<Counts> = engaged[..n].iter().map(|&(likes, replies, reposts, _, _)| Counts { likes, replies, reposts }).collect();
            let flags: Vec<Flags> = engaged[..n].iter().map(|&(_, _, _, liked, reposted)| Flags { liked, reposted }).collect();
            let roots: Vec<PostRef> = page.items.iter().map(PostItem::root).collect();
            prop_assert_eq!(kept.roots().unwrap(), roots);
            let ours = kept.with_counts(&counts, viewer.then_some(&flags[..])).unwrap();
            for (i, item) in page.items.iter_mut().enumerate() {
                item.counts = Some(counts[i]);
                item.viewer = viewer.then_some(flags[i]);
            }
            prop_assert_eq!(String::from_utf8(ours.to_vec()).unwrap(), serde_json::to_string(&page).unwrap());
            prop_assert!(kept.link.is_some());
        }
    }
}
