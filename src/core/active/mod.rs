//! Inactive readers (docs/design.md, "Inactive readers are pulled"): a user with no event of
//! their own for the configured span of log time falls asleep when a
//! delivery reaches them. Log time is the partition's clock, the newest
//! event time it has applied: the same `events` log holds the user's own
//! events, so a partition that lags behind others in a backlog does not
//! take its users for idle when deliveries from ahead reach them. Their inbox is emptied and its horizon put at
//! the top, so deliveries skip them and every read takes the pull path.
//!
//! Their next own event (of any kind: a follow, a post, a repost, a
//! block, a `seen`…) wakes them: the inbox starts empty again and each followee that is not
//! pulled is asked for its newest posts ([`Effect::Refill`]). The author's
//! partition answers as it answers a new follow ([`Effect::Refilled`]): a
//! backfill, after which its deliveries follow in order. Until every
//! followee asked has answered (or was unfollowed), reads still take the
//! pull path; then the inbox, filled and trimmed as any other, serves them.
//!
//! Readers are exact asleep, waking or awake, so only the cost of a read
//! depends on when a user fell asleep. That depends on how a partition
//! interleaves its two inputs, and on each owner's setting: neither is in
//! the state's identity.

use super::edge::{follows_at, Edge};
use super::effect::{Ctx, Effect, Out, Step, Wake};
use super::gauges::Gauge;
use super::inbox::lower_horizon;
use super::pulled;
use crate::event::{PostId, Ts, UserId};
use crate::keys::{self, TimelineKey, UserVal};
use crate::kv::{u64_at, Cf, Kv, KvError, Txn};
use crate::position::Version;
use crate::views::{self, live_edges};

/// `user` (owned here) acted at log time `ts`: the user is active from then
/// on, and wakes if asleep.
pub(super) fn touch<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    user: UserId,
    ts: Ts,
) -> Result<(), KvError> {
    s.t.advance_clock(ts)?;
    let mut u = s.t.user(user)?;
    if u.active >= ts && !u.asleep {
        return Ok(());
    }
    u.active = u.active.max(ts);
    if u.asleep {
        wake(s, user, &mut u)?;
    }
    s.t.set_user(user, &u);
    s.applied.changed = true;
    Ok(())
}

/// Wakes `user` (record `u`, staged by the caller): asks every followee
/// that is not pulled for a refill of the empty inbox.
fn wake<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    user: UserId,
    u: &mut UserVal,
) -> Result<(), KvError> {
    u.asleep = false;
    s.t.bump(Gauge::Asleep, -1)?;
    u.wakes += 1;
    // Asleep, nothing entered the inbox (its horizon was at the top).
    u.horizon = None;
    u.inbox_len = 0;
    u.refills = 0;
    let mut asks = Vec::new();
    for r in live_edges(s.t, Cf::Followees, user, None) {
        let (author, edge) = r?;
        // A pulled followee is read from this partition's copy.
        if u.pulls == 0 || !s.t.contains(Cf::Pulls, &keys::key([user.0, author.0]))? {
            asks.push((author, edge.version));
        }
    }
    s.applied.asked_refills |= !asks.is_empty();
    for (author, version) in asks {
        let wake = Wake(u.wakes);
        let k = keys::refill(user, author);
        if !s.t.contains(Cf::Refills, &k)? {
            s.t.bump(Gauge::Refills, 1)?;
        }
        s.t.put(Cf::Refills, k, wake.0.to_be_bytes().to_vec());
        u.refills += 1;
        let ask = Effect::Refill {
            author,
            follower: user,
            version,
            wake,
        };
        s.ctx.send(s.out, author, ask);
    }
    Ok(())
}

/// A delivery reached `user` (owned here, following its author) when the
/// partition's clock reads `now`: whether the user is asleep, falling
/// asleep now when they have had no event of their own for longer than the
/// configured span.
pub(super) fn asleep_at<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    user: UserId,
    now: Ts,
) -> Result<bool, KvError> {
    let u = s.t.user(user)?;
    if u.asleep {
        return Ok(true);
    }
    let Some(span) = s.ctx.inactive_after.filter(|&s| s > 0) else {
        return Ok(false);
    };
    if now.0 <= u.active.0.saturating_add(span) {
        return Ok(false);
    }
    // Refills still awaited belong to the last wake: no answer counts now.
    if u.refills > 0 {
        let awaited: Vec<Vec<u8>> =
            s.t.scan_prefix(Cf::Refills, &keys::key([user.0]))
                .map(|r| r.map(|(k, _)| k))
                .collect::<Result<_, _>>()?;
        s.t.bump(Gauge::Refills, -(awaited.len() as i64))?;
        for k in awaited {
            s.t.delete(Cf::Refills, k);
        }
    }
    let before = u.inbox_len;
    lower_horizon(s.t, user, TimelineKey::TOP)?;
    let mut u = s.t.user(user)?;
    u.asleep = true;
    s.t.bump(Gauge::Asleep, 1)?;
    u.refills = 0;
    u.inbox_len = 0;
    // The inline read must not trust an inbox scanned before the wake.
    u.marks += 1;
    s.t.set_user(user, &u);
    s.applied.removed += before;
    s.applied.changed = true;
    Ok(true)
}

/// Which refill a message is about: `follower`'s refill, at wake `wake`,
/// of `author`, whom they follow through `version`.
#[derive(Debug, Clone, Copy)]
pub(super) struct RefillOf {
    pub author: UserId,
    pub follower: UserId,
    pub version: Version,
    pub wake: Wake,
}

/// The answer of `author`'s partition to the refill of wake `wake`:
/// applied as a follow's answer is, and counted when it is awaited.
pub(super) fn refilled<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    RefillOf {
        author,
        follower,
        version,
        wake,
    }: RefillOf,
    pulled: bool,
    posts: (&[(Ts, PostId)], bool),
) -> Result<(), KvError> {
    // An answer to an older wake, or a repeat, is still the author's posts
    // at a point of its log, followed by its deliveries: applied, not
    // counted.
    if !follows_at(s.t, s.ctx, follower, author, version)? {
        return Ok(());
    }
    pulled::pull_for(s, Edge { follower, author }, pulled, posts)?;
    let (t, applied) = (&mut *s.t, &mut *s.applied);
    let k = keys::refill(follower, author);
    if awaited(t, &k)? == Some(wake.0) {
        t.delete(Cf::Refills, k);
        t.bump(Gauge::Refills, -1)?;
        let mut u = t.user(follower)?;
        if u.wakes == wake.0 && !u.asleep {
            u.refills = u.refills.saturating_sub(1);
        }
        t.set_user(follower, &u);
        applied.changed = true;
    }
    Ok(())
}

/// `user` (owned here) unfollowed `author`: a refill of it is no longer
/// awaited.
pub(super) fn unfollowed<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    user: UserId,
    author: UserId,
) -> Result<(), KvError> {
    let k = keys::refill(user, author);
    if awaited(t, &k)?.is_some() {
        t.delete(Cf::Refills, k);
        t.bump(Gauge::Refills, -1)?;
        let mut u = t.user(user)?;
        u.refills = u.refills.saturating_sub(1);
        t.set_user(user, &u);
    }
    Ok(())
}

/// The refill awaited under `k`, if any; a value that is not one number
/// is corrupt.
fn awaited<K: Kv + ?Sized>(t: &Txn<'_, K>, k: &[u8]) -> Result<Option<u64>, KvError> {
    match t.get(Cf::Refills, k)? {
        None => Ok(None),
        Some(v) => keys::be(&v, 0)
            .filter(|_| v.len() == 8)
            .map(Some)
            .ok_or_else(|| KvError::corrupt(Cf::Refills, k, "refill record is not 8 bytes")),
    }
}

/// The refills awaited in this partition, asked for again (with the wake
/// that awaits them). An owner sends these once it has caught up: the
/// state it replayed quietly may await refills no owner asked for.
pub fn refill_requests(kv: &(impl Kv + ?Sized), ctx: &Ctx) -> Result<Vec<Out>, KvError> {
    let mut asks = Vec::new();
    for r in kv.scan(Cf::Refills, &[], None) {
        let (k, v) = r?;
        let at = |b: &[u8], i| u64_at(Cf::Refills, &k, b, i);
        let (user, author) = (UserId(at(&k, 0)?), UserId(at(&k, 8)?));
        let Some(edge) = views::edge(kv, Cf::Followees, user, author)?.filter(|e| e.live) else {
            continue;
        };
        let ask = Effect::Refill {
            author,
            follower: user,
            version: edge.version,
            wake: Wake(at(&v, 0)?),
        };
        ctx.send(&mut asks, author, ask);
    }
    Ok(asks)
}

/// At `author`'s partition (owned here): the answer to `follower`'s refill,
/// sent when they still follow through `version` as the author knows it.
/// Otherwise an unfollow of theirs is on its way to them (a later follow
/// always comes after one), which stops the wait.
pub(super) fn answer_refill<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    RefillOf {
        author,
        follower,
        version,
        wake,
    }: RefillOf,
) -> Result<(), KvError> {
    let (t, ctx) = (&*s.t, s.ctx);
    if !ctx.owns(author) {
        return Ok(());
    }
    let edge = views::edge(t, Cf::Followers, author, follower)?;
    if !edge.is_some_and(|e| e.live && e.version == version) {
        return Ok(());
    }
    let pulled = t.user(author)?.pulled;
    let (posts, truncated) = if pulled {
        (Vec::new(), false)
    } else {
        pulled::newest_posts(t, ctx, author)?
    };
    let answer = Effect::Refilled {
        author,
        follower,
        version,
        wake,
        pulled,
        posts,
        truncated,
    };
    s.send(follower, answer);
    Ok(())
}

#[cfg(test)]
mod tests;
