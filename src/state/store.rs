//! One partition's RocksDB: column families per view, the layout check,
//! and the atomic commit of a batch's state with its input positions.

use super::cache::BlockCache;
use super::heads::Heads;
use super::meta;
use super::options::cf_options;
pub use super::options::{Kept, StoreOptions};
use super::pages::PageCache;
use crate::core::event::UserId;
use crate::core::gauges::{self, Gauges};
use crate::core::keys;
use crate::core::kv::{Cf, InRange, Kv, KvError, Scan, Writes};
use crate::core::position::Positions;
use crate::core::Partition;
use marks::MARKED;
use rocksdb::{
    ColumnFamilyDescriptor, IteratorMode, Options, ReadOptions, SnapshotWithThreadMode, WriteBatch,
    WriteOptions, DB,
};
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

/// The state layout this build reads and writes (see `state/README.md`).
pub const LAYOUT_VERSION: u32 = 10;

/// One partition's RocksDB.
pub struct Store {
    db: DB,
    path: PathBuf,
    write_opts: WriteOptions,
    /// For a secondary (which has no snapshots): readers hold it shared
    /// for a whole read view, [`Store::catch_up`] exclusively, so a view
    /// never sees two states.
    follow: Option<std::sync::RwLock<()>>,
    pages: PageCache,
    replies: super::replies::ReplyCache,
    heads: Heads,
    /// Set once a read found a live repost in this store (a hint, never
    /// cleared: see [`Store::reposts_seen`]).
    reposts_seen: std::sync::atomic::AtomicBool,
    /// For each of [`MARKED`]: whether the column family may hold a key
    /// (one at the open, or a commit wrote to it since; never cleared).
    marked: [std::sync::atomic::AtomicBool; MARKED.len()],
}

/// How [`Store::open_existing`] opens: as a secondary (no page cache), or
/// read-only.
enum Follow {
    Yes,
    No { kept: Kept },
}

impl Store {
    /// Opens (creating if missing) the store of `partition` of `partitions`.
    /// Refuses a store of another layout version or another partition.
    pub fn open(
        path: &Path,
        partition: Partition,
        partitions: u32,
        cache: &BlockCache,
        opts: &StoreOptions,
    ) -> Result<Store, StoreError> {
        let mut db_opts = Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        db_opts.set_max_background_jobs(2);
        db_opts.set_max_open_files(256);
        // Disk before the first event: RocksDB would preallocate each
        // write-ahead log at 1.1 × the largest memtable (the unused default
        // column family's is 64 MB) and each MANIFEST at 4 MB, ~75 MB per
        // partition. Files grow as they are written instead; an empty store
        // is a few hundred KB.
        db_opts.set_manifest_preallocation_size(64 << 10);
        db_opts.set_write_buffer_size(1 << 20);
        // A column family written rarely (positions, outbox) would keep
        // every write-ahead log since its last flush alive: 174 MB of logs
        // per partition after the demo, all replayed at the next open. Past
        // this total, RocksDB flushes the column families that pin the
        // oldest log.
        db_opts.set_max_total_wal_size(64 << 20);
        db_opts.set_keep_log_file_num(4);
        db_opts.set_max_log_file_size(4 << 20);
        // (No setter for `allow_fallocate` in the Rust binding: through
        // RocksDB's own options-string parser, which copies the rest.)
        let db_opts = db_opts
            .get_options_from_string("allow_fallocate=false")
            .map_err(|source| StoreError::Rocks {
                path: path.to_path_buf(),
                source,
            })?;
        let cfs = upgrade::descriptors(path, cache, opts);
        let db =
            DB::open_cf_descriptors(&db_opts, path, cfs).map_err(|source| StoreError::Rocks {
                path: path.to_path_buf(),
                source,
            })?;
        let mut write_opts = WriteOptions::default();
        write_opts.set_sync(opts.sync);
        let mut store = Store {
            db,
            path: path.to_path_buf(),
            write_opts,
            follow: None,
            pages: PageCache::new(opts.kept.per_store(partitions).pages),
            replies: Default::default(),
            heads: Heads::new(opts.kept.per_store(partitions).heads),
            reposts_seen: Default::default(),
            marked: Default::default(),
        };
        let layout = store.check_identity(partition, partitions, true)?;
        upgrade::finish(&mut store, layout)?;
        store.mark_held()?;
        // A state written before the gauges were kept gets them counted once.
        if Gauges::of(&store)?.is_none() {
            let g = gauges::recount(&store)?.encode();
            store.commit(&Writes::default(), |b| b.put(Cf::Meta, keys::GAUGES, &g))?;
        }
        Ok(store)
    }

    /// Opens an existing store read-only (beside a running processor): sees
    /// the state as of the open. `kept` is for the stores of
    /// the process together, as in [`StoreOptions`].
    pub fn open_read_only(
        path: &Path,
        partition: Partition,
        partitions: u32,
        cache: &BlockCache,
        kept: Kept,
    ) -> Result<Store, StoreError> {
        let follow = Follow::No { kept };
        Store::open_existing(path, partition, partitions, cache, follow, |cfs| {
            DB::open_cf_descriptors_read_only(&Options::default(), path, cfs, false)
        })
    }

    /// The input positions committed in the store at `path` (events,
    /// effects), read through a read-only open (a processor may be running);
    /// `None` when there is no store there.
    pub fn stored_positions(
        path: &Path,
        partition: Partition,
        partitions: u32,
    ) -> Result<Option<Positions>, StoreError> {
        if !path.join("CURRENT").exists() {
            return Ok(None);
        }
        let cache = BlockCache::new(1 << 20);
        let store = Store::open_read_only(path, partition, partitions, &cache, Kept::NONE)?;
        Ok(Some(store.positions()?))
    }

    /// Opens an existing store as a RocksDB secondary beside a running
    /// processor: sees the state as of the open, and later states after each
    /// [`Store::catch_up`]. `scratch` holds the secondary's own files.
    pub fn open_secondary(
        path: &Path,
        scratch: &Path,
        partition: Partition,
        partitions: u32,
        cache: &BlockCache,
    ) -> Result<Store, StoreError> {
        Store::open_existing(path, partition, partitions, cache, Follow::Yes, |cfs| {
            let mut db_opts = Options::default();
            // A secondary must keep every file open (RocksDB's requirement).
            db_opts.set_max_open_files(-1);
            DB::open_cf_descriptors_as_secondary(&db_opts, path, scratch, cfs)
        })
    }

    /// Opens a store that must exist with `open`, without writing to it,
    /// and checks its identity.
    fn open_existing(
        path: &Path,
        partition: Partition,
        partitions: u32,
        cache: &BlockCache,
        follow: Follow,
        open: impl FnOnce(Vec<ColumnFamilyDescriptor>) -> Result<DB, rocksdb::Error>,
    ) -> Result<Store, StoreError> {
        if !path.join("CURRENT").exists() {
            return Err(StoreError::Refused {
                path: path.to_path_buf(),
                reason: "no state store here (has `feedlog run` processed this data directory?)"
                    .into(),
            });
        }
        upgrade::refuse_older(path)?;
        let opts = StoreOptions::default();
        // A secondary's data changes at each catch-up, without a commit.
        let (follow, kept) = match follow {
            Follow::Yes => (Some(std::sync::RwLock::new(())), Kept::NONE),
            Follow::No { kept } => (None, kept.per_store(partitions)),
        };
        let db =
            open(upgrade::descriptors(path, cache, &opts)).map_err(|source| StoreError::Rocks {
                path: path.to_path_buf(),
                source,
            })?;
        let store = Store {
            db,
            path: path.to_path_buf(),
            write_opts: WriteOptions::default(),
            follow,
            pages: PageCache::new(kept.pages),
            replies: Default::default(),
            heads: Heads::new(kept.heads),
            reposts_seen: Default::default(),
            marked: Default::default(),
        };
        let layout = store.check_identity(partition, partitions, false)?;
        if upgrade::UPGRADABLE.contains(&layout) {
            return Err(upgrade::refusal(path, layout));
        }
        store.mark_held()?;
        Ok(store)
    }

    /// Moves a store opened by [`Store::open_secondary`] up to the primary's
    /// latest committed state.
    pub fn catch_up(&self) -> Result<(), StoreError> {
        let _exclusive = self
            .follow
            .as_ref()
            .map(|l| l.write().unwrap_or_else(PoisonError::into_inner));
        self.db
            .try_catch_up_with_primary()
            .map_err(|e| self.rocks(e))
    }

    /// Checks the store's layout and partition (recording them in a new
    /// store); the layout found: [`LAYOUT_VERSION`], or one it upgrades
    /// ([`upgrade::UPGRADABLE`]).
    fn check_identity(
        &self,
        partition: Partition,
        partitions: u32,
        writable: bool,
    ) -> Result<u32, StoreError> {
        let refuse = |reason: String| StoreError::Refused {
            path: self.path.clone(),
            reason,
        };
        let read_u32 = |k: &[u8]| -> Result<Option<u32>, StoreError> {
            match self.get(Cf::Meta, k)? {
                None => Ok(None),
                Some(v) => v
                    .try_into()
                    .map(|b| Some(u32::from_be_bytes(b)))
                    .map_err(|_| StoreError::corrupt(Cf::Meta, k, "expected 4 bytes")),
            }
        };
        match read_u32(meta::LAYOUT)? {
            None if writable => {
                let mut b = WriteBatch::default();
                let meta = self.cf(Cf::Meta);
                b.put_cf(meta, meta::LAYOUT, LAYOUT_VERSION.to_be_bytes());
                b.put_cf(meta, meta::PARTITION, partition.0.to_be_bytes());
                b.put_cf(meta, meta::PARTITIONS, partitions.to_be_bytes());
                self.write(b)?;
                return Ok(LAYOUT_VERSION);
            }
            None => return Err(refuse("the store has no layout version".into())),
            Some(v) if v != LAYOUT_VERSION && !upgrade::UPGRADABLE.contains(&v) => {
                return Err(refuse(format!(
                "it was written with state layout {v}, this build reads layout {LAYOUT_VERSION} \
                     (rebuild it from the log into a fresh directory)"
            )))
            }
            Some(_) => {}
        }
        let layout = read_u32(meta::LAYOUT)?.unwrap_or(LAYOUT_VERSION);
        let found = (read_u32(meta::PARTITION)?, read_u32(meta::PARTITIONS)?);
        if found != (Some(partition.0), Some(partitions)) {
            let shown = |v: Option<u32>| v.map_or("(unrecorded)".to_string(), |v| v.to_string());
            return Err(refuse(format!(
                "it holds partition {} of {}, expected {partition} of {partitions}",
                shown(found.0),
                shown(found.1)
            )));
        }
        Ok(layout)
    }

    fn cf(&self, cf: Cf) -> &rocksdb::ColumnFamily {
        self.db
            .cf_handle(cf.name())
            .expect("every column family is created at open")
    }

    fn rocks(&self, source: rocksdb::Error) -> StoreError {
        StoreError::Rocks {
            path: self.path.clone(),
            source,
        }
    }

    /// Writes a consistent RocksDB checkpoint of this store into `to`
    /// (which must not exist): table files hard-linked where the file
    /// system allows, the rest copied. Its `meta` holds the positions of
    /// exactly the state it holds.
    pub fn checkpoint(&self, to: &Path) -> Result<(), StoreError> {
        let err = |source| StoreError::Rocks {
            path: to.to_path_buf(),
            source,
        };
        rocksdb::checkpoint::Checkpoint::new(&self.db)
            .and_then(|c| c.create_checkpoint(to))
            .map_err(err)
    }

    /// Writes every column family's memtable to table files, so the next
    /// open has (almost) no write-ahead log to replay.
    pub fn flush(&self) -> Result<(), StoreError> {
        let cfs: Vec<&rocksdb::ColumnFamily> = Cf::ALL.iter().map(|&cf| self.cf(cf)).collect();
        self.db
            .flush_cfs_opt(&cfs, &rocksdb::FlushOptions::default())
            .map_err(|source| StoreError::Rocks {
                path: self.path.clone(),
                source,
            })
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads a `u64` from the meta column family (0 when absent).
    pub fn meta_u64(&self, key: &[u8]) -> Result<u64, StoreError> {
        Ok(meta::meta_u64(self, key)?)
    }

    /// The input positions committed with the state.
    pub fn positions(&self) -> Result<Positions, StoreError> {
        Ok(meta::positions(self)?)
    }

    /// Commits a batch's writes plus extra raw operations in one atomic
    /// `WriteBatch`.
    pub fn commit(
        &self,
        writes: &Writes,
        extra: impl FnOnce(&mut Batch<'_>),
    ) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        for cf in Cf::ALL {
            let handle = self.cf(cf);
            for (k, v) in writes.cf(cf) {
                match v {
                    Some(v) => batch.put_cf(handle, k, v),
                    None => batch.delete_cf(handle, k),
                }
            }
        }
        let mut raw = Batch {
            store: self,
            batch: &mut batch,
            pages_touched: false,
            marked: [false; MARKED.len()],
        };
        extra(&mut raw);
        // Before the write: a view that holds the key finds the mark.
        for (i, &cf) in MARKED.iter().enumerate() {
            if raw.marked[i] || !writes.cf(cf).is_empty() {
                self.marked[i].store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let _landing = self.pages.landing(writes, raw.pages_touched);
        let (heads, replies) = (
            self.heads.landing(writes, raw.pages_touched),
            self.replies.landing(writes),
        );
        let written = self.write(batch);
        heads.close(written.is_ok());
        replies.close(written.is_ok());
        written
    }

    /// The first timeline pages kept beside this store.
    pub fn pages(&self) -> &PageCache {
        &self.pages
    }

    /// The newest inbox rows of readers, kept beside this store.
    pub fn heads(&self) -> &Heads {
        &self.heads
    }

    /// Whether a read found a live repost here once ([`Store::saw_reposts`]).
    /// Reposts may all be gone since: the hint only spares readers the
    /// check, choosing the read that aggregates, which is exact with or
    /// without reposts.
    pub fn reposts_seen(&self) -> bool {
        self.reposts_seen.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records that a read found a live repost here.
    pub fn saw_reposts(&self) {
        self.reposts_seen
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn write(&self, batch: WriteBatch) -> Result<(), StoreError> {
        self.db
            .write_opt(batch, &self.write_opts)
            .map_err(|e| self.rocks(e))
    }

    /// A consistent read view of the whole store: a RocksDB snapshot, or
    /// on a secondary the state between two catch-ups.
    pub fn snapshot(&self) -> Snapshot<'_> {
        match &self.follow {
            Some(lock) => Snapshot {
                heads_epoch: None,
                replies_epoch: None,
                store: self,
                snap: None,
                _frozen: Some(lock.read().unwrap_or_else(PoisonError::into_inner)),
            },
            None => Snapshot {
                // Before the snapshot: heads at this epoch agree with it.
                heads_epoch: self.heads.epoch(),
                replies_epoch: self.replies.epoch(),
                store: self,
                snap: Some(self.db.snapshot()),
                _frozen: None,
            },
        }
    }

    fn scan_with<'a>(
        &'a self,
        cf: Cf,
        lo: &[u8],
        hi: Option<&[u8]>,
        snap: Option<&'a SnapshotWithThreadMode<'a, DB>>,
    ) -> Scan<'a> {
        if crate::core::kv::empty_range(lo, hi) {
            return Box::new(std::iter::empty());
        }
        let mut ro = ReadOptions::default();
        match hi {
            Some(hi) => ro.set_iterate_range(lo.to_vec()..hi.to_vec()),
            None => ro.set_iterate_range(lo.to_vec()..),
        }
        let it = match snap {
            Some(s) => s.iterator_cf_opt(self.cf(cf), ro, IteratorMode::Start),
            None => self
                .db
                .iterator_cf_opt(self.cf(cf), ro, IteratorMode::Start),
        };
        Box::new(it.map(move |r| match r {
            Ok((k, v)) => Ok((k.into_vec(), v.into_vec())),
            Err(e) => Err(KvError::from(self.rocks(e))),
        }))
    }
}

impl Kv for Store {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        Ok(self
            .db
            .get_cf(self.cf(cf), key)
            .map_err(|e| self.rocks(e))?)
    }

    fn scan<'a>(&'a self, cf: Cf, lo: &[u8], hi: Option<&[u8]>) -> Scan<'a> {
        self.scan_with(cf, lo, hi, None)
    }

    fn for_each_key(
        &self,
        cf: Cf,
        lo: &[u8],
        hi: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), KvError> {
        Ok(Store::for_each_key(self, cf, lo, hi, f)?)
    }

    fn for_each_in_ranges(
        &self,
        cf: Cf,
        ranges: &[(Vec<u8>, Vec<u8>)],
        f: &mut InRange<'_>,
    ) -> Result<(), KvError> {
        let _frozen = self
            .follow
            .as_ref()
            .map(|lock| lock.read().unwrap_or_else(PoisonError::into_inner));
        Ok(self.ranges_with(cf, ranges, f, None)?)
    }
}

/// A read view of one store at one instant.
pub struct Snapshot<'a> {
    store: &'a Store,
    /// The heads' epoch the view was taken at (`None`: none agrees).
    heads_epoch: Option<u64>,
    /// The kept replies' epoch the view was taken at (`None`: keep none).
    replies_epoch: Option<u64>,
    snap: Option<SnapshotWithThreadMode<'a, DB>>,
    /// On a secondary: holds catch-ups off while the view lives.
    _frozen: Option<std::sync::RwLockReadGuard<'a, ()>>,
}

impl Snapshot<'_> {
    /// The store's heads, with the epoch at which they agree with this
    /// view ([`Heads::outbox`]); `None` when none does.
    pub fn heads(&self) -> Option<(&Heads, u64)> {
        Some((&self.store.heads, self.heads_epoch?))
    }
}

impl Kv for Snapshot<'_> {
    fn held_parents(&self, posts: &[keys::PostRef]) -> Vec<Option<Option<UserId>>> {
        Snapshot::held_parents(self, posts)
    }

    fn keep_parents(&self, answers: &[(keys::PostRef, Option<UserId>)]) {
        Snapshot::keep_parents(self, answers)
    }

    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        let got = match &self.snap {
            Some(s) => s.get_cf(self.store.cf(cf), key),
            None => self.store.db.get_cf(self.store.cf(cf), key),
        };
        Ok(got.map_err(|e| self.store.rocks(e))?)
    }

    /// One batched RocksDB `MultiGet` (its bloom probes and block reads
    /// shared across the keys), at the snapshot.
    fn get_many(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        let mut opts = ReadOptions::default();
        if let Some(s) = &self.snap {
            opts.set_snapshot(s);
        }
        let got = self
            .store
            .db
            .batched_multi_get_cf_opt(self.store.cf(cf), keys, false, &opts);
        got.into_iter()
            .map(|r| {
                let v = r.map_err(|e| self.store.rocks(e))?;
                Ok(v.map(|v| v.to_vec()))
            })
            .collect()
    }

    fn scan<'b>(&'b self, cf: Cf, lo: &[u8], hi: Option<&[u8]>) -> Scan<'b> {
        self.store.scan_with(cf, lo, hi, self.snap.as_ref())
    }

    fn for_each_in_ranges(
        &self,
        cf: Cf,
        ranges: &[(Vec<u8>, Vec<u8>)],
        f: &mut InRange<'_>,
    ) -> Result<(), KvError> {
        Ok(self.store.ranges_with(cf, ranges, f, self.snap.as_ref())?)
    }
}

mod batch;
mod error;
mod iter;
mod marks;
mod properties;
mod upgrade;

pub use batch::Batch;
pub use error::StoreError;

#[cfg(test)]
mod tests;
