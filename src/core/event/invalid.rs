//! Why a well-formed record is still not an event, and the rules of a
//! post's `reply_to` and `mentions`.

use super::{PostId, Ts, UserId, MAX_MENTIONS};

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
    /// A user blocks, mutes or hides themself.
    #[error("user {user} cannot {kind} themself")]
    SelfFilter {
        /// The user.
        user: UserId,
        /// The event kind.
        kind: &'static str,
    },
    /// A mute's `until` is not after its own `ts`.
    #[error("mute: `until` {until} must be later than the event's `ts` {ts}")]
    MuteEndsBeforeIt {
        /// The mute's end.
        until: Ts,
        /// The event's time.
        ts: Ts,
    },
    /// A repost names its own id as the post it reposts.
    #[error("repost {post_id} of user {author} names itself as the post it reposts")]
    RepostsItself {
        /// The reposter.
        author: UserId,
        /// The repost's id.
        post_id: PostId,
    },
    /// A post replies to its own id.
    #[error("post {post_id} of user {author} names itself in `reply_to`")]
    RepliesToItself {
        /// The author.
        author: UserId,
        /// The post's id.
        post_id: PostId,
    },
    /// A binary [`Event::PostTo`] with neither a reply target nor mentions.
    #[error("a post-to event has neither `reply_to` nor `mentions`; send a plain post")]
    PostToWithout,
    /// More mentions than [`MAX_MENTIONS`].
    #[error("`mentions` lists {n} users; a post mentions at most {max}")]
    TooManyMentions {
        /// How many were listed.
        n: usize,
        /// The limit.
        max: usize,
    },
    /// A post mentions its author.
    #[error("`mentions` lists the post's author {author}; a post does not mention its author")]
    MentionsAuthor {
        /// The author.
        author: UserId,
    },
    /// A user is listed twice in `mentions`.
    #[error("`mentions` lists user {user} twice; each user once")]
    MentionedTwice {
        /// The user listed twice.
        user: UserId,
    },
    /// `ts` is not in milliseconds: seconds (1970-01-02 to 2001, as ms), or
    /// micro- or nanoseconds (after the year 3000, as ms).
    #[error("`ts` {ts} looks like {unit}, not milliseconds since the Unix epoch (in ms it would be {date}); {fix}")]
    TsUnit {
        /// The offending value.
        ts: u64,
        /// `seconds` or `microseconds or nanoseconds`.
        unit: &'static str,
        /// What the value means in milliseconds.
        date: &'static str,
        /// How to write it.
        fix: &'static str,
    },
}

/// The rules of a post's `reply_to` and `mentions` (docs/events.md, "Replies and mentions").
pub(super) fn check_post_to(
    author: UserId,
    post_id: PostId,
    reply_to: Option<(UserId, PostId)>,
    mentions: &[UserId],
) -> Result<(), InvalidEvent> {
    nonzero([("author", author.0), ("post_id", post_id.0)])?;
    if let Some((a, p)) = reply_to {
        nonzero([("reply_to.author", a.0), ("reply_to.post_id", p.0)])?;
        if (a, p) == (author, post_id) {
            return Err(InvalidEvent::RepliesToItself { author, post_id });
        }
    }
    if reply_to.is_none() && mentions.is_empty() {
        return Err(InvalidEvent::PostToWithout);
    }
    if mentions.len() > MAX_MENTIONS {
        return Err(InvalidEvent::TooManyMentions {
            n: mentions.len(),
            max: MAX_MENTIONS,
        });
    }
    for (i, &m) in mentions.iter().enumerate() {
        if m.0 == 0 {
            return Err(InvalidEvent::ZeroId { field: "mentions" });
        }
        if m == author {
            return Err(InvalidEvent::MentionsAuthor { author });
        }
        if mentions[..i].contains(&m) {
            return Err(InvalidEvent::MentionedTwice { user: m });
        }
    }
    Ok(())
}

/// The first of `ids` (field, id) that is 0, as the error naming it.
pub(super) fn nonzero<const N: usize>(ids: [(&'static str, u64); N]) -> Result<(), InvalidEvent> {
    match ids.iter().find(|(_, id)| *id == 0) {
        Some(&(field, _)) => Err(InvalidEvent::ZeroId { field }),
        None => Ok(()),
    }
}
