//! The HTTP read API (axum, JSON): every view, live timeline and notifications streams,
//! health, readiness and Prometheus metrics. Paths and shapes are a public
//! interface, described by [`openapi`] (generated from the code with
//! utoipa, served at `/openapi.json`).
//!
//! Every page is read from one RocksDB snapshot through [`Reader`], so the
//! answers are exactly those of `feedlog query`. RocksDB calls run on the
//! blocking pool, never on the async workers. The API reads views through
//! the reader and asks [`Node`] and [`Locator`], traits it owns, for the
//! rest: it never touches a log or a runner.

pub mod client;
pub mod cut;
mod errors;
mod feeds;
mod handlers;
mod health;
mod internal;
mod layers;
mod metrics_text;
mod pages;
mod params;
mod prometheus;
mod rewound;
pub mod routing;
pub mod server;
mod stream;
mod ui;

pub use errors::ApiError;
pub use metrics_text::render_metrics;
pub use pages::{kept_timeline_page, split_kept_page, KeptPage};

use crate::api::query::Reader;
use crate::core::metrics::{Figures, PartitionLag, LATENCY_BUCKETS};
use crate::core::Disposition;
use crate::core::Partition;
use crate::state::Store;
use axum::routing::get;
use axum::Router;
use prometheus::Histogram;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod ids;
pub mod openapi;

/// The routes, by name (the router and the handlers name them so, never by
/// their place in [`ROUTES`]).
pub mod route {
    /// Home timeline pages.
    pub const TIMELINE: &str = crate::api::reads::TIMELINE.route;
    /// The timeline stream (server-sent events).
    pub const TIMELINE_STREAM: &str = crate::api::reads::STREAM.route;
    /// An author's posts.
    pub const POSTS: &str = crate::api::reads::POSTS.route;
    /// One post with its counts.
    pub const POST: &str = crate::api::reads::POST.route;
    /// Who likes a post.
    pub const LIKES: &str = crate::api::reads::LIKES.route;
    /// A post's replies.
    pub const REPLIES: &str = crate::api::reads::REPLIES.route;
    /// A user's read markers and unread counts.
    pub const MARKERS: &str = crate::api::reads::MARKERS.route;
    /// A user's notifications.
    pub const NOTIFICATIONS: &str = crate::api::reads::NOTIFICATIONS.route;
    /// The notifications stream (server-sent events).
    pub const NOTIFICATIONS_STREAM: &str = crate::api::reads::NOTIFICATIONS_STREAM.route;
    /// One user's counters.
    pub const COUNTERS: &str = crate::api::reads::COUNTERS.route;
    /// Counters of many users.
    pub const COUNTERS_MANY: &str = crate::api::reads::COUNTERS_MANY.route;
    /// The newest followers.
    pub const RECENT_FOLLOWERS: &str = crate::api::reads::RECENT_FOLLOWERS.route;
    /// Followers.
    pub const FOLLOWERS: &str = crate::api::reads::FOLLOWERS.route;
    /// Followees.
    pub const FOLLOWEES: &str = crate::api::reads::FOLLOWEES.route;
    /// Why a post is or is not in a user's timeline.
    pub const TIMELINE_WHY: &str = crate::api::reads::WHY.route;
    /// What entered and left a user's timeline between two log times.
    pub const TIMELINE_CHANGES: &str = crate::api::reads::CHANGES.route;
    /// The users a user mutes.
    pub const MUTES: &str = crate::api::reads::MUTES.route;
    /// The users a user blocks.
    pub const BLOCKS: &str = crate::api::reads::BLOCKS.route;
    /// The OpenAPI document.
    pub const OPENAPI: &str = "/openapi.json";
    /// Liveness.
    pub const HEALTHZ: &str = "/healthz";
    /// Readiness.
    pub const READYZ: &str = "/readyz";
    /// Prometheus metrics.
    pub const METRICS: &str = "/metrics";
    /// The web page.
    pub const UI: &str = "/ui";
    /// Processor-to-processor outbox reads (Kafka mode).
    pub const INTERNAL_OUTBOXES: &str = "/v1/internal/outboxes";
    /// Processor-to-processor post record reads (Kafka mode).
    pub const INTERNAL_POSTS: &str = "/v1/internal/posts";
    /// Processor-to-processor counts and flags reads (Kafka mode).
    pub const INTERNAL_ENGAGEMENT: &str = "/v1/internal/engagement";
    /// A consistent cut's hold of a partition (Kafka mode).
    pub const INTERNAL_CUT: &str = "/v1/internal/cut";
    /// A partition's digests at a consistent cut (Kafka mode).
    pub const INTERNAL_DIGEST: &str = "/v1/internal/digest";
    /// A partition's checkpoint at a consistent cut (Kafka mode).
    pub const INTERNAL_CHECKPOINT: &str = "/v1/internal/checkpoint";
}

/// Every route, as matched (also the `route` label of the request metrics).
pub const ROUTES: &[&str] = &[
    route::TIMELINE,
    route::TIMELINE_STREAM,
    route::TIMELINE_WHY,
    route::TIMELINE_CHANGES,
    route::POSTS,
    route::POST,
    route::LIKES,
    route::REPLIES,
    route::MARKERS,
    route::NOTIFICATIONS,
    route::NOTIFICATIONS_STREAM,
    route::COUNTERS,
    route::COUNTERS_MANY,
    route::RECENT_FOLLOWERS,
    route::FOLLOWERS,
    route::FOLLOWEES,
    route::MUTES,
    route::BLOCKS,
    route::OPENAPI,
    route::HEALTHZ,
    route::READYZ,
    route::METRICS,
    route::INTERNAL_OUTBOXES,
    route::INTERNAL_POSTS,
    route::INTERNAL_ENGAGEMENT,
    route::INTERNAL_CUT,
    route::INTERNAL_DIGEST,
    route::INTERNAL_CHECKPOINT,
    route::UI,
];

/// Most ids one `/v1/counters` request may name.
pub const MAX_COUNTER_IDS: usize = 1000;

/// Bounds on connections and requests (see [`server`]).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; one more is answered 503 and closed.
    pub max_connections: usize,
    /// Time a client has to send a whole request head; also how long an
    /// idle keep-alive connection stays open.
    pub header_timeout: Duration,
    /// Time a handler has to produce its answer (a stream's body is not
    /// counted); past it, 503.
    pub request_timeout: Duration,
    /// Longest request target (path and query), bytes: 414 past it.
    pub max_url_bytes: usize,
    /// Longest request head (request line and headers), bytes: 431 past it.
    pub max_head_bytes: usize,
    /// Largest request body, bytes (the API is read-only): 413 past it.
    pub max_body_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            // Room for `/v1/counters` with its 1,000 ids.
            max_url_bytes: 32 << 10,
            max_head_bytes: 64 << 10,
            max_body_bytes: 64 << 10,
        }
    }
}

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
    /// Bounds on connections and requests.
    pub limits: Limits,
    /// When set, every route but `/healthz`, `/readyz` and `/openapi.json`
    /// needs `Authorization: Bearer <token>` (401 otherwise); processors of
    /// a Kafka group send it to each other.
    pub token: Option<String>,
    /// Origins a browser may read answers from (CORS; `*` for any); none by
    /// default.
    pub cors_origins: Vec<String>,
    /// Serve an address beyond loopback without a token (see
    /// [`exposure_error`]).
    pub allow_unauthenticated_remote: bool,
    /// Answers carry ids as strings ([`ids`]).
    pub string_ids: bool,
    /// Threads answering requests (`0`: one per core, at least 2; see
    /// [`ApiConfig::workers`]).
    pub threads: usize,
}

impl ApiConfig {
    /// The threads answering requests: `threads`, else one per core and at
    /// least 2 (a page read inline leaves the other free).
    pub fn workers(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get().max(2)),
            n => n,
        }
    }
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            max_limit: 200,
            ready_lag: 1000,
            stream_poll: Duration::from_millis(100),
            refresh: Duration::from_millis(100),
            limits: Limits::default(),
            token: None,
            cors_origins: Vec::new(),
            allow_unauthenticated_remote: false,
            string_ids: false,
            threads: 0,
        }
    }
}

/// Why serving on `addr` with `cfg` is refused: an address other than
/// loopback without a token, unless explicitly allowed.
pub fn exposure_error(addr: &std::net::SocketAddr, cfg: &ApiConfig) -> Option<String> {
    if addr.ip().is_loopback() || cfg.token.is_some() || cfg.allow_unauthenticated_remote {
        return None;
    }
    Some(format!(
        "refusing to serve the read API on {addr} without authentication: anyone who can reach it \
         reads every view. Set --api-token TOKEN (or FEEDLOG_API_TOKEN), listen on 127.0.0.1, \
         or pass --insecure-no-auth"
    ))
}

/// Routes any client may call without the token (health probes, the API
/// description, and the web page, which holds no data: it asks for the
/// token and sends it with its own requests).
pub const PUBLIC_ROUTES: &[&str] = &["/healthz", "/readyz", "/openapi.json", "/ui"];

/// Why the processor behind the API could not answer (its log failed, say).
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub struct NodeError {
    /// What the failure underneath answers: skip, retry or stop.
    pub disposition: Disposition,
    /// The failure underneath.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl NodeError {
    /// `source`, which answers `disposition`.
    pub fn new(
        disposition: Disposition,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> NodeError {
        NodeError {
            disposition,
            source: Box::new(source),
        }
    }
}

/// What the API needs from whatever processes the log: it never reads a
/// log or a runner itself. The embedded runner and the Kafka runner each
/// have one (in `crate::ops::serve`).
pub trait Node: Send + Sync {
    /// How far each of `stores` (by partition) is behind its input logs.
    fn lag(&self, stores: &[(Partition, Arc<Store>)]) -> Result<Vec<PartitionLag>, NodeError>;
    /// Records in the dead-letter log.
    fn dead_letters(&self) -> Result<u64, NodeError>;
    /// The processing figures, when the processor runs in this process.
    fn figures(&self) -> Option<Figures> {
        None
    }
    /// A counter that moves at each commit of the processor in this
    /// process: what a timeline stream waits on. `None` when the processor
    /// runs elsewhere (the stream polls).
    fn commits(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
    /// Views as of an earlier time (`as_of`), when this node answers them.
    fn rewind(&self) -> Option<Arc<dyn crate::api::query::Rewind>> {
        None
    }
    /// Consistent cuts of the group, when this node takes part in them
    /// (Kafka mode).
    fn cuts(&self) -> Option<Arc<dyn cut::Cuts>> {
        None
    }
}

/// Which generation answers readers (Kafka mode; docs/kafka.md, "Swap").
pub trait Front: Send + Sync {
    /// Who answers readers of partition `p`.
    fn answers(&self, p: Partition) -> Answers;
}

/// Who answers readers of a partition, across generations (Kafka mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answers {
    /// This processor's generation answers readers.
    ThisGeneration,
    /// Another generation does: the API address of its processor that
    /// serves the partition.
    Live(String),
    /// Another generation does, and none of its processors serves the
    /// partition now (it is moving).
    LiveMoving,
}

/// Who serves which partition, in a cluster (Kafka mode): where to forward
/// a request for a partition this processor does not serve.
pub trait Locator: Send + Sync {
    /// The API address (`http://host:port`) of the processor serving
    /// partition `p`; `None` while nobody serves it (it is moving).
    fn serving(&self, p: Partition) -> Option<String>;
}

/// What the API serves from.
pub struct Api {
    reader: Reader,
    node: Arc<dyn Node>,
    cfg: ApiConfig,
    /// Kafka mode: where the partitions this processor does not serve are.
    routing: Option<Arc<routing::Routing>>,
    /// Kafka mode: the generation that answers readers, when it is another.
    front: Option<Arc<dyn Front>>,
    requests: Vec<Histogram>,
    /// Responses by status code (100 to 599, from 0).
    statuses: Box<[AtomicU64]>,
    started: Instant,
    /// `/openapi.json`, with this configuration's limits.
    openapi: bytes::Bytes,
}

impl Api {
    /// An API over `reader`, with lag, dead letters and processing figures
    /// from `node`.
    pub fn new(reader: Reader, node: Arc<dyn Node>, cfg: ApiConfig) -> Arc<Api> {
        Api::clustered(reader, node, cfg, None, None)
    }

    /// An API of one Kafka-mode processor: users of partitions it does not
    /// serve are answered through `owners`, and every user through the
    /// live generation's processors while `front` says another generation
    /// answers readers.
    pub fn clustered(
        reader: Reader,
        node: Arc<dyn Node>,
        cfg: ApiConfig,
        owners: Option<Arc<dyn Locator>>,
        front: Option<Arc<dyn Front>>,
    ) -> Arc<Api> {
        let routing = owners.map(|o| {
            Arc::new(routing::Routing::new(
                o,
                reader.partition_count(),
                cfg.token.as_deref(),
            ))
        });
        let reader = match &routing {
            Some(r) => reader.with_remote(Arc::new(routing::RemoteOutboxes(r.clone()))),
            None => reader,
        };
        let kafka = routing.is_some();
        Arc::new(Api {
            reader,
            node,
            routing,
            front,
            requests: (0..=ROUTES.len())
                .map(|_| Histogram::new(LATENCY_BUCKETS))
                .collect(),
            statuses: (100..600).map(|_| AtomicU64::new(0)).collect(),
            started: Instant::now(),
            openapi: openapi::document(&cfg, kafka).into(),
            cfg,
        })
    }

    /// The reader behind the API.
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The lag of partition `p`, when it is here.
    pub fn lag_of(&self, p: Partition) -> Result<Option<PartitionLag>, ApiError> {
        let here: Vec<_> = self
            .reader
            .stores()
            .into_iter()
            .filter(|s| s.0 == p)
            .collect();
        let lag = self.node.lag(&here).map_err(ApiError::internal)?;
        Ok(lag.into_iter().next())
    }

    /// The lag of every partition.
    pub fn lag(&self) -> Result<Vec<PartitionLag>, ApiError> {
        self.node
            .lag(&self.reader.stores())
            .map_err(ApiError::internal)
    }
}

/// The API's routes.
pub fn router(api: Arc<Api>) -> Router {
    Router::new()
        .route(route::TIMELINE, get(handlers::timeline))
        .route(route::TIMELINE_STREAM, get(stream::timeline_stream))
        .route(route::TIMELINE_WHY, get(handlers::why))
        .route(route::TIMELINE_CHANGES, get(rewound::changes))
        .route(route::POSTS, get(handlers::posts))
        .route(route::POST, get(handlers::post))
        .route(route::LIKES, get(handlers::likes))
        .route(route::REPLIES, get(handlers::replies))
        .route(route::MARKERS, get(feeds::markers))
        .route(route::NOTIFICATIONS, get(feeds::notifications))
        .route(
            route::NOTIFICATIONS_STREAM,
            get(feeds::notifications_stream),
        )
        .route(route::COUNTERS, get(handlers::counters))
        .route(route::COUNTERS_MANY, get(handlers::counters_many))
        .route(route::RECENT_FOLLOWERS, get(handlers::recent_followers))
        .route(route::FOLLOWERS, get(handlers::followers))
        .route(route::FOLLOWEES, get(handlers::followees))
        .route(route::MUTES, get(handlers::mutes))
        .route(route::BLOCKS, get(handlers::blocks))
        .route(route::OPENAPI, get(handlers::openapi))
        .route(route::HEALTHZ, get(handlers::healthz))
        .route(route::READYZ, get(handlers::readyz))
        .route(route::METRICS, get(handlers::metrics_route))
        .route(route::INTERNAL_OUTBOXES, get(internal::internal_outboxes))
        .route(route::INTERNAL_POSTS, get(internal::internal_posts))
        .route(
            route::INTERNAL_ENGAGEMENT,
            get(internal::internal_engagement),
        )
        .route(
            route::INTERNAL_CUT,
            get(cut::cut_state)
                .post(cut::cut_hold)
                .delete(cut::cut_release),
        )
        .route(route::INTERNAL_DIGEST, get(cut::cut_digest))
        .route(
            route::INTERNAL_CHECKPOINT,
            axum::routing::post(cut::cut_checkpoint),
        )
        .route(route::UI, get(ui::ui))
        .fallback(handlers::not_found)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            layers::around,
        ))
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
    let limits = api.cfg.limits;
    if let Some(why) = exposure_error(&listener.local_addr()?, &api.cfg) {
        refresher.abort();
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            why,
        ));
    }
    let app = router(api);
    // Open timeline streams never end by themselves: once shutdown is asked
    // for, give connections a moment, then stop.
    let r =
        server::serve_connections(listener, app, limits, shutdown, Duration::from_secs(1)).await;
    refresher.abort();
    r
}
