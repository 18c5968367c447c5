//! Key and value encodings (see `state/README.md` for the byte diagrams).
//!
//! Every key is fixed-width big-endian, and "newest first" components are
//! stored inverted (`!ts`), so each view's order is plain ascending iteration.

use crate::event::{PostId, Ts, UserId};
use crate::partition::Partition;

mod edge;
mod like;
mod post;
pub use edge::EdgeVal;
pub use like::{
    addressed, like_count, like_of, like_of_prefix, liked, liker, likers_of_author, likers_prefix,
    likes_given, marker, mention, mentions_prefix, replier, repliers_of_author, repliers_prefix,
    reply_count, reply_dir, reply_of, reply_of_prefix, reposted,
};
pub use post::{PostRef, PostVal, Posted, RepostState, RepostVal};

/// Reads a big-endian u64 at `at`; `None` when `bytes` ends before
/// `at + 8` (a key or value shorter than its layout: corrupt, which the
/// caller reports with where it read it).
pub fn be(bytes: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_be_bytes(b))
}

/// Concatenates big-endian u64s into a key.
pub fn key<const N: usize>(parts: [u64; N]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 * N);
    for p in parts {
        k.extend_from_slice(&p.to_be_bytes());
    }
    k
}

/// The smallest key strictly greater than every key that starts with `prefix`
/// (an exclusive iteration upper bound); `None` when no such key exists —
/// the prefix is empty or all `0xff` (user id `u64::MAX`), so every key
/// from the prefix on starts with it and a scan runs to the end.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A timeline position: entries sort by (ts desc, post_id desc, author desc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimelineKey {
    /// The post's time.
    pub ts: Ts,
    /// The post.
    pub post_id: PostId,
    /// The post's author.
    pub author: UserId,
}

impl TimelineKey {
    /// Width of the encoded key.
    pub const LEN: usize = 24;

    /// The first key of every timeline (ts, post id and author all
    /// `u64::MAX`): a horizon or bound here means nothing is held and the
    /// pull path reads it all.
    pub const TOP: TimelineKey = TimelineKey {
        ts: Ts(u64::MAX),
        post_id: PostId(u64::MAX),
        author: UserId(u64::MAX),
    };

    /// `!ts | !post_id | !author`: ascending bytes = newest first.
    #[inline]
    pub fn encode(&self) -> [u8; 24] {
        let mut k = [0u8; 24];
        k[0..8].copy_from_slice(&(!self.ts.0).to_be_bytes());
        k[8..16].copy_from_slice(&(!self.post_id.0).to_be_bytes());
        k[16..24].copy_from_slice(&(!self.author.0).to_be_bytes());
        k
    }

    /// Inverse of [`TimelineKey::encode`]; `None` when `b` is shorter
    /// than a key.
    #[inline]
    pub fn decode(b: &[u8]) -> Option<TimelineKey> {
        Some(TimelineKey {
            ts: Ts(!be(b, 0)?),
            post_id: PostId(!be(b, 8)?),
            author: UserId(!be(b, 16)?),
        })
    }
}

impl PartialOrd for TimelineKey {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Timeline order: newest first, so `a < b` means `a` comes first in a page.
impl Ord for TimelineKey {
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // The encoded bytes' order (`!ts | !post_id | !author`), compared
        // as numbers: each field descending.
        let (a, b) = (self, other);
        (b.ts.0, b.post_id.0, b.author.0).cmp(&(a.ts.0, a.post_id.0, a.author.0))
    }
}

/// `inbox`: `user | !ts | !post_id | !author`.
pub fn inbox(user: UserId, k: &TimelineKey) -> Vec<u8> {
    let mut v = Vec::with_capacity(32);
    v.extend_from_slice(&user.0.to_be_bytes());
    v.extend_from_slice(&k.encode());
    v
}

/// An `inbox` row's value: empty, or the author of the post the entry
/// replies to (8 bytes) — so a page applies the replies rule to the rows
/// it reads without a lookup. A repost's own appearance is never a reply.
pub fn inbox_value(parent: Option<UserId>) -> Vec<u8> {
    parent.map_or_else(Vec::new, |y| y.0.to_be_bytes().to_vec())
}

/// What an `inbox` row's value says of its entry: `Some(None)`, no reply;
/// `Some(Some(y))`, a reply to a post of `y`; `None`, a value of another
/// layout.
pub fn inbox_parent(v: &[u8]) -> Option<Option<UserId>> {
    match v.len() {
        0 => Some(None),
        8 => Some(Some(UserId(u64::from_be_bytes(v.try_into().ok()?)))),
        _ => None,
    }
}

/// `inbox_reposts`: `user | a | p | !ts | !repost | !reposter`, one per
/// repost of original `(a, p)` among `user`'s inbox entries (`k`: the
/// repost's appearance), so a reader's sources of one post are one short
/// range.
pub fn inbox_repost(user: UserId, root: PostRef, k: &TimelineKey) -> Vec<u8> {
    let mut v = inbox_repost_prefix(user, root);
    v.extend_from_slice(&k.encode());
    v
}

/// `inbox_reposts`: `user | a | p`, the prefix of [`inbox_repost`].
pub fn inbox_repost_prefix(user: UserId, root: PostRef) -> Vec<u8> {
    let mut v = Vec::with_capacity(48);
    v.extend_from_slice(&key([user.0, root.0 .0, root.1 .0]));
    v
}

/// `inbox_authors`: `user | author`.
pub fn inbox_author(user: UserId, author: UserId) -> Vec<u8> {
    key([user.0, author.0])
}

/// `outbox`: `author | !ts | !post_id`.
pub fn outbox(author: UserId, ts: Ts, post_id: PostId) -> Vec<u8> {
    key([author.0, !ts.0, !post_id.0])
}

/// `recent_followers`: `author | !ts | !follower`.
pub fn recent_follower(author: UserId, ts: Ts, follower: UserId) -> Vec<u8> {
    key([author.0, !ts.0, !follower.0])
}

/// `outbox` value of a live repost: the original's author, id and time
/// (24 bytes); an original's value is empty.
pub fn outbox_repost(root: PostRef, post_ts: Ts) -> Vec<u8> {
    key([root.0 .0, root.1 .0, post_ts.0])
}

/// Inverse of [`outbox_repost`]; `None` for an original's (empty) value.
pub fn decode_outbox_repost(v: &[u8]) -> Option<(PostRef, Ts)> {
    if v.len() != 24 {
        return None;
    }
    Some(((UserId(be(v, 0)?), PostId(be(v, 8)?)), Ts(be(v, 16)?)))
}

/// `reposts` (at the partition of the post a repost names): `0 | a | p |
/// reposter | repost`, valued `ts u64 | hops u32 | version u64`: a repost registered
/// with post `(a, p)` — its original, or a post whose kind is not known yet
/// (the repost waits there).
pub fn repost_of(target: PostRef, reposter: UserId, repost: PostId) -> Vec<u8> {
    let mut k = vec![0];
    k.extend_from_slice(&key([target.0 .0, target.1 .0, reposter.0, repost.0]));
    k
}

/// `reposts`: `0 | a | p`, the prefix of [`repost_of`].
pub fn repost_of_prefix(target: PostRef) -> Vec<u8> {
    let mut k = vec![0];
    k.extend_from_slice(&key([target.0 .0, target.1 .0]));
    k
}

/// `reposts`: `0 | a`, the prefix of every [`repost_of`] of `a`'s posts.
pub fn reposts_of_author(author: UserId) -> Vec<u8> {
    let mut k = vec![0];
    k.extend_from_slice(&key([author.0]));
    k
}

/// `reposts`: `1 | a | p`, valued u64: how many reposts are registered
/// with `(a, p)` (its live reposts, once it is a live original).
pub fn repost_count(target: PostRef) -> Vec<u8> {
    let mut k = vec![1];
    k.extend_from_slice(&key([target.0 .0, target.1 .0]));
    k
}

/// `repost_dir` (every partition's copy of the live reposts): `0 | a | p |
/// reposter | repost`, valued `repost ts | original ts`: a live repost of
/// original `(a, p)`.
pub fn dir_by_original(root: PostRef, reposter: UserId, repost: PostId) -> Vec<u8> {
    let mut k = vec![0];
    k.extend_from_slice(&key([root.0 .0, root.1 .0, reposter.0, repost.0]));
    k
}

/// `repost_dir`: `0 | a | p`, the prefix of [`dir_by_original`].
pub fn dir_original_prefix(root: PostRef) -> Vec<u8> {
    let mut k = vec![0];
    k.extend_from_slice(&key([root.0 .0, root.1 .0]));
    k
}

/// `repost_dir`: `0 | a | p | reposter`, the prefix of `reposter`'s live
/// reposts of original `(a, p)` in [`dir_by_original`].
pub fn dir_original_reposter_prefix(root: PostRef, reposter: UserId) -> Vec<u8> {
    let mut k = vec![0];
    k.extend_from_slice(&key([root.0 .0, root.1 .0, reposter.0]));
    k
}

/// `repost_dir`: `2 | a | p`, valued the number of live reposts of
/// original `(a, p)` in this directory (absent: none). A point read that
/// the bloom filter answers when there are none, before a scan of
/// [`dir_original_prefix`].
pub fn dir_count(root: PostRef) -> Vec<u8> {
    let mut k = vec![2];
    k.extend_from_slice(&key([root.0 .0, root.1 .0]));
    k
}

/// `repost_dir`: `1 | reposter | repost`, valued `a | p | original ts |
/// repost ts`: the original a live repost reposts (and what its
/// [`dir_by_original`] entry holds, so a reposter's entries alone say it).
pub fn dir_by_repost(reposter: UserId, repost: PostId) -> Vec<u8> {
    let mut k = vec![1];
    k.extend_from_slice(&key([reposter.0, repost.0]));
    k
}

/// Bytes of a [`dir_by_repost`] entry's value.
pub const DIR_REPOST_LEN: usize = 32;

/// `repost_dir`: `1 | reposter`, the prefix of [`dir_by_repost`]:
/// `reposter`'s live reposts.
pub fn dir_by_repost_prefix(reposter: UserId) -> Vec<u8> {
    let mut k = vec![1];
    k.extend_from_slice(&key([reposter.0]));
    k
}

/// Per-user record: counters and the inbox bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UserVal {
    /// Live followers.
    pub followers: u64,
    /// Live followees.
    pub followees: u64,
    /// Live posts.
    pub posts: u64,
    /// Entries in the materialized inbox (never fewer than there are; a
    /// duplicate delivery may over-count until the next trim recounts).
    pub inbox_len: u64,
    /// Every timeline entry that sorts before the horizon is in the inbox;
    /// `None`: every timeline entry is.
    pub horizon: Option<TimelineKey>,
    /// As an author: whether their posts are pulled by followers (read from
    /// each partition's copy of them) instead of pushed into inboxes.
    pub pulled: bool,
    /// As a reader: the pulled authors they follow (listed in `pulls`),
    /// whose posts are not in the inbox.
    pub pulls: u64,
    /// How many times the `pulls` list changed or the user fell asleep: it
    /// only grows, so a reader that finds zero knows the inbox alone always
    /// held the user's timeline up to its horizon.
    pub marks: u64,
    /// As a reader: the log time of the user's last own event (of any
    /// kind: a follow, a post, a repost, a block, a `seen`…).
    pub active: Ts,
    /// As a reader: inactive, skipped by push fan-out. The inbox is empty
    /// and its horizon at the top, so every read takes the pull path.
    pub asleep: bool,
    /// How many times the user woke: names the replies of the last wake.
    pub wakes: u64,
    /// Followees whose refill of the last wake is still awaited (listed in
    /// `refills`): reads take the pull path until none is.
    pub refills: u64,
    /// As an author: live reposts (of live originals).
    pub reposts: u64,
}

impl UserVal {
    /// Encoded width.
    pub const LEN: usize = Self::LEN_BEFORE_REPOSTS + 8;

    /// Whether the user's inbox holds their whole timeline but the pulled
    /// authors' posts, and always has: no horizon and no wake ever (a
    /// horizon is removed only by a wake). Such a reader keeps their
    /// sources of each post (`inbox_reposts`); once not, never again.
    pub fn whole(&self) -> bool {
        self.horizon.is_none() && self.wakes == 0
    }

    /// The width records had before `reposts` (read as 0 reposts).
    const LEN_BEFORE_REPOSTS: usize = 8 * 4 + 1 + 24 + 1 + 8 + 8 + 8 + 1 + 8 + 8;

    /// `followers | followees | posts | inbox_len | has_horizon u8 |
    /// horizon[24] | pulled u8 | pulls | marks | active | asleep u8 |
    /// wakes | refills | reposts`.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = key([self.followers, self.followees, self.posts, self.inbox_len]);
        match self.horizon {
            Some(h) => {
                v.push(1);
                v.extend_from_slice(&h.encode());
            }
            None => {
                v.push(0);
                v.extend_from_slice(&[0; 24]);
            }
        }
        v.push(u8::from(self.pulled));
        v.extend_from_slice(&self.pulls.to_be_bytes());
        v.extend_from_slice(&self.marks.to_be_bytes());
        v.extend_from_slice(&self.active.0.to_be_bytes());
        v.push(u8::from(self.asleep));
        v.extend_from_slice(&self.wakes.to_be_bytes());
        v.extend_from_slice(&self.refills.to_be_bytes());
        v.extend_from_slice(&self.reposts.to_be_bytes());
        v
    }

    /// The horizon a reader goes by: the inbox's, or the top (nothing held,
    /// the pull path reads it all) while the user is asleep or waiting for
    /// refills.
    pub fn read_horizon(&self) -> Option<TimelineKey> {
        if self.asleep || self.refills > 0 {
            Some(TimelineKey::TOP)
        } else {
            self.horizon
        }
    }

    /// Inverse of [`UserVal::encode`] (also of records written before
    /// `reposts`, which read as none).
    pub fn decode(b: &[u8]) -> Option<UserVal> {
        let reposts = match b.len() {
            Self::LEN => be(b, Self::LEN_BEFORE_REPOSTS)?,
            Self::LEN_BEFORE_REPOSTS => 0,
            _ => return None,
        };
        let horizon = match b[32] {
            1 => Some(TimelineKey::decode(&b[33..57])?),
            _ => None,
        };
        Some(UserVal {
            followers: be(b, 0)?,
            followees: be(b, 8)?,
            posts: be(b, 16)?,
            inbox_len: be(b, 24)?,
            horizon,
            pulled: b[57] == 1,
            pulls: be(b, 58)?,
            marks: be(b, 66)?,
            active: Ts(be(b, 74)?),
            asleep: b[82] == 1,
            wakes: be(b, 83)?,
            refills: be(b, 91)?,
            reposts,
        })
    }
}

/// `refills`: a followee whose refill `user` awaits, valued with the wake
/// (u64) it was asked for.
pub fn refill(user: UserId, author: UserId) -> Vec<u8> {
    key([user.0, author.0])
}

/// `meta`: the newest event time (u64 ms) this partition has applied: its
/// clock, against which its readers' inactivity is judged.
pub const CLOCK: &[u8] = b"clock";

/// `meta`: the pull threshold in force in this partition (u64; absent: 0).
pub const PULL_THRESHOLD: &[u8] = b"pull/threshold";

/// `meta`: the partition's gauges ([`crate::gauges::Gauges`], 32 bytes).
pub const GAUGES: &[u8] = b"gauges";

/// `meta`: the prefix of the per-sender fences ([`fence`]).
pub const FENCE_PREFIX: &[u8] = b"fence/";

/// `meta`: `fence/` + the sending partition (u32): the highest owner epoch
/// applied from it and the count of its records fenced
/// ([`crate::fence::FenceVal`], 16 bytes).
pub fn fence(from: Partition) -> Vec<u8> {
    let mut k = FENCE_PREFIX.to_vec();
    k.extend_from_slice(&from.0.to_be_bytes());
    k
}

/// `copies`: a partition's copy of a pulled author's newest posts, entries
/// `author | !ts | !post_id`, under the header at `author` ([`CopyVal`]).
pub fn copy(author: UserId, ts: Ts, post_id: PostId) -> Vec<u8> {
    key([author.0, !ts.0, !post_id.0])
}

/// The header of a partition's copy of a pulled author's posts: present
/// exactly while the partition holds a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CopyVal {
    /// Entries in the copy (never fewer than there are).
    pub len: u64,
    /// Every live post of the author that sorts before the horizon is in
    /// the copy; `None`: every one is.
    pub horizon: Option<TimelineKey>,
}

impl CopyVal {
    /// Encoded width.
    pub const LEN: usize = 8 + 1 + 24;

    /// `len | has_horizon u8 | horizon[24]`.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = self.len.to_be_bytes().to_vec();
        v.push(u8::from(self.horizon.is_some()));
        v.extend_from_slice(&self.horizon.map_or([0; 24], |h| h.encode()));
        v
    }

    /// Inverse of [`CopyVal::encode`].
    pub fn decode(b: &[u8]) -> Option<CopyVal> {
        if b.len() != Self::LEN {
            return None;
        }
        let horizon = match b[8] {
            1 => Some(TimelineKey::decode(&b[9..33])?),
            _ => None,
        };
        Some(CopyVal {
            len: be(b, 0)?,
            horizon,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::Version;
    use proptest::prelude::*;

    proptest! {
        // Proves timeline keys round-trip and byte order is (ts desc, post desc, author desc).
        #[test]
        fn timeline_key_order(a in any::<(u64, u64, u64)>(), b in any::<(u64, u64, u64)>()) {
            let ka = TimelineKey { ts: Ts(a.0), post_id: PostId(a.1), author: UserId(a.2) };
            let kb = TimelineKey { ts: Ts(b.0), post_id: PostId(b.1), author: UserId(b.2) };
            prop_assert_eq!(TimelineKey::decode(&ka.encode()), Some(ka));
            prop_assert_eq!(ka.encode().cmp(&kb.encode()), (b.0, b.1, b.2).cmp(&(a.0, a.1, a.2)));
            prop_assert_eq!(inbox(UserId(7), &ka).cmp(&inbox(UserId(7), &kb)), ka.cmp(&kb));
        }

        // Proves outbox and recent-follower keys sort newest first within one user, users ascending.
        #[test]
        fn outbox_and_recent_order(u in 1u64..5, v in 1u64..5, t1 in any::<u64>(), t2 in any::<u64>(), p1 in any::<u64>(), p2 in any::<u64>()) {
            let a = outbox(UserId(u), Ts(t1), PostId(p1));
            let b = outbox(UserId(v), Ts(t2), PostId(p2));
            prop_assert_eq!(a.cmp(&b), (u, std::cmp::Reverse(t1), std::cmp::Reverse(p1)).cmp(&(v, std::cmp::Reverse(t2), std::cmp::Reverse(p2))));
            let a = recent_follower(UserId(u), Ts(t1), UserId(p1));
            let b = recent_follower(UserId(v), Ts(t2), UserId(p2));
            prop_assert_eq!(a.cmp(&b), (u, std::cmp::Reverse(t1), std::cmp::Reverse(p1)).cmp(&(v, std::cmp::Reverse(t2), std::cmp::Reverse(p2))));
        }

        // Proves value records round-trip.
        #[test]
        fn values_round_trip(live in any::<bool>(), ver in any::<u64>(), ts in any::<u64>(), c in any::<[u64; 4]>(), h in proptest::option::of(any::<(u64, u64, u64)>())) {
            let e = EdgeVal { live, version: Version(ver), ts: Ts(ts), void: !live && ver % 2 == 0, first: Ts(c[0]), last: Ts(c[1]), last_by: Version(c[2]) };
            prop_assert_eq!(EdgeVal::decode(&e.encode()), Some(e));
            let plain = EdgeVal::followed(Version(ver), Ts(ts));
            prop_assert_eq!(plain.encode().len(), 17);
            prop_assert_eq!(EdgeVal::decode(&plain.encode()), Some(plain));
            let horizon = h.map(|h| TimelineKey { ts: Ts(h.0), post_id: PostId(h.1), author: UserId(h.2) });
            let u = UserVal { followers: c[0], followees: c[1], posts: c[2], inbox_len: c[3],
                horizon, pulled: live, pulls: ver, marks: ts, active: Ts(c[1]), asleep: !live,
                wakes: c[2], refills: c[3], reposts: c[0] ^ c[3] };
            prop_assert_eq!(UserVal::decode(&u.encode()), Some(u));
            let c = CopyVal { len: c[0], horizon };
            prop_assert_eq!(CopyVal::decode(&c.encode()), Some(c));
        }
    }

    // Proves prefix_end bounds exactly the keys with the prefix, all-0xff prefixes (user u64::MAX) included.
    #[test]
    fn prefix_end_bounds() {
        assert_eq!(prefix_end(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
        assert_eq!(prefix_end(&[]), None);
        let max = UserId(u64::MAX);
        let within = |prefix: &[u8], k: &[u8]| {
            k >= prefix && prefix_end(prefix).is_none_or(|end| k < &end[..])
        };
        for user in [UserId(1), UserId(u64::MAX - 1), max] {
            let p = key([user.0]);
            for other in [1, u64::MAX - 1, u64::MAX] {
                let k = inbox_author(user, UserId(other));
                assert!(within(&p, &k), "{user} {other}");
                let k = inbox(
                    user,
                    &TimelineKey {
                        ts: Ts(0),
                        post_id: PostId(0),
                        author: max,
                    },
                );
                assert!(within(&p, &k));
            }
            // A key of the next user is outside.
            if let Some(next) = user.0.checked_add(1) {
                assert!(!within(&p, &key([next, 0])));
            }
        }
    }
}
