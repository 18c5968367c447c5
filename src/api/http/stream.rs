//! The live timeline stream (server-sent events).

use super::errors::ApiError;
use super::handlers::{params, read, user_id, Params};
use super::Api;
use crate::api::query::{PostItem, QueryError, Reader};
use crate::core::event::{PostId, Ts, UserId};
use crate::core::keys::TimelineKey;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The timeline entries newer than `after`, newest first, up to about
/// 10,000 ([`Reader::timeline_above`]); only the newest one when `after`
/// is `None`.
fn newer_entries(
    r: &Reader,
    user: UserId,
    after: Option<(u64, u64, u64)>,
) -> Result<Vec<PostItem>, QueryError> {
    const MOST: usize = 10_000;
    match after {
        None => Ok(r.timeline(user, 1, None)?.items),
        Some((ts, post_id, author)) => {
            let anchor = TimelineKey {
                ts: Ts(ts),
                post_id: PostId(post_id),
                author: UserId(author),
            };
            Ok(r.timeline_above(user, anchor, MOST)?.0)
        }
    }
}

/// An entry's event id: `ts:post_id:author`, its place in timeline order.
fn event_id(item: &PostItem) -> String {
    format!("{}:{}:{}", item.ts, item.post_id, item.author)
}

/// The timeline key a `Last-Event-ID` names.
fn parse_event_id(id: &str) -> Option<(u64, u64, u64)> {
    let mut parts = id.trim().split(':').map(|p| p.parse::<u64>().ok());
    let key = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(key)
}

/// Server-sent events: each timeline entry newer than every entry already
/// on the timeline when the stream opened, oldest first, as it becomes
/// visible (`event: entry`, `id: ts:post_id:author`, data
/// `{"post_id","author","ts"}`). A client that reconnects with
/// `Last-Event-ID` (browsers do it themselves) first gets every entry newer
/// than that one, up to the newest 10,000, then the live ones; an id it
/// cannot read is ignored. The stream
/// opens with a `subscribed` comment.
pub(super) async fn timeline_stream(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    q: Params,
) -> Result<Response, ApiError> {
    let user = user_id(&id)?;
    params(q, &[])?;
    // An id it cannot read starts the stream fresh: an error status would
    // make a browser's EventSource stop reconnecting for good.
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_event_id);
    let newest = match resume {
        Some(key) => Some(key),
        None => {
            let top = read(&api, move |r| newer_entries(r, user, None)).await?;
            top.first().map(|i| (i.ts, i.post_id, i.author))
        }
    };
    let poll = api.cfg.stream_poll;
    struct S {
        api: Arc<Api>,
        newest: Option<(u64, u64, u64)>,
        queue: std::collections::VecDeque<PostItem>,
        opened: bool,
        polled: bool,
    }
    let state = S {
        api,
        newest,
        queue: Default::default(),
        opened: false,
        polled: resume.is_none(),
    };
    let stream = futures_util::stream::unfold(state, move |mut s| async move {
        if !s.opened {
            s.opened = true;
            let ev = SseEvent::default().comment("subscribed");
            return Some((Ok::<_, std::convert::Infallible>(ev), s));
        }
        loop {
            if let Some(item) = s.queue.pop_front() {
                let id = event_id(&item);
                let PostItem {
                    post_id,
                    author,
                    ts,
                } = item;
                let json = if s.api.cfg.string_ids {
                    format!(r#"{{"post_id":"{post_id}","author":"{author}","ts":{ts}}}"#)
                } else {
                    format!(r#"{{"post_id":{post_id},"author":{author},"ts":{ts}}}"#)
                };
                let ev = SseEvent::default().event("entry").id(id).data(json);
                return Some((Ok(ev), s));
            }
            // A resumed stream catches up at once; then it polls.
            if s.polled {
                tokio::time::sleep(poll).await;
            }
            s.polled = true;
            let after = s.newest.unwrap_or((0, 0, 0));
            match read(&s.api, move |r| newer_entries(r, user, Some(after))).await {
                Ok(mut items) => {
                    if let Some(first) = items.first() {
                        s.newest = Some((first.ts, first.post_id, first.author));
                    }
                    items.reverse();
                    s.queue.extend(items);
                }
                Err(e) => {
                    let ev = SseEvent::default().event("error").data(e.message);
                    return Some((Ok(ev), s));
                }
            }
        }
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}
