//! Switching a data directory to a rebuilt state, and the requests a
//! running processor takes from other commands.
//!
//! A swap moves a finished rebuild (`feedlog rebuild --into NEWDIR`) into
//! the data directory as a new state generation and makes it the active
//! one. Beside a running processor it goes without downtime:
//!
//! 1. the rebuilt stores catch up, quietly, with the live state's positions
//!    while the processor keeps processing (a few rounds, each shorter);
//! 2. the processor's owners pause after their batch (committed and
//!    shipped); readers keep reading the old state;
//! 3. the rebuilt stores replay the last few records up to exactly the
//!    paused positions — they now hold what the live state holds;
//! 4. they move into `DIR/state.N`, `feedlog.json` names it, readers are
//!    handed the new set (each request reads one set, old or new), and the
//!    owners resume on it.
//!
//! The old generation stays on disk until `feedlog drop-state` removes it.

use crate::core::metrics::StepStats;
use crate::core::position::Positions;
use crate::core::Partition;
use crate::core::DEFAULT_INBOX_CAP;
use crate::log::Log;
use crate::ops::rebuild::{
    behind, positions, replay_to, PartitionProgress, ReadOnlyLog, RebuildPlan, ReplayError,
};
use crate::state::checkpoint::canonical;
use crate::state::datadir::DataDir;
use crate::state::set::open_stores;
use crate::state::{BlockCache, Store};
use crate::task::embedded::{Processor, ProcessorConfig};
use crate::task::Shutdown;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// What a swap did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwapReport {
    /// The generation now active.
    pub generation: String,
    /// The generation that was active, kept on disk.
    pub previous: String,
    /// Records the rebuilt state replayed to catch up with the live one.
    pub caught_up: u64,
    /// How long the owners were paused, ms (readers were not).
    pub paused_ms: u64,
    /// Of the pause: replaying the last records, ms.
    pub final_catch_up_ms: u64,
    /// Of the pause: closing, moving and reopening the state, ms.
    pub reopen_ms: u64,
    /// The inbox cap now in force.
    pub inbox_cap: u64,
}

fn refused(msg: String) -> ReplayError {
    ReplayError::Refused(msg)
}

/// Catches every store of `stores` up to `targets`, quietly, one thread per
/// partition; the number of records replayed.
fn catch_up(
    stores: &[Arc<Store>],
    log: &Arc<ReadOnlyLog>,
    cfg: &ProcessorConfig,
    targets: &[Positions],
) -> Result<u64, ReplayError> {
    let never = &Shutdown::new();
    let partitions = stores.len() as u32;
    let results: Vec<Result<StepStats, ReplayError>> = std::thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter()
            .zip(targets)
            .enumerate()
            .map(|(p, (store, &target))| {
                s.spawn(move || {
                    replay_to(
                        cfg.ctx(Partition(p as u32), partitions),
                        cfg,
                        store.clone(),
                        log.clone(),
                        target,
                        &PartitionProgress::default(),
                        never,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(ReplayError::Panicked("catch-up")))
            })
            .collect()
    });
    let mut total = StepStats::default();
    for r in results {
        total.add(&r?);
    }
    Ok(total.input())
}

/// A finished rebuild of `dir`, ready to swap in.
struct Rebuilt {
    dir: DataDir,
    plan: RebuildPlan,
}

/// Reads and checks the rebuild in `from`: of `d`, same partition count.
fn rebuilt_of(d: &DataDir, from: &Path) -> Result<Rebuilt, ReplayError> {
    let plan_file = from.join("rebuild.json");
    let plan: RebuildPlan = std::fs::read(&plan_file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| {
            refused(format!(
                "{} holds no rebuild (no {}): make one with `feedlog --data {} rebuild --into {}`",
                from.display(),
                plan_file.display(),
                d.root().display(),
                from.display()
            ))
        })?;
    let source = canonical(d.root());
    if plan.source != source {
        return Err(refused(format!(
            "{} is a rebuild of {}, not of {}",
            from.display(),
            plan.source.display(),
            source.display()
        )));
    }
    let dir = DataDir::open(from)?;
    if dir.partitions() != d.partitions() {
        return Err(refused(format!(
            "{} has {} partitions, {} has {}",
            from.display(),
            dir.partitions(),
            d.root().display(),
            d.partitions()
        )));
    }
    Ok(Rebuilt { dir, plan })
}

/// Switches `dir` to the finished rebuild in `from`. With `live`, the
/// processor running on `dir` (this process holds `run.lock` either way);
/// without, the data directory is idle and the rebuilt state catches up
/// with its stored positions. `say` gets progress lines.
pub fn swap(
    dir: &Path,
    from: &Path,
    live: Option<&Processor>,
    say: &dyn Fn(String),
) -> Result<SwapReport, ReplayError> {
    let mut d = DataDir::open(dir)?;
    let rebuilt = rebuilt_of(&d, from)?;
    let cfg = ProcessorConfig {
        inbox_cap: rebuilt
            .dir
            .inbox_cap()
            .unwrap_or(d.inbox_cap().unwrap_or(DEFAULT_INBOX_CAP)),
        ..live.map_or_else(ProcessorConfig::default, Processor::config)
    };
    let cache = match live {
        Some(p) => p.cache().clone(),
        None => BlockCache::new(cfg.cache_bytes),
    };
    let stores = open_stores(&rebuilt.dir, &cache, &cfg.store_options()).map_err(|e| {
        refused(format!(
            "opening the rebuilt state in {} (is its rebuild still running?): {e}",
            from.display()
        ))
    })?;
    if behind(&positions(&stores)?, &rebuilt.plan.target) > 0 {
        return Err(refused(format!(
            "the rebuild in {} is not finished; run `feedlog --data {} rebuild --into {}` again to finish it",
            from.display(),
            dir.display(),
            from.display()
        )));
    }
    let log = Arc::new(ReadOnlyLog(Arc::new(d.logs()) as Arc<dyn Log>));
    let report = match live {
        None => swap_idle(&mut d, &rebuilt, stores, &log, &cfg, &cache, from)?,
        Some(live) => swap_live(
            &mut d, &rebuilt, stores, &log, &cfg, &cache, live, from, say,
        )?,
    };
    cleanup(from);
    Ok(report)
}

/// The swap of an idle data directory: its positions do not move.
fn swap_idle(
    d: &mut DataDir,
    rebuilt: &Rebuilt,
    stores: Vec<Arc<Store>>,
    log: &Arc<ReadOnlyLog>,
    cfg: &ProcessorConfig,
    cache: &BlockCache,
    from: &Path,
) -> Result<SwapReport, ReplayError> {
    let targets = positions(&open_stores(d, cache, &cfg.store_options())?)?;
    check_not_ahead(&positions(&stores)?, &targets, from)?;
    let caught_up = catch_up(&stores, log, cfg, &targets)?;
    drop(stores);
    let previous = d.state_name().to_string();
    let generation = install(d, &rebuilt.dir, cfg.inbox_cap)?;
    Ok(SwapReport {
        generation,
        previous,
        caught_up,
        paused_ms: 0,
        final_catch_up_ms: 0,
        reopen_ms: 0,
        inbox_cap: cfg.inbox_cap,
    })
}

/// The swap beside a running processor: catch up in rounds while it runs,
/// then pause it for the last records and the move.
#[allow(clippy::too_many_arguments)]
fn swap_live(
    d: &mut DataDir,
    rebuilt: &Rebuilt,
    mut stores: Vec<Arc<Store>>,
    log: &Arc<ReadOnlyLog>,
    cfg: &ProcessorConfig,
    cache: &BlockCache,
    live: &Processor,
    from: &Path,
    say: &dyn Fn(String),
) -> Result<SwapReport, ReplayError> {
    // Catch up while the processor runs: rounds until the rest is short
    // (the processor pauses for the rest only).
    let mut caught_up = 0;
    for round in 1..=10 {
        let at = positions(&stores)?;
        let targets = live_past(live, &at, from)?;
        let gap = behind(&at, &targets);
        say(format!(
            "swap: catching up with the live state, round {round}: {gap} records behind"
        ));
        if gap < 1_000 {
            break;
        }
        caught_up += catch_up(&stores, log, cfg, &targets)?;
    }
    // Memtables to table files now, while nothing waits: reopening the
    // state during the pause then replays almost no write-ahead log.
    for s in &stores {
        s.flush()?;
    }
    say("swap: pausing processing (not reads) to replay the last records".into());
    let pause = Instant::now();
    let (mut final_catch_up_ms, mut reopen_ms) = (0, 0);
    if !live.pause() {
        return Err(refused(
            "the processor stopped before the swap; nothing was changed".into(),
        ));
    }
    let previous = d.state_name().to_string();
    let old_cap = live.config().inbox_cap;
    let mut finish = || -> Result<String, ReplayError> {
        let targets = positions(&live.stores())?;
        check_not_ahead(&positions(&stores)?, &targets, from)?;
        caught_up += catch_up(&stores, log, cfg, &targets)?;
        final_catch_up_ms = pause.elapsed().as_millis() as u64;
        let reopen = Instant::now();
        std::mem::take(&mut stores);
        let generation = install(d, &rebuilt.dir, cfg.inbox_cap)?;
        let reopened = open_stores(d, cache, &cfg.store_options())
            .map_err(ReplayError::Store)
            .and_then(|s| {
                let epoch = crate::state::datadir::generation_number(&generation);
                match live.replace_stores(s, cfg.inbox_cap, epoch) {
                    true => Ok(()),
                    false => Err(refused("the processor was not paused".to_string())),
                }
            });
        match reopened {
            Ok(()) => {
                reopen_ms = reopen.elapsed().as_millis() as u64;
                Ok(generation)
            }
            Err(e) => {
                // Back to the old generation, the rebuilt state back where
                // it was: nothing changed.
                let _ = d.set_state(&previous, old_cap);
                let _ = std::fs::rename(d.root().join(&generation), rebuilt.dir.state_root());
                Err(ReplayError::Undone(Box::new(e)))
            }
        }
    };
    let result = finish();
    live.resume();
    let paused_ms = pause.elapsed().as_millis() as u64;
    Ok(SwapReport {
        generation: result?,
        previous,
        caught_up,
        paused_ms,
        final_catch_up_ms,
        reopen_ms,
        inbox_cap: cfg.inbox_cap,
    })
}

/// The live processor's positions once they cover `at`: a rebuild replays
/// to the log's ends when it started, which the processor, running, may
/// not have applied yet; it is waited for (up to a minute, then refused as
/// a state ahead of the live one).
fn live_past(
    live: &Processor,
    at: &[Positions],
    from: &Path,
) -> Result<Vec<Positions>, ReplayError> {
    let start = Instant::now();
    loop {
        let targets = positions(&live.stores())?;
        let covered = targets.iter().zip(at).all(|(t, a)| t.covers(*a));
        if covered || start.elapsed() > std::time::Duration::from_secs(60) {
            check_not_ahead(at, &targets, from)?;
            return Ok(targets);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn check_not_ahead(
    at: &[Positions],
    targets: &[Positions],
    from: &Path,
) -> Result<(), ReplayError> {
    for (p, (a, t)) in at.iter().zip(targets).enumerate() {
        if !t.covers(*a) {
            return Err(refused(format!(
                "the rebuilt state in {} is ahead of the live state in partition {p} ({a} against {t}); \
                 it cannot have come from this log",
                from.display()
            )));
        }
    }
    Ok(())
}

/// Moves the (closed) rebuilt state into `d` as a new generation and makes
/// it active; its name.
fn install(d: &mut DataDir, rebuilt: &DataDir, inbox_cap: u64) -> Result<String, ReplayError> {
    let name = d.next_state_name()?;
    let to = d.root().join(&name);
    std::fs::rename(rebuilt.state_root(), &to).map_err(|source| ReplayError::Io {
        action: format!("moving {} to", rebuilt.state_root().display()),
        path: to.clone(),
        hint: match source.kind() {
            std::io::ErrorKind::CrossesDevices => {
                " (a swap moves the rebuilt state into the data directory: rebuild into a directory on the same file system)"
            }
            _ => "",
        },
        source,
    })?;
    crate::state::fsutil::sync_dir(d.root()).map_err(ReplayError::io("syncing", d.root()))?;
    d.set_state(&name, inbox_cap)?;
    Ok(name)
}

/// Removes what a moved rebuild leaves behind (its identity and plan), and
/// the directory when that leaves it empty.
fn cleanup(from: &Path) {
    for f in ["rebuild.json", "feedlog.json"] {
        let _ = std::fs::remove_file(from.join(f));
    }
    let _ = std::fs::remove_dir(from);
}
