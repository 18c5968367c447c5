//! Kafka mode: one processor of a consumer group.
//!
//! Ownership is group membership. The group consumer subscribes to
//! `events` only and never reads it (its partitions are paused): the
//! `events` partitions the group assigns to this process are the partitions
//! it owns. For each, a task reads `events[p]` and `effects[p]` through its
//! own assign-mode consumers ([`KafkaLog::source`]) from the positions it
//! stored with its state — so `events` and `effects` stay co-partitioned
//! whatever the assignor (range, or cooperative-sticky).
//!
//! Handover:
//! - **revoke** (inside the group consumer's poll): the task finishes its
//!   step (state committed, outbox acknowledged), stops, and its positions
//!   are committed to the group — synchronously — before the partition is
//!   given up. The store is closed.
//! - **assign**: the local store is opened (created when missing). The
//!   group's committed positions say where every previous owner's outputs
//!   are acknowledged; the task replays from its own positions (zero for a
//!   new store: a rebuild from the log) and emits nothing below them (see
//!   [`PartitionTask::open_after`]). Until it has caught up, the partition
//!   is `rebuilding` and readers get 503.
//!
//! Group offsets are committed only for positions whose state is durable
//! and whose outputs are acknowledged: they are the handover watermark and
//! serve lag monitoring. The processor's own resume point is always its
//! RocksDB, never the group.
//!
//! Each processor publishes what it owns (and where its read API is) to the
//! compacted `members` topic; readers and `feedlog status` replay it.

use crate::datadir::DataDir;
use crate::handover::{CheckpointDir, GroupPosition, Identity};
use crate::log::kafka::{topic_partitions, KafkaConfig, KafkaLog, REQUEST_TIMEOUT};
use crate::log::{Log, LogError, Topic};
use crate::processor::{ProcessorConfig, Progress};
use crate::state::{meta, Kv, Store, StoreError, StoreOptions};
use crate::task::{NoFaults, PartitionTask, StepStats, TaskError};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use rocksdb::Cache;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Errors of Kafka mode.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A log (Kafka) call failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A state store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The data directory and the topics disagree.
    #[error("{0}")]
    Refused(String),
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
    /// How often positions are committed to the group.
    pub commit_interval: Duration,
    /// Fault injection for tests: every this many steps, a task re-reads the
    /// last few records of both inputs (duplicate delivery). 0: never.
    pub redeliver_every: u32,
    /// A checkpoint directory shared by the group's processors (see
    /// [`crate::handover`]): partitions given up are checkpointed there, and
    /// partitions taken over are seeded from there.
    pub checkpoints: Option<std::path::PathBuf>,
    /// With `checkpoints`, also checkpoint every owned, caught-up partition
    /// this often (so a crashed owner's successor replays only the tail).
    pub checkpoint_every: Option<Duration>,
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
        }
    }
}

/// Where one owned partition's task is.
struct Owned {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), TaskError>>>,
    store: Arc<Store>,
    /// Positions whose state is durable and outputs acknowledged.
    events: Arc<AtomicU64>,
    effects: Arc<AtomicU64>,
    serving: Arc<AtomicBool>,
    /// The group's committed positions when the task started.
    committed: (u64, u64),
    /// This ownership's epoch, committed with every position.
    epoch: String,
}

/// A partition's place in this processor, for readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionState {
    /// Owned, caught up: answers reads.
    Serving,
    /// Owned, replaying what previous owners did: 503 for now.
    Rebuilding,
}

/// State shared by the control loop, the rebalance callbacks and readers.
pub struct Shared {
    owned: Mutex<BTreeMap<u32, Owned>>,
    /// Partitions assigned but not started yet.
    to_start: Mutex<BTreeSet<u32>>,
    /// Bumped on every change of ownership or serving state.
    changes: AtomicU64,
    events_topic: String,
    effects_topic: String,
    count: u32,
}

impl crate::query::Partitions for Shared {
    fn count(&self) -> u32 {
        self.count
    }

    fn store(&self, p: u32) -> Result<Arc<Store>, crate::query::QueryError> {
        use crate::query::QueryError;
        match self.owned.lock().expect("poisoned").get(&p) {
            Some(o) if o.serving.load(Ordering::SeqCst) => Ok(o.store.clone()),
            Some(_) => Err(QueryError::Moving { partition: p }),
            None if self.to_start.lock().expect("poisoned").contains(&p) => {
                Err(QueryError::Moving { partition: p })
            }
            None => Err(QueryError::Elsewhere { partition: p }),
        }
    }

    fn local(&self) -> Vec<(u32, Arc<Store>)> {
        self.partitions()
            .into_iter()
            .filter(|(_, (_, st))| *st == PartitionState::Serving)
            .map(|(p, (s, _))| (p, s))
            .collect()
    }
}

impl Shared {
    /// The stores of owned partitions and their state.
    pub fn partitions(&self) -> BTreeMap<u32, (Arc<Store>, PartitionState)> {
        self.owned
            .lock()
            .expect("poisoned")
            .iter()
            .map(|(&p, o)| {
                let state = if o.serving.load(Ordering::SeqCst) {
                    PartitionState::Serving
                } else {
                    PartitionState::Rebuilding
                };
                (p, (o.store.clone(), state))
            })
            .collect()
    }

    /// A counter that moves whenever ownership or serving state changes.
    pub fn version(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    fn positions_tpl(&self, owned: &BTreeMap<u32, Owned>) -> TopicPartitionList {
        let mut tpl = TopicPartitionList::new();
        for (&p, o) in owned {
            let e = o.events.load(Ordering::SeqCst);
            let f = o.effects.load(Ordering::SeqCst);
            // Never move the group backwards (a task that has not caught up
            // with its predecessors still replays below their positions).
            let (e, f) = (e.max(o.committed.0), f.max(o.committed.1));
            add_position(&mut tpl, &self.events_topic, p, e, &o.epoch);
            add_position(&mut tpl, &self.effects_topic, p, f, &o.epoch);
        }
        tpl
    }

    /// Stops every partition this processor owns (see [`Shared::stop`]).
    fn stop_all(&self) -> BTreeMap<u32, Owned> {
        let all: Vec<u32> = self
            .owned
            .lock()
            .expect("poisoned")
            .keys()
            .copied()
            .collect();
        self.stop(&all)
    }

    /// Stops the tasks of `partitions`, waiting for each to finish its step;
    /// returns their final positions.
    fn stop(&self, partitions: &[u32]) -> BTreeMap<u32, Owned> {
        let mut stopped = BTreeMap::new();
        {
            let mut to_start = self.to_start.lock().expect("poisoned");
            for p in partitions {
                to_start.remove(p);
            }
        }
        let mut owned = self.owned.lock().expect("poisoned");
        for p in partitions {
            if let Some(o) = owned.remove(p) {
                o.stop.store(true, Ordering::SeqCst);
                stopped.insert(*p, o);
            }
        }
        drop(owned);
        for (p, o) in stopped.iter_mut() {
            if let Some(t) = o.thread.take() {
                match t.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(partition = p, error = %e, "task ended with an error")
                    }
                    Err(_) => tracing::error!(partition = p, "task panicked"),
                }
            }
        }
        if !stopped.is_empty() {
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
        stopped
    }
}

/// Adds `topic[p]` at `offset` with the ownership epoch as metadata.
fn add_position(tpl: &mut TopicPartitionList, topic: &str, p: u32, offset: u64, epoch: &str) {
    let mut e = tpl.add_partition(topic, p as i32);
    let _ = e.set_offset(Offset::Offset(offset as i64));
    e.set_metadata(epoch);
}

/// The group consumer's context: handover in the rebalance callbacks.
struct GroupContext {
    shared: Arc<Shared>,
    checkpoints: Option<Arc<CheckpointDir>>,
}

impl ClientContext for GroupContext {}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(tpl) = rebalance else {
            return;
        };
        let partitions: Vec<u32> = tpl
            .elements_for_topic(&self.shared.events_topic)
            .iter()
            .map(|e| e.partition() as u32)
            .collect();
        tracing::info!(?partitions, "revoked: finishing their batches");
        let stopped = self.shared.stop(&partitions);
        if stopped.is_empty() {
            return;
        }
        if consumer.assignment_lost() {
            tracing::warn!(
                ?partitions,
                "assignment lost (session expired): not committing, another member owns them now"
            );
            return;
        }
        let tpl = self.shared.positions_tpl(&stopped);
        if let Err(e) = consumer.commit(&tpl, CommitMode::Sync) {
            tracing::warn!(error = %e, "committing the positions of revoked partitions");
        }
        checkpoint_all(self.checkpoints.as_deref(), &stopped);
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                // Ownership only: the tasks read through their own consumers.
                if let Err(e) = consumer.pause(tpl) {
                    tracing::warn!(error = %e, "pausing the group consumer's partitions");
                }
                let partitions: Vec<u32> = tpl
                    .elements_for_topic(&self.shared.events_topic)
                    .iter()
                    .map(|e| e.partition() as u32)
                    .collect();
                tracing::info!(?partitions, "assigned");
                self.shared
                    .to_start
                    .lock()
                    .expect("poisoned")
                    .extend(partitions);
                self.shared.changes.fetch_add(1, Ordering::SeqCst);
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => tracing::error!(error = %e, "rebalance failed"),
        }
    }
}

/// One processor of the group.
pub struct Cluster {
    dir: DataDir,
    cfg: ClusterConfig,
    log: Arc<KafkaLog>,
    cache: Cache,
    shared: Arc<Shared>,
    progress: Arc<Progress>,
    /// Set to make every wait for Kafka give up (shutdown).
    stopping: Arc<AtomicBool>,
    checkpoints: Option<Arc<CheckpointDir>>,
}

/// Checkpoints the partitions just given up (their tasks stopped), so
/// whoever takes them over replays only what follows — also when the broker
/// refused the handover commit (see [`crate::handover`]).
fn checkpoint_all(dir: Option<&CheckpointDir>, stopped: &BTreeMap<u32, Owned>) {
    let Some(dir) = dir else { return };
    for (&p, o) in stopped {
        let start = Instant::now();
        match dir.write(p, &o.store, &o.epoch, true) {
            Ok(c) => tracing::info!(
                partition = p,
                positions = ?c.positions,
                ms = start.elapsed().as_millis() as u64,
                "checkpoint written for the next owner"
            ),
            Err(e) => tracing::warn!(partition = p, error = %e, "writing a checkpoint"),
        }
    }
}

impl Cluster {
    /// Connects to Kafka, checks the topics, and opens (creating when new)
    /// the data directory that holds this processor's partition stores.
    pub fn open(data: &std::path::Path, cfg: ClusterConfig) -> Result<Cluster, ClusterError> {
        let stopping = Arc::new(AtomicBool::new(false));
        let log = KafkaLog::connect(cfg.kafka.clone(), stopping.clone())?;
        let partitions = log.partitions(Topic::Events);
        let refused = |e: crate::datadir::DataDirError| ClusterError::Refused(e.to_string());
        let dir = if data.join("feedlog.json").exists() {
            let d = DataDir::open(data).map_err(refused)?;
            if d.partitions() != partitions {
                return Err(ClusterError::Refused(format!(
                    "{} holds state for {} partitions, but topic {} has {partitions}",
                    data.display(),
                    d.partitions(),
                    log.name(Topic::Events)
                )));
            }
            d
        } else {
            // A new directory takes the topic's partition count.
            DataDir::create_or_open(data, Some(partitions)).map_err(refused)?
        };
        let shared = Arc::new(Shared {
            owned: Mutex::default(),
            to_start: Mutex::default(),
            changes: AtomicU64::new(0),
            events_topic: log.name(Topic::Events).to_string(),
            effects_topic: log.name(Topic::Effects).to_string(),
            count: partitions,
        });
        let checkpoints = cfg.checkpoints.as_ref().map(|root| {
            Arc::new(CheckpointDir::new(
                root,
                Identity {
                    events_topic: log.name(Topic::Events).to_string(),
                    partitions,
                    inbox_cap: cfg.processor.inbox_cap,
                },
            ))
        });
        Ok(Cluster {
            dir,
            cache: Cache::new_lru_cache(cfg.processor.cache_bytes),
            checkpoints,
            cfg,
            log: Arc::new(log),
            shared,
            progress: Arc::default(),
            stopping,
        })
    }

    /// What readers need: owned partitions and their state.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
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

    fn group_consumer(&self) -> Result<BaseConsumer<GroupContext>, ClusterError> {
        let mut c = self.cfg.kafka.client_config();
        c.set("group.id", &self.cfg.kafka.group)
            .set("client.id", format!("feedlog/{}", self.cfg.member))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set(
                "session.timeout.ms",
                self.cfg.session_timeout.as_millis().to_string(),
            )
            .set(
                "heartbeat.interval.ms",
                (self.cfg.session_timeout.as_millis() / 4)
                    .max(100)
                    .to_string(),
            )
            .set(
                "partition.assignment.strategy",
                if self.cfg.cooperative {
                    "cooperative-sticky"
                } else {
                    "range"
                },
            );
        if let Some(id) = &self.cfg.instance_id {
            c.set("group.instance.id", id);
        }
        c.create_with_context(GroupContext {
            shared: self.shared.clone(),
            checkpoints: self.checkpoints.clone(),
        })
        .map_err(|e| {
            ClusterError::Log(LogError::Kafka {
                what: "creating the group consumer".into(),
                reason: e.to_string(),
            })
        })
    }

    /// The group's committed positions of `events[p]` and `effects[p]`
    /// (0 where nothing is committed), and the epoch of the owner that
    /// committed them ("" when none).
    fn committed(
        &self,
        consumer: &BaseConsumer<GroupContext>,
        p: u32,
    ) -> Result<((u64, u64), String), ClusterError> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&self.shared.events_topic, p as i32);
        tpl.add_partition(&self.shared.effects_topic, p as i32);
        let got = consumer
            .committed_offsets(tpl, REQUEST_TIMEOUT)
            .map_err(|e| LogError::Kafka {
                what: format!("reading the group's committed positions of partition {p}"),
                reason: e.to_string(),
            })?;
        let at = |topic: &str| {
            got.find_partition(topic, p as i32)
                .and_then(|e| e.offset().to_raw())
                .filter(|o| *o >= 0)
                .unwrap_or(0) as u64
        };
        let epoch = got
            .find_partition(&self.shared.events_topic, p as i32)
            .map(|e| e.metadata().to_string())
            .unwrap_or_default();
        Ok((
            (
                at(&self.shared.events_topic),
                at(&self.shared.effects_topic),
            ),
            epoch,
        ))
    }

    fn open_store(&self, p: u32) -> Result<Arc<Store>, ClusterError> {
        let opts = StoreOptions {
            sync: self.cfg.processor.sync,
            ..StoreOptions::default()
        };
        Ok(Arc::new(Store::open(
            &self.dir.state_dir(p),
            p,
            self.dir.partitions(),
            &self.cache,
            &opts,
        )?))
    }

    /// Opens partition `p`'s store and starts its task.
    fn start(&self, consumer: &BaseConsumer<GroupContext>, p: u32) -> Result<(), ClusterError> {
        let (committed, group_epoch) = self.committed(consumer, p)?;
        let mut store = self.open_store(p)?;
        let local_epoch = store
            .get(crate::state::Cf::Meta, meta::OWNER_EPOCH)?
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default();
        let mut local = (
            store.meta_u64(meta::POS_EVENTS)?,
            store.meta_u64(meta::POS_EFFECTS)?,
        );
        // Did another processor own this partition since this store did?
        let intervened = group_epoch != local_epoch;
        if intervened && (local.0 > committed.0 || local.1 > committed.1) {
            // This store applied inputs past the group's positions that its
            // successor may not have answered, and its own answers to them
            // may now be stale: neither shipping nor dropping them is safe.
            tracing::warn!(
                partition = p,
                local = ?local,
                committed = ?committed,
                "another processor owned this partition since this store last did, and the store is \
                 ahead of the group: rebuilding it from the log"
            );
            drop(store);
            let path = self.dir.state_dir(p);
            std::fs::remove_dir_all(&path).map_err(|e| {
                ClusterError::Refused(format!("removing {} to rebuild it: {e}", path.display()))
            })?;
            store = self.open_store(p)?;
            local = (0, 0);
        }
        // A checkpoint further along than the local store (which may be
        // empty) saves replaying what it holds.
        let mut successor = None;
        if let Some(cps) = &self.checkpoints {
            let log_start = (
                self.log.start_offset(Topic::Events, p)?,
                self.log.start_offset(Topic::Effects, p)?,
            );
            let group = GroupPosition {
                committed,
                epoch: &group_epoch,
            };
            if let Some((from, c)) = cps.best(p, local, group, log_start) {
                drop(store);
                CheckpointDir::seed(&from, &self.dir.state_dir(p))?;
                store = self.open_store(p)?;
                tracing::info!(
                    partition = p,
                    checkpoint = %from.display(),
                    at = ?c.positions,
                    committed = ?committed,
                    "seeded from a checkpoint: replaying only the log after it"
                );
                local = c.positions;
                // Within the group's positions, the checkpoint's outbox
                // answered inputs whose outputs are acknowledged: never
                // re-ship it. Past them, it is the last owner's own store
                // (see crate::handover), carried on as that owner would.
                successor = Some(c.within(committed));
            }
        }
        let intervened = successor.unwrap_or(intervened);
        // Take ownership before answering anything: a new epoch, in the
        // group and in the store, so that whoever owns the partition next
        // knows this processor had it.
        let epoch = format!(
            "{}/{}/{}",
            self.cfg.member,
            crate::task::now_ms(),
            self.shared.changes.load(Ordering::SeqCst)
        );
        let mut tpl = TopicPartitionList::new();
        add_position(&mut tpl, &self.shared.events_topic, p, committed.0, &epoch);
        add_position(&mut tpl, &self.shared.effects_topic, p, committed.1, &epoch);
        consumer
            .commit(&tpl, CommitMode::Sync)
            .map_err(|e| LogError::Kafka {
                what: format!("taking ownership of partition {p} in the group"),
                reason: e.to_string(),
            })?;
        // Then in the store (only once the group has it: a commit refused
        // during a rebalance leaves both as they were, and the retry finds
        // the store still current).
        store.commit(&Default::default(), |b| {
            b.put(crate::state::Cf::Meta, meta::OWNER_EPOCH, epoch.as_bytes())
        })?;
        for (topic, at) in [(Topic::Events, local.0), (Topic::Effects, local.1)] {
            let start = self.log.start_offset(topic, p)?;
            if at < start {
                return Err(ClusterError::Refused(format!(
                    "partition {p}: {}[{p}] starts at offset {start} (retention), but this store needs offset {at}: \
                     restore it from a checkpoint, or remove {} to rebuild from the whole log",
                    self.log.name(topic),
                    self.dir.state_dir(p).display()
                )));
            }
        }
        let ctx = self.cfg.processor.ctx(p, self.dir.partitions());
        let mut task = PartitionTask::open_after(
            ctx,
            self.cfg.processor.limits,
            self.cfg.processor.sync,
            store.clone(),
            self.log.clone() as Arc<dyn Log>,
            Some(committed),
            !intervened,
        )
        .map_err(|e| match e {
            TaskError::Store(s) => ClusterError::Store(s),
            TaskError::Log(l) => ClusterError::Log(l),
            other => ClusterError::Refused(other.to_string()),
        })?;
        tracing::info!(
            partition = p,
            local = ?local,
            committed = ?committed,
            intervened,
            "starting: replaying quietly up to the committed positions"
        );
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(AtomicU64::new(local.0));
        let effects = Arc::new(AtomicU64::new(local.1));
        let serving = Arc::new(AtomicBool::new(task.caught_up()));
        let (stop2, events2, effects2, serving2) = (
            stop.clone(),
            events.clone(),
            effects.clone(),
            serving.clone(),
        );
        let (progress, shared, stopping) = (
            self.progress.clone(),
            self.shared.clone(),
            self.stopping.clone(),
        );
        let redeliver_every = self.cfg.redeliver_every;
        let thread = std::thread::Builder::new()
            .name(format!("feedlog-k{p}"))
            .spawn(move || -> Result<(), TaskError> {
                let mut backoff = Duration::from_micros(200);
                let mut steps = 0u64;
                while !stop2.load(Ordering::SeqCst) && !stopping.load(Ordering::SeqCst) {
                    let stats = match task.step(&mut NoFaults) {
                        Err(TaskError::Log(LogError::Interrupted)) => return Ok(()),
                        other => other?,
                    };
                    let (e, f) = task.applied();
                    events2.store(e, Ordering::SeqCst);
                    effects2.store(f, Ordering::SeqCst);
                    if !serving2.load(Ordering::SeqCst) && task.caught_up() {
                        serving2.store(true, Ordering::SeqCst);
                        shared.changes.fetch_add(1, Ordering::SeqCst);
                        tracing::info!(partition = p, "caught up: serving");
                    }
                    if stats.input() == 0 {
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(Duration::from_millis(20));
                        continue;
                    }
                    backoff = Duration::from_micros(200);
                    progress.record(&stats);
                    steps += 1;
                    if redeliver_every > 0 && steps.is_multiple_of(redeliver_every as u64) {
                        task.redeliver(Topic::Events, 3)?;
                        task.redeliver(Topic::Effects, 3)?;
                    }
                }
                Ok(())
            })
            .expect("spawn partition thread");
        self.shared.owned.lock().expect("poisoned").insert(
            p,
            Owned {
                stop,
                thread: Some(thread),
                store,
                events,
                effects,
                serving,
                committed,
                epoch,
            },
        );
        self.shared.changes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Checkpoints every owned partition that has caught up, on a thread of
    /// its own (a copy to another file system can take long, and the group
    /// consumer must keep polling), while the tasks keep running (a RocksDB
    /// checkpoint is consistent). Such a checkpoint becomes usable once the
    /// group's positions reach it (the next commit).
    fn checkpoint_serving(&self, cps: &Arc<CheckpointDir>) -> JoinHandle<()> {
        let serving: Vec<(u32, Arc<Store>, String)> = self
            .shared
            .owned
            .lock()
            .expect("poisoned")
            .iter()
            .filter(|(_, o)| o.serving.load(Ordering::SeqCst))
            .map(|(&p, o)| (p, o.store.clone(), o.epoch.clone()))
            .collect();
        let cps = cps.clone();
        std::thread::Builder::new()
            .name("feedlog-checkpoints".into())
            .spawn(move || {
                for (p, store, epoch) in serving {
                    match cps.write(p, &store, &epoch, false) {
                        Ok(c) => tracing::debug!(partition = p, positions = ?c.positions, "checkpoint written"),
                        Err(e) => tracing::warn!(partition = p, error = %e, "writing a checkpoint"),
                    }
                }
            })
            .expect("spawn checkpoint thread")
    }

    /// Takes part in the group until `cancel` is set — or, with
    /// `until_idle`, until every partition of both topics is consumed to its
    /// end (see [`status`]) — then finishes every task's batch, commits,
    /// announces it has left, and leaves the group.
    pub fn run(&self, cancel: &AtomicBool, until_idle: bool) -> Result<StepStats, ClusterError> {
        let before = *self.progress.totals.lock().expect("poisoned");
        let consumer = self.group_consumer()?;
        consumer
            .subscribe(&[&self.shared.events_topic])
            .map_err(|e| LogError::Kafka {
                what: format!("subscribing to {}", self.shared.events_topic),
                reason: e.to_string(),
            })?;
        let members = MembersWriter::new(&self.cfg, &self.log)?;
        let mut announced = u64::MAX;
        let mut last_commit = Instant::now();
        let mut last_idle_check = Instant::now();
        let mut idle_seen = 0;
        let mut retry_at: BTreeMap<u32, Instant> = BTreeMap::new();
        let mut last_checkpoint = Instant::now();
        let mut checkpointing: Option<JoinHandle<()>> = None;
        while !cancel.load(Ordering::SeqCst) {
            if let Some(Err(e)) = consumer.poll(Duration::from_millis(100)) {
                tracing::warn!(error = %e, "group consumer");
            }
            // Start what was assigned.
            let due: Vec<u32> = {
                let to_start = self.shared.to_start.lock().expect("poisoned");
                to_start
                    .iter()
                    .copied()
                    .filter(|p| retry_at.get(p).is_none_or(|t| Instant::now() >= *t))
                    .collect()
            };
            for p in due {
                self.shared.to_start.lock().expect("poisoned").remove(&p);
                if let Err(e) = self.start(&consumer, p) {
                    // A refusal needs an operator; anything else (a commit
                    // refused during a rebalance, a broker hiccup) passes.
                    let wait = match e {
                        ClusterError::Refused(_) => Duration::from_secs(5),
                        _ => Duration::from_secs(1),
                    };
                    tracing::error!(partition = p, error = %e, "could not start; retrying in {wait:?}");
                    retry_at.insert(p, Instant::now() + wait);
                    self.shared.to_start.lock().expect("poisoned").insert(p);
                } else {
                    retry_at.remove(&p);
                }
            }
            // Restart tasks that failed (a broker error, say) from their stores.
            let failed: Vec<u32> = self
                .shared
                .owned
                .lock()
                .expect("poisoned")
                .iter()
                .filter(|(_, o)| o.thread.as_ref().is_some_and(|t| t.is_finished()))
                .map(|(&p, _)| p)
                .collect();
            if !failed.is_empty() {
                tracing::warn!(partitions = ?failed, "tasks stopped; restarting them from their stores");
                self.shared.stop(&failed);
                let mut to_start = self.shared.to_start.lock().expect("poisoned");
                for p in failed {
                    to_start.insert(p);
                    retry_at.insert(p, Instant::now() + Duration::from_secs(1));
                }
            }
            if last_commit.elapsed() >= self.cfg.commit_interval {
                last_commit = Instant::now();
                let tpl = {
                    let owned = self.shared.owned.lock().expect("poisoned");
                    self.shared.positions_tpl(&owned)
                };
                if tpl.count() > 0 {
                    if let Err(e) = consumer.commit(&tpl, CommitMode::Async) {
                        tracing::debug!(error = %e, "committing positions");
                    }
                }
            }
            if let (Some(cps), Some(every)) = (&self.checkpoints, self.cfg.checkpoint_every) {
                let busy = checkpointing.as_ref().is_some_and(|t| !t.is_finished());
                if !busy && last_checkpoint.elapsed() >= every {
                    last_checkpoint = Instant::now();
                    checkpointing = Some(self.checkpoint_serving(cps));
                }
            }
            let version = self.shared.version();
            if version != announced {
                if let Err(e) = members.announce(&self.shared.partitions()) {
                    tracing::warn!(error = %e, "announcing ownership");
                } else {
                    announced = version;
                }
            }
            if until_idle && last_idle_check.elapsed() >= Duration::from_millis(500) {
                last_idle_check = Instant::now();
                match status(&self.cfg.kafka) {
                    Ok(s) if s.idle => idle_seen += 1,
                    Ok(_) => idle_seen = 0,
                    Err(e) => tracing::warn!(error = %e, "checking for idleness"),
                }
                if idle_seen >= 2 {
                    break;
                }
            }
        }
        // Leave: finish and commit every batch, say so, leave the group.
        if let Some(t) = checkpointing.take() {
            let _ = t.join();
        }
        let stopped = self.shared.stop_all();
        if !stopped.is_empty() && !consumer.assignment_lost() {
            let tpl = self.shared.positions_tpl(&stopped);
            if let Err(e) = consumer.commit(&tpl, CommitMode::Sync) {
                tracing::warn!(error = %e, "committing positions on the way out");
            }
            checkpoint_all(self.checkpoints.as_deref(), &stopped);
        }
        if let Err(e) = members.leave() {
            tracing::warn!(error = %e, "announcing departure");
        }
        consumer.unsubscribe();
        drop(consumer);
        let totals = *self.progress.totals.lock().expect("poisoned");
        Ok(totals.since(&before))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.shared.stop_all();
    }
}

/// A processor's announcement in the `members` topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    /// Its name.
    pub member: String,
    /// Where its read API answers, if it serves one.
    pub api: Option<String>,
    /// Partitions it owns and serves.
    pub serving: Vec<u32>,
    /// Partitions it owns and is still replaying.
    pub rebuilding: Vec<u32>,
    /// When it wrote this, ms since the epoch.
    pub at_ms: u64,
}

/// Writes this processor's records to `members`.
struct MembersWriter {
    topic: String,
    member: String,
    api: Option<String>,
    producer: ThreadedProducer<rdkafka::producer::DefaultProducerContext>,
}

impl MembersWriter {
    fn new(cfg: &ClusterConfig, log: &KafkaLog) -> Result<MembersWriter, ClusterError> {
        let topic = log.config().members_topic();
        let producer = cfg
            .kafka
            .client_config()
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .create()
            .map_err(|e| LogError::Kafka {
                what: "creating the members producer".into(),
                reason: e.to_string(),
            })?;
        Ok(MembersWriter {
            topic,
            member: cfg.member.clone(),
            api: cfg.api.clone(),
            producer,
        })
    }

    fn send(&self, value: Option<&[u8]>) -> Result<(), ClusterError> {
        let mut rec = BaseRecord::to(&self.topic).key(self.member.as_bytes());
        if let Some(v) = value {
            rec = rec.payload(v);
        }
        self.producer.send(rec).map_err(|(e, _)| LogError::Kafka {
            what: format!("writing to {}", self.topic),
            reason: e.to_string(),
        })?;
        self.producer
            .flush(REQUEST_TIMEOUT)
            .map_err(|e| LogError::Kafka {
                what: format!("writing to {}", self.topic),
                reason: e.to_string(),
            })?;
        Ok(())
    }

    fn announce(
        &self,
        partitions: &BTreeMap<u32, (Arc<Store>, PartitionState)>,
    ) -> Result<(), ClusterError> {
        let of = |s: PartitionState| {
            partitions
                .iter()
                .filter(|(_, (_, st))| *st == s)
                .map(|(&p, _)| p)
                .collect()
        };
        let rec = MemberRecord {
            member: self.member.clone(),
            api: self.api.clone(),
            serving: of(PartitionState::Serving),
            rebuilding: of(PartitionState::Rebuilding),
            at_ms: crate::task::now_ms(),
        };
        self.send(Some(&serde_json::to_vec(&rec).expect("plain struct")))
    }

    fn leave(&self) -> Result<(), ClusterError> {
        self.send(None)
    }
}

/// Who owns what, from the `members` topic: for each partition, the latest
/// claim (a processor's newer record replaces its older one; of two
/// processors claiming one partition, the later record wins).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Owners {
    /// Partition → (member, state, API address).
    pub partitions: BTreeMap<u32, (String, PartitionState, Option<String>)>,
    /// Every member with a current record.
    pub members: BTreeMap<String, MemberRecord>,
}

/// Folds `members` records, in offset order, into [`Owners`].
#[derive(Default)]
struct OwnersBuilder {
    /// Each member's newest record and its offset.
    newest: BTreeMap<String, (i64, MemberRecord)>,
}

impl OwnersBuilder {
    fn ingest(&mut self, offset: i64, key: &[u8], payload: Option<&[u8]>) {
        let key = String::from_utf8_lossy(key).into_owned();
        match payload.filter(|p| !p.is_empty()) {
            // A member that left.
            None => {
                self.newest.remove(&key);
            }
            Some(p) => match serde_json::from_slice::<MemberRecord>(p) {
                Ok(r) => {
                    self.newest.insert(key, (offset, r));
                }
                Err(e) => tracing::warn!(offset, error = %e, "unreadable member record"),
            },
        }
    }

    fn owners(&self) -> Owners {
        let mut claims: Vec<&(i64, MemberRecord)> = self.newest.values().collect();
        claims.sort_by_key(|(o, _)| *o);
        let mut owners = Owners::default();
        for (_, r) in claims {
            for (list, state) in [
                (&r.serving, PartitionState::Serving),
                (&r.rebuilding, PartitionState::Rebuilding),
            ] {
                for &p in list {
                    owners
                        .partitions
                        .insert(p, (r.member.clone(), state, r.api.clone()));
                }
            }
        }
        owners.members = self
            .newest
            .iter()
            .map(|(m, (_, r))| (m.clone(), r.clone()))
            .collect();
        owners
    }
}

fn members_consumer(cfg: &KafkaConfig, topic: &str, from: i64) -> Result<BaseConsumer, LogError> {
    let err = |what: &str| {
        let what = format!("{what} {topic}");
        move |e: rdkafka::error::KafkaError| LogError::Kafka {
            what,
            reason: e.to_string(),
        }
    };
    let consumer: BaseConsumer = cfg
        .client_config()
        .set("group.id", format!("{}.members", cfg.group))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .map_err(err("creating a reader of"))?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(from))
        .map_err(err("assigning"))?;
    consumer.assign(&tpl).map_err(err("assigning"))?;
    Ok(consumer)
}

/// Replays the `members` topic to its end.
pub fn read_owners(cfg: &KafkaConfig) -> Result<Owners, LogError> {
    let topic = cfg.members_topic();
    let meta: BaseConsumer = cfg
        .client_config()
        .set("group.id", format!("{}.members", cfg.group))
        .create()
        .map_err(|e| LogError::Kafka {
            what: format!("creating a reader of {topic}"),
            reason: e.to_string(),
        })?;
    let (lo, _) = meta
        .fetch_watermarks(&topic, 0, REQUEST_TIMEOUT)
        .map_err(|e| LogError::Kafka {
            what: format!("reading the start of {topic}"),
            reason: e.to_string(),
        })?;
    let hi = crate::log::kafka::high_watermarks(cfg, &topic, &[0])?[0] as i64;
    let mut b = OwnersBuilder::default();
    if hi > lo {
        let consumer = members_consumer(cfg, &topic, lo)?;
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        let mut next = lo;
        while next < hi {
            if Instant::now() > deadline {
                return Err(LogError::Kafka {
                    what: format!("reading {topic}"),
                    reason: format!("timed out at offset {next} of {hi}"),
                });
            }
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    next = m.offset() + 1;
                    b.ingest(m.offset(), m.key().unwrap_or_default(), m.payload());
                }
                Some(Err(e)) => tracing::warn!(error = %e, "reading members"),
                None => {}
            }
        }
    }
    Ok(b.owners())
}

/// Who owns what, kept current by a thread that tails `members`.
pub struct MembersView {
    owners: Arc<std::sync::RwLock<Owners>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MembersView {
    /// Starts tailing `members` from its start.
    pub fn start(cfg: &KafkaConfig) -> Result<MembersView, LogError> {
        let consumer = members_consumer(cfg, &cfg.members_topic(), 0)?;
        let owners = Arc::new(std::sync::RwLock::new(Owners::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (o, st) = (owners.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("feedlog-members".into())
            .spawn(move || {
                let mut b = OwnersBuilder::default();
                while !st.load(Ordering::SeqCst) {
                    let mut changed = false;
                    while let Some(r) = consumer.poll(Duration::from_millis(50)) {
                        match r {
                            Ok(m) => {
                                b.ingest(m.offset(), m.key().unwrap_or_default(), m.payload());
                                changed = true;
                            }
                            Err(e) => tracing::warn!(error = %e, "tailing members"),
                        }
                        if st.load(Ordering::SeqCst) {
                            return;
                        }
                    }
                    if changed {
                        *o.write().expect("poisoned") = b.owners();
                    }
                }
            })
            .expect("spawn members thread");
        Ok(MembersView {
            owners,
            stop,
            thread: Some(thread),
        })
    }

    /// The owners as last read.
    pub fn owners(&self) -> Owners {
        self.owners.read().expect("poisoned").clone()
    }
}

impl Drop for MembersView {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One topic partition's position and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TopicPosition {
    /// The group's committed position (0 when none).
    pub committed: u64,
    /// The partition's end offset.
    pub end: u64,
    /// `end - committed`.
    pub lag: u64,
}

/// One partition of the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionStatus {
    /// The partition.
    pub partition: u32,
    /// The member that owns it (from `members`), if any.
    pub owner: Option<String>,
    /// `serving` or `rebuilding`, if owned.
    pub state: Option<PartitionState>,
    /// `events[p]`.
    pub events: TopicPosition,
    /// `effects[p]`.
    pub effects: TopicPosition,
}

/// The group's state: what `feedlog status` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    /// The consumer group.
    pub group: String,
    /// Every partition.
    pub partitions: Vec<PartitionStatus>,
    /// Whether every partition of both topics is consumed to its end: the
    /// group has applied everything and nothing is in flight.
    pub idle: bool,
}

/// Where `feedlog reset --kafka` moves a consumer group.
#[derive(Debug, Clone)]
pub enum GroupResetTo {
    /// The start of the log: every processor rebuilds what it takes from
    /// the log and emits every output again.
    Start,
    /// Each partition's newest checkpoint in this `--checkpoints` directory
    /// (of this topic and partition count) that the log still holds.
    Checkpoints(std::path::PathBuf),
}

/// What a group reset did, per partition.
#[derive(Debug, Clone)]
pub struct GroupReset {
    /// The epoch the new positions were committed under.
    pub epoch: String,
    /// Per partition: the `events` and `effects` positions committed, and
    /// the checkpoint they came from.
    pub positions: Vec<((u64, u64), Option<crate::handover::PartitionCheckpoint>)>,
}

/// Moves the group's positions back, under a new epoch that no processor's
/// store carries: every processor then treats each partition it takes as
/// owned by someone else since — a store ahead of the new positions is
/// dropped and rebuilt (from a checkpoint within them when it runs with
/// `--checkpoints`, else from the log), and outputs above the new
/// positions are emitted again (receivers skip them by version). Refuses,
/// changing nothing, while the group has members or when the log no longer
/// holds a position (retention).
pub fn reset_group(cfg: &KafkaConfig, to: &GroupResetTo) -> Result<GroupReset, ClusterError> {
    let log = KafkaLog::connect(cfg.clone(), Arc::new(AtomicBool::new(false)))?;
    let consumer = group_client(cfg, "a reset client")?;
    let members: Vec<String> = match consumer.fetch_group_list(Some(&cfg.group), REQUEST_TIMEOUT) {
        Ok(groups) => groups
            .groups()
            .iter()
            .flat_map(|g| g.members().iter().map(|m| m.client_id().to_string()))
            .collect(),
        // A broker that cannot describe groups: the processors that have
        // announced themselves and not left (one that crashed stays listed
        // until it runs again and leaves).
        Err(e) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::UnsupportedFeature) => {
            read_owners(cfg)?.members.into_keys().collect()
        }
        Err(e) => {
            return Err(ClusterError::Log(LogError::Kafka {
                what: format!("describing group {}", cfg.group),
                reason: e.to_string(),
            }))
        }
    };
    if !members.is_empty() {
        return Err(ClusterError::Refused(format!(
            "group {} has {} member(s) ({}): stop every processor of the group first; nothing was changed",
            cfg.group,
            members.len(),
            members.join(", ")
        )));
    }
    let events = log.name(Topic::Events).to_string();
    let n = log.partitions(Topic::Events);
    let mut positions = Vec::new();
    for p in 0..n {
        let start = (
            log.start_offset(Topic::Events, p)?,
            log.start_offset(Topic::Effects, p)?,
        );
        let end = (
            log.end_offset(Topic::Events, p)?,
            log.end_offset(Topic::Effects, p)?,
        );
        let (at, from) = match to {
            GroupResetTo::Start => ((0, 0), None),
            GroupResetTo::Checkpoints(dir) => {
                let c = crate::handover::list_in(dir, p)
                    .into_iter()
                    .map(|(_, c)| c)
                    .rfind(|c| {
                        c.identity.events_topic == events
                            && c.identity.partitions == n
                            && c.positions.0 <= end.0
                            && c.positions.1 <= end.1
                    })
                    .ok_or_else(|| {
                        ClusterError::Refused(format!(
                            "{} holds no checkpoint of {events}[{p}] ({n} partitions) within the log; nothing was changed",
                            dir.display()
                        ))
                    })?;
                (c.positions, Some(c))
            }
        };
        for (topic, at, start) in [
            (Topic::Events, at.0, start.0),
            (Topic::Effects, at.1, start.1),
        ] {
            if at < start {
                return Err(ClusterError::Refused(format!(
                    "{}[{p}] starts at offset {start} (retention), so nothing can be replayed from offset {at}; nothing was changed",
                    log.name(topic)
                )));
            }
        }
        positions.push((at, from));
    }
    let epoch = format!("reset/{}", crate::task::now_ms());
    let mut tpl = TopicPartitionList::new();
    for (p, ((e, f), _)) in positions.iter().enumerate() {
        add_position(&mut tpl, &events, p as u32, *e, &epoch);
        add_position(&mut tpl, log.name(Topic::Effects), p as u32, *f, &epoch);
    }
    // A commit from outside the group, as Kafka's own offset-reset tools do:
    // brokers accept it only while the group has no members. One that
    // stopped a moment ago stays a member until its session times out.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match consumer.commit(&tpl, CommitMode::Sync) {
            Ok(()) => return Ok(GroupReset { epoch, positions }),
            Err(e)
                if matches!(
                    e.rdkafka_error_code(),
                    Some(
                        RDKafkaErrorCode::UnknownMemberId
                            | RDKafkaErrorCode::IllegalGeneration
                            | RDKafkaErrorCode::RebalanceInProgress
                    )
                ) && Instant::now() < deadline =>
            {
                tracing::info!(error = %e, "the broker still lists members of the group: waiting for their sessions to end");
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => {
                return Err(ClusterError::Refused(format!(
                    "the broker refused the reset positions of group {}: {e} (it accepts them only while the group \
                     has no members: stop every processor of the group and retry); nothing was changed",
                    cfg.group
                )))
            }
        }
    }
}

/// A client of the group that never joins it (reads and commits positions).
fn group_client(cfg: &KafkaConfig, what: &str) -> Result<BaseConsumer, LogError> {
    cfg.client_config()
        .set("group.id", &cfg.group)
        .set("enable.auto.commit", "false")
        .create()
        .map_err(|e| LogError::Kafka {
            what: format!("creating {what}"),
            reason: e.to_string(),
        })
}

/// Reads the group's committed positions, the topics' ends and the owners.
pub fn status(cfg: &KafkaConfig) -> Result<Status, LogError> {
    let consumer = group_client(cfg, "a status client")?;
    let (events, effects) = (cfg.name(Topic::Events), cfg.name(Topic::Effects));
    let n = topic_partitions(&consumer, &events)?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..n as i32 {
        tpl.add_partition(&events, p);
        tpl.add_partition(&effects, p);
    }
    let committed = consumer
        .committed_offsets(tpl, REQUEST_TIMEOUT)
        .map_err(|e| LogError::Kafka {
            what: format!("reading group {}'s committed positions", cfg.group),
            reason: e.to_string(),
        })?;
    let owners = read_owners(cfg)?;
    // The ends, read after the committed positions (never ahead of them
    // in time, so `idle` is never claimed early).
    let all: Vec<u32> = (0..n).collect();
    let mut ends: BTreeMap<(String, u32), u64> = BTreeMap::new();
    for topic in [&events, &effects] {
        let found = crate::log::kafka::high_watermarks(cfg, topic, &all)?;
        ends.extend(all.iter().map(|p| (topic.clone(), *p)).zip(found));
    }
    let position = |topic: &str, p: u32| -> Result<TopicPosition, LogError> {
        let end = ends[&(topic.to_string(), p)];
        let committed = committed
            .find_partition(topic, p as i32)
            .and_then(|e| e.offset().to_raw())
            .filter(|o| *o >= 0)
            .unwrap_or(0) as u64;
        Ok(TopicPosition {
            committed,
            end,
            lag: end.saturating_sub(committed),
        })
    };
    let mut partitions = Vec::with_capacity(n as usize);
    for p in 0..n {
        let owner = owners.partitions.get(&p);
        partitions.push(PartitionStatus {
            partition: p,
            owner: owner.map(|o| o.0.clone()),
            state: owner.map(|o| o.1),
            events: position(&events, p)?,
            effects: position(&effects, p)?,
        });
    }
    // Consumed to the end by an owner that has caught up: a new owner still
    // replaying never commits below the group's positions, so the lag alone
    // cannot tell.
    let idle = partitions.iter().all(|p| {
        p.events.lag == 0 && p.effects.lag == 0 && p.state == Some(PartitionState::Serving)
    });
    Ok(Status {
        group: cfg.group.clone(),
        partitions,
        idle,
    })
}
