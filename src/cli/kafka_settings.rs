//! The Kafka-mode settings every command shares: global flags, `run`'s
//! Kafka flags, environment variables and the config file, merged.

use anyhow::{Context, Result};
use feedlog::core::Generation;
use feedlog::log::kafka::KafkaConfig;
use feedlog::task::embedded::ProcessorConfig;
use feedlog::task::kafka::ClusterConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Kafka settings that apply to every command (global flags).
#[derive(clap::Args, Clone, Default)]
pub struct KafkaArgs {
    /// Kafka brokers, `host:port[,host:port]`: run in Kafka mode.
    #[arg(
        long,
        global = true,
        help_heading = "Kafka mode",
        env = "FEEDLOG_KAFKA",
        value_name = "BROKERS"
    )]
    pub kafka: Option<String>,
    /// The processors' consumer group [default: feedlog].
    #[arg(
        long,
        global = true,
        help_heading = "Kafka mode",
        env = "FEEDLOG_GROUP"
    )]
    pub group: Option<String>,
    /// Prefix of every topic name (several deployments on one cluster).
    #[arg(
        long,
        global = true,
        help_heading = "Kafka mode",
        env = "FEEDLOG_TOPIC_PREFIX"
    )]
    pub topic_prefix: Option<String>,
    /// The input topic's full name, when upstream apps already write to
    /// one [default: the prefix and `events`].
    #[arg(
        long,
        global = true,
        help_heading = "Kafka mode",
        env = "FEEDLOG_EVENTS_TOPIC",
        value_name = "NAME"
    )]
    pub events_topic: Option<String>,
    /// The state generation to act on: 0 is the deployment itself; N ≥ 1
    /// is one rebuilt beside it, with its own group and internal topics
    /// over the same `events` (docs/kafka.md, "Generations") [default: 0].
    #[arg(
        long,
        global = true,
        help_heading = "Kafka mode",
        env = "FEEDLOG_GENERATION",
        value_name = "N"
    )]
    pub generation: Option<Generation>,
    /// An extra librdkafka setting for every client, `KEY=VALUE`
    /// (`security.protocol=SSL`, ...); repeatable.
    #[arg(
        long = "kafka-option",
        global = true,
        help_heading = "Kafka mode",
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
#[command(next_help_heading = "Kafka mode")]
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
    /// Warm standbys the group keeps of each partition: this processor
    /// keeps copies of partitions it does not own (they follow the group's
    /// committed positions), so that taking one over replays only the tail.
    /// Give every processor of the group the same value [default: 0].
    #[arg(long, env = "FEEDLOG_STANDBYS", value_name = "N")]
    pub standbys: Option<usize>,
}

impl KafkaArgs {
    /// The flags set here that only Kafka mode reads (`--kafka` and
    /// `--generation` aside: the first chooses the mode, the second is
    /// refused apart).
    pub fn kafka_only(&self) -> Vec<&'static str> {
        [
            ("--group", self.group.is_some()),
            ("--topic-prefix", self.topic_prefix.is_some()),
            ("--events-topic", self.events_topic.is_some()),
            ("--kafka-option", !self.kafka_options.is_empty()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }
}

impl KafkaRunArgs {
    /// The flags set here (all of them only Kafka mode reads).
    pub fn set(&self) -> Vec<&'static str> {
        [
            ("--instance-id", self.instance_id.is_some()),
            ("--cooperative", self.cooperative),
            ("--member", self.member.is_some()),
            ("--advertise", self.advertise.is_some()),
            ("--session-timeout-ms", self.session_timeout_ms.is_some()),
            ("--checkpoints", self.checkpoints.is_some()),
            ("--checkpoint-every", self.checkpoint_every.is_some()),
            ("--standbys", self.standbys.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }
}

/// The config file's Kafka settings, by their flag names (with `_`). Its
/// other keys are every other flag's ([`super::config`], which also refuses
/// unknown keys).
#[derive(Deserialize, Default)]
pub(super) struct FileConfig {
    kafka: Option<String>,
    group: Option<String>,
    topic_prefix: Option<String>,
    events_topic: Option<String>,
    generation: Option<Generation>,
    kafka_options: Option<BTreeMap<String, String>>,
    instance_id: Option<String>,
    cooperative: Option<bool>,
    member: Option<String>,
    pub(super) advertise: Option<String>,
    session_timeout_ms: Option<u64>,
    listen: Option<String>,
    checkpoints: Option<PathBuf>,
    checkpoint_every: Option<u64>,
    standbys: Option<usize>,
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
    pub generation: Generation,
    pub(super) file: FileConfig,
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
        let generation = args.generation.or(file.generation).unwrap_or_default();
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
pub(super) fn cluster_config(
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
        crate::cli::usage!(
            "member names may not start with `~` (the deployment's own records use such keys)"
        );
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
        crate::cli::usage!("--checkpoint-every needs a checkpoint directory: give --checkpoints DIR (or FEEDLOG_CHECKPOINTS, or `checkpoints` in --config)");
    }
    if cfg.checkpoint_every == Some(Duration::ZERO) {
        crate::cli::usage!("--checkpoint-every must be at least 1 second");
    }
    cfg.standbys = args.standbys.or(f.standbys).unwrap_or(0);
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
