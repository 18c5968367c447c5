//! What a message changes, and what it sends. Given a partition's state and
//! one message, stage the changes in a [`Txn`] and push the outgoing
//! [`Effect`]s into a buffer; the task (the imperative shell) commits and
//! ships them.
//!
//! One owner per user: every function here touches only users owned by the
//! partition it runs in, and reaches other users' partitions by sending an
//! [`Effect`]. See the crate docs for the guarantees this upholds.

use super::active;
use super::edge::Edge;
use super::effect::{Applied, Ctx, Effect, Out, Step};
use super::filter::{BlockState, Blocking, Pair, Toggle};
use super::filter_rules;
use super::follow;
use super::like;
use super::marker;
use super::post;
use super::pulled;
use super::reply;
use super::repost;
use crate::event::Event;
use crate::keys::TimelineKey;
use crate::kv::{Kv, KvError, Txn};
use crate::position::Version;

/// Applies one input event (already validated, owned by this partition):
/// a table of event kinds, each handed to the rule module that decides
/// what it changes.
// Long: the dispatch table of every event kind, one arm each.
pub fn apply_event<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    ctx: &Ctx,
    event: &Event,
    version: Version,
    out: &mut Vec<Out>,
) -> Result<Applied, KvError> {
    let mut applied = Applied::default();
    let s = &mut Step::new(t, ctx, &mut applied, out);
    // Any own event, even a repeat, is activity (docs/design.md, "Event kinds").
    active::touch(s, event.actor(), event.ts())?;
    let changed = match *event {
        Event::Follow {
            follower,
            followee,
            ts,
        } => follow::follow(
            s,
            Edge {
                follower,
                author: followee,
            },
            version,
            ts,
        )?,
        Event::Unfollow {
            follower,
            followee,
            ts,
        } => follow::unfollow(
            s,
            Edge {
                follower,
                author: followee,
            },
            version,
            ts,
        )?,
        Event::Filter {
            user,
            target,
            change,
            ts,
        } => filter_rules::event(
            s,
            Pair {
                owner: user,
                other: target,
            },
            change,
            (version, ts),
        )?,
        Event::Post {
            author,
            post_id,
            ts,
        } => post::post(s, (author, post_id), (version, ts), None)?,
        Event::PostTo {
            author,
            post_id,
            ts,
            reply_to,
            ref mentions,
        } => post::post(
            s,
            (author, post_id),
            (version, ts),
            Some((reply_to, mentions)),
        )?,
        Event::Repost {
            author,
            post_id,
            of_author,
            of_post_id,
            ts,
        } => repost::event(s, (author, post_id), (of_author, of_post_id), (version, ts))?,
        Event::DeletePost {
            author,
            post_id,
            ts,
        } => post::delete(s, (author, post_id), (version, ts))?,
        Event::Like {
            user,
            author,
            post_id,
            liked,
            ts,
        } => like::event(s, user, (author, post_id), liked, (version, ts)),
        // Activity changes no view (docs/design.md, "Inactive readers are pulled"): only the user's record.
        Event::Seen { .. } => false,
        Event::Mark {
            user,
            ts,
            feed,
            read_up_to,
            force,
        } => marker::event(
            s,
            user,
            feed,
            marker::Seen {
                place: read_up_to,
                force,
                version,
                ts,
            },
        )?,
    };
    applied.changed |= changed;
    Ok(applied)
}

/// Applies one internal message addressed to users of this partition: a
/// table of message kinds, each handed to the rule module it belongs to.
/// Stale, duplicate and no-longer-relevant messages change nothing.
// Long: the dispatch table of every internal message kind, one arm each.
pub fn apply_effect<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    ctx: &Ctx,
    effect: &Effect,
    out: &mut Vec<Out>,
) -> Result<Applied, KvError> {
    let mut applied = Applied::default();
    let s = &mut Step::new(t, ctx, &mut applied, out);
    match effect {
        &Effect::FollowerAdded {
            author,
            follower,
            version,
            ts,
        } => follow::follower_added(s, Edge { follower, author }, version, ts)?,
        &Effect::FollowerRemoved {
            author,
            follower,
            version,
        } => follow::follower_removed(s, Edge { follower, author }, version)?,
        &Effect::Refollowed {
            author,
            follower,
            version,
            last,
        } => follow::refollowed(s, Edge { follower, author }, version, last)?,
        &Effect::Blocked {
            user,
            by,
            version,
            on,
            ts,
            ended,
        } => {
            let toggle = Toggle { version, on, ts };
            let state = BlockState { toggle, ended };
            filter_rules::blocked_by(s, Blocking { user, by }, state)?
        }
        &Effect::Deliver {
            author,
            post_id,
            ts,
            ref targets,
        } => post::deliver(
            s,
            &TimelineKey {
                ts,
                post_id,
                author,
            },
            targets,
        )?,
        &Effect::Retract {
            author,
            post_id,
            ts,
            ref targets,
        } => post::retract(
            s,
            &TimelineKey {
                ts,
                post_id,
                author,
            },
            targets,
        )?,
        &Effect::Backfill {
            author,
            follower,
            version,
            ref posts,
            truncated,
        } => pulled::backfilled(s, Edge { follower, author }, version, (posts, truncated))?,
        &Effect::Pull {
            author,
            pulled,
            ref posts,
            truncated,
            ref targets,
        } => pulled::pulled_or_pushed(s, author, pulled, (posts, truncated), targets)?,
        &Effect::Copy {
            author,
            pulled,
            ref posts,
            truncated,
        } => pulled::replace_copy(s, author, pulled, (posts, truncated))?,
        &Effect::CopyPost {
            author,
            post_id,
            ts,
            live,
        } => pulled::change_copy(
            s,
            &TimelineKey {
                ts,
                post_id,
                author,
            },
            live,
        )?,
        &Effect::PullThreshold { threshold } => pulled::set_threshold(s, threshold),
        &Effect::Refill {
            author,
            follower,
            version,
            wake,
        } => {
            let of = active::RefillOf {
                author,
                follower,
                version,
                wake,
            };
            active::answer_refill(s, of)?
        }
        &Effect::Refilled {
            author,
            follower,
            version,
            wake,
            pulled,
            ref posts,
            truncated,
        } => {
            let of = active::RefillOf {
                author,
                follower,
                version,
                wake,
            };
            active::refilled(s, of, pulled, (posts, truncated))?
        }
        e @ (Effect::RepostOf { .. }
        | Effect::Reposted { .. }
        | Effect::Unrepost { .. }
        | Effect::RepostDir { .. }) => repost::apply_effect(s, e)?,
        e @ (Effect::LikeOf { .. } | Effect::LikeLive { .. }) => like::apply_effect(s, e)?,
        e @ (Effect::ReplyOf { .. } | Effect::ReplyDir { .. } | Effect::MentionOf { .. }) => {
            reply::apply_effect(s, e)?
        }
    }
    Ok(applied)
}
