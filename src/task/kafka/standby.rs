//! Warm standbys (docs/kafka.md, "Standbys"): copies of partitions this
//! processor does not own, kept in its data directory by tailing their
//! `events` and `effects` quietly — applying, never emitting — up to the
//! group's committed positions and never past them. When the group gives
//! such a partition to this processor, its task opens the standby's store
//! like any store of its own: it is behind the committed positions, so the
//! task replays quietly only what the group committed since, and serves.
//!
//! Where standbys live ([`placement`], pure): each partition's standbys
//! are the `--standbys N` members that follow its owner in name order among
//! the group's live members. librdkafka's assignors do not know about
//! standbys: a failed owner's partition goes to a member with a standby
//! only when N covers every other member, or by the assignor's choice.

use super::ownership::{lock, AppliedPositions};
use super::{Cluster, ClusterError};
use crate::core::fence::Epoch;
use crate::core::metrics::StepStats;
use crate::core::position::Positions;
use crate::core::Partition;
use crate::log::kafka::{GroupClient, MembersView};
use crate::log::{Log, LogError};
use crate::state::Store;
use crate::task::partition::{start_with_threshold, Takeover};
use crate::task::runner::{drive, Hooks};
use crate::task::{PartitionTask, Shutdown, TaskError};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the standbys follow the group's committed positions.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// How recently a standby's target must have been read from the group for
/// readers to be answered from it (targets are read four times a second).
const FRESH_FOR: Duration = Duration::from_secs(2);
/// How often the placement is worked out again.
const PLACE_EVERY: Duration = Duration::from_secs(1);
/// How often, at most, moving standbys are announced in `members`.
const ANNOUNCE_EVERY: Duration = Duration::from_secs(2);
/// The pause before a standby that failed is started again.
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// The partitions `me` keeps standbys of, given each partition's owner and
/// the group's live members: of each partition another member owns, the
/// `count` members that follow the owner in name order, round the ring of
/// `live` (`me` always counted in, the owner left out).
pub fn placement(
    owners: &BTreeMap<Partition, String>,
    live: &BTreeSet<String>,
    me: &str,
    count: usize,
) -> BTreeSet<Partition> {
    let mut ring: BTreeSet<&str> = live.iter().map(String::as_str).collect();
    ring.insert(me);
    owners
        .iter()
        .filter(|(_, owner)| owner.as_str() != me)
        .filter(|(_, owner)| {
            let owner = owner.as_str();
            ring.range::<str, _>((Excluded(owner), Unbounded))
                .chain(ring.range::<str, _>((Unbounded, Excluded(owner))))
                .take(count)
                .any(|m| *m == me)
        })
        .map(|(&p, _)| p)
        .collect()
}

/// This processor's standbys, and the partitions its own tasks hold.
#[derive(Default)]
pub(super) struct Standbys {
    inner: Mutex<Registry>,
    /// Signalled when a standby's start ends (see [`Standbys::claim`]).
    started: Condvar,
}

#[derive(Default)]
struct Registry {
    running: BTreeMap<Partition, Standby>,
    /// Partitions this processor owns, or is starting to own: never stood
    /// by (their stores are the tasks').
    claimed: BTreeSet<Partition>,
    /// Standbys being started (their stores opened) without the lock held.
    starting: BTreeSet<Partition>,
    /// Standbys that failed, not started again before then.
    retry_at: BTreeMap<Partition, Instant>,
}

/// One running standby.
struct Standby {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), TaskError>>>,
    /// How far it may apply: the group's committed positions, as last read.
    target: Arc<AppliedPositions>,
    /// When `target` was last read from the group.
    followed: Instant,
    /// How far it has applied.
    applied: Arc<AppliedPositions>,
    /// Its store, handed to the owner's task on a takeover (reopening it
    /// would replay its write-ahead log).
    store: Arc<Store>,
}

impl Standby {
    /// Stops its task after its step; logs how it ended; returns its
    /// store (the task's share of it dropped).
    fn finish(mut self, p: Partition) -> Arc<Store> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(Err(TaskError::Log(LogError::Interrupted)))) | Some(Ok(Ok(()))) | None => {}
            Some(Ok(Err(e))) => tracing::warn!(partition = p.0, error = %e, "standby failed"),
            Some(Err(_)) => tracing::error!(partition = p.0, "standby panicked"),
        }
        self.store
    }
}

impl Standbys {
    /// Stops `p`'s standby, if it has one, and keeps `p` from being stood
    /// by until [`Standbys::release`]: this processor's task takes its
    /// store over. The standby's store, still open, if it had one.
    pub(super) fn claim(&self, p: Partition) -> Option<Arc<Store>> {
        let mut r = lock(&self.inner);
        r.claimed.insert(p);
        // A standby of `p` being started holds its store: wait for it.
        while r.starting.contains(&p) {
            r = self.started.wait(r).unwrap_or_else(|e| e.into_inner());
        }
        let standby = r.running.remove(&p);
        drop(r);
        standby.map(|s| s.finish(p))
    }

    /// Keeps `partitions`, just assigned, from being stood by from now on
    /// (their standbys, if any, are claimed as their tasks start).
    pub(super) fn reserve(&self, partitions: &[Partition]) {
        lock(&self.inner).claimed.extend(partitions.iter().copied());
    }

    /// Forgets the claims of an earlier run of the processor.
    pub(super) fn forget_claims(&self) {
        lock(&self.inner).claimed.clear();
    }

    /// Partitions this processor no longer owns, their tasks stopped: they
    /// may be stood by again.
    pub(super) fn release(&self, partitions: &[Partition]) {
        let mut r = lock(&self.inner);
        for p in partitions {
            r.claimed.remove(p);
        }
    }

    /// Each running standby's applied positions.
    pub(super) fn positions(&self) -> BTreeMap<Partition, Positions> {
        lock(&self.inner)
            .running
            .iter()
            .map(|(&p, s)| (p, s.applied.get()))
            .collect()
    }

    /// `p`'s standby store and its positions, when it has applied every
    /// record up to the group's committed positions, read from the group
    /// within [`FRESH_FOR`] (a processor cut off from the brokers has no
    /// standby to read from).
    pub(super) fn caught_up(&self, p: Partition) -> Option<(Arc<Store>, Positions)> {
        let r = lock(&self.inner);
        let s = r.running.get(&p)?;
        let at = s.applied.get();
        (at == s.target.get() && s.followed.elapsed() < FRESH_FOR).then(|| (s.store.clone(), at))
    }

    fn running(&self) -> Vec<Partition> {
        lock(&self.inner).running.keys().copied().collect()
    }

    fn follow(&self, p: Partition, committed: Positions) {
        if let Some(s) = lock(&self.inner).running.get_mut(&p) {
            s.target.set(committed);
            s.followed = Instant::now();
        }
    }

    /// A standby's start ended: kept (it goes to a claim waiting for it,
    /// if any), or failed.
    fn started(&self, p: Partition, result: Result<Standby, ClusterError>) {
        let mut r = lock(&self.inner);
        r.starting.remove(&p);
        match result {
            Ok(s) => {
                r.retry_at.remove(&p);
                r.running.insert(p, s);
            }
            Err(e) => {
                tracing::warn!(partition = p.0, error = %e, "could not start a standby; retrying in 10 s");
                r.retry_at.insert(p, Instant::now() + RETRY_AFTER);
            }
        }
        drop(r);
        self.started.notify_all();
    }

    fn stop_all(&self) {
        let running = std::mem::take(&mut lock(&self.inner).running);
        for (p, s) in running {
            drop(s.finish(p));
        }
    }
}

impl Cluster {
    /// Keeps this processor's standbys (`cfg.standbys` per partition across
    /// the group) until `done` or shutdown: works out where they live every
    /// second, follows the group's committed positions four times a second,
    /// and has the control loop announce them when they moved (at most
    /// every two seconds). Problems are logged and retried; a standby is an
    /// optimisation, never a reason to stop processing.
    pub(super) fn keep_standbys(&self, done: &AtomicBool) {
        if self.cfg.standbys == 0 {
            return;
        }
        let (client, view) = match (
            GroupClient::new(&self.cfg.kafka, "the standbys' reader of the group"),
            MembersView::start(&self.cfg.kafka),
        ) {
            (Ok(c), Ok(v)) => (c, v),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(error = %e, "starting the standbys: this processor keeps none");
                return;
            }
        };
        let mut placed: Option<Instant> = None;
        let (mut announced, mut last_announce) = (BTreeMap::new(), Instant::now());
        while !done.load(Ordering::SeqCst) && !self.stopping.is_requested() {
            if placed.is_none_or(|t| t.elapsed() >= PLACE_EVERY) && view.caught_up() {
                placed = Some(Instant::now());
                let owners = view.owners();
                let live: BTreeSet<String> = match client.members() {
                    Ok(Some(ids)) => ids
                        .iter()
                        .filter_map(|id| id.strip_prefix("feedlog/").map(str::to_string))
                        .collect(),
                    // A broker that cannot describe groups: the members
                    // that announced themselves (one killed stays listed
                    // until it runs again).
                    Ok(None) => owners.members.keys().cloned().collect(),
                    Err(e) => {
                        tracing::debug!(error = %e, "describing the group for the standbys");
                        owners.members.keys().cloned().collect()
                    }
                };
                let by: BTreeMap<Partition, String> = owners
                    .partitions
                    .into_iter()
                    .map(|(p, (member, ..))| (p, member))
                    .collect();
                let want = placement(&by, &live, &self.cfg.member, self.cfg.standbys);
                self.place_standbys(&client, &want, done);
            }
            // Every standby's target, in one request.
            let running = self.standbys.running();
            if !running.is_empty() {
                match client.committed_all(&running) {
                    Ok(all) => {
                        for (&p, (committed, _)) in running.iter().zip(all) {
                            self.standbys.follow(p, committed);
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "reading the group's positions for the standbys")
                    }
                }
            }
            let now = self.standbys.positions();
            if now != announced && last_announce.elapsed() >= ANNOUNCE_EVERY {
                announced = now;
                last_announce = Instant::now();
                self.shared.changes.fetch_add(1, Ordering::SeqCst);
            }
            std::thread::sleep(FOLLOW_EVERY);
        }
        self.standbys.stop_all();
    }

    /// Stops the standbys not wanted any more (or whose task ended), and
    /// starts the wanted ones this processor neither owns nor is starting.
    /// Stores are opened and tasks joined without the registry's lock held
    /// (the control loop claims partitions through it).
    fn place_standbys(&self, client: &GroupClient, want: &BTreeSet<Partition>, done: &AtomicBool) {
        let owned: BTreeSet<Partition> = lock(&self.shared.owned).keys().copied().collect();
        let assigned = lock(&self.shared.to_start).clone();
        let (ended, to_start) = {
            let mut r = lock(&self.standbys.inner);
            let ended: Vec<Partition> = (r.running.iter())
                .filter(|(p, s)| {
                    !want.contains(p) || s.thread.as_ref().is_none_or(|t| t.is_finished())
                })
                .map(|(&p, _)| p)
                .collect();
            let mut stopped = Vec::new();
            for p in ended {
                if let Some(s) = r.running.remove(&p) {
                    if want.contains(&p) {
                        r.retry_at.insert(p, Instant::now() + RETRY_AFTER);
                    } else {
                        tracing::info!(
                            partition = p.0,
                            "standby no longer placed here: stopping it"
                        );
                    }
                    stopped.push((p, s));
                }
            }
            let now = Instant::now();
            let to_start: Vec<Partition> = (want.iter().copied())
                .filter(|p| {
                    let busy = r.running.contains_key(p)
                        || r.claimed.contains(p)
                        || r.starting.contains(p)
                        || owned.contains(p)
                        || assigned.contains(p);
                    let waiting = r.retry_at.get(p).is_some_and(|t| now < *t);
                    !busy && !waiting
                })
                .collect();
            r.starting.extend(to_start.iter().copied());
            (stopped, to_start)
        };
        for (p, s) in ended {
            drop(s.finish(p));
        }
        for p in to_start {
            if done.load(Ordering::SeqCst) || self.stopping.is_requested() {
                lock(&self.standbys.inner).starting.remove(&p);
                self.standbys.started.notify_all();
                continue;
            }
            self.standbys.started(p, self.start_standby(client, p));
        }
    }

    /// Opens `p`'s store as a standby (kept only when it is within the
    /// group's committed positions, else rebuilt; a checkpoint further
    /// along seeds it) and starts its task.
    fn start_standby(&self, client: &GroupClient, p: Partition) -> Result<Standby, ClusterError> {
        let (committed, group_epoch) = client.committed(p)?;
        let (store, local, _) = self.open_for(p, committed, group_epoch, true, None)?;
        self.check_retention(p, local)?;
        let task_err = |source| ClusterError::Task {
            partition: p,
            source,
        };
        start_with_threshold(&store, self.dir.pull_threshold()).map_err(task_err)?;
        let mut task = PartitionTask::open_after(
            self.cfg.processor.ctx(p, self.dir.partitions()),
            self.cfg.processor.limits,
            self.cfg.processor.sync,
            store.clone(),
            self.log.clone() as Arc<dyn Log>,
            // It emits nothing, so it stamps nothing.
            Takeover {
                epoch: Epoch::ZERO,
                emitted: Some(committed),
                reship: false,
            },
        )
        .map_err(task_err)?;
        task.stand_by();
        let (stop, target, applied) = (
            Arc::default(),
            Arc::new(AppliedPositions::default()),
            Arc::new(AppliedPositions::default()),
        );
        target.set(committed);
        applied.set(local);
        let mut hooks = StandbyHooks {
            stop: Arc::clone(&stop),
            stopping: self.stopping.clone(),
            target: Arc::clone(&target),
            applied: Arc::clone(&applied),
        };
        let nice = self.cfg.processor.writer_nice;
        let thread = std::thread::Builder::new()
            .name(format!("feedlog-s{p}"))
            .spawn(move || {
                crate::task::priority::lower_priority(nice);
                drive(&mut task, &mut hooks)
            })
            .map_err(|e| task_err(TaskError::Thread(e)))?;
        tracing::info!(partition = p.0, local = %local, committed = %committed, "standby started");
        Ok(Standby {
            stop,
            thread: Some(thread),
            target,
            followed: Instant::now(),
            applied,
            store,
        })
    }
}

/// A standby task's hooks into the step loop: it follows its target.
struct StandbyHooks {
    stop: Arc<AtomicBool>,
    stopping: Shutdown,
    target: Arc<AppliedPositions>,
    applied: Arc<AppliedPositions>,
}

impl Hooks for StandbyHooks {
    fn stop(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.stopping.is_requested()
    }

    fn after(&mut self, task: &mut PartitionTask, _: &StepStats) -> Result<(), TaskError> {
        self.applied.set(task.applied());
        task.follow(self.target.get());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(of: &[(u32, &str)]) -> BTreeMap<Partition, String> {
        of.iter()
            .map(|&(p, m)| (Partition(p), m.to_string()))
            .collect()
    }

    fn names(of: &[&str]) -> BTreeSet<String> {
        of.iter().map(|m| m.to_string()).collect()
    }

    fn parts(of: &[u32]) -> BTreeSet<Partition> {
        of.iter().map(|&p| Partition(p)).collect()
    }

    // Proves one standby per partition goes to the member after the owner, round the ring, never to the owner.
    #[test]
    fn one_standby_follows_the_owner_round_the_ring() {
        let o = owners(&[(0, "a"), (1, "b"), (2, "c"), (3, "c")]);
        let live = names(&["a", "b", "c"]);
        assert_eq!(placement(&o, &live, "a", 1), parts(&[2, 3]));
        assert_eq!(placement(&o, &live, "b", 1), parts(&[0]));
        assert_eq!(placement(&o, &live, "c", 1), parts(&[1]));
    }

    // Proves that with as many standbys as other members, every member stands by for every partition it does not own.
    #[test]
    fn enough_standbys_cover_every_other_member() {
        let o = owners(&[(0, "a"), (1, "b"), (2, "c"), (3, "a")]);
        let live = names(&["a", "b", "c"]);
        for me in ["a", "b", "c"] {
            let all: BTreeSet<Partition> = (o.iter())
                .filter(|(_, owner)| owner.as_str() != me)
                .map(|(&p, _)| p)
                .collect();
            assert_eq!(placement(&o, &live, me, 2), all, "{me}");
        }
    }

    // Proves each partition gets as many standbys as asked, or one on every other live member when fewer, a dead owner's included.
    #[test]
    fn each_partition_gets_its_count_of_standbys() {
        let o = owners(&[(0, "a"), (1, "b"), (2, "dead"), (3, "b"), (4, "a")]);
        let live = names(&["a", "b", "c"]);
        for count in 0..5 {
            for p in 0..5u32 {
                let holders = ["a", "b", "c"]
                    .iter()
                    .filter(|m| placement(&o, &live, m, count).contains(&Partition(p)))
                    .count();
                let others = if o[&Partition(p)] == "dead" { 3 } else { 2 };
                assert_eq!(
                    holders,
                    count.min(others),
                    "partition {p}, {count} standbys"
                );
            }
        }
    }
}
