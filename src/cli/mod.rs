//! The `feedlog` command line: its grammar ([`args`]) and one module per
//! command family. Each turns parsed arguments into calls on the library
//! and prints; nothing here decides what an event changes.

pub mod api_args;
pub mod args;
pub mod config;
pub mod demo;
pub mod generation;
pub mod ingest;
pub mod kafka;
mod kafka_settings;
pub mod log;
pub mod query;
pub mod run;
pub mod say;
pub mod shell;
pub mod state;
pub mod values;

use anyhow::Result;
use args::{Cli, Command, ConfigAction, LogAction, TopicsAction};
use feedlog::core::DEFAULT_INBOX_CAP;
use feedlog::state::datadir::DataDir;
use feedlog::task::embedded::ProcessorConfig;
use feedlog::task::BatchLimits;
use std::path::Path;

/// An error in the command line itself (a missing argument, flags that do
/// not go together, a bad setting): exit code 2, as for clap's own
/// (docs/cli.md, "Exit codes").
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// Another process holds what the command needs (a data directory's
/// lock): exit code 75, run the same command again later.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Busy(pub String);

/// Returns a [`Usage`] error: `bail!` for the command line's own mistakes.
macro_rules! usage {
    ($($t:tt)*) => {
        return Err($crate::cli::Usage(format!($($t)*)).into())
    };
}
pub(crate) use usage;

// Long: the table of commands, one short arm each; splitting it would
// scatter the one place that maps the grammar onto the library.
/// Runs one parsed command line; the exit code.
pub fn dispatch(cli: Cli) -> Result<i32> {
    // Before the settings load: a file that does not load is what it reports.
    if let Command::Config {
        action: ConfigAction::Check { file },
    } = &cli.command
    {
        return kafka::config_check(&cli.kafka, file);
    }
    let settings = kafka::Settings::load(&cli.kafka)?;
    if settings.kafka.is_none() && !settings.generation.is_first() {
        usage!(
            "--generation names a generation of a Kafka deployment (give --kafka BROKERS); \
             a data directory's own state generations are made by rebuild and swap"
        );
    }
    if settings.kafka.is_none() {
        // Flags only Kafka mode reads are refused rather than ignored.
        let mut set = cli.kafka.kafka_only();
        if let Command::Run { kafka_run, .. }
        | Command::Rebuild { kafka_run, .. }
        | Command::Backfill { kafka_run, .. } = &cli.command
        {
            set.extend(kafka_run.set());
        }
        if !set.is_empty() {
            usage!(
                "{} {} for Kafka mode (give --kafka BROKERS); the embedded log has no \
                 consumer group, topics or shared checkpoints (from a flag, a FEEDLOG_ \
                 variable or the --config file)",
                set.join(", "),
                if set.len() == 1 { "is" } else { "are" }
            );
        }
    }
    let data = cli.data.as_path();
    let embedded = |what: &str| kafka::embedded_only(&settings, what);
    match cli.command {
        Command::Produce {
            partitions,
            max_record_bytes,
            file,
        } => {
            embedded("produce")?;
            ingest::produce(data, partitions, max_record_bytes, file)
        }
        Command::Import {
            format,
            file,
            partitions,
            start_ms,
        } => {
            embedded("import")?;
            ingest::import(data, format, &file, partitions, start_ms)
        }
        Command::Run {
            until_idle,
            progress,
            quiet,
            inbox_cap,
            pull_threshold,
            inactive_after,
            no_sync,
            writer_nice,
            listen,
            api,
            cache,
            kept,
            kafka_run,
        } => match &settings.kafka {
            Some(_) => {
                // The cap this member's state was built with, when it has one.
                let built = DataDir::open(data).ok().and_then(|d| d.inbox_cap());
                let cfg = ProcessorConfig {
                    inbox_cap: inbox_cap.or(built).unwrap_or(DEFAULT_INBOX_CAP),
                    pull_threshold: Some(pull_threshold),
                    inactive_after: span(inactive_after),
                    sync: !no_sync,
                    writer_nice,
                    cache_bytes: cache.bytes(),
                    kept: kept.kept(),
                    ..ProcessorConfig::default()
                };
                let mode = shell::RunMode::new(until_idle, progress, quiet);
                kafka::run(data, &settings, &kafka_run, cfg, mode, listen, &api)
            }
            None => {
                let listen = settings.listen(listen);
                let mode = shell::RunMode::new(until_idle, progress, quiet);
                let cfg = ProcessorConfig {
                    pull_threshold: Some(pull_threshold),
                    inactive_after: span(inactive_after),
                    sync: !no_sync,
                    writer_nice,
                    cache_bytes: cache.bytes(),
                    kept: kept.kept(),
                    ..ProcessorConfig::default()
                };
                run::run_embedded(data, mode, inbox_cap, cfg, listen, &api)
            }
        },
        Command::Serve { listen, api, cache } => run::serve(data, &listen, &api, &cache),
        Command::Query {
            view,
            user,
            post,
            read,
            history_retention,
        } => {
            let mut pairs = read.pairs();
            match (view.as_str(), &post[..]) {
                ("why", [author, post_id]) => pairs.extend([
                    ("author".to_string(), author.clone()),
                    ("post_id".to_string(), post_id.clone()),
                ]),
                ("why", [_]) => usage!("query why needs USER AUTHOR POST_ID"),
                ("post" | "likes" | "replies", [post_id]) => {
                    pairs.push(("post_id".to_string(), post_id.clone()))
                }
                ("post" | "likes" | "replies", [_, _]) => {
                    usage!("query {view} takes AUTHOR POST_ID")
                }
                (_, []) => {}
                _ => usage!(
                    "query {view} takes one USER (AUTHOR and POST_ID belong to `query why`, POST_ID to `query post`, `query likes` and `query replies`)"
                ),
            }
            query::query(data, (&view, user.as_deref()), pairs, history_retention)
        }
        Command::Status => kafka::status(&settings),
        Command::Config {
            action: ConfigAction::Check { file },
        } => kafka::config_check(&cli.kafka, &file),
        Command::Topics {
            action:
                TopicsAction::Apply {
                    partitions,
                    replication,
                },
        } => kafka::topics_apply(&settings, partitions, replication),
        Command::Rebuild {
            into,
            from_checkpoint,
            inbox_cap,
            inactive_after,
            no_sync,
            progress,
            until_caught_up,
            listen,
            api,
            kafka_run,
        } => match (&settings.kafka, into) {
            (Some(_), None) if from_checkpoint.is_none() => {
                let cfg = ProcessorConfig {
                    inbox_cap: inbox_cap.unwrap_or(DEFAULT_INBOX_CAP),
                    inactive_after: span(inactive_after),
                    sync: !no_sync,
                    ..ProcessorConfig::default()
                };
                let watch = generation::Rebuilding {
                    progress,
                    until_caught_up,
                    swap: None,
                };
                generation::rebuild(data, &settings, &kafka_run, cfg, (listen, &api), watch)
            }
            (Some(_), _) => usage!(
                "in Kafka mode a rebuild goes into a new generation, with its state in --data: \
                 --into and --from-checkpoint are for the embedded log"
            ),
            (None, Some(into)) => {
                if until_caught_up || listen.is_some() {
                    usage!("--until-caught-up and --listen are for a rebuild in Kafka mode (give --kafka BROKERS)");
                }
                let cfg = replay_config(data, inbox_cap, inactive_after, no_sync)?;
                state::rebuild(data, &into, from_checkpoint.as_deref(), cfg, progress)
            }
            (None, None) => {
                usage!("rebuild needs --into NEWDIR (or Kafka mode: --kafka BROKERS --generation N)")
            }
        },
        Command::Checkpoint { into, cut } => match (&settings.kafka, into) {
            (Some(_), None) => generation::checkpoint(&settings, &cut),
            (Some(_), Some(_)) => usage!(
                "in Kafka mode each processor writes its partitions' checkpoints into the group's \
                 --checkpoints directory: give no --into"
            ),
            (None, Some(into)) => state::checkpoint(data, &into),
            (None, None) => usage!("checkpoint needs --into C"),
        },
        Command::Swap {
            newdir,
            rollback,
            confirm,
            timeout,
        } => match (&settings.kafka, newdir) {
            (Some(_), None) => {
                let wait = std::time::Duration::from_secs(timeout);
                generation::swap(&settings, rollback, confirm, wait)
            }
            (Some(_), Some(_)) => usage!(
                "in Kafka mode swap moves readers to a generation (--generation N), not to a directory"
            ),
            (None, Some(newdir)) if !rollback && !confirm => state::swap_to(data, &newdir),
            (None, _) => usage!("swap needs NEWDIR (--rollback and --confirm are for Kafka mode)"),
        },
        Command::Backfill {
            view,
            inbox_cap,
            inactive_after,
            no_sync,
            progress,
            listen,
            api,
            kafka_run,
            timeout,
        } => {
            if settings.kafka.is_some() {
                let Some(inbox_cap) = inbox_cap else {
                    usage!(
                        "in Kafka mode a backfill builds a new generation of every view: give its \
                         --inbox-cap N (the live processors' --inbox-cap to keep theirs, {DEFAULT_INBOX_CAP} \
                         unless they set one)"
                    );
                };
                let cfg = ProcessorConfig {
                    inbox_cap,
                    inactive_after: span(inactive_after),
                    sync: !no_sync,
                    ..ProcessorConfig::default()
                };
                let timeout = std::time::Duration::from_secs(timeout);
                let api = (listen, &api);
                return generation::backfill(data, &settings, &kafka_run, cfg, api, progress, timeout);
            }
            if listen.is_some() {
                usage!("--listen is for a backfill in Kafka mode (give --kafka BROKERS)");
            }
            let cfg = replay_config(data, inbox_cap, inactive_after, no_sync)?;
            state::backfill(data, view, cfg)
        }
        Command::Reset {
            to_start: _,
            regenerate_effects,
            to_checkpoint,
            dry_run,
        } => match settings.kafka {
            Some(_) => kafka::reset(&settings, to_checkpoint, dry_run),
            None => state::reset(data, to_checkpoint, regenerate_effects, dry_run),
        },
        Command::States => state::states(data),
        Command::DropState { name } => state::drop_state(data, &name),
        Command::Verify { a, b, against, cut } => match (&settings.kafka, a, b) {
            (Some(_), None, None) => generation::verify(&settings, against, &cut),
            (Some(_), _, _) => usage!(
                "in Kafka mode verify compares two generations (--generation N --against G), not data directories"
            ),
            (None, Some(a), Some(b)) => state::verify(&a, &b),
            (None, _, _) => usage!("verify needs two data directories: feedlog verify DIR_A DIR_B"),
        },
        Command::Log { action } => {
            embedded("log")?;
            match action {
                LogAction::Check { json } => log::check(data, json),
                LogAction::Repair {
                    topic,
                    partition,
                    truncate_at,
                    force,
                } => log::repair(data, topic, partition, truncate_at, force),
                LogAction::Dump => log::dump(data),
                LogAction::Show { partition, offset } => log::show(data, partition, offset),
            }
        }
        Command::DeadLetters { follow, json, from } => {
            log::dead_letters_of(data, settings.kafka.as_ref(), from, follow, json)
        }
        Command::Demo {
            demo,
            listen,
            exit,
            api,
        } => {
            embedded("demo")?;
            demo::run(data, &demo, &listen, exit, &api)
        }
    }
}

/// An inactivity span in ms as the core takes it (0: never).
fn span(ms: u64) -> Option<u64> {
    (ms > 0).then_some(ms)
}

/// The processing settings of a rebuild or backfill: the inbox cap asked
/// for, else the one `data`'s state was built with, else the default; the
/// directory's starting pull threshold (a replay asks for none: it decides
/// under those the log has in force); the inactivity span asked for.
fn replay_config(
    data: &Path,
    inbox_cap: Option<u64>,
    inactive_after: u64,
    no_sync: bool,
) -> Result<ProcessorConfig> {
    let dir = DataDir::open(data)?;
    Ok(ProcessorConfig {
        inbox_cap: dir.inbox_cap_or_built(inbox_cap),
        pull_threshold: dir.pull_threshold(),
        inactive_after: span(inactive_after),
        sync: !no_sync,
        limits: BatchLimits::replay(),
        ..ProcessorConfig::default()
    })
}
