//! Rebuild a data directory's state from its log into a fresh directory,
//! beside the live processor.
//!
//! A rebuild is the processor's own quiet replay (see
//! [`PartitionTask::open_after`]): every record of `events[p]` and
//! `effects[p]` below the log's end *as it was when the rebuild started* is
//! applied to a fresh store, and nothing is emitted — the live processor
//! emitted all of it already. The log is opened through [`ReadOnlyLog`], so
//! a rebuild cannot append to it even by mistake. The target positions are
//! kept in `NEWDIR/rebuild.json`: a rebuild that is stopped (or killed) and
//! started again resumes from its stores and ends at the same positions.

use crate::api::query::QueryError;
use crate::core::metrics::StepStats;
use crate::core::position::{Offset, Positions};
use crate::core::Partition;
use crate::core::{Ctx, Disposition, Epoch};
use crate::log::{Log, LogError, NewRecord, Sink, Source, Topic};
use crate::state::checkpoint::{canonical, DirCheckpoint};
use crate::state::datadir::{DataDir, DataDirError, FIRST_STATE};
use crate::state::{BlockCache, Store, StoreError};
use crate::task::embedded::ProcessorConfig;
use crate::task::{start_with_threshold, NoFaults, PartitionTask, Shutdown, Takeover, TaskError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Why a replay tool failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A data directory could not be opened or created.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// A store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The log failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A read failed.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A partition's replay failed.
    #[error("partition {partition}: {source}")]
    Task {
        /// The partition.
        partition: Partition,
        /// What failed.
        source: TaskError,
    },
    /// A file-system call failed.
    #[error("{action} {path}: {source}{hint}")]
    Io {
        /// What was being done.
        action: String,
        /// On what.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
        /// What to do about it, when known (empty otherwise).
        hint: &'static str,
    },
    /// A worker thread panicked (a bug: its message is in the log above).
    #[error("a {0} thread panicked")]
    Panicked(&'static str),
    /// A swap's last step failed and the swap was undone: nothing changed.
    #[error("opening the swapped-in state failed, so the swap was undone: {0}")]
    Undone(Box<ReplayError>),
    /// The request cannot be carried out as asked; nothing was changed.
    #[error("{0}")]
    Refused(String),
}

impl ReplayError {
    /// A file-system failure while `action` on `path`.
    pub fn io(
        action: impl Into<String>,
        path: &Path,
    ) -> impl FnOnce(std::io::Error) -> ReplayError {
        let (action, path) = (action.into(), path.to_path_buf());
        move |source| ReplayError::Io {
            action,
            path,
            source,
            hint: "",
        }
    }

    /// Skip, retry or stop: the answer of what failed underneath; a
    /// refusal or a panic stops for an operator.
    pub fn disposition(&self) -> Disposition {
        match self {
            ReplayError::DataDir(e) => e.disposition(),
            ReplayError::Store(e) => e.disposition(),
            ReplayError::Log(e) => e.disposition(),
            ReplayError::Query(e) => e.disposition(),
            ReplayError::Task { source, .. } => source.disposition(),
            ReplayError::Io { source, .. } => Disposition::of_io(source.kind()),
            ReplayError::Undone(e) => e.disposition(),
            ReplayError::Panicked(_) | ReplayError::Refused(_) => Disposition::Stop,
        }
    }
}

/// The log of a live data directory, for reading only: its sink refuses
/// every append.
pub struct ReadOnlyLog(pub Arc<dyn Log>);

struct RefusingSink;

impl Sink for RefusingSink {
    fn append(
        &mut self,
        topic: Topic,
        partition: Partition,
        _: &[NewRecord<'_>],
    ) -> Result<(), LogError> {
        Err(LogError::ReadOnly(format!(
            "appending to {topic:?}[{partition}]"
        )))
    }

    fn flush(&mut self) -> Result<(), LogError> {
        Ok(())
    }
}

impl Log for ReadOnlyLog {
    fn source(
        &self,
        topic: Topic,
        partition: Partition,
        from: Offset,
    ) -> Result<Box<dyn Source>, LogError> {
        self.0.source(topic, partition, from)
    }

    fn sink(self: Arc<Self>, _sync: bool) -> Result<Box<dyn Sink>, LogError> {
        Ok(Box::new(RefusingSink))
    }

    fn end_offset(&self, topic: Topic, partition: Partition) -> Result<Offset, LogError> {
        self.0.end_offset(topic, partition)
    }

    fn partitions(&self, topic: Topic) -> u32 {
        self.0.partitions(topic)
    }
}

/// `NEWDIR/rebuild.json`: what a rebuild replays, so a restart ends at the
/// same place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebuildPlan {
    /// The live data directory whose log is replayed.
    pub source: PathBuf,
    /// Per partition, the `events` and `effects` offsets to replay up to
    /// (the log's ends when the rebuild first started).
    pub target: Vec<Positions>,
    /// The checkpoint the state started from, if not from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_checkpoint: Option<PathBuf>,
}

/// One partition's progress, shared with a progress display.
#[derive(Debug, Default)]
pub struct PartitionProgress {
    /// Next `events` offset to apply.
    pub events: AtomicU64,
    /// Next `effects` offset to apply.
    pub effects: AtomicU64,
    /// Set once the partition reached its target.
    pub done: AtomicBool,
}

/// A rebuild: its plan and live progress.
pub struct Rebuild {
    /// What is replayed.
    pub plan: RebuildPlan,
    /// Per partition: where it started (a restart resumes) and where it is.
    pub started_at: Vec<Positions>,
    /// Per partition, live.
    pub progress: Vec<Arc<PartitionProgress>>,
    into: DataDir,
    stores: Vec<Arc<Store>>,
    log: Arc<ReadOnlyLog>,
    cfg: ProcessorConfig,
}

impl Rebuild {
    /// Prepares a rebuild of `live`'s state into `into` (created when new;
    /// resumed when it holds an unfinished rebuild of the same directory).
    // Long: the refusals, then the plan resumed or written, then the stores: in the order a resumed rebuild must check them.
    pub fn open(
        live: &Path,
        into: &Path,
        from_checkpoint: Option<&Path>,
        cfg: ProcessorConfig,
    ) -> Result<Rebuild, ReplayError> {
        let src = DataDir::open(live)?;
        let source = canonical(live);
        let plan_file = into.join("rebuild.json");
        if into.exists() && !plan_file.exists() {
            let empty = std::fs::read_dir(into)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            if !empty {
                return Err(ReplayError::Refused(format!(
                    "{} exists and holds no rebuild: give a new or empty directory",
                    into.display()
                )));
            }
        }
        let logs: Arc<dyn Log> = Arc::new(src.logs());
        let checkpoint = match from_checkpoint {
            Some(c) if !plan_file.exists() => {
                let info = DirCheckpoint::open(c)?;
                info.check_usable(&source, src.partitions(), cfg.inbox_cap, &*logs)?;
                Some((c, info))
            }
            _ => None,
        };
        let mut dst = DataDir::create_or_open(into, Some(src.partitions()))?;
        dst.set_inbox_cap(cfg.inbox_cap)?;
        let plan = if plan_file.exists() {
            let plan: RebuildPlan = std::fs::read(&plan_file)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .ok_or_else(|| {
                    ReplayError::Refused(format!("{} is not a rebuild plan", plan_file.display()))
                })?;
            if plan.source != source {
                return Err(ReplayError::Refused(format!(
                    "{} holds a rebuild of {}, not of {}",
                    into.display(),
                    plan.source.display(),
                    source.display()
                )));
            }
            if let Some(c) = from_checkpoint {
                if plan.from_checkpoint.as_deref() != Some(&canonical(c)) {
                    return Err(ReplayError::Refused(format!(
                        "{} holds a rebuild that did not start from checkpoint {}: resume it without --from-checkpoint, or give a new directory",
                        into.display(),
                        c.display()
                    )));
                }
            }
            plan
        } else {
            let target = Partition::all(src.partitions())
                .map(|p| {
                    Ok(Positions {
                        events: logs.end_offset(Topic::Events, p)?,
                        effects: logs.end_offset(Topic::Effects, p)?,
                    })
                })
                .collect::<Result<Vec<_>, LogError>>()?;
            if let Some((c, info)) = &checkpoint {
                for (p, (&pos, &end)) in info.positions.iter().zip(&target).enumerate() {
                    if !end.covers(pos) {
                        return Err(ReplayError::Refused(format!(
                            "checkpoint {} is ahead of the log in partition {p} (at {pos}, the log ends at {end})",
                            c.display()
                        )));
                    }
                }
                crate::state::fsutil::copy_tree_linking_tables(
                    &c.join(FIRST_STATE),
                    &dst.state_root(),
                )
                .map_err(ReplayError::io(
                    format!("copying checkpoint {} into", c.display()),
                    &dst.state_root(),
                ))?;
            }
            let plan = RebuildPlan {
                source,
                target,
                from_checkpoint: checkpoint.map(|(c, _)| canonical(c)),
            };
            write_json(&plan_file, &plan)?;
            plan
        };
        let cache = BlockCache::new(cfg.cache_bytes);
        let stores = crate::state::set::open_stores(&dst, &cache, &cfg.store_options())?;
        let started_at = positions(&stores)?;
        let progress = started_at
            .iter()
            .map(|at| {
                Arc::new(PartitionProgress {
                    events: AtomicU64::new(at.events.0),
                    effects: AtomicU64::new(at.effects.0),
                    done: AtomicBool::new(false),
                })
            })
            .collect();
        Ok(Rebuild {
            plan,
            started_at,
            progress,
            into: dst,
            stores,
            log: Arc::new(ReadOnlyLog(logs)),
            cfg,
        })
    }

    /// Replays every partition to its target (one thread each), until done
    /// or `shutdown`. Returns the summed figures; `Ok` with some partitions
    /// not done only when shut down.
    pub fn run(&self, shutdown: &Shutdown) -> Result<StepStats, ReplayError> {
        let results: Vec<Result<StepStats, ReplayError>> = std::thread::scope(|s| {
            let handles: Vec<_> = Partition::all(self.into.partitions())
                .map(|p| s.spawn(move || self.run_partition(p, shutdown)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(ReplayError::Panicked("rebuild")))
                })
                .collect()
        });
        let mut total = StepStats::default();
        for r in results {
            total.add(&r?);
        }
        Ok(total)
    }

    fn run_partition(&self, p: Partition, shutdown: &Shutdown) -> Result<StepStats, ReplayError> {
        replay_to(
            self.cfg.ctx(p, self.into.partitions()),
            &self.cfg,
            self.stores[p.index()].clone(),
            self.log.clone(),
            self.plan.target[p.index()],
            &self.progress[p.index()],
            shutdown,
        )
    }

    /// Whether every partition has reached its target.
    pub fn finished(&self) -> Result<bool, ReplayError> {
        Ok(behind(&positions(&self.stores)?, &self.plan.target) == 0)
    }
}

/// Records from positions `at` up to `targets`, both inputs, summed over
/// partitions.
pub fn behind(at: &[Positions], targets: &[Positions]) -> u64 {
    at.iter().zip(targets).map(|(a, t)| a.records_to(*t)).sum()
}

/// Positions of every store: next `events` and `effects` offsets.
pub fn positions(stores: &[Arc<Store>]) -> Result<Vec<Positions>, StoreError> {
    stores.iter().map(|s| s.positions()).collect()
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), ReplayError> {
    let bytes = serde_json::to_vec_pretty(value)
        .expect("a plan (paths, numbers and strings) always encodes as JSON");
    crate::state::fsutil::write_atomically(path, &bytes)
        .map_err(|(p, e)| ReplayError::io("writing", &p)(e))
}

/// Replays `log` into `store` quietly (applying, emitting nothing) up to
/// `target` (next `events` and `effects` offsets), from the store's own
/// positions; `progress` follows it. Returns early, `Ok`, on `shutdown`.
pub fn replay_to(
    ctx: Ctx,
    cfg: &ProcessorConfig,
    store: Arc<Store>,
    log: Arc<ReadOnlyLog>,
    target: Positions,
    progress: &PartitionProgress,
    shutdown: &Shutdown,
) -> Result<StepStats, ReplayError> {
    let p = ctx.partition;
    let task_err = |source| ReplayError::Task {
        partition: p,
        source,
    };
    // A state that has applied nothing starts with the directory's
    // starting threshold (`cfg.pull_threshold`), as the log's first owners
    // did; then a replay asks for no pull threshold: it decides under those
    // the log has in force, as the owners that wrote it did.
    start_with_threshold(&store, cfg.pull_threshold).map_err(task_err)?;
    let ctx = Ctx {
        pull_threshold: None,
        ..ctx
    };
    // Quiet up to its target, where it stops: it sends nothing, so its
    // epoch is never stamped on anything.
    let takeover = Takeover {
        epoch: Epoch::ZERO,
        emitted: Some(target),
        reship: false,
    };
    let mut task =
        PartitionTask::open_after(ctx, cfg.limits, false, store, log as Arc<dyn Log>, takeover)
            .map_err(task_err)?;
    task.leave_requests_to_the_next_owner();
    let mut total = StepStats::default();
    while !task.caught_up() {
        if shutdown.is_requested() {
            return Ok(total);
        }
        let stats = task.step(&mut NoFaults).map_err(task_err)?;
        let at = task.positions();
        progress.events.store(at.events.0, Ordering::SeqCst);
        progress.effects.store(at.effects.0, Ordering::SeqCst);
        if stats.input() == 0 {
            // Below the target every record is already in the log; a
            // step that reads nothing means the log is shorter than the
            // target says.
            return Err(ReplayError::Refused(format!(
                "partition {p}: the log ends before the replay's target ({target}; at {})",
                task.positions()
            )));
        }
        total.add(&stats);
    }
    progress.done.store(true, Ordering::SeqCst);
    Ok(total)
}

#[cfg(test)]
mod tests;
