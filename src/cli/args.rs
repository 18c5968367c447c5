//! The command line's grammar: every command, flag and setting (clap).

use super::api_args::{ApiArgs, CacheArgs, KeptArgs};
use super::values::{at_least_one, progress_secs, view_arg};
use super::{demo, kafka, log};
use clap::{Parser, Subcommand, ValueEnum};
use feedlog::core::Partition;
use feedlog::core::{View, DEFAULT_PULL_THRESHOLD};
use feedlog::ops::asof::log_span;
use feedlog::task::priority::DEFAULT_WRITER_NICE;
use std::path::PathBuf;
use std::time::Duration;

/// `feedlog`: its global flags and one command.
#[derive(Parser)]
#[command(
    name = "feedlog",
    version,
    about = "Turns a log of follows and posts into exact social-feed views"
)]
pub struct Cli {
    /// Data directory (logs and state).
    #[arg(
        long,
        global = true,
        env = "FEEDLOG_DATA",
        default_value = "feedlog-data"
    )]
    pub data: PathBuf,
    #[command(flatten)]
    pub kafka: kafka::KafkaArgs,
    /// Log lines (warnings, errors, lifecycle): `text` (colours only on a
    /// terminal) or `json`, one object per line; with `json` the status,
    /// progress and error lines on stderr are JSON records too.
    #[arg(long, global = true, env = "FEEDLOG_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// How a command reaches the processors for a consistent cut (Kafka mode).
#[derive(clap::Args)]
pub struct CutArgs {
    /// Kafka mode: seconds to wait for every partition to reach the cut.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub timeout: u64,
    /// Kafka mode: the processors' API token.
    #[arg(
        long,
        env = "FEEDLOG_API_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub api_token: Option<String>,
}

/// How log lines are written.
#[derive(Clone, Copy, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (timestamp, level, target, fields).
    Json,
}

#[derive(Subcommand)]
pub enum Command {
    /// Append JSON-lines events to the `events` log (FILE, or `-` for stdin).
    Produce {
        /// Partition count, only when the data directory is new (default 8).
        #[arg(long)]
        partitions: Option<u32>,
        /// The largest record accepted, bytes (default: `max_record_bytes` of
        /// topics/events.toml, 1,000,000); a longer line goes to the
        /// dead-letter log as an excerpt.
        #[arg(long, value_name = "BYTES")]
        max_record_bytes: Option<usize>,
        /// Input file; `-` or absent reads stdin.
        file: Option<PathBuf>,
    },
    /// Process the logs into the views.
    Run {
        /// Exit 0 once every log is consumed and nothing is in flight.
        #[arg(long)]
        until_idle: bool,
        /// Seconds between progress lines [default: 2 on a terminal, 60
        /// otherwise].
        #[arg(long, env = "FEEDLOG_PROGRESS", value_name = "SECS", value_parser = progress_secs)]
        progress: Option<Duration>,
        /// No progress lines (the summary, warnings and errors still print).
        #[arg(long, env = "FEEDLOG_QUIET")]
        quiet: bool,
        /// Inbox entries kept per user (default: as the state was built, else
        /// 800; change it with `backfill`).
        #[arg(long, env = "FEEDLOG_INBOX_CAP", value_parser = at_least_one)]
        inbox_cap: Option<u64>,
        /// Live followers from which an author's posts are pulled by readers
        /// instead of pushed into every inbox (0: never); an author is
        /// pushed again below half of it. A change is recorded in the log
        /// and takes effect for each author at their next new or lost
        /// follower.
        #[arg(long, env = "FEEDLOG_PULL_THRESHOLD", default_value_t = DEFAULT_PULL_THRESHOLD)]
        pull_threshold: u64,
        /// Log time without an event of their own (any kind: a follow, a
        /// post, a repost, a block, a `seen`…) after which a reader is skipped by push
        /// fan-out and read by pull until their next event: `30d`, `12h`,
        /// `90m`, `45s`, `500ms` (0: never).
        #[arg(long, env = "FEEDLOG_INACTIVE_AFTER", value_name = "DURATION", default_value = "30d", value_parser = log_span)]
        inactive_after: u64,
        /// Do not fsync commits (faster; a power loss may lose recent batches,
        /// which are then processed again).
        #[arg(long, env = "FEEDLOG_NO_SYNC")]
        no_sync: bool,
        /// Nice levels by which each partition thread lowers its scheduling
        /// priority, so that reads (`--listen`, `serve`) are answered first
        /// while a backlog is applied; with nothing else to run, processing
        /// still takes every core (0: none).
        #[arg(long, env = "FEEDLOG_WRITER_NICE", default_value_t = DEFAULT_WRITER_NICE, value_parser = clap::value_parser!(i32).range(0..=19))]
        writer_nice: i32,
        /// Also serve the HTTP read API on ADDR (`--listen` alone: 127.0.0.1:8080).
        #[arg(
            long,
            env = "FEEDLOG_LISTEN",
            value_name = "ADDR",
            num_args = 0..=1,
            default_missing_value = DEFAULT_LISTEN
        )]
        listen: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        cache: CacheArgs,
        #[command(flatten)]
        kept: KeptArgs,
        #[command(flatten)]
        kafka_run: kafka::KafkaRunArgs,
    },
    /// Kafka mode: the group's partitions, owners, committed positions and
    /// lag of both topics, as JSON; `"idle": true` when everything is
    /// consumed to its end.
    Status,
    /// Settings files.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Kafka mode: topics from `topics/`.
    Topics {
        #[command(subcommand)]
        action: TopicsAction,
    },
    /// Replay the log of --data into a fresh state directory, beside the
    /// live processor (resumes when NEWDIR holds an unfinished rebuild). In
    /// Kafka mode: process the whole `events` topic into a new generation
    /// (--generation N) beside the live group, as one of its processors,
    /// with its state in --data.
    Rebuild {
        /// The new state directory (embedded mode).
        #[arg(long, value_name = "NEWDIR")]
        into: Option<PathBuf>,
        /// Start from this checkpoint's state and replay only the log after
        /// it.
        #[arg(long, value_name = "C")]
        from_checkpoint: Option<PathBuf>,
        /// Inbox entries kept per user (default: as the live state).
        #[arg(long, value_parser = at_least_one)]
        inbox_cap: Option<u64>,
        /// Log time without an event of their own (any kind: a follow, a
        /// post, a repost, a block, a `seen`…) after which a reader is skipped by push
        /// fan-out and read by pull until their next event: `30d`, `12h`,
        /// `90m`, `45s`, `500ms` (0: never).
        #[arg(long, env = "FEEDLOG_INACTIVE_AFTER", value_name = "DURATION", default_value = "30d", value_parser = log_span)]
        inactive_after: u64,
        /// Do not fsync commits.
        #[arg(long)]
        no_sync: bool,
        /// Seconds between progress lines.
        #[arg(long, value_name = "SECS", default_value = "2", value_parser = progress_secs)]
        progress: Duration,
        /// Kafka mode: exit 0 once every partition of the new generation has
        /// replayed the log as it was when the rebuild started (its
        /// processors go on with `run --generation N`).
        #[arg(long)]
        until_caught_up: bool,
        /// Kafka mode: serve the new generation's read API on ADDR (`verify`
        /// reads its digests there).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        kafka_run: kafka::KafkaRunArgs,
    },
    /// Write a consistent checkpoint of every partition's state, with its
    /// positions, into a new directory (asks the running processor, if
    /// any).
    Checkpoint {
        /// The new checkpoint directory (embedded mode; in Kafka mode each
        /// processor writes into the group's --checkpoints directory, at
        /// one consistent cut).
        #[arg(long, value_name = "C")]
        into: Option<PathBuf>,
        #[command(flatten)]
        cut: CutArgs,
    },
    /// Switch --data (and its running processor and readers) to the
    /// finished rebuild in NEWDIR, without downtime; the old state is kept
    /// until `drop-state`. In Kafka mode: make generation --generation N
    /// answer the deployment's readers once it has caught up with the live
    /// one (the old one keeps running until --confirm; --rollback goes
    /// back).
    Swap {
        /// The rebuild's directory (on the same file system; embedded mode).
        newdir: Option<PathBuf>,
        /// Kafka mode: make the generation the last swap replaced answer
        /// readers again.
        #[arg(long, conflicts_with_all = ["confirm", "newdir"])]
        rollback: bool,
        /// Kafka mode: retire the generation the last swap replaced (its
        /// processors stop; no rollback to it after).
        #[arg(long, conflicts_with = "newdir")]
        confirm: bool,
        /// Kafka mode: seconds to wait for the generation to catch up with
        /// the live one.
        #[arg(long, value_name = "SECS", default_value_t = 120)]
        timeout: u64,
    },
    /// Rebuild the state with a view's new settings beside the live one,
    /// then swap it in (everything keeps serving meanwhile).
    Backfill {
        /// The view: timeline (or inbox) for --inbox-cap; any view after its
        /// code changed.
        #[arg(long, value_parser = view_arg)]
        view: View,
        /// Inbox entries kept per user (default: as the live state).
        #[arg(long, value_parser = at_least_one)]
        inbox_cap: Option<u64>,
        /// Log time without an event of their own (any kind: a follow, a
        /// post, a repost, a block, a `seen`…) after which a reader is skipped by push
        /// fan-out and read by pull until their next event: `30d`, `12h`,
        /// `90m`, `45s`, `500ms` (0: never).
        #[arg(long, env = "FEEDLOG_INACTIVE_AFTER", value_name = "DURATION", default_value = "30d", value_parser = log_span)]
        inactive_after: u64,
        /// Do not fsync the rebuild's commits.
        #[arg(long)]
        no_sync: bool,
        /// Kafka mode: seconds between progress lines.
        #[arg(long, value_name = "SECS", default_value = "2", value_parser = progress_secs)]
        progress: Duration,
        /// Kafka mode: serve the new generation's read API on ADDR (needed:
        /// it is swapped in for the readers).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// Kafka mode: how long the swap waits, once caught up, for every
        /// partition of the new generation to serve, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 300)]
        timeout: u64,
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        kafka_run: kafka::KafkaRunArgs,
    },
    /// Move the stopped data directory's state back to the start of the
    /// log or to a checkpoint; with --kafka, move the stopped group's
    /// positions back. Refuses when the log no longer holds the position.
    Reset {
        /// Back to an empty state: the next run processes the whole log.
        #[arg(
            long,
            conflicts_with = "to_checkpoint",
            required_unless_present = "to_checkpoint"
        )]
        to_start: bool,
        /// With --to-start: also start a new, empty `effects` log (the old
        /// one is kept beside it), so every internal message is derived
        /// anew from `events` — after `log repair` cut a log.
        #[arg(long, requires = "to_start")]
        regenerate_effects: bool,
        /// Back to this checkpoint's state (with --kafka: a --checkpoints
        /// directory; each partition goes back to its newest checkpoint).
        #[arg(long, value_name = "C")]
        to_checkpoint: Option<PathBuf>,
        /// Print what the reset would do (positions, records to process
        /// again, the state kept) after every check it makes, and change
        /// nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// List the state generations of --data (active and kept).
    States,
    /// Remove an inactive state generation (kept after a swap or reset).
    DropState {
        /// Its name, as `states` lists it.
        name: String,
    },
    /// Digest every view of two data directories at the same log position;
    /// exit 1 naming the first differing view and user, 2 if not comparable.
    /// In Kafka mode: generation --generation N against --against G, at one
    /// consistent cut of both groups.
    Verify {
        /// One data directory (embedded mode).
        a: Option<PathBuf>,
        /// The other.
        b: Option<PathBuf>,
        /// Kafka mode: the generation to compare --generation with.
        #[arg(long, value_name = "G", default_value_t = feedlog::core::Generation::FIRST)]
        against: feedlog::core::Generation,
        #[command(flatten)]
        cut: CutArgs,
    },
    /// The embedded log: check every partition, cut one explicitly, or print the events as JSON lines.
    Log {
        #[command(subcommand)]
        action: LogAction,
    },
    /// Print the dead-letter log: why each record was refused, where it came
    /// from, and an excerpt of it.
    DeadLetters {
        /// Keep printing new dead letters as they arrive (until Ctrl-C).
        #[arg(long)]
        follow: bool,
        /// One JSON object per line (the stored record, plus offset, key, ts).
        #[arg(long)]
        json: bool,
        /// Start at this offset of the dead-letter log.
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
    /// Serve the HTTP read API, read-only, beside a running processor.
    Serve {
        /// Address to listen on.
        #[arg(long, env = "FEEDLOG_LISTEN", value_name = "ADDR", default_value = DEFAULT_LISTEN)]
        listen: String,
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Import real network data (SNAP formats) into the `events` log.
    Import {
        /// `snap-edges` (SRC DST: every edge a follow), `snap-temporal`
        /// (SRC DST UNIXTS: first contact a follow, every line a post by SRC)
        /// or `snap-activity` (SRC DST UNIXTS KIND: as snap-temporal, but a
        /// `RT` line is a repost of DST's newest post).
        #[arg(value_enum)]
        format: ImportFormat,
        /// The file (gzip is detected).
        file: PathBuf,
        /// Partition count, only when the data directory is new (default 8).
        #[arg(long)]
        partitions: Option<u32>,
        /// snap-edges: time of the first follow, ms since the epoch (default
        /// now); edge N follows at this plus N ms.
        #[arg(long)]
        start_ms: Option<u64>,
    },
    /// The tour: load a real (or generated) network, process it with live
    /// progress, serve the API and show what it answers.
    Demo {
        #[command(flatten)]
        demo: demo::DemoArgs,
        /// Address to serve the API on.
        #[arg(long, env = "FEEDLOG_LISTEN", value_name = "ADDR", default_value = DEFAULT_LISTEN)]
        listen: String,
        /// Exit after the tour instead of serving until Ctrl-C.
        #[arg(long)]
        exit: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Read a view: `query VIEW USER`, `query why USER AUTHOR POST_ID`,
    /// `query post AUTHOR POST_ID`, `query likes AUTHOR POST_ID`, `query
    /// replies AUTHOR POST_ID`, or `query -` for JSON queries on stdin. Each flag is the HTTP route's parameter of the same name
    /// (docs/cli.md, "query").
    Query {
        /// timeline, why, changes, posts, post, likes, replies, counters,
        /// recent-followers, followers, followees, mutes, blocks; or `-`.
        view: String,
        /// The user id.
        user: Option<String>,
        /// why: the post's author and id (or --author and --post-id); post,
        /// likes, replies: the post's id (or --post-id).
        #[arg(num_args = 0..=2, value_names = ["AUTHOR", "POST_ID"])]
        post: Vec<String>,
        #[command(flatten)]
        read: crate::cli::api_args::ReadArgs,
        /// How far back --as-of reaches before the newest event's log time,
        /// as a processor's `--history-retention` answers the API (older:
        /// `history_gone`, exit 2): `30d`, `12h`, `0` (none) or `forever`.
        #[arg(long, env = "FEEDLOG_HISTORY_RETENTION", default_value = "30d", value_parser = feedlog::ops::asof::Retention::parse)]
        history_retention: feedlog::ops::asof::Retention,
    },
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

#[derive(Subcommand)]
pub enum LogAction {
    /// Read every record of every partition; report corruption (segment,
    /// byte, offset), torn tails, and state positions past a log's end.
    /// Exit 1 on any problem. Changes nothing.
    Check {
        /// A JSON report.
        #[arg(long)]
        json: bool,
    },
    /// Cut one partition so that its next record gets OFFSET (every byte
    /// from that record on is removed; logged). Refuses while a processor
    /// runs, and below a position a state has applied, unless --force.
    Repair {
        /// The topic.
        #[arg(long, value_enum)]
        topic: log::LogTopic,
        /// The partition.
        #[arg(long)]
        partition: Partition,
        /// The offset the partition ends at afterwards (as `log check`
        /// reports it for a corrupt record).
        #[arg(long, value_name = "OFFSET")]
        truncate_at: u64,
        /// Cut even below a state's applied position (then reset the state).
        #[arg(long)]
        force: bool,
    },
    /// Print the `events` log as the JSON lines `produce` accepts, partition
    /// by partition in offset order (so `produce` of the output rebuilds the
    /// same log); records that are not events are counted on stderr.
    Dump,
    /// Print the event at one position of the `events` log — the
    /// `{partition, offset}` that `explain` and `timeline/why` name — as the
    /// JSON line `produce` accepts.
    Show {
        /// The partition.
        #[arg(long)]
        partition: Partition,
        /// The record's offset in it.
        #[arg(long)]
        offset: u64,
    },
}

#[derive(Subcommand)]
pub enum ConfigAction {
    /// Reads FILE as `--config FILE` would (flags and variables on top)
    /// and checks it without a broker: TOML, that every key names a flag,
    /// that `run` accepts every value, consistent settings, and that
    /// librdkafka accepts the client settings. Prints the effective
    /// settings, secrets masked; exits 2 on a problem.
    Check {
        /// The TOML settings file.
        file: PathBuf,
    },
}

#[derive(Subcommand)]
pub enum TopicsAction {
    /// Creates every missing topic of `topics/` and checks the existing
    /// ones (partitions, retention, cleanup policy, co-partitioning);
    /// exits 1 when one differs (existing topics are never altered).
    Apply {
        /// Partitions of `events` and `effects` when created (default 8).
        #[arg(long)]
        partitions: Option<u32>,
        /// Replication factor of created topics.
        #[arg(long, default_value_t = 1)]
        replication: i32,
    },
}

// The variants' names are the command line's values (`snap-edges`, ...).
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, ValueEnum)]
pub enum ImportFormat {
    /// Directed edge list `SRC DST`.
    SnapEdges,
    /// Temporal edges `SRC DST UNIXTS`.
    SnapTemporal,
    /// Interactions `SRC DST UNIXTS RT|MT|RE` (SNAP's Higgs Twitter activity).
    SnapActivity,
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// `run`'s flags (its own and the global ones) with their variables;
    /// `--until-idle` is a way to run, not a setting.
    fn run_settings() -> Vec<(String, Option<String>)> {
        let mut cli = Cli::command();
        cli.build();
        let run = cli
            .find_subcommand("run")
            .expect("`run` is a command")
            .clone();
        run.get_arguments()
            .filter_map(|a| Some((a.get_long()?.to_string(), a)))
            .filter(|(long, _)| !matches!(long.as_str(), "help" | "version" | "until-idle"))
            .map(|(long, a)| (long, a.get_env().map(|e| e.to_string_lossy().into_owned())))
            .collect()
    }

    // Proves inactivity spans read as milliseconds of log time in every unit, 0 alone means never, and anything else is refused.
    #[test]
    fn log_spans_read_in_every_unit() {
        let day = 86_400_000;
        for (s, ms) in [("30d", 30 * day), ("12h", day / 2), ("90m", 5_400_000)] {
            assert_eq!(super::log_span(s), Ok(ms), "{s}");
        }
        for (s, ms) in [("45s", 45_000), ("500ms", 500), ("0", 0), ("0d", 0)] {
            assert_eq!(super::log_span(s), Ok(ms), "{s}");
        }
        for s in ["30", "d", "-1d", "1.5h", "3w", "", "300000000000d"] {
            assert!(super::log_span(s).is_err(), "{s:?} accepted");
        }
    }

    // Proves every setting of `run` can come from a FEEDLOG_* environment variable, and that docs/cli.md names each.
    #[test]
    fn every_run_setting_has_an_environment_variable_in_the_cli_docs() {
        let readme = include_str!("../../docs/cli.md");
        let settings = run_settings();
        assert!(settings.len() > 15, "{settings:?}");
        for (long, env) in settings {
            let env = env.unwrap_or_else(|| panic!("--{long} has no environment variable"));
            assert!(env.starts_with("FEEDLOG_"), "--{long}: {env}");
            assert!(
                readme.contains(&format!("`{env}`")),
                "docs/cli.md does not name {env} (--{long})"
            );
        }
    }
}
