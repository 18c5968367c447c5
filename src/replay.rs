//! Replay tooling: rebuild a data directory's state from its log into a
//! fresh directory, beside the live processor; digest every view to verify
//! two states against each other.
//!
//! A rebuild is the processor's own quiet replay (see
//! [`PartitionTask::open_after`]): every record of `events[p]` and
//! `effects[p]` below the log's end *as it was when the rebuild started* is
//! applied to a fresh store, and nothing is emitted — the live processor
//! emitted all of it already. The log is opened through [`ReadOnlyLog`], so
//! a rebuild cannot append to it even by mistake. The target positions are
//! kept in `NEWDIR/rebuild.json`: a rebuild that is stopped (or killed) and
//! started again resumes from its stores and ends at the same positions.
//!
//! A digest is computed from what readers see, never from RocksDB files:
//! per partition and per view, a SHA-256 over every user's view in user
//! order (users whose views are all empty contribute nothing), so it does
//! not depend on compaction, batch boundaries, or how full an inbox is.

use crate::core::Ctx;
use crate::datadir::{DataDir, DataDirError, FIRST_STATE};
use crate::event::UserId;
use crate::log::{Log, LogError, NewRecord, Sink, Source, Topic};
use crate::processor::ProcessorConfig;
use crate::query::{QueryError, Reader, DEFAULT_RECENT, MAX_LIMIT};
use crate::state::{meta, Cf, Kv, Store, StoreError};
use crate::task::{NoFaults, PartitionTask, StepStats, TaskError};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeSet;
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
        partition: u32,
        /// What failed.
        source: TaskError,
    },
    /// The request cannot be carried out as asked.
    #[error("{0}")]
    Refused(String),
}

/// The log of a live data directory, for reading only: its sink refuses
/// every append.
pub struct ReadOnlyLog(pub Arc<dyn Log>);

struct RefusingSink;

impl Sink for RefusingSink {
    fn append(
        &mut self,
        topic: Topic,
        partition: u32,
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
    fn source(&self, topic: Topic, partition: u32, from: u64) -> Result<Box<dyn Source>, LogError> {
        self.0.source(topic, partition, from)
    }

    fn sink(self: Arc<Self>, _sync: bool) -> Result<Box<dyn Sink>, LogError> {
        Ok(Box::new(RefusingSink))
    }

    fn end_offset(&self, topic: Topic, partition: u32) -> Result<u64, LogError> {
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
    pub target: Vec<(u64, u64)>,
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
    pub started_at: Vec<(u64, u64)>,
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
                let info = Checkpoint::open(c)?;
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
            let target = (0..src.partitions())
                .map(|p| {
                    Ok((
                        logs.end_offset(Topic::Events, p)?,
                        logs.end_offset(Topic::Effects, p)?,
                    ))
                })
                .collect::<Result<Vec<_>, LogError>>()?;
            if let Some((c, info)) = &checkpoint {
                for (p, (&pos, &end)) in info.positions.iter().zip(&target).enumerate() {
                    if pos.0 > end.0 || pos.1 > end.1 {
                        return Err(ReplayError::Refused(format!(
                            "checkpoint {} is ahead of the log in partition {p} (at {pos:?}, the log ends at {end:?})",
                            c.display()
                        )));
                    }
                }
                crate::fsutil::copy_tree_linking_tables(&c.join(FIRST_STATE), &dst.state_root())
                    .map_err(|e| {
                        ReplayError::Refused(format!(
                            "copying checkpoint {} into {}: {e}",
                            c.display(),
                            dst.state_root().display()
                        ))
                    })?;
            }
            let plan = RebuildPlan {
                source,
                target,
                from_checkpoint: checkpoint.map(|(c, _)| canonical(c)),
            };
            write_json(&plan_file, &plan)?;
            plan
        };
        let cache = rocksdb::Cache::new_lru_cache(cfg.cache_bytes);
        let stores = crate::processor::open_stores(&dst, &cache, cfg.sync)?;
        let started_at = positions(&stores)?;
        let progress = started_at
            .iter()
            .map(|&(e, f)| {
                Arc::new(PartitionProgress {
                    events: AtomicU64::new(e),
                    effects: AtomicU64::new(f),
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
    /// or `cancel`. Returns the summed figures; `Ok` with some partitions
    /// not done only when cancelled.
    pub fn run(&self, cancel: &AtomicBool) -> Result<StepStats, ReplayError> {
        let results: Vec<Result<StepStats, ReplayError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..self.into.partitions())
                .map(|p| s.spawn(move || self.run_partition(p, cancel)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("rebuild thread"))
                .collect()
        });
        let mut total = StepStats::default();
        for r in results {
            total.add(&r?);
        }
        Ok(total)
    }

    fn run_partition(&self, p: u32, cancel: &AtomicBool) -> Result<StepStats, ReplayError> {
        replay_to(
            self.cfg.ctx(p, self.into.partitions()),
            &self.cfg,
            self.stores[p as usize].clone(),
            self.log.clone(),
            self.plan.target[p as usize],
            &self.progress[p as usize],
            cancel,
        )
    }

    /// Whether every partition has reached its target.
    pub fn finished(&self) -> Result<bool, ReplayError> {
        Ok(behind(&positions(&self.stores)?, &self.plan.target) == 0)
    }
}

/// Records from positions `at` up to `targets`, both inputs, summed over
/// partitions.
pub fn behind(at: &[(u64, u64)], targets: &[(u64, u64)]) -> u64 {
    at.iter()
        .zip(targets)
        .map(|(a, t)| t.0.saturating_sub(a.0) + t.1.saturating_sub(a.1))
        .sum()
}

/// Positions of every store: next `events` and `effects` offsets.
pub fn positions(stores: &[Arc<Store>]) -> Result<Vec<(u64, u64)>, StoreError> {
    stores
        .iter()
        .map(|s| {
            Ok((
                s.meta_u64(meta::POS_EVENTS)?,
                s.meta_u64(meta::POS_EFFECTS)?,
            ))
        })
        .collect()
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), ReplayError> {
    let bytes = serde_json::to_vec_pretty(value).expect("plain struct");
    crate::fsutil::write_atomically(path, &bytes)
        .map_err(|(p, e)| ReplayError::Refused(format!("writing {}: {e}", p.display())))
}

/// `C/checkpoint.json`: what a checkpoint holds. Written last, so a
/// directory without it is not a (finished) checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The data directory it was taken of.
    pub source: PathBuf,
    /// Per partition, the next `events` and `effects` offsets of its state.
    pub positions: Vec<(u64, u64)>,
    /// The inbox cap the state was built with.
    pub inbox_cap: u64,
    /// When it was taken, ms since the epoch.
    pub created_ms: u64,
}

impl Checkpoint {
    /// Reads the checkpoint in `dir`.
    pub fn open(dir: &Path) -> Result<Checkpoint, ReplayError> {
        let file = dir.join("checkpoint.json");
        let bytes = std::fs::read(&file).map_err(|e| {
            ReplayError::Refused(format!(
                "{} is not a checkpoint ({}: {e}); take one with `feedlog checkpoint --into DIR`",
                dir.display(),
                file.display()
            ))
        })?;
        serde_json::from_slice(&bytes).map_err(|e| {
            ReplayError::Refused(format!("{} is not a checkpoint file: {e}", file.display()))
        })
    }

    /// Refuses a checkpoint of another data directory, partition count or
    /// inbox cap, or one whose positions the log no longer holds.
    pub fn check_usable(
        &self,
        source: &Path,
        partitions: u32,
        inbox_cap: u64,
        log: &dyn Log,
    ) -> Result<(), ReplayError> {
        if self.source != source {
            return Err(ReplayError::Refused(format!(
                "the checkpoint is of {}, not of {}",
                self.source.display(),
                source.display()
            )));
        }
        if self.positions.len() != partitions as usize {
            return Err(ReplayError::Refused(format!(
                "the checkpoint has {} partitions, the data directory {partitions}",
                self.positions.len()
            )));
        }
        if self.inbox_cap != inbox_cap {
            return Err(ReplayError::Refused(format!(
                "the checkpoint was built with inbox cap {}, not {inbox_cap}: use --inbox-cap {} (or rebuild from the start)",
                self.inbox_cap, self.inbox_cap
            )));
        }
        check_held(log, &self.positions)
    }
}

/// Refuses when `log` no longer holds every partition's `positions`
/// (retention removed them): replaying from there would skip records.
pub fn check_held(log: &dyn Log, positions: &[(u64, u64)]) -> Result<(), ReplayError> {
    for (p, &(e, f)) in positions.iter().enumerate() {
        for (topic, at) in [(Topic::Events, e), (Topic::Effects, f)] {
            if let Err(err) = log.source(topic, p as u32, at) {
                return Err(ReplayError::Refused(format!(
                    "the log no longer holds {topic:?}[{p}] from offset {at}, so nothing can be replayed from there: {err}"
                )));
            }
        }
    }
    Ok(())
}

/// Writes a checkpoint of `stores` (every partition of `dir`, built with
/// `inbox_cap`) into `into`, a new directory: a RocksDB checkpoint per
/// partition, then `checkpoint.json` with the positions read back from the
/// checkpoints themselves (so they match the state exactly, even while the
/// processor keeps writing).
pub fn write_checkpoint(
    stores: &[Arc<Store>],
    dir: &DataDir,
    inbox_cap: u64,
    into: &Path,
) -> Result<Checkpoint, ReplayError> {
    if into.exists() {
        return Err(ReplayError::Refused(format!(
            "{} exists: a checkpoint goes into a new directory",
            into.display()
        )));
    }
    let mut c = DataDir::create_or_open(into, Some(dir.partitions()))?;
    c.set_inbox_cap(inbox_cap)?;
    let root = c.state_root();
    std::fs::create_dir_all(&root)
        .map_err(|e| ReplayError::Refused(format!("creating {}: {e}", root.display())))?;
    for (p, store) in stores.iter().enumerate() {
        store.checkpoint(&c.state_dir(p as u32))?;
    }
    let positions = positions(&open_stores(into)?)?;
    let info = Checkpoint {
        source: canonical(dir.root()),
        positions,
        inbox_cap,
        created_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    };
    write_json(&into.join("checkpoint.json"), &info)?;
    Ok(info)
}

/// Replays `log` into `store` quietly (applying, emitting nothing) up to
/// `target` (next `events` and `effects` offsets), from the store's own
/// positions; `progress` follows it. Returns early, `Ok`, on `cancel`.
pub fn replay_to(
    ctx: Ctx,
    cfg: &ProcessorConfig,
    store: Arc<Store>,
    log: Arc<ReadOnlyLog>,
    target: (u64, u64),
    progress: &PartitionProgress,
    cancel: &AtomicBool,
) -> Result<StepStats, ReplayError> {
    let p = ctx.partition;
    let task_err = |source| ReplayError::Task {
        partition: p,
        source,
    };
    let mut task = PartitionTask::open_after(
        ctx,
        cfg.limits,
        false,
        store,
        log as Arc<dyn Log>,
        Some(target),
        false,
    )
    .map_err(task_err)?;
    let mut total = StepStats::default();
    while !task.caught_up() {
        if cancel.load(Ordering::SeqCst) {
            return Ok(total);
        }
        let stats = task.step(&mut NoFaults).map_err(task_err)?;
        let (e, f) = task.positions();
        progress.events.store(e, Ordering::SeqCst);
        progress.effects.store(f, Ordering::SeqCst);
        if stats.input() == 0 {
            // Below the target every record is already in the log; a
            // step that reads nothing means the log is shorter than the
            // target says.
            return Err(ReplayError::Refused(format!(
                "partition {p}: the log ends before the replay's target {target:?} (at {:?})",
                task.positions()
            )));
        }
        total.add(&stats);
    }
    progress.done.store(true, Ordering::SeqCst);
    Ok(total)
}

/// The views a digest covers, in digest order: what readers see. The
/// materialized inbox behind `timeline` is not digested as stored: which
/// entries it holds beyond what reads return (how far it was trimmed, where
/// its horizon is) depends on how follows and deliveries interleaved in
/// batches, while the timelines read from it do not.
pub const VIEWS: [&str; 6] = [
    "counters",
    "followers",
    "followees",
    "recent_followers",
    "posts",
    "timeline",
];

/// How deep the timeline digest goes per user: the newest entries, as
/// readers page them. Deeper pages are computed from the followees and
/// their outboxes, which are digested whole.
pub const TIMELINE_DEPTH: usize = 800;

/// One partition's digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionDigest {
    /// The partition.
    pub partition: u32,
    /// Next `events` and `effects` offsets: the log position of the state.
    pub position: (u64, u64),
    /// Users with a non-empty view.
    pub users: u64,
    /// Per view (in [`VIEWS`] order), hex SHA-256.
    pub views: Vec<(String, String)>,
}

/// Every partition's digests and one over all of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateDigest {
    /// Per partition.
    pub partitions: Vec<PartitionDigest>,
    /// SHA-256 over every partition's view digests, in order.
    pub overall: String,
}

/// One user's view, as the bytes digested (fixed-width big-endian fields).
pub fn view_bytes(reader: &Reader, view: &str, user: UserId) -> Result<Vec<u8>, QueryError> {
    let mut out = Vec::new();
    let mut put = |xs: &[u64]| {
        for x in xs {
            out.extend_from_slice(&x.to_be_bytes());
        }
    };
    match view {
        "counters" => {
            let c = reader.counters(user)?;
            if c.followers + c.followees + c.posts > 0 {
                put(&[c.followers, c.followees, c.posts]);
            }
        }
        "followers" | "followees" => {
            let mut cursor = None;
            loop {
                let page = if view == "followers" {
                    reader.followers(user, MAX_LIMIT, cursor.as_deref())?
                } else {
                    reader.followees(user, MAX_LIMIT, cursor.as_deref())?
                };
                for i in &page.items {
                    put(&[i.user, i.ts]);
                }
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
        }
        "recent_followers" => {
            for i in reader.recent_followers(user, DEFAULT_RECENT)?.items {
                put(&[i.user, i.ts]);
            }
        }
        "posts" => {
            let mut cursor = None;
            loop {
                let page = reader.posts(user, MAX_LIMIT, cursor.as_deref())?;
                for i in &page.items {
                    put(&[i.post_id, i.ts]);
                }
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
        }
        "timeline" => {
            for i in reader.timeline(user, TIMELINE_DEPTH, None)?.items {
                put(&[i.post_id, i.author, i.ts]);
            }
        }
        other => {
            return Err(QueryError::BadView(other.to_string()));
        }
    }
    Ok(out)
}

/// Every user with any record in `store` (by the user-id prefix of the
/// per-user column families), ascending.
pub fn users_of(store: &Store) -> Result<Vec<UserId>, StoreError> {
    let mut users = BTreeSet::new();
    for cf in [
        Cf::Users,
        Cf::Followees,
        Cf::Followers,
        Cf::Outbox,
        Cf::Inbox,
    ] {
        // Jump from one user's prefix to the next.
        let mut from = 0u64;
        loop {
            let next = store
                .scan(cf, &from.to_be_bytes(), &[0xff; 9])
                .next()
                .transpose()?;
            let Some((k, _)) = next else { break };
            if k.len() < 8 {
                break;
            }
            let u = u64::from_be_bytes(k[..8].try_into().expect("8 bytes"));
            users.insert(u);
            match u.checked_add(1) {
                Some(n) => from = n,
                None => break,
            }
        }
    }
    Ok(users.into_iter().filter(|&u| u != 0).map(UserId).collect())
}

/// The digests of every view of every partition of `stores`.
pub fn digest(stores: &[Arc<Store>]) -> Result<StateDigest, ReplayError> {
    let reader = Reader::new(stores.to_vec());
    let mut partitions = Vec::with_capacity(stores.len());
    let mut overall = Sha256::new();
    for (p, store) in stores.iter().enumerate() {
        let mut hashers: Vec<Sha256> = VIEWS.iter().map(|_| Sha256::new()).collect();
        let mut users = 0u64;
        for user in users_of(store)? {
            let mut any = false;
            for (view, h) in VIEWS.iter().zip(&mut hashers) {
                let bytes = view_bytes(&reader, view, user)?;
                if !bytes.is_empty() {
                    any = true;
                    h.update(user.0.to_be_bytes());
                    h.update((bytes.len() as u64).to_be_bytes());
                    h.update(&bytes);
                }
            }
            users += u64::from(any);
        }
        let views: Vec<(String, String)> = VIEWS
            .iter()
            .zip(hashers)
            .map(|(v, h)| (v.to_string(), hex(&h.finalize())))
            .collect();
        for (_, d) in &views {
            overall.update(d.as_bytes());
        }
        partitions.push(PartitionDigest {
            partition: p as u32,
            position: (
                store.meta_u64(meta::POS_EVENTS)?,
                store.meta_u64(meta::POS_EFFECTS)?,
            ),
            users,
            views,
        });
    }
    Ok(StateDigest {
        partitions,
        overall: hex(&overall.finalize()),
    })
}

/// The first user (ascending) whose `view` differs between two states of
/// partition `p`, with both sides' bytes.
pub fn first_difference(
    a: &[Arc<Store>],
    b: &[Arc<Store>],
    p: u32,
    view: &str,
) -> Result<Option<UserId>, ReplayError> {
    let (ra, rb) = (Reader::new(a.to_vec()), Reader::new(b.to_vec()));
    let mut users: BTreeSet<UserId> = users_of(&a[p as usize])?.into_iter().collect();
    users.extend(users_of(&b[p as usize])?);
    for u in users {
        if view_bytes(&ra, view, u)? != view_bytes(&rb, view, u)? {
            return Ok(Some(u));
        }
    }
    Ok(None)
}

/// Opens every store of a data directory read-only.
pub fn open_stores(dir: &Path) -> Result<Vec<Arc<Store>>, ReplayError> {
    let d = DataDir::open(dir)?;
    let cache = rocksdb::Cache::new_lru_cache(64 << 20);
    Ok((0..d.partitions())
        .map(|p| Store::open_read_only(&d.state_dir(p), p, d.partitions(), &cache).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
