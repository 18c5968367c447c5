//! The processor: opens every partition's store and runs one owner per
//! partition, each on its own thread (RocksDB calls stay off any async
//! executor), until cancelled or — with `until_idle` — until every log is
//! consumed and nothing is in flight.

use crate::core::Ctx;
use crate::datadir::DataDir;
use crate::log::Logs;
use crate::query::Reader;
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
#[derive(Debug, Default)]
pub struct Progress {
    /// Totals since start.
    pub totals: Mutex<StepStats>,
}

/// An opened data directory, ready to process and to answer queries.
pub struct Processor {
    dir: DataDir,
    cfg: ProcessorConfig,
    logs: Arc<Logs>,
    stores: Vec<Arc<Store>>,
}

impl Processor {
    /// Opens (creating if missing) every partition's store.
    pub fn open(dir: &DataDir, cfg: ProcessorConfig) -> Result<Processor, ProcessorError> {
        let cache = Cache::new_lru_cache(cfg.cache_bytes);
        let opts = StoreOptions {
            sync: cfg.sync,
            ..StoreOptions::default()
        };
        let stores = (0..dir.partitions())
            .map(|p| {
                Store::open(&dir.state_dir(p), p, dir.partitions(), &cache, &opts).map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Processor {
            dir: dir.clone(),
            cfg,
            logs: Arc::new(dir.logs()),
            stores,
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

    /// A reader over the live stores.
    pub fn reader(&self) -> Reader {
        Reader::new(self.stores.clone())
    }

    /// The data directory's logs.
    pub fn logs(&self) -> &Arc<Logs> {
        &self.logs
    }

    /// The store of one partition.
    pub fn store(&self, partition: u32) -> &Arc<Store> {
        &self.stores[partition as usize]
    }

    /// The core settings of one partition.
    pub fn ctx(&self, partition: u32) -> Ctx {
        Ctx {
            partition,
            partitions: self.dir.partitions(),
            inbox_cap: self.cfg.inbox_cap,
            fanout_chunk: self.cfg.fanout_chunk,
        }
    }

    /// Opens the owner task of one partition at its stored positions.
    pub fn task(&self, partition: u32) -> Result<PartitionTask, ProcessorError> {
        PartitionTask::open(
            self.ctx(partition),
            self.cfg.limits,
            self.cfg.sync,
            self.stores[partition as usize].clone(),
            self.logs.clone(),
        )
        .map_err(|source| ProcessorError::Task { partition, source })
    }

    /// Runs every partition until `cancel` is set, or — with `until_idle` —
    /// until every log is consumed and no internal message is in flight.
    /// On cancel each owner finishes its batch, commits and returns.
    pub fn run(
        &self,
        cancel: &AtomicBool,
        until_idle: bool,
        progress: &Progress,
    ) -> Result<StepStats, ProcessorError> {
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
                let (epoch, idle_at, stop, failure) = (&epoch, &idle_at, &stop, &failure);
                let p = task.partition() as usize;
                std::thread::Builder::new()
                    .name(format!("feedlog-p{p}"))
                    .spawn_scoped(s, move || {
                        let mut backoff = Duration::from_micros(200);
                        while !stop.load(Ordering::SeqCst) && !cancel.load(Ordering::SeqCst) {
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
                                    progress.totals.lock().expect("poisoned").add(&stats);
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
            while !stop.load(Ordering::SeqCst) && !cancel.load(Ordering::SeqCst) {
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
        let totals = *progress.totals.lock().expect("poisoned");
        Ok(totals)
    }
}

/// Formats a rate for progress lines.
pub fn per_sec(count: u64, since: Instant) -> f64 {
    count as f64 / since.elapsed().as_secs_f64().max(1e-9)
}
