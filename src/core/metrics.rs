//! What the processor counts: the figures of each step ([`StepStats`]),
//! how far a partition is behind ([`PartitionLag`]), and fixed-bucket
//! distributions ([`Buckets`]) — plain values. The task keeps their running
//! totals (`feedlog::task::progress`); the read API renders them.

use crate::event::EventKind;
use crate::partition::Partition;
use crate::position::Positions;

/// Upper bounds for latencies in seconds: 50 µs to 10 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 10.0,
];

/// Upper bounds for batch sizes in records.
pub const SIZE_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 2048.0, 4096.0, 16384.0, 65536.0,
];

/// Observations counted in fixed buckets (upper bounds `le`, `+Inf`
/// implied), with their sum.
#[derive(Debug, Clone, PartialEq)]
pub struct Buckets {
    /// The upper bounds, ascending.
    pub bounds: &'static [f64],
    /// Observations per bucket (not cumulative): one more than `bounds`,
    /// the last for `+Inf`.
    pub counts: Vec<u64>,
    /// Sum of the observations.
    pub sum: f64,
}

impl Buckets {
    /// No observations over `bounds`.
    pub fn new(bounds: &'static [f64]) -> Buckets {
        Buckets {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    /// The bucket `v` falls in.
    pub fn index(bounds: &[f64], v: f64) -> usize {
        bounds.partition_point(|&b| b < v)
    }

    /// Counts one observation.
    pub fn observe(&mut self, v: f64) {
        self.counts[Buckets::index(self.bounds, v)] += 1;
        self.sum += v;
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The running figures of a processor: totals since start, and the
/// distributions of batch sizes and commit times.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Totals since start.
    pub totals: StepStats,
    /// Messages read per non-empty step (events and effects).
    pub batch_records: Buckets,
    /// Seconds per state commit.
    pub commit_seconds: Buckets,
}

impl Default for Figures {
    fn default() -> Self {
        Figures {
            totals: StepStats::default(),
            batch_records: Buckets::new(SIZE_BUCKETS),
            commit_seconds: Buckets::new(LATENCY_BUCKETS),
        }
    }
}

impl Figures {
    /// Adds one non-empty step.
    pub fn record(&mut self, stats: &StepStats) {
        self.batch_records.observe(stats.input() as f64);
        self.commit_seconds
            .observe(stats.commit_micros as f64 / 1e6);
        self.totals.add(stats);
    }
}

/// Input events applied, by kind: one count per [`EventKind`], in its
/// order (a new kind is counted without a change here).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventCounts([u64; EventKind::COUNT]);

impl EventCounts {
    /// The count of `kind`.
    pub fn get(&self, kind: EventKind) -> u64 {
        self.0[kind.index()]
    }

    fn field(&mut self, kind: EventKind) -> &mut u64 {
        &mut self.0[kind.index()]
    }

    /// Every kind's count.
    pub fn total(&self) -> u64 {
        EventKind::all().map(|k| self.get(k)).sum()
    }

    /// `self + o` (`add`), or `self - o`, kind by kind.
    fn combine(&mut self, o: &EventCounts, add: bool) {
        for k in EventKind::all() {
            let n = o.get(k);
            let f = self.field(k);
            *f = if add { *f + n } else { *f - n };
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepStats {
    /// Input events applied, by kind.
    pub events: EventCounts,
    /// Effects read (an `effects` record carries one or more).
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
    /// `effects` records skipped by the fence: sent by an owner older than
    /// one whose records from the same partition were already applied.
    pub fenced: u64,
    /// Time spent committing the state batch, µs.
    pub commit_micros: u64,
}

impl StepStats {
    /// Counts one event of `kind` read.
    pub fn count_event(&mut self, kind: EventKind) {
        *self.events.field(kind) += 1;
    }

    /// The events read by kind, in [`EventKind::all`] order, as
    /// `follow N, unfollow N, post N, ...`.
    pub fn events_by_kind(&self) -> String {
        EventKind::all()
            .map(|k| format!("{} {}", k.as_str(), self.events.get(k)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Messages read from both inputs (an `effects` record carries one or
    /// more effects, each counted).
    pub fn input(&self) -> u64 {
        self.events.total()
            + self.effects
            + self.dead_letters
            + self.forwarded
            + self.duplicates
            + self.fenced
    }

    /// Adds another step's figures.
    pub fn add(&mut self, o: &StepStats) {
        self.events.combine(&o.events, true);
        self.effects += o.effects;
        self.dead_letters += o.dead_letters;
        self.delivered += o.delivered;
        self.removed += o.removed;
        self.emitted += o.emitted;
        self.forwarded += o.forwarded;
        self.duplicates += o.duplicates;
        self.replayed += o.replayed;
        self.fenced += o.fenced;
        self.commit_micros += o.commit_micros;
    }

    /// The figures added since `before` (an earlier copy of a running total).
    pub fn since(&self, before: &StepStats) -> StepStats {
        let mut d = *self;
        d.events.combine(&before.events, false);
        d.effects -= before.effects;
        d.dead_letters -= before.dead_letters;
        d.delivered -= before.delivered;
        d.removed -= before.removed;
        d.emitted -= before.emitted;
        d.forwarded -= before.forwarded;
        d.duplicates -= before.duplicates;
        d.replayed -= before.replayed;
        d.fenced -= before.fenced;
        d.commit_micros -= before.commit_micros;
        d
    }
}

/// How far one partition's state is behind its input logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionLag {
    /// The partition.
    pub partition: Partition,
    /// Where each input log ends (the next offsets).
    pub end: Positions,
    /// How far the state has applied them.
    pub at: Positions,
}

impl PartitionLag {
    /// Records not yet applied, both inputs.
    pub fn total(&self) -> u64 {
        self.at.records_to(self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An observation on a bound falls in that bound's bucket, and the sum and count follow.
    #[test]
    fn buckets_count_by_upper_bound() {
        let mut b = Buckets::new(&[1.0, 10.0]);
        for v in [0.5, 1.0, 3.0, 30.0] {
            b.observe(v);
        }
        assert_eq!(b.counts, vec![2, 1, 1]);
        assert_eq!(b.count(), 4);
        assert_eq!(b.sum, 34.5);
    }
}
