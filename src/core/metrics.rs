//! What the processor measures: the figures of each step ([`StepStats`]),
//! their running totals ([`Progress`]), and fixed-bucket histograms
//! rendered as Prometheus text (exposition format 0.0.4).

use crate::core::event::EventKind;
use crate::core::position::Positions;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A histogram with fixed upper bounds (`le`), cumulative when rendered.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    /// Sum of observations, as f64 bits.
    sum: AtomicU64,
}

/// Upper bounds for latencies in seconds: 50 µs to 10 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 10.0,
];

/// Upper bounds for batch sizes in records.
pub const SIZE_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 2048.0, 4096.0, 16384.0, 65536.0,
];

impl Histogram {
    /// An empty histogram over `bounds` (ascending; `+Inf` is implied).
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// Records one observation.
    pub fn observe(&self, v: f64) {
        let i = self.bounds.partition_point(|&b| b < v);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + v).to_bits())
            });
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Appends the `_bucket`, `_sum` and `_count` lines of `name{labels}`.
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, c) in self.counts.iter().enumerate() {
            cumulative += c.load(Ordering::Relaxed);
            let le = match self.bounds.get(i) {
                Some(b) => format!("{b}"),
                None => "+Inf".into(),
            };
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let braces = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!("{{{s}}}")
            }
        };
        let sum = f64::from_bits(self.sum.load(Ordering::Relaxed));
        let _ = writeln!(out, "{name}_sum{} {sum}", braces(labels));
        let _ = writeln!(out, "{name}_count{} {cumulative}", braces(labels));
    }
}

/// Writes a metric family's `# HELP` and `# TYPE` lines.
pub fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Writes one sample line.
pub fn sample(out: &mut String, name: &str, labels: &str, value: impl std::fmt::Display) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {value}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// Input events applied, by kind (a field per kind, reached through an
/// exhaustive `match`: a new kind cannot be counted in another's place).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventCounts {
    /// `follow` events.
    pub follow: u64,
    /// `unfollow` events.
    pub unfollow: u64,
    /// `post` events.
    pub post: u64,
    /// `delete_post` events.
    pub delete_post: u64,
    /// `seen` events.
    pub seen: u64,
    /// `repost` events.
    pub repost: u64,
    /// `block` events.
    pub block: u64,
    /// `unblock` events.
    pub unblock: u64,
    /// `mute` events.
    pub mute: u64,
    /// `unmute` events.
    pub unmute: u64,
    /// `hide_reposts` events.
    pub hide_reposts: u64,
    /// `show_reposts` events.
    pub show_reposts: u64,
}

impl EventCounts {
    /// The count of `kind`.
    pub fn get(&self, kind: EventKind) -> u64 {
        *{ *self }.field(kind)
    }

    fn field(&mut self, kind: EventKind) -> &mut u64 {
        match kind {
            EventKind::Follow => &mut self.follow,
            EventKind::Unfollow => &mut self.unfollow,
            EventKind::Post => &mut self.post,
            EventKind::DeletePost => &mut self.delete_post,
            EventKind::Seen => &mut self.seen,
            EventKind::Repost => &mut self.repost,
            EventKind::Block => &mut self.block,
            EventKind::Unblock => &mut self.unblock,
            EventKind::Mute => &mut self.mute,
            EventKind::Unmute => &mut self.unmute,
            EventKind::HideReposts => &mut self.hide_reposts,
            EventKind::ShowReposts => &mut self.show_reposts,
        }
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

    /// The events read by kind, as `follow N, unfollow N, post N,
    /// delete_post N, seen N, repost N`.
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

/// Progress figures, updated as batches commit.
pub struct Progress {
    /// Totals since start.
    pub totals: Mutex<StepStats>,
    /// Messages read per non-empty step (events and effects).
    pub batch_records: Histogram,
    /// Seconds per state commit.
    pub commit_seconds: Histogram,
    /// Called after each non-empty step ([`Progress::on_commit`]).
    listeners: Mutex<Vec<Listener>>,
}

/// A function called after each committed step.
type Listener = Box<dyn Fn() + Send + Sync>;

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("totals", &self.totals())
            .finish_non_exhaustive()
    }
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            totals: Mutex::default(),
            batch_records: Histogram::new(SIZE_BUCKETS),
            commit_seconds: Histogram::new(LATENCY_BUCKETS),
            listeners: Mutex::default(),
        }
    }
}

impl Progress {
    /// Adds one non-empty step.
    pub fn record(&self, stats: &StepStats) {
        self.batch_records.observe(stats.input() as f64);
        self.commit_seconds
            .observe(stats.commit_micros as f64 / 1e6);
        self.lock().add(stats);
        for f in self
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            f();
        }
    }

    /// Calls `f` after every non-empty step from now on, on the thread that
    /// committed it: readers that wait for new state (the timeline stream)
    /// are woken so instead of polling. `f` must be quick.
    pub fn on_commit(&self, f: impl Fn() + Send + Sync + 'static) {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(f));
    }

    /// The totals so far.
    pub fn totals(&self) -> StepStats {
        *self.lock()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StepStats> {
        // A panic while adding figures leaves them usable.
        self.totals.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How far one partition's state is behind its input logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionLag {
    /// The partition.
    pub partition: u32,
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

    /// Buckets are cumulative and the count and sum match the observations.
    #[test]
    fn histogram_renders_cumulative_buckets() {
        let h = Histogram::new(&[1.0, 10.0]);
        for v in [0.5, 1.0, 3.0, 30.0] {
            h.observe(v);
        }
        let mut s = String::new();
        h.render(&mut s, "x", "a=\"b\"");
        assert_eq!(
            s,
            "x_bucket{a=\"b\",le=\"1\"} 2\nx_bucket{a=\"b\",le=\"10\"} 3\n\
             x_bucket{a=\"b\",le=\"+Inf\"} 4\nx_sum{a=\"b\"} 34.5\nx_count{a=\"b\"} 4\n"
        );
    }
}
