//! The value of a post id at its author's partition (`posts`).

use super::{be, key};
use crate::event::{PostId, Ts, UserId};
use crate::position::Version;

/// A post's identity: its author and id.
pub type PostRef = (UserId, PostId);

/// Where the events that decided an original post id sit in its author's
/// `events` partition: its post event's version and its deletion's
/// (version and time). `None`: not happened, or applied by a build that
/// did not record it (an older state, answered as "position unknown").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Posted {
    /// The version of the post event that made the id an original.
    pub post: Option<Version>,
    /// The version and time of the deletion.
    pub deleted: Option<(Version, Ts)>,
}

impl Posted {
    /// Posted by the event `version`, not deleted.
    pub fn by(version: Version) -> Posted {
        Posted {
            post: Some(version),
            deleted: None,
        }
    }
}

/// What an author's partition knows of one of its post ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostVal {
    /// Posted at this time and not deleted.
    Live(Ts, Posted),
    /// Deleted (possibly before its post or repost event arrived, then
    /// without the post's time): permanent.
    Deleted(Option<Ts>, Posted),
    /// A repost (the id's first event was a `repost`).
    Repost(RepostVal),
}

/// Where a repost stands with its original.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepostState {
    /// Asked; no answer yet (or the post it names never came).
    Pending,
    /// Its original is live: it is in the reposter's outbox.
    Live,
    /// Its original was deleted, or its chain of reposts never ends.
    Dead,
}

/// A repost, as its reposter's partition knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepostVal {
    /// The repost's time.
    pub ts: Ts,
    /// The post the repost event named (an original, or another repost).
    pub of: PostRef,
    /// The original it resolved to, with the original's time, once known.
    pub root: Option<(PostRef, Ts)>,
    /// Whether it is live.
    pub state: RepostState,
    /// Taken back by its reposter (`delete_post`): permanent.
    pub deleted: bool,
    /// The version of the repost event (`None`: not recorded).
    pub by: Option<Version>,
}

/// A version as stored: 0 for none (versions start at 1).
fn version_bytes(v: Option<Version>) -> [u8; 8] {
    v.map_or(0, |v| v.0).to_be_bytes()
}

/// Inverse of [`version_bytes`].
fn version_at(b: &[u8], at: usize) -> Option<Version> {
    be(b, at).filter(|&v| v > 0).map(Version)
}

impl PostVal {
    /// `state u8 (1 live, 2 deleted, 3 deleted unseen) | ts u64 [| post
    /// version u64 [| deletion version u64 | deletion ts u64]]` (records
    /// of earlier builds stop after `ts`: positions unknown); a repost:
    /// `4 | ts | of author | of post | has root u8 | root author | root post
    /// | original ts | state u8 (0 pending, 1 live, 2 dead) | deleted u8 [|
    /// repost version u64]`.
    pub fn encode(&self) -> Vec<u8> {
        let (tag, ts, posted) = match *self {
            PostVal::Live(ts, p) => (1u8, ts.0, p),
            PostVal::Deleted(Some(ts), p) => (2, ts.0, p),
            PostVal::Deleted(None, p) => (3, 0, p),
            PostVal::Repost(r) => return r.encode(),
        };
        let mut v = Vec::with_capacity(33);
        v.push(tag);
        v.extend_from_slice(&ts.to_be_bytes());
        v.extend_from_slice(&version_bytes(posted.post));
        if let Some((version, at)) = posted.deleted {
            v.extend_from_slice(&key([version.0, at.0]));
        }
        v
    }

    /// Inverse of [`PostVal::encode`].
    pub fn decode(b: &[u8]) -> Option<PostVal> {
        if b.first() == Some(&4) {
            return RepostVal::decode(b).map(PostVal::Repost);
        }
        if ![9, 17, 33].contains(&b.len()) {
            return None;
        }
        let ts = Ts(be(b, 1)?);
        let deleted = match b.len() {
            33 => Some((Version(be(b, 17)?), Ts(be(b, 25)?))),
            _ => None,
        };
        let posted = Posted {
            post: (b.len() > 9).then(|| version_at(b, 9)).flatten(),
            deleted,
        };
        match b[0] {
            1 => Some(PostVal::Live(ts, posted)),
            2 => Some(PostVal::Deleted(Some(ts), posted)),
            3 => Some(PostVal::Deleted(None, posted)),
            _ => None,
        }
    }
}

impl RepostVal {
    /// Encoded width (earlier builds wrote `LEN - 8`: no version).
    const LEN: usize = 1 + 8 + 16 + 1 + 24 + 1 + 1 + 8;

    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::LEN);
        v.push(4);
        v.extend_from_slice(&key([self.ts.0, self.of.0 .0, self.of.1 .0]));
        let ((ra, rp), rts) = self.root.unwrap_or_default();
        v.push(u8::from(self.root.is_some()));
        v.extend_from_slice(&key([ra.0, rp.0, rts.0]));
        v.push(match self.state {
            RepostState::Pending => 0,
            RepostState::Live => 1,
            RepostState::Dead => 2,
        });
        v.push(u8::from(self.deleted));
        v.extend_from_slice(&version_bytes(self.by));
        v
    }

    fn decode(b: &[u8]) -> Option<RepostVal> {
        if b.len() != Self::LEN && b.len() != Self::LEN - 8 {
            return None;
        }
        let root = match b[25] {
            1 => Some(((UserId(be(b, 26)?), PostId(be(b, 34)?)), Ts(be(b, 42)?))),
            _ => None,
        };
        Some(RepostVal {
            ts: Ts(be(b, 1)?),
            of: (UserId(be(b, 9)?), PostId(be(b, 17)?)),
            root,
            state: match b[50] {
                0 => RepostState::Pending,
                1 => RepostState::Live,
                2 => RepostState::Dead,
                _ => return None,
            },
            deleted: b[51] == 1,
            by: (b.len() == Self::LEN).then(|| version_at(b, 52)).flatten(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // Proves post records round-trip with and without the positions, and records of earlier builds (no positions) still decode.
        #[test]
        fn post_values_round_trip(ts in any::<u64>(), v in 1u64.., d in proptest::option::of((1u64.., any::<u64>()))) {
            let deleted = d.map(|(v, t)| (Version(v), Ts(t)));
            for posted in [Posted::default(), Posted::by(Version(v)), Posted { post: None, deleted }, Posted { post: Some(Version(v)), deleted }] {
                for p in [PostVal::Live(Ts(ts), posted), PostVal::Deleted(Some(Ts(ts)), posted), PostVal::Deleted(None, posted)] {
                    prop_assert_eq!(PostVal::decode(&p.encode()), Some(p));
                }
            }
            let mut old = vec![1u8];
            old.extend_from_slice(&ts.to_be_bytes());
            prop_assert_eq!(PostVal::decode(&old), Some(PostVal::Live(Ts(ts), Posted::default())));
            let rv = RepostVal { ts: Ts(ts), of: (UserId(2), PostId(3)), root: None, state: RepostState::Live, deleted: false, by: Some(Version(v)) };
            let bytes = PostVal::Repost(rv).encode();
            prop_assert_eq!(PostVal::decode(&bytes), Some(PostVal::Repost(rv)));
            prop_assert_eq!(PostVal::decode(&bytes[..bytes.len() - 8]), Some(PostVal::Repost(RepostVal { by: None, ..rv })));
        }
    }
}
