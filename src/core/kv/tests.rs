//! The overlay's property tests.

use super::*;
use proptest::prelude::*;

proptest! {
    // Proves a batch's scan equals the scan of the state after the batch is applied.
    #[test]
    fn overlay_scan_matches_applied(
        base in proptest::collection::btree_map(0u8..32, any::<u8>(), 0..20),
        ops in proptest::collection::vec((0u8..32, proptest::option::of(any::<u8>())), 0..20),
        lo in 0u8..33, hi in proptest::option::of(0u8..33),
    ) {
        let mut kv = MemKv::default();
        let mut seed = Writes::default();
        for (k, v) in &base { seed.0[Cf::Inbox.index()].insert(Key::from(&[*k][..]), Some(vec![*v])); }
        kv.apply(seed);
        let mut txn = Txn::new(&kv);
        for (k, v) in &ops {
            match v { Some(v) => txn.put(Cf::Inbox, vec![*k], vec![*v]), None => txn.delete(Cf::Inbox, vec![*k]) }
        }
        let merged: Vec<Entry> = txn.scan(Cf::Inbox, &[lo], hi.map(|h| [h]).as_ref().map(|h| &h[..])).map(Result::unwrap).collect();
        let mut after = kv.clone();
        let mut replay = Txn::new(&kv);
        for (k, v) in &ops {
            match v { Some(v) => replay.put(Cf::Inbox, vec![*k], vec![*v]), None => replay.delete(Cf::Inbox, vec![*k]) }
        }
        after.apply(replay.into_writes());
        for k in 0u8..32 {
            let want = after.get(Cf::Inbox, &[k]).unwrap();
            prop_assert_eq!(txn.get(Cf::Inbox, &[k]).unwrap(), want.clone());
            let in_range = k >= lo && hi.is_none_or(|hi| k < hi);
            let found = merged.iter().find(|(mk, _)| mk == &vec![k]).map(|(_, v)| v.clone());
            prop_assert_eq!(found, if in_range { want } else { None });
        }
        prop_assert!(merged.windows(2).all(|w| w[0].0 < w[1].0));
        // The lent keys are the scan's keys, also when the caller stops early.
        let keys: Vec<Vec<u8>> = merged.iter().map(|(k, _)| k.clone()).collect();
        for stop in 0..=keys.len() {
            let mut lent = Vec::new();
            txn.for_each_key(Cf::Inbox, &[lo], hi.map(|h| [h]).as_ref().map(|h| &h[..]), &mut |k| {
                lent.push(k.to_vec());
                lent.len() < stop
            }).unwrap();
            prop_assert_eq!(&lent[..], &keys[..stop.max(1).min(keys.len())]);
        }
    }

    // Proves decoded user records staged in a batch read, scan and commit exactly as the encoded writes they stand for, mixed with raw writes of the same keys.
    #[test]
    fn staged_users_match_encoded_writes(
        base in proptest::collection::btree_map(0u64..8, (any::<u64>(), any::<u64>()), 0..8),
        ops in proptest::collection::vec((0u64..8, 0u8..3, any::<u64>(), any::<u64>()), 0..24),
        lo in 0u64..9, hi in proptest::option::of(0u64..9),
    ) {
        let val = |a: u64, b: u64| UserVal { followers: a, inbox_len: b, ..UserVal::default() };
        let key = |u: u64| keys::key([u]);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> =
            base.iter().map(|(u, (a, b))| (key(*u), val(*a, *b).encode())).collect();
        let mut kv = MemKv::default();
        for (k, v) in &model {
            kv.maps[Cf::Users.index()].insert(k.clone(), v.clone());
        }
        let mut txn = Txn::new(&kv);
        for (u, op, a, b) in &ops {
            match op {
                0 => { txn.put_user(UserId(*u), val(*a, *b)); model.insert(key(*u), val(*a, *b).encode()); }
                1 => { txn.put(Cf::Users, key(*u), val(*b, *a).encode()); model.insert(key(*u), val(*b, *a).encode()); }
                _ => { txn.delete(Cf::Users, key(*u)); model.remove(&key(*u)); }
            }
        }
        for u in 0u64..8 {
            let want = model.get(&key(u)).cloned();
            prop_assert_eq!(txn.get(Cf::Users, &key(u)).unwrap(), want.clone());
            prop_assert_eq!(txn.contains(Cf::Users, &key(u)).unwrap(), want.is_some());
            let decoded = want.as_deref().map_or(Some(UserVal::default()), UserVal::decode);
            prop_assert_eq!(Some(txn.user(UserId(u)).unwrap()), decoded);
        }
        let (lo, hi) = (key(lo), hi.map(key));
        let scanned: Vec<Entry> = txn.scan(Cf::Users, &lo, hi.as_deref()).map(Result::unwrap).collect();
        let expected: Vec<Entry> = model
            .iter()
            .filter(|(k, _)| **k >= lo && hi.as_ref().is_none_or(|hi| *k < hi))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        prop_assert_eq!(scanned, expected);
        let mut after = kv.clone();
        after.apply(txn.into_writes());
        prop_assert_eq!(&after.maps[Cf::Users.index()], &model);
    }
}

// Proves a key or value shorter than its layout is a corrupt-record error (the runner stops with it) where scans decode it, never a panic: an inbox entry, a pulled author's marker, an outbox entry and a recent follower each cut short.
#[test]
fn short_keys_are_corrupt_records_not_panics() {
    use crate::views;
    let user = UserId(7);
    let short = |prefix: Vec<u8>| {
        let mut k = prefix;
        k.extend_from_slice(&[1, 2, 3]);
        k
    };
    let empty = MemKv::default();
    let mut txn = Txn::new(&empty);
    for cf in [Cf::Inbox, Cf::Pulls, Cf::Outbox, Cf::RecentFollowers] {
        txn.put(cf, short(keys::key([user.0])), Vec::new());
    }
    let mut kv = MemKv::default();
    kv.apply(txn.into_writes());
    let corrupt = |e: KvError, cf: Cf| {
        assert!(
            matches!(&e, KvError::Corrupt { cf: c, .. } if *c == cf.name()),
            "{e}"
        );
        assert_eq!(e.disposition(), crate::Disposition::Stop);
    };
    corrupt(
        views::inbox(&kv, user, None).next().unwrap().unwrap_err(),
        Cf::Inbox,
    );
    corrupt(
        views::for_each_inbox(&kv, user, None, |_| true).unwrap_err(),
        Cf::Inbox,
    );
    corrupt(
        views::pulls(&kv, user).next().unwrap().unwrap_err(),
        Cf::Pulls,
    );
    corrupt(
        views::outbox(&kv, user, None).next().unwrap().unwrap_err(),
        Cf::Outbox,
    );
    corrupt(
        views::recent_followers(&kv, user)
            .next()
            .unwrap()
            .unwrap_err(),
        Cf::RecentFollowers,
    );
    assert_eq!(keys::be(&[0; 12], 4), Some(0));
    assert_eq!(keys::be(&[0; 12], 5), None);
    assert_eq!(keys::be(&[0; 12], usize::MAX), None);
}
