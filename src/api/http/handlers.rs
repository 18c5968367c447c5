//! The route handlers: parse strictly (`params.rs`), read (inline when
//! the read is short, else on the blocking pool), answer JSON pages
//! (`pages.rs`).

use super::errors::ApiError;
use super::pages::{json_page, json_response, kept_timeline_page, link, links, Cursors, KeptPage};
use super::params::{limit, page_request, params, user_id, Params};
use super::rewound::{link_as_of, read_at};
use super::{Api, MAX_COUNTER_IDS};
use crate::api::query::{
    Counts, Flags, Modes, Page, PostItem, QueryError, Reader, Replies, RepostMode,
};
use crate::api::reads::{self, Read};
use crate::core::event::UserId;
use crate::core::keys::PostRef;
use crate::core::Partition;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::sync::Arc;

/// Runs a read on the blocking pool: for reads whose cost is not bounded
/// by the page size (the pull path, large pages, secondaries). Timeline
/// pages the inbox holds are read inline instead (see [`timeline`]).
pub(super) async fn read<T: Send + 'static>(
    api: &Arc<Api>,
    f: impl FnOnce(&Reader) -> Result<T, QueryError> + Send + 'static,
) -> Result<T, ApiError> {
    let api = api.clone();
    tokio::task::spawn_blocking(move || f(&api.reader.current()))
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::from)
}

/// A paged view read through `view`, one of [`Reader`]'s page methods.
type PageFn<T> = fn(&Reader, UserId, usize, Option<&str>) -> Result<Page<T>, QueryError>;

async fn paged<T: Serialize + Send + 'static>(
    api: Arc<Api>,
    id: &str,
    q: Params,
    view: PageFn<T>,
    read: &Read,
) -> Result<Response, ApiError> {
    let (user, l, cursor, as_of) = page_request(&api, id, q, read)?;
    let route = read.route;
    let page = read_at(&api, as_of, move |r| view(r, user, l, cursor.as_deref())).await?;
    let mut resp = Json(&page).into_response();
    let next = page.next_cursor.as_deref();
    link(&mut resp, route, user, RepostMode::Newest, l, (next, None));
    link_as_of(&mut resp, as_of);
    Ok(resp)
}

/// The largest page read inline on the async worker (see [`timeline`]).
const INLINE_LIMIT: usize = 100;

/// A timeline page. When the materialized inbox holds the whole page (the
/// common case) it is read inline: one seek, and a point read when the
/// inbox is short of the page, cheaper than the hand-off to the blocking
/// pool and back. A first page is answered from the page cache kept beside
/// the store when no commit has changed it since it was last read. A page
/// that needs the pull path is read inline too when the reader follows
/// few users ([`Reader::timeline_if_short`]); with more (its cost grows
/// with the followee count), a large page, and every read of RocksDB
/// secondaries (which wait while `serve` catches up), it goes to the
/// blocking pool.
// Long: the ways to a page in order — newer or catch-up reads, the page cache, the inline reads, the blocking pool — each a short arm.
pub(super) async fn timeline(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let (user, p) = (user_id(&id)?, params(q, &reads::TIMELINE)?);
    let as_of = p.as_of;
    let from = p.timeline_from()?;
    let l = limit(&api, &p, crate::api::query::DEFAULT_LIMIT)?;
    let route = super::route::TIMELINE;
    let modes = p.modes();
    let mode = modes.reposts;
    let (explain, counts) = (p.explain, p.counts());
    let finished = move |r: &Reader, mut page: Page<PostItem>| {
        if explain {
            r.explain_page(user, modes, &mut page)?;
        }
        if counts {
            r.decorate(&mut page.items, Some(user))?;
        }
        Ok::<_, QueryError>(page)
    };
    let linked = |mut resp: Response, next: Option<&str>, prev: Option<&str>| {
        link(&mut resp, route, user, mode, l, (next, prev));
        carry_asked(&mut resp, modes.replies, explain, counts);
        link_as_of(&mut resp, as_of);
        resp
    };
    let cursor = match from {
        reads::PageStart::Newer(newer) => {
            let page = read_at(&api, as_of, move |r| {
                finished(r, r.timeline_newer(user, modes, l, &newer)?)
            })
            .await?;
            let (next, prev) = (page.next_cursor.as_deref(), page.prev_cursor.as_deref());
            return Ok(linked(json_page(&page), next, prev));
        }
        reads::PageStart::After(after) => {
            let page = read_at(&api, as_of, move |r| {
                finished(r, r.timeline_catch_up(user, modes, l, &after)?)
            })
            .await?;
            return Ok(json_page(&page));
        }
        reads::PageStart::Older(cursor) => Some(cursor),
        reads::PageStart::Top => None,
    };
    // The inline reads and the page cache serve the default placement.
    let plain = modes == Modes::default() && !explain && as_of.is_none();
    if l <= INLINE_LIMIT && !api.reader.is_following() && plain {
        let reader = api.reader.current();
        let encode = |page: &Page<PostItem>| kept_timeline_page(user, l, page);
        if let Some(kept) = reader.page_encoded(user, l, cursor.as_deref(), encode)? {
            let kept = KeptPage::split(&kept);
            let body = match (counts, kept.roots()) {
                (false, _) => Some(kept.body.clone()),
                (true, Some(roots)) => {
                    let (c, f) = engagement(&api, &reader, roots, Some(user)).await?;
                    kept.with_counts(&c, f.as_deref())
                }
                // Kept by another reader of the same stores in its own
                // encoding, without an index: read in full below.
                (true, None) => None,
            };
            if let Some(body) = body {
                let link = match kept.link {
                    Some(link) => HeaderValue::from_maybe_shared(link).ok(),
                    // A plain page kept by another reader: read its cursors.
                    None => serde_json::from_slice::<Cursors>(&body).ok().and_then(|c| {
                        let (next, prev) = (c.next_cursor.as_deref(), c.prev_cursor.as_deref());
                        HeaderValue::from_str(&links(route, user, mode, l, next, prev)).ok()
                    }),
                };
                let mut resp = json_response(body);
                if let Some(v) = link.filter(|v| !v.is_empty()) {
                    resp.headers_mut().insert(header::LINK, v);
                }
                if !counts {
                    carry(&mut resp, "&counts=0");
                }
                return Ok(resp);
            }
        }
        // The pull path of a reader who follows few users: a few seeks,
        // cheaper here than the hand-off to the blocking pool and back.
        if let Some(page) = reader.timeline_if_short(user, l, cursor.as_deref())? {
            let page = match counts {
                true => decorated(&api, &reader, page, Some(user)).await?,
                false => page,
            };
            let (next, prev) = (page.next_cursor.as_deref(), page.prev_cursor.as_deref());
            return Ok(linked(json_page(&page), next, prev));
        }
    }
    let page = read_at(&api, as_of, move |r| {
        finished(r, r.timeline_with(user, modes, l, cursor.as_deref())?)
    })
    .await?;
    let (next, prev) = (page.next_cursor.as_deref(), page.prev_cursor.as_deref());
    Ok(linked(json_page(&page), next, prev))
}

/// `GET /v1/users/{id}/timeline/why?author=A&post_id=P`: is the post in
/// the user's timeline, and why (not).
pub(super) async fn why(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let (user, p) = (user_id(&id)?, params(q, &reads::WHY)?);
    let post = p.post()?;
    let mut answer = read(&api, move |r| r.why(user, post)).await?;
    if answer.reason == Some("unknown_post") {
        // Not known here: perhaps not applied yet, if its partition lags.
        let p = api.reader.partition_of(post.0);
        let a = api.clone();
        let lag = tokio::task::spawn_blocking(move || a.lag_of(p))
            .await
            .map_err(ApiError::internal)??;
        if let Some(n) = lag.map(|l| l.at.events.records_to(l.end.events)) {
            answer.not_applied_yet(p, n);
        }
    }
    Ok(Json(answer).into_response())
}

/// `GET /v1/users/{id}/posts`: the user's posts, each with its
/// original's counts (and `viewer`'s flags) unless `counts=0`.
pub(super) async fn posts(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let (user, p) = (user_id(&id)?, params(q, &reads::POSTS)?);
    let l = limit(&api, &p, crate::api::query::DEFAULT_LIMIT)?;
    let (cursor, as_of, counts, viewer) = (p.cursor.clone(), p.as_of, p.counts(), p.viewer);
    let page = read_at(&api, as_of, move |r| {
        let mut page = r.posts(user, l, cursor.as_deref())?;
        if counts {
            r.decorate(&mut page.items, viewer)?;
        }
        Ok(page)
    })
    .await?;
    let mut resp = Json(&page).into_response();
    let next = page.next_cursor.as_deref();
    link(
        &mut resp,
        reads::POSTS.route,
        user,
        RepostMode::Newest,
        l,
        (next, None),
    );
    match (counts, viewer) {
        (false, _) => carry(&mut resp, "&counts=0"),
        (true, Some(v)) => carry(&mut resp, &format!("&viewer={v}")),
        (true, None) => {}
    }
    link_as_of(&mut resp, as_of);
    Ok(resp)
}

/// A timeline page's links read pages asked the same way: with its
/// replies rule, explained when it is, without counts when it is.
fn carry_asked(resp: &mut Response, replies: Replies, explain: bool, counts: bool) {
    if replies != Replies::Followed {
        carry(resp, &format!("&replies={}", replies.as_str()));
    }
    if explain {
        carry(resp, "&explain=1");
    }
    if !counts {
        carry(resp, "&counts=0");
    }
}

/// Puts `param` (`&k=v`) in the `Link` header's pages, before their
/// cursor, so that the next and previous pages are read as this one was.
fn carry(resp: &mut Response, param: &str) {
    let header = resp
        .headers()
        .get(header::LINK)
        .and_then(|v| v.to_str().ok());
    if let Some(v) = header {
        let v = v
            .replace("&cursor=", &format!("{param}&cursor="))
            .replace("&newer_than=", &format!("{param}&newer_than="));
        if let Ok(v) = HeaderValue::from_str(&v) {
            resp.headers_mut().insert(header::LINK, v);
        }
    }
}

/// `page` with each item's counts and `viewer`'s flags: read inline when
/// every partition is served here (point reads), else on the blocking
/// pool (other processors are asked, Kafka mode).
async fn decorated(
    api: &Arc<Api>,
    reader: &Reader,
    mut page: Page<PostItem>,
    viewer: Option<UserId>,
) -> Result<Page<PostItem>, ApiError> {
    if reader.has_remote() {
        return read(api, move |r| {
            r.decorate(&mut page.items, viewer)?;
            Ok(page)
        })
        .await;
    }
    reader.decorate(&mut page.items, viewer)?;
    Ok(page)
}

/// The counts of `roots` and `viewer`'s flags on them, read as
/// [`decorated`] reads them.
async fn engagement(
    api: &Arc<Api>,
    reader: &Reader,
    roots: Vec<PostRef>,
    viewer: Option<UserId>,
) -> Result<(Vec<Counts>, Option<Vec<Flags>>), ApiError> {
    if reader.has_remote() {
        return read(api, move |r| r.engagement_of(&roots, viewer)).await;
    }
    Ok(reader.engagement_of(&roots, viewer)?)
}

/// The author and parameters of a read of one post (`read`), the post's
/// id taken from the path (refused in the query).
fn post_params(
    id: &str,
    post_id: String,
    q: Params,
    read: &Read,
) -> Result<(UserId, reads::Params), ApiError> {
    let author = user_id(id)?;
    let Query(mut pairs) = q?;
    if pairs.iter().any(|(k, _)| k == "post_id") {
        let path = read
            .route
            .replace("{id}", "AUTHOR")
            .replace("{post_id}", "POST_ID");
        let message = format!("the post's id is in the path: {path}");
        return Err(ApiError::bad("bad_query", message));
    }
    pairs.push(("post_id".to_string(), post_id));
    Ok((author, crate::api::reads::parse(read, pairs)?))
}

/// `GET /v1/posts/{author}/{post_id}?viewer=U`: one post with its
/// original's counts, and the viewer's flags; 404 with the reason when it
/// is not there.
pub(super) async fn post(
    State(api): State<Arc<Api>>,
    Path((id, post_id)): Path<(String, String)>,
    q: Params,
) -> Result<Response, ApiError> {
    let (author, p) = post_params(&id, post_id, q, &reads::POST)?;
    let (post, viewer) = ((author, p.post_id()?), p.viewer);
    let answer = read(&api, move |r| r.post(post, viewer)).await?;
    Ok(Json(answer).into_response())
}

/// `GET /v1/posts/{author}/{post_id}/likes`: who likes the post (a
/// repost's id: its original), newest first, paged; 404 with the reason
/// when it is not there.
pub(super) async fn likes(
    State(api): State<Arc<Api>>,
    Path((id, post_id)): Path<(String, String)>,
    q: Params,
) -> Result<Response, ApiError> {
    let (author, p) = post_params(&id, post_id, q, &reads::LIKES)?;
    let post = (author, p.post_id()?);
    let l = limit(&api, &p, crate::api::query::DEFAULT_LIMIT)?;
    let cursor = p.cursor.clone();
    let page = read(&api, move |r| r.likers(post, l, cursor.as_deref())).await?;
    Ok(post_page(&page, post, "likes", &format!("limit={l}")))
}

/// `GET /v1/posts/{author}/{post_id}/replies?viewer=U`: the post's direct
/// replies (a repost's id: its original's), oldest first, paged, each
/// with its counts and the viewer's flags; 404 as for `likes`.
pub(super) async fn replies(
    State(api): State<Arc<Api>>,
    Path((id, post_id)): Path<(String, String)>,
    q: Params,
) -> Result<Response, ApiError> {
    let (author, p) = post_params(&id, post_id, q, &reads::REPLIES)?;
    let (post, viewer) = ((author, p.post_id()?), p.viewer);
    let l = limit(&api, &p, crate::api::query::DEFAULT_LIMIT)?;
    let cursor = p.cursor.clone();
    let page = read(&api, move |r| r.replies(post, l, cursor.as_deref(), viewer)).await?;
    let mut query = format!("limit={l}");
    if let Some(v) = viewer {
        query += &format!("&viewer={v}");
    }
    Ok(post_page(&page, post, "replies", &query))
}

/// A page of a post's `list` (`likes`, `replies`), with a `Link` header
/// to the next page (`query` its parameters but the cursor).
fn post_page<T: serde::Serialize>(
    page: &crate::api::query::Page<T>,
    post: crate::core::keys::PostRef,
    list: &str,
    query: &str,
) -> Response {
    let mut resp = Json(page).into_response();
    if let Some(c) = page.next_cursor.as_deref() {
        let next = format!(
            r#"</v1/posts/{}/{}/{list}?{query}&cursor={c}>; rel="next""#,
            post.0, post.1
        );
        if let Ok(v) = HeaderValue::from_str(&next) {
            resp.headers_mut().insert(header::LINK, v);
        }
    }
    resp
}

pub(super) async fn followers(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    paged(api, &id, q, Reader::followers, &reads::FOLLOWERS).await
}

pub(super) async fn followees(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    paged(api, &id, q, Reader::followees, &reads::FOLLOWEES).await
}

pub(super) async fn mutes(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    paged(api, &id, q, Reader::mutes, &reads::MUTES).await
}

pub(super) async fn blocks(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    paged(api, &id, q, Reader::blocks, &reads::BLOCKS).await
}

pub(super) async fn recent_followers(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let (user, p) = (user_id(&id)?, params(q, &reads::RECENT_FOLLOWERS)?);
    let l = limit(&api, &p, crate::api::query::DEFAULT_RECENT)?;
    let list = read_at(&api, p.as_of, move |r| r.recent_followers(user, l)).await?;
    Ok(Json(list).into_response())
}

pub(super) async fn counters(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let user = user_id(&id)?;
    let p = params(q, &reads::COUNTERS)?;
    let c = read_at(&api, p.as_of, move |r| r.counters(user)).await?;
    Ok(Json(c).into_response())
}

pub(super) async fn counters_many(
    State(api): State<Arc<Api>>,
    q: Params,
) -> Result<Response, ApiError> {
    let p = params(q, &reads::COUNTERS_MANY)?;
    let ids = p
        .ids
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::bad("bad_query", "ids is required: ?ids=1,2,3"))?;
    let users = ids
        .split(',')
        .map(|s| user_id(s.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    if users.len() > MAX_COUNTER_IDS {
        return Err(ApiError::bad(
            "bad_query",
            format!(
                "at most {MAX_COUNTER_IDS} ids per request, got {}",
                users.len()
            ),
        ));
    }
    let Some(routing) = api.routing.clone() else {
        let counters = read(&api, move |r| r.counters_many(&users)).await?;
        return Ok(Json(crate::api::query::CountersList { counters }).into_response());
    };
    // Kafka mode: the users of this processor's partitions here, the others
    // from their owners, one request each, answers in the order asked.
    let a = api.clone();
    let counters = tokio::task::spawn_blocking(move || {
        let mut out: Vec<Option<serde_json::Value>> = vec![None; users.len()];
        let mut elsewhere: std::collections::BTreeMap<Partition, Vec<usize>> = Default::default();
        for (i, &u) in users.iter().enumerate() {
            match a.reader.counters(u) {
                Ok(c) => out[i] = Some(serde_json::to_value(c).map_err(ApiError::internal)?),
                Err(QueryError::Elsewhere { partition }) => {
                    elsewhere.entry(partition).or_default().push(i)
                }
                Err(e) => return Err(ApiError::from(e)),
            }
        }
        for (p, idx) in elsewhere {
            let ids: Vec<String> = idx.iter().map(|&i| users[i].0.to_string()).collect();
            let r = routing
                .get(p, &format!("/v1/counters?ids={}", ids.join(",")))
                .map_err(ApiError::from)?;
            let body: serde_json::Value = serde_json::from_slice(&r.body)
                .map_err(|e| ApiError::unavailable(format!("partition {p}'s owner: {e}")))?;
            match (r.status, body["counters"].as_array()) {
                (200, Some(list)) if list.len() == idx.len() => {
                    for (&i, c) in idx.iter().zip(list) {
                        out[i] = Some(c.clone());
                    }
                }
                (status, _) => {
                    return Err(ApiError::unavailable(format!(
                        "partition {p}'s owner answered {status}: {body}"
                    )))
                }
            }
        }
        out.into_iter()
            .map(|c| c.ok_or_else(|| ApiError::internal("a user id went unanswered")))
            .collect::<Result<Vec<_>, ApiError>>()
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(Json(serde_json::json!({ "counters": counters })).into_response())
}

pub(super) async fn openapi(State(api): State<Arc<Api>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        api.openapi.clone(),
    )
        .into_response()
}

pub(super) use super::health::{healthz, metrics_route, readyz, Health, Ready};

pub(super) async fn not_found() -> ApiError {
    no_such_route()
}

/// The answer for a path the API does not serve.
pub(super) fn no_such_route() -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        message: "no such route (see /openapi.json)".into(),
    }
}

pub(super) async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        code: "method_not_allowed",
        message: "this API is read-only: GET only".into(),
    }
}
