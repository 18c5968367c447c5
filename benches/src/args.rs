//! The grammar of `feedlog-bench` (clap): which bench runs, its workload
//! and load, and the settings of `feedlog` it reads (`--data`, `--kafka`,
//! `--kafka-option`, with their `FEEDLOG_` variables).

use clap::Parser;
use feedlog::core::DEFAULT_PULL_THRESHOLD;
use feedlog::ops::asof::log_span;
use feedlog::state::Kept;
use std::path::PathBuf;

/// `feedlog-bench`: one bench and its options.
#[derive(Parser)]
#[command(
    name = "feedlog-bench",
    version,
    about = "Measures feedlog against a raw baseline (RocksDB, the log, or the Redis design) in the same run"
)]
pub struct Cli {
    /// What to measure.
    #[arg(value_enum, default_value_t = BenchKind::Fanout)]
    pub kind: BenchKind,
    /// Data directory (logs and state), as `feedlog --data`: what http,
    /// rebuild, rewind, failover and kafka-swap measure on, and redis and
    /// mixed replay when it exists.
    #[arg(long, env = "FEEDLOG_DATA", default_value = "feedlog-data")]
    pub data: PathBuf,
    /// kafka, failover, kafka-swap: Kafka brokers, `host:port[,host:port]`,
    /// as `feedlog --kafka` [default: an in-process mock broker].
    #[arg(
        long,
        help_heading = "Kafka mode",
        env = "FEEDLOG_KAFKA",
        value_name = "BROKERS"
    )]
    pub kafka: Option<String>,
    /// An extra librdkafka setting for every client, `KEY=VALUE`
    /// (`security.protocol=SSL`, ...), as `feedlog --kafka-option`;
    /// repeatable.
    #[arg(
        long = "kafka-option",
        help_heading = "Kafka mode",
        env = "FEEDLOG_KAFKA_OPTIONS",
        value_name = "KEY=VALUE",
        value_delimiter = ';'
    )]
    pub kafka_options: Vec<String>,
    /// Users in the generated network.
    #[arg(long, default_value_t = 20_000)]
    pub users: u64,
    /// Follows per user (power-law choice of followees).
    #[arg(long, default_value_t = 20)]
    pub follows: u64,
    /// Posts to fan out.
    #[arg(long, default_value_t = 2_000)]
    pub posts: u64,
    /// fanout, redis, mixed, kafka: the generated workload's shape.
    #[arg(long, value_enum, default_value_t = Shape::PostHeavy)]
    pub shape: Shape,
    /// follow-heavy: events in all (about 45 % first-contact follows,
    /// the rest posts, among --users users).
    #[arg(long, default_value_t = 1_000_000)]
    pub events: u64,
    /// Partitions.
    #[arg(long, default_value_t = 8)]
    pub partitions: u32,
    /// http, redis, mixed, kafka-swap: server threads, load-generator threads and raw reader threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// http, redis, mixed, kafka-swap: open connections of the load generator.
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    /// http, redis, kafka-swap: seconds each page run is measured.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// fanout, redis, mixed: the processor's pull threshold (0: every author
    /// pushed).
    #[arg(long, default_value_t = DEFAULT_PULL_THRESHOLD)]
    pub pull_threshold: u64,
    /// fanout, redis, mixed: the processor's inactivity span (as `feedlog
    /// run`'s; 0: every reader pushed to).
    #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = log_span)]
    pub inactive_after: u64,
    /// redis: the readers' inbox heads, MiB (as `feedlog run --heads-mb`).
    #[arg(long, value_name = "MIB", default_value_t = (Kept::DEFAULT.heads >> 20) as u64)]
    pub heads_mb: u64,
    /// redis: the readers' page cache, MiB (as `feedlog run --page-cache-mb`).
    #[arg(long, value_name = "MIB", default_value_t = (Kept::DEFAULT.pages >> 20) as u64)]
    pub page_cache_mb: u64,
    /// failover: the processors' session timeout, ms.
    #[arg(long, default_value_t = 3_000)]
    pub session_timeout_ms: u64,
}

/// The shape of a generated benchmark workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// Every user follows --follows power-law-chosen users (the follow
    /// graph, processed first), then --posts posts by power-law-chosen
    /// authors.
    PostHeavy,
    /// A messaging network over time: --events events among --users users,
    /// about 45 % first-contact follows and the rest posts, most accounts
    /// small (generated as `ingest::generate::follow_heavy`).
    FollowHeavy,
}

/// Which bench runs.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum BenchKind {
    /// Fan-out inbox writes/s through the processor vs raw RocksDB puts.
    Fanout,
    /// Timeline pages/s and latency through the HTTP API (wrk), with the
    /// page cache and without, vs raw RocksDB seek + 20 reads, on the
    /// state in --data.
    Http,
    /// Timeline pages/s and p99 through the HTTP API of readers who follow
    /// 0, 10 and 50 pulled authors, on a generated state.
    Pulled,
    /// What mutes cost: processing with and without them, and timeline
    /// pages (first and deep) of readers who mute 100 of the 200 accounts
    /// they follow against readers who mute none.
    Filters,
    /// What the replies rule of home timelines costs: first and deep
    /// pages of readers who follow the users replied to (every reply
    /// shows) and of readers who do not (the rule leaves half the posts
    /// out), and against a state without replies.
    Replies,
    /// Likes and unlikes applied per second against the Redis design's
    /// SADD + HINCRBY of the same likes (needs redis-server), the posts in
    /// place.
    Likes,
    /// Unread counts of the home timeline (`markers`, 0 to 100 unread)
    /// against the Redis design's ZCOUNT above the marker (needs
    /// redis-server and redis-benchmark, and wrk).
    Markers,
    /// The first page of grouped notifications (`notifications`, 280
    /// acts per reader in 21 groups) against the Redis design grouping
    /// the same acts server-side in one Lua script (needs redis-server and
    /// redis-benchmark, and wrk).
    Notifications,
    /// What explaining costs: timeline pages with `explain=1` and
    /// `timeline/why` answers against plain pages, on the state `filters`
    /// builds.
    Explain,
    /// Events/s and deliveries/s through Kafka with one and two processors
    /// vs the embedded log (processing a produced log, and producing while
    /// it runs), same workload (--kafka BROKERS, else an in-process mock
    /// broker).
    Kafka,
    /// Failover in Kafka mode: from a SIGKILL of one of two processors to
    /// every partition served fresh by the other, without standbys and with
    /// `--standbys 1`, on the log in --data (the demo's; --kafka BROKERS,
    /// else an in-process mock broker).
    Failover,
    /// A swap of generations in Kafka mode under read load: timeline pages
    /// through a generation-0 processor (wrk) before, during and after
    /// `--generation 1 swap`, and from generation 1 directly, on the log
    /// in --data (the demo's; --kafka BROKERS, else an in-process mock
    /// broker).
    KafkaSwap,
    /// Rebuild of the state in --data from its log vs raw reads of the log
    /// and raw RocksDB puts of the rebuilt records.
    Rebuild,
    /// Views as of an earlier time on the state in --data: the first
    /// request (a replay of the log up to it) vs a rebuild from the same
    /// log, later ones, and pages as of it vs live pages.
    Rewind,
    /// Timeline pages read while the writes are applied, feedlog against
    /// the Redis design on the same events (the log in --data when it
    /// exists, else the generated workload): pages/s, p50/p99, and the
    /// writes' entries/s alone and under the reads.
    Mixed,
    /// feedlog against the Redis sorted-set design on the same events (the
    /// log in --data when it exists, else the generated workload): inbox
    /// entries/s end to end, timeline pages/s and p50/p99 with the page
    /// cache and without (wrk against redis-benchmark ZREVRANGE at the
    /// same concurrency; with reposts in the log, a script reading each
    /// row's sources too).
    Redis,
}
