//! Processor-to-processor reads (Kafka mode): outboxes for another
//! processor's timeline pull path, post records for its `explain`
//! answers, and posts' counts and viewers' flags for its post answers. Served only where there are other processors to ask.

use super::errors::ApiError;
use super::handlers::read;
use super::params::{user_id, Params};
use super::{routing, Api, MAX_COUNTER_IDS};
use crate::api::query::Engagement;
use crate::core::event::{PostId, Ts, UserId};
use crate::core::keys::PostRef;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;

/// Internal (Kafka mode): outboxes of authors in partitions this processor
/// serves, for another processor's timeline pull path.
pub(super) async fn internal_outboxes(
    State(api): State<Arc<Api>>,
    q: Params,
) -> Result<Response, ApiError> {
    let Query(pairs) = q?;
    let mut authors = Vec::new();
    let (mut from_ts, mut from_post, mut limit) = (None, None, None);
    for (k, v) in pairs {
        let num = |v: &str| {
            v.parse::<u64>().map_err(|_| {
                ApiError::bad(
                    "bad_query",
                    format!("{k} must be a whole number, got {v:?}"),
                )
            })
        };
        match k.as_str() {
            "authors" => {
                for a in v.split(',').filter(|a| !a.is_empty()) {
                    authors.push(user_id(a)?);
                }
            }
            "from_ts" => from_ts = Some(Ts(num(&v)?)),
            "from_post" => from_post = Some(PostId(num(&v)?)),
            "limit" => limit = Some(num(&v)? as usize),
            _ => {
                return Err(ApiError::bad(
                    "bad_query",
                    format!("unknown parameter {k:?}"),
                ))
            }
        }
    }
    let (Some(from_ts), Some(from_post), Some(limit)) = (from_ts, from_post, limit) else {
        return Err(ApiError::bad(
            "bad_query",
            "authors, from_ts, from_post and limit are required",
        ));
    };
    let outboxes = read(&api, move |r| {
        authors
            .iter()
            .map(|&a| {
                r.outbox_from(a, (from_ts, from_post), limit)
                    .map(|posts| (a.0, posts.into_iter().map(|(t, p)| (t.0, p.0)).collect()))
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await?;
    Ok(Json(routing::OutboxesAnswer { outboxes }).into_response())
}

/// Internal (Kafka mode): the records of post ids (`ids=author:post_id,...`)
/// in partitions this processor serves, for another processor's `explain`
/// and `timeline/why` answers.
pub(super) async fn internal_posts(
    State(api): State<Arc<Api>>,
    q: Params,
) -> Result<Response, ApiError> {
    let Query(pairs) = q?;
    let (ids, _) = post_ids(pairs, false)?;
    let posts = read(&api, move |r| {
        ids.iter()
            .map(|&id| {
                r.post_here(id)
                    .map(|v| v.map(|v| routing::to_hex(&v.encode())))
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await?;
    Ok(Json(routing::PostsAnswer { posts }).into_response())
}

/// The `ids=author:post_id,...` of an internal read (at most
/// [`MAX_COUNTER_IDS`]), and its `viewer` when `viewer` is taken.
fn post_ids(
    pairs: Vec<(String, String)>,
    viewer: bool,
) -> Result<(Vec<PostRef>, Option<UserId>), ApiError> {
    let bad = |m: String| ApiError::bad("bad_query", m);
    let takes = if viewer { "ids, viewer" } else { "ids" };
    let (mut ids, mut who) = (Vec::new(), None);
    for (k, v) in pairs {
        match k.as_str() {
            "ids" => {}
            "viewer" if viewer => {
                who = Some(user_id(&v)?);
                continue;
            }
            _ => {
                return Err(bad(format!(
                    "unknown parameter {k:?} (this route takes: {takes})"
                )))
            }
        }
        for x in v.split(',').filter(|x| !x.is_empty()) {
            let parsed = x
                .split_once(':')
                .and_then(|(a, p)| Some((a, p.parse().ok()?)));
            let Some((a, p)) = parsed else {
                return Err(bad(format!("ids are author:post_id, got {x:?}")));
            };
            ids.push((user_id(a)?, PostId(p)));
        }
    }
    if ids.len() > MAX_COUNTER_IDS {
        let n = ids.len();
        return Err(bad(format!(
            "at most {MAX_COUNTER_IDS} ids per request, got {n}"
        )));
    }
    Ok((ids, who))
}

/// Internal (Kafka mode): originals' counts (`ids=author:post_id,...`,
/// whose authors' partitions this processor serves), or with `viewer` (a
/// user of a partition served here) the viewer's flags on them, for
/// another processor's post answers.
pub(super) async fn internal_engagement(
    State(api): State<Arc<Api>>,
    q: Params,
) -> Result<Response, ApiError> {
    let Query(pairs) = q?;
    let (ids, viewer) = post_ids(pairs, true)?;
    let engaged = read(&api, move |r| {
        let asked = match viewer {
            Some(v) => Engagement::Flags(v, &ids),
            None => Engagement::Counts(&ids),
        };
        r.engagement_here(asked)
    })
    .await?;
    Ok(Json(routing::EngagementAnswer { engaged }).into_response())
}
