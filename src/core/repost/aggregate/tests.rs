//! Tests of timeline aggregation: a popular post's reposters read
//! through the directory, merged with a reader's followees or whole.

use super::dir::reposts_by;
use super::*;
use crate::keys::{EdgeVal, UserVal};
use crate::kv::{MemKv, Txn};
use crate::position::Version;

/// A partition whose directory lists 400 reposts of post (1, 1), one
/// by each of users 2..=401 at their id's time (and a second one by
/// user 77), and `reader` following `followees`.
fn partition(reader: UserId, followees: &[u64]) -> MemKv {
    let mut kv = MemKv::default();
    let mut t = Txn::new(&kv);
    let root = ((UserId(1), PostId(1)), Ts(1));
    for u in 2..=401u64 {
        super::super::directory(&mut t, (UserId(u), PostId(u)), Ts(u), root, true).unwrap();
    }
    super::super::directory(&mut t, (UserId(77), PostId(9_000)), Ts(9_000), root, true).unwrap();
    for &f in followees {
        let e = EdgeVal::followed(Version(f), Ts(f));
        t.set_edge(Cf::Followees, reader, UserId(f), &e);
    }
    // A reader who woke once: aggregated through the directory, not
    // their own sources (this partition holds no inbox).
    let u = UserVal {
        followees: followees.len() as u64,
        wakes: 1,
        ..UserVal::default()
    };
    t.set_user(reader, &u);
    kv.apply(t.into_writes());
    kv
}

// Proves a popular post's entry lists the same reposting followees, placed at the same appearance, whether its reposts are merged with a few followees or read whole for a reader who follows many.
#[test]
fn reposters_merged_with_followees_equal_a_whole_read() {
    let reader = UserId(500);
    let few = [3, 77, 200, 401, 999];
    let many: Vec<u64> = (2..=401).step_by(3).chain([999]).collect();
    for followees in [&few[..], &many[..]] {
        let kv = partition(reader, followees);
        let followed: Vec<u64> = followees.iter().copied().filter(|&f| f <= 401).collect();
        // Both readers follow user 77, whose second repost is the
        // newest appearance.
        assert!(followed.contains(&77));
        let app = TimelineKey {
            ts: Ts(9_000),
            post_id: PostId(9_000),
            author: UserId(77),
        };
        let mut memo = Memo::default();
        let e = aggregate(&kv, reader, Mode::Newest, app, &mut memo)
            .unwrap()
            .expect("the newest appearance places the entry");
        assert_eq!(e.reposters, followed.len() as u64, "{followees:?}");
        let mut want: Vec<Reposter> = followed
            .iter()
            .map(|&u| {
                let (id, ts) = if u == 77 { (9_000, 9_000) } else { (u, u) };
                Reposter {
                    user: UserId(u),
                    post_id: PostId(id),
                    ts: Ts(ts),
                }
            })
            .collect();
        want.sort_by_key(|r| std::cmp::Reverse(r.ts));
        want.truncate(REPOSTED_BY_MOST);
        assert_eq!(e.reposted_by, want, "{followees:?}");
        assert_eq!(e.key.post_id, PostId(1));
    }
}

// Proves the reposts of each post by a few users, loaded once per page from the directory's by-reposter entries (a user over the load limit, or every user of too many, looked up per post), equal a seek per user for every post.
#[test]
fn reposts_loaded_by_reposter_equal_a_seek_per_user() {
    let mut kv = MemKv::default();
    let mut t = Txn::new(&kv);
    let original = |p: u64| ((UserId(1), PostId(p)), Ts(p));
    let many_posts = by_reposter::LOADED_MOST as u64 + 5;
    // User 10 reposts more posts than a page loads; 11 reposts three of
    // them, one twice; 13 one (asked about among many users only); 12
    // reposts nothing.
    for p in 1..=many_posts {
        let repost = (UserId(10), PostId(1_000 + p));
        super::super::directory(&mut t, repost, Ts(5_000 + p), original(p), true).unwrap();
    }
    for (i, p) in [2u64, 7, 7, 40].into_iter().enumerate() {
        let id = 20_000 + i as u64;
        super::super::directory(&mut t, (UserId(11), PostId(id)), Ts(id), original(p), true)
            .unwrap();
    }
    let other = (UserId(13), PostId(30_000));
    super::super::directory(&mut t, other, Ts(30_000), original(7), true).unwrap();
    kv.apply(t.into_writes());
    // Three users, one of them over the limit; then more users than a
    // page loads, every one looked up per post.
    let few = vec![UserId(10), UserId(11), UserId(12)];
    let most = by_reposter::USERS_LOADED_MOST as u64;
    let many: Vec<UserId> = (10..=11 + most).map(UserId).collect();
    for (users, unloaded) in [(&few, vec![UserId(10)]), (&many, many.clone())] {
        let index = ByReposter::load(&kv, users).unwrap();
        assert_eq!(index.unloaded, unloaded, "{} users", users.len());
        assert_eq!(index.held, [], "nothing held in memory");
        same_reposts(&kv, &index, users, many_posts);
    }
    // The same directory, its entries held in memory: user 10 (over
    // `LOOKUPS_PER_LOAD` reposts) is looked up per post; 11 and 12 loaded.
    let held = Held(&kv);
    let index = ByReposter::load(&held, &few).unwrap();
    assert_eq!(index.held, [UserId(10)]);
    assert_eq!(index.unloaded, []);
    assert!(index.of.values().flatten().any(|u| *u == UserId(11)));
    same_reposts(&held, &index, &few, many_posts);
}

/// Asserts `index`'s reposts of each post up to `last + 1` equal a seek
/// per user of `users`.
fn same_reposts(kv: &impl Kv, index: &ByReposter, users: &[UserId], last: u64) {
    for p in 0..=last + 1 {
        let post = (UserId(1), PostId(p));
        let mut want = Vec::new();
        reposts_by(kv, post, users, &mut want).unwrap();
        let mut got = index.reposts(kv, post).unwrap();
        got.sort();
        want.sort();
        assert_eq!(got, want, "post {p}, {} users", users.len());
    }
}

/// A partition whose directory entries of every reposter are held in
/// memory, as the heads' view holds some (their count read from it).
struct Held<'a>(&'a MemKv);

impl Kv for Held<'_> {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.0.get(cf, key)
    }
    fn scan<'b>(&'b self, cf: Cf, lo: &[u8], hi: Option<&[u8]>) -> crate::kv::Scan<'b> {
        self.0.scan(cf, lo, hi)
    }
    fn held_reposts(&self, reposter: UserId) -> Option<usize> {
        let prefix = keys::dir_by_repost_prefix(reposter);
        Some(self.0.scan_prefix(Cf::RepostDir, &prefix).count())
    }
}
