//! Raw operations a commit carries beside a batch's writes, and what they
//! touch (the pages and heads they drop, the column families they mark).

use super::marks::MARKED;
use super::Store;
use crate::core::kv::Cf;
use rocksdb::WriteBatch;

/// Raw operations added to a commit beside the batch's writes.
pub struct Batch<'s> {
    pub(super) store: &'s Store,
    pub(super) batch: &'s mut WriteBatch,
    /// A raw write may change a timeline page or an outbox the pull path
    /// reads: the commit drops every page and head.
    pub(super) pages_touched: bool,
    /// Raw writes to each of [`MARKED`].
    pub(super) marked: [bool; MARKED.len()],
}

impl Batch<'_> {
    /// Puts a raw value.
    pub fn put(&mut self, cf: Cf, key: &[u8], value: &[u8]) {
        self.touch(cf);
        self.batch.put_cf(self.store.cf(cf), key, value);
    }

    /// Deletes every key in `[from, to)`.
    pub fn delete_range(&mut self, cf: Cf, from: &[u8], to: &[u8]) {
        self.touch(cf);
        self.batch.delete_range_cf(self.store.cf(cf), from, to);
    }

    fn touch(&mut self, cf: Cf) {
        for (m, &c) in self.marked.iter_mut().zip(&MARKED) {
            *m |= c == cf;
        }
        self.pages_touched |= matches!(
            cf,
            Cf::Inbox
                | Cf::InboxReposts
                | Cf::Users
                | Cf::Followees
                | Cf::Copies
                | Cf::Pulls
                | Cf::RepostDir
                | Cf::Filters
                | Cf::Outbox
        );
    }
}
