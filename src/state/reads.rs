//! The committed values of a partition's hottest point reads, kept in
//! memory by the partition's only writer.
//!
//! A delivery reads the follower's edge (is the delivery still wanted?),
//! the follower's user record (the inbox's length and horizon) and its
//! marker for the post's author (`inbox_authors`); a follow
//! reads both sides' edges and users. Those are RocksDB point reads that
//! search memtables and table files, most of a replay's CPU. A [`ReadCache`]
//! remembers what such reads returned, kept up to date by the task's own
//! commits, so the next read of the same key is a hash lookup.
//!
//! It is exact because the partition task is the only writer of its store
//! while it lives (every replacement of a state builds new stores and new
//! tasks): a value enters the cache only as read from the store, and every
//! write of a cached key that the task commits updates its entry. The contract tests (`tests/contract.rs`) run
//! the task with a cache small enough to be swept all the time; one that
//! missed a commit's writes fails them.

use std::cell::RefCell;

use rustc_hash::FxHashMap;

use super::Store;
use crate::core::kv::{Cf, Key, Kv, KvError, Scan, Writes, KEY_INLINE};

/// Column families whose point reads are cached.
const CACHED: [Cf; 4] = [Cf::Users, Cf::Followees, Cf::Followers, Cf::InboxAuthors];

/// The cache's key for `key` of `cf`: the column family's place in
/// [`CACHED`], then the key (`None`: not a cached column family).
fn cache_key(cf: Cf, key: &[u8]) -> Option<Key> {
    let slot = CACHED.iter().position(|&c| c == cf)? as u8;
    let len = key.len() + 1;
    if len > KEY_INLINE {
        return Some(Key::Heap([&[slot], key].concat().into()));
    }
    let mut buf = [0; KEY_INLINE];
    buf[0] = slot;
    buf[1..len].copy_from_slice(key);
    Some(Key::Inline {
        len: len as u8,
        buf,
    })
}

/// Committed values by key (`None`: known absent) of the [`CACHED`] column
/// families, at most `capacity` entries. When it is full, a sweep keeps
/// the entries read since the last sweep and drops the others (a clock:
/// the users and edges the log touches now stay).
pub struct ReadCache {
    map: RefCell<FxHashMap<Key, Entry>>,
    /// Keys missed once since the last sweep, by a bit of their hash: a
    /// key is added at its second miss, so a fan-out that touches each
    /// follower once (a big account's post) does not churn the cache.
    missed: RefCell<Vec<u64>>,
    capacity: usize,
}

/// Bits in [`ReadCache::missed`].
const MISSED_BITS: usize = 1 << 20;

/// A cached value, and whether it was read since the last sweep.
struct Entry {
    value: Option<Vec<u8>>,
    read: std::cell::Cell<bool>,
}

impl ReadCache {
    /// An empty cache of at most `capacity` entries (`0`: nothing cached).
    pub fn new(capacity: usize) -> ReadCache {
        ReadCache {
            map: RefCell::default(),
            missed: RefCell::new(if capacity == 0 {
                Vec::new()
            } else {
                vec![0; MISSED_BITS / 64]
            }),
            capacity,
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.borrow().len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records the writes of a batch that was just committed: every cached
    /// key it wrote takes its new value (keys not cached stay out: a read
    /// brings them in).
    pub fn committed(&self, writes: &Writes) {
        if self.capacity == 0 {
            return;
        }
        let mut map = self.map.borrow_mut();
        for cf in CACHED {
            for (k, v) in writes.cf(cf) {
                if let Some(c) = cache_key(cf, k).and_then(|k| map.get_mut(&k)) {
                    c.value.clone_from(v);
                }
            }
        }
    }

    /// A read view of `store` through this cache.
    pub fn over<'a>(&'a self, store: &'a Store) -> Cached<'a> {
        Cached { store, cache: self }
    }

    /// Whether `k`, just missed, was missed before since the last sweep
    /// (and remembers this miss).
    fn missed_before(&self, k: &Key) -> bool {
        use std::hash::BuildHasher;
        let bit = rustc_hash::FxBuildHasher.hash_one(k) as usize % MISSED_BITS;
        let mut missed = self.missed.borrow_mut();
        let (word, mask) = (bit / 64, 1u64 << (bit % 64));
        let before = missed[word] & mask != 0;
        missed[word] |= mask;
        before
    }

    /// Adds a value just read from the store (its key is not cached).
    fn insert(&self, k: Key, value: Option<Vec<u8>>) {
        let mut map = self.map.borrow_mut();
        if map.len() >= self.capacity {
            self.missed.borrow_mut().fill(0);
            map.retain(|_, c| c.read.replace(false));
            if map.len() >= self.capacity / 2 {
                // Most of it is hot: start over rather than sweep again soon.
                map.clear();
            }
        }
        let read = std::cell::Cell::new(false);
        map.insert(k, Entry { value, read });
    }
}

/// A store's live state, point reads of the cached column families
/// answered from a [`ReadCache`] first.
pub struct Cached<'a> {
    store: &'a Store,
    cache: &'a ReadCache,
}

impl Kv for Cached<'_> {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        let Some(k) = cache_key(cf, key).filter(|_| self.cache.capacity > 0) else {
            return self.store.get(cf, key);
        };
        if let Some(c) = self.cache.map.borrow().get(&k) {
            c.read.set(true);
            return Ok(c.value.clone());
        }
        let v = self.store.get(cf, key)?;
        if self.cache.missed_before(&k) {
            self.cache.insert(k, v.clone());
        }
        Ok(v)
    }

    fn scan<'b>(&'b self, cf: Cf, lo: &[u8], hi: Option<&[u8]>) -> Scan<'b> {
        self.store.scan(cf, lo, hi)
    }

    fn for_each_key(
        &self,
        cf: Cf,
        lo: &[u8],
        hi: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), KvError> {
        Kv::for_each_key(self.store, cf, lo, hi, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::kv::Txn;
    use crate::core::Partition;
    use crate::state::{BlockCache, StoreOptions};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        // Proves every read through the cache equals the store's own after each commit, with sweeps and clears.
        #[test]
        fn cached_reads_equal_the_store(
            batches in proptest::collection::vec(
                proptest::collection::vec((0usize..3, 0u8..12, proptest::option::of(any::<u8>())), 0..8),
                1..12,
            ),
            reads in proptest::collection::vec((0usize..3, 0u8..12), 0..40),
            capacity in 0usize..10,
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let opts = StoreOptions { sync: false, ..StoreOptions::default() };
            let store = Store::open(tmp.path(), Partition(0), 1, &BlockCache::new(1 << 20), &opts).unwrap();
            let cache = ReadCache::new(capacity);
            let key = |k: u8| crate::core::keys::key([u64::from(k)]);
            for (i, batch) in batches.iter().enumerate() {
                let base = cache.over(&store);
                let mut txn = Txn::new(&base);
                for &(cf, k, v) in batch {
                    // Reads interleaved with the writes fill the cache from the store.
                    txn.get(CACHED[cf], &key(k)).unwrap();
                    match v {
                        Some(v) => txn.put(CACHED[cf], key(k), vec![v]),
                        None => txn.delete(CACHED[cf], key(k)),
                    }
                }
                let writes = txn.into_writes();
                store.commit(&writes, |_| {}).unwrap();
                cache.committed(&writes);
                for &(cf, k) in reads.iter().skip(i % 3) {
                    let cf = CACHED[cf];
                    prop_assert_eq!(base.get(cf, &key(k)).unwrap(), store.get(cf, &key(k)).unwrap());
                }
                prop_assert!(cache.len() <= capacity.max(1));
            }
        }
    }
}
