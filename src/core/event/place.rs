//! What a `seen` with a read marker names: a feed, and a place in it
//! (docs/events.md, "Read markers").

use super::{PostId, Ts, UserId};
use serde::{Deserialize, Serialize};

/// A feed that has a read marker (`seen`'s `feed`). Variants are
/// append-only (the codec's golden bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Feed {
    /// The home timeline.
    Home,
    /// The notifications feed.
    Notifications,
}

impl Feed {
    /// Every feed, in declaration order.
    pub const ALL: [Feed; 2] = [Feed::Home, Feed::Notifications];

    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Feed::Home => "home",
            Feed::Notifications => "notifications",
        }
    }

    /// Inverse of [`Feed::as_str`].
    pub fn parse(s: &str) -> Option<Feed> {
        Feed::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// The feed's byte in state keys (its declaration index).
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

/// A place in a feed, as a `seen`'s `read_up_to` names it: the time, post
/// id and author of an entry. Places order as a feed's entries do, newest
/// greatest: by `ts`, then `post_id`, then `author`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Place {
    /// The entry's time.
    pub ts: Ts,
    /// The entry's post id.
    pub post_id: PostId,
    /// The entry's author.
    pub author: UserId,
}
