//! What a message changes, and what it sends. Given a partition's state and
//! one message, stage the changes in a [`Txn`] and push the outgoing
//! [`Effect`]s into a buffer; the task (the imperative shell) commits and
//! ships them.
//!
//! One owner per user: every function here touches only users owned by the
//! partition it runs in, and reaches other users' partitions by sending an
//! [`Effect`]. See the crate docs for the guarantees this upholds.

use super::active;
use super::edge::{follows_at, Edge};
use super::effect::{Applied, Ctx, Effect, Out, Step};
use super::fan_out::{announce, Change, Reach};
use super::filter;
use super::filter_rules;
use super::follow;
use super::inbox::{insert_inbox, Root};
use super::pulled;
use super::repost;
use crate::event::{Event, Ts, UserId};
use crate::keys::{PostRef, PostVal, Posted, TimelineKey};
use crate::kv::{Kv, KvError, Txn};
use crate::position::Version;
use crate::views;

/// Applies one input event (already validated, owned by this partition).
// Long: one arm per event kind, each the whole of what that event decides
// here; splitting it would scatter the table of event kinds.
pub fn apply_event<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    ctx: &Ctx,
    event: &Event,
    version: Version,
    out: &mut Vec<Out>,
) -> Result<Applied, KvError> {
    let mut applied = Applied::default();
    // Any own event, even a repeat, is activity (docs/design.md, "Event kinds").
    active::touch(
        &mut Step::new(t, ctx, &mut applied, out),
        event.actor(),
        event.ts(),
    )?;
    match *event {
        Event::Follow {
            follower,
            followee,
            ts,
        } => {
            let edge = Edge {
                follower,
                author: followee,
            };
            if !follow::follow(&mut Step::new(t, ctx, &mut applied, out), edge, version, ts)? {
                return Ok(applied);
            }
        }
        Event::Unfollow {
            follower,
            followee,
            ts,
        } => {
            let edge = Edge {
                follower,
                author: followee,
            };
            if !follow::unfollow(&mut Step::new(t, ctx, &mut applied, out), edge, version, ts)? {
                return Ok(applied);
            }
        }
        Event::Filter {
            user,
            target,
            change,
            ts,
        } => {
            let pair = filter::Pair {
                owner: user,
                other: target,
            };
            if !filter_rules::event(
                &mut Step::new(t, ctx, &mut applied, out),
                pair,
                change,
                (version, ts),
            )? {
                return Ok(applied);
            }
        }
        Event::Post {
            author,
            post_id,
            ts,
        } => match views::post(t, author, post_id)? {
            None => {
                t.set_post(author, post_id, &PostVal::Live(ts, Posted::by(version)));
                t.set_outbox(author, ts, post_id, true);
                let mut u = t.user(author)?;
                u.posts += 1;
                t.set_user(author, &u);
                announce(
                    t,
                    ctx,
                    (author, post_id),
                    ts,
                    (Reach::of(u.pulled), Change::Appears),
                    out,
                )?;
                repost::original_posted(t, ctx, (author, post_id), ts, out)?;
            }
            // Deleted before it came: an original for good, never live,
            // so the reposts that waited for it are not live either.
            Some(PostVal::Deleted(None, deleted)) => {
                let posted = Posted {
                    post: Some(version),
                    ..deleted
                };
                t.set_post(author, post_id, &PostVal::Deleted(Some(ts), posted));
                repost::original_dead(t, ctx, (author, post_id), out)?;
            }
            Some(_) => return Ok(applied),
        },
        Event::Repost {
            author,
            post_id,
            of_author,
            of_post_id,
            ts,
        } => {
            let of = (of_author, of_post_id);
            if !repost::event(t, ctx, (author, post_id), of, (ts, version), out)? {
                return Ok(applied);
            }
        }
        Event::DeletePost {
            author,
            post_id,
            ts,
        } => {
            if !delete_post(t, ctx, (author, post_id), (version, ts), out)? {
                return Ok(applied);
            }
        }
        // Activity changes no view (docs/design.md, "Inactive readers are pulled"): only the user's record.
        Event::Seen { .. } => return Ok(applied),
    }
    applied.changed = true;
    Ok(applied)
}

/// `author` deletes `post_id`, for good (also before the post arrives):
/// a live post leaves the outbox and every follower's inbox, and so does
/// every repost of it; a repost is taken back. Whether anything changed (a
/// post deleted already: no).
fn delete_post<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    ctx: &Ctx,
    (author, post_id): PostRef,
    deletion: (Version, Ts),
    out: &mut Vec<Out>,
) -> Result<bool, KvError> {
    let deleted = |posted: Posted| Posted {
        deleted: Some(deletion),
        ..posted
    };
    match views::post(t, author, post_id)? {
        Some(PostVal::Deleted(..)) => return Ok(false),
        Some(PostVal::Repost(rv)) => return repost::delete(t, ctx, (author, post_id), rv, out),
        None => {
            let val = PostVal::Deleted(None, deleted(Posted::default()));
            t.set_post(author, post_id, &val);
        }
        Some(PostVal::Live(ts, posted)) => {
            t.set_post(
                author,
                post_id,
                &PostVal::Deleted(Some(ts), deleted(posted)),
            );
            t.set_outbox(author, ts, post_id, false);
            let mut u = t.user(author)?;
            u.posts -= 1;
            t.set_user(author, &u);
            announce(
                t,
                ctx,
                (author, post_id),
                ts,
                (Reach::of(u.pulled), Change::Goes),
                out,
            )?;
            repost::original_dead(t, ctx, (author, post_id), out)?;
        }
    }
    Ok(true)
}

/// Applies one internal message addressed to users of this partition.
/// Stale, duplicate and no-longer-relevant messages change nothing.
// Long: the dispatch table of every internal message kind, one arm each.
pub fn apply_effect<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    ctx: &Ctx,
    effect: &Effect,
    out: &mut Vec<Out>,
) -> Result<Applied, KvError> {
    let mut applied = Applied::default();
    match effect {
        &Effect::FollowerAdded {
            author,
            follower,
            version,
            ts,
        } => follow::follower_added(
            &mut Step::new(t, ctx, &mut applied, out),
            Edge { follower, author },
            version,
            ts,
        )?,
        &Effect::FollowerRemoved {
            author,
            follower,
            version,
        } => follow::follower_removed(
            &mut Step::new(t, ctx, &mut applied, out),
            Edge { follower, author },
            version,
        )?,
        &Effect::Refollowed {
            author,
            follower,
            version,
            last,
        } => follow::refollowed(
            &mut Step::new(t, ctx, &mut applied, out),
            Edge { follower, author },
            version,
            last,
        )?,
        &Effect::Blocked {
            user,
            by,
            version,
            on,
            ts,
            ended,
        } => {
            let toggle = filter::Toggle { version, on, ts };
            let state = filter::BlockState { toggle, ended };
            let blocking = filter::Blocking { user, by };
            filter_rules::blocked_by(&mut Step::new(t, ctx, &mut applied, out), blocking, state)?;
        }
        Effect::Deliver {
            author,
            post_id,
            ts,
            targets,
        } => {
            let k = TimelineKey {
                ts: *ts,
                post_id: *post_id,
                author: *author,
            };
            deliver(t, ctx, &k, targets, &mut applied)?;
        }
        Effect::Backfill {
            author,
            follower,
            version,
            posts,
            truncated,
        } => {
            if follows_at(t, ctx, *follower, *author, *version)? {
                let posts = (&posts[..], *truncated);
                let edge = Edge {
                    follower: *follower,
                    author: *author,
                };
                pulled::pull_for(t, ctx, edge, false, posts, &mut applied)?;
            }
        }
        Effect::Pull {
            author,
            pulled,
            posts,
            truncated,
            targets,
        } => {
            for &(user, version) in targets {
                if follows_at(t, ctx, user, *author, version)? {
                    let posts = (&posts[..], *truncated);
                    let edge = Edge {
                        follower: user,
                        author: *author,
                    };
                    pulled::pull_for(t, ctx, edge, *pulled, posts, &mut applied)?;
                }
            }
        }
        Effect::Copy {
            author,
            pulled,
            posts,
            truncated,
        } => {
            pulled::replace_copy(t, *author, *pulled, posts, *truncated)?;
            applied.changed = true;
        }
        &Effect::CopyPost {
            author,
            post_id,
            ts,
            live,
        } => {
            let k = TimelineKey {
                ts,
                post_id,
                author,
            };
            applied.changed |= pulled::change_copy(t, ctx, &k, live)?;
        }
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
            active::answer_refill(t, ctx, of, out)?
        }
        Effect::Refilled {
            author,
            follower,
            version,
            wake,
            pulled,
            posts,
            truncated,
        } => {
            let of = active::RefillOf {
                author: *author,
                follower: *follower,
                version: *version,
                wake: *wake,
            };
            let posts = (&posts[..], *truncated);
            active::refilled(t, ctx, of, *pulled, posts, &mut applied)?;
        }
        &Effect::PullThreshold { threshold } => {
            t.set_pull_threshold(threshold);
            applied.changed = true;
        }
        e @ (Effect::RepostOf { .. }
        | Effect::Reposted { .. }
        | Effect::Unrepost { .. }
        | Effect::RepostDir { .. }) => {
            repost::apply_effect(&mut Step::new(t, ctx, &mut applied, out), e)?
        }
        Effect::Retract {
            author,
            post_id,
            ts,
            targets,
        } => {
            let k = TimelineKey {
                ts: *ts,
                post_id: *post_id,
                author: *author,
            };
            retract(t, ctx, &k, targets, &mut applied)?;
        }
    }
    Ok(applied)
}

/// A deleted post `k` leaves each target's inbox.
fn retract<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    ctx: &Ctx,
    k: &TimelineKey,
    targets: &[UserId],
    applied: &mut Applied,
) -> Result<(), KvError> {
    let mut root = Root::default();
    for &user in targets {
        if ctx.owns(user) && t.inbox_has(user, k)? {
            let mut u = t.user(user)?;
            let root = root.of(t, k, u.whole())?;
            t.remove_inbox(user, k, root);
            u.inbox_len = u.inbox_len.saturating_sub(1);
            t.set_user(user, &u);
            applied.removed += 1;
            applied.changed = true;
        }
    }
    Ok(())
}

/// A new post `k` for each target's inbox: each that follows its author
/// through the edge named and is not asleep (judged by the partition's
/// clock; an idle reader falls asleep here).
fn deliver<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    ctx: &Ctx,
    k: &TimelineKey,
    targets: &[(UserId, Version)],
    applied: &mut Applied,
) -> Result<(), KvError> {
    // Without a span nobody falls asleep, and a sleeper's inbox (its
    // horizon at the top) takes nothing: no record read here.
    let now = match ctx.inactive_after {
        Some(span) if span > 0 => Some(views::clock(t)?),
        _ => None,
    };
    let mut root = Root::default();
    for &(user, version) in targets {
        if !follows_at(t, ctx, user, k.author, version)? {
            continue;
        }
        let asleep = match now {
            Some(now) => active::asleep_at(t, ctx, user, now, applied)?,
            None => false,
        };
        if !asleep {
            insert_inbox(t, ctx, (user, k), &mut root, applied)?;
        }
    }
    Ok(())
}
