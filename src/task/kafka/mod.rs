//! The Kafka runner: one processor of a consumer group.
//!
//! Ownership is group membership ([`GroupMember`]): the `events` partitions
//! the group assigns to this process are the partitions it owns. For each,
//! a task reads `events[p]` and `effects[p]` through its own assign-mode
//! consumers ([`KafkaLog`]) from the positions it stored with its state —
//! so `events` and `effects` stay co-partitioned whatever the assignor
//! (range, or cooperative-sticky).
//!
//! Handover, done by the control loop ([`Cluster::run`]) as the group
//! consumer reports a rebalance, before it completes it:
//! - **revoke**: the task finishes its step (state committed, outbox
//!   acknowledged), stops, and its positions are committed to the group —
//!   synchronously — before the partition is given up; with a checkpoint
//!   directory, a checkpoint of its store is written for the next owner.
//! - **assign**: the local store is opened (created when missing) or seeded
//!   from a checkpoint ([`crate::task::handover`]). The group's committed
//!   positions say where every previous owner's outputs are acknowledged;
//!   the task replays from its own positions and emits nothing below them
//!   (see [`PartitionTask::open_after`]). Until it has caught up, the
//!   partition is `rebuilding` and readers get 503.
//!
//! Group offsets are committed only for positions whose state is durable
//! and whose outputs are acknowledged: they are the handover watermark and
//! serve lag monitoring. The processor's own resume point is always its
//! RocksDB, never the group.
//!
//! Each processor publishes what it owns (and where its read API is) to the
//! compacted `members` topic; readers and `feedlog status` replay it.

mod control;
mod ownership;
mod standby;
mod tasks;

pub use ownership::{CutState, Ownership};
pub use standby::placement;

use super::{Shutdown, TaskError};
use crate::core::Disposition;
use crate::core::Partition;
use crate::log::kafka::{KafkaConfig, KafkaLog};
use crate::log::{Log, LogError, Topic};
use crate::state::checkpoint::{CheckpointDir, Identity};
use crate::state::datadir::{DataDir, DataDirError};
use crate::state::{BlockCache, StoreError};
use crate::task::embedded::ProcessorConfig;
use crate::task::progress::Progress;
use ownership::Lease;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Errors of Kafka mode.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A log (Kafka) call failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A state store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The data directory could not be opened or created.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// A partition's task could not start or failed.
    #[error("partition {partition}: {source}")]
    Task {
        /// The partition.
        partition: Partition,
        /// What failed.
        #[source]
        source: TaskError,
    },
    /// A partition could not start.
    #[error("partition {partition}: {source}")]
    Start {
        /// The partition.
        partition: Partition,
        /// Why.
        #[source]
        source: Box<ClusterError>,
    },
    /// The data directory holds state for another partition count than the
    /// topics have.
    #[error("{dir} holds state for {state} partitions, but topic {topic} has {partitions}")]
    PartitionCount {
        /// The data directory.
        dir: PathBuf,
        /// The partition count of its state.
        state: u32,
        /// The `events` topic.
        topic: String,
        /// Its partition count.
        partitions: u32,
    },
    /// The log no longer holds the position a store needs (retention
    /// deleted it).
    #[error(
        "{topic}[{partition}] starts at offset {start} (retention), but this store \
         needs offset {needed}: restore it from a checkpoint, or remove {state_dir} to rebuild from the whole log"
    )]
    Retention {
        /// The partition.
        partition: Partition,
        /// The topic's Kafka name.
        topic: String,
        /// The topic partition's first offset.
        start: u64,
        /// The offset the store needs.
        needed: u64,
        /// The store's directory.
        state_dir: PathBuf,
    },
    /// A file-system call failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The request cannot be carried out as asked; nothing was changed.
    #[error("{0}")]
    Refused(String),
    /// librdkafka reported a fatal error: this process is out of the group
    /// for good (e.g. another process took its static membership).
    #[error("Kafka fatal error, this processor gave up every partition without committing: {0}")]
    Fatal(String),
}

impl ClusterError {
    /// Skip, retry or stop: what a Kafka-mode runner does with it.
    pub fn disposition(&self) -> Disposition {
        match self {
            ClusterError::Log(e) => e.disposition(),
            ClusterError::Store(e) => e.disposition(),
            ClusterError::DataDir(e) => e.disposition(),
            ClusterError::Task { source, .. } => source.disposition(),
            ClusterError::Start { source, .. } => source.disposition(),
            ClusterError::Io { source, .. } => Disposition::of_io(source.kind()),
            ClusterError::PartitionCount { .. }
            | ClusterError::Retention { .. }
            | ClusterError::Refused(_)
            | ClusterError::Fatal(_) => Disposition::Stop,
        }
    }
}

/// Settings of one Kafka-mode processor.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Brokers, group, topics.
    pub kafka: KafkaConfig,
    /// This processor's name in the `members` topic and in logs.
    pub member: String,
    /// `group.instance.id`: static membership, so a restarted process gets
    /// its partitions back without a rebalance (within the session timeout).
    pub instance_id: Option<String>,
    /// Cooperative (incremental) rebalancing instead of eager.
    pub cooperative: bool,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// The read API's address others can reach, announced in `members`.
    pub api: Option<String>,
    /// Processing settings (inbox cap, batch limits, sync, cache).
    pub processor: ProcessorConfig,
    /// How often positions are committed to the group while they move
    /// (they are also committed as soon as they stop moving).
    pub commit_interval: Duration,
    /// Fault injection for tests: every this many steps, a task re-reads the
    /// last few records of both inputs (duplicate delivery). 0: never.
    pub redeliver_every: u32,
    /// A checkpoint directory shared by the group's processors (see
    /// [`crate::state::checkpoint`]): partitions given up are checkpointed
    /// there, and partitions taken over are seeded from there.
    pub checkpoints: Option<std::path::PathBuf>,
    /// With `checkpoints`, also checkpoint every owned, caught-up partition
    /// this often (so a crashed owner's successor replays only the tail).
    pub checkpoint_every: Option<Duration>,
    /// Fault injection for tests: the process stops itself (SIGSTOP) right
    /// after this many commits, before shipping (see
    /// [`crate::task::faults::StopAfterCommit`]).
    pub stop_after_commit: Option<u64>,
    /// Warm standbys kept of each partition across the group (see
    /// [`standby`]); 0: none.
    pub standbys: usize,
}

impl ClusterConfig {
    /// Defaults for `kafka`: member name from host and pid, eager
    /// rebalancing, 10 s session timeout, commits every 500 ms.
    pub fn new(kafka: KafkaConfig) -> ClusterConfig {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into());
        ClusterConfig {
            kafka,
            member: format!("{host}-{}", std::process::id()),
            instance_id: None,
            cooperative: false,
            session_timeout: Duration::from_secs(10),
            api: None,
            processor: ProcessorConfig::default(),
            commit_interval: Duration::from_millis(500),
            redeliver_every: 0,
            checkpoints: None,
            checkpoint_every: None,
            stop_after_commit: None,
            standbys: 0,
        }
    }
}

/// One processor of the group.
pub struct Cluster {
    dir: DataDir,
    cfg: ClusterConfig,
    log: Arc<KafkaLog>,
    cache: BlockCache,
    shared: Arc<Ownership>,
    progress: Arc<Progress>,
    /// Requested to make every wait for Kafka give up (shutdown).
    stopping: Shutdown,
    checkpoints: Option<Arc<CheckpointDir>>,
    /// Ownership by every task of the process (see
    /// [`ClusterConfig::stop_after_commit`]).
    stop_after_commit: Option<crate::task::faults::StopAfterCommit>,
    /// This processor's warm standbys (also read from while their owner
    /// cannot be reached).
    standbys: Arc<standby::Standbys>,
}

/// Whether the whole group is idle (every partition consumed to its end
/// and served), for `run --until-idle`.
pub type IdleCheck<'a> = &'a dyn Fn() -> Result<bool, LogError>;

impl Cluster {
    /// Connects to Kafka, checks the topics, and opens (creating when new)
    /// the data directory that holds this processor's partition stores.
    pub fn open(data: &std::path::Path, cfg: ClusterConfig) -> Result<Cluster, ClusterError> {
        let stopping = Shutdown::new();
        let log = KafkaLog::connect(cfg.kafka.clone(), stopping.flag())?;
        let partitions = log.partitions(Topic::Events);
        let mut dir = if data.join("feedlog.json").exists() {
            let d = DataDir::open(data)?;
            if d.partitions() != partitions {
                return Err(ClusterError::PartitionCount {
                    dir: data.to_path_buf(),
                    state: d.partitions(),
                    topic: log.name(Topic::Events).to_string(),
                    partitions,
                });
            }
            d
        } else {
            // A new directory takes the topic's partition count.
            DataDir::create_or_open(data, Some(partitions))?
        };
        // The threshold a partition state starts with: this directory's
        // record (every processor of a group should be configured alike).
        dir.starting_threshold(cfg.processor.pull_threshold)?;
        dir.settle_inbox_cap(cfg.processor.inbox_cap)?;
        let standbys = Arc::new(standby::Standbys::default());
        let shared = Arc::new(Ownership {
            owned: Mutex::default(),
            to_start: Mutex::default(),
            changes: AtomicU64::new(0),
            count: partitions,
            // Three quarters of the session: the coordinator expels a
            // member a session after its last heartbeat, and librdkafka
            // heartbeats every quarter of it.
            lease: Lease::new(cfg.session_timeout * 3 / 4),
            standbys: standbys.clone(),
            standby_reads: Mutex::default(),
        });
        let checkpoints = cfg.checkpoints.as_ref().map(|root| {
            Arc::new(CheckpointDir::new(
                root,
                Identity {
                    events_topic: log.name(Topic::Events).to_string(),
                    effects_topic: Some(log.name(Topic::Effects).to_string()),
                    partitions,
                    inbox_cap: cfg.processor.inbox_cap,
                },
            ))
        });
        Ok(Cluster {
            stop_after_commit: cfg
                .stop_after_commit
                .map(crate::task::faults::StopAfterCommit::new),
            dir,
            cache: BlockCache::new(cfg.processor.cache_bytes),
            checkpoints,
            cfg,
            log: Arc::new(log),
            shared,
            progress: Arc::default(),
            stopping,
            standbys,
        })
    }

    /// What readers need: owned partitions and their state.
    pub fn shared(&self) -> &Arc<Ownership> {
        &self.shared
    }

    /// The group's checkpoint directory, when it has one (`--checkpoints`).
    pub fn checkpoint_dir(&self) -> Option<&Arc<CheckpointDir>> {
        self.checkpoints.as_ref()
    }

    /// Figures since the processor was opened.
    pub fn progress(&self) -> &Arc<Progress> {
        &self.progress
    }

    /// The Kafka log.
    pub fn log(&self) -> &Arc<KafkaLog> {
        &self.log
    }

    /// Partition count.
    pub fn partitions(&self) -> u32 {
        self.dir.partitions()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stopping.request();
        self.shared.stop_all();
    }
}
