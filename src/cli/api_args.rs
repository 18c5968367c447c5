//! The HTTP read API's settings on the command line (`run`, `serve`),
//! what those commands keep in memory, and what `query` passes to a read.

use feedlog::api::http::ApiConfig;
use feedlog::ops::asof::Retention;
use feedlog::state::Kept;
use feedlog::task::embedded::DEFAULT_BLOCK_CACHE_BYTES;

/// Settings of the HTTP read API.
#[derive(clap::Args, Clone)]
pub struct ApiArgs {
    /// Largest page (`limit`) a request may ask for.
    #[arg(long, env = "FEEDLOG_MAX_LIMIT", default_value_t = 200)]
    pub max_limit: usize,
    /// `/readyz` is ready while at most this many records are unapplied.
    #[arg(long, env = "FEEDLOG_READY_LAG", default_value_t = 1000)]
    pub ready_lag: u64,
    /// Require `Authorization: Bearer TOKEN` on every route but /healthz,
    /// /readyz and /openapi.json. Needed to listen on an address other
    /// than loopback.
    #[arg(
        long,
        env = "FEEDLOG_API_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub api_token: Option<String>,
    /// Serve a non-loopback address without a token (anyone who reaches
    /// it reads every view).
    #[arg(long, env = "FEEDLOG_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,
    /// Let browsers on this origin read answers (CORS); `*` for any;
    /// repeatable. Off by default.
    #[arg(
        long = "cors-origin",
        env = "FEEDLOG_CORS_ORIGINS",
        value_name = "ORIGIN",
        value_delimiter = ','
    )]
    pub cors_origins: Vec<String>,
    /// Connections served at once; one more is answered 503.
    #[arg(long, env = "FEEDLOG_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// Answer ids as strings (`"post_id":"77"`), as Mastodon does, for
    /// clients that hold numbers as doubles.
    #[arg(long, env = "FEEDLOG_STRING_IDS")]
    pub string_ids: bool,
    /// How far back `as_of` reaches before the newest event's log time:
    /// `30d`, `12h`, `90m`, `45s`, `500ms`, `0` (none) or `forever`.
    #[arg(long, env = "FEEDLOG_HISTORY_RETENTION", default_value = "30d", value_parser = Retention::parse)]
    pub history_retention: Retention,
    /// Threads answering requests (0: one per core, at least 2).
    #[arg(
        long,
        env = "FEEDLOG_HTTP_THREADS",
        value_name = "N",
        default_value_t = 0
    )]
    pub http_threads: usize,
}

/// The largest memory setting, MiB (1 TiB).
const MAX_MIB: u64 = 1 << 20;

/// RocksDB's block cache, for `run` and `serve`.
#[derive(clap::Args, Clone, Debug)]
#[command(next_help_heading = "Memory")]
pub struct CacheArgs {
    /// RocksDB block cache shared by every partition's store, MiB: blocks
    /// read by processing and by pages (`serve`: by its pages).
    #[arg(
        long,
        env = "FEEDLOG_BLOCK_CACHE_MB",
        value_name = "MIB",
        default_value_t = (DEFAULT_BLOCK_CACHE_BYTES >> 20) as u64,
        value_parser = clap::value_parser!(u64).range(1..=MAX_MIB)
    )]
    pub block_cache_mb: u64,
}

impl CacheArgs {
    /// The block cache's size, bytes.
    pub fn bytes(&self) -> usize {
        mib(self.block_cache_mb)
    }
}

/// What `run` keeps in memory for the pages it serves, beside its stores
/// (`serve`'s stores change at each catch-up, without the commits these
/// follow, so it keeps neither).
#[derive(clap::Args, Clone, Debug)]
#[command(next_help_heading = "Memory")]
pub struct KeptArgs {
    /// Inbox heads, all partitions together, MiB (0: none): readers' newest
    /// inbox rows and sources, sleepers' followees, authors' newest outbox
    /// rows and the reposts of frequent reposters, changed by each commit.
    #[arg(
        long,
        env = "FEEDLOG_HEADS_MB",
        value_name = "MIB",
        default_value_t = (Kept::DEFAULT.heads >> 20) as u64,
        value_parser = clap::value_parser!(u64).range(0..=MAX_MIB)
    )]
    pub heads_mb: u64,
    /// First timeline pages kept encoded, all partitions together, MiB (0:
    /// none); a commit that changes a reader's inbox drops their page.
    #[arg(
        long,
        env = "FEEDLOG_PAGE_CACHE_MB",
        value_name = "MIB",
        default_value_t = (Kept::DEFAULT.pages >> 20) as u64,
        value_parser = clap::value_parser!(u64).range(0..=MAX_MIB)
    )]
    pub page_cache_mb: u64,
}

impl KeptArgs {
    /// The budgets, bytes.
    pub fn kept(&self) -> Kept {
        Kept {
            pages: mib(self.page_cache_mb),
            heads: mib(self.heads_mb),
        }
    }
}

/// `n` MiB in bytes.
fn mib(n: u64) -> usize {
    usize::try_from(n << 20).unwrap_or(usize::MAX)
}

impl ApiArgs {
    /// The API's settings.
    pub fn config(&self) -> ApiConfig {
        let d = ApiConfig::default();
        ApiConfig {
            max_limit: self.max_limit,
            ready_lag: self.ready_lag,
            token: self.api_token.clone().filter(|t| !t.is_empty()),
            allow_unauthenticated_remote: self.insecure_no_auth,
            cors_origins: self.cors_origins.clone(),
            string_ids: self.string_ids,
            threads: self.http_threads,
            limits: feedlog::api::http::Limits {
                max_connections: self.max_connections.max(1),
                ..d.limits
            },
            ..d
        }
    }
}

/// What `query` passes to a read: each flag is the HTTP route's parameter
/// of the same name, checked by the one table of reads.
#[derive(clap::Args, Debug, Default)]
#[command(next_help_heading = "Parameters of the read (as its HTTP route's)")]
pub struct ReadArgs {
    /// Page size (recent-followers: how many).
    #[arg(long, value_name = "N")]
    pub limit: Option<String>,
    /// The next page: a page's `next_cursor`.
    #[arg(long, value_name = "C")]
    pub cursor: Option<String>,
    /// timeline: the entries newer than a page's `prev_cursor`.
    #[arg(long, value_name = "C")]
    pub newer_than: Option<String>,
    /// timeline: the entries just above the home read marker (`marker`)
    /// or a page's cursor, oldest first (catch-up).
    #[arg(long, value_name = "marker|C")]
    pub after: Option<String>,
    /// timeline, markers: how reposts are placed, `newest` (default), `first` or `none`.
    #[arg(long, value_name = "MODE")]
    pub reposts: Option<String>,
    /// timeline, markers: which replies by followed users show, `followed` (the
    /// default: replies to users the reader follows, or to the reader),
    /// `all` or `none` (replies to the reader only).
    #[arg(long, value_name = "RULE")]
    pub replies: Option<String>,
    /// timeline: each entry with `why`, its appearances and the events
    /// that decided them.
    #[arg(long)]
    pub explain: bool,
    /// The view as it was at log time T (ms): docs/http-api.md, "Earlier states".
    #[arg(long, value_name = "T")]
    pub as_of: Option<String>,
    /// why: the post's author.
    #[arg(long, value_name = "A")]
    pub author: Option<String>,
    /// why, post: the post's id.
    #[arg(long, value_name = "P")]
    pub post_id: Option<String>,
    /// post, posts: the user whose flags (liked, reposted) each post carries.
    #[arg(long, value_name = "U")]
    pub viewer: Option<String>,
    /// timeline, posts: `0` leaves each entry's counts and flags out.
    #[arg(long, value_name = "0|1")]
    pub counts: Option<String>,
    /// changes: the earlier log time (ms).
    #[arg(long, value_name = "T1")]
    pub from: Option<String>,
    /// changes: the later log time (ms).
    #[arg(long, value_name = "T2")]
    pub to: Option<String>,
    /// markers: the most unread entries counted (default 1000, at most 10000).
    #[arg(long, value_name = "N")]
    pub max: Option<String>,
    /// notifications: `0` answers one entry per act; `1` (default) groups.
    #[arg(long, value_name = "0|1")]
    pub grouped: Option<String>,
    /// notifications: the kinds kept, comma-separated (`follow`, `like`,
    /// `repost`, `reply`, `mention`).
    #[arg(long, value_name = "KINDS")]
    pub types: Option<String>,
}

impl ReadArgs {
    /// The flags given, as the route's parameters.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let flags = [
            ("limit", &self.limit),
            ("cursor", &self.cursor),
            ("newer_than", &self.newer_than),
            ("after", &self.after),
            ("reposts", &self.reposts),
            ("replies", &self.replies),
            ("as_of", &self.as_of),
            ("author", &self.author),
            ("post_id", &self.post_id),
            ("from", &self.from),
            ("to", &self.to),
            ("viewer", &self.viewer),
            ("counts", &self.counts),
            ("max", &self.max),
            ("grouped", &self.grouped),
            ("types", &self.types),
        ];
        let explain = self
            .explain
            .then(|| ("explain".to_string(), "1".to_string()));
        flags
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), v.clone()?)))
            .chain(explain)
            .collect()
    }
}
