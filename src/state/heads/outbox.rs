//! The newest rows of authors' outboxes, kept with the inbox heads and
//! changed by the same commits: the pull path reads a sleeping reader's
//! followees here instead of seeking into each outbox.
//!
//! An outbox head is the first keys of one author's outbox (an original
//! and a repost are appearances alike, so values are not held) in a
//! committed state, with `all` saying whether they are every key. It is
//! exact by the inbox heads' rules ([`super`]):
//! - it enters only as read from a snapshot taken at the heads' epoch
//!   [`Heads::keep_outbox`] is given, refused when a commit landed since;
//! - it is read only for a snapshot taken at the epoch the heads still
//!   hold ([`Heads::outbox`], checked under the shard's lock), so it
//!   answers what that snapshot would read;
//! - a commit applies its outbox writes to it as to an inbox head's rows
//!   (a key pushed past [`super::HEAD_ROWS`] clears `all`); a failed write
//!   or raw operations drop it. A repost does not: keys stay keys.

use super::{rows_bytes, Heads, Rows, Shard};
use crate::core::event::UserId;
use crate::core::keys::TimelineKey;
use crate::core::views::outbox_entry;

/// Bytes counted for an outbox head on top of its rows (map slot, vector).
const OUTBOX_OVERHEAD: usize = 48;

/// One author's newest outbox keys.
pub(super) struct Outbox {
    rows: Rows,
    /// Read since the last sweep.
    pub(super) read: bool,
}

impl Outbox {
    /// Bytes counted for the head.
    pub(super) fn bytes(&self) -> usize {
        OUTBOX_OVERHEAD + rows_bytes(&self.rows)
    }
}

/// The row of outbox key `k` of `author`, as a timeline key.
fn row(author: u64, k: &[u8]) -> Option<TimelineKey> {
    let (ts, post_id) = outbox_entry(k).ok().filter(|_| k.len() == 24)?;
    Some(TimelineKey {
        ts,
        post_id,
        author: UserId(author),
    })
}

impl Heads {
    /// `f` of `author`'s outbox head, when one is held and no commit
    /// landed since `epoch` (the epoch a snapshot was taken at:
    /// [`crate::state::Snapshot::heads`]).
    ///
    /// Checked under the shard's lock: a commit landing after the check
    /// applies itself to the head once the lock is free, after this read.
    pub fn outbox<T>(&self, epoch: u64, author: u64, f: impl FnOnce(&Rows) -> T) -> Option<T> {
        let mut shard = self.at_epoch(epoch, author)?;
        let head = shard.outboxes.get_mut(&author)?;
        head.read = true;
        Some(f(&head.rows))
    }

    /// Keeps `rows`, the first keys of `author`'s outbox read from a
    /// snapshot taken at `epoch`: refused (`false`) when a commit landed
    /// since or is landing, or when the budget is spent (`sweep`: even
    /// after a sweep).
    pub fn keep_outbox(&self, epoch: u64, author: u64, rows: Rows, sweep: bool) -> bool {
        self.insert(epoch, author, Outbox { rows, read: false }, sweep)
    }
}

impl super::InShard for Outbox {
    fn bytes(&self) -> usize {
        Outbox::bytes(self)
    }
    fn map(shard: &Shard) -> &rustc_hash::FxHashMap<u64, Self> {
        &shard.outboxes
    }
    fn map_mut(shard: &mut Shard) -> &mut rustc_hash::FxHashMap<u64, Self> {
        &mut shard.outboxes
    }
}

impl Shard {
    /// Applies a committed write of `author`'s outbox key `k` (`put`: a
    /// put) to the author's head, if one is held; drops a head that can no
    /// longer follow.
    pub(super) fn apply_outbox(&mut self, author: u64, k: &[u8], put: bool) {
        let Some(head) = self.outboxes.get_mut(&author) else {
            return;
        };
        let before = head.bytes();
        // An outbox's rows never know parents: the value is not read.
        let put = put.then_some(&[][..]);
        let kept = row(author, k).is_some_and(|r| head.rows.apply_row(r, put));
        self.bytes = self.bytes + head.bytes() - before;
        if !kept {
            if let Some(head) = self.outboxes.remove(&author) {
                self.bytes -= head.bytes();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::{PostId, Ts};
    use crate::core::keys;
    use crate::core::kv::{Cf, Kv, Txn};
    use crate::core::Partition;
    use crate::state::heads::HEAD_ROWS;
    use crate::state::{BlockCache, Store, StoreOptions};
    use proptest::prelude::*;

    /// Every outbox key of `author` in `store`, in key order, as rows.
    fn outbox(store: &Store, author: u64) -> Vec<TimelineKey> {
        let prefix = keys::key([author]);
        store
            .scan_prefix_from(Cf::Outbox, &prefix, &prefix)
            .map(|r| row(author, &r.unwrap().0).unwrap())
            .collect()
    }

    /// Proves a head kept while a commit lands follows that commit: the
    /// keeper, counted before its check, makes the commit apply its
    /// writes (after the keeper's insert, under the shard's lock) instead
    /// of skipping them as when no head is held.
    #[test]
    fn a_head_kept_while_a_commit_lands_follows_it() {
        let heads = std::sync::Arc::new(Heads::new(1 << 20));
        let key = |ts: u64| TimelineKey {
            ts: Ts(ts),
            post_id: PostId(ts),
            author: UserId(1),
        };
        let epoch = heads.epoch().unwrap();
        let (checked, go) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let keeper = {
            let heads = heads.clone();
            std::thread::spawn(move || {
                // `keep_outbox`, stalled between its check and its insert.
                let rows = Rows::new(vec![key(1)], true);
                let head = Outbox { rows, read: false };
                let size = head.bytes();
                let mut shard = heads.room(epoch, 1, (size, |_: &Shard| 0), true).unwrap();
                checked.0.send(()).unwrap();
                go.1.recv().unwrap();
                shard.outboxes.insert(1, head);
                shard.bytes += size;
            })
        };
        checked.1.recv().unwrap();
        let committer = {
            let heads = heads.clone();
            std::thread::spawn(move || {
                let mem = crate::core::kv::MemKv::default();
                let mut txn = Txn::new(&mem);
                txn.put(
                    Cf::Outbox,
                    keys::outbox(UserId(1), Ts(2), PostId(2)),
                    vec![],
                );
                let writes = txn.into_writes();
                heads.landing(&writes, false).close(true);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        go.0.send(()).unwrap();
        keeper.join().unwrap();
        committer.join().unwrap();
        let now = heads.epoch().unwrap();
        let held = heads.outbox(now, 1, Rows::clone);
        assert_eq!(held.map(|r| r.rows), Some(vec![key(2), key(1)]));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        // Proves every outbox head equals its author's first outbox keys in the store after each commit (puts, deletes, reposts' values, rows pushed out, re-reads between commits), and that one read across a commit is refused.
        #[test]
        fn outbox_heads_equal_the_store(
            batches in proptest::collection::vec(
                (
                    proptest::collection::vec((0u64..3, 0u8..80, any::<bool>(), any::<bool>()), 0..40),
                    0u64..3,
                    1usize..60,
                ),
                1..14,
            ),
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let opts = StoreOptions { sync: false, ..StoreOptions::default() };
            let store = Store::open(tmp.path(), Partition(0), 1, &BlockCache::new(1 << 20), &opts).unwrap();
            for (writes, reread, take) in batches {
                // A head read from a snapshot, as the pull path keeps it.
                let snap = store.snapshot();
                let (heads, epoch) = snap.heads().unwrap();
                let all = outbox(&store, reread);
                let rows = Rows::new(all.iter().take(take).copied().collect(), take >= all.len());
                prop_assert!(heads.keep_outbox(epoch, reread, rows, true));
                let mut txn = Txn::new(&store);
                for (author, ts, put, repost) in writes {
                    let k = keys::outbox(UserId(author), Ts(u64::from(ts)), PostId(u64::from(ts) * 7));
                    match (put, repost) {
                        (true, false) => txn.put(Cf::Outbox, k, Vec::new()),
                        (true, true) => txn.put(Cf::Outbox, k, vec![0; 24]),
                        (false, _) => txn.delete(Cf::Outbox, k),
                    }
                }
                let writes = txn.into_writes();
                let landed = !writes.is_empty();
                store.commit(&writes, |_| {}).unwrap();
                // The snapshot taken before the commit no longer reads heads.
                prop_assert!(!landed || heads.outbox(epoch, reread, |_| ()).is_none());
                let snap = store.snapshot();
                let (heads, epoch) = snap.heads().unwrap();
                for author in 0..3 {
                    let Some(head) = heads.outbox(epoch, author, Rows::clone) else { continue };
                    let all = outbox(&store, author);
                    prop_assert!(head.rows.len() <= HEAD_ROWS);
                    prop_assert_eq!(&head.rows[..], &all[..head.rows.len().min(all.len())]);
                    if head.all {
                        prop_assert_eq!(&head.rows, &all);
                    }
                }
            }
        }
    }
}
