//! The block cache the stores of a process share.

/// RocksDB's LRU block cache, shared by every store it is given to.
#[derive(Clone)]
pub struct BlockCache(rocksdb::Cache);

impl BlockCache {
    /// A cache of `bytes`.
    pub fn new(bytes: usize) -> BlockCache {
        BlockCache(rocksdb::Cache::new_lru_cache(bytes))
    }

    pub(super) fn rocks(&self) -> &rocksdb::Cache {
        &self.0
    }
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BlockCache")
    }
}
