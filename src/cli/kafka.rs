//! The Kafka-mode commands: `run --kafka`, `topics apply`, `status`, and
//! the settings they share (flags, environment variables, a config file).

use super::api_args::ApiArgs;
use super::shell::{per_sec, shutdown_on_signal, BoundApi, RunMode};
use crate::cli::say::say;
use anyhow::{bail, Context, Result};
use feedlog::log::kafka::{apply_topics, KafkaConfig};
use feedlog::log::Topic;
use feedlog::ops::serve::{generation_api, GenerationFront};
use feedlog::ops::{reset, status};
use feedlog::task::embedded::ProcessorConfig;
use feedlog::task::kafka::{Cluster, ClusterConfig, IdleCheck};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Kafka settings that apply to every command (global flags).
#[derive(clap::Args, Clone, Default)]
pub struct KafkaArgs {
    /// Kafka brokers, `host:port[,host:port]`: run in Kafka mode.
    #[arg(long, global = true, env = "FEEDLOG_KAFKA", value_name = "BROKERS")]
    pub kafka: Option<String>,
    /// The processors' consumer group [default: feedlog].
    #[arg(long, global = true, env = "FEEDLOG_GROUP")]
    pub group: Option<String>,
    /// Prefix of every topic name (several deployments on one cluster).
    #[arg(long, global = true, env = "FEEDLOG_TOPIC_PREFIX")]
    pub topic_prefix: Option<String>,
    /// The input topic's full name, when upstream apps already write to
    /// one [default: the prefix and `events`].
    #[arg(long, global = true, env = "FEEDLOG_EVENTS_TOPIC", value_name = "NAME")]
    pub events_topic: Option<String>,
    /// The state generation to act on: 0 is the deployment itself; N ≥ 1
    /// is one rebuilt beside it, with its own group and internal topics
    /// over the same `events` (docs/kafka.md, "Generations") [default: 0].
    #[arg(long, global = true, env = "FEEDLOG_GENERATION", value_name = "N")]
    pub generation: Option<u32>,
    /// An extra librdkafka setting for every client, `KEY=VALUE`
    /// (`security.protocol=SSL`, ...); repeatable.
    #[arg(
        long = "kafka-option",
        global = true,
        env = "FEEDLOG_KAFKA_OPTIONS",
        value_name = "KEY=VALUE",
        value_delimiter = ';'
    )]
    pub kafka_options: Vec<String>,
    /// A TOML file with any setting, by its flag's long name with `_`
    /// (`inbox_cap = 800`), in either mode; flags and environment variables
    /// take precedence over it.
    #[arg(long, global = true, env = "FEEDLOG_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Flags of `run` that only Kafka mode uses.
#[derive(clap::Args, Clone, Default)]
pub struct KafkaRunArgs {
    /// `group.instance.id`: static membership (a restarted process gets its
    /// partitions back within the session timeout, without a rebalance).
    #[arg(long, env = "FEEDLOG_INSTANCE_ID")]
    pub instance_id: Option<String>,
    /// Cooperative (incremental) rebalancing instead of eager.
    #[arg(long, env = "FEEDLOG_COOPERATIVE")]
    pub cooperative: bool,
    /// This processor's name in `members` and logs [default: the instance
    /// id, else host-pid].
    #[arg(long, env = "FEEDLOG_MEMBER")]
    pub member: Option<String>,
    /// The read API's address as other processors reach it, e.g.
    /// `http://feedlog-1:8080` [default: the --listen address].
    #[arg(long, env = "FEEDLOG_ADVERTISE", value_name = "URL")]
    pub advertise: Option<String>,
    /// Consumer group session timeout, ms [default: 10000].
    #[arg(long, env = "FEEDLOG_SESSION_TIMEOUT_MS")]
    pub session_timeout_ms: Option<u64>,
    /// A checkpoint directory shared by the group's processors (a shared
    /// file system): partitions given up are checkpointed there, and a
    /// processor that takes a partition over seeds its store from there and
    /// replays only the tail of the log.
    #[arg(long, env = "FEEDLOG_CHECKPOINTS", value_name = "DIR")]
    pub checkpoints: Option<PathBuf>,
    /// With --checkpoints, also checkpoint every owned partition this often,
    /// in seconds, so a crashed processor's successor replays only the tail
    /// [default: only when partitions are given up].
    #[arg(long, env = "FEEDLOG_CHECKPOINT_EVERY", value_name = "SECS")]
    pub checkpoint_every: Option<u64>,
}

/// The config file's Kafka settings, by their flag names (with `_`). Its
/// other keys are every other flag's ([`super::config`], which also refuses
/// unknown keys).
#[derive(Deserialize, Default)]
struct FileConfig {
    kafka: Option<String>,
    group: Option<String>,
    topic_prefix: Option<String>,
    events_topic: Option<String>,
    generation: Option<u32>,
    kafka_options: Option<BTreeMap<String, String>>,
    instance_id: Option<String>,
    cooperative: Option<bool>,
    member: Option<String>,
    advertise: Option<String>,
    session_timeout_ms: Option<u64>,
    listen: Option<String>,
    checkpoints: Option<PathBuf>,
    checkpoint_every: Option<u64>,
}

fn read_file(path: &Option<PathBuf>) -> Result<FileConfig> {
    let Some(path) = path else {
        return Ok(FileConfig::default());
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text)
        .with_context(|| format!("{} is not a valid feedlog config", path.display()))
}

/// The merged settings: flag or environment, else the file, else default.
pub struct Settings {
    /// Kafka, if configured anywhere: the chosen generation's settings.
    pub kafka: Option<KafkaConfig>,
    /// The deployment's own settings (generation 0), if Kafka is configured.
    pub deployment: Option<KafkaConfig>,
    /// The generation chosen (`--generation`; 0 by default).
    pub generation: u32,
    file: FileConfig,
}

impl Settings {
    /// Merges the global flags with the config file.
    pub fn load(args: &KafkaArgs) -> Result<Settings> {
        let file = read_file(&args.config)?;
        let brokers = args.kafka.clone().or_else(|| file.kafka.clone());
        let kafka = match brokers {
            None => None,
            Some(b) => {
                let group = args
                    .group
                    .clone()
                    .or_else(|| file.group.clone())
                    .unwrap_or_else(|| "feedlog".into());
                let mut cfg = KafkaConfig::new(&b, &group);
                cfg.topic_prefix = args
                    .topic_prefix
                    .clone()
                    .or_else(|| file.topic_prefix.clone())
                    .unwrap_or_default();
                cfg.events_topic = args
                    .events_topic
                    .clone()
                    .or_else(|| file.events_topic.clone())
                    .filter(|t| !t.is_empty());
                let mut opts: BTreeMap<String, String> =
                    file.kafka_options.clone().unwrap_or_default();
                for kv in &args.kafka_options {
                    let (k, v) = kv
                        .split_once('=')
                        .with_context(|| format!("--kafka-option {kv:?} is not KEY=VALUE"))?;
                    opts.insert(k.to_string(), v.to_string());
                }
                cfg.client = opts.into_iter().collect();
                Some(cfg)
            }
        };
        let generation = args.generation.or(file.generation).unwrap_or(0);
        Ok(Settings {
            kafka: kafka.as_ref().map(|k| k.generation(generation)),
            deployment: kafka,
            generation,
            file,
        })
    }

    /// The Kafka settings, or a clear error naming how to give them.
    pub fn require_kafka(&self, what: &str) -> Result<&KafkaConfig> {
        self.kafka.as_ref().with_context(|| {
            format!("{what} needs Kafka: give --kafka BROKERS (or FEEDLOG_KAFKA, or `kafka` in --config)")
        })
    }

    /// `--listen`, else the file's `listen`.
    pub fn listen(&self, flag: Option<String>) -> Option<String> {
        flag.or_else(|| self.file.listen.clone())
    }
}

/// The processor's settings from the flags, the variables and the file
/// (all but the read API's address); refuses inconsistent ones.
fn cluster_config(
    settings: &Settings,
    args: &KafkaRunArgs,
    processor: ProcessorConfig,
) -> Result<ClusterConfig> {
    let kafka = settings.require_kafka("run --kafka")?.clone();
    let f = &settings.file;
    let mut cfg = ClusterConfig::new(kafka);
    cfg.processor = processor;
    cfg.instance_id = args.instance_id.clone().or_else(|| f.instance_id.clone());
    cfg.cooperative = args.cooperative || f.cooperative.unwrap_or(false);
    if let Some(m) = args.member.clone().or_else(|| f.member.clone()) {
        cfg.member = m;
    } else if let Some(id) = &cfg.instance_id {
        cfg.member = id.clone();
    }
    if cfg.member.starts_with('~') {
        bail!("member names may not start with `~` (the deployment's own records use such keys)");
    }
    if let Some(ms) = args.session_timeout_ms.or(f.session_timeout_ms) {
        cfg.session_timeout = Duration::from_millis(ms);
    }
    cfg.checkpoints = args.checkpoints.clone().or_else(|| f.checkpoints.clone());
    cfg.checkpoint_every = args
        .checkpoint_every
        .or(f.checkpoint_every)
        .map(Duration::from_secs);
    if cfg.checkpoint_every.is_some() && cfg.checkpoints.is_none() {
        bail!("--checkpoint-every needs a checkpoint directory: give --checkpoints DIR (or FEEDLOG_CHECKPOINTS, or `checkpoints` in --config)");
    }
    if cfg.checkpoint_every == Some(Duration::ZERO) {
        bail!("--checkpoint-every must be at least 1 second");
    }
    // A test hook, not a setting: the Kafka process tests pause a processor
    // between a commit and its shipping this way.
    if let Ok(n) = std::env::var("FEEDLOG_TEST_STOP_AFTER_COMMIT") {
        let n = n
            .parse()
            .with_context(|| format!("FEEDLOG_TEST_STOP_AFTER_COMMIT={n:?} is not a number"))?;
        cfg.stop_after_commit = Some(n);
    }
    Ok(cfg)
}

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
            return Ok(1);
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
            return Ok(1);
        }
    };
    println!("{}: ok", file.display());
    match (&settings.kafka, &cluster) {
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
    for (key, var, value) in &file_settings {
        let secret = key.contains("token");
        let value = if secret { "(set, not shown)" } else { value };
        let from = match std::env::var(var) {
            Ok(v) if v != *value && !secret => format!(" (but {var} is {v})"),
            _ => String::new(),
        };
        println!("setting {key} = {value}{from}");
    }
    Ok(0)
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
            0 => String::new(),
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
    let server = match bound {
        Some(b) => {
            let deployment = settings.deployment.as_ref().unwrap_or(&cfg_kafka);
            let api = generation_api(&cluster, api.config(), deployment, settings.generation)?;
            Some(b.serve(api)?)
        }
        None => None,
    };
    let shutdown = shutdown_on_signal();
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
