//! Pulled authors (docs/design.md, "Big accounts are pulled"): an author with at least
//! the pull threshold in force of live followers is not pushed into every
//! follower's inbox. Each partition keeps a copy of the author's newest
//! posts (one message per partition per post), each follower's record lists
//! the pulled authors they follow, and a timeline read merges those copies
//! with the inbox ([`crate::timeline`]).
//!
//! Whether an author is pulled changes only when the author gains or loses
//! a follower — messages that arrive at the author's partition in the order
//! of its `effects` log — under the threshold in force, which only a
//! message in that same log changes (a processor asks for its configured
//! one with [`threshold_request`]). So every owner that replays the log,
//! quietly or not, decides the same changes, with the same followers,
//! whatever it interleaves them with. Only the posts a change carries
//! depend on that interleaving, and every message that carries posts
//! replaces what came before it.

use super::edge::{follows_at, Edge};
use super::effect::{pulls, Ctx, Effect, Out, Step};
use super::gauges::Gauge;
use super::inbox::purge_author;
use crate::event::{PostId, Ts, UserId};
use crate::keys::{CopyVal, TimelineKey, UserVal};
use crate::kv::{Cf, Kv, KvError, Txn};
use crate::partition::Partition;
use crate::position::Version;
use crate::views;

/// The newest posts of `author` (at most the inbox cap), newest first, and
/// whether older ones exist.
pub(super) fn newest_posts<K: Kv + ?Sized>(
    t: &Txn<'_, K>,
    ctx: &Ctx,
    author: UserId,
) -> Result<(Vec<(Ts, PostId)>, bool), KvError> {
    let mut posts = Vec::new();
    for r in views::outbox(t, author, None) {
        if posts.len() as u64 == ctx.inbox_cap {
            return Ok((posts, true));
        }
        posts.push(r?);
    }
    Ok((posts, false))
}

/// After `author` (owned here, record `u`, staged by the caller) gained or
/// lost a follower: promotes or demotes them when their follower count
/// crossed the line, telling every partition and every follower. Whether
/// it did.
pub(super) fn follower_count_changed<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    author: UserId,
    u: &mut UserVal,
) -> Result<bool, KvError> {
    let pulled = pulls(views::pull_threshold(s.t)?, u.followers, u.pulled);
    if pulled == u.pulled {
        return Ok(false);
    }
    u.pulled = pulled;
    let (posts, truncated) = newest_posts(s.t, s.ctx, author)?;
    let copy = |p: Partition| Out {
        partition: p,
        effect: Effect::Copy {
            author,
            pulled,
            posts: if pulled { posts.clone() } else { Vec::new() },
            truncated,
        },
    };
    // Promoted: every partition holds the copy before any follower reads
    // it. Demoted: every follower has the posts back in the inbox before
    // the copy goes. Messages from here reach each partition in order.
    if pulled {
        s.out.extend(Partition::all(s.ctx.partitions).map(copy));
    }
    let posts_back = if pulled { Vec::new() } else { posts.clone() };
    super::fan_out::fan_out(s, author, |targets| Effect::Pull {
        author,
        pulled,
        posts: posts_back.clone(),
        truncated: truncated && !pulled,
        targets,
    })?;
    if !pulled {
        s.out.extend(Partition::all(s.ctx.partitions).map(copy));
    }
    Ok(true)
}

/// The message that asks for this processor's configured pull threshold
/// (to this partition itself, through its `effects` log), when it is not
/// the one in force; `None` when it is, or none is configured.
pub fn threshold_request(kv: &(impl Kv + ?Sized), ctx: &Ctx) -> Result<Option<Out>, KvError> {
    let Some(threshold) = ctx.pull_threshold else {
        return Ok(None);
    };
    Ok((views::pull_threshold(kv)? != threshold).then_some(Out {
        partition: ctx.partition,
        effect: Effect::PullThreshold { threshold },
    }))
}

/// `follower` (owned here) follows `author`, which is pulled (`pulled`) or
/// pushed: marks or unmarks it, and empties or refills the follower's inbox
/// of the author's posts (with `posts`, newest first, as a backfill).
pub(super) fn pull_for<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    Edge { follower, author }: Edge,
    pulled: bool,
    (posts, truncated): (&[(Ts, PostId)], bool),
) -> Result<(), KvError> {
    let (t, applied) = (&mut *s.t, &mut *s.applied);
    if pulled {
        applied.changed |= t.set_pull(follower, author, true)?;
        // The partition's copy serves the author from here on; entries of
        // the author left in the inbox could miss a later deletion.
        let purged = purge_author(t, follower, author)?;
        applied.removed += purged;
        applied.changed |= purged > 0;
        return Ok(());
    }
    if t.user(follower)?.marks > 0 {
        applied.changed |= t.set_pull(follower, author, false)?;
    }
    super::inbox::backfill(s, (author, follower), posts, truncated)
}

/// The author's answer to a follow of `edge` by event `version`: its
/// newest posts (a backfill), applied when the follower (owned here) still
/// follows through that edge.
pub(super) fn backfilled<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    edge: Edge,
    version: Version,
    posts: (&[(Ts, PostId)], bool),
) -> Result<(), KvError> {
    if follows_at(s.t, s.ctx, edge.follower, edge.author, version)? {
        pull_for(s, edge, false, posts)?;
    }
    Ok(())
}

/// `author` became pulled (`pulled`) or pushed: each target (owned here)
/// that follows through the edge named is marked or unmarked, its inbox
/// emptied of the author or filled with `posts`.
pub(super) fn pulled_or_pushed<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    author: UserId,
    pulled: bool,
    posts: (&[(Ts, PostId)], bool),
    targets: &[(UserId, Version)],
) -> Result<(), KvError> {
    for &(follower, version) in targets {
        if follows_at(s.t, s.ctx, follower, author, version)? {
            pull_for(s, Edge { follower, author }, pulled, posts)?;
        }
    }
    Ok(())
}

/// The pull threshold in force in this partition becomes `threshold`.
pub(super) fn set_threshold<K: Kv + ?Sized>(s: &mut Step<'_, '_, K>, threshold: u64) {
    s.t.set_pull_threshold(threshold);
    s.applied.changed = true;
}

/// This partition's copy of `author` becomes `posts` (`pulled`), or goes.
pub(super) fn replace_copy<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    author: UserId,
    pulled: bool,
    (posts, truncated): (&[(Ts, PostId)], bool),
) -> Result<(), KvError> {
    s.applied.changed = true;
    let t = &mut *s.t;
    let old: Vec<TimelineKey> = views::copy_entries(t, author, None).collect::<Result<_, _>>()?;
    for k in &old {
        t.set_copy_entry(k, false);
    }
    let had = views::copy_of(t, author)?.is_some();
    t.bump(Gauge::Copies, i64::from(pulled) - i64::from(had))?;
    if !pulled {
        t.set_copy_header(author, None);
        return Ok(());
    }
    let key = |&(ts, post_id): &(Ts, PostId)| TimelineKey {
        ts,
        post_id,
        author,
    };
    for p in posts {
        t.set_copy_entry(&key(p), true);
    }
    let header = CopyVal {
        len: posts.len() as u64,
        horizon: posts.last().filter(|_| truncated).map(key),
    };
    t.set_copy_header(author, Some(&header));
    Ok(())
}

/// A pulled author's post enters (`live`) or leaves this partition's copy,
/// kept to the inbox cap (the horizon lowered to what a trim cuts). A
/// partition without a copy of the author (no longer pulled) ignores it.
pub(super) fn change_copy<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    k: &TimelineKey,
    live: bool,
) -> Result<(), KvError> {
    let changed = copy_changed(s.t, s.ctx, k, live)?;
    s.applied.changed |= changed;
    Ok(())
}

/// [`change_copy`]'s change; whether there was one.
fn copy_changed<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    ctx: &Ctx,
    k: &TimelineKey,
    live: bool,
) -> Result<bool, KvError> {
    let Some(mut header) = views::copy_of(t, k.author)? else {
        return Ok(false);
    };
    let there = t.contains(Cf::Copies, &crate::keys::copy(k.author, k.ts, k.post_id))?;
    if !live {
        if there {
            t.set_copy_entry(k, false);
            header.len = header.len.saturating_sub(1);
            t.set_copy_header(k.author, Some(&header));
        }
        return Ok(there);
    }
    if there || header.horizon.is_some_and(|h| *k >= h) {
        return Ok(false);
    }
    t.set_copy_entry(k, true);
    header.len += 1;
    if header.len >= ctx.inbox_trim_at() {
        let entries: Vec<TimelineKey> =
            views::copy_entries(t, k.author, None).collect::<Result<_, _>>()?;
        let cut = entries.get(ctx.inbox_cap as usize..).unwrap_or_default();
        for c in cut {
            t.set_copy_entry(c, false);
        }
        if let Some(first) = cut.first() {
            header.horizon = Some(header.horizon.map_or(*first, |h| h.min(*first)));
        }
        header.len = entries.len().min(ctx.inbox_cap as usize) as u64;
    }
    t.set_copy_header(k.author, Some(&header));
    Ok(true)
}

#[cfg(test)]
mod tests;
