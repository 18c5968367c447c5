//! `feedlog-bench`: end-to-end figures with a raw baseline measured in the
//! same run (raw RocksDB puts and seeks of the same keys, raw log reads,
//! the Redis design on the same events), so each result is a ratio that
//! survives a noisy machine. The grammar is in [`args`], one module per
//! bench, and what they share in [`common`].

mod args;
mod cold;
mod common;
mod explain;
mod failover;
mod fanout;
mod filters;
mod http;
mod kafka;
mod kafka_swap;
mod likes;
mod markers;
mod mixed;
mod notifications;
mod procs;
mod pulled;
mod rebuild;
mod redis;
mod redis_server;
mod redis_worker;
mod replies;
mod resp;
mod rewind;
mod say;

use anyhow::{bail, Context, Result};
use args::{BenchKind, Cli};
use clap::Parser;
use feedlog::log::kafka::KafkaConfig;
use std::collections::BTreeMap;
use std::io::IsTerminal;

/// The allocator of the `feedlog` binary (see its `src/main.rs`), so that
/// the processor measured in this process allocates as it does there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = Cli::parse();
    // The library's log lines as `feedlog` writes them (text; `RUST_LOG`).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "feedlog=info".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    // Settings that do not go together: a mistake of the command line, as
    // clap's own (exit 2).
    let kafka = match kafka_config(&cli) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(cli, kafka) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// Runs the bench the command line names; `kafka`: the brokers to use, if
/// any.
fn run(cli: Cli, kafka: Option<KafkaConfig>) -> Result<()> {
    let data = cli.data.as_path();
    let (threads, connections, seconds) = (cli.threads, cli.connections, cli.seconds);
    let partitions = cli.partitions;
    let hybrid = (cli.pull_threshold, span(cli.inactive_after));
    let generated = common::Generated {
        shape: cli.shape,
        users: cli.users,
        follows: cli.follows,
        posts: cli.posts,
        events: cli.events,
    };
    let redis_bench = redis::RedisBench {
        data,
        generated,
        partitions,
        threads,
        connections,
        secs: seconds,
        pull_threshold: cli.pull_threshold,
        inactive_after: span(cli.inactive_after),
        kept: feedlog::state::Kept {
            heads: usize::try_from(cli.heads_mb << 20)?,
            pages: usize::try_from(cli.page_cache_mb << 20)?,
        },
    };
    match cli.kind {
        BenchKind::Fanout => fanout::fanout(&generated, partitions, hybrid),
        BenchKind::Http => http::http(data, threads, connections, seconds),
        BenchKind::Pulled => pulled::pulled(partitions, threads, connections, seconds),
        BenchKind::Filters => filters::filters(partitions, threads, connections, seconds),
        BenchKind::Replies => replies::replies(partitions, threads, connections, seconds),
        BenchKind::Likes => likes::likes(partitions),
        BenchKind::Markers => markers::markers(partitions, threads, connections, seconds),
        BenchKind::Notifications => {
            notifications::notifications(partitions, threads, connections, seconds)
        }
        BenchKind::Explain => explain::explain(partitions, threads, connections, seconds),
        BenchKind::Rebuild => rebuild::rebuild(data),
        BenchKind::Rewind => rewind::rewind(data),
        BenchKind::Redis => redis::redis(&redis_bench),
        BenchKind::Mixed => mixed::mixed(&redis_bench),
        BenchKind::Kafka => kafka::kafka(kafka, &generated, partitions),
        BenchKind::Failover => failover::failover(kafka, data, cli.session_timeout_ms),
        BenchKind::KafkaSwap => {
            let load = kafka_swap::SwapLoad {
                threads,
                connections,
                secs: seconds,
            };
            kafka_swap::kafka_swap(kafka, data, &load)
        }
    }
}

/// The brokers and client settings of `--kafka` and `--kafka-option`, as
/// `feedlog` reads them (the benches name their own groups and topics);
/// `None`: the benches start an in-process mock broker.
fn kafka_config(cli: &Cli) -> Result<Option<KafkaConfig>> {
    let Some(brokers) = &cli.kafka else {
        if !cli.kafka_options.is_empty() {
            bail!("--kafka-option is for Kafka mode (give --kafka BROKERS)");
        }
        return Ok(None);
    };
    let mut cfg = KafkaConfig::new(brokers, "feedlog");
    let mut options = BTreeMap::new();
    for kv in &cli.kafka_options {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--kafka-option {kv:?} is not KEY=VALUE"))?;
        options.insert(k.to_string(), v.to_string());
    }
    cfg.client = options.into_iter().collect();
    Ok(Some(cfg))
}

/// An inactivity span in ms as the core takes it (0: never).
fn span(ms: u64) -> Option<u64> {
    (ms > 0).then_some(ms)
}

#[cfg(test)]
mod tests {
    use super::args::Cli;
    use clap::{CommandFactory, Parser};

    // Proves the grammar is consistent, and that a documented command line parses into the bench and options it names.
    #[test]
    fn the_grammar_parses_a_documented_command() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "feedlog-bench",
            "--data",
            "college",
            "redis",
            "--seconds",
            "5",
        ])
        .unwrap();
        assert!(matches!(cli.kind, super::BenchKind::Redis));
        assert_eq!((cli.data.to_str(), cli.seconds), (Some("college"), 5));
    }
}
