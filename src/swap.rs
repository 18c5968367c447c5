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
//!
//! Requests reach a running processor through `DIR/control/`: the
//! requester writes `request.json` (atomically) and waits for
//! `ID.result.json`; the processor polls, claims the request by renaming it
//! to `working.json`, carries it out and answers. A requester that finds
//! `run.lock` free does the work itself instead.

use crate::datadir::DataDir;
use crate::log::Log;
use crate::processor::{self, Processor, ProcessorConfig};
use crate::replay::{
    self, behind, positions, PartitionProgress, ReadOnlyLog, RebuildPlan, ReplayError,
};
use crate::state::Store;
use crate::task::StepStats;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    targets: &[(u64, u64)],
    cancel: &AtomicBool,
) -> Result<u64, ReplayError> {
    let partitions = stores.len() as u32;
    let results: Vec<Result<StepStats, ReplayError>> = std::thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter()
            .zip(targets)
            .enumerate()
            .map(|(p, (store, &target))| {
                s.spawn(move || {
                    replay::replay_to(
                        cfg.ctx(p as u32, partitions),
                        cfg,
                        store.clone(),
                        log.clone(),
                        target,
                        &PartitionProgress::default(),
                        cancel,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("catch-up thread"))
            .collect()
    });
    let mut total = StepStats::default();
    for r in results {
        total.add(&r?);
    }
    Ok(total.input())
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
    let plan_file = from.join("rebuild.json");
    let plan: RebuildPlan = std::fs::read(&plan_file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| {
            refused(format!(
                "{} holds no rebuild (no {}): make one with `feedlog --data {} rebuild --into {}`",
                from.display(),
                plan_file.display(),
                dir.display(),
                from.display()
            ))
        })?;
    let source = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    if plan.source != source {
        return Err(refused(format!(
            "{} is a rebuild of {}, not of {}",
            from.display(),
            plan.source.display(),
            source.display()
        )));
    }
    let rebuilt = DataDir::open(from)?;
    if rebuilt.partitions() != d.partitions() {
        return Err(refused(format!(
            "{} has {} partitions, {} has {}",
            from.display(),
            rebuilt.partitions(),
            dir.display(),
            d.partitions()
        )));
    }
    let cfg = ProcessorConfig {
        inbox_cap: rebuilt.inbox_cap().unwrap_or(d.inbox_cap().unwrap_or(800)),
        ..live.map_or_else(ProcessorConfig::default, Processor::config)
    };
    let cache = match live {
        Some(p) => p.cache().clone(),
        None => rocksdb::Cache::new_lru_cache(cfg.cache_bytes),
    };
    let open_rebuilt = || {
        processor::open_stores(&rebuilt, &cache, cfg.sync).map_err(|e| {
            refused(format!(
                "opening the rebuilt state in {} (is its rebuild still running?): {e}",
                from.display()
            ))
        })
    };
    let mut stores = open_rebuilt()?;
    let at = positions(&stores)?;
    if behind(&at, &plan.target) > 0 {
        return Err(refused(format!(
            "the rebuild in {} is not finished; run `feedlog --data {} rebuild --into {}` again to finish it",
            from.display(),
            dir.display(),
            from.display()
        )));
    }
    let log = Arc::new(ReadOnlyLog(Arc::new(d.logs()) as Arc<dyn Log>));
    let never = AtomicBool::new(false);
    // Idle data directory: its positions do not move.
    let Some(live) = live else {
        let live_stores = processor::open_stores(&d, &cache, cfg.sync)?;
        let targets = positions(&live_stores)?;
        drop(live_stores);
        check_not_ahead(&positions(&stores)?, &targets, from)?;
        let caught_up = catch_up(&stores, &log, &cfg, &targets, &never)?;
        drop(stores);
        let previous = d.state_name().to_string();
        let generation = install(&mut d, &rebuilt, cfg.inbox_cap)?;
        cleanup(from);
        return Ok(SwapReport {
            generation,
            previous,
            caught_up,
            paused_ms: 0,
            final_catch_up_ms: 0,
            reopen_ms: 0,
            inbox_cap: cfg.inbox_cap,
        });
    };
    // Catch up while the processor runs: rounds until the rest is short
    // (the processor pauses for the rest only).
    let mut caught_up = 0;
    for round in 1..=10 {
        let targets = positions(&live.stores())?;
        let at = positions(&stores)?;
        check_not_ahead(&at, &targets, from)?;
        let gap = behind(&at, &targets);
        say(format!(
            "swap: catching up with the live state, round {round}: {gap} records behind"
        ));
        if gap < 1_000 {
            break;
        }
        caught_up += catch_up(&stores, &log, &cfg, &targets, &never)?;
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
        caught_up += catch_up(&stores, &log, &cfg, &targets, &never)?;
        final_catch_up_ms = pause.elapsed().as_millis() as u64;
        let reopen = Instant::now();
        std::mem::take(&mut stores);
        let generation = install(&mut d, &rebuilt, cfg.inbox_cap)?;
        match processor::open_stores(&d, &cache, cfg.sync) {
            Ok(reopened) => {
                live.replace_stores(reopened, cfg.inbox_cap);
                reopen_ms = reopen.elapsed().as_millis() as u64;
                Ok(generation)
            }
            Err(e) => {
                // Back to the old generation, the rebuilt state back where
                // it was: nothing changed.
                let _ = d.set_state(&previous, old_cap);
                let _ = std::fs::rename(d.root().join(&generation), rebuilt.state_root());
                Err(refused(format!(
                    "opening the swapped-in state failed, so the swap was undone: {e}"
                )))
            }
        }
    };
    let result = finish();
    live.resume();
    let paused_ms = pause.elapsed().as_millis() as u64;
    let generation = result?;
    cleanup(from);
    Ok(SwapReport {
        generation,
        previous,
        caught_up,
        paused_ms,
        final_catch_up_ms,
        reopen_ms,
        inbox_cap: cfg.inbox_cap,
    })
}

fn check_not_ahead(
    at: &[(u64, u64)],
    targets: &[(u64, u64)],
    from: &Path,
) -> Result<(), ReplayError> {
    for (p, (a, t)) in at.iter().zip(targets).enumerate() {
        if a.0 > t.0 || a.1 > t.1 {
            return Err(refused(format!(
                "the rebuilt state in {} is ahead of the live state in partition {p} ({a:?} against {t:?}); \
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
    std::fs::rename(rebuilt.state_root(), &to).map_err(|e| {
        let hint = if e.raw_os_error() == Some(18) {
            " (a swap moves the rebuilt state into the data directory: rebuild into a directory on the same file system)"
        } else {
            ""
        };
        refused(format!(
            "moving {} to {}: {e}{hint}",
            rebuilt.state_root().display(),
            to.display()
        ))
    })?;
    crate::fsutil::sync_dir(d.root())
        .map_err(|e| refused(format!("syncing {}: {e}", d.root().display())))?;
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

/// A request to the process that holds `run.lock`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Write a checkpoint of every partition into `into`.
    Checkpoint {
        /// The new checkpoint directory.
        into: PathBuf,
    },
    /// Swap to the finished rebuild in `from`.
    Swap {
        /// The rebuild's directory.
        from: PathBuf,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Envelope {
    id: String,
    #[serde(flatten)]
    request: Request,
}

/// The answer to a [`Request`]: a JSON value on success, a message on
/// failure.
pub type Answer = Result<serde_json::Value, String>;

#[derive(Debug, Serialize, Deserialize)]
struct AnswerFile {
    ok: Option<serde_json::Value>,
    error: Option<String>,
}

fn control_dir(d: &DataDir) -> PathBuf {
    d.root().join("control")
}

/// Sends `request` to the processor running on `d` and waits for its
/// answer; `waiting` is called about every 2 s. Errors when a request is
/// already pending, or when the processor stops before answering (its
/// request is then withdrawn).
pub fn request(d: &DataDir, request: Request, waiting: &dyn Fn(Duration)) -> Answer {
    let dir = control_dir(d);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let file = dir.join("request.json");
    if file.exists() || dir.join("working.json").exists() {
        return Err(format!(
            "another request to the processor is pending ({}); wait for it, or remove the file if its requester is gone",
            dir.display()
        ));
    }
    let id = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.as_nanos())
    );
    let env = Envelope {
        id: id.clone(),
        request,
    };
    crate::fsutil::write_atomically(&file, &serde_json::to_vec(&env).expect("plain"))
        .map_err(|(p, e)| format!("writing {}: {e}", p.display()))?;
    let answer_file = dir.join(format!("{id}.result.json"));
    let start = Instant::now();
    let mut last = Instant::now();
    loop {
        if let Ok(bytes) = std::fs::read(&answer_file) {
            let _ = std::fs::remove_file(&answer_file);
            let a: AnswerFile = serde_json::from_slice(&bytes)
                .map_err(|e| format!("unreadable answer {}: {e}", answer_file.display()))?;
            return match (a.ok, a.error) {
                (Some(v), _) => Ok(v),
                (None, Some(e)) => Err(e),
                (None, None) => Err("empty answer".into()),
            };
        }
        // The processor holds run.lock while it runs; a free lock means it
        // is gone.
        if let Ok(Some(_lock)) = d.try_lock() {
            if std::fs::remove_file(&file).is_ok() {
                return Err("no processor is running on this data directory any more; the request was withdrawn".into());
            }
            if !answer_file.exists() {
                return Err("the processor stopped while carrying out the request; check its output, then `feedlog states`".into());
            }
            continue;
        }
        if last.elapsed() >= Duration::from_secs(2) {
            waiting(start.elapsed());
            last = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Takes the next pending request for the processor on `d`, if any.
fn take_request(d: &DataDir) -> Option<Envelope> {
    let dir = control_dir(d);
    let (file, working) = (dir.join("request.json"), dir.join("working.json"));
    std::fs::rename(&file, &working).ok()?;
    let bytes = std::fs::read(&working).ok()?;
    match serde_json::from_slice::<Envelope>(&bytes) {
        Ok(env) => Some(env),
        Err(e) => {
            tracing::warn!(file = %working.display(), error = %e, "ignoring an unreadable request");
            let _ = std::fs::remove_file(&working);
            None
        }
    }
}

fn answer(d: &DataDir, id: &str, a: &Answer) {
    let dir = control_dir(d);
    let file = AnswerFile {
        ok: a.as_ref().ok().cloned(),
        error: a.as_ref().err().cloned(),
    };
    let path = dir.join(format!("{id}.result.json"));
    if let Err((p, e)) =
        crate::fsutil::write_atomically(&path, &serde_json::to_vec(&file).expect("plain"))
    {
        tracing::error!(file = %p.display(), error = %e, "could not answer a request");
    }
    let _ = std::fs::remove_file(dir.join("working.json"));
}

/// Carries out `request` against `d`: through `live` when a processor runs
/// here (in this process), on the stores directly otherwise.
pub fn carry_out(
    d: &DataDir,
    live: Option<&Processor>,
    request: &Request,
    say: &dyn Fn(String),
) -> Answer {
    let value = match request {
        Request::Checkpoint { into } => {
            let (stores, cap) = match live {
                Some(p) => (p.stores().to_vec(), p.config().inbox_cap),
                None => {
                    let cache = rocksdb::Cache::new_lru_cache(64 << 20);
                    let s = processor::open_stores(d, &cache, true).map_err(|e| e.to_string())?;
                    (s, d.inbox_cap().unwrap_or(800))
                }
            };
            let c = replay::write_checkpoint(&stores, d, cap, into).map_err(|e| e.to_string())?;
            serde_json::to_value(c)
        }
        Request::Swap { from } => {
            let r = swap(d.root(), from, live, say).map_err(|e| e.to_string())?;
            serde_json::to_value(r)
        }
    };
    Ok(value.expect("plain struct"))
}

/// Serves requests for the processor `live` on `d` until `stop`: polls
/// `DIR/control/` a few times a second.
pub fn serve_requests(d: &DataDir, live: &Processor, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) && !live.ended() {
        if let Some(env) = take_request(d) {
            eprintln!("request {}: {:?}", env.id, env.request);
            let say = |line: String| eprintln!("{line}");
            let a = carry_out(d, Some(live), &env.request, &say);
            match &a {
                Ok(v) => eprintln!("request {} done: {v}", env.id),
                Err(e) => eprintln!("request {} failed: {e}", env.id),
            }
            answer(d, &env.id, &a);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Where [`reset`] moves a data directory's state.
#[derive(Debug, Clone)]
pub enum ResetTo {
    /// An empty state: the next run processes the whole log.
    Start,
    /// The state of a checkpoint of this data directory.
    Checkpoint(PathBuf),
}

/// What [`reset`] did.
#[derive(Debug, Clone, Serialize)]
pub struct ResetReport {
    /// The generation now active.
    pub generation: String,
    /// The generation that was active, kept on disk.
    pub previous: String,
    /// Per partition, where processing resumes (next `events`, `effects`).
    pub positions: Vec<(u64, u64)>,
    /// Records the next run processes again (both inputs, to today's ends).
    pub to_process: u64,
}

/// Moves the idle data directory `dir` (the caller holds `run.lock`) back
/// to `to` as a new state generation; the old one stays until dropped.
/// Refuses, changing nothing, when the log no longer holds a position
/// processing would resume from (retention).
pub fn reset(dir: &Path, to: &ResetTo) -> Result<ResetReport, ReplayError> {
    let mut d = DataDir::open(dir)?;
    let logs = d.logs();
    let (positions, cap) = match to {
        ResetTo::Start => (
            vec![(0, 0); d.partitions() as usize],
            d.inbox_cap().unwrap_or(800),
        ),
        ResetTo::Checkpoint(c) => {
            let info = replay::Checkpoint::open(c)?;
            let source = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
            info.check_usable(&source, d.partitions(), info.inbox_cap, &logs)?;
            (info.positions, info.inbox_cap)
        }
    };
    replay::check_held(&logs, &positions)?;
    let mut to_process = 0;
    for (p, &(e, f)) in positions.iter().enumerate() {
        let ends = (
            logs.end_offset(crate::log::Topic::Events, p as u32)?,
            logs.end_offset(crate::log::Topic::Effects, p as u32)?,
        );
        to_process += ends.0.saturating_sub(e) + ends.1.saturating_sub(f);
    }
    let generation = d.next_state_name()?;
    let root = d.root().join(&generation);
    let made = match to {
        ResetTo::Start => std::fs::create_dir(&root),
        ResetTo::Checkpoint(c) => {
            let from = DataDir::open(c)?.state_root();
            crate::fsutil::copy_tree_linking_tables(&from, &root).map(|_| ())
        }
    };
    made.map_err(|e| refused(format!("creating {}: {e}", root.display())))?;
    let previous = d.state_name().to_string();
    d.set_state(&generation, cap)?;
    Ok(ResetReport {
        generation,
        previous,
        positions,
        to_process,
    })
}

/// One state generation of a data directory.
#[derive(Debug, Clone, Serialize)]
pub struct Generation {
    /// Its directory name.
    pub name: String,
    /// Whether it is the active one.
    pub active: bool,
    /// Bytes on disk.
    pub bytes: u64,
}

/// Every state generation of `d`.
pub fn generations(d: &DataDir) -> Result<Vec<Generation>, ReplayError> {
    Ok(d.state_generations()?
        .into_iter()
        .map(|name| Generation {
            active: name == d.state_name(),
            bytes: crate::fsutil::tree_size(&d.root().join(&name)),
            name,
        })
        .collect())
}

/// Removes the inactive state generation `name` of `d`; the bytes freed.
pub fn drop_state(d: &DataDir, name: &str) -> Result<u64, ReplayError> {
    if !crate::datadir::is_state_name(name) {
        return Err(refused(format!(
            "{name:?} is not a state generation (`state` or `state.N`; see `feedlog states`)"
        )));
    }
    if name == d.state_name() {
        return Err(refused(format!(
            "{name} is the active state generation; only an inactive one can be dropped"
        )));
    }
    let path = d.root().join(name);
    if !path.is_dir() {
        return Err(refused(format!("there is no {}", path.display())));
    }
    let bytes = crate::fsutil::tree_size(&path);
    std::fs::remove_dir_all(&path)
        .map_err(|e| refused(format!("removing {}: {e}", path.display())))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{NewRecord, PartitionWriter, Topic};

    /// A data directory of one partition whose `events` log holds `n`
    /// records in segments of about 200 bytes; the segment base offsets.
    fn small_segments(root: &Path, n: u64) -> (DataDir, Vec<u64>) {
        let d = DataDir::create_or_open(root, Some(1)).unwrap();
        let dir = d.logs().dir(Topic::Events, 0);
        let mut w = PartitionWriter::open(&dir, 200).unwrap();
        for i in 0..n {
            let v = format!("record {i}");
            w.append(&[NewRecord {
                timestamp_ms: i,
                format: 0,
                key: b"1",
                value: v.as_bytes(),
            }])
            .unwrap();
        }
        w.sync().unwrap();
        let mut bases: Vec<u64> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".log").and_then(|b| b.parse().ok()))
            .collect();
        bases.sort();
        (d, bases)
    }

    // Proves reset refuses, changing nothing, once retention removed the start of the log, and moves to a new generation (keeping the old) while it is held.
    #[test]
    fn reset_refuses_positions_the_log_no_longer_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, bases) = small_segments(tmp.path(), 40);
        assert!(bases.len() >= 3, "several segments: {bases:?}");
        let r = reset(d.root(), &ResetTo::Start).unwrap();
        assert_eq!(
            (r.previous.as_str(), r.generation.as_str()),
            ("state", "state.1")
        );
        assert_eq!(r.to_process, 40);
        let d = DataDir::open(tmp.path()).unwrap();
        assert_eq!(d.state_name(), "state.1");

        // Retention removes the first segment: the start is gone.
        let seg0 = d
            .logs()
            .dir(Topic::Events, 0)
            .join(format!("{:020}.log", bases[0]));
        std::fs::remove_file(seg0).unwrap();
        let err = reset(d.root(), &ResetTo::Start).unwrap_err().to_string();
        assert!(
            err.contains("no longer holds Events[0] from offset 0"),
            "{err}"
        );
        let d = DataDir::open(tmp.path()).unwrap();
        assert_eq!(d.state_name(), "state.1", "unchanged");
        assert_eq!(
            d.state_generations().unwrap(),
            ["state.1"],
            "no new generation"
        );
    }

    // Proves drop-state removes an inactive generation and refuses the active one or a name that is not a generation.
    #[test]
    fn drop_state_only_removes_inactive_generations() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, _) = small_segments(tmp.path(), 5);
        std::fs::create_dir_all(d.root().join("state/00000")).unwrap();
        std::fs::write(d.root().join("state/00000/x"), b"12345").unwrap();
        reset(d.root(), &ResetTo::Start).unwrap();
        let d = DataDir::open(tmp.path()).unwrap();
        let gens = generations(&d).unwrap();
        assert_eq!(gens.len(), 2);
        assert!(gens[1].active && !gens[0].active && gens[0].bytes == 5);
        let err = drop_state(&d, "state.1").unwrap_err().to_string();
        assert!(err.contains("is the active state generation"), "{err}");
        let err = drop_state(&d, "log").unwrap_err().to_string();
        assert!(err.contains("is not a state generation"), "{err}");
        assert_eq!(drop_state(&d, "state").unwrap(), 5);
        assert_eq!(d.state_generations().unwrap(), ["state.1"]);
    }
}
