//! Positions in the log, and the versions derived from them.
//!
//! An [`Offset`] is where a record sits in one partition of a log (the
//! n-th record ever appended has offset n). A partition's task reads two
//! inputs, `events[p]` and `effects[p]`; its [`Positions`] say how far it
//! has applied each. A [`Version`] orders the changes to one key: the
//! position in `events[owner]` just past the event that caused the change.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A record's place in one log partition (Kafka's offset).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Offset(pub u64);

impl Offset {
    /// The offset after this one.
    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }

    /// Records from here up to `end` (0 when `end` is not ahead).
    pub fn records_to(self, end: Offset) -> u64 {
        end.0.saturating_sub(self.0)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The version of a change: the position in `events[owner]` (offset + 1)
/// of the event that caused it. All events of one edge come from the
/// follower's partition, so versions of one key are ordered by the log;
/// a message whose version is not newer than the stored one is a no-op.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Version(pub u64);

impl Version {
    /// The version of a change caused by the event at `offset`.
    pub fn of(offset: Offset) -> Version {
        Version(offset.0 + 1)
    }

    /// How far the owner's `events` must be applied for the event of this
    /// version to have been applied.
    pub fn applied_at(self) -> Offset {
        Offset(self.0)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How far a partition's state has applied its two inputs (the next
/// offset to apply of each). Stored as `[events, effects]` in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(from = "(u64, u64)", into = "(u64, u64)")]
pub struct Positions {
    /// Next offset of `events[p]`.
    pub events: Offset,
    /// Next offset of `effects[p]`.
    pub effects: Offset,
}

impl Positions {
    /// The start of both logs.
    pub const START: Positions = Positions {
        events: Offset(0),
        effects: Offset(0),
    };

    /// Positions `events` and `effects`.
    pub fn new(events: u64, effects: u64) -> Positions {
        Positions {
            events: Offset(events),
            effects: Offset(effects),
        }
    }

    /// Each input's furthest of the two.
    pub fn max(self, other: Positions) -> Positions {
        Positions {
            events: self.events.max(other.events),
            effects: self.effects.max(other.effects),
        }
    }

    /// Whether both inputs are at least as far as in `other`.
    pub fn covers(self, other: Positions) -> bool {
        self.events >= other.events && self.effects >= other.effects
    }

    /// Records of both inputs from here up to `end`.
    pub fn records_to(self, end: Positions) -> u64 {
        self.events.records_to(end.events) + self.effects.records_to(end.effects)
    }
}

impl From<(u64, u64)> for Positions {
    fn from((events, effects): (u64, u64)) -> Positions {
        Positions::new(events, effects)
    }
}

impl From<Positions> for (u64, u64) {
    fn from(p: Positions) -> (u64, u64) {
        (p.events.0, p.effects.0)
    }
}

impl fmt::Display for Positions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "events {} effects {}", self.events, self.effects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves positions keep their JSON shape ([events, effects]) and versions their binary shape (a plain number).
    #[test]
    fn wire_shapes_are_unchanged() {
        let p = Positions::new(3, 7);
        assert_eq!(serde_json::to_string(&p).unwrap(), "[3,7]");
        assert_eq!(serde_json::from_str::<Positions>("[3,7]").unwrap(), p);
        assert_eq!(
            crate::codec::encode_compact(&Version(300)),
            crate::codec::encode_compact(&300u64)
        );
        assert_eq!(Version::of(Offset(4)), Version(5));
        assert_eq!(Version(5).applied_at(), Offset(5));
        assert_eq!(Positions::new(1, 2).records_to(Positions::new(4, 1)), 3);
    }
}
