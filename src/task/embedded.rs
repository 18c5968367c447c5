//! The embedded runner: opens every partition's store of a data directory
//! and runs one owner per partition, each on its own thread (RocksDB calls
//! stay off any async executor), until shut down or — with `until_idle` —
//! until every log is consumed and nothing is in flight.

use super::partition::{start_with_threshold, Takeover};
use super::runner::{drive, Hooks};
use super::{BatchLimits, PartitionTask, Shutdown, TaskError};
use crate::core::metrics::StepStats;
use crate::core::{
    Ctx, Epoch, DEFAULT_INACTIVE_AFTER_MS, DEFAULT_INBOX_CAP, DEFAULT_PULL_THRESHOLD,
};
use crate::core::{Generation, Partition};
use crate::log::{Log, Logs};
use crate::state::datadir::DataDir;
use crate::state::{BlockCache, Kept, Store, StoreOptions, StoreSet};
use crate::task::progress::Progress;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Settings of a processor.
#[derive(Debug, Clone)]
pub struct ProcessorConfig {
    /// Inbox entries kept per user.
    pub inbox_cap: u64,
    /// Targets per fan-out message.
    pub fanout_chunk: usize,
    /// The pull threshold to ask for (0: no author pulled; `None`: keep
    /// the one the log has in force, as a rebuild does).
    pub pull_threshold: Option<u64>,
    /// Log time (ms) without an event of their own after which a reader is
    /// skipped by push fan-out (`None`: never).
    pub inactive_after: Option<u64>,
    /// Batch limits per step.
    pub limits: BatchLimits,
    /// fsync state commits and log appends.
    pub sync: bool,
    /// Shared block cache size, bytes.
    pub cache_bytes: usize,
    /// What the stores keep in memory for readers, all partitions together.
    pub kept: Kept,
    /// Nice levels by which each partition thread lowers its scheduling
    /// priority, so that reads are served first (see
    /// [`crate::task::priority`]; `0`: none).
    pub writer_nice: i32,
}

impl ProcessorConfig {
    /// The core settings of `partition` of `partitions` under this config.
    pub fn ctx(&self, partition: Partition, partitions: u32) -> Ctx {
        Ctx {
            partition,
            partitions,
            inbox_cap: self.inbox_cap,
            fanout_chunk: self.fanout_chunk,
            pull_threshold: self.pull_threshold,
            inactive_after: self.inactive_after,
        }
    }

    /// The options of the stores this config processes into.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            sync: self.sync,
            kept: self.kept,
            ..StoreOptions::default()
        }
    }
}

/// The block cache a processor shares among its stores, by default.
pub const DEFAULT_BLOCK_CACHE_BYTES: usize = 128 << 20;

impl Default for ProcessorConfig {
    fn default() -> Self {
        ProcessorConfig {
            inbox_cap: DEFAULT_INBOX_CAP,
            fanout_chunk: 1024,
            pull_threshold: Some(DEFAULT_PULL_THRESHOLD),
            inactive_after: Some(DEFAULT_INACTIVE_AFTER_MS),
            limits: BatchLimits::default(),
            sync: true,
            cache_bytes: DEFAULT_BLOCK_CACHE_BYTES,
            kept: Kept::default(),
            writer_nice: crate::task::priority::DEFAULT_WRITER_NICE,
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
        partition: Partition,
        /// Why.
        #[source]
        source: TaskError,
    },
    /// A store could not be opened.
    #[error(transparent)]
    Store(#[from] crate::state::StoreError),
    /// The data directory's identity could not be written.
    #[error(transparent)]
    Dir(#[from] crate::state::datadir::DataDirError),
}

impl ProcessorError {
    /// Skip, retry or stop: the answer of what failed underneath.
    pub fn disposition(&self) -> crate::core::Disposition {
        match self {
            ProcessorError::Task { source, .. } => source.disposition(),
            ProcessorError::Store(e) => e.disposition(),
            ProcessorError::Dir(e) => e.disposition(),
        }
    }
}

/// An opened data directory, ready to process.
pub struct Processor {
    /// The thread reading inbox heads once a reader of the stores was
    /// asked for ([`Processor::read_heads`]); first, so that dropping the
    /// processor stops it before the stores close.
    warming: std::sync::Mutex<Option<crate::state::heads::warm::Warming>>,
    dir: DataDir,
    cfg: ProcessorConfig,
    /// The inbox cap in force (a swap to a state built with another cap
    /// changes it).
    inbox_cap: AtomicU64,
    logs: Arc<Logs>,
    stores: Arc<StoreSet>,
    cache: BlockCache,
    progress: Arc<Progress>,
    /// How [`Processor::pause`] and [`Processor::resume`] reach
    /// [`Processor::run`].
    pausing: Pausing,
    /// The owner epoch its tasks stamp on what they send: the number of the
    /// state generation they process (see [`DataDir::generation`]).
    epoch: AtomicU64,
}

impl Processor {
    /// Opens (creating if missing) every partition's store; records
    /// `cfg.pull_threshold` as the directory's starting threshold when it
    /// has none (see [`DataDir::starting_threshold`]).
    pub fn open(dir: &DataDir, cfg: ProcessorConfig) -> Result<Processor, ProcessorError> {
        let mut dir = dir.clone();
        dir.starting_threshold(cfg.pull_threshold)?;
        dir.settle_inbox_cap(cfg.inbox_cap)?;
        let cache = BlockCache::new(cfg.cache_bytes);
        let stores = crate::state::set::open_stores(&dir, &cache, &cfg.store_options())?;
        Ok(Processor {
            warming: Default::default(),
            logs: Arc::new(dir.logs()),
            epoch: AtomicU64::new(dir.generation().0.into()),
            dir,
            inbox_cap: AtomicU64::new(cfg.inbox_cap),
            cfg,
            stores: Arc::new(StoreSet::new(stores)),
            cache,
            progress: Arc::default(),
            pausing: Pausing::default(),
        })
    }

    /// Starts reading the inbox heads of the stores in the background, once
    /// (see [`crate::state::heads::warm`]): for a processor whose views are
    /// read.
    pub fn read_heads(&self) {
        let mut warming = self
            .warming
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if warming.is_none() {
            *warming = crate::state::heads::warm::in_background(&self.stores.get());
        }
    }

    /// The data directory it processes.
    pub fn data_dir(&self) -> &DataDir {
        &self.dir
    }

    /// The live stores, as readers read them: a set a swap replaces
    /// ([`Processor::replace_stores`]) whole.
    pub fn store_set(&self) -> &Arc<StoreSet> {
        &self.stores
    }

    /// The settings the processor was opened with.
    pub fn config(&self) -> ProcessorConfig {
        ProcessorConfig {
            inbox_cap: self.inbox_cap.load(Ordering::SeqCst),
            ..self.cfg.clone()
        }
    }

    /// The processor's block cache (shared by stores it opens later).
    pub fn cache(&self) -> &BlockCache {
        &self.cache
    }

    /// The stores now, by partition.
    pub fn stores(&self) -> Arc<Vec<Arc<Store>>> {
        self.stores.get()
    }

    /// Flushes every store's memtables: after a clean stop, so the next
    /// open has no write-ahead log to replay and starts at once. Everything
    /// is committed already, so a failure only costs the next start a
    /// replay: it is logged, not returned.
    pub fn flush(&self) {
        for s in self.stores.get().iter() {
            if let Err(e) = s.flush() {
                tracing::warn!(error = %e, "could not flush a store after stopping (the next start replays its write-ahead log)");
            }
        }
    }

    /// Stops every owner after its batch (committed and shipped) and waits
    /// until all are stopped; readers keep reading. `false` when
    /// [`Processor::run`] has ended (or ends while waiting), or when a
    /// [`Processor::resume`] takes the pause back before it holds; before
    /// a run starts, it waits for it. Undo with [`Processor::resume`].
    pub fn pause(&self) -> bool {
        let mut st = self.pausing.lock();
        st.asked = true;
        if let Some(run) = &st.run {
            run.request();
        }
        while st.asked && !st.paused() && !st.ended {
            st = self.pausing.wait(st);
        }
        if !st.paused() {
            st.asked = false;
        }
        st.paused()
    }

    /// Starts the owners again after [`Processor::pause`].
    pub fn resume(&self) {
        let mut st = self.pausing.lock();
        st.asked = false;
        // Not paused from here on (the hold is gone): a pause asked now
        // waits for the owners to stop again.
        if let Some(held) = st.held.take() {
            held.request();
        }
        self.pausing.changed.notify_all();
    }

    /// Whether [`Processor::run`] has returned.
    pub fn ended(&self) -> bool {
        self.pausing.lock().ended
    }

    /// Replaces every store at once (while paused), with the inbox cap they
    /// were built with and the generation they are (the epoch the owners
    /// stamp from then on); readers move to them with their next request.
    /// `false` (nothing replaced) when the owners are not paused.
    pub fn replace_stores(
        &self,
        stores: Vec<Arc<Store>>,
        inbox_cap: u64,
        generation: Generation,
    ) -> bool {
        if !self.pausing.lock().paused() {
            return false;
        }
        self.inbox_cap.store(inbox_cap, Ordering::SeqCst);
        self.epoch.store(generation.0.into(), Ordering::SeqCst);
        self.stores.replace(stores);
        true
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
    pub fn store(&self, partition: Partition) -> Arc<Store> {
        self.stores.get()[partition.index()].clone()
    }

    /// The core settings of one partition.
    pub fn ctx(&self, partition: Partition) -> Ctx {
        self.config().ctx(partition, self.dir.partitions())
    }

    /// The owner epoch of this processor's tasks (its state generation).
    pub fn epoch(&self) -> Epoch {
        Epoch(self.epoch.load(Ordering::SeqCst))
    }

    /// Opens the owner task of one partition at its stored positions.
    pub fn task(&self, partition: Partition) -> Result<PartitionTask, ProcessorError> {
        self.task_after(partition, Takeover::resume(self.epoch()))
    }

    /// The task of `partition` as a processor opens it when it takes the
    /// partition over (see [`Takeover`] and [`super::kafka`]): below
    /// `takeover.emitted` (the group's committed positions) it replays
    /// quietly, it re-ships its stored outbox only with `takeover.reship`,
    /// and it stamps what it sends with `takeover.epoch`.
    pub fn task_after(
        &self,
        partition: Partition,
        takeover: Takeover,
    ) -> Result<PartitionTask, ProcessorError> {
        let task_err = |source| ProcessorError::Task { partition, source };
        start_with_threshold(&self.store(partition), self.dir.pull_threshold())
            .map_err(task_err)?;
        PartitionTask::open_after(
            self.ctx(partition),
            self.cfg.limits,
            self.cfg.sync,
            self.store(partition),
            self.logs.clone() as Arc<dyn Log>,
            takeover,
        )
        .map_err(task_err)
    }

    /// Runs every partition until `shutdown` is requested, or — with
    /// `until_idle` — until every log is consumed and no internal message
    /// is in flight. On shutdown each owner finishes its batch, commits and
    /// returns the figures of this run (also added to
    /// [`Processor::progress`]). A [`Processor::pause`] stops the owners
    /// the same way and starts them again, on the stores then current, at
    /// [`Processor::resume`].
    pub fn run(&self, shutdown: &Shutdown, until_idle: bool) -> Result<StepStats, ProcessorError> {
        self.pausing.lock().ended = false;
        // However `run` ends (an owner's panic included), a `pause` that
        // waits learns it.
        let _ended = Ended(&self.pausing);
        let mut total = StepStats::default();
        let result = loop {
            // This run of the owners stops on `shutdown` or a pause.
            let run = shutdown.linked();
            {
                let mut st = self.pausing.lock();
                if st.asked {
                    run.request();
                }
                st.run = Some(run.clone());
            }
            let ran = self.run_owners(&run, until_idle);
            let mut st = self.pausing.lock();
            st.run = None;
            match ran {
                Ok(stats) => total.add(&stats),
                Err(e) => break Err(e),
            }
            if shutdown.is_requested() {
                break Ok(total);
            }
            if !st.asked {
                if run.is_requested() {
                    // A pause taken back before the owners stopped for it.
                    continue;
                }
                break Ok(total); // idle, with `until_idle`
            }
            // Paused: held until `resume` or `shutdown`.
            let held = shutdown.linked();
            st.held = Some(held.clone());
            self.pausing.changed.notify_all();
            drop(st);
            while !held.wait(Duration::from_secs(3600)) {}
            self.pausing.lock().held = None;
        };
        result
    }

    /// One run of every owner, until shutdown, idle, failure or a pause.
    fn run_owners(
        &self,
        shutdown: &Shutdown,
        until_idle: bool,
    ) -> Result<StepStats, ProcessorError> {
        let n = self.dir.partitions();
        let mut tasks = Vec::with_capacity(n as usize);
        for p in Partition::all(n) {
            tasks.push(self.task(p)?);
        }
        let shared = RunState {
            stop: shutdown.linked(),
            until_idle,
            progress: &self.progress,
            this_run: Mutex::default(),
            epoch: AtomicU64::new(0),
            idle_at: (0..n).map(|_| AtomicU64::new(BUSY)).collect(),
            failure: Mutex::new(None),
        };
        std::thread::scope(|s| {
            for mut task in tasks {
                let shared = &shared;
                let p = task.partition().index();
                let nice = self.cfg.writer_nice;
                let spawned = std::thread::Builder::new()
                    .name(format!("feedlog-p{p}"))
                    .spawn_scoped(s, move || {
                        // However the owner ends (a panic included), the
                        // run stops: no owner is left waiting for it.
                        let _stops = StopOnExit(&shared.stop);
                        crate::task::priority::lower_priority(nice);
                        let mut owner = Owner { p, seen: 0, shared };
                        if let Err(source) = drive(&mut task, &mut owner) {
                            tracing::error!(partition = p, error = %source, "partition stopped");
                            shared.fail(ProcessorError::Task {
                                partition: Partition(p as u32),
                                source,
                            });
                        }
                    });
                if let Err(e) = spawned {
                    shared.fail(ProcessorError::Task {
                        partition: Partition(p as u32),
                        source: TaskError::Thread(e),
                    });
                }
            }
            // Woken by the stop: a shutdown or pause, a failure, an owner
            // that ended, or (until idle) the owner that found all idle.
            if until_idle && shared.idle() {
                shared.stop.request(); // no partition at all
            }
            while !shared.stop.wait(Duration::from_secs(3600)) {}
        });
        if let Some(e) = shared
            .failure
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
        {
            return Err(e);
        }
        Ok(shared
            .this_run
            .into_inner()
            .unwrap_or_else(|e| e.into_inner()))
    }
}

/// How [`Processor::pause`] and [`Processor::resume`] reach a running
/// [`Processor::run`]: its state under a lock, and the tokens that stop a
/// run of owners and hold a paused one.
#[derive(Default)]
struct Pausing {
    state: Mutex<PauseState>,
    /// Signalled when `run` pauses or returns.
    changed: Condvar,
}

#[derive(Default)]
struct PauseState {
    /// A pause is asked for, until [`Processor::resume`].
    asked: bool,
    /// [`Processor::run`] has returned.
    ended: bool,
    /// Stops the current run of owners (a pause requests it).
    run: Option<Shutdown>,
    /// Holds a paused run until requested ([`Processor::resume`]): there
    /// is one while the owners are stopped for a pause.
    held: Option<Shutdown>,
}

impl PauseState {
    /// Whether the owners are stopped for a pause.
    fn paused(&self) -> bool {
        self.held.is_some()
    }
}

impl Pausing {
    fn lock(&self) -> MutexGuard<'_, PauseState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, st: MutexGuard<'a, PauseState>) -> MutexGuard<'a, PauseState> {
        self.changed.wait(st).unwrap_or_else(|e| e.into_inner())
    }
}

/// Marks [`Processor::run`] ended when dropped, and wakes a waiting
/// [`Processor::pause`].
struct Ended<'a>(&'a Pausing);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.0.lock().ended = true;
        self.0.changed.notify_all();
    }
}

/// An owner that found nothing records the `epoch` it saw before looking;
/// one that is working records `BUSY`.
const BUSY: u64 = u64::MAX;

/// What the owner threads of one run share.
struct RunState<'a> {
    /// Stops this run's owners: requested by the processor's shutdown or a
    /// pause (it is linked to the run's token), a failure, an owner that
    /// ended, or idleness.
    stop: Shutdown,
    /// Whether the run ends once every owner found nothing to do.
    until_idle: bool,
    progress: &'a Progress,
    this_run: Mutex<StepStats>,
    /// Moves after every non-empty step.
    epoch: AtomicU64,
    /// Per owner: the epoch it saw before its last empty step, or `BUSY`.
    idle_at: Vec<AtomicU64>,
    failure: Mutex<Option<ProcessorError>>,
}

/// Requests its token when dropped: an owner thread's guard.
struct StopOnExit<'a>(&'a Shutdown);

impl Drop for StopOnExit<'_> {
    fn drop(&mut self) {
        self.0.request();
    }
}

impl RunState<'_> {
    fn stopping(&self) -> bool {
        self.stop.is_requested()
    }

    /// Every owner has seen the current epoch and found nothing: nothing
    /// moved since each of them last looked.
    fn idle(&self) -> bool {
        let e = self.epoch.load(Ordering::SeqCst);
        self.idle_at.iter().all(|a| a.load(Ordering::SeqCst) == e)
            && self.epoch.load(Ordering::SeqCst) == e
    }

    fn fail(&self, e: ProcessorError) {
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        self.stop.request();
    }
}

/// One owner thread's hooks into the step loop.
struct Owner<'a> {
    p: usize,
    seen: u64,
    shared: &'a RunState<'a>,
}

impl Hooks for Owner<'_> {
    fn stop(&self) -> bool {
        self.shared.stopping()
    }

    fn before(&mut self) {
        self.seen = self.shared.epoch.load(Ordering::SeqCst);
    }

    fn after(&mut self, _: &mut PartitionTask, stats: &StepStats) -> Result<(), TaskError> {
        let s = self.shared;
        if stats.input() == 0 {
            s.idle_at[self.p].store(self.seen, Ordering::SeqCst);
            // The owner that completes the idleness ends the run.
            if s.until_idle && s.idle() {
                s.stop.request();
            }
        } else {
            s.idle_at[self.p].store(BUSY, Ordering::SeqCst);
            s.epoch.fetch_add(1, Ordering::SeqCst);
            s.progress.record(stats);
            s.this_run
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .add(stats);
        }
        Ok(())
    }
}
