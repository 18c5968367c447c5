//! Tests of a reader's view through their head.

use super::*;
use crate::core::event::{PostId, Ts};
use crate::core::kv::Txn;
use crate::core::Partition;
use crate::state::{BlockCache, Store, StoreOptions};
use proptest::prelude::*;

fn row(ts: u8) -> TimelineKey {
    TimelineKey {
        ts: Ts(u64::from(ts)),
        post_id: PostId(u64::from(ts) + 1),
        author: UserId(9),
    }
}

/// A key of `user`'s inbox range: its start, a row's key, or its end.
fn bound(user: u64, at: Option<u8>) -> Vec<u8> {
    match at {
        Some(ts) => keys::inbox(UserId(user), &row(ts)),
        None => keys::key([user]),
    }
}

type Read = Result<Vec<(Vec<u8>, Vec<u8>)>, KvError>;

fn scan(kv: &impl Kv, lo: &[u8], hi: Option<&[u8]>) -> Read {
    kv.scan(Cf::Inbox, lo, hi).collect()
}

fn in_ranges(kv: &impl Kv, ranges: &[(Vec<u8>, Vec<u8>)]) -> Read {
    let mut out = Vec::new();
    kv.for_each_in_ranges(Cf::Inbox, ranges, &mut |_, k, v| {
        out.push((k.to_vec(), v.to_vec()));
        true
    })?;
    Ok(out)
}

/// Up to `most` of the sources walked in `ranges`.
fn sources(kv: &impl Kv, ranges: &[(Vec<u8>, Vec<u8>)], most: usize) -> Read {
    let mut out = Vec::new();
    kv.for_each_in_ranges(Cf::InboxReposts, ranges, &mut |_, k, v| {
        out.push((k.to_vec(), v.to_vec()));
        out.len() < most
    })?;
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    // Proves a snapshot read through a reader's head answers every inbox scan (the rows' values, which name a reply's parent, included), range walk, walk of the sources (whole or cut short) and user record read exactly as the snapshot alone, and that what it then says of a row's post for the replies rule is the row's value, with heads kept from a page's reads (a first page's rows or the whole inbox, the sources when read whole) and changed by later commits.
    #[test]
    fn a_view_through_a_head_reads_as_the_snapshot(
        batches in proptest::collection::vec(
            (
                proptest::collection::vec((0u64..3, 0u8..80, proptest::option::of(proptest::option::of(1u64..4)), any::<bool>()), 0..40),
                proptest::option::of((0u64..3, 0u64..5)),
                0u64..3,
                1usize..60,
                proptest::collection::vec(
                    (0u64..3, proptest::option::of(0u8..82), proptest::option::of(0u8..82)),
                    1..6,
                ),
            ),
            1..12,
        ),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let opts = StoreOptions { sync: false, ..StoreOptions::default() };
        let store = Store::open(tmp.path(), Partition(0), 1, &BlockCache::new(1 << 20), &opts).unwrap();
        for (rows, record, reader, take, reads) in batches {
            // A head kept from a page's reads: the record and the
            // inbox's first `take` rows read from the top.
            let snap = store.snapshot();
            let view = HeadView::new(&snap, UserId(reader), false);
            crate::core::views::user(&view, UserId(reader)).unwrap();
            let _ = crate::core::views::inbox(&view, UserId(reader), None).take(take).count();
            let whole = [(keys::key([reader]), keys::key([reader]))];
            let _ = sources(&view, &whole, take).unwrap();
            view.keep(|| true);
            drop(snap);
            let mut txn = Txn::new(&store);
            for (user, ts, put, source) in rows {
                let k = match source {
                    false => (Cf::Inbox, keys::inbox(UserId(user), &row(ts))),
                    true => (Cf::InboxReposts, keys::inbox_repost(UserId(user), (UserId(5), PostId(u64::from(ts % 7))), &row(ts))),
                };
                // A source is valued its original's time, an inbox row
                // with its parent author when it is a reply.
                match put {
                    Some(_) if source => txn.put(k.0, k.1, keys::key([u64::from(ts) + 1])),
                    Some(parent) => txn.put(k.0, k.1, keys::inbox_value(parent.map(UserId))),
                    None => txn.delete(k.0, k.1),
                }
            }
            if let Some((user, posts)) = record {
                let val = UserVal { posts, ..UserVal::default() };
                txn.put(Cf::Users, keys::key([user]), val.encode());
            }
            store.commit(&txn.into_writes(), |_| {}).unwrap();
            let snap = store.snapshot();
            for (user, lo, hi) in reads {
                let view = HeadView::new(&snap, UserId(user), true);
                let user_key = keys::key([user]);
                prop_assert_eq!(view.get(Cf::Users, &user_key).unwrap(), snap.get(Cf::Users, &user_key).unwrap());
                let lo = bound(user, lo);
                let end = keys::prefix_end(&keys::key([user]));
                let hi = hi.map(|h| bound(user, Some(h))).or(end);
                prop_assert_eq!(scan(&view, &lo, hi.as_deref()).unwrap(), scan(&snap, &lo, hi.as_deref()).unwrap());
                let ranges = [(lo.clone(), keys::key([user]))];
                prop_assert_eq!(in_ranges(&view, &ranges).unwrap(), in_ranges(&snap, &ranges).unwrap());
                let whole = [(keys::key([user]), keys::key([user]))];
                prop_assert_eq!(sources(&view, &whole, take).unwrap(), sources(&snap, &whole, take).unwrap());
                prop_assert_eq!(sources(&view, &whole, usize::MAX).unwrap(), sources(&snap, &whole, usize::MAX).unwrap());
                let end = keys::prefix_end(&keys::key([user]));
                for (k, v) in scan(&snap, &keys::key([user]), end.as_deref()).unwrap() {
                    let r = TimelineKey::decode(&k[8..]).unwrap();
                    let held = view.held_parents(&[(r.author, r.post_id)])[0];
                    prop_assert!(held.is_none() || held == keys::inbox_parent(&v), "{:?} {:?}", r, held);
                }
            }
        }
    }
}

/// A head answers only at its snapshot's epoch: a view of a snapshot
/// taken before a commit reads the store.
#[test]
fn a_view_of_an_older_snapshot_reads_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = crate::state::heads::tests::scratch(tmp.path());
    let snap = store.snapshot();
    let view = HeadView::new(&snap, UserId(1), true);
    let _ = crate::core::views::inbox(&view, UserId(1), None).count();
    crate::core::views::user(&view, UserId(1)).unwrap();
    view.keep(|| true);
    assert!(HeadView::new(&store.snapshot(), UserId(1), true).is_held());
    let old = store.snapshot();
    let mut txn = Txn::new(&store);
    txn.put(Cf::Inbox, keys::inbox(UserId(1), &row(3)), Vec::new());
    store.commit(&txn.into_writes(), |_| {}).unwrap();
    assert!(
        !HeadView::new(&old, UserId(1), true).is_held(),
        "a head of a later state"
    );
    let now = store.snapshot();
    let view = HeadView::new(&now, UserId(1), true);
    assert!(view.is_held(), "the commit changed the head");
    assert_eq!(scan(&view, &bound(1, None), None).unwrap().len(), 1);
}
