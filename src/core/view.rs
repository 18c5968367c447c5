//! The views readers read, by name: one enum for `backfill --view` and
//! digests (the reads and their routes are `feedlog::api::reads`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A view of the contract (docs/semantics.md, "Views").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum View {
    /// A user's follower, followee and post counts.
    Counters,
    /// A user's live followers, by id, with follow time.
    Followers,
    /// The users a user follows, by id, with follow time.
    Followees,
    /// A user's newest followers by follow time.
    #[serde(alias = "recent-followers")]
    RecentFollowers,
    /// A user's own live posts, newest first.
    Posts,
    /// A user's home timeline: the live posts of the users they follow.
    Timeline,
    /// The users a user mutes, by id (docs/semantics.md, "Blocks and mutes").
    Mutes,
    /// The users a user blocks, by id.
    Blocks,
    /// A user's read markers, one per feed (docs/semantics.md, "Read markers").
    Markers,
}

impl View {
    /// Every view, in digest order.
    pub const ALL: [View; 9] = [
        View::Counters,
        View::Followers,
        View::Followees,
        View::RecentFollowers,
        View::Posts,
        View::Timeline,
        View::Mutes,
        View::Blocks,
        View::Markers,
    ];

    /// The name in JSON and digests (`recent_followers`).
    pub fn as_str(self) -> &'static str {
        match self {
            View::Counters => "counters",
            View::Followers => "followers",
            View::Followees => "followees",
            View::RecentFollowers => "recent_followers",
            View::Posts => "posts",
            View::Timeline => "timeline",
            View::Mutes => "mutes",
            View::Blocks => "blocks",
            View::Markers => "markers",
        }
    }

    /// A view by any of its spellings (`recent_followers`,
    /// `recent-followers`; `inbox` for the timeline).
    pub fn parse(name: &str) -> Option<View> {
        match name {
            "recent-followers" => Some(View::RecentFollowers),
            "inbox" => Some(View::Timeline),
            _ => View::ALL.into_iter().find(|v| v.as_str() == name),
        }
    }
}

impl fmt::Display for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every view parses from its JSON name and its CLI spelling, and round-trips through serde.
    #[test]
    fn names_round_trip() {
        for v in View::ALL {
            assert_eq!(View::parse(v.as_str()), Some(v));
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", v.as_str()));
            assert_eq!(serde_json::from_str::<View>(&json).unwrap(), v);
        }
        assert_eq!(View::parse("recent-followers"), Some(View::RecentFollowers));
        assert_eq!(View::parse("inbox"), Some(View::Timeline));
        assert_eq!(View::parse("likes"), None);
    }
}
