//! One owned partition: opening its store (local, rebuilt or seeded from a checkpoint),
//! starting and driving its task, checkpointing it for the next owner.

use super::ownership::{lock, AppliedPositions, Hold, Owned, Ownership};
use super::{Cluster, ClusterError};
use crate::core::fence::Epoch;
use crate::core::metrics::StepStats;
use crate::core::position::{Offset, Positions};
use crate::core::Partition;
use crate::log::kafka::{GroupMember, REQUEST_TIMEOUT};
use crate::log::now_ms;
use crate::log::{Log, LogError, Topic};
use crate::state::checkpoint::CheckpointDir;
use crate::state::{meta, Cf, Kv, Store, StoreError};
use crate::task::handover::{best, GroupPosition};
use crate::task::partition::{start_with_threshold, Takeover};
use crate::task::progress::Progress;
use crate::task::runner::{drive, Hooks};
use crate::task::{PartitionTask, Shutdown, TaskError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

impl Cluster {
    pub(super) fn open_store(&self, p: Partition) -> Result<Arc<Store>, ClusterError> {
        let opts = self.cfg.processor.store_options();
        Ok(Arc::new(Store::open(
            &self.dir.state_dir(p),
            p,
            self.dir.partitions(),
            &self.cache,
            &opts,
        )?))
    }

    /// Opens partition `p`'s store: the local one, or a rebuild from the
    /// log when another processor owned the partition since (or, for a
    /// standby, `within_group`, at all) and the store is ahead of the
    /// group, or a checkpoint further along; `open` is the local store
    /// when it is open already (a standby's). Returns the store, its
    /// positions, and whether another processor intervened.
    pub(super) fn open_for(
        &self,
        p: Partition,
        committed: Positions,
        group_epoch: Option<Epoch>,
        within_group: bool,
        open: Option<Arc<Store>>,
    ) -> Result<(Arc<Store>, Positions, bool), ClusterError> {
        let mut store = match open {
            Some(s) => s,
            None => self.open_store(p)?,
        };
        let local_epoch = owner_epoch(&store)?;
        let mut local = store.positions()?;
        // Did another processor own this partition since this store did?
        let intervened = group_epoch != local_epoch;
        if (intervened || within_group) && !committed.covers(local) {
            // This store applied inputs past the group's positions that its
            // successor may not have answered, and its own answers to them
            // may now be stale: neither shipping nor dropping them is safe.
            tracing::warn!(
                partition = p.0,
                local = %local,
                committed = %committed,
                standby = within_group,
                "the store is ahead of the group's positions, and another processor owned this \
                 partition since (or it is to be a standby, which never passes them): rebuilding it \
                 from the log"
            );
            drop(store);
            let path = self.dir.state_dir(p);
            std::fs::remove_dir_all(&path).map_err(|source| ClusterError::Io {
                action: "removing, to rebuild it,",
                path: path.clone(),
                source,
            })?;
            store = self.open_store(p)?;
            local = Positions::START;
        }
        // A checkpoint further along than the local store (which may be
        // empty) saves replaying what it holds.
        let Some(cps) = &self.checkpoints else {
            return Ok((store, local, intervened));
        };
        let log_start = Positions::new(
            self.log.start_offset(Topic::Events, p)?,
            self.log.start_offset(Topic::Effects, p)?,
        );
        let group = GroupPosition {
            committed,
            // A standby never goes past the group's positions: not even to
            // the last owner's handed-over checkpoint beyond them.
            epoch: group_epoch.filter(|_| !within_group),
        };
        let Some((from, c)) = best(cps, p, local, group, log_start) else {
            return Ok((store, local, intervened));
        };
        drop(store);
        CheckpointDir::seed(&from, &self.dir.state_dir(p))?;
        let store = self.open_store(p)?;
        tracing::info!(
            partition = p.0,
            checkpoint = %from.display(),
            at = %c.positions,
            committed = %committed,
            "seeded from a checkpoint: replaying only the log after it"
        );
        // Within the group's positions, the checkpoint's outbox answered
        // inputs whose outputs are acknowledged: never re-ship it. Past
        // them, it is the last owner's own store (see crate::task::handover),
        // carried on as that owner would.
        Ok((store, c.positions, c.within(committed)))
    }

    /// Opens partition `p`'s store and starts its task.
    pub(super) fn start(&self, group: &GroupMember, p: Partition) -> Result<(), ClusterError> {
        // A standby of `p` hands its store over (it is within the group's
        // positions, so the task replays quietly only what followed).
        let standby = self.standbys.claim(p);
        let was_standby = standby.is_some();
        let (committed, group_epoch) = group.committed(p)?;
        let (store, local, intervened) =
            self.open_for(p, committed, group_epoch, false, standby)?;
        // Take ownership before answering anything: a new epoch, above every
        // epoch this processor can see (the group's, its store's) and at
        // least the wall clock in ms (so a group whose metadata was lost
        // cannot take it back), in the group and in the store, so that
        // whoever owns the partition next knows this processor had it, and
        // takes a higher one: receivers fence this owner's records once they
        // have applied the next owner's (crate::core::fence).
        let seen = group_epoch.into_iter().chain(owner_epoch(&store)?);
        let epoch = Epoch::succeeding(seen, now_ms());
        let sent = Instant::now();
        // Bounded: the control loop waits for the starts, and must go on
        // seeing a stop or a rebalance when the coordinator is away (a
        // start that timed out is retried; a late answer only moves the
        // group's epoch up, and the retry takes a higher one still).
        group.commit_within(&[(p, committed, epoch)], REQUEST_TIMEOUT)?;
        // A commit the coordinator accepts proves membership.
        self.shared.lease.confirm(sent);
        // Then in the store (only once the group has it: a commit refused
        // during a rebalance leaves both as they were, and the retry finds
        // the store still current).
        let text = epoch.to_string();
        store.commit(&Default::default(), |b| {
            b.put(Cf::Meta, meta::OWNER_EPOCH, text.as_bytes())
        })?;
        self.check_retention(p, local)?;
        let takeover = Takeover {
            epoch,
            emitted: Some(committed),
            reship: !intervened,
        };
        let task_err = |source| ClusterError::Task {
            partition: p,
            source,
        };
        start_with_threshold(&store, self.dir.pull_threshold()).map_err(task_err)?;
        let task = PartitionTask::open_after(
            self.cfg.processor.ctx(p, self.dir.partitions()),
            self.cfg.processor.limits,
            self.cfg.processor.sync,
            store.clone(),
            self.log.clone() as Arc<dyn Log>,
            takeover,
        )
        .map_err(task_err)?;
        tracing::info!(
            partition = p.0,
            local = %local,
            committed = %committed,
            intervened,
            standby = was_standby,
            %epoch,
            "starting: replaying quietly up to the committed positions"
        );
        self.spawn(p, task, store, local, committed, epoch)
    }

    /// Refuses a store whose positions the log no longer holds.
    pub(super) fn check_retention(&self, p: Partition, at: Positions) -> Result<(), ClusterError> {
        for (topic, at) in [(Topic::Events, at.events), (Topic::Effects, at.effects)] {
            let start = self.log.start_offset(topic, p)?;
            if at.0 < start {
                return Err(ClusterError::Retention {
                    partition: p,
                    topic: self.log.name(topic).to_string(),
                    start,
                    needed: at.0,
                    state_dir: self.dir.state_dir(p),
                });
            }
        }
        Ok(())
    }

    /// Runs `task` on a thread of its own and records it as owned.
    pub(super) fn spawn(
        &self,
        p: Partition,
        mut task: PartitionTask,
        store: Arc<Store>,
        local: Positions,
        committed: Positions,
        epoch: Epoch,
    ) -> Result<(), ClusterError> {
        let stop = Arc::new(AtomicBool::new(false));
        let applied = Arc::new(AppliedPositions::default());
        applied.set(local);
        let serving = Arc::new(AtomicBool::new(task.caught_up()));
        let hold = Arc::new(Hold::default());
        let mut owner = KafkaOwner {
            p,
            stop: stop.clone(),
            stopping: self.stopping.clone(),
            applied: applied.clone(),
            serving: serving.clone(),
            shared: self.shared.clone(),
            progress: self.progress.clone(),
            redeliver_every: self.cfg.redeliver_every as u64,
            steps: 0,
            leased: true,
            faults: self.stop_after_commit.clone(),
            hold: hold.clone(),
        };
        let nice = self.cfg.processor.writer_nice;
        let thread = std::thread::Builder::new()
            .name(format!("feedlog-k{p}"))
            .spawn(move || {
                crate::task::priority::lower_priority(nice);
                match drive(&mut task, &mut owner) {
                    Err(TaskError::Log(LogError::Interrupted)) => Ok(()),
                    other => other,
                }
            })
            .map_err(|e| ClusterError::Task {
                partition: p,
                source: TaskError::Thread(e),
            })?;
        lock(&self.shared.owned).insert(
            p,
            Owned {
                stop,
                thread: Some(thread),
                store,
                applied,
                serving,
                committed,
                epoch,
                hold,
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
    pub(super) fn checkpoint_serving(&self, cps: &Arc<CheckpointDir>) -> Option<JoinHandle<()>> {
        let serving: Vec<(Partition, Arc<Store>, Epoch)> = lock(&self.shared.owned)
            .iter()
            .filter(|(_, o)| o.serving.load(Ordering::SeqCst))
            .map(|(&p, o)| (p, o.store.clone(), o.epoch))
            .collect();
        let cps = cps.clone();
        let spawned = std::thread::Builder::new()
            .name("feedlog-checkpoints".into())
            .spawn(move || {
                for (p, store, epoch) in serving {
                    match cps.write(p, &store, epoch, false) {
                        Ok(c) => tracing::debug!(partition = p.0, positions = %c.positions, "checkpoint written"),
                        Err(e) => tracing::warn!(partition = p.0, error = %e, "writing a checkpoint"),
                    }
                }
            });
        match spawned {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(error = %e, "starting the checkpoint thread");
                None
            }
        }
    }
}

/// The epoch this store last processed under (`None`: never in Kafka mode,
/// or under an earlier version's epoch).
fn owner_epoch(store: &Store) -> Result<Option<Epoch>, ClusterError> {
    Ok(store
        .get(Cf::Meta, meta::OWNER_EPOCH)
        .map_err(StoreError::from)?
        .and_then(|v| Epoch::parse(&String::from_utf8_lossy(&v))))
}

/// One owned partition's hooks into the step loop.
pub(super) struct KafkaOwner {
    p: Partition,
    stop: Arc<AtomicBool>,
    stopping: Shutdown,
    applied: Arc<AppliedPositions>,
    serving: Arc<AtomicBool>,
    shared: Arc<Ownership>,
    progress: Arc<Progress>,
    redeliver_every: u64,
    steps: u64,
    /// Whether the lease ran at the last look (for logging its changes).
    leased: bool,
    /// Faults injected into its steps (tests).
    faults: Option<crate::task::faults::StopAfterCommit>,
    /// A consistent cut's hold of its `events`.
    hold: Arc<Hold>,
}

impl Hooks for KafkaOwner {
    fn stop(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.stopping.is_requested()
    }

    fn faults(&mut self) -> Option<&mut dyn crate::task::Faults> {
        self.faults
            .as_mut()
            .map(|f| f as &mut dyn crate::task::Faults)
    }

    /// Steps only while this processor's ownership is confirmed (see
    /// [`Lease`]): after a pause longer than the lease, the task waits for
    /// the group to confirm it or take the partition away.
    fn may_step(&mut self) -> bool {
        let valid = self.shared.lease.valid();
        if valid != self.leased {
            self.leased = valid;
            match valid {
                true => tracing::info!(partition = self.p.0, "ownership confirmed again: stepping"),
                false => tracing::warn!(
                    partition = self.p.0,
                    "the group has not confirmed this processor's ownership lately (a pause, or the \
                     brokers out of reach): not stepping until it does or takes the partition away"
                ),
            }
        }
        valid
    }

    fn after(&mut self, task: &mut PartitionTask, stats: &StepStats) -> Result<(), TaskError> {
        self.applied.set(task.applied());
        let hold = self.hold.current();
        task.hold_events(hold.map(Offset));
        self.hold.acknowledge(hold);
        if !self.serving.load(Ordering::SeqCst) && task.caught_up() {
            self.serving.store(true, Ordering::SeqCst);
            self.shared.changes.fetch_add(1, Ordering::SeqCst);
            tracing::info!(partition = self.p.0, "caught up: serving");
        }
        if stats.input() == 0 {
            return Ok(());
        }
        self.progress.record(stats);
        self.steps += 1;
        if self.redeliver_every > 0 && self.steps.is_multiple_of(self.redeliver_every) {
            task.redeliver(Topic::Events, 3)?;
            task.redeliver(Topic::Effects, 3)?;
        }
        Ok(())
    }
}
