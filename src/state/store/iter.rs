//! Reads through raw RocksDB iterators, the keys and values lent in place:
//! a key range ([`Store::for_each_key`]), and many ranges through one
//! iterator that seeks only where it stands before a range
//! ([`Kv::for_each_in_ranges`](crate::core::kv::Kv::for_each_in_ranges)).

use super::{Store, StoreError, DB};
use crate::core::kv::{Cf, InRange};
use rocksdb::{ReadOptions, SnapshotWithThreadMode};
use std::sync::PoisonError;

impl Store {
    /// Calls `f` with each key of `cf` in `[lo, hi)` (`hi = None`: to the
    /// end), ascending, until it returns `false`. One iterator, so one
    /// consistent view, without a snapshot and without copying the keys:
    /// for short reads that need nothing else.
    pub fn for_each_key(
        &self,
        cf: Cf,
        lo: &[u8],
        hi: Option<&[u8]>,
        mut f: impl FnMut(&[u8]) -> bool,
    ) -> Result<(), StoreError> {
        if crate::core::kv::empty_range(lo, hi) {
            return Ok(());
        }
        let _frozen = self
            .follow
            .as_ref()
            .map(|lock| lock.read().unwrap_or_else(PoisonError::into_inner));
        let mut ro = ReadOptions::default();
        if let Some(hi) = hi {
            ro.set_iterate_upper_bound(hi.to_vec());
        }
        let mut it = self.db.raw_iterator_cf_opt(self.cf(cf), ro);
        it.seek(lo);
        while let Some(k) = it.key() {
            if !f(k) {
                break;
            }
            it.next();
        }
        it.status().map_err(|e| self.rocks(e))
    }

    /// [`crate::core::kv::Kv::for_each_in_ranges`] through one raw iterator (of `snap`
    /// when given): a seek only where the iterator stands before a range's
    /// start. The iterator stops at the first key past range `i` (or where
    /// `f` declined, inside it); as the ranges are disjoint and ascending,
    /// when that key lies at or past the next range's start it is the first
    /// key from there, and no seek is needed.
    pub(super) fn ranges_with(
        &self,
        cf: Cf,
        ranges: &[(Vec<u8>, Vec<u8>)],
        f: &mut InRange<'_>,
        snap: Option<&SnapshotWithThreadMode<'_, DB>>,
    ) -> Result<(), StoreError> {
        let mut ro = ReadOptions::default();
        if let Some(hi) = ranges
            .last()
            .and_then(|(_, p)| crate::core::keys::prefix_end(p))
        {
            ro.set_iterate_upper_bound(hi);
        }
        let mut it = match snap {
            Some(s) => s.raw_iterator_cf_opt(self.cf(cf), ro),
            None => self.db.raw_iterator_cf_opt(self.cf(cf), ro),
        };
        for (i, (lo, prefix)) in ranges.iter().enumerate() {
            if i == 0 {
                it.seek(lo);
            } else {
                match it.key() {
                    // Past the last key: every later range is empty.
                    None => break,
                    Some(k) if k >= lo.as_slice() => {}
                    Some(_) => it.seek(lo),
                }
            }
            while let Some(k) = it.key() {
                if !k.starts_with(prefix) || !f(i, k, it.value().unwrap_or_default()) {
                    break;
                }
                it.next();
            }
        }
        it.status().map_err(|e| self.rocks(e))
    }
}
