//! The HTTP read API (axum, JSON): every view, a live timeline stream,
//! health, readiness and Prometheus metrics. Paths and shapes are a public
//! interface, described in `openapi.json` (served at `/openapi.json`).
//!
//! Every page is read from one RocksDB snapshot through [`Reader`], so the
//! answers are exactly those of `feedlog query`. RocksDB calls run on the
//! blocking pool, never on the async workers.

pub mod client;
pub mod routing;

use crate::event::{PostId, Ts, UserId};
use crate::log::{Log, Topic};
use crate::metrics::{self, Histogram};
use crate::processor::{lag, PartitionLag, Progress};
use crate::query::{Page, PostItem, QueryError, Reader};
use axum::extract::rejection::QueryRejection;
use axum::extract::{MatchedPath, Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The API description served at `/openapi.json`.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Every route, as matched (also the `route` label of the request metrics).
pub const ROUTES: &[&str] = &[
    "/v1/users/{id}/timeline",
    "/v1/users/{id}/timeline/stream",
    "/v1/users/{id}/posts",
    "/v1/users/{id}/counters",
    "/v1/counters",
    "/v1/users/{id}/followers/recent",
    "/v1/users/{id}/followers",
    "/v1/users/{id}/followees",
    "/openapi.json",
    "/healthz",
    "/readyz",
    "/metrics",
    "/v1/internal/outboxes",
];

/// Most ids one `/v1/counters` request may name.
pub const MAX_COUNTER_IDS: usize = 1000;

/// Settings of the API.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Largest `limit` a request may ask for.
    pub max_limit: usize,
    /// `/readyz` answers 200 while the unapplied records of all partitions
    /// are at most this many.
    pub ready_lag: u64,
    /// How often a timeline stream looks for new entries.
    pub stream_poll: Duration,
    /// How often a reader beside a processor moves to its latest state.
    pub refresh: Duration,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            max_limit: 200,
            ready_lag: 1000,
            stream_poll: Duration::from_millis(100),
            refresh: Duration::from_millis(100),
        }
    }
}

/// What the API serves from.
pub struct Api {
    reader: Reader,
    logs: Arc<dyn Log>,
    progress: Option<Arc<Progress>>,
    cfg: ApiConfig,
    /// Kafka mode: where the partitions this processor does not serve are.
    routing: Option<Arc<routing::Routing>>,
    requests: Vec<Histogram>,
    statuses: [AtomicU64; 5],
    started: Instant,
}

impl Api {
    /// An API over `reader`; `progress` is the in-process processor's, when
    /// there is one (`run --listen`), for the processing metrics.
    pub fn new(
        reader: Reader,
        logs: Arc<dyn Log>,
        progress: Option<Arc<Progress>>,
        cfg: ApiConfig,
    ) -> Arc<Api> {
        Api::clustered(reader, logs, progress, cfg, None)
    }

    /// An API of one Kafka-mode processor: users of partitions it does not
    /// serve are answered through `routing`.
    pub fn clustered(
        reader: Reader,
        logs: Arc<dyn Log>,
        progress: Option<Arc<Progress>>,
        cfg: ApiConfig,
        routing: Option<Arc<routing::Routing>>,
    ) -> Arc<Api> {
        Arc::new(Api {
            reader,
            logs,
            progress,
            cfg,
            routing,
            requests: (0..=ROUTES.len())
                .map(|_| Histogram::new(metrics::LATENCY_BUCKETS))
                .collect(),
            statuses: Default::default(),
            started: Instant::now(),
        })
    }

    /// The reader behind the API.
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The lag of every partition.
    pub fn lag(&self) -> Result<Vec<PartitionLag>, ApiError> {
        lag(&*self.logs, &self.reader.stores()).map_err(ApiError::internal)
    }
}

/// An error answer: `{"error":{"code","message"}}` with its status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn bad(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code,
            message: message.into(),
        }
    }

    fn internal(e: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %e, "request failed");
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "internal",
            message: e.to_string(),
        }
    }

    /// 503 with `Retry-After: 1`: a partition is moving between processors.
    fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "unavailable",
            message: message.into(),
        }
    }
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> ApiError {
        match e {
            QueryError::Store(_) => ApiError::internal(e),
            QueryError::Moving { .. }
            | QueryError::Elsewhere { .. }
            | QueryError::Remote { .. } => ApiError::unavailable(e.to_string()),
            _ => ApiError::bad(e.code(), e.to_string()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> ApiError {
        ApiError::bad("bad_query", format!("invalid query string: {e}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        let mut r = (self.status, Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}

type Params = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// The query parameters a route accepts, parsed strictly.
#[derive(Default)]
struct PageParams {
    limit: Option<usize>,
    cursor: Option<String>,
    ids: Option<String>,
}

fn params(p: Params, allowed: &[&str]) -> Result<PageParams, ApiError> {
    let Query(pairs) = p?;
    let mut out = PageParams::default();
    for (k, v) in pairs {
        match k.as_str() {
            _ if !allowed.contains(&k.as_str()) => {
                return Err(ApiError::bad(
                    "bad_query",
                    format!(
                        "unknown parameter {k:?} (this route takes: {})",
                        allowed.join(", ")
                    ),
                ))
            }
            "limit" => {
                out.limit = Some(v.parse().map_err(|_| {
                    ApiError::bad(
                        "bad_limit",
                        format!("limit must be a whole number, got {v:?}"),
                    )
                })?)
            }
            "cursor" => out.cursor = Some(v),
            "ids" => out.ids = Some(v),
            _ => unreachable!("every allowed parameter is matched"),
        }
    }
    Ok(out)
}

fn limit(api: &Api, p: &PageParams, default: usize) -> Result<usize, ApiError> {
    let l = p.limit.unwrap_or(default.min(api.cfg.max_limit));
    if l == 0 || l > api.cfg.max_limit {
        return Err(ApiError::bad(
            "bad_limit",
            format!(
                "limit must be between 1 and {} (the maximum), got {l}",
                api.cfg.max_limit
            ),
        ));
    }
    Ok(l)
}

fn user_id(s: &str) -> Result<UserId, ApiError> {
    match s.parse::<u64>() {
        Ok(0) => Err(ApiError::bad("bad_user", "user ids start at 1, got 0")),
        Ok(id) => Ok(UserId(id)),
        Err(_) => Err(ApiError::bad(
            "bad_user",
            format!("a user id is a whole number from 1, got {s:?}"),
        )),
    }
}

/// Runs a read on the blocking pool. (Measured: reading inline on the
/// worker, or in `block_in_place`, saves ~40 µs unloaded but is no faster
/// under load and lets a long pull-merge page stall other requests.)
async fn read<T: Send + 'static>(
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
) -> Result<Response, ApiError> {
    let (user, p) = (user_id(id)?, params(q, &["limit", "cursor"])?);
    let l = limit(&api, &p, crate::query::DEFAULT_LIMIT)?;
    let page = read(&api, move |r| view(r, user, l, p.cursor.as_deref())).await?;
    Ok(Json(page).into_response())
}

async fn timeline(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    paged(api, &id, q, Reader::timeline).await
}

async fn posts(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    paged(api, &id, q, Reader::posts).await
}

async fn followers(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    paged(api, &id, q, Reader::followers).await
}

async fn followees(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    paged(api, &id, q, Reader::followees).await
}

async fn recent_followers(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let (user, p) = (user_id(&id)?, params(q, &["limit"])?);
    let l = limit(&api, &p, crate::query::DEFAULT_RECENT)?;
    let list = read(&api, move |r| r.recent_followers(user, l)).await?;
    Ok(Json(list).into_response())
}

async fn counters(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let user = user_id(&id)?;
    params(q, &[])?;
    let c = read(&api, move |r| r.counters(user)).await?;
    Ok(Json(c).into_response())
}

async fn counters_many(State(api): State<Arc<Api>>, q: Params) -> Result<Response, ApiError> {
    let p = params(q, &["ids"])?;
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
        return Ok(Json(serde_json::json!({ "counters": counters })).into_response());
    };
    // Kafka mode: the users of this processor's partitions here, the others
    // from their owners, one request each, answers in the order asked.
    let a = api.clone();
    let counters = tokio::task::spawn_blocking(move || {
        let mut out: Vec<Option<serde_json::Value>> = vec![None; users.len()];
        let mut elsewhere: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
        for (i, &u) in users.iter().enumerate() {
            match a.reader.counters(u) {
                Ok(c) => out[i] = Some(serde_json::to_value(c).expect("plain struct")),
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
        Ok(out
            .into_iter()
            .map(|c| c.expect("every id answered"))
            .collect::<Vec<_>>())
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(Json(serde_json::json!({ "counters": counters })).into_response())
}

/// Internal (Kafka mode): outboxes of authors in partitions this processor
/// serves, for another processor's timeline pull path.
async fn internal_outboxes(State(api): State<Arc<Api>>, q: Params) -> Result<Response, ApiError> {
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

/// Kafka mode: a request for a user whose partition this processor does not
/// serve is forwarded to the processor that does (a stream is redirected);
/// 503 while the partition is moving.
async fn route(State(api): State<Arc<Api>>, req: Request, next: Next) -> Response {
    let Some(routing) = api.routing.clone() else {
        return next.run(req).await;
    };
    let path = req.uri().path().to_string();
    let Some(user) = path
        .strip_prefix("/v1/users/")
        .and_then(|rest| rest.split('/').next())
        .and_then(|id| id.parse::<u64>().ok())
        .filter(|id| *id > 0)
    else {
        return next.run(req).await;
    };
    let p = routing.partition(UserId(user));
    let forwarded = req.headers().contains_key(routing::FORWARDED);
    match api.reader.partition_state(p) {
        Ok(()) => next.run(req).await,
        Err(QueryError::Elsewhere { .. }) if !forwarded => {
            let pq = req
                .uri()
                .path_and_query()
                .map_or(path.clone(), |x| x.as_str().to_string());
            if path.ends_with("/timeline/stream") {
                return match routing.owner(p) {
                    Ok(api) => (
                        StatusCode::TEMPORARY_REDIRECT,
                        [(header::LOCATION, format!("{api}{pq}"))],
                    )
                        .into_response(),
                    Err(e) => ApiError::from(e).into_response(),
                };
            }
            let answer = tokio::task::spawn_blocking(move || routing.get(p, &pq)).await;
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
                    if r.status == 503 {
                        resp.headers_mut()
                            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                    }
                    resp
                }
                Ok(Err(e)) => ApiError::from(e).into_response(),
                Err(e) => ApiError::internal(e).into_response(),
            }
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The newest-first keys of the timeline entries newer than `after` (all of
/// the first page's top when `after` is `None`: then only the newest one).
fn newer_entries(
    r: &Reader,
    user: UserId,
    after: Option<(u64, u64, u64)>,
) -> Result<Vec<PostItem>, QueryError> {
    const PAGE: usize = 200;
    const MOST: usize = 10_000;
    let key = |i: &PostItem| (i.ts, i.post_id, i.author);
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = r.timeline(user, PAGE, cursor.as_deref())?;
        for item in page.items {
            match after {
                None => return Ok(vec![item]),
                Some(a) if key(&item) <= a => return Ok(out),
                Some(_) => out.push(item),
            }
        }
        match page.next_cursor {
            Some(c) if out.len() < MOST => cursor = Some(c),
            _ => return Ok(out),
        }
    }
}

/// Server-sent events: each timeline entry newer than every entry already
/// on the timeline when the stream opened, oldest first, as it becomes
/// visible (`event: entry`, data `{"post_id","author","ts"}`). The stream
/// opens with a `subscribed` comment.
async fn timeline_stream(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let user = user_id(&id)?;
    params(q, &[])?;
    let top = read(&api, move |r| newer_entries(r, user, None)).await?;
    let newest = top.first().map(|i| (i.ts, i.post_id, i.author));
    let poll = api.cfg.stream_poll;
    struct S {
        api: Arc<Api>,
        newest: Option<(u64, u64, u64)>,
        queue: std::collections::VecDeque<PostItem>,
        opened: bool,
    }
    let state = S {
        api,
        newest,
        queue: Default::default(),
        opened: false,
    };
    let stream = futures_util::stream::unfold(state, move |mut s| async move {
        if !s.opened {
            s.opened = true;
            let ev = SseEvent::default().comment("subscribed");
            return Some((Ok::<_, std::convert::Infallible>(ev), s));
        }
        loop {
            if let Some(item) = s.queue.pop_front() {
                let ev = SseEvent::default()
                    .event("entry")
                    .json_data(item)
                    .expect("plain struct serializes");
                return Some((Ok(ev), s));
            }
            tokio::time::sleep(poll).await;
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

async fn openapi() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI,
    )
        .into_response()
}

async fn healthz() -> Response {
    Json(serde_json::json!({"status": "ok"})).into_response()
}

#[derive(Serialize)]
struct Ready {
    ready: bool,
    lag: u64,
    max_lag: u64,
}

async fn readyz(State(api): State<Arc<Api>>) -> Result<Response, ApiError> {
    let a = api.clone();
    let lags = tokio::task::spawn_blocking(move || a.lag())
        .await
        .map_err(ApiError::internal)??;
    let lag: u64 = lags.iter().map(PartitionLag::total).sum();
    let ready = lag <= api.cfg.ready_lag;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = Ready {
        ready,
        lag,
        max_lag: api.cfg.ready_lag,
    };
    Ok((status, Json(body)).into_response())
}

const ROCKS_PROPERTIES: &[(&str, &str, &str)] = &[
    (
        "rocksdb.estimate-num-keys",
        "feedlog_rocksdb_estimated_keys",
        "Estimated keys in the partition's store.",
    ),
    (
        "rocksdb.total-sst-files-size",
        "feedlog_rocksdb_sst_bytes",
        "Bytes of SST files.",
    ),
    (
        "rocksdb.cur-size-all-mem-tables",
        "feedlog_rocksdb_memtable_bytes",
        "Bytes in memtables.",
    ),
    (
        "rocksdb.estimate-pending-compaction-bytes",
        "feedlog_rocksdb_pending_compaction_bytes",
        "Estimated bytes compaction still has to rewrite.",
    ),
    (
        "rocksdb.num-running-compactions",
        "feedlog_rocksdb_running_compactions",
        "Compactions running now.",
    ),
];

/// The Prometheus text of every metric.
pub fn render_metrics(api: &Api) -> Result<String, ApiError> {
    let mut out = String::new();
    let o = &mut out;
    metrics::header(
        o,
        "feedlog_uptime_seconds",
        "gauge",
        "Seconds since the API started.",
    );
    metrics::sample(
        o,
        "feedlog_uptime_seconds",
        "",
        api.started.elapsed().as_secs_f64(),
    );
    if let Some(p) = &api.progress {
        let t = *p.totals.lock().expect("poisoned");
        let name = "feedlog_events_applied_total";
        metrics::header(o, name, "counter", "Input events applied, by kind.");
        for (i, kind) in ["follow", "unfollow", "post", "delete_post"]
            .iter()
            .enumerate()
        {
            metrics::sample(o, name, &format!("kind=\"{kind}\""), t.events[i]);
        }
        for (name, help, v) in [
            (
                "feedlog_effects_applied_total",
                "Internal messages applied.",
                t.effects,
            ),
            (
                "feedlog_effects_emitted_total",
                "Internal messages emitted.",
                t.emitted,
            ),
            (
                "feedlog_deliveries_total",
                "Inbox entries written (fan-out deliveries and backfills).",
                t.delivered,
            ),
            (
                "feedlog_inbox_removed_total",
                "Inbox entries removed (trims, unfollows, deletes).",
                t.removed,
            ),
            (
                "feedlog_dead_letters_total",
                "Records this processor sent to the dead-letter log.",
                t.dead_letters,
            ),
            (
                "feedlog_events_forwarded_total",
                "Events that arrived in a partition that does not own their actor, forwarded to the owner.",
                t.forwarded,
            ),
            (
                "feedlog_forwarded_duplicates_total",
                "Copies of forwarded events already applied, skipped.",
                t.duplicates,
            ),
        ] {
            metrics::header(o, name, "counter", help);
            metrics::sample(o, name, "", v);
        }
        let name = "feedlog_batch_records";
        metrics::header(o, name, "histogram", "Records read per non-empty batch.");
        p.batch_records.render(o, name, "");
        let name = "feedlog_commit_seconds";
        metrics::header(
            o,
            name,
            "histogram",
            "Time to commit one batch's state, positions and outbox.",
        );
        p.commit_seconds.render(o, name, "");
    }
    let lags = api.lag()?;
    let name = "feedlog_lag_records";
    metrics::header(
        o,
        name,
        "gauge",
        "Records in the partition's input log not yet applied to its state.",
    );
    for l in &lags {
        for (topic, v) in [
            ("events", l.events_end.saturating_sub(l.events_pos)),
            ("effects", l.effects_end.saturating_sub(l.effects_pos)),
        ] {
            metrics::sample(
                o,
                name,
                &format!("topic=\"{topic}\",partition=\"{}\"", l.partition),
                v,
            );
        }
    }
    let name = "feedlog_dead_letter_log_records";
    metrics::header(
        o,
        name,
        "gauge",
        "Records in the dead-letter log (from produce and processing).",
    );
    let mut dead = 0;
    for p in 0..api.logs.partitions(Topic::DeadLetter) {
        dead += api
            .logs
            .end_offset(Topic::DeadLetter, p)
            .map_err(ApiError::internal)?;
    }
    metrics::sample(o, name, "", dead);
    for (prop, name, help) in ROCKS_PROPERTIES {
        metrics::header(o, name, "gauge", help);
        for (p, s) in api.reader.stores() {
            if let Some(v) = s.property(prop).and_then(|v| v.parse::<u64>().ok()) {
                metrics::sample(o, name, &format!("partition=\"{p}\""), v);
            }
        }
    }
    let name = "feedlog_http_request_duration_seconds";
    metrics::header(o, name, "histogram", "Request latency, by route.");
    for (i, h) in api.requests.iter().enumerate() {
        // `:id`, not `{id}`: some scrapers end a label set at the first `}`.
        let route = ROUTES
            .get(i)
            .map_or("unmatched".into(), |r| r.replace("{id}", ":id"));
        h.render(o, name, &format!("route=\"{route}\""));
    }
    let name = "feedlog_http_responses_total";
    metrics::header(o, name, "counter", "Responses, by status class.");
    for (i, c) in api.statuses.iter().enumerate() {
        metrics::sample(
            o,
            name,
            &format!("class=\"{}xx\"", i + 1),
            c.load(Ordering::Relaxed),
        );
    }
    Ok(out)
}

async fn metrics_route(State(api): State<Arc<Api>>) -> Result<Response, ApiError> {
    let a = api.clone();
    let text = tokio::task::spawn_blocking(move || render_metrics(&a))
        .await
        .map_err(ApiError::internal)??;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        text,
    )
        .into_response())
}

async fn not_found() -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        message: "no such route (see /openapi.json)".into(),
    }
}

async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        code: "method_not_allowed",
        message: "this API is read-only: GET only".into(),
    }
}

async fn observe(State(api): State<Arc<Api>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .and_then(|m| ROUTES.iter().position(|r| *r == m.as_str()))
        .unwrap_or(ROUTES.len());
    let start = Instant::now();
    let resp = next.run(req).await;
    api.requests[route].observe(start.elapsed().as_secs_f64());
    let class = (resp.status().as_u16() / 100).clamp(1, 5) as usize - 1;
    api.statuses[class].fetch_add(1, Ordering::Relaxed);
    resp
}

/// The API's routes.
pub fn router(api: Arc<Api>) -> Router {
    Router::new()
        .route(ROUTES[0], get(timeline))
        .route(ROUTES[1], get(timeline_stream))
        .route(ROUTES[2], get(posts))
        .route(ROUTES[3], get(counters))
        .route(ROUTES[4], get(counters_many))
        .route(ROUTES[5], get(recent_followers))
        .route(ROUTES[6], get(followers))
        .route(ROUTES[7], get(followees))
        .route(ROUTES[8], get(openapi))
        .route(ROUTES[9], get(healthz))
        .route(ROUTES[10], get(readyz))
        .route(ROUTES[11], get(metrics_route))
        .route(ROUTES[12], get(internal_outboxes))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(api.clone(), route))
        .layer(axum::middleware::from_fn_with_state(api.clone(), observe))
        .with_state(api)
}

/// Serves the API on `listener` until `shutdown` completes. A reader beside
/// a processor (RocksDB secondaries) is refreshed every `cfg.refresh`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    api: Arc<Api>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let refresher = {
        let api = api.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(api.cfg.refresh).await;
                let a = api.clone();
                if let Ok(Err(e)) = tokio::task::spawn_blocking(move || a.reader.refresh()).await {
                    tracing::warn!(error = %e, "could not catch up with the processor's state");
                }
            }
        })
    };
    let (tx, rx) = tokio::sync::watch::channel(false);
    let app = router(api);
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        shutdown.await;
        let _ = tx.send(true);
    });
    // Open timeline streams never end by themselves: once shutdown is asked
    // for, give connections a moment, then stop.
    let mut rx2 = rx.clone();
    let r = tokio::select! {
        r = server => r,
        _ = async move {
            let _ = rx2.wait_for(|v| *v).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        } => Ok(()),
    };
    refresher.abort();
    r
}

/// The read API of a Kafka-mode processor: its serving partitions here,
/// the others through their owners (found in the `members` topic).
pub fn cluster_api(
    cluster: &crate::cluster::Cluster,
    cfg: ApiConfig,
) -> Result<Arc<Api>, crate::log::LogError> {
    let members = Arc::new(crate::cluster::MembersView::start(cluster.log().config())?);
    let routing = Arc::new(routing::Routing::new(members, cluster.partitions()));
    let reader = Reader::over(
        cluster.shared().clone(),
        Some(Arc::new(routing::RemoteOutboxes(routing.clone()))),
    );
    Ok(Api::clustered(
        reader,
        cluster.log().clone(),
        Some(cluster.progress().clone()),
        cfg,
        Some(routing),
    ))
}
