//! What a post and a delete change at the author's partition — the post's
//! record, the outbox, the author's count, the reposts that wait on it —
//! and what their deliveries and retractions change in the followers'
//! inboxes.

use super::active;
use super::edge::follows_at;
use super::effect::Step;
use super::fan_out::{announce, Change, Reach};
use super::inbox::{insert_inbox, Root};
use super::like;
use super::reply;
use super::repost;
use crate::event::{Ts, UserId};
use crate::keys::{PostRef, PostVal, Posted, TimelineKey};
use crate::kv::{Kv, KvError};
use crate::position::Version;
use crate::views;

/// `author` (owned here) posts `post_id` by event `version` at `ts`: it
/// enters the outbox and reaches the followers, unless it was deleted
/// before it came (then it is an original for good, never live, so the
/// reposts that waited for it are not live either). Whether anything
/// changed (a repeat: no). A post that replies or mentions (`addressed`)
/// keeps them and tells the post it replies to ([`reply::posted`]).
pub(super) fn post<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    (author, post_id): PostRef,
    (version, ts): (Version, Ts),
    addressed: Option<(Option<PostRef>, &[UserId])>,
) -> Result<bool, KvError> {
    match views::post(s.t, author, post_id)? {
        None => {
            let t = &mut *s.t;
            t.set_post(author, post_id, &PostVal::Live(ts, Posted::by(version)));
            t.set_outbox(author, ts, post_id, true);
            let mut u = t.user(author)?;
            u.posts += 1;
            t.set_user(author, &u);
            // The replies rule's directory first: every partition knows
            // the post is a reply before any of its readers can see it.
            if let Some((Some(parent), _)) = addressed {
                reply::rule::announce(s, (author, post_id), parent.0);
            }
            let how = (Reach::of(u.pulled), Change::Appears);
            announce(s, (author, post_id), ts, how)?;
            repost::original_posted(s, (author, post_id), ts)?;
            like::original_posted(s, (author, post_id))?;
            if let Some(addressed) = addressed {
                reply::posted(s, (author, post_id), addressed, (version, ts));
            }
        }
        Some(PostVal::Deleted(None, deleted)) => {
            let posted = Posted {
                post: Some(version),
                ..deleted
            };
            s.t.set_post(author, post_id, &PostVal::Deleted(Some(ts), posted));
            repost::original_dead(s, (author, post_id))?;
            like::original_dead(s, (author, post_id))?;
            reply::original_dead(s, (author, post_id))?;
        }
        Some(_) => return Ok(false),
    }
    Ok(true)
}

/// `author` deletes `post_id`, for good (also before the post arrives):
/// a live post leaves the outbox and every follower's inbox, and so does
/// every repost of it; a repost is taken back. Whether anything changed (a
/// post deleted already: no).
pub(super) fn delete<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    (author, post_id): PostRef,
    deletion: (Version, Ts),
) -> Result<bool, KvError> {
    let deleted = |posted: Posted| Posted {
        deleted: Some(deletion),
        ..posted
    };
    let t = &mut *s.t;
    match views::post(t, author, post_id)? {
        Some(PostVal::Deleted(..)) => return Ok(false),
        Some(PostVal::Repost(rv)) => return repost::delete(s, (author, post_id), rv),
        None => {
            let val = PostVal::Deleted(None, deleted(Posted::default()));
            t.set_post(author, post_id, &val);
        }
        Some(PostVal::Live(ts, posted)) => {
            let val = PostVal::Deleted(Some(ts), deleted(posted));
            t.set_post(author, post_id, &val);
            t.set_outbox(author, ts, post_id, false);
            let mut u = t.user(author)?;
            u.posts -= 1;
            t.set_user(author, &u);
            let how = (Reach::of(u.pulled), Change::Goes);
            announce(s, (author, post_id), ts, how)?;
            repost::original_dead(s, (author, post_id))?;
            like::original_dead(s, (author, post_id))?;
            reply::original_dead(s, (author, post_id))?;
            reply::deleted(s, (author, post_id), ts, deletion.0)?;
        }
    }
    Ok(true)
}

/// A new post `k` for each target's inbox: each that follows its author
/// through the edge named and is not asleep (judged by the partition's
/// clock; an idle reader falls asleep here).
pub(super) fn deliver<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    k: &TimelineKey,
    targets: &[(UserId, Version)],
) -> Result<(), KvError> {
    // Without a span nobody falls asleep, and a sleeper's inbox (its
    // horizon at the top) takes nothing: no record read here.
    let now = match s.ctx.inactive_after {
        Some(span) if span > 0 => Some(views::clock(s.t)?),
        _ => None,
    };
    let mut root = Root::default();
    for &(user, version) in targets {
        if !follows_at(s.t, s.ctx, user, k.author, version)? {
            continue;
        }
        let asleep = match now {
            Some(now) => active::asleep_at(s, user, now)?,
            None => false,
        };
        if !asleep {
            insert_inbox(s, (user, k), &mut root)?;
        }
    }
    Ok(())
}

/// A deleted post `k` leaves each target's inbox.
pub(super) fn retract<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    k: &TimelineKey,
    targets: &[UserId],
) -> Result<(), KvError> {
    let t = &mut *s.t;
    let mut root = Root::default();
    for &user in targets {
        if s.ctx.owns(user) && t.inbox_has(user, k)? {
            let mut u = t.user(user)?;
            let root = root.of(t, k, u.whole())?;
            t.remove_inbox(user, k, root);
            u.inbox_len = u.inbox_len.saturating_sub(1);
            t.set_user(user, &u);
            s.applied.removed += 1;
            s.applied.changed = true;
        }
    }
    Ok(())
}
