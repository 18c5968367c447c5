//! What the control loop and the partition tasks share: the partitions owned, their
//! stores and positions, and how a task is stopped.

use super::standby::Standbys;
use super::TaskError;
use crate::core::fence::Epoch;
use crate::core::position::Positions;
use crate::core::Partition;
use crate::log::kafka::PartitionState;
use crate::state::checkpoint::CheckpointDir;
use crate::state::{Partitions, Store, Unavailable};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where one owned partition's task is.
pub(super) struct Owned {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) thread: Option<JoinHandle<Result<(), TaskError>>>,
    pub(super) store: Arc<Store>,
    /// Positions whose state is durable and outputs acknowledged.
    pub(super) applied: Arc<AppliedPositions>,
    pub(super) serving: Arc<AtomicBool>,
    /// The group's committed positions when the task started.
    pub(super) committed: Positions,
    /// This ownership's epoch, committed with every position and stamped
    /// on every `effects` record the task sends.
    pub(super) epoch: Epoch,
    /// Where the task holds its `events` for a consistent cut, if it does.
    pub(super) hold: Arc<Hold>,
}

/// A hold of a partition's `events` at an offset, for a consistent cut of
/// the group (`crate::ops::cut`): it lapses by itself after its time, so
/// a cut whose coordinator died does not stop the partition for good.
pub(super) struct Hold {
    at: AtomicU64,
    /// Until when, in ms since the epoch (0: not held).
    until_ms: AtomicU64,
    /// The hold the task applies from its next read on (`u64::MAX`: none).
    acked: AtomicU64,
}

impl Default for Hold {
    fn default() -> Hold {
        Hold {
            at: AtomicU64::new(0),
            until_ms: AtomicU64::new(0),
            acked: AtomicU64::new(u64::MAX),
        }
    }
}

impl Hold {
    fn set(&self, at: u64, ttl: Duration) {
        self.at.store(at, Ordering::SeqCst);
        let until = crate::log::now_ms() + ttl.as_millis() as u64;
        self.until_ms.store(until, Ordering::SeqCst);
    }

    fn clear(&self) {
        self.until_ms.store(0, Ordering::SeqCst);
    }

    /// The offset held at, while the hold runs.
    pub(super) fn current(&self) -> Option<u64> {
        (crate::log::now_ms() < self.until_ms.load(Ordering::SeqCst))
            .then(|| self.at.load(Ordering::SeqCst))
    }

    /// The task applies `at` from its next read on.
    pub(super) fn acknowledge(&self, at: Option<u64>) {
        self.acked.store(at.unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// The hold the task applies, as it last acknowledged.
    fn acknowledged(&self) -> Option<u64> {
        Some(self.acked.load(Ordering::SeqCst)).filter(|&a| a != u64::MAX)
    }
}

/// One owned partition at a cut: its applied positions and its hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CutState {
    /// The partition.
    pub partition: Partition,
    /// Applied (durable, outputs acknowledged) up to these positions.
    pub applied: Positions,
    /// Where its task holds its `events` (as it last acknowledged: no read
    /// past it since), if it does.
    pub held_at: Option<u64>,
}

/// How long this processor may still act as the owner of its partitions:
/// a span (three quarters of the session timeout) past the last commit the
/// group coordinator accepted from it — the control loop sends one every
/// third of the span and goes on, the answer confirming the lease when it
/// comes (`Cluster::renew_lease`), and one at each
/// partition's start. A process that was paused (a stop, a VM freeze, a
/// long GC) or cut off from the brokers finds its lease run out: its tasks
/// do not step and its partitions answer no reads until a commit proves
/// the coordinator still takes it for a member, or the group takes the
/// partitions away. The coordinator gives a partition to another member
/// only once this member's session expired, a whole session timeout after
/// its last heartbeat; heartbeats go every quarter of it, so that is at
/// least three quarters of it after any commit the coordinator accepted
/// from this member, and the lease counts from before the commit was sent:
/// two owners never both hold a running lease (clock rates aside). This
/// narrows what an old owner can do; the fence (`crate::core::fence`) is
/// what makes it harmless.
pub(super) struct Lease {
    base: Instant,
    /// Until when, in ms after `base` (0: never confirmed).
    until_ms: AtomicU64,
    span: Duration,
}

impl Lease {
    /// A lease of `span` from each confirmation, not confirmed yet.
    pub(super) fn new(span: Duration) -> Lease {
        Lease {
            base: Instant::now(),
            until_ms: AtomicU64::new(0),
            span,
        }
    }

    /// The span of the lease.
    pub(super) fn span(&self) -> Duration {
        self.span
    }

    /// This member was confirmed at `at`: the lease runs to `at + span`
    /// (it never shortens).
    pub(super) fn confirm(&self, at: Instant) {
        let until = at.saturating_duration_since(self.base) + self.span;
        self.until_ms
            .fetch_max(until.as_millis() as u64, Ordering::SeqCst);
    }

    /// Whether the lease runs now.
    pub(super) fn valid(&self) -> bool {
        (self.base.elapsed().as_millis() as u64) < self.until_ms.load(Ordering::SeqCst)
    }
}

/// A task's applied positions, shared with the control loop.
#[derive(Default)]
pub(super) struct AppliedPositions {
    pub(super) events: AtomicU64,
    pub(super) effects: AtomicU64,
}

impl AppliedPositions {
    pub(super) fn set(&self, p: Positions) {
        self.events.store(p.events.0, Ordering::SeqCst);
        self.effects.store(p.effects.0, Ordering::SeqCst);
    }

    pub(super) fn get(&self) -> Positions {
        Positions::new(
            self.events.load(Ordering::SeqCst),
            self.effects.load(Ordering::SeqCst),
        )
    }
}

/// State shared by the control loop, the tasks and readers.
pub struct Ownership {
    pub(super) owned: Mutex<BTreeMap<Partition, Owned>>,
    /// Partitions assigned but not started yet.
    pub(super) to_start: Mutex<BTreeSet<Partition>>,
    /// Bumped on every change of ownership or serving state.
    pub(super) changes: AtomicU64,
    pub(super) count: u32,
    /// Whether this processor may act as the owner of its partitions now.
    pub(super) lease: Lease,
    /// This processor's warm standbys.
    pub(super) standbys: Arc<Standbys>,
    /// Partitions whose owner cannot be reached, read from their standby
    /// here until then ([`Partitions::read_standby`]).
    pub(super) standby_reads: Mutex<BTreeMap<Partition, Instant>>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A task thread that panicked leaves the map usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Partitions for Ownership {
    fn count(&self) -> u32 {
        self.count
    }

    fn store(&self, p: Partition) -> Result<Arc<Store>, Unavailable> {
        match lock(&self.owned).get(&p) {
            // Ownership not confirmed lately: maybe another processor's.
            Some(_) if !self.lease.valid() => Err(Unavailable::Moving { partition: p }),
            Some(o) if o.serving.load(Ordering::SeqCst) => Ok(o.store.clone()),
            Some(_) => Err(Unavailable::Moving { partition: p }),
            None if lock(&self.to_start).contains(&p) => Err(Unavailable::Moving { partition: p }),
            None => self
                .standby_store(p)
                .ok_or(Unavailable::Elsewhere { partition: p }),
        }
    }

    fn standby_reading(&self, p: Partition) -> Option<Positions> {
        // Asked for every read: the map, empty but for an owner's death,
        // first.
        let until = lock(&self.standby_reads).get(&p).copied()?;
        if lock(&self.owned).contains_key(&p) {
            return None;
        }
        (Instant::now() < until)
            .then(|| self.standbys.caught_up(p).map(|(_, at)| at))
            .flatten()
    }

    fn read_standby(&self, p: Partition, span: Duration) -> Option<Positions> {
        let (_, at) = self.standbys.caught_up(p)?;
        lock(&self.standby_reads).insert(p, Instant::now() + span);
        Some(at)
    }

    fn local(&self) -> Vec<(Partition, Arc<Store>)> {
        if !self.lease.valid() {
            return Vec::new();
        }
        self.partitions()
            .into_iter()
            .filter(|(_, (_, st))| *st == PartitionState::Serving)
            .map(|(p, (s, _))| (p, s))
            .collect()
    }
}

impl Ownership {
    /// `p`'s standby store while reads of `p` go to it: caught up with
    /// the group's committed positions, within the span asked for.
    fn standby_store(&self, p: Partition) -> Option<Arc<Store>> {
        let until = lock(&self.standby_reads).get(&p).copied()?;
        if Instant::now() >= until {
            lock(&self.standby_reads).remove(&p);
            return None;
        }
        self.standbys.caught_up(p).map(|(store, _)| store)
    }

    /// The stores of owned partitions and their state.
    pub fn partitions(&self) -> BTreeMap<Partition, (Arc<Store>, PartitionState)> {
        lock(&self.owned)
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

    /// Holds the `events` of partition `p` at offset `at` for up to `ttl`
    /// (renewed by asking again), and says where it is; `None` when this
    /// processor does not serve `p`.
    pub fn hold(&self, p: Partition, at: u64, ttl: Duration) -> Option<CutState> {
        {
            let owned = lock(&self.owned);
            let o = owned.get(&p).filter(|o| o.serving.load(Ordering::SeqCst))?;
            o.hold.set(at, ttl);
        }
        self.cut_state(p)
    }

    /// The store of partition `p` and its owner epoch, while this
    /// processor serves it.
    pub fn serving_store(&self, p: Partition) -> Option<(Arc<Store>, Epoch)> {
        let owned = lock(&self.owned);
        let o = owned.get(&p).filter(|o| o.serving.load(Ordering::SeqCst))?;
        Some((o.store.clone(), o.epoch))
    }

    /// Lets partition `p` read its `events` on.
    pub fn release(&self, p: Partition) {
        if let Some(o) = lock(&self.owned).get(&p) {
            o.hold.clear();
        }
    }

    /// Where partition `p` is and whether it is held; `None` when this
    /// processor does not serve it.
    pub fn cut_state(&self, p: Partition) -> Option<CutState> {
        let owned = lock(&self.owned);
        let o = owned.get(&p).filter(|o| o.serving.load(Ordering::SeqCst))?;
        Some(CutState {
            partition: p,
            applied: o.applied.get(),
            held_at: o.hold.acknowledged(),
        })
    }

    /// A counter that moves whenever ownership or serving state changes.
    pub fn version(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    /// The positions to commit for `owned`, never behind what the group
    /// had when each task started (a task still replaying below its
    /// predecessors' positions must not move the group back).
    pub(super) fn commit_positions(
        owned: &BTreeMap<Partition, Owned>,
    ) -> Vec<(Partition, Positions, Epoch)> {
        owned
            .iter()
            .map(|(&p, o)| (p, o.applied.get().max(o.committed), o.epoch))
            .collect()
    }

    /// Stops every partition this processor owns (see [`Ownership::stop`]).
    pub(super) fn stop_all(&self) -> BTreeMap<Partition, Owned> {
        let all: Vec<Partition> = lock(&self.owned).keys().copied().collect();
        self.stop(&all)
    }

    /// Stops the tasks of `partitions`, waiting for each to finish its step;
    /// returns them with their final positions.
    pub(super) fn stop(&self, partitions: &[Partition]) -> BTreeMap<Partition, Owned> {
        self.stop_while(partitions, &|| {})
    }

    /// Stops the tasks of `partitions` that are no longer this processor's
    /// (the assignment was lost, or a fatal error): every task is told to
    /// stop first, then `drop_unsent` runs until each has finished, so that
    /// a task waiting for the acknowledgement of a record — sent before or
    /// after the first drop, to brokers that may be out of reach — gets a
    /// failed delivery instead of waiting for ever.
    pub(super) fn stop_lost(
        &self,
        partitions: &[Partition],
        drop_unsent: &dyn Fn(),
    ) -> BTreeMap<Partition, Owned> {
        self.stop_while(partitions, drop_unsent)
    }

    fn stop_while(
        &self,
        partitions: &[Partition],
        while_waiting: &dyn Fn(),
    ) -> BTreeMap<Partition, Owned> {
        {
            let mut to_start = lock(&self.to_start);
            for p in partitions {
                to_start.remove(p);
            }
        }
        let mut stopped = BTreeMap::new();
        {
            let mut owned = lock(&self.owned);
            for p in partitions {
                if let Some(o) = owned.remove(p) {
                    o.stop.store(true, Ordering::SeqCst);
                    stopped.insert(*p, o);
                }
            }
        }
        for (p, o) in stopped.iter_mut() {
            if let Some(t) = o.thread.take() {
                while !t.is_finished() {
                    while_waiting();
                    std::thread::sleep(Duration::from_millis(20));
                }
                match t.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(partition = p.0, error = %e, "task ended with an error")
                    }
                    Err(_) => tracing::error!(partition = p.0, "task panicked"),
                }
            }
        }
        if !stopped.is_empty() {
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
        stopped
    }

    pub(super) fn serving_states(&self) -> BTreeMap<Partition, PartitionState> {
        self.partitions()
            .into_iter()
            .map(|(p, (_, st))| (p, st))
            .collect()
    }
}

/// Checkpoints the partitions just given up (their tasks stopped), so
/// whoever takes them over replays only what follows — also when the broker
/// refused the handover commit (see [`crate::task::handover`]).
pub(super) fn checkpoint_all(dir: Option<&CheckpointDir>, stopped: &BTreeMap<Partition, Owned>) {
    let Some(dir) = dir else { return };
    for (&p, o) in stopped {
        let start = Instant::now();
        match dir.write(p, &o.store, o.epoch, true) {
            Ok(c) => tracing::info!(
                partition = p.0,
                positions = %c.positions,
                ms = start.elapsed().as_millis() as u64,
                "checkpoint written for the next owner"
            ),
            Err(e) => tracing::warn!(partition = p.0, error = %e, "writing a checkpoint"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Lease;
    use std::time::{Duration, Instant};

    // Proves a lease runs only from a confirmation, for its span, and never shortens when an older confirmation arrives.
    #[test]
    fn a_lease_runs_for_its_span_from_the_latest_confirmation() {
        let lease = Lease::new(Duration::from_millis(200));
        assert!(!lease.valid(), "not confirmed yet");
        lease.confirm(Instant::now());
        assert!(lease.valid());
        std::thread::sleep(Duration::from_millis(250));
        assert!(!lease.valid(), "the span passed");
        let old = Instant::now() - Duration::from_millis(300);
        lease.confirm(old);
        assert!(
            !lease.valid(),
            "a confirmation older than the span extends nothing"
        );
        lease.confirm(Instant::now());
        lease.confirm(old);
        assert!(lease.valid(), "an older confirmation does not shorten it");
    }
}
