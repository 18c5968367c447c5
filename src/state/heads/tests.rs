//! Heads against their store: every head equals the store's first rows
//! and record after random commits; landings and repost writes.

use super::*;
use crate::core::event::{PostId, Ts, UserId};
use crate::core::keys;
use crate::core::kv::{Kv, Txn};
use crate::core::Partition;
use crate::state::{BlockCache, Store, StoreOptions};
use proptest::prelude::*;

/// Every inbox row of `user` in `store`, in key order.
fn inbox(store: &Store, user: u64) -> Vec<TimelineKey> {
    inbox_valued(store, user)
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

/// Every inbox row of `user` in `store` with what its value says (the
/// author its post replies to), in key order.
fn inbox_valued(store: &Store, user: u64) -> Vec<(TimelineKey, Option<UserId>)> {
    let prefix = keys::key([user]);
    store
        .scan_prefix_from(Cf::Inbox, &prefix, &prefix)
        .map(|r| {
            let (k, v) = r.unwrap();
            (
                TimelineKey::decode(&k[8..]).unwrap(),
                keys::inbox_parent(&v).unwrap(),
            )
        })
        .collect()
}

fn row(ts: u8) -> TimelineKey {
    TimelineKey {
        ts: Ts(u64::from(ts)),
        post_id: PostId(u64::from(ts) + 1),
        author: UserId(9),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    // Proves every head equals its user's first inbox rows, what their values say of replies, and the user record in the store after each commit (puts, deletes, pushed-out rows, re-reads between commits).
    #[test]
    fn heads_equal_the_store(
        batches in proptest::collection::vec(
            (
                proptest::collection::vec((0u64..3, 0u8..80, proptest::option::of(proptest::option::of(1u64..4))), 0..40),
                proptest::option::of((0u64..3, 0u64..5)),
                0u64..3,
                1usize..30,
            ),
            1..14,
        ),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let opts = StoreOptions { sync: false, ..StoreOptions::default() };
        let store = Store::open(tmp.path(), Partition(0), 1, &BlockCache::new(1 << 20), &opts).unwrap();
        for (rows, record, reread, take) in batches {
            // A head read from the store, as a page read keeps it.
            let epoch = store.heads().epoch().unwrap();
            let all = inbox_valued(&store, reread);
            let u = crate::core::views::user(&store, UserId(reread)).unwrap();
            let head = Head::valued(all.iter().take(take).copied().collect(), take >= all.len(), u);
            prop_assert!(store.heads().keep(epoch, reread, head, true));
            let mut txn = Txn::new(&store);
            // A put with a value: empty, or a parent author.
            for (user, ts, put) in rows {
                let k = keys::inbox(UserId(user), &row(ts));
                match put {
                    Some(parent) => txn.put(Cf::Inbox, k, keys::inbox_value(parent.map(UserId))),
                    None => txn.delete(Cf::Inbox, k),
                }
            }
            if let Some((user, posts)) = record {
                let val = UserVal { posts, ..UserVal::default() };
                txn.put(Cf::Users, keys::key([user]), val.encode());
            }
            store.commit(&txn.into_writes(), |_| {}).unwrap();
            for user in 0..3 {
                let Some(head) = store.heads().read(user, Head::clone) else { continue };
                let all = inbox(&store, user);
                let rows = &head.inbox.rows;
                prop_assert!(rows.len() <= HEAD_ROWS);
                prop_assert_eq!(&rows[..], &all[..rows.len().min(all.len())]);
                if head.inbox.all {
                    prop_assert_eq!(rows, &all);
                }
                prop_assert!(head.inbox.parent_known());
                for (k, parent) in inbox_valued(&store, user).into_iter().take(rows.len()) {
                    prop_assert_eq!(head.inbox.parent(&k), Some(parent));
                }
                prop_assert_eq!(head.user, crate::core::views::user(&store, UserId(user)).unwrap());
            }
        }
    }
}

/// A head read before a commit landed is refused; one read after is
/// kept; raw writes drop them all, a first repost none.
#[test]
fn a_head_read_across_a_landing_is_refused() {
    let heads = Heads::new(1 << 20);
    let head = || Head::new(vec![row(1)], true, UserVal::default());
    let before = heads.epoch().unwrap();
    let writes = Writes::default();
    let landing = heads.landing(&writes, false);
    assert_eq!(heads.epoch(), None, "nothing read while landing is kept");
    assert!(
        !heads.keep(before, 1, head(), true),
        "refused while landing"
    );
    landing.close(true);
    assert!(
        !heads.keep(before, 1, head(), true),
        "read before it landed"
    );
    assert!(heads.keep(heads.epoch().unwrap(), 1, head(), true));
    let landing = heads.landing(&writes, true);
    landing.close(true);
    assert_eq!(heads.held().0, 0, "raw writes drop every head");
    assert!(heads.keep(heads.epoch().unwrap(), 1, head(), true));
    let mem = crate::core::kv::MemKv::default();
    let mut repost = crate::core::kv::Txn::new(&mem);
    repost.put(Cf::RepostDir, vec![1], vec![]);
    let repost = repost.into_writes();
    heads.landing(&repost, false).close(true);
    assert_eq!(heads.held().0, 1, "a repost keeps the inbox heads");
}

/// A store of one partition at `path`, written without syncs.
pub(super) fn scratch(path: &std::path::Path) -> Store {
    let opts = StoreOptions {
        sync: false,
        ..StoreOptions::default()
    };
    Store::open(path, Partition(0), 1, &BlockCache::new(1 << 20), &opts).unwrap()
}

/// `store` once the background read after an open is done with it.
fn warmed(store: Store) -> std::sync::Arc<Store> {
    let store = std::sync::Arc::new(store);
    let warming = warm::in_background(std::slice::from_ref(&store)).unwrap();
    while !warming.is_done() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    store
}

/// Every source of `user` in `store`, with its value, as a head holds it.
fn sources(store: &Store, user: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    store
        .scan_prefix(Cf::InboxReposts, &keys::key([user]))
        .map(|r| r.unwrap())
        .collect()
}

// Proves the background read after an open gives each whole reader's head their sources exactly as stored (none, a few, the most a head holds; none to a reader with more than a head holds) and, with reposts in the partition, their live followees.
#[test]
fn heads_read_after_the_open_hold_the_readers_sources() {
    let tmp = tempfile::tempdir().unwrap();
    let store = scratch(tmp.path());
    let most = view::SOURCES_MOST as u64;
    // Users 1 to 4 have 0, 3, the most and one more than the most.
    let counts = [(1u64, 0u64), (2, 3), (3, most), (4, most + 1)];
    let mut txn = Txn::new(&store);
    for (user, n) in counts {
        let u = UserVal {
            inbox_len: 1,
            ..UserVal::default()
        };
        txn.put(Cf::Users, keys::key([user]), u.encode());
        txn.put(Cf::Inbox, keys::inbox(UserId(user), &row(200)), Vec::new());
        for i in 0..n {
            let app = TimelineKey {
                ts: Ts(1000 + i),
                post_id: PostId(i),
                author: UserId(7),
            };
            let root = (UserId(5), PostId(i % 5));
            txn.put(
                Cf::InboxReposts,
                keys::inbox_repost(UserId(user), root, &app),
                keys::key([i % 5]),
            );
        }
    }
    txn.put(
        Cf::RepostDir,
        keys::dir_count((UserId(5), PostId(0))),
        keys::key([1]),
    );
    // User 2 follows 6 and 8, and no longer 7.
    for (other, live) in [(6u64, true), (7, false), (8, true)] {
        let e = match live {
            true => crate::core::keys::EdgeVal::followed(crate::core::Version(1), Ts(1)),
            false => crate::core::keys::EdgeVal::unfollowed(crate::core::Version(2), Ts(2)),
        };
        txn.put(Cf::Followees, keys::key([2, other]), e.encode());
    }
    store.commit(&txn.into_writes(), |_| {}).unwrap();
    let store = warmed(store);
    let epoch = store.heads().epoch().unwrap();
    let followees = store.heads().followees(epoch, 2).unwrap().1;
    assert_eq!(followees, vec![UserId(6), UserId(8)]);
    assert_eq!(store.heads().followees(epoch, 1).unwrap().1, vec![]);
    for (user, n) in counts {
        let held = store.heads().read(user, |h| h.sources.clone()).unwrap();
        let want = sources(&store, user);
        assert_eq!(want.len() as u64, n);
        match held {
            Some(view::Sources(list)) => {
                assert!(n <= most, "user {user}");
                let got: Vec<(Vec<u8>, Vec<u8>)> = (list.iter())
                    .map(|s| {
                        (
                            [&keys::key([user])[..], &s[..40]].concat(),
                            s[40..].to_vec(),
                        )
                    })
                    .collect();
                assert_eq!(got, want, "user {user}");
            }
            None => assert!(n > most, "user {user} has {n} sources and none held"),
        }
    }
}

// Proves the background read after an open keeps each sleeping reader's record and live followees as stored (none, some, unfollowed ones left out; none for more than a head holds) and each followed author's newest outbox keys (all of a short outbox, the first of a long one).
#[test]
fn heads_read_after_the_open_hold_sleepers_followees() {
    use crate::core::keys::EdgeVal;
    use crate::core::Version;
    let tmp = tempfile::tempdir().unwrap();
    let store = scratch(tmp.path());
    let most = followees::FOLLOWEES_MOST as u64;
    // Sleepers 1 to 3 follow 0, 5 (and unfollowed 2) and one more than the most.
    let counts = [(1u64, 0u64), (2, 5), (3, most + 1)];
    let mut txn = Txn::new(&store);
    for (user, n) in counts {
        let u = UserVal {
            asleep: true,
            marks: 1,
            followees: n,
            ..UserVal::default()
        };
        txn.put(Cf::Users, keys::key([user]), u.encode());
        for other in 0..n {
            let e = EdgeVal::followed(Version(1), Ts(1));
            txn.put(Cf::Followees, keys::key([user, 100 + other]), e.encode());
        }
        for other in [50, 51].into_iter().filter(|_| n == 5) {
            let e = EdgeVal::unfollowed(Version(2), Ts(2));
            txn.put(Cf::Followees, keys::key([user, other]), e.encode());
        }
    }
    // Followed authors 100 and 101 with a short and a long outbox.
    let outboxes = [(100u64, 3u64), (101, HEAD_ROWS as u64 + 2)];
    for (author, n) in outboxes {
        let u = UserVal {
            followers: 1,
            posts: n,
            ..UserVal::default()
        };
        txn.put(Cf::Users, keys::key([author]), u.encode());
        for p in 0..n {
            txn.put(
                Cf::Outbox,
                keys::outbox(UserId(author), Ts(p), PostId(p)),
                Vec::new(),
            );
        }
    }
    store.commit(&txn.into_writes(), |_| {}).unwrap();
    let store = warmed(store);
    let epoch = store.heads().epoch().unwrap();
    for (author, n) in outboxes {
        let held = store.heads().outbox(epoch, author, Rows::clone).unwrap();
        let want: Vec<TimelineKey> = (0..n)
            .rev()
            .map(|p| TimelineKey {
                ts: Ts(p),
                post_id: PostId(p),
                author: UserId(author),
            })
            .collect();
        let first = want.len().min(HEAD_ROWS);
        assert_eq!(
            held,
            Rows::new(want[..first].to_vec(), n as usize <= HEAD_ROWS)
        );
    }
    for (user, n) in counts {
        let record = crate::core::views::user(&*store, UserId(user)).unwrap();
        assert_eq!(store.heads().read(user, |h| h.user), Some(record));
        let held = store.heads().followees(epoch, user).map(|(_, f)| f);
        let want: Vec<UserId> = (0..n).map(|o| UserId(100 + o)).collect();
        match n <= most {
            true => assert_eq!(held, Some(want), "user {user}"),
            false => assert_eq!(held, None, "user {user}"),
        }
    }
}
