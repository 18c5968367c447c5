//! The value of a follow edge, at either of its ends.

use super::be;
use crate::core::event::Ts;
use crate::core::position::Version;

/// A live or dead edge, with the version of the event that last changed it.
///
/// `live` means the follow counts: every view, counter and fan-out reads
/// that alone. A follow that a block voids (README, "Blocks and mutes") is
/// kept as `void`: still followed by its events, counted by none, and
/// counted again should the pair's block periods turn out to end before it
/// (a block's end that arrives late).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeVal {
    /// Whether the follow counts.
    pub live: bool,
    /// The version of the follow or unfollow that last started or ended
    /// the edge (a follow while following keeps it).
    pub version: Version,
    /// Follow time: when the follow counts, the time it counts from; else
    /// the time of the follow that started the edge.
    pub ts: Ts,
    /// Followed, but the follow is void (the pair's blocks cover it).
    pub void: bool,
    /// The time of the follow that started the edge.
    pub first: Ts,
    /// The latest time of a follow of the edge (a follow while
    /// following): a follow after the pair's block periods revives it.
    pub last: Ts,
}

impl EdgeVal {
    /// A counted follow started at `ts` by `version`, with no block about.
    pub fn followed(version: Version, ts: Ts) -> EdgeVal {
        EdgeVal {
            live: true,
            version,
            ts,
            void: false,
            first: ts,
            last: ts,
        }
    }

    /// Whether the follower still follows through this edge (counted or
    /// void).
    pub fn followed_raw(&self) -> bool {
        self.live || self.void
    }

    /// `flags u8 | version u64 | ts u64 [| first u64 | last u64]`: flags
    /// bit 0 live, bit 1 void, bit 2 the two times follow (when `first` or
    /// `last` differs from `ts`; earlier layouts wrote 0 or 1 alone).
    pub fn encode(&self) -> Vec<u8> {
        let ext = self.first != self.ts || self.last != self.ts;
        let mut v = Vec::with_capacity(if ext { 33 } else { 17 });
        v.push(u8::from(self.live) | u8::from(self.void) << 1 | u8::from(ext) << 2);
        v.extend_from_slice(&self.version.0.to_be_bytes());
        v.extend_from_slice(&self.ts.0.to_be_bytes());
        if ext {
            v.extend_from_slice(&self.first.0.to_be_bytes());
            v.extend_from_slice(&self.last.0.to_be_bytes());
        }
        v
    }

    /// Inverse of [`EdgeVal::encode`].
    pub fn decode(b: &[u8]) -> Option<EdgeVal> {
        let ext = b.first()? & 4 != 0;
        if b.len() != if ext { 33 } else { 17 } || b[0] > 7 {
            return None;
        }
        let ts = Ts(be(b, 9));
        let (first, last) = match ext {
            true => (Ts(be(b, 17)), Ts(be(b, 25))),
            false => (ts, ts),
        };
        Some(EdgeVal {
            live: b[0] & 1 == 1,
            version: Version(be(b, 1)),
            ts,
            void: b[0] & 2 == 2,
            first,
            last,
        })
    }
}
