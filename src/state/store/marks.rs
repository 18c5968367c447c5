//! Which column families a store may hold a key of: marked at the open
//! and by each commit that writes them, so that a read of a partition with
//! no repost, no reply or no filter at all skips looking.

use super::{Snapshot, Store, StoreError};
use crate::core::event::UserId;
use crate::core::keys::PostRef;
use crate::core::kv::Cf;
use std::sync::atomic::Ordering;

/// The column families a store marks once they may hold a key, so that a
/// read of a store without any skips looking (see [`Store::may_hold`]).
pub(super) const MARKED: [Cf; 3] = [Cf::RepostDir, Cf::Filters, Cf::ReplyDir];

impl Store {
    /// Whether a view of this store taken before this call may hold a key
    /// of `cf` (a commit marks before it writes, so take the view first):
    /// `false` only for the directories of live reposts and of replies
    /// and the filters, when the column family was empty at the open and no commit has
    /// written to it since; always `true` on a secondary, whose data
    /// changes at each catch-up without a commit here.
    pub fn may_hold(&self, cf: Cf) -> bool {
        let Some(i) = MARKED.iter().position(|&c| c == cf) else {
            return true;
        };
        self.follow.is_some() || self.marked[i].load(Ordering::SeqCst)
    }

    /// Marks each of [`MARKED`] that holds a key (once, at the open).
    pub(super) fn mark_held(&self) -> Result<(), StoreError> {
        for (i, &cf) in MARKED.iter().enumerate() {
            let mut it = self.db.raw_iterator_cf(self.cf(cf));
            it.seek_to_first();
            if it.valid() {
                self.marked[i].store(true, Ordering::SeqCst);
            }
            it.status().map_err(|e| self.rocks(e))?;
        }
        Ok(())
    }
}

impl Snapshot<'_> {
    /// Whether this view may hold a key of `cf` ([`Store::may_hold`]).
    pub fn may_hold(&self, cf: Cf) -> bool {
        self.store.may_hold(cf)
    }

    /// [`crate::core::kv::Kv::held_parents`]: the answers kept beside the
    /// store (`state/replies.rs`); none on a secondary.
    pub(super) fn held_parents(&self, posts: &[PostRef]) -> Vec<Option<Option<UserId>>> {
        match self.replies_epoch {
            Some(_) => self.store.replies.get(posts),
            None => vec![None; posts.len()],
        }
    }

    /// [`crate::core::kv::Kv::keep_parents`], at the view's epoch.
    pub(super) fn keep_parents(&self, answers: &[(PostRef, Option<UserId>)]) {
        if let Some(epoch) = self.replies_epoch {
            self.store.replies.keep(epoch, answers);
        }
    }
}
