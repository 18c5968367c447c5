//! A generation is one build of a deployment's state, numbered from 0: the
//! state a deployment starts with is generation 0, and each rebuild beside
//! it (`rebuild`, then `swap`) makes the next one.
//!
//! One meaning in both modes. With the embedded log, generation N is the
//! directory `state.N` of the data directory (`state` for 0), and
//! `feedlog.json` names the one that answers. In Kafka mode, generation N
//! is a consumer group and internal topics of its own reading the same
//! `events` topic (docs/kafka.md, "Generations"), and the deployment's
//! live-generation record names the one that answers.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A generation's number: written as the number itself, in JSON, in log
/// lines and on the command line (`--generation 2`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Generation(pub u32);

impl Generation {
    /// The state a deployment starts with (Kafka mode: the deployment's
    /// own group and topics).
    pub const FIRST: Generation = Generation(0);

    /// Whether this is the deployment's first generation.
    pub fn is_first(self) -> bool {
        self == Generation::FIRST
    }

    /// The generation after this one.
    pub fn next(self) -> Generation {
        Generation(self.0.saturating_add(1))
    }
}

impl fmt::Debug for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::str::FromStr for Generation {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<Generation, Self::Err> {
        s.parse().map(Generation)
    }
}
