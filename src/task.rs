//! One partition's owner: read → decode → core → commit → ship.
//!
//! This is the only place where the pure core meets I/O. A step:
//! 1. reads a bounded batch from `effects[p]` and `events[p]`;
//! 2. decodes each record (a bad one becomes a dead letter) and applies it
//!    through the core into one [`Txn`];
//! 3. commits, in **one** RocksDB `WriteBatch`, the state changes, both input
//!    positions, and every outgoing record (effects and dead letters) into the
//!    `pending` column family;
//! 4. ships the pending records to their logs, and deletes them in the next
//!    commit.
//!
//! Only committed work is ever shipped (a transactional outbox), so a crash
//! at any point can duplicate a suffix of already-committed effects —
//! harmless, every effect is idempotent under version dedup — but can never
//! emit effects of work that was not committed and may be redone differently.

use crate::codec::{self, Format, Forwarded};
use crate::core::{self, Ctx, Effect, Out};
use crate::event::{Event, EventKind};
use crate::log::{Log, LogError, NewRecord, Record, Sink, Source, Topic};
use crate::partition::partition_for;
use crate::state::{keys, meta, meta_u64, Cf, Kv, Store, StoreError, Txn};
use std::sync::Arc;

/// Where an injected crash stops a step (for crash tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// The batch is built, nothing written.
    BeforeCommit,
    /// The batch is committed, nothing shipped.
    AfterCommit,
    /// Some destinations shipped, others not.
    MidShip,
}

/// Decides whether to crash at a point; production uses [`NoFaults`].
pub trait Faults {
    /// `true` stops the step at `point` with [`TaskError::Crashed`].
    fn crash_at(&mut self, point: CrashPoint) -> bool;
}

/// Never crashes.
pub struct NoFaults;

impl Faults for NoFaults {
    fn crash_at(&mut self, _: CrashPoint) -> bool {
        false
    }
}

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The state store failed: stop the partition.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A log failed: stop the partition.
    #[error(transparent)]
    Log(#[from] LogError),
    /// An injected crash.
    #[error("injected crash at {0:?}")]
    Crashed(CrashPoint),
}

/// Limits of one step.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    /// Records read per input per step.
    pub max_records: usize,
    /// Bytes read per input per step.
    pub max_bytes: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            max_records: 2048,
            max_bytes: 4 << 20,
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepStats {
    /// Input events read, by kind: follow, unfollow, post, delete_post.
    pub events: [u64; 4],
    /// Effects read.
    pub effects: u64,
    /// Records sent to the dead-letter log.
    pub dead_letters: u64,
    /// Inbox entries written.
    pub delivered: u64,
    /// Inbox entries removed.
    pub removed: u64,
    /// Effects emitted.
    pub emitted: u64,
    /// Events forwarded to the partition that owns their actor.
    pub forwarded: u64,
    /// Forwarded copies already applied (re-shipped after a crash), skipped.
    pub duplicates: u64,
    /// Records applied quietly (a previous owner already emitted their outputs).
    pub replayed: u64,
    /// Time spent committing the state batch, µs.
    pub commit_micros: u64,
}

impl StepStats {
    /// Records read from both inputs.
    pub fn input(&self) -> u64 {
        self.events.iter().sum::<u64>()
            + self.effects
            + self.dead_letters
            + self.forwarded
            + self.duplicates
    }

    /// Adds another step's figures.
    pub fn add(&mut self, o: &StepStats) {
        for i in 0..4 {
            self.events[i] += o.events[i];
        }
        self.effects += o.effects;
        self.dead_letters += o.dead_letters;
        self.delivered += o.delivered;
        self.removed += o.removed;
        self.emitted += o.emitted;
        self.forwarded += o.forwarded;
        self.duplicates += o.duplicates;
        self.replayed += o.replayed;
        self.commit_micros += o.commit_micros;
    }

    /// The figures added since `before` (an earlier copy of a running total).
    pub fn since(&self, before: &StepStats) -> StepStats {
        let mut d = *self;
        for i in 0..4 {
            d.events[i] -= before.events[i];
        }
        d.effects -= before.effects;
        d.dead_letters -= before.dead_letters;
        d.delivered -= before.delivered;
        d.removed -= before.removed;
        d.emitted -= before.emitted;
        d.forwarded -= before.forwarded;
        d.duplicates -= before.duplicates;
        d.replayed -= before.replayed;
        d.commit_micros -= before.commit_micros;
        d
    }
}

fn kind_index(k: EventKind) -> usize {
    match k {
        EventKind::Follow => 0,
        EventKind::Unfollow => 1,
        EventKind::Post => 2,
        EventKind::DeletePost => 3,
    }
}

/// An outgoing record, as kept in the `pending` column family.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    topic: Topic,
    partition: u32,
    format: Format,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Pending {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(10 + self.key.len() + self.value.len());
        v.push(self.topic.as_u8());
        v.extend_from_slice(&self.partition.to_be_bytes());
        v.push(self.format.as_u8());
        v.extend_from_slice(&(self.key.len() as u32).to_be_bytes());
        v.extend_from_slice(&self.key);
        v.extend_from_slice(&self.value);
        v
    }

    fn decode(b: &[u8]) -> Option<Pending> {
        let klen = u32::from_be_bytes(b.get(6..10)?.try_into().ok()?) as usize;
        Some(Pending {
            topic: Topic::from_u8(*b.first()?)?,
            partition: u32::from_be_bytes(b.get(1..5)?.try_into().ok()?),
            format: Format::from_u8(*b.get(5)?)?,
            key: b.get(10..10 + klen)?.to_vec(),
            value: b.get(10 + klen..)?.to_vec(),
        })
    }

    fn effect(out: Out) -> Pending {
        Pending {
            topic: Topic::Effects,
            partition: out.partition,
            format: Format::Effect,
            key: out.effect.key_user().to_string().into_bytes(),
            value: codec::encode_bin(&out.effect),
        }
    }
}

/// A dead-letter record for `rec` read from `topic[partition]`.
fn dead_letter(topic: &str, partition: u32, rec: &Record, reason: &str) -> Pending {
    let source = serde_json::json!({"topic": topic, "partition": partition, "offset": rec.offset});
    let format = Format::from_u8(rec.format).map_or("unknown", Format::name);
    Pending {
        topic: Topic::DeadLetter,
        partition: 0,
        format: Format::DeadLetter,
        key: format!("{topic}/{partition}/{}", rec.offset).into_bytes(),
        value: codec::dead_letter_value(reason, source, format, &rec.value),
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The owner of one partition.
pub struct PartitionTask {
    ctx: Ctx,
    limits: BatchLimits,
    store: Arc<Store>,
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
    /// Records below these positions (events, effects) were answered by a
    /// previous owner: applied quietly, nothing emitted.
    quiet_below: (u64, u64),
    /// Effects read but not applied yet, decoded, in offset order: each
    /// waits until `events` is applied up to what it requires
    /// ([`Effect::requires_events`]).
    waiting: std::collections::VecDeque<(Record, Result<Effect, String>)>,
    /// Where `events` is applied up to (next offset).
    events_applied: u64,
    /// Positions before the last [`PartitionTask::redeliver`]: everything
    /// below them is applied, whatever the readers re-read.
    applied_below: (u64, u64),
}

impl PartitionTask {
    /// Opens the task at its stored positions, first re-shipping whatever the
    /// previous owner committed but may not have shipped.
    pub fn open(
        ctx: Ctx,
        limits: BatchLimits,
        sync_logs: bool,
        store: Arc<Store>,
        log: Arc<dyn Log>,
    ) -> Result<PartitionTask, TaskError> {
        PartitionTask::open_after(ctx, limits, sync_logs, store, log, None, true)
    }

    /// Opens the task of a partition that other owners may have processed
    /// since this store last did. `emitted` is where every owner's outputs
    /// are known to be acknowledged (the consumer group's committed
    /// positions for `events[p]` and `effects[p]`): the task reads from its
    /// own stored positions, and below `emitted` it applies records to its
    /// state but emits nothing — previous owners emitted all of that
    /// already (a rebuild that does not re-emit). Its unshipped outbox is
    /// re-shipped only with `reship`; when another owner has had the
    /// partition since, those records answered inputs the other owner has
    /// answered too, and a late re-ship could overtake its newer messages.
    pub fn open_after(
        ctx: Ctx,
        limits: BatchLimits,
        sync_logs: bool,
        store: Arc<Store>,
        log: Arc<dyn Log>,
        emitted: Option<(u64, u64)>,
        reship: bool,
    ) -> Result<PartitionTask, TaskError> {
        let p = ctx.partition;
        let events = log.source(Topic::Events, p, store.meta_u64(meta::POS_EVENTS)?)?;
        let effects = log.source(Topic::Effects, p, store.meta_u64(meta::POS_EFFECTS)?)?;
        let next_seq = store.meta_u64(meta::NEXT_SEQ)?;
        let sink = log.clone().sink(sync_logs)?;
        let mut task = PartitionTask {
            ctx,
            limits,
            store,
            log,
            sink,
            events,
            effects,
            next_seq,
            shipped_below: None,
            events_first: false,
            quiet_below: emitted.unwrap_or((0, 0)),
            waiting: Default::default(),
            events_applied: 0,
            applied_below: (0, 0),
        };
        task.events_applied = task.events.position();
        if let Some(v) = task.store.get(Cf::Meta, meta::APPLIED)? {
            let at = |i: usize| {
                v.get(i..i + 8)
                    .and_then(|b| b.try_into().ok())
                    .map(u64::from_be_bytes)
            };
            match (at(0), at(8)) {
                (Some(e), Some(f)) => task.applied_below = (e, f),
                _ => {
                    return Err(StoreError::corrupt(
                        Cf::Meta,
                        meta::APPLIED,
                        "bad applied positions",
                    )
                    .into())
                }
            }
        }
        if !reship {
            task.shipped_below = Some(task.next_seq);
            task.forget_shipped()?;
        }
        let pending: Vec<Pending> = task
            .store
            .scan(Cf::Pending, &[], &[0xff; 9])
            .map(|r| {
                let (k, v) = r?;
                Pending::decode(&v)
                    .ok_or_else(|| StoreError::corrupt(Cf::Pending, &k, "bad pending record"))
            })
            .collect::<Result<_, _>>()?;
        if !pending.is_empty() {
            tracing::info!(
                partition = p,
                records = pending.len(),
                "re-shipping committed records"
            );
            task.ship(&pending, &mut NoFaults)?;
            task.shipped_below = Some(task.next_seq);
            task.forget_shipped()?;
        }
        Ok(task)
    }

    /// This task's partition.
    pub fn partition(&self) -> u32 {
        self.ctx.partition
    }

    /// Next offsets to apply in `events[p]` and `effects[p]` (what a
    /// restart resumes from; a redelivery moves them back, so that a restart
    /// re-reads everything after the redelivered records too).
    pub fn positions(&self) -> (u64, u64) {
        let effects = self
            .waiting
            .front()
            .map_or(self.effects.position(), |(r, _)| r.offset);
        (self.events.position(), effects)
    }

    /// Positions below which every input is applied and answered: what a
    /// consumer group may commit. Unlike [`PartitionTask::positions`] they
    /// never go back on a redelivery, which could pair an `effects`
    /// position with an `events` position below what those effects
    /// required (a successor replaying quietly up to such a pair would wait
    /// forever).
    pub fn applied(&self) -> (u64, u64) {
        let (e, f) = self.positions();
        (e.max(self.applied_below.0), f.max(self.applied_below.1))
    }

    /// Whether the quiet replay below the previous owners' positions is over
    /// (the state has caught up with what they did).
    pub fn caught_up(&self) -> bool {
        let (e, f) = self.positions();
        e >= self.quiet_below.0 && f >= self.quiet_below.1
    }

    /// Moves a reader back by up to `records` records without touching state:
    /// the next steps see those records again, as after an at-least-once
    /// redelivery. Versions make the repeats no-ops.
    pub fn redeliver(&mut self, topic: Topic, records: u64) -> Result<(), TaskError> {
        let p = self.ctx.partition;
        let (events, effects) = self.positions();
        self.applied_below = self.applied();
        match topic {
            Topic::Events => {
                let to = events.saturating_sub(records);
                self.events = self.log.source(topic, p, to)?;
                self.events_applied = to;
            }
            Topic::Effects => {
                let to = effects.saturating_sub(records);
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
        // Until the quiet replay is over, neither input reads past what
        // previous owners answered: every input below both marks is applied
        // before any input is answered, so the first answers come from a
        // state that holds everything the previous owners had answered
        // (answers depend on what was applied before them).
        let (events_end, effects_end) = match self.caught_up() {
            true => (None, None),
            false => (Some(self.quiet_below.0), Some(self.quiet_below.1)),
        };
        let room = self.limits.max_records.saturating_sub(self.waiting.len());
        if room > 0 {
            for rec in self
                .effects
                .read(room, self.limits.max_bytes, effects_end)?
            {
                let effect = decode_effect(&rec);
                self.waiting.push_back((rec, effect));
            }
        }
        let events =
            self.events
                .read(self.limits.max_records, self.limits.max_bytes, events_end)?;
        let mut stats = StepStats::default();
        if self.waiting.is_empty() && events.is_empty() {
            self.forget_shipped()?;
            return Ok(stats);
        }
        self.events_first = !self.events_first;
        let mut txn = Txn::new(&*self.store);
        let mut out = Vec::new();
        let mut pending = Vec::new();
        // Alternate which input goes first, so no message kind is always
        // applied ahead of the other (either order is correct), except that
        // an effect waits for the events it requires.
        let mut events = events.into_iter().peekable();
        loop {
            let effect_ready = self
                .waiting
                .front()
                .map(|(_, e)| e.as_ref().map_or(0, Effect::requires_events) <= self.events_applied);
            let input =
                if events.peek().is_some() && (self.events_first || effect_ready != Some(true)) {
                    let rec = events.next().expect("peeked");
                    self.events_applied = rec.offset + 1;
                    Input::Event(rec)
                } else if effect_ready == Some(true) {
                    let (rec, effect) = self.waiting.pop_front().expect("ready");
                    Input::Effect(rec, effect)
                } else {
                    break;
                };
            let (offset, quiet_below) = match &input {
                Input::Event(r) => (r.offset, self.quiet_below.0),
                Input::Effect(r, _) => (r.offset, self.quiet_below.1),
            };
            let emitted_before = (out.len(), pending.len());
            apply_record(
                &self.ctx,
                &mut txn,
                input,
                &mut out,
                &mut pending,
                &mut stats,
            )?;
            if offset < quiet_below {
                out.truncate(emitted_before.0);
                pending.truncate(emitted_before.1);
                stats.replayed += 1;
            }
        }
        if stats.input() == 0 {
            // Only effects waiting for events not read yet.
            return Ok(stats);
        }
        stats.emitted = out.len() as u64;
        pending.extend(out.into_iter().map(Pending::effect));
        let writes = txn.into_writes();
        if faults.crash_at(CrashPoint::BeforeCommit) {
            return Err(TaskError::Crashed(CrashPoint::BeforeCommit));
        }
        let first_seq = self.next_seq;
        let next_seq = first_seq + pending.len() as u64;
        let (pos_events, pos_effects) = self.positions();
        let (applied_e, applied_f) = self.applied();
        let shipped_below = self.shipped_below;
        let commit_start = std::time::Instant::now();
        self.store.commit(&writes, |b| {
            b.put(Cf::Meta, meta::POS_EVENTS, &pos_events.to_be_bytes());
            b.put(Cf::Meta, meta::POS_EFFECTS, &pos_effects.to_be_bytes());
            let mut applied = applied_e.to_be_bytes().to_vec();
            applied.extend_from_slice(&applied_f.to_be_bytes());
            b.put(Cf::Meta, meta::APPLIED, &applied);
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
        stats.commit_micros = commit_start.elapsed().as_micros() as u64;
        self.next_seq = next_seq;
        self.shipped_below = None;
        if faults.crash_at(CrashPoint::AfterCommit) {
            return Err(TaskError::Crashed(CrashPoint::AfterCommit));
        }
        self.ship(&pending, faults)?;
        self.shipped_below = Some(next_seq);
        Ok(stats)
    }

    /// Appends records to their logs, preserving order per destination.
    fn ship(&mut self, pending: &[Pending], faults: &mut dyn Faults) -> Result<(), TaskError> {
        let mut groups: Vec<((Topic, u32), Vec<&Pending>)> = Vec::new();
        for rec in pending {
            let dest = (rec.topic, rec.partition);
            match groups.iter_mut().find(|(d, _)| *d == dest) {
                Some((_, g)) => g.push(rec),
                None => groups.push((dest, vec![rec])),
            }
        }
        let ts = now_ms();
        for (i, ((topic, partition), recs)) in groups.iter().enumerate() {
            if i > 0 && faults.crash_at(CrashPoint::MidShip) {
                return Err(TaskError::Crashed(CrashPoint::MidShip));
            }
            let records: Vec<NewRecord<'_>> = recs
                .iter()
                .map(|r| NewRecord {
                    timestamp_ms: ts,
                    format: r.format.as_u8(),
                    key: &r.key,
                    value: &r.value,
                })
                .collect();
            self.sink.append(*topic, *partition, &records)?;
        }
        self.sink.flush()?;
        Ok(())
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

/// One input record to apply; an effect comes decoded (or with why it
/// does not decode).
enum Input {
    Event(Record),
    Effect(Record, Result<Effect, String>),
}

/// Applies one input record; a record that is not a valid message becomes
/// a dead letter.
fn apply_record<K: Kv + ?Sized>(
    ctx: &Ctx,
    txn: &mut Txn<'_, K>,
    input: Input,
    out: &mut Vec<Out>,
    pending: &mut Vec<Pending>,
    stats: &mut StepStats,
) -> Result<(), StoreError> {
    let p = ctx.partition;
    let applied = match input {
        Input::Effect(rec, decoded) => match decoded {
            Ok(e) => {
                stats.effects += 1;
                core::apply_effect(txn, ctx, &e, out)?
            }
            Err(reason) => {
                stats.dead_letters += 1;
                pending.push(dead_letter("effects", p, &rec, &reason));
                return Ok(());
            }
        },
        Input::Event(rec) => {
            let rec = &rec;
            // A forwarded event: skip a copy already applied, else unwrap it.
            let forwarded;
            let (format, payload, forwarded_from) = if rec.format == Format::Forwarded.as_u8() {
                match codec::decode_bin::<Forwarded>(&rec.value) {
                    Ok(f) => {
                        let mark = meta::forwarded_from(f.from_partition);
                        if f.from_offset < meta_u64(txn, &mark)? {
                            stats.duplicates += 1;
                            return Ok(());
                        }
                        txn.put(Cf::Meta, mark, (f.from_offset + 1).to_be_bytes().to_vec());
                        forwarded = f;
                        (
                            forwarded.format,
                            &forwarded.payload[..],
                            Some(forwarded.from_partition),
                        )
                    }
                    Err(e) => {
                        stats.dead_letters += 1;
                        let reason = format!("invalid forwarded record: {e}");
                        pending.push(dead_letter("events", p, rec, &reason));
                        return Ok(());
                    }
                }
            } else {
                (rec.format, &rec.value[..], None)
            };
            match codec::decode_event(format, payload) {
                Ok(ev) if ctx.owns(ev.actor()) => {
                    stats.events[kind_index(ev.kind())] += 1;
                    core::apply_event(txn, ctx, &ev, rec.offset + 1, out)?
                }
                Ok(ev) if forwarded_from.is_none() => {
                    stats.forwarded += 1;
                    pending.push(forward(ctx, &ev, rec));
                    return Ok(());
                }
                Ok(ev) => {
                    // Forwarded by a partition that counts partitions differently.
                    stats.dead_letters += 1;
                    pending.push(dead_letter(
                        "events",
                        p,
                        rec,
                        &misrouted(&ev, ctx.partitions),
                    ));
                    return Ok(());
                }
                Err(e) => {
                    stats.dead_letters += 1;
                    pending.push(dead_letter("events", p, rec, &e.to_string()));
                    return Ok(());
                }
            }
        }
    };
    stats.delivered += applied.delivered;
    stats.removed += applied.removed;
    Ok(())
}

fn decode_effect(rec: &Record) -> Result<Effect, String> {
    if rec.format != Format::Effect.as_u8() {
        return Err(format!(
            "effects record has format marker {}, expected {}",
            rec.format,
            Format::Effect.as_u8()
        ));
    }
    codec::decode_bin::<Effect>(&rec.value).map_err(|e| format!("invalid effect: {e}"))
}

fn misrouted(ev: &Event, partitions: u32) -> String {
    format!(
        "forwarded to partition that does not own actor {} (it belongs to partition {} of {partitions})",
        ev.actor(),
        partition_for(ev.actor(), partitions)
    )
}

/// An event that arrived in this partition but belongs to another: its
/// record, unchanged, wrapped with where it came from, for the owner's
/// `events` partition (where it gets a version from the owner's own log).
fn forward(ctx: &Ctx, ev: &Event, rec: &Record) -> Pending {
    let actor = ev.actor();
    Pending {
        topic: Topic::Events,
        partition: partition_for(actor, ctx.partitions),
        format: Format::Forwarded,
        key: actor.to_string().into_bytes(),
        value: codec::encode_bin(&Forwarded {
            from_partition: ctx.partition,
            from_offset: rec.offset,
            format: rec.format,
            payload: rec.value.clone(),
        }),
    }
}
