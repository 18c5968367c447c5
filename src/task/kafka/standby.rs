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
use crate::task::partition::{start_with_threshold, Takeover};
use crate::task::runner::{drive, Hooks};
use crate::task::{PartitionTask, Shutdown, TaskError};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the standbys follow the group's committed positions.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);
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
}

#[derive(Default)]
struct Registry {
    running: BTreeMap<Partition, Standby>,
    /// Partitions this processor owns, or is starting to own: never stood
    /// by (their stores are the tasks').
    claimed: BTreeSet<Partition>,
    /// Standbys that failed, not started again before then.
    retry_at: BTreeMap<Partition, Instant>,
}

/// One running standby.
struct Standby {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), TaskError>>>,
    /// How far it may apply: the group's committed positions, as last read.
    target: Arc<AppliedPositions>,
    /// How far it has applied.
    applied: Arc<AppliedPositions>,
}

impl Standby {
    /// Stops its task after its step; logs how it ended.
    fn finish(mut self, p: Partition) {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(Err(TaskError::Log(LogError::Interrupted)))) | Some(Ok(Ok(()))) | None => {}
            Some(Ok(Err(e))) => tracing::warn!(partition = p.0, error = %e, "standby failed"),
            Some(Err(_)) => tracing::error!(partition = p.0, "standby panicked"),
        }
    }
}

impl Standbys {
    /// Stops `p`'s standby, if it has one, and keeps `p` from being stood
    /// by until [`Standbys::release`]: this processor's task takes its
    /// store over. Whether a standby was running.
    pub(super) fn claim(&self, p: Partition) -> bool {
        let mut r = lock(&self.inner);
        r.claimed.insert(p);
        match r.running.remove(&p) {
            Some(s) => {
                s.finish(p);
                true
            }
            None => false,
        }
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

    fn running(&self) -> Vec<Partition> {
        lock(&self.inner).running.keys().copied().collect()
    }

    fn follow(&self, p: Partition, committed: Positions) {
        if let Some(s) = lock(&self.inner).running.get(&p) {
            s.target.set(committed);
        }
    }

    fn stop_all(&self) {
        let running = std::mem::take(&mut lock(&self.inner).running);
        for (p, s) in running {
            s.finish(p);
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
        let mut placed = Instant::now() - PLACE_EVERY;
        let (mut announced, mut last_announce) = (BTreeMap::new(), Instant::now());
        while !done.load(Ordering::SeqCst) && !self.stopping.is_requested() {
            if placed.elapsed() >= PLACE_EVERY && view.caught_up() {
                placed = Instant::now();
                let owners = view.owners();
                let live: BTreeSet<String> = match client.members() {
                    Ok(Some(ids)) => ids
                        .iter()
                        .filter_map(|id| id.strip_prefix("feedlog/").map(str::to_string))
                        .collect(),
                    // A broker that cannot describe groups: the members
                    // that announced themselves.
                    _ => owners.members.keys().cloned().collect(),
                };
                let by: BTreeMap<Partition, String> = owners
                    .partitions
                    .into_iter()
                    .map(|(p, (member, ..))| (p, member))
                    .collect();
                let want = placement(&by, &live, &self.cfg.member, self.cfg.standbys);
                self.place_standbys(&client, &want);
            }
            for p in self.standbys.running() {
                match client.committed(p) {
                    Ok((committed, _)) => self.standbys.follow(p, committed),
                    Err(e) => {
                        tracing::debug!(partition = p.0, error = %e, "reading the group's positions for a standby")
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
    fn place_standbys(&self, client: &GroupClient, want: &BTreeSet<Partition>) {
        let mut r = lock(&self.standbys.inner);
        let ended: Vec<Partition> = (r.running.iter())
            .filter(|(p, s)| !want.contains(p) || s.thread.as_ref().is_none_or(|t| t.is_finished()))
            .map(|(&p, _)| p)
            .collect();
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
                s.finish(p);
            }
        }
        let owned: BTreeSet<Partition> = lock(&self.shared.owned).keys().copied().collect();
        let starting = lock(&self.shared.to_start).clone();
        let now = Instant::now();
        for &p in want {
            let busy = r.running.contains_key(&p) || r.claimed.contains(&p);
            let waiting = r.retry_at.get(&p).is_some_and(|t| now < *t);
            if busy || waiting || owned.contains(&p) || starting.contains(&p) {
                continue;
            }
            match self.start_standby(client, p) {
                Ok(s) => {
                    r.retry_at.remove(&p);
                    r.running.insert(p, s);
                }
                Err(e) => {
                    tracing::warn!(partition = p.0, error = %e, "could not start a standby; retrying in 10 s");
                    r.retry_at.insert(p, now + RETRY_AFTER);
                }
            }
        }
    }

    /// Opens `p`'s store as a standby (kept only when it is within the
    /// group's committed positions, else rebuilt; a checkpoint further
    /// along seeds it) and starts its task.
    fn start_standby(&self, client: &GroupClient, p: Partition) -> Result<Standby, ClusterError> {
        let (committed, group_epoch) = client.committed(p)?;
        let (store, local, _) = self.open_for(p, committed, group_epoch, true)?;
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
            store,
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
            applied,
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
