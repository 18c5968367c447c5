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
    /// What is kept in memory for readers beside the stores of a process.
    pub kept: Kept,
}

/// Bytes kept in memory for readers beside the stores of a process, all
/// partitions together (`0`: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// Encoded timeline pages ([`super::PageCache`]).
    pub pages: usize,
    /// The newest rows of readers' inboxes ([`super::Heads`]).
    pub heads: usize,
}

impl Kept {
    /// Nothing kept: every page is read from the stores.
    pub const NONE: Kept = Kept { pages: 0, heads: 0 };

    /// The default: 64 MiB of pages, 512 MiB of heads (a Twitter-like week
    /// of 137 k readers, 4.97 M sources, holds every reader's head and
    /// sources in 345 MB: docs/benchmark-runs.md, "Memory as settings
    /// (2026-11-30, latest)").
    pub const DEFAULT: Kept = Kept {
        pages: 64 << 20,
        heads: 512 << 20,
    };

    /// Each budget's share of one store of `partitions`.
    pub fn per_store(self, partitions: u32) -> Kept {
        let n = partitions.max(1) as usize;
        Kept {
            pages: self.pages / n,
            heads: self.heads / n,
        }
    }
}

impl Default for Kept {
    fn default() -> Self {
        Kept::DEFAULT
    }
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            sync: true,
            write_buffer_bytes: 16 << 20,
            kept: Kept::default(),
        }
    }
}

/// The RocksDB options of column family `cf`.
pub(super) fn cf_options(cf: Cf, cache: &BlockCache, opts: &StoreOptions) -> Options {
    let mut o = Options::default();
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache.rocks());
    // Point-read column families get a whole-key bloom filter and small
    // blocks (a read decompresses one 4 KB block). The others are read in
    // ranges, where a filter would cost 1.25 B a key for the inbox's only
    // point read (is a deleted post there?). The inbox and the outboxes
    // keep 4 KB blocks too: a timeline page seeks into them once per
    // reader or followee and reads a few hundred bytes, and a cold seek
    // decompresses the whole block (16 KB blocks made Zstandard half of an
    // uncached page's instructions; 4 KB cut those pages' instructions by
    // a fifth for 4 % more state; docs/benchmark-runs.md,
    // "Reposts' read path: the design's page with its sources, and one iterator per page's ranges").
    // Recent followers and the rest, read in longer runs, keep 16 KB.
    if matches!(
        cf,
        Cf::Users
            | Cf::Followees
            | Cf::Followers
            | Cf::Posts
            | Cf::InboxAuthors
            | Cf::Copies
            | Cf::Pulls
            | Cf::Refills
            | Cf::Reposts
            | Cf::RepostDir
            | Cf::Filters
            | Cf::Engagement
            | Cf::ReplyDir
    ) {
        table.set_bloom_filter(10.0, false);
    } else if !matches!(cf, Cf::Inbox | Cf::Outbox | Cf::InboxReposts) {
        table.set_block_size(16 << 10);
    }
    // Every page seeks into the inbox (a sleeper's, into each followee's
    // outbox): a full key every 4 entries instead of 16 leaves a seek a
    // few entries to decode past its binary search. On CollegeMsg an
    // uncached page takes 6 % less work for 3.8 % more state
    // (docs/benchmark-runs.md, "Fewer checks per page, and seeks that
    // stop sooner (2026-11-29)").
    if matches!(cf, Cf::Inbox | Cf::Outbox) {
        table.set_block_restart_interval(4);
    }
    // The user record is read by every event and every page: a hash index
    // in each block finds it without a binary search.
    if cf == Cf::Users {
        table.set_data_block_index_type(rocksdb::DataBlockIndexType::BinaryAndHash);
    }
    o.set_block_based_table_factory(&table);
    o.set_write_buffer_size(opts.write_buffer_bytes);
    // A whole-key bloom filter over each memtable (2 % of its size): a
    // point read of a key the memtable does not hold — most reads of the
    // write path — skips the skiplist search.
    o.set_memtable_prefix_bloom_ratio(0.02);
    o.set_memtable_whole_key_filtering(true);
    o.set_level_compaction_dynamic_level_bytes(true);
    // Zstandard at every level: on the generated follow-heavy network it
    // takes the state from 58 to 38 B per inbox entry against LZ4 for
    // flushes and upper levels, at no throughput cost that a run can tell
    // (flushes and compactions run in the background). Files written with
    // another codec stay readable (each block names its codec) and are
    // rewritten by compaction.
    o.set_compression_type(DBCompressionType::Zstd);
    o.set_bottommost_compression_type(DBCompressionType::Zstd);
    o
}
