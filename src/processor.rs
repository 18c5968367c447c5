//! The processor: opens every partition's store and runs one owner per
//! partition, each on its own thread (RocksDB calls stay off any async
//! executor), until cancelled or — with `until_idle` — until every log is
//! consumed and nothing is in flight.

use crate::core::Ctx;
use crate::datadir::DataDir;
use crate::log::{Log, Logs};
use crate::metrics::{self, Histogram};
use crate::query::{Reader, StoreSet};
use crate::state::{Store, StoreOptions};
use crate::task::{BatchLimits, NoFaults, PartitionTask, StepStats, TaskError};
use rocksdb::Cache;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Settings of a processor.
#[derive(Debug, Clone)]
pub struct ProcessorConfig {
    /// Inbox entries kept per user.
    pub inbox_cap: u64,
    /// Targets per fan-out message.
    pub fanout_chunk: usize,
    /// Batch limits per step.
    pub limits: BatchLimits,
    /// fsync state commits and log appends.
    pub sync: bool,
    /// Shared block cache size, bytes.
    pub cache_bytes: usize,
}

impl ProcessorConfig {
    /// The core settings of `partition` of `partitions` under this config.
    pub fn ctx(&self, partition: u32, partitions: u32) -> Ctx {
        Ctx {
            partition,
            partitions,
            inbox_cap: self.inbox_cap,
            fanout_chunk: self.fanout_chunk,
        }
    }
}

impl Default for ProcessorConfig {
    fn default() -> Self {
        ProcessorConfig {
            inbox_cap: 800,
            fanout_chunk: 1024,
            limits: BatchLimits::default(),
            sync: true,
            cache_bytes: 128 << 20,
        }
    }
}

/// Errors of the processor.
#[derive(Debug, thiserror::Error)]
pub enum ProcessorError {
    /// A partition failed.
    #[error("partition {partition}: {source}")]
    Task {
        /// Which.
        partition: u32,
        /// Why.
        #[source]
        source: TaskError,
    },
    /// A store could not be opened.
    #[error(transparent)]
    Store(#[from] crate::state::StoreError),
}

/// Progress figures, updated as batches commit.
#[derive(Debug)]
pub struct Progress {
    /// Totals since start.
    pub totals: Mutex<StepStats>,
    /// Records read per non-empty step.
    pub batch_records: Histogram,
    /// Seconds per state commit.
    pub commit_seconds: Histogram,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            totals: Mutex::default(),
            batch_records: Histogram::new(metrics::SIZE_BUCKETS),
            commit_seconds: Histogram::new(metrics::LATENCY_BUCKETS),
        }
    }
}

impl Progress {
    /// Adds one non-empty step.
    pub fn record(&self, stats: &StepStats) {
        self.batch_records.observe(stats.input() as f64);
        self.commit_seconds
            .observe(stats.commit_micros as f64 / 1e6);
        self.totals.lock().expect("poisoned").add(stats);
    }
}

/// An opened data directory, ready to process and to answer queries.
pub struct Processor {
    dir: DataDir,
    cfg: ProcessorConfig,
    /// The inbox cap in force (a swap to a state built with another cap
    /// changes it).
    inbox_cap: AtomicU64,
    logs: Arc<Logs>,
    stores: Arc<StoreSet>,
    cache: Cache,
    progress: Arc<Progress>,
    /// Asks [`Processor::run`] to stop its owners and wait (see
    /// [`Processor::pause`]).
    pause: AtomicBool,
    /// Set by [`Processor::run`] while its owners are stopped for a pause.
    paused: AtomicBool,
    /// Set when [`Processor::run`] has returned.
    ended: AtomicBool,
}

/// Opens every partition's store under `dir`'s active state generation.
pub fn open_stores(
    dir: &DataDir,
    cache: &Cache,
    sync: bool,
) -> Result<Vec<Arc<Store>>, crate::state::StoreError> {
    let opts = StoreOptions {
        sync,
        ..StoreOptions::default()
    };
    (0..dir.partitions())
        .map(|p| Store::open(&dir.state_dir(p), p, dir.partitions(), cache, &opts).map(Arc::new))
        .collect()
}

impl Processor {
    /// Opens (creating if missing) every partition's store.
    pub fn open(dir: &DataDir, cfg: ProcessorConfig) -> Result<Processor, ProcessorError> {
        let cache = Cache::new_lru_cache(cfg.cache_bytes);
        let stores = open_stores(dir, &cache, cfg.sync)?;
        Ok(Processor {
            dir: dir.clone(),
            inbox_cap: AtomicU64::new(cfg.inbox_cap),
            cfg,
            logs: Arc::new(dir.logs()),
            stores: Arc::new(StoreSet::new(stores)),
            cache,
            progress: Arc::default(),
            pause: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        })
    }

    /// Opens every store read-only, for queries beside a running processor.
    pub fn open_reader(dir: &DataDir) -> Result<Reader, ProcessorError> {
        let cache = Cache::new_lru_cache(64 << 20);
        let stores = (0..dir.partitions())
            .map(|p| {
                Store::open_read_only(&dir.state_dir(p), p, dir.partitions(), &cache).map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Reader::new(stores))
    }

    /// Opens every store of the active state generation as a secondary,
    /// for a read API beside a running processor: [`Reader::refresh`]
    /// moves them to the latest committed state. `scratch` holds the
    /// secondaries' own files.
    pub fn open_follower(
        dir: &DataDir,
        scratch: &std::path::Path,
    ) -> Result<Vec<Arc<Store>>, ProcessorError> {
        let cache = Cache::new_lru_cache(64 << 20);
        let scratch = scratch.join(dir.state_name());
        std::fs::create_dir_all(&scratch).map_err(|source| crate::state::StoreError::Refused {
            path: scratch.clone(),
            reason: format!("cannot create the secondary's directory: {source}"),
        })?;
        let stores = (0..dir.partitions())
            .map(|p| {
                Store::open_secondary(
                    &dir.state_dir(p),
                    &scratch.join(format!("{p:05}")),
                    p,
                    dir.partitions(),
                    &cache,
                )
                .map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(stores)
    }

    /// A reader over the live stores; it follows a swap
    /// ([`Processor::replace_stores`]), one whole request at a time.
    pub fn reader(&self) -> Reader {
        Reader::over(self.stores.clone(), None)
    }

    /// The settings the processor was opened with.
    pub fn config(&self) -> ProcessorConfig {
        ProcessorConfig {
            inbox_cap: self.inbox_cap.load(Ordering::SeqCst),
            ..self.cfg.clone()
        }
    }

    /// The processor's block cache (shared by stores it opens later).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The stores now, by partition.
    pub fn stores(&self) -> Arc<Vec<Arc<Store>>> {
        self.stores.get()
    }

    /// Stops every owner after its batch (committed and shipped) and waits
    /// until all are stopped; readers keep reading. `false` when
    /// [`Processor::run`] is not running (or ended while waiting). Undo
    /// with [`Processor::resume`].
    pub fn pause(&self) -> bool {
        self.pause.store(true, Ordering::SeqCst);
        loop {
            if self.paused.load(Ordering::SeqCst) {
                return true;
            }
            if self.ended.load(Ordering::SeqCst) {
                self.pause.store(false, Ordering::SeqCst);
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Starts the owners again after [`Processor::pause`].
    pub fn resume(&self) {
        self.pause.store(false, Ordering::SeqCst);
    }

    /// Whether [`Processor::run`] has returned.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// Replaces every store at once (while paused) and the inbox cap they
    /// were built with; readers move to them with their next request.
    pub fn replace_stores(&self, stores: Vec<Arc<Store>>, inbox_cap: u64) {
        assert!(
            self.paused.load(Ordering::SeqCst),
            "stores are replaced only while the owners are paused"
        );
        self.inbox_cap.store(inbox_cap, Ordering::SeqCst);
        self.stores.replace(stores);
    }

    /// Figures since the processor was opened, updated as batches commit.
    pub fn progress(&self) -> &Arc<Progress> {
        &self.progress
    }

    /// The data directory's logs.
    pub fn logs(&self) -> &Arc<Logs> {
        &self.logs
    }

    /// The store of one partition.
    pub fn store(&self, partition: u32) -> Arc<Store> {
        self.stores.get()[partition as usize].clone()
    }

    /// The core settings of one partition.
    pub fn ctx(&self, partition: u32) -> Ctx {
        self.config().ctx(partition, self.dir.partitions())
    }

    /// Opens the owner task of one partition at its stored positions.
    pub fn task(&self, partition: u32) -> Result<PartitionTask, ProcessorError> {
        PartitionTask::open(
            self.ctx(partition),
            self.cfg.limits,
            self.cfg.sync,
            self.store(partition),
            self.logs.clone() as Arc<dyn Log>,
        )
        .map_err(|source| ProcessorError::Task { partition, source })
    }

    /// The task of `partition` as a processor opens it when it takes the
    /// partition over in Kafka mode (see `cluster`): below `emitted` (the
    /// group's committed positions) it replays quietly, and it re-ships its
    /// stored outbox only with `reship`.
    pub fn task_after(
        &self,
        partition: u32,
        emitted: (u64, u64),
        reship: bool,
    ) -> Result<PartitionTask, ProcessorError> {
        PartitionTask::open_after(
            self.ctx(partition),
            self.cfg.limits,
            self.cfg.sync,
            self.store(partition),
            self.logs.clone() as Arc<dyn Log>,
            Some(emitted),
            reship,
        )
        .map_err(|source| ProcessorError::Task { partition, source })
    }

    /// Runs every partition until `cancel` is set, or — with `until_idle` —
    /// until every log is consumed and no internal message is in flight.
    /// On cancel each owner finishes its batch, commits and returns the
    /// figures of this run (also added to [`Processor::progress`]). A
    /// [`Processor::pause`] stops the owners the same way and starts them
    /// again, on the stores then current, at [`Processor::resume`].
    pub fn run(&self, cancel: &AtomicBool, until_idle: bool) -> Result<StepStats, ProcessorError> {
        self.ended.store(false, Ordering::SeqCst);
        let mut total = StepStats::default();
        let result = loop {
            match self.run_owners(cancel, until_idle) {
                Ok(stats) => total.add(&stats),
                Err(e) => break Err(e),
            }
            if !self.pause.load(Ordering::SeqCst) || cancel.load(Ordering::SeqCst) {
                break Ok(total);
            }
            self.paused.store(true, Ordering::SeqCst);
            while self.pause.load(Ordering::SeqCst) && !cancel.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.paused.store(false, Ordering::SeqCst);
        };
        self.ended.store(true, Ordering::SeqCst);
        result
    }

    /// One run of every owner, until cancel, idle, failure or a pause.
    fn run_owners(
        &self,
        cancel: &AtomicBool,
        until_idle: bool,
    ) -> Result<StepStats, ProcessorError> {
        let cancel = &StopEither(cancel, &self.pause);
        let progress = &*self.progress;
        let this_run: Mutex<StepStats> = Mutex::default();
        let n = self.dir.partitions() as usize;
        let mut tasks = Vec::with_capacity(n);
        for p in 0..n {
            tasks.push(self.task(p as u32)?);
        }
        // Idle detection: `epoch` moves after every non-empty step; a task
        // that found nothing records the epoch it saw before looking. All
        // tasks having seen the current epoch means nothing moved since each
        // of them last looked.
        const BUSY: u64 = u64::MAX;
        let epoch = AtomicU64::new(0);
        let idle_at: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(BUSY)).collect();
        let stop = AtomicBool::new(false);
        let failure: Mutex<Option<ProcessorError>> = Mutex::new(None);
        std::thread::scope(|s| {
            for mut task in tasks {
                let (epoch, idle_at, stop, failure, this_run) =
                    (&epoch, &idle_at, &stop, &failure, &this_run);
                let p = task.partition() as usize;
                std::thread::Builder::new()
                    .name(format!("feedlog-p{p}"))
                    .spawn_scoped(s, move || {
                        let mut backoff = Duration::from_micros(200);
                        while !stop.load(Ordering::SeqCst) && !cancel.get() {
                            let seen = epoch.load(Ordering::SeqCst);
                            match task.step(&mut NoFaults) {
                                Ok(stats) if stats.input() == 0 => {
                                    idle_at[p].store(seen, Ordering::SeqCst);
                                    std::thread::sleep(backoff);
                                    backoff = (backoff * 2).min(Duration::from_millis(20));
                                }
                                Ok(stats) => {
                                    idle_at[p].store(BUSY, Ordering::SeqCst);
                                    epoch.fetch_add(1, Ordering::SeqCst);
                                    backoff = Duration::from_micros(200);
                                    progress.record(&stats);
                                    this_run.lock().expect("poisoned").add(&stats);
                                }
                                Err(source) => {
                                    tracing::error!(partition = p, error = %source, "partition stopped");
                                    *failure.lock().expect("poisoned") =
                                        Some(ProcessorError::Task { partition: p as u32, source });
                                    stop.store(true, Ordering::SeqCst);
                                }
                            }
                        }
                    })
                    .expect("spawn partition thread");
            }
            while !stop.load(Ordering::SeqCst) && !cancel.get() {
                std::thread::sleep(Duration::from_millis(2));
                if until_idle {
                    let e = epoch.load(Ordering::SeqCst);
                    if idle_at.iter().all(|a| a.load(Ordering::SeqCst) == e)
                        && epoch.load(Ordering::SeqCst) == e
                    {
                        stop.store(true, Ordering::SeqCst);
                    }
                }
            }
            stop.store(true, Ordering::SeqCst);
        });
        if let Some(e) = failure.into_inner().expect("poisoned") {
            return Err(e);
        }
        let totals = this_run.into_inner().expect("poisoned");
        Ok(totals)
    }
}

/// Set when either flag is.
struct StopEither<'a>(&'a AtomicBool, &'a AtomicBool);

impl StopEither<'_> {
    fn get(&self) -> bool {
        self.0.load(Ordering::SeqCst) || self.1.load(Ordering::SeqCst)
    }
}

/// How far one partition's state is behind its input logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PartitionLag {
    /// The partition.
    pub partition: u32,
    /// Next offset of `events[p]`.
    pub events_end: u64,
    /// The state's position in `events[p]`.
    pub events_pos: u64,
    /// Next offset of `effects[p]`.
    pub effects_end: u64,
    /// The state's position in `effects[p]`.
    pub effects_pos: u64,
}

impl PartitionLag {
    /// Records not yet applied, both inputs.
    pub fn total(&self) -> u64 {
        self.events_end.saturating_sub(self.events_pos)
            + self.effects_end.saturating_sub(self.effects_pos)
    }
}

/// Errors reading the lag.
#[derive(Debug, thiserror::Error)]
pub enum LagError {
    /// A log.
    #[error(transparent)]
    Log(#[from] crate::log::LogError),
    /// A store.
    #[error(transparent)]
    Store(#[from] crate::state::StoreError),
}

/// The lag of the partitions in `stores`: log ends against the positions
/// committed with the state.
pub fn lag(logs: &dyn Log, stores: &[(u32, Arc<Store>)]) -> Result<Vec<PartitionLag>, LagError> {
    use crate::log::Topic;
    use crate::state::meta;
    let mut out = Vec::with_capacity(stores.len());
    for (p, store) in stores {
        let p = *p;
        out.push(PartitionLag {
            partition: p,
            events_end: logs.end_offset(Topic::Events, p)?,
            events_pos: store.meta_u64(meta::POS_EVENTS)?,
            effects_end: logs.end_offset(Topic::Effects, p)?,
            effects_pos: store.meta_u64(meta::POS_EFFECTS)?,
        });
    }
    Ok(out)
}

/// Formats a rate for progress lines.
pub fn per_sec(count: u64, since: Instant) -> f64 {
    count as f64 / since.elapsed().as_secs_f64().max(1e-9)
}
