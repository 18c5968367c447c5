//! What runs around every route, as one middleware ([`around`]): request
//! metrics, CORS, time and path bounds, authentication, forwarding between
//! processors (Kafka mode), outermost first. One middleware, not one per
//! concern: each layer costs a clone of the route and a boxed future per
//! request, which measured at about 40 % of an unloaded `/healthz`.

use super::errors::ApiError;
use super::{ids, routing, Answers, Api, PUBLIC_ROUTES, ROUTES};
use crate::api::query::QueryError;
use crate::core::event::UserId;
use crate::core::Partition;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Kafka mode: a request for a user whose partition this processor does not
/// serve is forwarded to the processor that does (a stream is redirected);
/// 503 while the partition is moving.
async fn forward(api: &Arc<Api>, req: Request, next: Next) -> Response {
    let Some(routing) = api.routing.clone() else {
        return next.run(req).await;
    };
    let path = req.uri().path().to_string();
    // A user's views, or a post at its author's partition.
    let Some(user) = path
        .strip_prefix("/v1/users/")
        .or_else(|| path.strip_prefix("/v1/posts/"))
        .and_then(|rest| rest.split('/').next())
        .and_then(|id| id.parse::<u64>().ok())
        .filter(|id| *id > 0)
    else {
        return next.run(req).await;
    };
    let p = routing.partition(UserId(user));
    let forwarded = req.headers().contains_key(routing::FORWARDED);
    // Another generation answers readers: to its owner of `p`.
    let live = match (&api.front, forwarded) {
        (Some(front), false) => front.answers(p),
        _ => Answers::ThisGeneration,
    };
    let this_generation = live == Answers::ThisGeneration;
    let here = match this_generation {
        false => Err(QueryError::Elsewhere { partition: p }),
        true => api.reader.partition_state(p),
    };
    let stream = path.ends_with("/stream");
    match here {
        Ok(()) => {
            // A page may pull from the partitions of an owner that does not
            // answer: their standbys here, if any, answer for them.
            for q in routing.unreachable_partitions() {
                api.reader.read_standby(q, routing::UNREACHABLE_FOR);
            }
            match api.reader.standby_reading(p) {
                // A stream would stay on a copy that no longer moves.
                Some(_) if stream => {
                    ApiError::from(QueryError::Moving { partition: p }).into_response()
                }
                Some(at) => standby_marked(next.run(req).await, at),
                None => next.run(req).await,
            }
        }
        Err(QueryError::Elsewhere { .. }) if !forwarded => {
            let owner = match live {
                Answers::Live(api) => Ok(api),
                Answers::LiveMoving => Err(QueryError::Moving { partition: p }),
                Answers::ThisGeneration => routing.owner(p),
            };
            let owner = match owner {
                Ok(o) => o,
                // Nobody serves it, or its owner does not answer: a standby
                // here may (this generation's readers only; never a stream,
                // which would stay on a copy that no longer moves).
                Err(e) if this_generation && !stream => {
                    return from_standby(api, &routing, p, req, next, e).await
                }
                Err(e) => return ApiError::from(e).into_response(),
            };
            let pq = req
                .uri()
                .path_and_query()
                .map_or(path.clone(), |x| x.as_str().to_string());
            if stream {
                return (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(header::LOCATION, format!("{owner}{pq}"))],
                )
                    .into_response();
            }
            let r = routing.clone();
            let answer = tokio::task::spawn_blocking(move || r.get_at(&owner, p, &pq)).await;
            match answer {
                Ok(Ok(r)) => {
                    let mut resp = (
                        StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_GATEWAY),
                        r.body,
                    )
                        .into_response();
                    if let Some(ct) = r.content_type.and_then(|c| HeaderValue::from_str(&c).ok()) {
                        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
                    }
                    if let Some(l) = r.link.and_then(|l| HeaderValue::from_str(&l).ok()) {
                        resp.headers_mut().insert(header::LINK, l);
                    }
                    if r.status == 503 {
                        resp.headers_mut()
                            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                    }
                    resp
                }
                Ok(Err(e)) if this_generation => from_standby(api, &routing, p, req, next, e).await,
                Ok(Err(e)) => ApiError::from(e).into_response(),
                Err(e) => ApiError::internal(e).into_response(),
            }
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Answers a request for partition `p`, whose owner cannot be reached (or
/// which nobody serves), from this processor's warm standby of it, when it
/// keeps one caught up with the group's committed positions; the answer
/// says so in [`routing::STANDBY`], with those positions. The standbys of
/// the other partitions of unreachable owners are read too, for a page's
/// pull path. Without such a standby: `err`.
async fn from_standby(
    api: &Arc<Api>,
    routing: &routing::Routing,
    p: Partition,
    req: Request,
    next: Next,
    err: QueryError,
) -> Response {
    for q in routing.unreachable_partitions() {
        if q != p {
            api.reader.read_standby(q, routing::UNREACHABLE_FOR);
        }
    }
    let Some(at) = api.reader.read_standby(p, routing::UNREACHABLE_FOR) else {
        return ApiError::from(err).into_response();
    };
    standby_marked(next.run(req).await, at)
}

/// `resp`, read from a warm standby at positions `at`, saying so.
fn standby_marked(mut resp: Response, at: crate::core::position::Positions) -> Response {
    let value = format!("events={},effects={}", at.events.0, at.effects.0);
    if let Ok(v) = HeaderValue::from_str(&value) {
        resp.headers_mut().insert(routing::STANDBY, v);
    }
    resp
}

/// The one middleware: [`ROUTES`]' latency histograms and status counts
/// around CORS, around the path and time bounds, around authentication,
/// around forwarding, around the route.
pub(super) async fn around(State(api): State<Arc<Api>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .and_then(|m| ROUTES.iter().position(|r| *r == m.as_str()))
        .unwrap_or(ROUTES.len());
    let start = Instant::now();
    let mut resp = cors(&api, req, next).await;
    if api.cfg.string_ids && ROUTES.get(route).is_some_and(|r| ids::applies_to(r)) {
        resp = string_ids(resp).await;
    }
    api.requests[route].observe(start.elapsed().as_secs_f64());
    let code = usize::from(resp.status().as_u16()).clamp(100, 599) - 100;
    api.statuses[code].fetch_add(1, Ordering::Relaxed);
    resp
}

/// `resp` with its JSON body's ids as strings (see [`ids`]).
async fn string_ids(resp: Response) -> Response {
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::internal("reading an answer to rewrite its ids").into_response();
    };
    let bytes = ids::stringify(&bytes).map_or(bytes, Into::into);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// Authentication, then forwarding and the route.
async fn guarded(api: &Arc<Api>, req: Request, next: Next) -> Response {
    match refusal(api, &req) {
        Some(r) => r,
        None => forward(api, req, next).await,
    }
}

/// Whether `given` equals `want`, in time that does not depend on where they
/// differ (both are hashed first, so neither their contents nor the
/// token's length leak through timing).
fn same_secret(given: &[u8], want: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    let (a, b) = (Sha256::digest(given), Sha256::digest(want));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// Bearer-token authentication (when a token is configured), and
/// `/v1/internal/*` only where it is served (Kafka mode): the answer when
/// `req` may not go on.
fn refusal(api: &Api, req: &Request) -> Option<Response> {
    let path = req.uri().path();
    if path.starts_with("/v1/internal/") && api.routing.is_none() {
        return Some(super::handlers::no_such_route().into_response());
    }
    let token = api.cfg.token.as_ref()?;
    if PUBLIC_ROUTES.contains(&path) || req.method() == axum::http::Method::OPTIONS {
        return None;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(g) if same_secret(g.trim().as_bytes(), token.as_bytes()) => None,
        _ => {
            let mut r = ApiError {
                status: StatusCode::UNAUTHORIZED,
                code: "unauthorized",
                message:
                    "this API needs `Authorization: Bearer <token>` (the --api-token of the server)"
                        .into(),
            }
            .into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"feedlog\""),
            );
            Some(r)
        }
    }
}

/// CORS for the configured origins: answers preflights, and marks answers
/// readable by an allowed `Origin`. Nothing at all when none is configured.
async fn cors(api: &Arc<Api>, req: Request, next: Next) -> Response {
    let origins = &api.cfg.cors_origins;
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .map(str::to_string);
    let allowed = match &origin {
        Some(o) if !origins.is_empty() => {
            if origins.iter().any(|a| a == "*") {
                Some("*".to_string())
            } else {
                origins.iter().find(|a| *a == o).cloned()
            }
        }
        _ => None,
    };
    let Some(allowed) = allowed else {
        return bound(api, req, next).await;
    };
    let preflight = req.method() == axum::http::Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut r = if preflight {
        let mut r = StatusCode::NO_CONTENT.into_response();
        let h = r.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, last-event-id"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        r
    } else {
        bound(api, req, next).await
    };
    if let Ok(v) = HeaderValue::from_str(&allowed) {
        r.headers_mut()
            .insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        r.headers_mut()
            .insert(header::VARY, HeaderValue::from_static("origin"));
    }
    r
}

/// Every request's answer within `request_timeout` (503 past it), and a
/// JSON 400 for a path that is not UTF-8 once percent-decoded (the path
/// extractor would answer in plain text).
async fn bound(api: &Arc<Api>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path.contains('%') && percent_decoded_utf8(path).is_none() {
        return ApiError::bad(
            "bad_path",
            "the path is not valid UTF-8 once percent-decoded",
        )
        .into_response();
    }
    let limit = api.cfg.limits.request_timeout;
    match tokio::time::timeout(limit, guarded(api, req, next)).await {
        Ok(r) => r,
        Err(_) => ApiError::unavailable(format!(
            "the request took longer than {} s; retry",
            limit.as_secs_f64()
        ))
        .into_response(),
    }
}

/// `path` with `%XX` escapes decoded, if that is UTF-8.
fn percent_decoded_utf8(path: &str) -> Option<String> {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}
