//! A store's tuning: the options a caller sets ([`StoreOptions`]) and the
//! RocksDB options of each column family.

use super::cache::BlockCache;
use crate::core::kv::Cf;
use rocksdb::{BlockBasedOptions, DBCompressionType, Options};

/// Tuning for a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// fsync the WAL on every commit (durable against power loss).
    pub sync: bool,
    /// Memtable size per column family, bytes.
    pub write_buffer_bytes: usize,
    /// Bytes of encoded first timeline pages kept beside the stores of a
    /// process, all partitions together (see [`super::PageCache`]; `0`: none).
    pub page_cache_bytes: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            sync: true,
            write_buffer_bytes: 16 << 20,
            page_cache_bytes: 64 << 20,
        }
    }
}

/// The RocksDB options of column family `cf`.
pub(super) fn cf_options(cf: Cf, cache: &BlockCache, opts: &StoreOptions) -> Options {
    let mut o = Options::default();
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache.rocks());
    if matches!(
        cf,
        Cf::Users
            | Cf::Followees
            | Cf::Followers
            | Cf::Posts
            | Cf::Inbox
            | Cf::InboxAuthors
            | Cf::Copies
            | Cf::Pulls
            | Cf::Refills
            | Cf::Reposts
            | Cf::RepostDir
    ) {
        table.set_bloom_filter(10.0, false);
    }
    o.set_block_based_table_factory(&table);
    o.set_write_buffer_size(opts.write_buffer_bytes);
    // A whole-key bloom filter over each memtable (2 % of its size): a
    // point read of a key the memtable does not hold — most reads of the
    // write path — skips the skiplist search.
    o.set_memtable_prefix_bloom_ratio(0.02);
    o.set_memtable_whole_key_filtering(true);
    o.set_level_compaction_dynamic_level_bytes(true);
    // Flushes and upper levels in LZ4 (cheap to write and read); the
    // bottommost level, where dynamic level sizing keeps ~90 % of the data,
    // in Zstandard. Files written before compression was built in stay
    // readable (each block names its codec) and are rewritten compressed by
    // compaction.
    o.set_compression_type(DBCompressionType::Lz4);
    o.set_bottommost_compression_type(DBCompressionType::Zstd);
    o
}
