//! A reader's live followees, kept in the reader's head and changed by the
//! commits that write the reader's followee edges: the pull path reads a
//! sleeping reader's page from them and the authors' outbox heads, with
//! no scan of the edges.
//!
//! Held by the inbox heads' rules ([`super`]):
//! - they enter only as read whole from a snapshot taken at the epoch
//!   [`Heads::keep_followees`] is given, into a head held then, refused
//!   when a commit landed since;
//! - they are read only for a snapshot taken at the epoch the heads still
//!   hold ([`Heads::followees`], under the shard's lock);
//! - a commit applies each write of the reader's followee edges to them
//!   (a live edge is a followee, anything else is not); an edge key or
//!   value of another layout drops them, and a reader who comes to follow
//!   more than [`FOLLOWEES_MOST`] loses them. A failed write or raw
//!   operations drop the whole head.

use super::{Head, Heads, Shard};
use crate::core::event::UserId;
use crate::core::keys::{EdgeVal, UserVal};
use std::sync::atomic::Ordering;

/// Followees a head holds at most: a reader who follows more reads them
/// from the store.
pub const FOLLOWEES_MOST: usize = 1024;

/// Bytes counted for `followees` (held or not).
pub(super) fn bytes(followees: &Option<Vec<UserId>>) -> usize {
    followees
        .as_ref()
        .map_or(0, |f| f.capacity() * std::mem::size_of::<UserId>())
}

impl Heads {
    /// `user`'s record and live followees (ascending ids) as their head
    /// holds them, when it holds both and no commit landed since `epoch`
    /// (the epoch a snapshot was taken at: [`crate::state::Snapshot::heads`]).
    pub fn followees(&self, epoch: u64, user: u64) -> Option<(UserVal, Vec<UserId>)> {
        let mut shard = self.at_epoch(epoch, user)?;
        let head = shard.heads.get_mut(&user)?;
        head.read = true;
        Some((head.user, head.followees.clone()?))
    }

    /// Adds `followees`, `user`'s live followees read whole (ascending)
    /// from a snapshot taken at `epoch`, to `user`'s head: nothing when the
    /// head is gone or they are more than [`FOLLOWEES_MOST`]; refused
    /// (`false`) when a commit landed since or the budget is spent.
    pub fn keep_followees(&self, epoch: u64, user: u64, followees: Vec<UserId>) -> bool {
        if followees.len() > FOLLOWEES_MOST {
            return false;
        }
        let followees = Some(followees);
        let size = bytes(&followees);
        let Some(mut shard) = self.room(epoch, user, (size, |_: &Shard| 0), false) else {
            return false;
        };
        // Counted by `room`: no head is added.
        self.held.fetch_sub(1, Ordering::SeqCst);
        let shard = &mut *shard;
        if let Some(head) = shard.heads.get_mut(&user) {
            shard.bytes -= head.bytes();
            head.followees = followees;
            shard.bytes += head.bytes();
        }
        true
    }
}

/// Applies a committed write of `head`'s followee edge `k` (`v`: its
/// value, `None`: deleted) to the followees it holds.
pub(super) fn apply(head: &mut Head, k: &[u8], v: Option<&[u8]>) {
    let Some(held) = head.followees.as_mut() else {
        return;
    };
    let other = k.get(8..).and_then(|o| <[u8; 8]>::try_from(o).ok());
    let live = match v {
        None => Some(false),
        Some(v) => EdgeVal::decode(v).map(|e| e.live),
    };
    let (Some(other), Some(live)) = (other, live) else {
        head.followees = None;
        return;
    };
    let other = UserId(u64::from_be_bytes(other));
    match (held.binary_search(&other), live) {
        (Ok(_), true) | (Err(_), false) => {}
        (Ok(i), false) => {
            held.remove(i);
        }
        (Err(_), true) if held.len() == FOLLOWEES_MOST => head.followees = None,
        (Err(i), true) => held.insert(i, other),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::scratch;
    use super::*;
    use crate::core::event::Ts;
    use crate::core::keys;
    use crate::core::kv::{Cf, Txn};
    use crate::core::views::live_edges;
    use crate::core::Version;
    use crate::state::Store;
    use proptest::prelude::*;

    /// `user`'s live followees in `store`, ascending.
    fn stored(store: &Store, user: u64) -> Vec<UserId> {
        live_edges(store, Cf::Followees, UserId(user), None)
            .map(|r| r.unwrap().0)
            .collect()
    }

    /// A sleeper's head (no rows) read from `store` with their followees,
    /// as the pull path keeps it.
    fn keep(store: &Store, user: u64) -> bool {
        let epoch = store.heads().epoch().unwrap();
        let u = crate::core::views::user(store, UserId(user)).unwrap();
        let head = Head::new(Vec::new(), false, u);
        assert!(store.heads().keep(epoch, user, head, true));
        store
            .heads()
            .keep_followees(epoch, user, stored(store, user))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        // Proves the followees a head holds equal the store's live followee edges after each commit (follows, unfollows, deleted edges, redelivered ones, re-reads between commits).
        #[test]
        fn followees_held_equal_the_store(
            batches in proptest::collection::vec(
                (proptest::collection::vec((0u64..3, 0u64..12, 0u8..3), 0..30), 0u64..3),
                1..12,
            ),
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let store = scratch(tmp.path());
            for (edges, reread) in batches {
                prop_assert!(keep(&store, reread));
                let mut txn = Txn::new(&store);
                for (owner, other, what) in edges {
                    let k = keys::key([owner, other]);
                    match what {
                        0 => txn.put(Cf::Followees, k, EdgeVal::followed(Version(1), Ts(1)).encode()),
                        1 => txn.put(Cf::Followees, k, EdgeVal::unfollowed(Version(2), Ts(2)).encode()),
                        _ => txn.delete(Cf::Followees, k),
                    }
                }
                store.commit(&txn.into_writes(), |_| {}).unwrap();
                for user in 0..3 {
                    let epoch = store.heads().epoch().unwrap();
                    if let Some((_, held)) = store.heads().followees(epoch, user) {
                        prop_assert_eq!(held, stored(&store, user), "user {}", user);
                    }
                }
            }
        }
    }

    // Proves a head's followees are refused when read before a commit landed, and dropped when a follow takes them past the most a head holds.
    #[test]
    fn followees_past_a_landing_or_the_most_are_not_held() {
        let tmp = tempfile::tempdir().unwrap();
        let store = scratch(tmp.path());
        let follow = |txn: &mut Txn<'_, Store>, other: u64| {
            let live = EdgeVal::followed(Version(1), Ts(1)).encode();
            txn.put(Cf::Followees, keys::key([1, other]), live);
        };
        let mut txn = Txn::new(&store);
        for other in 0..FOLLOWEES_MOST as u64 {
            follow(&mut txn, other + 10);
        }
        store.commit(&txn.into_writes(), |_| {}).unwrap();
        // Read, then a commit lands before they are kept: refused.
        let epoch = store.heads().epoch().unwrap();
        let u = crate::core::views::user(&store, UserId(1)).unwrap();
        assert!(store
            .heads()
            .keep(epoch, 1, Head::new(Vec::new(), false, u), true));
        let read = stored(&store, 1);
        let mut txn = Txn::new(&store);
        follow(&mut txn, 5);
        txn.delete(Cf::Followees, keys::key([1, 10]));
        store.commit(&txn.into_writes(), |_| {}).unwrap();
        assert!(!store.heads().keep_followees(epoch, 1, read));
        // Read again: held, at the most a head holds.
        assert!(keep(&store, 1));
        let epoch = store.heads().epoch().unwrap();
        let held = store.heads().followees(epoch, 1).unwrap().1;
        assert_eq!(held.len(), FOLLOWEES_MOST);
        assert_eq!(held, stored(&store, 1));
        // One more: not held, the head kept.
        let mut txn = Txn::new(&store);
        follow(&mut txn, 6);
        store.commit(&txn.into_writes(), |_| {}).unwrap();
        let epoch = store.heads().epoch().unwrap();
        assert_eq!(store.heads().followees(epoch, 1), None);
        assert!(store.heads().read(1, |_| ()).is_some());
    }
}
