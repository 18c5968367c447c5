//! Reposts on one partition's state: values round-trip, registrations count.

use super::*;
use crate::effect::Applied;
use crate::kv::MemKv;

// Proves a repost record and a user record with reposts round-trip, and that a user record written before reposts existed reads as none.
#[test]
fn repost_values_round_trip() {
    let rv = RepostVal {
        ts: Ts(5),
        of: (UserId(u64::MAX), PostId(7)),
        root: Some(((UserId(3), PostId(4)), Ts(2))),
        state: RepostState::Live,
        deleted: true,
        by: Some(crate::position::Version(9)),
    };
    assert_eq!(
        PostVal::decode(&PostVal::Repost(rv).encode()),
        Some(PostVal::Repost(rv))
    );
    let pending = RepostVal {
        root: None,
        state: RepostState::Pending,
        deleted: false,
        ..rv
    };
    assert_eq!(
        PostVal::decode(&PostVal::Repost(pending).encode()),
        Some(PostVal::Repost(pending))
    );
    let u = keys::UserVal {
        reposts: 9,
        posts: 2,
        ..keys::UserVal::default()
    };
    let bytes = u.encode();
    assert_eq!(keys::UserVal::decode(&bytes), Some(u));
    let before = &bytes[..bytes.len() - 8];
    assert_eq!(
        keys::UserVal::decode(before),
        Some(keys::UserVal { reposts: 0, ..u })
    );
}

// Proves registrations with a post are counted once each, and removed once.
#[test]
fn registrations_are_counted_once() {
    let kv = MemKv::default();
    let mut t = Txn::new(&kv);
    let target = (UserId(1), PostId(2));
    let r = |n: u64| Repost {
        reposter: UserId(n),
        repost: PostId(n),
        ts: Ts(n),
        version: Version(n),
    };
    for n in [3, 4, 3] {
        register(&mut t, target, &r(n), 1).unwrap();
    }
    assert_eq!(count(&t, target).unwrap(), 2);
    assert_eq!(registered(&t, target).unwrap().len(), 2);
    assert!(unregister(&mut t, target, UserId(3), PostId(3)).unwrap());
    assert!(!unregister(&mut t, target, UserId(3), PostId(3)).unwrap());
    assert_eq!(count(&t, target).unwrap(), 1);
}

// Proves the directory counts each live repost of an original once however often its message is redelivered, and that the count and the scan agree as reposts come and go (none left: no count key).
#[test]
fn the_directory_counts_live_reposts_once() {
    let kv = MemKv::default();
    let mut t = Txn::new(&kv);
    let root = ((UserId(1), PostId(2)), Ts(10));
    let agree = |t: &Txn<'_, MemKv>, n: u64| {
        assert_eq!(dir_count(t, root.0).unwrap(), n);
        assert_eq!(reposts_of(t, root.0).unwrap().len() as u64, n);
    };
    for (reposter, live) in [(3, true), (3, true), (4, true), (3, false), (3, false)] {
        let r = (UserId(reposter), PostId(reposter + 100));
        directory(&mut t, r, Ts(20 + reposter), root, live).unwrap();
    }
    agree(&t, 1);
    directory(&mut t, (UserId(4), PostId(104)), Ts(24), root, false).unwrap();
    agree(&t, 0);
    assert!(t
        .get(Cf::RepostDir, &keys::dir_count(root.0))
        .unwrap()
        .is_none());
    assert!(!any_repost(&t).unwrap());
}

// Proves a repost taken back before its "live" answer came withdraws itself from every partition's directory and from its reposter's followers (an earlier owner may have shown it), besides leaving its original.
#[test]
fn a_repost_taken_back_before_its_answer_is_withdrawn_everywhere() {
    let kv = MemKv::default();
    let mut t = Txn::new(&kv);
    let ctx = Ctx {
        partition: Partition(0),
        partitions: 3,
        inbox_cap: 5,
        fanout_chunk: 5,
        pull_threshold: None,
        inactive_after: None,
    };
    let (reposter, follower) = (UserId(1), UserId(2));
    let edge = keys::EdgeVal::followed(Version(1), Ts(1));
    t.set_edge(Cf::Followers, reposter, follower, &edge);
    let mut out = Vec::new();
    let root = (UserId(9), PostId(4));
    let mut applied = Applied::default();
    let s = &mut Step::new(&mut t, &ctx, &mut applied, &mut out);
    event(s, (reposter, PostId(5)), root, (Version(2), Ts(3))).unwrap();
    let rv = match views::post(s.t, reposter, PostId(5)).unwrap() {
        Some(PostVal::Repost(rv)) => rv,
        other => panic!("{other:?}"),
    };
    delete(s, (reposter, PostId(5)), rv).unwrap();
    s.out.clear();
    let r = Repost {
        reposter,
        repost: PostId(5),
        ts: Ts(3),
        version: Version(2),
    };
    answered(s, &r, (root, Ts(2)), true).unwrap();
    let left: Vec<Partition> = out
        .iter()
        .filter(|o| matches!(o.effect, Effect::RepostDir { live: false, .. }))
        .map(|o| o.partition)
        .collect();
    assert_eq!(left, Partition::all(3).collect::<Vec<_>>(), "{out:?}");
    let retracted = out.iter().any(|o| {
        matches!(&o.effect, Effect::Retract { author, post_id, targets, .. }
            if *author == reposter && *post_id == PostId(5) && targets == &vec![follower])
    });
    assert!(retracted, "{out:?}");
    assert!(out
        .iter()
        .any(|o| matches!(o.effect, Effect::Unrepost { .. })));
}
