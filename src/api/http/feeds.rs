//! A user's feeds besides home: the read-marker and notifications routes, and the live notifications stream (server-sent events: the first page of groups again whenever it changes, and the unread count).

use super::errors::ApiError;
use super::handlers::read;
use super::pages::{json_page, link_keeping};
use super::params::{limit, params, user_id, Params};
use super::rewound::{link_as_of, read_at};
use super::stream::{data_json, respond, Feeder, Unread, Wake};
use super::Api;
use crate::api::query::{NotificationGroup, NotificationKind, Page};
use crate::api::reads;
use crate::core::event::{Feed, UserId};
use axum::extract::{Path, State};
use axum::response::sse::Event as SseEvent;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::collections::VecDeque;
use std::sync::Arc;

/// What one notifications stream holds between wakes.
struct Stream {
    api: Arc<Api>,
    user: UserId,
    /// The page as `GET …/notifications` asks it: `limit`, `grouped`,
    /// `types`.
    limit: usize,
    grouped: bool,
    types: Option<Vec<NotificationKind>>,
    /// The page sent last (items and `next_cursor`), as JSON.
    sent: Option<String>,
    queue: VecDeque<SseEvent>,
    wake: Wake,
    /// The notifications feed's unread count.
    unread: Unread,
}

impl Feeder for Stream {
    async fn open(&mut self) -> Result<(), ApiError> {
        self.read().await
    }

    /// Reads the first page and the unread count (one snapshot, one
    /// grouping of the acts for both where it can); queues the page when it
    /// is not the one sent last, then the count when it changed.
    async fn read(&mut self) -> Result<(), ApiError> {
        let (user, limit, grouped) = (self.user, self.limit, self.grouped);
        let (types, (_, max)) = (self.types.clone(), self.unread.asks());
        let (page, now) = read(&self.api, move |r| {
            r.notifications_and_unread(user, limit, (grouped, types.as_deref()), max)
        })
        .await?;
        let body = page_json(&page, self.api.cfg.string_ids);
        if self.sent.as_ref() != Some(&body) {
            self.queue
                .push_back(SseEvent::default().event("page").data(&body));
            self.sent = Some(body);
        }
        self.queue.extend(self.unread.event(now));
        Ok(())
    }

    fn queue(&mut self) -> &mut VecDeque<SseEvent> {
        &mut self.queue
    }

    fn wake(&mut self) -> &mut Wake {
        &mut self.wake
    }
}

/// A page as the stream's data: `{"items","next_cursor"}`.
fn page_json(page: &Page<NotificationGroup>, string_ids: bool) -> String {
    let body = serde_json::json!({ "items": page.items, "next_cursor": page.next_cursor });
    data_json(&body, string_ids)
}

/// Server-sent events that keep a client's copy of the notifications'
/// first page (`limit`, `grouped`, `types` as `GET …/notifications` takes
/// them) equal to it: `event: page` (data `{"items","next_cursor"}`) when
/// the stream opens and again after every read that finds the page
/// changed — a group changes in place as acts join it, so the page is
/// sent whole — and `event: unread` (data `{"feed":"notifications",
/// "unread","capped"}`, the groups of every kind above the user's marker,
/// at most `max`) when it opens and whenever it changes. Opens with a
/// `subscribed` comment; reads as the timeline stream does.
pub(super) async fn notifications_stream(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let user = user_id(&id)?;
    let p = params(q, &reads::NOTIFICATIONS_STREAM)?;
    let limit = limit(&api, &p, crate::api::query::DEFAULT_LIMIT)?;
    let max = p.stream_max_unread()?;
    let s = Stream {
        wake: Wake::new(&api),
        api,
        user,
        limit,
        grouped: p.grouped.unwrap_or(true),
        types: p.types.clone(),
        sent: None,
        queue: VecDeque::new(),
        unread: Unread::new(Feed::Notifications, max),
    };
    Ok(respond(s))
}

pub(super) async fn markers(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let user = user_id(&id)?;
    let p = params(q, &reads::MARKERS)?;
    let (modes, max) = (p.modes(), p.max_unread()?);
    let m = read(&api, move |r| r.markers(user, modes, max)).await?;
    Ok(Json(m).into_response())
}

pub(super) async fn notifications(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let user = user_id(&id)?;
    let p = params(q, &reads::NOTIFICATIONS)?;
    let l = limit(&api, &p, crate::api::query::DEFAULT_LIMIT)?;
    let (cursor, grouped, types) = (p.cursor.clone(), p.grouped.unwrap_or(true), p.types.clone());
    let (explain, asked) = (p.explain_now()?, p.notifications_asked());
    if let Some(after) = p.notifications_after()?.map(str::to_string) {
        let page = read_at(&api, p.as_of, move |r| {
            let kinds = (grouped, types.as_deref());
            r.notifications_catch_up(user, (l, &after), kinds, explain)
        })
        .await?;
        return Ok(json_page(&page));
    }
    let page = read_at(&api, p.as_of, move |r| {
        r.notifications_with(
            user,
            (l, cursor.as_deref()),
            (grouped, types.as_deref()),
            explain,
        )
    })
    .await?;
    let mut resp = Json(&page).into_response();
    let next = page.next_cursor.as_deref();
    link_keeping(
        &mut resp,
        (reads::NOTIFICATIONS.route, user, l),
        next,
        &asked,
    );
    link_as_of(&mut resp, p.as_of);
    Ok(resp)
}
