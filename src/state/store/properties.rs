//! RocksDB's own figures of a store: its statistics properties, each
//! column family's table files, and the block cache it shares.

use super::Store;
use crate::core::kv::Cf;

impl Store {
    /// RocksDB's own statistics property (for `inspect` and metrics).
    pub fn property(&self, name: &str) -> Option<String> {
        self.db.property_value(name).ok().flatten()
    }

    /// The block cache's capacity and the bytes it holds now (RocksDB's
    /// `rocksdb.block-cache-capacity` and `rocksdb.block-cache-usage`; the
    /// cache is shared by every store of a process).
    pub fn block_cache(&self) -> (u64, u64) {
        let int = |name| {
            let v = self.db.property_int_value_cf(self.cf(Cf::Inbox), name);
            v.ok().flatten().unwrap_or(0)
        };
        (
            int("rocksdb.block-cache-capacity"),
            int("rocksdb.block-cache-usage"),
        )
    }

    /// The bytes of each column family's table files (RocksDB's
    /// `rocksdb.total-sst-files-size`; memtables not included: flush first).
    pub fn cf_bytes(&self) -> Vec<(Cf, u64)> {
        Cf::ALL
            .iter()
            .map(|&cf| {
                let n = self
                    .db
                    .property_int_value_cf(self.cf(cf), "rocksdb.total-sst-files-size")
                    .ok()
                    .flatten()
                    .unwrap_or(0);
                (cf, n)
            })
            .collect()
    }
}
