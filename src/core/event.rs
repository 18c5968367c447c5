//! Events and the newtypes they are made of.
//!
//! An [`Event`] is what upstream apps write to the `events` topic (see
//! [`EventKind`] for every kind), each with a producer timestamp. Ids are never bare `u64`s past the
//! codec: a [`UserId`] cannot be passed where a [`PostId`] is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The schema version this build writes and accepts (`"v"` in JSON).
pub const SCHEMA_VERSION: u32 = 1;

/// Repost links a repost's resolution follows at most: a repost of a
/// repost reposts the original at the end of the chain, and a chain longer
/// than this (or a cycle) resolves to nothing, so the repost never shows.
pub const MAX_REPOST_HOPS: u32 = 16;

/// Users a post mentions at most (`mentions`); more is a dead letter.
pub const MAX_MENTIONS: usize = 50;

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

impl Ts {
    /// The first `ts` taken for seconds: one day after the epoch, in ms. A
    /// smaller value is a synthetic clock (tests, generated logs) and is kept.
    pub const SECONDS_FROM: u64 = 86_400_000;
    /// 2001-01-01T00:00:00Z in ms: from here on a `ts` is milliseconds. Any
    /// time after 1972 written in seconds is below it.
    pub const MILLIS_FROM: u64 = 978_307_200_000;
    /// 3000-01-01T00:00:00Z in ms: at or past it a `ts` is taken for micro-
    /// or nanoseconds (today in microseconds is about year 57,000 in ms).
    pub const MILLIS_UNTIL: u64 = 32_503_680_000_000;

    /// Refuses a `ts` in the wrong unit: one from [`Ts::SECONDS_FROM`] up to
    /// [`Ts::MILLIS_FROM`] (seconds), or at or past [`Ts::MILLIS_UNTIL`]
    /// (micro- or nanoseconds). A rule of the event format, not a setting,
    /// so that validity stays a function of the log alone.
    pub fn check_unit(self) -> Result<(), InvalidEvent> {
        let (unit, date, fix) = match self.0 {
            t if (Self::SECONDS_FROM..Self::MILLIS_FROM).contains(&t) => (
                "seconds",
                "between 1970-01-02 and 2001-01-01",
                "multiply seconds by 1000",
            ),
            t if t >= Self::MILLIS_UNTIL => (
                "microseconds or nanoseconds",
                "after the year 3000",
                "divide microseconds by 1000, nanoseconds by 1000000",
            ),
            _ => return Ok(()),
        };
        Err(InvalidEvent::TsUnit {
            ts: self.0,
            unit,
            date,
            fix,
        })
    }
}

/// An input event, after validation. Not `Copy`: a post's mentions are a list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// inactive readers (docs/design.md, "Inactive readers are pulled"). Changes no view.
    Seen {
        /// The acting user.
        user: UserId,
        /// Producer time.
        ts: Ts,
    },
    /// `author` reposts `of_author`'s post `of_post_id` (a repost of a
    /// repost reposts its original); `post_id` is the repost's own id, in
    /// the author's id space (`delete_post` of it takes the repost back).
    /// Appended last: variants are append-only (the codec's golden bytes).
    Repost {
        /// The acting user (the reposter).
        author: UserId,
        /// The repost's own id.
        post_id: PostId,
        /// The author of the post reposted.
        of_author: UserId,
        /// The post reposted (an original, or another repost).
        of_post_id: PostId,
        /// Producer time; the repost's place in timelines.
        ts: Ts,
    },
    /// `user` blocks, mutes or hides the reposts of `target`, or lifts
    /// that (docs/semantics.md, "Blocks and mutes"). Appended last, as `Repost` was.
    Filter {
        /// The acting user (the reader who filters).
        user: UserId,
        /// The account filtered.
        target: UserId,
        /// What changes.
        change: FilterChange,
        /// Producer time.
        ts: Ts,
    },
    /// `user` likes (`liked`) or unlikes `author`'s post `post_id` (a
    /// like of a repost's id is a like of the original it resolves to).
    /// The latest such event of the user for an original, in the user's
    /// log order, decides. Appended last, as `Filter` was.
    Like {
        /// The acting user (the liker).
        user: UserId,
        /// The author of the post named.
        author: UserId,
        /// The post named (an original, or a repost of one).
        post_id: PostId,
        /// `like` (true) or `unlike` (false).
        liked: bool,
        /// Producer time.
        ts: Ts,
    },
    /// `author` publishes `post_id` as a reply (`reply_to`) and/or
    /// mentioning users: a `post` with either field (JSON kind `post`; a
    /// post with neither is [`Event::Post`], see [`Event::post`]). It is a
    /// post in every other way. Appended last, as `Like` was.
    PostTo {
        /// The acting user.
        author: UserId,
        /// The new post.
        post_id: PostId,
        /// Producer time; the post's place in every timeline.
        ts: Ts,
        /// The post it replies to (a repost's id: its original), if any.
        reply_to: Option<(UserId, PostId)>,
        /// The users it mentions: distinct, not the author, at most
        /// [`MAX_MENTIONS`], in the order written.
        mentions: Vec<UserId>,
    },
    /// `user` was active and has read `feed` up to `read_up_to`: a `seen`
    /// with `feed` (JSON kind `seen`; one without is [`Event::Seen`]). It
    /// is activity as a `seen` is, and moves the user's read marker of
    /// that feed (docs/semantics.md, "Read markers"). Appended last, as
    /// `PostTo` was.
    Mark {
        /// The acting user (the reader).
        user: UserId,
        /// Producer time.
        ts: Ts,
        /// The feed read.
        feed: Feed,
        /// The place read up to: the newest entry read.
        read_up_to: Place,
        /// Sets the marker to `read_up_to` even when it is below the
        /// marker ("mark as unread"); otherwise the marker only moves up.
        force: bool,
    },
}

impl Event {
    /// A post: [`Event::PostTo`] when it replies or mentions, else
    /// [`Event::Post`] (so each post has one form).
    pub fn post(
        author: UserId,
        post_id: PostId,
        ts: Ts,
        reply_to: Option<(UserId, PostId)>,
        mentions: Vec<UserId>,
    ) -> Event {
        match (reply_to, mentions.is_empty()) {
            (None, true) => Event::Post {
                author,
                post_id,
                ts,
            },
            _ => Event::PostTo {
                author,
                post_id,
                ts,
                reply_to,
                mentions,
            },
        }
    }

    /// A post's (`post` of either form) author and id, reply target and
    /// mentions; `None` for every other kind.
    pub fn as_post(&self) -> Option<PostParts<'_>> {
        match self {
            Event::Post {
                author, post_id, ..
            } => Some((*author, *post_id, None, &[])),
            Event::PostTo {
                author,
                post_id,
                reply_to,
                mentions,
                ..
            } => Some((*author, *post_id, *reply_to, mentions)),
            _ => None,
        }
    }
}

/// A post's author and id, the post it replies to, and the users it
/// mentions ([`Event::as_post`]).
pub type PostParts<'a> = (UserId, PostId, Option<(UserId, PostId)>, &'a [UserId]);

/// What a [`Event::Filter`] changes for the pair (user, target). Each kind
/// of filter (block, mute, hidden reposts) is settled by the pair's latest
/// event of that kind, in the user's log order. Variants are append-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FilterChange {
    /// `block`: nothing by either user reaches the other, and the follows
    /// between them made before the block ends are void.
    Block,
    /// `unblock`: ends the block (follows it voided stay void).
    Unblock,
    /// `mute`: nothing by `target` in the user's timeline, until the
    /// partition's log time reaches `until` (`None`: until `unmute`).
    Mute {
        /// The log time (ms) the mute ends at, if any.
        until: Option<Ts>,
    },
    /// `unmute`.
    Unmute,
    /// `hide_reposts`: the target's reposts leave the user's timeline.
    HideReposts,
    /// `show_reposts`.
    ShowReposts,
    /// `mute` with `"notifications": false`: a mute (as [`FilterChange::Mute`])
    /// that leaves the target's notifications of the user in place.
    /// Appended last.
    MuteKeepingNotifications {
        /// The log time (ms) the mute ends at, if any.
        until: Option<Ts>,
    },
}

impl FilterChange {
    /// The event kind as spelled in JSON.
    pub fn kind(self) -> EventKind {
        match self {
            FilterChange::Block => EventKind::Block,
            FilterChange::Unblock => EventKind::Unblock,
            FilterChange::Mute { .. } | FilterChange::MuteKeepingNotifications { .. } => {
                EventKind::Mute
            }
            FilterChange::Unmute => EventKind::Unmute,
            FilterChange::HideReposts => EventKind::HideReposts,
            FilterChange::ShowReposts => EventKind::ShowReposts,
        }
    }
}

impl Event {
    /// The acting user: the event's key and the user whose partition owns it.
    pub fn actor(&self) -> UserId {
        match *self {
            Event::Follow { follower, .. } | Event::Unfollow { follower, .. } => follower,
            Event::Post { author, .. }
            | Event::PostTo { author, .. }
            | Event::DeletePost { author, .. }
            | Event::Repost { author, .. } => author,
            Event::Seen { user, .. }
            | Event::Mark { user, .. }
            | Event::Filter { user, .. }
            | Event::Like { user, .. } => user,
        }
    }

    /// The event's producer timestamp.
    pub fn ts(&self) -> Ts {
        match *self {
            Event::Follow { ts, .. }
            | Event::Unfollow { ts, .. }
            | Event::Post { ts, .. }
            | Event::PostTo { ts, .. }
            | Event::DeletePost { ts, .. }
            | Event::Repost { ts, .. }
            | Event::Filter { ts, .. }
            | Event::Like { ts, .. }
            | Event::Seen { ts, .. }
            | Event::Mark { ts, .. } => ts,
        }
    }

    /// Whether this event also changes the views as of times before its
    /// own (docs/http-api.md, "Earlier states"): a deleted post never
    /// comes back, at any time, so a view as of an earlier time applies the
    /// later deletions too. One arm per kind: a new kind says whether it
    /// reaches back.
    pub fn reaches_back(&self) -> bool {
        match self {
            Event::DeletePost { .. } => true,
            Event::Follow { .. }
            | Event::Unfollow { .. }
            | Event::Post { .. }
            | Event::PostTo { .. }
            | Event::Seen { .. }
            | Event::Mark { .. }
            | Event::Repost { .. }
            | Event::Filter { .. }
            | Event::Like { .. } => false,
        }
    }

    /// The kind, as spelled in JSON.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Follow { .. } => EventKind::Follow,
            Event::Unfollow { .. } => EventKind::Unfollow,
            Event::Post { .. } | Event::PostTo { .. } => EventKind::Post,
            Event::DeletePost { .. } => EventKind::DeletePost,
            Event::Seen { .. } | Event::Mark { .. } => EventKind::Seen,
            Event::Repost { .. } => EventKind::Repost,
            Event::Filter { change, .. } => change.kind(),
            Event::Like { liked: true, .. } => EventKind::Like,
            Event::Like { liked: false, .. } => EventKind::Unlike,
        }
    }

    /// Checks the rules every event must meet (docs/events.md, "Ids and times"): ids > 0, no
    /// self-follow, a `ts` in milliseconds ([`Ts::check_unit`]). Decoders
    /// call this; an event that fails is not an event.
    pub fn validate(&self) -> Result<(), InvalidEvent> {
        self.ts().check_unit()?;
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
            } => nonzero([("author", author.0), ("post_id", post_id.0)])?,
            Event::PostTo {
                author,
                post_id,
                reply_to,
                ref mentions,
                ..
            } => check_post_to(author, post_id, reply_to, mentions)?,
            Event::Seen { user, .. } => {
                if user.0 == 0 {
                    return Err(InvalidEvent::ZeroId { field: "user" });
                }
            }
            Event::Mark {
                user, read_up_to, ..
            } => {
                if user.0 == 0 {
                    return Err(InvalidEvent::ZeroId { field: "user" });
                }
                read_up_to.ts.check_unit()?;
            }
            Event::Repost {
                author,
                post_id,
                of_author,
                of_post_id,
                ..
            } => {
                nonzero([
                    ("author", author.0),
                    ("post_id", post_id.0),
                    ("of_author", of_author.0),
                    ("of_post_id", of_post_id.0),
                ])?;
                if (author, post_id) == (of_author, of_post_id) {
                    return Err(InvalidEvent::RepostsItself { author, post_id });
                }
            }
            Event::Like {
                user,
                author,
                post_id,
                ..
            } => nonzero([
                ("user", user.0),
                ("author", author.0),
                ("post_id", post_id.0),
            ])?,
            Event::Filter {
                user,
                target,
                change,
                ..
            } => {
                nonzero([("user", user.0), ("target", target.0)])?;
                if user == target {
                    return Err(InvalidEvent::SelfFilter {
                        user,
                        kind: change.kind().as_str(),
                    });
                }
                if let FilterChange::Mute { until: Some(until) }
                | FilterChange::MuteKeepingNotifications { until: Some(until) } = change
                {
                    until.check_unit()?;
                    if until <= self.ts() {
                        return Err(InvalidEvent::MuteEndsBeforeIt {
                            until,
                            ts: self.ts(),
                        });
                    }
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
    /// `repost`
    Repost,
    /// `block`
    Block,
    /// `unblock`
    Unblock,
    /// `mute`
    Mute,
    /// `unmute`
    Unmute,
    /// `hide_reposts`
    HideReposts,
    /// `show_reposts`
    ShowReposts,
    /// `like`
    Like,
    /// `unlike`
    Unlike,
}

impl EventKind {
    /// Every kind, in the order of the JSON spellings in docs/events.md
    /// (follow, unfollow, post, delete_post, seen, repost, block, unblock,
    /// mute, unmute, hide_reposts, show_reposts, like, unlike). Derived from
    /// [`EventKind::next`], whose exhaustive `match` makes a new kind
    /// impossible to leave out.
    pub fn all() -> impl Iterator<Item = EventKind> {
        std::iter::successors(Some(EventKind::Follow), |k| k.next())
    }

    /// How many kinds there are (the length of [`EventKind::all`]).
    pub const COUNT: usize = {
        let (mut n, mut k) = (1, EventKind::Follow);
        while let Some(next) = k.next() {
            (n, k) = (n + 1, next);
        }
        n
    };

    /// This kind's place in [`EventKind::all`] (its declaration order,
    /// which `all` follows: a unit test checks it), for tables by kind.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The kind after this one in [`EventKind::all`].
    const fn next(self) -> Option<EventKind> {
        match self {
            EventKind::Follow => Some(EventKind::Unfollow),
            EventKind::Unfollow => Some(EventKind::Post),
            EventKind::Post => Some(EventKind::DeletePost),
            EventKind::DeletePost => Some(EventKind::Seen),
            EventKind::Seen => Some(EventKind::Repost),
            EventKind::Repost => Some(EventKind::Block),
            EventKind::Block => Some(EventKind::Unblock),
            EventKind::Unblock => Some(EventKind::Mute),
            EventKind::Mute => Some(EventKind::Unmute),
            EventKind::Unmute => Some(EventKind::HideReposts),
            EventKind::HideReposts => Some(EventKind::ShowReposts),
            EventKind::ShowReposts => Some(EventKind::Like),
            EventKind::Like => Some(EventKind::Unlike),
            EventKind::Unlike => None,
        }
    }
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
            EventKind::Repost => "repost",
            EventKind::Block => "block",
            EventKind::Unblock => "unblock",
            EventKind::Mute => "mute",
            EventKind::Unmute => "unmute",
            EventKind::HideReposts => "hide_reposts",
            EventKind::ShowReposts => "show_reposts",
            EventKind::Like => "like",
            EventKind::Unlike => "unlike",
        }
    }
}

mod invalid;
mod place;
pub use invalid::InvalidEvent;
use invalid::{check_post_to, nonzero};
pub use place::{Feed, Place};

#[cfg(test)]
mod tests;
