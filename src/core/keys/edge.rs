//! The value of a follow edge, at either of its ends.

use super::be;
use crate::event::Ts;
use crate::position::Version;

/// A live or dead edge, with the version of the event that last changed it.
///
/// `live` means the follow counts: every view, counter and fan-out reads
/// that alone. A follow that a block voids (docs/semantics.md, "Blocks and mutes") is
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
    /// Follow time: when the follow counts, the time it counts from; when
    /// void, the time of the follow that started the edge; when dead, the
    /// time of the unfollow that ended it (states of earlier builds kept the
    /// follow's time there).
    pub ts: Ts,
    /// Followed, but the follow is void (the pair's blocks cover it).
    pub void: bool,
    /// The time of the follow that started the edge.
    pub first: Ts,
    /// The latest time of a follow of the edge (a follow while
    /// following): a follow after the pair's block periods revives it.
    pub last: Ts,
    /// The version of the follow at `last` (the follow an edge revived
    /// from `last` counts from).
    pub last_by: Version,
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
            last_by: version,
        }
    }

    /// Ended by the unfollow `version` at `ts`.
    pub fn unfollowed(version: Version, ts: Ts) -> EdgeVal {
        EdgeVal {
            live: false,
            ..EdgeVal::followed(version, ts)
        }
    }

    /// The version of the follow the edge counts from (or, void, started
    /// with). `None` for an edge revived after a block by a build that did
    /// not record the reviving follow's version (`last_by` then reads as
    /// `version`, the first follow's).
    pub fn follow_version(&self) -> Option<Version> {
        let revived = self.live && self.ts == self.last && self.ts != self.first;
        match revived {
            true => Some(self.last_by).filter(|&v| v != self.version),
            false => Some(self.version),
        }
    }

    /// Whether the follower still follows through this edge (counted or
    /// void).
    pub fn followed_raw(&self) -> bool {
        self.live || self.void
    }

    /// `flags u8 | version u64 | ts u64 [| first u64 | last u64] [|
    /// last_by u64]`: flags bit 0 live, bit 1 void, bit 2 the two times
    /// follow (when `first` or `last` differs from `ts`), bit 3 `last_by`
    /// follows (when it differs from `version`); earlier layouts wrote 0
    /// or 1 alone, and no `last_by` (read as `version`).
    pub fn encode(&self) -> Vec<u8> {
        let ext = self.first != self.ts || self.last != self.ts;
        let by = self.last_by != self.version;
        let mut v = Vec::with_capacity(17 + 16 * usize::from(ext) + 8 * usize::from(by));
        let flags = u8::from(self.live) | u8::from(self.void) << 1;
        v.push(flags | u8::from(ext) << 2 | u8::from(by) << 3);
        v.extend_from_slice(&self.version.0.to_be_bytes());
        v.extend_from_slice(&self.ts.0.to_be_bytes());
        if ext {
            v.extend_from_slice(&self.first.0.to_be_bytes());
            v.extend_from_slice(&self.last.0.to_be_bytes());
        }
        if by {
            v.extend_from_slice(&self.last_by.0.to_be_bytes());
        }
        v
    }

    /// Inverse of [`EdgeVal::encode`].
    pub fn decode(b: &[u8]) -> Option<EdgeVal> {
        let flags = *b.first()?;
        let (ext, by) = (flags & 4 != 0, flags & 8 != 0);
        if b.len() != 17 + 16 * usize::from(ext) + 8 * usize::from(by) || flags > 15 {
            return None;
        }
        let version = Version(be(b, 1)?);
        let last_by = match by {
            true => Version(be(b, b.len() - 8)?),
            false => version,
        };
        let ts = Ts(be(b, 9)?);
        let (first, last) = match ext {
            true => (Ts(be(b, 17)?), Ts(be(b, 25)?)),
            false => (ts, ts),
        };
        Some(EdgeVal {
            live: flags & 1 == 1,
            version,
            ts,
            void: flags & 2 == 2,
            first,
            last,
            last_by,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the follow an edge counts from is the reviving one when a block voided the first, and unknown (not the first's) for such an edge written before `last_by` was kept.
    #[test]
    fn follow_version_names_the_follow_counted_from() {
        let first = EdgeVal::followed(Version(3), Ts(10));
        assert_eq!(first.follow_version(), Some(Version(3)));
        let revived = EdgeVal {
            ts: Ts(50),
            last: Ts(50),
            last_by: Version(9),
            ..first
        };
        assert_eq!(revived.follow_version(), Some(Version(9)));
        let bytes = revived.encode();
        assert_eq!(EdgeVal::decode(&bytes), Some(revived));
        // The record an earlier build wrote: flags without bit 3, no `last_by`.
        let mut old = bytes[..33].to_vec();
        old[0] &= !8;
        let old = EdgeVal::decode(&old).unwrap();
        assert_eq!((old.last_by, old.follow_version()), (Version(3), None));
    }
}
