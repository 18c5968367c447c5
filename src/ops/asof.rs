//! Rewind: every view as it was at an earlier log time `T`
//! (docs/http-api.md, "Earlier states").
//!
//! The view as of `T` is the view the contract defines over the events
//! with `ts <= T`, with one exception: a deleted post never comes back (a
//! delete is retroactive). The state keeps no history of its own for it:
//! the embedded log keeps every event, and it is the history. A state as
//! of `T` is built by replaying, through the core on one partition in a
//! scratch store, every partition's events with `ts <= T` in that
//! partition's order (forwarded events at the partition that applied
//! them, as the processor does), then every deletion of a later time; the
//! partition's clock is set to `T` (a mute with an end is judged at `T`).
//! The read API then reads that store as it reads any state, so every view,
//! paging and cursor included, answers as of `T`.
//!
//! A built state is kept for the next request of the same `T` while the
//! log has nothing new that could change it (an event at `T` or earlier,
//! or a deletion).

use crate::api::query::{QueryError, Reader, Rewind};
use crate::core::codec;
use crate::core::event::{Event, Ts};
use crate::core::keys;
use crate::core::kv::{Cf, Txn};
use crate::core::partition::partition_for;
use crate::core::Partition;
use crate::core::{apply_effect, apply_event, pulled, Ctx, Out, Version};
use crate::log::{Log, Offset, Record, Topic};
use crate::state::datadir::DataDir;
use crate::state::{BlockCache, Partitions, Store, StoreOptions, Unavailable};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// How far back views as of an earlier time are answered, in log time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// None: every `as_of` is refused.
    None,
    /// This many milliseconds before the newest event's time.
    Span(u64),
    /// As far back as the log goes.
    Forever,
}

impl Retention {
    /// The default: 30 days.
    pub const DEFAULT: Retention = Retention::Span(30 * 24 * 3600 * 1000);

    /// Parses `forever`, or a span of log time ([`log_span`]; 0: none).
    pub fn parse(s: &str) -> Result<Retention, BadSpan> {
        Ok(match s.trim() {
            "forever" => Retention::Forever,
            s => match log_span(s).map_err(|e| BadSpan(format!("{}, or forever", e.0)))? {
                0 => Retention::None,
                span => Retention::Span(span),
            },
        })
    }
}

/// A span of log time that does not read as one: what it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadSpan(pub String);

/// A span of log time in milliseconds: a number with a unit (`d`, `h`,
/// `m`, `s`, `ms`), or 0.
pub fn log_span(s: &str) -> Result<u64, BadSpan> {
    let units = [
        ("ms", 1),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ];
    if s == "0" {
        return Ok(0);
    }
    let bad = || {
        BadSpan(format!(
            "{s:?} is not a duration such as 30d, 12h, 90m, 45s, 500ms or 0"
        ))
    };
    let (n, per) = units
        .iter()
        .find_map(|&(unit, per)| s.strip_suffix(unit).map(|n| (n, per)))
        .ok_or_else(bad)?;
    n.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(per))
        .ok_or_else(bad)
}

/// What one replay read: the events as of `T`, in order, the newest
/// event's time, and where each partition's `events` ended.
struct Replayed {
    events: Vec<Event>,
    newest: Ts,
    ends: Vec<u64>,
}

/// Reads `events[p]` from `from` to its end, calling `f` with each event
/// the processor applies there (its own actors' events, and forwarded
/// copies not applied before: `marks` keeps, per sending partition, the
/// next forwarded offset, as the processor's state does).
fn read_partition(
    log: &dyn Log,
    (p, n): (Partition, u32),
    from: u64,
    marks: &mut HashMap<(Partition, Partition), u64>,
    mut f: impl FnMut(Event),
) -> Result<u64, QueryError> {
    let failed = |e: crate::log::LogError| QueryError::NoHistory(format!("reading the log: {e}"));
    let end = log.end_offset(Topic::Events, p).map_err(failed)?.0;
    let mut source = log.source(Topic::Events, p, Offset(from)).map_err(failed)?;
    while source.position().0 < end {
        let records = source
            .read(4096, 4 << 20, Some(Offset(end)))
            .map_err(failed)?;
        if records.is_empty() {
            break;
        }
        for rec in &records {
            if let Some(ev) = applied_here(rec, (p, n), marks) {
                f(ev);
            }
        }
    }
    Ok(end)
}

/// The event `rec` of `events[p]` makes the processor apply there, if any.
fn applied_here(
    rec: &Record,
    (p, n): (Partition, u32),
    marks: &mut HashMap<(Partition, Partition), u64>,
) -> Option<Event> {
    let ev = match codec::decode_forwarded(rec.format, &rec.value) {
        Some(Ok(f)) => {
            let mark = marks.entry((p, f.from_partition)).or_default();
            if f.from_offset < *mark {
                return None;
            }
            *mark = f.from_offset + 1;
            codec::decode_event(f.format, &f.payload).ok()?
        }
        // Dead letters: the processor applies nothing of them.
        Some(Err(_)) => return None,
        None => codec::decode_event(rec.format, &rec.value).ok()?,
    };
    (partition_for(ev.actor(), n) == p).then_some(ev)
}

/// Every event of `log` (`n` partitions) the view as of `t` is made of:
/// those with `ts <= t` in each partition's order, then every later
/// deletion.
fn replayed(log: &dyn Log, n: u32, t: Ts) -> Result<Replayed, QueryError> {
    let mut marks = HashMap::new();
    let (mut events, mut later_deletes, mut newest) = (Vec::new(), Vec::new(), Ts(0));
    let mut ends = Vec::new();
    for p in Partition::all(n) {
        let end = read_partition(log, (p, n), 0, &mut marks, |ev| {
            newest = newest.max(ev.ts());
            if ev.ts() <= t {
                events.push(ev);
            } else if ev.reaches_back() {
                later_deletes.push(ev);
            }
        })?;
        ends.push(end);
    }
    events.extend(later_deletes);
    Ok(Replayed {
        events,
        newest,
        ends,
    })
}

/// Whether the log past `ends` holds anything that changes the view as of
/// `t`: an event at `t` or earlier, or a deletion.
fn changed_since(log: &dyn Log, n: u32, t: Ts, ends: &[u64]) -> Result<bool, QueryError> {
    let mut changed = false;
    // Forwarded copies past `ends` of records before them are new to the
    // view too; every mark starts at 0, so none is skipped here.
    let mut marks = HashMap::new();
    for p in Partition::all(n) {
        let from = ends.get(p.index()).copied().unwrap_or(0);
        let end = log.end_offset(Topic::Events, p);
        if end
            .map_err(|e| QueryError::NoHistory(format!("reading the log: {e}")))?
            .0
            == from
        {
            continue;
        }
        read_partition(log, (p, n), from, &mut marks, |ev| {
            changed |= ev.ts() <= t || ev.reaches_back();
        })?;
    }
    Ok(changed)
}

/// A scratch store as of one time, removed when its last reader goes.
struct Scratch {
    store: Option<Arc<Store>>,
    dir: PathBuf,
}

impl Scratch {
    fn get(&self) -> Arc<Store> {
        self.store.clone().expect("present until dropped")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        drop(self.store.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Partitions for Scratch {
    fn count(&self) -> u32 {
        1
    }

    fn store(&self, _: Partition) -> Result<Arc<Store>, Unavailable> {
        Ok(self.get())
    }

    fn local(&self) -> Vec<(Partition, Arc<Store>)> {
        vec![(Partition(0), self.get())]
    }
}

/// Applies `events`, and every message they cause, through the core on
/// one partition deciding with `ctx`, into a new store at `dir`; the
/// partition's clock ends at `t`.
fn build(events: &[Event], ctx: &Ctx, t: Ts, dir: &Path) -> Result<Scratch, QueryError> {
    let opts = StoreOptions {
        sync: false,
        write_buffer_bytes: 16 << 20,
        kept: crate::state::Kept::NONE,
    };
    let store = Store::open(dir, Partition(0), 1, &BlockCache::new(8 << 20), &opts)?;
    let scratch = Scratch {
        store: Some(Arc::new(store)),
        dir: dir.to_path_buf(),
    };
    let store = scratch.get();
    let mut queue: VecDeque<Out> = pulled::threshold_request(&*store, ctx)?
        .into_iter()
        .collect();
    let mut version = 0u64;
    for chunk in events.chunks(1024).map(Some).chain([None]) {
        let mut txn = Txn::new(&*store);
        let mut out = Vec::new();
        for ev in chunk.unwrap_or_default() {
            version += 1;
            apply_event(&mut txn, ctx, ev, Version(version), &mut out)?;
            queue.extend(out.drain(..));
            while let Some(o) = queue.pop_front() {
                apply_effect(&mut txn, ctx, &o.effect, &mut out)?;
                queue.extend(out.drain(..));
            }
        }
        if chunk.is_none() {
            while let Some(o) = queue.pop_front() {
                apply_effect(&mut txn, ctx, &o.effect, &mut out)?;
                queue.extend(out.drain(..));
            }
            // At `t`, whatever the later deletions' times moved it to.
            let clock = (Cf::Meta, keys::CLOCK.to_vec());
            txn.put(clock.0, clock.1, t.0.to_be_bytes().to_vec());
        }
        store.commit(&txn.into_writes(), |_| {})?;
    }
    Ok(scratch)
}

/// Removes the scratch states under `asof` of processes that are gone
/// (killed before they could remove their own).
fn remove_orphans(asof: &Path) {
    // Liveness is read from /proc: where there is none, nothing is removed.
    let (Ok(entries), true) = (std::fs::read_dir(asof), Path::new("/proc/self").exists()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.split('-').next().unwrap_or_default();
        let alive = Path::new("/proc").join(pid).exists();
        if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// One state as of a time, and the log ends it was built from.
struct Built {
    t: Ts,
    ends: Vec<u64>,
    scratch: Arc<Scratch>,
}

/// Views as of earlier times from an embedded data directory's log.
pub struct LogRewind {
    log: Arc<dyn Log>,
    partitions: u32,
    ctx: Ctx,
    retention: Retention,
    scratch_root: PathBuf,
    kept: Mutex<Vec<Built>>,
    seq: std::sync::atomic::AtomicU64,
}

/// How many built states are kept for later requests.
const KEPT: usize = 2;

impl LogRewind {
    /// Rewinds `log` (`partitions` partitions), deciding as `live` (a
    /// partition's context of the processor: its inbox cap and pull
    /// threshold), answering back `retention`; scratch states go under
    /// `data` (`asof/PID-N/`, one per rewind, emptied here; each state is
    /// removed when its last reader goes).
    pub fn new(
        log: Arc<dyn Log>,
        partitions: u32,
        live: Ctx,
        data: &Path,
        retention: Retention,
    ) -> LogRewind {
        static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let asof = data.join("asof");
        remove_orphans(&asof);
        let scratch_root = asof.join(format!("{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch_root);
        LogRewind {
            log,
            partitions,
            ctx: Ctx {
                partition: Partition(0),
                partitions: 1,
                fanout_chunk: 1024,
                inactive_after: None,
                ..live
            },
            retention,
            scratch_root,
            kept: Mutex::new(Vec::new()),
            seq: Default::default(),
        }
    }

    /// Rewinds the log of data directory `dir`, deciding with its inbox cap
    /// and pull threshold (views do not depend on them; reads do).
    pub fn of(dir: &DataDir, retention: Retention) -> LogRewind {
        let live = Ctx {
            partition: Partition(0),
            partitions: 1,
            inbox_cap: dir.inbox_cap().unwrap_or(crate::core::DEFAULT_INBOX_CAP),
            fanout_chunk: 1024,
            pull_threshold: Some(
                dir.pull_threshold()
                    .unwrap_or(crate::core::DEFAULT_PULL_THRESHOLD),
            ),
            inactive_after: None,
        };
        LogRewind::new(
            Arc::new(dir.logs()),
            dir.partitions(),
            live,
            dir.root(),
            retention,
        )
    }

    fn reader(scratch: &Arc<Scratch>) -> Reader {
        Reader::over(scratch.clone(), None)
    }
}

impl Rewind for LogRewind {
    fn at(&self, t: Ts) -> Result<Reader, QueryError> {
        if self.retention == Retention::None {
            return Err(QueryError::NoHistory(
                "--history-retention is 0: no view as of an earlier time is answered".into(),
            ));
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = kept.iter().position(|b| b.t == t) {
            if !changed_since(&*self.log, self.partitions, t, &kept[i].ends)? {
                let b = kept.remove(i);
                let reader = Self::reader(&b.scratch);
                kept.push(b);
                return Ok(reader);
            }
            kept.remove(i);
        }
        let r = replayed(&*self.log, self.partitions, t)?;
        if let Retention::Span(span) = self.retention {
            let kept_from = r.newest.0.saturating_sub(span);
            if t.0 < kept_from {
                return Err(QueryError::HistoryGone {
                    asked: t.0,
                    kept_from,
                });
            }
        }
        let n = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self.scratch_root.join(format!("{}-{n}", t.0));
        let scratch = Arc::new(build(&r.events, &self.ctx, t, &dir)?);
        let reader = Self::reader(&scratch);
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push(Built {
            t,
            ends: r.ends,
            scratch,
        });
        Ok(reader)
    }
}

#[cfg(test)]
mod tests {
    use super::Retention;

    // Proves a retention reads as none, forever, or a span in each unit, and anything else is refused with the forms it takes.
    #[test]
    fn retentions_parse() {
        assert_eq!(Retention::parse("0"), Ok(Retention::None));
        assert_eq!(Retention::parse("0d"), Ok(Retention::None));
        assert_eq!(Retention::parse("forever"), Ok(Retention::Forever));
        assert_eq!(Retention::parse("30d"), Ok(Retention::DEFAULT));
        assert_eq!(Retention::parse("12h"), Ok(Retention::Span(12 * 3_600_000)));
        assert_eq!(Retention::parse("90m"), Ok(Retention::Span(90 * 60_000)));
        assert_eq!(Retention::parse("45s"), Ok(Retention::Span(45_000)));
        assert_eq!(Retention::parse("500ms"), Ok(Retention::Span(500)));
        for bad in ["", "500", "d", "3w", "-1d", "1.5h"] {
            let e = Retention::parse(bad).unwrap_err();
            assert!(e.0.contains("forever"), "{bad}: {e}");
        }
    }
}
