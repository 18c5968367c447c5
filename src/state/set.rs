//! The stores of a data directory as a set: opened together, read as one,
//! replaced as a whole by a swap while readers read.

use super::cache::BlockCache;
use super::datadir::DataDir;
use super::store::{Kept, Store, StoreError, StoreOptions};
use crate::core::position::Positions;
use crate::core::Partition;
use std::path::Path;
use std::sync::Arc;

/// Why a partition's store cannot be read here now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// The partition is moving between processors (revoked, or replaying
    /// before it serves): retry shortly.
    #[error("partition {partition} is moving between processors; retry shortly")]
    Moving {
        /// The partition.
        partition: Partition,
    },
    /// Another processor owns the partition (Kafka mode): ask it.
    #[error("partition {partition} is owned by another processor")]
    Elsewhere {
        /// The partition.
        partition: Partition,
    },
}

/// The partition stores a reader reads: all of a data directory's, or the
/// ones a Kafka-mode processor owns right now.
pub trait Partitions: Send + Sync {
    /// The partition count.
    fn count(&self) -> u32;
    /// The store of partition `p`, when it is here and serving;
    /// [`Unavailable`] otherwise.
    fn store(&self, p: Partition) -> Result<Arc<Store>, Unavailable>;
    /// The stores here, by partition.
    fn local(&self) -> Vec<(Partition, Arc<Store>)>;
    /// For a set that can be replaced while it is read: the set as it is
    /// now, to read one request from. `None`: this set never changes.
    fn pinned(&self) -> Option<Arc<dyn Partitions>> {
        None
    }
    /// Kafka mode, partition `p` owned by a processor that cannot be
    /// reached: from now until `span` has passed, [`Partitions::store`]
    /// answers `p` with this processor's warm standby of it, if it keeps
    /// one caught up with the group's committed positions. Those
    /// positions, or `None` (no such standby: `p` stays elsewhere).
    fn read_standby(&self, _p: Partition, _span: std::time::Duration) -> Option<Positions> {
        None
    }
    /// Whether [`Partitions::store`] answers `p` with a warm standby now
    /// (see [`Partitions::read_standby`]): its positions, or `None`.
    fn standby_reading(&self, _p: Partition) -> Option<Positions> {
        None
    }
}

/// Every partition's store, replaceable as a whole while readers read (a
/// swap to a rebuilt state). A reader pins the set once per request
/// (`api::query::Reader::current`), so one answer comes from the old stores or from
/// the new ones, never from both.
pub struct StoreSet {
    current: std::sync::RwLock<Arc<Vec<Arc<Store>>>>,
    count: u32,
}

impl StoreSet {
    /// A set over `stores`, indexed by partition.
    pub fn new(stores: Vec<Arc<Store>>) -> StoreSet {
        StoreSet {
            count: stores.len() as u32,
            current: std::sync::RwLock::new(Arc::new(stores)),
        }
    }

    /// The stores now.
    pub fn get(&self) -> Arc<Vec<Arc<Store>>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces every store at once; returns the old set (its stores close
    /// when the last reader of them is done).
    pub fn replace(&self, stores: Vec<Arc<Store>>) -> Arc<Vec<Arc<Store>>> {
        assert_eq!(stores.len() as u32, self.count, "same partition count");
        std::mem::replace(
            &mut *self.current.write().unwrap_or_else(|e| e.into_inner()),
            Arc::new(stores),
        )
    }
}

impl Partitions for StoreSet {
    fn count(&self) -> u32 {
        self.count
    }

    fn store(&self, p: Partition) -> Result<Arc<Store>, Unavailable> {
        Ok(self.get()[p.index()].clone())
    }

    fn local(&self) -> Vec<(Partition, Arc<Store>)> {
        self.get().local()
    }

    fn pinned(&self) -> Option<Arc<dyn Partitions>> {
        Some(self.get())
    }
}

impl Partitions for Vec<Arc<Store>> {
    fn count(&self) -> u32 {
        self.len() as u32
    }

    fn store(&self, p: Partition) -> Result<Arc<Store>, Unavailable> {
        Ok(self[p.index()].clone())
    }

    fn local(&self) -> Vec<(Partition, Arc<Store>)> {
        self.iter()
            .enumerate()
            .map(|(p, s)| (Partition(p as u32), s.clone()))
            .collect()
    }
}

/// Opens (creating if missing) every partition's store under `dir`'s
/// active state generation.
pub fn open_stores(
    dir: &DataDir,
    cache: &BlockCache,
    opts: &StoreOptions,
) -> Result<Vec<Arc<Store>>, StoreError> {
    // The stores that exist open first, one thread each (an open replays
    // the store's write-ahead log and may flush what it recovers, work the
    // stores do independently); missing ones are created only once every
    // existing one opened, so a refused directory is left as it was.
    let n = dir.partitions();
    let open = |parts: Vec<Partition>| -> Result<Vec<(Partition, Arc<Store>)>, StoreError> {
        std::thread::scope(|s| {
            let opening: Vec<_> = parts
                .into_iter()
                .map(|p| {
                    let path = dir.state_dir(p);
                    s.spawn(move || Store::open(&path, p, n, cache, opts).map(|s| (p, Arc::new(s))))
                })
                .collect();
            opening
                .into_iter()
                .map(|t| {
                    t.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        })
    };
    let (existing, missing): (Vec<Partition>, Vec<Partition>) =
        Partition::all(n).partition(|&p| dir.state_dir(p).join("CURRENT").exists());
    let mut stores = open(existing)?;
    stores.extend(open(missing)?);
    stores.sort_by_key(|(p, _)| *p);
    Ok(stores.into_iter().map(|(_, s)| s).collect())
}

/// The block cache of a reader's read-only stores (`query`, the
/// benchmarks), as the processor's: an aggregated page reads a reader's sources, edges and
/// the directory from blocks it shares with other readers.
pub const READER_CACHE_BYTES: usize = 128 << 20;

/// Opens every store read-only, for queries beside a running processor
/// (they see the state as of the open), with `kept` bytes of pages and
/// inbox heads kept for them all.
pub fn open_read_only(dir: &DataDir, kept: Kept) -> Result<Vec<Arc<Store>>, StoreError> {
    let cache = BlockCache::new(READER_CACHE_BYTES);
    let n = dir.partitions();
    Partition::all(n)
        .map(|p| Store::open_read_only(&dir.state_dir(p), p, n, &cache, kept).map(Arc::new))
        .collect()
}

/// Opens every store of the active state generation as a RocksDB
/// secondary, for a read API beside a running processor:
/// [`Store::catch_up`] moves them to the latest committed state. `scratch`
/// holds the secondaries' own files; `cache` is their block cache.
pub fn open_secondaries(
    dir: &DataDir,
    scratch: &Path,
    cache: &BlockCache,
) -> Result<Vec<Arc<Store>>, StoreError> {
    let scratch = scratch.join(dir.state_name());
    std::fs::create_dir_all(&scratch).map_err(|source| StoreError::Refused {
        path: scratch.clone(),
        reason: format!("cannot create the secondary's directory: {source}"),
    })?;
    Partition::all(dir.partitions())
        .map(|p| {
            Store::open_secondary(
                &dir.state_dir(p),
                &scratch.join(format!("{p:05}")),
                p,
                dir.partitions(),
                cache,
            )
            .map(Arc::new)
        })
        .collect()
}
