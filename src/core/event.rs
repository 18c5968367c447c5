//! Events and the newtypes they are made of.
//!
//! An [`Event`] is what upstream apps write to the `events` topic: one of five
//! kinds, each with a producer timestamp. Ids are never bare `u64`s past the
//! codec: a [`UserId`] cannot be passed where a [`PostId`] is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The schema version this build writes and accepts (`"v"` in JSON).
pub const SCHEMA_VERSION: u32 = 1;

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_newtype!(
    /// A user (account) id; valid ids are > 0.
    UserId
);
id_newtype!(
    /// A post id; globally unique by the producer's promise, valid ids are > 0.
    PostId
);
id_newtype!(
    /// Milliseconds since the Unix epoch, as stamped by the producer.
    Ts
);

/// An input event, after validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Event {
    /// `follower` starts following `followee`.
    Follow {
        /// The acting user.
        follower: UserId,
        /// The user being followed.
        followee: UserId,
        /// Producer time.
        ts: Ts,
    },
    /// `follower` stops following `followee`.
    Unfollow {
        /// The acting user.
        follower: UserId,
        /// The user being unfollowed.
        followee: UserId,
        /// Producer time.
        ts: Ts,
    },
    /// `author` publishes `post_id`.
    Post {
        /// The acting user.
        author: UserId,
        /// The new post.
        post_id: PostId,
        /// Producer time; the post's place in every timeline.
        ts: Ts,
    },
    /// `author` deletes `post_id`, permanently (also when it arrives first).
    DeletePost {
        /// The acting user.
        author: UserId,
        /// The post to delete.
        post_id: PostId,
        /// Producer time.
        ts: Ts,
    },
    /// `user` was active (opened the app): activity for hybrid fan-out's
    /// inactive readers (DESIGN §3). Changes no view.
    Seen {
        /// The acting user.
        user: UserId,
        /// Producer time.
        ts: Ts,
    },
}

impl Event {
    /// The acting user: the event's key and the user whose partition owns it.
    pub fn actor(&self) -> UserId {
        match *self {
            Event::Follow { follower, .. } | Event::Unfollow { follower, .. } => follower,
            Event::Post { author, .. } | Event::DeletePost { author, .. } => author,
            Event::Seen { user, .. } => user,
        }
    }

    /// The event's producer timestamp.
    pub fn ts(&self) -> Ts {
        match *self {
            Event::Follow { ts, .. }
            | Event::Unfollow { ts, .. }
            | Event::Post { ts, .. }
            | Event::DeletePost { ts, .. }
            | Event::Seen { ts, .. } => ts,
        }
    }

    /// The kind as spelled in JSON (`follow`, `unfollow`, `post`,
    /// `delete_post`, `seen`).
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Follow { .. } => EventKind::Follow,
            Event::Unfollow { .. } => EventKind::Unfollow,
            Event::Post { .. } => EventKind::Post,
            Event::DeletePost { .. } => EventKind::DeletePost,
            Event::Seen { .. } => EventKind::Seen,
        }
    }

    /// Checks the rules every event must meet (DESIGN §1): ids > 0, no
    /// self-follow. Decoders call this; an event that fails is not an event.
    pub fn validate(&self) -> Result<(), InvalidEvent> {
        match *self {
            Event::Follow {
                follower, followee, ..
            }
            | Event::Unfollow {
                follower, followee, ..
            } => {
                if follower.0 == 0 {
                    return Err(InvalidEvent::ZeroId { field: "follower" });
                }
                if followee.0 == 0 {
                    return Err(InvalidEvent::ZeroId { field: "followee" });
                }
                if follower == followee {
                    return Err(InvalidEvent::SelfFollow { user: follower });
                }
            }
            Event::Post {
                author, post_id, ..
            }
            | Event::DeletePost {
                author, post_id, ..
            } => {
                if author.0 == 0 {
                    return Err(InvalidEvent::ZeroId { field: "author" });
                }
                if post_id.0 == 0 {
                    return Err(InvalidEvent::ZeroId { field: "post_id" });
                }
            }
            Event::Seen { user, .. } => {
                if user.0 == 0 {
                    return Err(InvalidEvent::ZeroId { field: "user" });
                }
            }
        }
        Ok(())
    }
}

/// The event kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `follow`
    Follow,
    /// `unfollow`
    Unfollow,
    /// `post`
    Post,
    /// `delete_post`
    DeletePost,
    /// `seen`
    Seen,
}

impl EventKind {
    /// Every kind, in the order [`crate::core::metrics::StepStats::events`]
    /// counts them.
    pub const ALL: [EventKind; 5] = [
        EventKind::Follow,
        EventKind::Unfollow,
        EventKind::Post,
        EventKind::DeletePost,
        EventKind::Seen,
    ];
}

impl EventKind {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Follow => "follow",
            EventKind::Unfollow => "unfollow",
            EventKind::Post => "post",
            EventKind::DeletePost => "delete_post",
            EventKind::Seen => "seen",
        }
    }
}

/// Why a well-formed record is still not an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidEvent {
    /// An id field is zero.
    #[error("field `{field}` is 0; ids start at 1")]
    ZeroId {
        /// The offending field.
        field: &'static str,
    },
    /// A user follows or unfollows themself.
    #[error("user {user} cannot follow or unfollow themself")]
    SelfFollow {
        /// The user.
        user: UserId,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves validation rejects exactly the records DESIGN §1 says are not events.
    #[test]
    fn validation_rules() {
        let ok = Event::Follow {
            follower: UserId(1),
            followee: UserId(2),
            ts: Ts(0),
        };
        assert_eq!(ok.validate(), Ok(()));
        let selfie = Event::Unfollow {
            follower: UserId(3),
            followee: UserId(3),
            ts: Ts(0),
        };
        assert_eq!(
            selfie.validate(),
            Err(InvalidEvent::SelfFollow { user: UserId(3) })
        );
        let zero = Event::Post {
            author: UserId(1),
            post_id: PostId(0),
            ts: Ts(5),
        };
        assert_eq!(
            zero.validate(),
            Err(InvalidEvent::ZeroId { field: "post_id" })
        );
        let nobody = Event::Seen {
            user: UserId(0),
            ts: Ts(5),
        };
        assert_eq!(
            nobody.validate(),
            Err(InvalidEvent::ZeroId { field: "user" })
        );
    }
}
