//! Follow edges at both their ends: the follower's partition holds the
//! edge in `followees`, the followed author's in `followers`. Each end
//! judges by itself whether the follow counts, from the follow's times and
//! the pair's block periods as its partition knows them
//! ([`crate::filter`]); both ends know the same periods once every
//! message has arrived, so they agree in any arrival order.
//!
//! An edge that starts or stops counting changes what an unfollow or a
//! follow would: counters, recent followers, the follower's inbox (purged,
//! or filled by the author's backfill).

use super::active;
use super::edge::Edge;
use super::effect::{Effect, Step};
use super::filter::{self, Blocked};
use super::gauges::Gauge;
use super::inbox::purge_author;
use super::pulled;
use crate::event::Ts;
use crate::keys::EdgeVal;
use crate::kv::{Cf, Kv, KvError};
use crate::position::Version;
use crate::views;

/// `e` judged against the pair's block periods: counted from the time the
/// block periods allow (the first follow's, or a later follow's when the
/// first is covered), or void. A dead edge stays as it is.
pub(super) fn judged(e: EdgeVal, blocked: Blocked) -> EdgeVal {
    if !e.followed_raw() {
        return e;
    }
    match blocked.counts_from(e.first, e.last) {
        Some(ts) => EdgeVal {
            live: true,
            void: false,
            ts,
            ..e
        },
        None => EdgeVal {
            live: false,
            void: true,
            ts: e.first,
            ..e
        },
    }
}

/// `follower` (owned here) follows `author` by event `version` at `ts`.
/// Whether anything changed.
pub(super) fn follow<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    edge @ Edge { follower, author }: Edge,
    version: Version,
    ts: Ts,
) -> Result<bool, KvError> {
    let old = views::edge(s.t, Cf::Followees, follower, author)?;
    let blocked = filter::blocked(s.t, edge)?;
    match old {
        // A follow while following: only a later time matters, which
        // revives a follow that block periods cover.
        Some(e) if e.followed_raw() => {
            if version <= e.version || ts <= e.last {
                return Ok(false);
            }
            let new = judged(
                EdgeVal {
                    last: ts,
                    last_by: version,
                    ..e
                },
                blocked,
            );
            set_followee(s, edge, old, new)?;
            let again = Effect::Refollowed {
                author,
                follower,
                version: e.version,
                last: ts,
            };
            s.send(author, again);
        }
        Some(e) if e.version >= version => return Ok(false),
        _ => {
            let new = judged(EdgeVal::followed(version, ts), blocked);
            // The author's partition answers the follow with a backfill.
            set_followee(s, edge, old, new)?;
            let effect = Effect::FollowerAdded {
                author,
                follower,
                version,
                ts,
            };
            s.send(author, effect);
        }
    }
    Ok(true)
}

/// `follower` (owned here) unfollows `author` by event `version` at `ts`.
/// Whether anything changed.
pub(super) fn unfollow<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    edge @ Edge { follower, author }: Edge,
    version: Version,
    ts: Ts,
) -> Result<bool, KvError> {
    let old = views::edge(s.t, Cf::Followees, follower, author)?;
    if !old.is_some_and(|e| e.followed_raw() && e.version < version) {
        return Ok(false);
    }
    let new = EdgeVal::unfollowed(version, ts);
    set_followee(s, edge, old, new)?;
    let effect = Effect::FollowerRemoved {
        author,
        follower,
        version,
    };
    s.send(author, effect);
    Ok(true)
}

/// Stages `new` for the edge `follower` (owned here) -> `author` at the
/// follower's end, and what its counting or not changes: the followee
/// count, and the inbox (an edge that stops counting loses the author's
/// entries, as an unfollow).
pub(super) fn set_followee<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    Edge { follower, author }: Edge,
    old: Option<EdgeVal>,
    new: EdgeVal,
) -> Result<(), KvError> {
    s.t.set_edge(Cf::Followees, follower, author, &new);
    s.applied.changed = true;
    let was = old.is_some_and(|e| e.live);
    if was && !new.live {
        if s.t.user(follower)?.marks > 0 {
            s.t.set_pull(follower, author, false)?;
        }
        active::unfollowed(s.t, follower, author)?;
        let mut u = s.t.user(follower)?;
        u.followees -= 1;
        s.t.set_user(follower, &u);
        s.applied.removed += purge_author(s.t, follower, author)?;
    } else if !was && new.live {
        // The author's posts come from the author's end: its backfill for
        // a new follow, or the one it sends when its end starts counting
        // (`set_follower`). That end cannot start counting before this one
        // knows what made it: the unblock is this user's own, or comes
        // from the author's partition ahead of the backfill, in order.
        let mut u = s.t.user(follower)?;
        u.followees += 1;
        s.t.set_user(follower, &u);
    }
    Ok(())
}

/// `follower` follows `author` (owned here) by `version` from `ts`, as the
/// follower's partition says. Stale or duplicate: nothing.
pub(super) fn follower_added<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    edge @ Edge { follower, author }: Edge,
    version: Version,
    ts: Ts,
) -> Result<(), KvError> {
    let old = views::edge(s.t, Cf::Followers, author, follower)?;
    if old.is_some_and(|e| e.version >= version) {
        return Ok(());
    }
    let blocked = filter::blocked_author_end(s.t, edge)?;
    let new = judged(EdgeVal::followed(version, ts), blocked);
    set_follower(s, edge, old, new, true)
}

/// `follower` no longer follows `author` (owned here), as of `version`.
/// Stale or duplicate: nothing.
pub(super) fn follower_removed<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    edge @ Edge { follower, author }: Edge,
    version: Version,
) -> Result<(), KvError> {
    let old = views::edge(s.t, Cf::Followers, author, follower)?;
    if old.is_some_and(|e| e.version >= version) {
        return Ok(());
    }
    let dead = EdgeVal {
        live: false,
        void: false,
        version,
        last_by: version,
        ..old.unwrap_or(EdgeVal::followed(version, Ts(0)))
    };
    set_follower(s, edge, old, dead, false)
}

/// `follower` followed `author` (owned here) again at `last`, within the
/// follow `version` started. Stale: nothing. Again (the same follow came
/// again) while the edge counts: the author's newest posts once more, as
/// for an unblock that comes again (`filter_rules::blocked_by`): the first
/// answer names only the follow that started the edge, and a successor of
/// the follower's partition that started from a commit before this follow
/// drops it while its end is still void, then applies this follow again
/// and sends it again — this answer reaches it after.
pub(super) fn refollowed<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    edge @ Edge { follower, author }: Edge,
    version: Version,
    last: Ts,
) -> Result<(), KvError> {
    let old = views::edge(s.t, Cf::Followers, author, follower)?;
    let Some(e) = old.filter(|e| e.followed_raw() && e.version == version && last >= e.last) else {
        return Ok(());
    };
    if last == e.last {
        if e.live {
            send_newest(s, edge, e.version)?;
        }
        return Ok(());
    }
    let blocked = filter::blocked_author_end(s.t, edge)?;
    let new = judged(EdgeVal { last, ..e }, blocked);
    set_follower(s, edge, old, new, false)
}

/// Stages `new` for the edge `follower` -> `author` (owned here) at the
/// author's end, and what its counting or not changes: the follower count
/// (and with it the author's mode, pulled or pushed), the recent
/// followers, and for a follow that starts counting (or a new follow that
/// counts: `fresh`) the author's newest posts sent to the follower.
pub(super) fn set_follower<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    edge @ Edge { follower, author }: Edge,
    old: Option<EdgeVal>,
    new: EdgeVal,
    fresh: bool,
) -> Result<(), KvError> {
    s.t.set_edge(Cf::Followers, author, follower, &new);
    s.applied.changed = true;
    let was = old.filter(|e| e.live);
    if let Some(e) = was.filter(|e| !new.live || e.ts != new.ts) {
        s.t.set_recent(author, e.ts, follower, false);
    }
    if new.live && was.is_none_or(|e| e.ts != new.ts) {
        s.t.set_recent(author, new.ts, follower, true);
    }
    if was.is_some() == new.live {
        if new.live && fresh {
            send_newest(s, edge, new.version)?;
        }
        return Ok(());
    }
    let mut u = s.t.user(author)?;
    if new.live {
        u.followers += 1;
    } else {
        u.followers -= 1;
    }
    // A change of mode tells every follower, this one included.
    let changed = pulled::follower_count_changed(s, author, &mut u)?;
    if changed {
        s.t.bump(Gauge::Pulled, if u.pulled { 1 } else { -1 })?;
    }
    s.t.set_user(author, &u);
    if new.live && !changed {
        send_newest(s, edge, new.version)?;
    }
    Ok(())
}

/// Sends `follower`, following `author` (owned here) through `version`,
/// what a new follow brings: the author's newest posts (a backfill), or
/// that the author is pulled.
pub(super) fn send_newest<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    Edge { follower, author }: Edge,
    version: Version,
) -> Result<(), KvError> {
    if s.t.user(author)?.pulled {
        let pull = Effect::Pull {
            author,
            pulled: true,
            posts: Vec::new(),
            truncated: false,
            targets: vec![(follower, version)],
        };
        s.ctx.send(s.out, follower, pull);
        return Ok(());
    }
    let (posts, truncated) = pulled::newest_posts(s.t, s.ctx, author)?;
    // Sent also with no live posts when the author has had any: a backfill
    // replaces what an earlier emission for the same follow delivered (see
    // `Effect::Backfill`), so it must go out to undo a post that this
    // emission saw deleted.
    if !posts.is_empty() || views::has_posts(s.t, author)? {
        let backfill = Effect::Backfill {
            author,
            follower,
            version,
            posts,
            truncated,
        };
        s.ctx.send(s.out, follower, backfill);
    }
    Ok(())
}
