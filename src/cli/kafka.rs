//! The Kafka-mode commands: `run --kafka`, `topics apply`, `status`,
//! `reset`; their settings are in [`super::kafka_settings`].

use super::api_args::ApiArgs;
use super::shell::{per_sec, shutdown_on_signal, BoundApi, RunMode};
use crate::cli::say::say;
use anyhow::{bail, Context, Result};
use feedlog::core::Generation;
use feedlog::log::kafka::{apply_topics, KafkaConfig};
use feedlog::log::Topic;
use feedlog::ops::serve::{generation_api, GenerationFront};
use feedlog::ops::{reset, status};
use feedlog::task::embedded::ProcessorConfig;
use feedlog::task::kafka::{Cluster, IdleCheck};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::kafka_settings::cluster_config;
pub use super::kafka_settings::{KafkaArgs, KafkaRunArgs, Settings};

/// `feedlog config check FILE`: reads FILE as `--config FILE` would, with
/// the global Kafka flags and variables on top (`--kafka`, `--group`,
/// `--topic-prefix`, `--events-topic`, `--kafka-option`; `run`'s own flags
/// are not part of this command), and checks what can be checked without
/// a broker: the TOML, every key's name and type, consistent settings, and
/// that librdkafka accepts the client settings (security, codecs). Prints
/// the effective settings (secrets masked); exit 1 on a problem.
pub fn config_check(args: &KafkaArgs, file: &Path) -> Result<i32> {
    // Every key names a flag, and `run` accepts every value.
    let cli = <super::args::Cli as clap::CommandFactory>::command();
    let settings = super::config::settings_of(&cli, file).and_then(|settings| {
        let problems = super::config::value_problems(&settings);
        if !problems.is_empty() {
            bail!("{}", problems.join("\n"));
        }
        for (_, var, value) in &settings {
            if std::env::var_os(var).is_none() {
                std::env::set_var(var, value);
            }
        }
        // A new command: clap reads each variable when it is built.
        let cli = <super::args::Cli as clap::CommandFactory>::command();
        match cli.try_get_matches_from(["feedlog", "run"]) {
            Ok(_) => Ok(settings),
            Err(e) => {
                let e = e.to_string();
                bail!(
                    "{}",
                    e.lines()
                        .next()
                        .unwrap_or_default()
                        .trim_start_matches("error: ")
                )
            }
        }
    });
    let file_settings = match settings {
        Ok(s) => s,
        Err(e) => {
            say!("{}: {e:#}", file.display());
            return Ok(2);
        }
    };
    let mut args = args.clone();
    args.config = Some(file.to_path_buf());
    let checked = Settings::load(&args).and_then(|settings| {
        let cluster = match &settings.kafka {
            Some(_) => Some(cluster_config(
                &settings,
                &KafkaRunArgs::default(),
                ProcessorConfig::default(),
            )?),
            None => None,
        };
        if let Some(k) = &settings.kafka {
            k.check_client_settings()
                .map_err(|e| anyhow::anyhow!("librdkafka refuses the client settings: {e}"))?;
        }
        Ok((settings, cluster))
    });
    let (settings, cluster) = match checked {
        Ok(c) => c,
        Err(e) => {
            say!("{}: {e:#}", file.display());
            return Ok(2);
        }
    };
    println!("{}: ok", file.display());
    print_effective(&settings, cluster.as_ref(), &file_settings);
    Ok(0)
}

/// What `config check` prints of a file that passed: the mode and its
/// settings as they take effect, secrets masked, and each key of the file
/// with the variable that overrides it, if one does.
fn print_effective(
    settings: &Settings,
    cluster: Option<&feedlog::task::kafka::ClusterConfig>,
    file_settings: &[(String, String, String)],
) {
    match (&settings.kafka, cluster) {
        (Some(k), Some(c)) => {
            println!("mode: kafka, brokers {}, group {}", k.brokers, k.group);
            println!(
                "topics: events {}, effects {}, dead-letter {}, members {}",
                k.name(Topic::Events),
                k.name(Topic::Effects),
                k.name(Topic::DeadLetter),
                k.members_topic()
            );
            for (key, value) in &k.client {
                let secret = ["password", "secret", "token", "key", "oauthbearer", "jaas"]
                    .iter()
                    .any(|w| key.to_ascii_lowercase().contains(w));
                println!(
                    "kafka option {key} = {}",
                    if secret { "(set, not shown)" } else { value }
                );
            }
            println!(
                "member {}, session timeout {} ms, cooperative {}, checkpoints {}",
                c.member,
                c.session_timeout.as_millis(),
                c.cooperative,
                c.checkpoints
                    .as_deref()
                    .map_or("none".into(), |d| d.display().to_string())
            );
        }
        _ => println!("mode: embedded (no `kafka` key, flag or variable)"),
    }
    if let Some(listen) = settings.listen(None) {
        println!("listen {listen}");
    }
    for (key, var, value) in file_settings {
        let secret = key.contains("token");
        let value = if secret { "(set, not shown)" } else { value };
        let from = match std::env::var(var) {
            Ok(v) if v != *value && !secret => format!(" (but {var} is {v})"),
            _ => String::new(),
        };
        println!("setting {key} = {value}{from}");
    }
}

/// `feedlog run --kafka`: one processor of the group.
pub fn run(
    data: &Path,
    settings: &Settings,
    args: &KafkaRunArgs,
    processor: ProcessorConfig,
    mode: RunMode,
    listen: Option<String>,
    api: &ApiArgs,
) -> Result<i32> {
    let kafka = settings.require_kafka("run --kafka")?.clone();
    let idle = move || status::status(&kafka).map(|s| s.idle);
    let finish = mode.until_idle.then_some(&idle as _);
    run_watching(
        data,
        settings,
        args,
        processor,
        &mode,
        (listen, api),
        finish,
        &|| {},
    )
}

/// One processor of the group (see [`run`]) that also calls `tick` with
/// each progress line, and stops once `finish` says so twice in a row.
#[allow(clippy::too_many_arguments)]
pub fn run_watching(
    data: &Path,
    settings: &Settings,
    args: &KafkaRunArgs,
    processor: ProcessorConfig,
    mode: &RunMode,
    (listen, api): (Option<String>, &ApiArgs),
    finish: Option<IdleCheck<'_>>,
    tick: &(dyn Fn() + Sync),
) -> Result<i32> {
    let mut cfg = cluster_config(settings, args, processor)?;
    let f = &settings.file;
    // Bind first: the address is announced to the other processors.
    let bound = match settings.listen(listen) {
        Some(addr) => Some(BoundApi::bind(&addr, &api.config())?),
        None => None,
    };
    cfg.api = args
        .advertise
        .clone()
        .or_else(|| f.advertise.clone())
        .or_else(|| bound.as_ref().map(|b| advertised(b.addr)));
    say!(
        "kafka mode: brokers {}, group {}{}, member {}{}{}",
        cfg.kafka.brokers,
        cfg.kafka.group,
        match settings.generation {
            Generation::FIRST => String::new(),
            g => format!(" (generation {g})"),
        },
        cfg.member,
        cfg.api
            .as_deref()
            .map_or(String::new(), |a| format!(", read API announced as {a}")),
        cfg.checkpoints
            .as_deref()
            .map_or(String::new(), |c| format!(
                ", checkpoints in {}",
                c.display()
            ))
    );
    let cfg_kafka = cfg.kafka.clone();
    let cluster = Cluster::open(data, cfg).context("starting the processor")?;
    // A generation retired by `swap --confirm` stops its processors.
    let deployment = settings.deployment.as_ref().unwrap_or(&cfg_kafka);
    let front = GenerationFront::start(deployment, settings.generation)?;
    let retired = || front.live().retired.contains(&settings.generation);
    let done = || -> Result<bool, feedlog::log::LogError> {
        Ok(retired() || finish.map_or(Ok(false), |f| f())?)
    };
    let shutdown = shutdown_on_signal();
    let server = match bound {
        Some(b) => {
            let deployment = settings.deployment.as_ref().unwrap_or(&cfg_kafka);
            let api = generation_api(&cluster, api.config(), deployment, settings.generation)?;
            Some(b.serve(api)?)
        }
        None => None,
    };
    let start = Instant::now();
    let totals = mode.with_progress(
        || {
            let t = cluster.progress().totals();
            let events: u64 = t.events.total();
            let owned = cluster.shared().partitions();
            say!(
                "{:>6.1}s  partitions {:?}  events {events} ({:.0}/s)  deliveries {} ({:.0}/s)  forwarded {}  dead letters {}",
                start.elapsed().as_secs_f64(),
                owned.keys().collect::<Vec<_>>(),
                per_sec(events, start),
                t.delivered,
                per_sec(t.delivered, start),
                t.forwarded,
                t.dead_letters
            );
            tick();
        },
        || cluster.run(&shutdown, Some(&done)),
    )?;
    if let Some(s) = server {
        s.stop();
    }
    if retired() {
        say!(
            "generation {} was retired (`swap --confirm`): this processor stopped",
            settings.generation
        );
    }
    let secs = start.elapsed().as_secs_f64();
    let events: u64 = totals.events.total();
    println!(
        "processed {events} events ({}) and {} effects in {secs:.1}s \
         ({:.0} events/s); {} inbox deliveries ({:.0}/s); {} forwarded; {} replayed after handovers; {} dead letters; \
         {} fenced",
        totals.events_by_kind(), totals.effects,
        events as f64 / secs.max(1e-9), totals.delivered, totals.delivered as f64 / secs.max(1e-9),
        totals.forwarded, totals.replayed, totals.dead_letters, totals.fenced
    );
    Ok(0)
}

/// The URL other processors can use for a bound address: an unspecified
/// host (0.0.0.0) is replaced by this machine's host name.
fn advertised(addr: std::net::SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        let host = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|| "localhost".into());
        format!("http://{host}:{}", addr.port())
    } else {
        format!("http://{addr}")
    }
}

/// `feedlog topics apply`.
pub fn topics_apply(settings: &Settings, partitions: Option<u32>, replication: i32) -> Result<i32> {
    let kafka = settings.require_kafka("topics apply")?;
    let n = partitions.unwrap_or_else(|| kafka.topics.default_partitions());
    let outcomes = apply_topics(kafka, n, replication)?;
    let mut differs = false;
    for o in &outcomes {
        match o.outcome.as_str() {
            "differs" => {
                differs = true;
                println!(
                    "{}: differs from topics/: {}",
                    o.topic,
                    o.problems.join("; ")
                );
            }
            other => println!("{}: {other}", o.topic),
        }
    }
    if differs {
        say!("some topics differ from their specs; feedlog does not alter existing topics: fix them with your Kafka tools");
        return Ok(1);
    }
    Ok(0)
}

/// `feedlog status`.
pub fn status(settings: &Settings) -> Result<i32> {
    let kafka = settings.require_kafka("status")?;
    let s = status::status(kafka)?;
    println!("{}", serde_json::to_string_pretty(&s)?);
    Ok(0)
}

/// `feedlog reset --kafka`: moves the group back (see
/// [`reset::reset_group`]).
pub fn reset(settings: &Settings, to_checkpoint: Option<PathBuf>, dry_run: bool) -> Result<i32> {
    let kafka = settings.require_kafka("reset")?;
    // A generation that never ran, reset to a checkpoint directory: seeded
    // from another generation's cut (the deployment keeps running).
    if let Some(dir) = to_checkpoint
        .as_ref()
        .filter(|_| !settings.generation.is_first())
    {
        if feedlog::ops::seed::never_ran(kafka)? {
            return seed(settings, kafka, dir, dry_run);
        }
    }
    let to = match to_checkpoint {
        Some(c) => reset::GroupResetTo::Checkpoints(c),
        None => reset::GroupResetTo::Start,
    };
    let r = reset::reset_group(kafka, &to, !dry_run)?;
    for (p, (at, from)) in r.positions.iter().enumerate() {
        match from {
            Some(c) => println!(
                "partition {p}: events {} effects {} (checkpoint of epoch {}, inbox cap {})",
                at.events,
                at.effects,
                c.epoch.map_or("unknown".into(), |e| e.to_string()),
                c.identity.inbox_cap
            ),
            None => println!("partition {p}: events {} effects {}", at.events, at.effects),
        }
    }
    if !r.executed {
        println!(
            "dry run: nothing was committed. `feedlog reset` without --dry-run would commit these positions for \
             group {}{}",
            kafka.group,
            match r.members.is_empty() {
                true => ".".to_string(),
                false => format!(
                    ", but would refuse now: the group has {} member(s) ({}); stop every processor of the group first.",
                    r.members.len(),
                    r.members.join(", ")
                ),
            }
        );
        return Ok(0);
    }
    println!(
        "reset group {} under epoch {}: each processor drops its store of a partition it takes that is ahead of these \
         positions and rebuilds it{}; outputs above them are emitted again, and receivers skip them by version",
        kafka.group,
        r.epoch,
        match &to {
            reset::GroupResetTo::Start => " from the log".to_string(),
            reset::GroupResetTo::Checkpoints(c) => format!(
                " from these checkpoints when run with --checkpoints {} and the same inbox cap (else from the log)",
                c.display()
            ),
        }
    );
    Ok(0)
}

/// `--generation N reset --to-checkpoint DIR` of a generation that never
/// ran: seeds it from the newest consistent cut in DIR of another
/// generation (docs/kafka.md, "Generations").
fn seed(settings: &Settings, kafka: &KafkaConfig, dir: &Path, dry_run: bool) -> Result<i32> {
    let r = feedlog::ops::seed::seed_generation(kafka, dir, !dry_run)?;
    let cut = r.positions.first().and_then(|(_, c)| c.as_ref()?.cut);
    for (p, (at, from)) in r.positions.iter().enumerate() {
        let from = from.as_ref().map_or(String::new(), |c| {
            format!(
                " (from the checkpoint at events {}, effects {})",
                c.positions.events, c.positions.effects
            )
        });
        println!(
            "partition {p}: events {} effects {}{from}",
            at.events, at.effects
        );
    }
    let g = settings.generation;
    if !r.executed {
        println!(
            "dry run: nothing was written. Without --dry-run, generation {g} is seeded from cut {} in {}",
            cut.unwrap_or_default(),
            dir.display()
        );
        return Ok(0);
    }
    println!(
        "seeded generation {g} (group {}, epoch {}) from cut {} in {}: run its processors with \
         `feedlog --generation {g} run --checkpoints {}` and the copies' inbox cap; they replay \
         `events` from the cut (a processor that cannot use the copies rebuilds from the start \
         of the log), then verify and swap as for a rebuild",
        kafka.group,
        r.epoch,
        cut.unwrap_or_default(),
        dir.display(),
        dir.display()
    );
    Ok(0)
}

/// Refuses Kafka flags on commands that only use the embedded log.
pub fn embedded_only(settings: &Settings, what: &str) -> Result<()> {
    if settings.kafka.is_some() {
        let instead = match what {
            "produce" | "import" | "demo" => {
                "in Kafka mode produce with any Kafka client (see docs/kafka.md)"
            }
            _ => "in Kafka mode it is not available yet (see the README's Status)",
        };
        bail!("{what} works on the embedded log only; {instead}");
    }
    Ok(())
}
