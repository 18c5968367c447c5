//! One partition's owner: read → decode → core → commit → ship.
//!
//! A step:
//! 1. reads a bounded batch from `effects[p]` and `events[p]`;
//! 2. decodes each record (a bad one becomes a dead letter) and applies it
//!    through the core into one [`Txn`]: every event read, and effects until
//!    the batch holds [`BatchLimits::max_writes`] writes (the others wait
//!    for the next step). The `Txn` reads the store through the task's
//!    [`ReadCache`];
//! 3. commits, in **one** RocksDB `WriteBatch`, the state changes, both input
//!    positions, and every outgoing record (effects and dead letters) into the
//!    `pending` column family, then records the committed writes in the
//!    read cache;
//! 4. ships the pending records to their logs, and deletes them in the next
//!    commit.

use super::faults::{CrashPoint, Faults, NoFaults};
use super::input::{apply_record, decode_effects, Input};
use super::outbox::{ship, Pending};
pub use super::takeover::{start_with_threshold, Takeover};
use super::TaskError;
use crate::core::codec::{EffectsError, Envelope};
use crate::core::keys;
use crate::core::kv::{Cf, Kv, Txn};
use crate::core::metrics::StepStats;
use crate::core::position::{Offset, Positions};
use crate::core::requests::Requests;
use crate::core::Partition;
use crate::core::{Ctx, Effect, Epoch, Stamp};
use crate::log::{Log, Record, Sink, Source, Topic};
use crate::state::meta;
use crate::state::reads::Cached;
use crate::state::{ReadCache, Store, StoreError};
use std::collections::VecDeque;
use std::sync::Arc;

/// Limits of one step.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    /// Records read per input per step (effects waiting to be applied
    /// count one each, however many records carried them).
    pub max_records: usize,
    /// Bytes read per input per step.
    pub max_bytes: usize,
    /// Writes staged per step: once a step's batch holds this many, the
    /// effects not applied yet wait for the next step (the events read are
    /// always applied; an effects record is applied whole, so a step may
    /// pass the budget by one record's writes). A smaller batch keeps its in-memory overlay, which
    /// every read of the step searches, small.
    pub max_writes: usize,
    /// Point reads of users and edges the task keeps in memory across
    /// steps ([`ReadCache`]), in entries (about 100 bytes each); `0` turns
    /// the cache off.
    pub cached_reads: usize,
}

impl BatchLimits {
    /// Limits for a replay that nobody reads while it runs (`rebuild`,
    /// `backfill`): steps of up to 65,536 records per input, so a replay
    /// commits less often and writes each user record fewer times
    /// (docs/benchmark-runs.md, "Rebuild from the log vs raw log reads and
    /// raw RocksDB puts": about a tenth faster than the live steps,
    /// for about 0.3 GB more memory over eight partitions). Latency does
    /// not matter there; a live processor keeps the smaller default.
    pub fn replay() -> BatchLimits {
        BatchLimits {
            max_records: 1 << 16,
            max_bytes: 32 << 20,
            ..BatchLimits::default()
        }
    }
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            max_records: 2048,
            max_bytes: 4 << 20,
            max_writes: 1 << 16,
            cached_reads: 1 << 16,
        }
    }
}

/// The owner of one partition.
pub struct PartitionTask {
    ctx: Ctx,
    /// This owner's epoch (see [`Takeover::epoch`]).
    epoch: Epoch,
    limits: BatchLimits,
    store: Arc<Store>,
    /// The committed values of the hottest point reads (taken out of the
    /// task while a step runs).
    reads: ReadCache,
    log: Arc<dyn Log>,
    sink: Box<dyn Sink>,
    events: Box<dyn Source>,
    effects: Box<dyn Source>,
    next_seq: u64,
    /// Pending records below this sequence number are shipped and not yet
    /// deleted.
    shipped_below: Option<u64>,
    /// Whether this step applies its events before its effects.
    events_first: bool,
    /// What this task is to its partition.
    role: Role,
    /// What an owner asked for once caught up (the core decides what).
    requests: Requests,
    /// Records below these positions were answered by a previous owner:
    /// applied quietly, nothing emitted.
    quiet_below: Positions,
    /// Effects records read but not applied yet, decoded, in offset order:
    /// each waits until `events` is applied up to what its effects require
    /// ([`Effect::requires_events`]).
    /// Each with the `events` position its effects require, found once.
    waiting: VecDeque<(Record, Result<Envelope, EffectsError>, Offset)>,
    /// Where `events` is applied up to (next offset).
    events_applied: Offset,
    /// Positions before the last [`PartitionTask::redeliver`]: everything
    /// below them is applied, whatever the readers re-read.
    applied_below: Positions,
    /// No `events` record at or past this offset is read while it is set
    /// (a consistent cut: [`PartitionTask::hold_events`]).
    events_held_at: Option<Offset>,
}

/// What a task is to its partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Its owner: it answers what it applies past the quiet replay, and
    /// asks for what its state implies once caught up.
    Owner,
    /// A replay that brings a state up to a target over a log it may not
    /// write (a rebuild, a swap's catch-up): it asks nothing; the owner
    /// that takes the state over does, once caught up.
    ReplayForNextOwner,
    /// A warm standby of a partition another processor owns: it applies
    /// quietly up to the owner's committed positions and never past them.
    Standby,
}

impl PartitionTask {
    /// Opens the task at its stored positions, first re-shipping whatever the
    /// previous owner committed but may not have shipped; it stamps what it
    /// sends with `epoch`.
    pub fn open(
        ctx: Ctx,
        limits: BatchLimits,
        sync_logs: bool,
        store: Arc<Store>,
        log: Arc<dyn Log>,
        epoch: Epoch,
    ) -> Result<PartitionTask, TaskError> {
        let takeover = Takeover::resume(epoch);
        PartitionTask::open_after(ctx, limits, sync_logs, store, log, takeover)
    }

    /// Opens the task of a partition that other owners may have processed
    /// since this store last did (see [`Takeover`]): the task reads from its
    /// own stored positions, and below `takeover.emitted` it applies records
    /// to its state but emits nothing — previous owners emitted all of that
    /// already (a rebuild that does not re-emit). Its unshipped outbox is
    /// re-shipped only with `takeover.reship`; when another owner has had
    /// the partition since, those records answered inputs the other owner
    /// has answered too, and a late re-ship could overtake its newer
    /// messages (the fence would skip them; not sending them is cheaper).
    pub fn open_after(
        ctx: Ctx,
        limits: BatchLimits,
        sync_logs: bool,
        store: Arc<Store>,
        log: Arc<dyn Log>,
        takeover: Takeover,
    ) -> Result<PartitionTask, TaskError> {
        let p = ctx.partition;
        let at = store.positions()?;
        let events = log.source(Topic::Events, p, at.events)?;
        let effects = log.source(Topic::Effects, p, at.effects)?;
        let next_seq = store.meta_u64(meta::NEXT_SEQ)?;
        let sink = log.clone().sink(sync_logs)?;
        let applied_below = meta::applied(&*store)?.unwrap_or_default();
        let mut task = PartitionTask {
            ctx,
            epoch: takeover.epoch,
            reads: ReadCache::new(limits.cached_reads),
            limits,
            store,
            log,
            sink,
            events_applied: events.position(),
            events,
            effects,
            next_seq,
            shipped_below: None,
            events_first: false,
            role: Role::Owner,
            requests: Requests::default(),
            quiet_below: takeover.emitted.unwrap_or_default(),
            waiting: VecDeque::new(),
            applied_below,
            events_held_at: None,
        };
        if !takeover.reship {
            task.shipped_below = Some(task.next_seq);
            task.forget_shipped()?;
        }
        let pending: Vec<Pending> = task
            .store
            .scan(Cf::Pending, &[], None)
            .map(|r| {
                let (k, v) = r?;
                Pending::decode(&v)
                    .ok_or_else(|| StoreError::corrupt(Cf::Pending, &k, "bad pending record"))
            })
            .collect::<Result<_, _>>()?;
        if !pending.is_empty() {
            tracing::info!(
                partition = p.0,
                records = pending.len(),
                "re-shipping committed records"
            );
            ship(&mut *task.sink, &pending, &mut NoFaults)?;
            task.shipped_below = Some(task.next_seq);
            task.forget_shipped()?;
        }
        Ok(task)
    }

    /// This task's partition.
    pub fn partition(&self) -> Partition {
        self.ctx.partition
    }

    /// What this owner stamps on the `effects` records it sends.
    pub fn stamp(&self) -> Stamp {
        Stamp {
            from: self.ctx.partition,
            epoch: self.epoch,
        }
    }

    /// Next offsets to apply in `events[p]` and `effects[p]` (what a
    /// restart resumes from; a redelivery moves them back, so that a restart
    /// re-reads everything after the redelivered records too).
    pub fn positions(&self) -> Positions {
        let effects = self
            .waiting
            .front()
            .map_or(self.effects.position(), |(r, ..)| r.offset);
        Positions {
            events: self.events.position(),
            effects,
        }
    }

    /// Positions below which every input is applied and answered: what a
    /// consumer group may commit. Unlike [`PartitionTask::positions`] they
    /// never go back on a redelivery, which could pair an `effects`
    /// position with an `events` position below what those effects
    /// required (a successor replaying quietly up to such a pair would wait
    /// forever).
    pub fn applied(&self) -> Positions {
        self.positions().max(self.applied_below)
    }

    /// Reads no `events` record at or past `at` until called again with
    /// `None`; effects are still read and applied (those that wait for held
    /// events keep waiting). Nothing already applied is undone: a task past
    /// `at` stays where it is.
    pub fn hold_events(&mut self, at: Option<Offset>) {
        self.events_held_at = at;
    }

    /// For a replay that only brings a state up to a target over a log it
    /// may not write (a rebuild, a swap's catch-up): the refills the state
    /// awaits are asked by the owner that takes the state over (its task
    /// asks once caught up), not by this one.
    pub fn leave_requests_to_the_next_owner(&mut self) {
        if self.role == Role::Owner {
            self.role = Role::ReplayForNextOwner;
        }
    }

    /// Makes this task a warm standby of a partition another processor
    /// owns: it applies inputs quietly up to the positions
    /// [`PartitionTask::follow`] gives (the owner's committed positions) and
    /// never past them, so it emits nothing and asks nothing (every input it
    /// applies was answered by the owner); the task of the processor that
    /// takes the partition over resumes from its state.
    pub fn stand_by(&mut self) {
        self.role = Role::Standby;
    }

    /// Raises how far a standby (or a quiet replay) may apply to `to`;
    /// never lowers it.
    pub fn follow(&mut self, to: Positions) {
        self.quiet_below = self.quiet_below.max(to);
    }

    /// Whether the quiet replay below the previous owners' positions is over
    /// (the state has caught up with what they did).
    pub fn caught_up(&self) -> bool {
        self.positions().covers(self.quiet_below)
    }

    /// Moves a reader back by up to `records` records without touching state:
    /// the next steps see those records again, as after an at-least-once
    /// redelivery. Versions make the repeats no-ops.
    pub fn redeliver(&mut self, topic: Topic, records: u64) -> Result<(), TaskError> {
        let p = self.ctx.partition;
        let at = self.positions();
        self.applied_below = self.applied();
        match topic {
            Topic::Events => {
                let to = Offset(at.events.0.saturating_sub(records));
                self.events = self.log.source(topic, p, to)?;
                self.events_applied = to;
            }
            Topic::Effects => {
                let to = Offset(at.effects.0.saturating_sub(records));
                self.waiting.clear();
                self.effects = self.log.source(topic, p, to)?;
            }
            Topic::DeadLetter => {}
        }
        Ok(())
    }

    /// Processes one batch. Zero input in the returned stats means there was
    /// nothing to read.
    pub fn step(&mut self, faults: &mut dyn Faults) -> Result<StepStats, TaskError> {
        let reads = std::mem::replace(&mut self.reads, ReadCache::new(0));
        let stepped = self.step_with(&reads, faults);
        self.reads = reads;
        stepped
    }

    fn step_with(
        &mut self,
        reads: &ReadCache,
        faults: &mut dyn Faults,
    ) -> Result<StepStats, TaskError> {
        let events = self.read_inputs()?;
        let mut stats = StepStats::default();
        if self.waiting.is_empty() && events.is_empty() {
            self.forget_shipped()?;
            return Ok(stats);
        }
        let store = self.store.clone();
        let base = reads.over(&store);
        let mut txn = Txn::new(&base);
        let mut pending = Vec::new();
        self.apply_batch(events, &mut txn, &mut pending, &mut stats)?;
        if stats.input() == 0 {
            // Only effects waiting for events not read yet.
            return Ok(stats);
        }
        let writes = txn.into_writes();
        if faults.crash_at(CrashPoint::BeforeCommit) {
            return Err(TaskError::Crashed(CrashPoint::BeforeCommit));
        }
        stats.commit_micros = self.commit(&writes, &pending)?;
        if stats.fenced > 0 {
            tracing::warn!(
                partition = self.ctx.partition.0,
                records = stats.fenced,
                "skipped effects records of an owner older than one already applied from the same \
                 partition (fenced; listed in the dead-letter log)"
            );
        }
        reads.committed(&writes);
        if faults.crash_at(CrashPoint::AfterCommit) {
            return Err(TaskError::Crashed(CrashPoint::AfterCommit));
        }
        ship(&mut *self.sink, &pending, faults)?;
        self.shipped_below = Some(self.next_seq);
        Ok(stats)
    }

    /// Reads the next effects into `waiting` and returns the next events.
    /// Until the quiet replay is over, neither input reads past what
    /// previous owners answered: every input below both marks is applied
    /// before any input is answered, so the first answers come from a
    /// state that holds everything the previous owners had answered
    /// (answers depend on what was applied before them).
    fn read_inputs(&mut self) -> Result<Vec<Record>, TaskError> {
        let end = (self.role == Role::Standby || !self.caught_up()).then_some(self.quiet_below);
        // Reading stops once `max_records` effects wait (an effects record
        // carries up to 256, and the decoded effects are what takes
        // memory); one read adds at most `room` records and `max_bytes`.
        let waiting: usize = self
            .waiting
            .iter()
            .map(|(_, e, _)| e.as_ref().map_or(1, |e| e.effects.len()))
            .sum();
        let room = self.limits.max_records.saturating_sub(waiting);
        if room > 0 {
            let read = self
                .effects
                .read(room, self.limits.max_bytes, end.map(|e| e.effects))?;
            for rec in read {
                let effects = decode_effects(&rec);
                let requires = effects.as_ref().map_or(Offset(0), |envelope| {
                    envelope
                        .effects
                        .iter()
                        .map(Effect::requires_events)
                        .max()
                        .unwrap_or_default()
                });
                self.waiting.push_back((rec, effects, requires));
            }
        }
        let events_end = match (end.map(|e| e.events), self.events_held_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(self
            .events
            .read(self.limits.max_records, self.limits.max_bytes, events_end)?)
    }

    /// Applies what is ready of `events` and the waiting effects, in turn;
    /// outgoing records go to `pending`, except below the quiet marks.
    fn apply_batch(
        &mut self,
        events: Vec<Record>,
        txn: &mut Txn<'_, Cached<'_>>,
        pending: &mut Vec<Pending>,
        stats: &mut StepStats,
    ) -> Result<(), TaskError> {
        // Alternate which input goes first, so no message kind is always
        // applied ahead of the other (either order is correct), except that
        // an effect waits for the events it requires.
        self.events_first = !self.events_first;
        let mut out = Vec::new();
        let mut events = events.into_iter().peekable();
        loop {
            let effect_ready = self
                .waiting
                .front()
                .map(|(rec, _, required)| self.effect_ready(rec.offset, *required));
            // Past the batch's write budget, the events read are applied
            // and the effects wait (they stay in `waiting`).
            let full = txn.staged() >= self.limits.max_writes.max(1);
            let events_next = events.peek().is_some()
                && (self.events_first || full || effect_ready != Some(true));
            let input = match (events_next, effect_ready) {
                (true, _) => match events.next() {
                    Some(rec) => {
                        self.events_applied = rec.offset.next();
                        Input::Event(rec)
                    }
                    None => break,
                },
                (false, Some(true)) if full => break,
                (false, Some(true)) => match self.waiting.pop_front() {
                    Some((rec, effect, _)) => Input::Effect(rec, effect),
                    None => break,
                },
                _ => break,
            };
            let quiet = match &input {
                Input::Event(r) => r.offset < self.quiet_below.events,
                Input::Effect(r, _) => r.offset < self.quiet_below.effects,
            };
            let emitted_before = (out.len(), pending.len());
            let applied = apply_record(&self.ctx, txn, input, &mut out, pending, stats)?;
            if quiet {
                // What a quiet input (one an earlier owner, or this one,
                // applied and answered before) sends is dropped; what it
                // leaves unasked is asked below, once caught up.
                self.requests.after_quiet(&applied);
                out.truncate(emitted_before.0);
                pending.truncate(emitted_before.1);
                stats.replayed += 1;
            }
        }
        // The requests below go out only with a batch that commits: a step
        // that applied nothing (effects waiting for events not read yet)
        // commits nothing and drops its outgoing records, and a request
        // marked as asked there would never be sent.
        let commits = stats.input() > 0;
        // Once caught up (what follows is this owner's to answer), ask for
        // what the state implies (the core's `Requests`). A standby or a
        // replay for the next owner asks nothing: the owner does once
        // caught up.
        if commits && self.caught_up() && self.role == Role::Owner {
            out.extend(self.requests.once_caught_up(&*txn, &self.ctx)?);
        }
        stats.emitted = out.len() as u64;
        pending.extend(Pending::effects(out, self.stamp()));
        Ok(())
    }

    /// Whether the waiting effects record at `offset`, which requires
    /// `events` applied up to `required`, may be applied now. Below the
    /// quiet marks it also waits for every quiet `events` record: the
    /// previous owners applied those effects with at most those events
    /// applied (the marks are one owner's positions at one time), so every
    /// event that caused one of them lies below the `events` mark. A
    /// message can depend on more of its receiver's own events than the
    /// follow it names — a backfill or a pull sent when an unblock or a
    /// later follow revived a voided edge needs that event too, or the
    /// receiver drops it as sent for an edge that does not count — and a
    /// replay that applied it before them would lose it for good (the
    /// sender answers each revival once). A hold of `events` below the mark
    /// caps the wait, so effects still go on while it lasts.
    fn effect_ready(&self, offset: Offset, required: Offset) -> bool {
        let mut required = required;
        if offset < self.quiet_below.effects {
            let held = self.events_held_at.unwrap_or(self.quiet_below.events);
            required = required.max(self.quiet_below.events.min(held));
        }
        required <= self.events_applied
    }

    /// Commits the batch's writes, both positions and the outgoing records
    /// in one `WriteBatch` (forgetting what the last batch shipped); returns
    /// the commit's time in µs.
    fn commit(
        &mut self,
        writes: &crate::core::kv::Writes,
        pending: &[Pending],
    ) -> Result<u64, TaskError> {
        let first_seq = self.next_seq;
        let next_seq = first_seq + pending.len() as u64;
        let at = self.positions();
        let applied = self.applied();
        let shipped_below = self.shipped_below;
        let start = std::time::Instant::now();
        self.store.commit(writes, |b| {
            b.put(Cf::Meta, meta::POS_EVENTS, &at.events.0.to_be_bytes());
            b.put(Cf::Meta, meta::POS_EFFECTS, &at.effects.0.to_be_bytes());
            b.put(Cf::Meta, meta::APPLIED, &meta::applied_value(applied));
            b.put(Cf::Meta, meta::NEXT_SEQ, &next_seq.to_be_bytes());
            for (i, rec) in pending.iter().enumerate() {
                b.put(
                    Cf::Pending,
                    &keys::key([first_seq + i as u64]),
                    &rec.encode(),
                );
            }
            if let Some(below) = shipped_below {
                b.delete_range(Cf::Pending, &keys::key([0]), &keys::key([below]));
            }
        })?;
        self.next_seq = next_seq;
        self.shipped_below = None;
        Ok(start.elapsed().as_micros() as u64)
    }

    /// Deletes shipped pending records now (when no batch will carry it).
    fn forget_shipped(&mut self) -> Result<(), TaskError> {
        if let Some(below) = self.shipped_below.take() {
            self.store.commit(&Default::default(), |b| {
                b.delete_range(Cf::Pending, &keys::key([0]), &keys::key([below]));
            })?;
        }
        Ok(())
    }
}
