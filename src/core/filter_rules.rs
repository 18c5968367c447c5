//! What a block, mute or hidden reposts event changes (the records and
//! their reads are [`crate::filter`]): the owner's pair record, and for a
//! block the copy at the other user's partition and the follows between
//! the two, judged again at each end.

use super::edge::Edge;
use super::effect::{Effect, Step};
use super::filter::{blocked, blocked_author_end, key, pair, BlockState, Blocking, Pair, Toggle};
use super::follow::{self, judged, set_followee, set_follower};
use crate::event::{FilterChange, Ts};
use crate::kv::{Cf, Kv, KvError};
use crate::position::Version;
use crate::views;

/// `p.owner` (owned here) blocks, mutes or hides `p.other`, or lifts it,
/// by event `version` at `ts`. Whether anything changed (a redelivered or
/// older event, or one that changes nothing: no).
pub(super) fn event<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    p: Pair,
    change: FilterChange,
    (version, ts): (Version, Ts),
) -> Result<bool, KvError> {
    let Pair {
        owner: user,
        other: target,
    } = p;
    let mut f = pair(s.t, p)?;
    let newer = |t: Option<Toggle>| t.is_none_or(|t| t.version < version);
    let toggle = |on| Toggle { version, on, ts };
    // One arm per change: a change that is older than the one in force,
    // or that changes nothing, returns `false` in its own arm.
    match change {
        FilterChange::Mute { until } | FilterChange::MuteKeepingNotifications { until } => {
            if !newer(f.mute.map(|m| m.0)) {
                return Ok(false);
            }
            f.mute = Some((toggle(true), until));
            f.mute_keeps_notifications =
                matches!(change, FilterChange::MuteKeepingNotifications { .. });
        }
        FilterChange::Unmute => {
            if !newer(f.mute.map(|m| m.0)) || !f.mute.is_some_and(|m| m.0.on) {
                return Ok(false);
            }
            f.mute = f.mute.map(|(_, until)| (toggle(false), until));
        }
        FilterChange::HideReposts => {
            if !newer(f.hide_reposts) || f.hides_reposts() {
                return Ok(false);
            }
            f.hide_reposts = Some(toggle(true));
        }
        FilterChange::ShowReposts => {
            if !newer(f.hide_reposts) || !f.hides_reposts() {
                return Ok(false);
            }
            f.hide_reposts = Some(toggle(false));
        }
        FilterChange::Block | FilterChange::Unblock => {
            let blocks = matches!(change, FilterChange::Block);
            let was = f.block_out;
            let on = was.is_some_and(|b| b.toggle.on);
            // An older toggle, a block while blocking or an unblock while
            // not: nothing changes.
            if !newer(was.map(|b| b.toggle)) || blocks == on {
                return Ok(false);
            }
            let ended = was.and_then(|b| b.ended);
            let state = if blocks {
                BlockState {
                    toggle: toggle(true),
                    ended,
                }
            } else {
                // An unblock ends the period that was on.
                BlockState {
                    toggle: toggle(false),
                    ended: Some(ended.map_or(ts, |e| e.max(ts))),
                }
            };
            f.block_out = Some(state);
            s.t.put(Cf::Filters, key(p), f.encode());
            let sent = Effect::Blocked {
                user: target,
                by: user,
                version,
                on: state.toggle.on,
                ts,
                ended: state.ended,
            };
            // To the blocked user's partition, and to this one's own
            // `effects` log, where the edges to the user are judged anew.
            s.send(user, sent.clone());
            s.send(target, sent);
            let edge = Edge {
                follower: user,
                author: target,
            };
            settle_followees(s, edge)?;
            s.applied.changed = true;
            return Ok(true);
        }
    }
    s.t.put(Cf::Filters, key(p), f.encode());
    s.applied.changed = true;
    Ok(true)
}

/// `b.by`'s block of `b.user` is now `state`, as of the blocker's event
/// `version`: at the blocked user's partition the block of them, at the
/// blocker's its own copy (one message serves both when they share a
/// partition). Older or duplicate: nothing.
pub(super) fn blocked_by<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    b: Blocking,
    state: BlockState,
) -> Result<(), KvError> {
    let newer = |b: Option<BlockState>| b.is_none_or(|b| b.toggle.version < state.toggle.version);
    // The follows between the two, each named at the end judged here.
    let from_blocked = Edge {
        follower: b.user,
        author: b.by,
    };
    let to_blocked = Edge {
        follower: b.by,
        author: b.user,
    };
    if s.ctx.owns(b.user) {
        let mut f = pair(s.t, b.at_blocked())?;
        if newer(f.block_in) {
            f.block_in = Some(state);
            s.t.put(Cf::Filters, key(b.at_blocked()), f.encode());
            s.applied.changed = true;
            settle_followees(s, from_blocked)?;
            settle_followers(s, to_blocked)?;
        } else if f.block_in == Some(state) && !state.toggle.on {
            resend_newest(s, to_blocked)?;
        }
    }
    if s.ctx.owns(b.by) {
        let mut f = pair(s.t, b.at_blocker())?;
        if newer(f.block_own) {
            f.block_own = Some(state);
            s.t.put(Cf::Filters, key(b.at_blocker()), f.encode());
            s.applied.changed = true;
            settle_followers(s, from_blocked)?;
        }
    }
    Ok(())
}

/// An unblock came again at `edge`'s author (owned here), the blocked
/// user: sends the follower (the blocker), when they follow the author and
/// that follow counts, the author's newest posts once more.
///
/// The first copy's answer (a backfill, or that `user` is pulled) names
/// only the follow's event; a successor of `by`'s partition that started
/// from a commit before the unblock applies that answer while its end of
/// the edge is still void, and drops it. That successor applies the
/// unblock again and sends it again, and this answer, sent after it,
/// reaches a partition that has applied it. A redelivered unblock sends
/// an answer that changes nothing.
fn resend_newest<K: Kv + ?Sized>(s: &mut Step<'_, '_, K>, edge: Edge) -> Result<(), KvError> {
    match views::edge(s.t, Cf::Followers, edge.author, edge.follower)? {
        Some(e) if e.live => follow::send_newest(s, edge, e.version),
        _ => Ok(()),
    }
}

/// Judges `edge` again at its follower's end (owned here), after the
/// pair's block periods changed.
fn settle_followees<K: Kv + ?Sized>(s: &mut Step<'_, '_, K>, edge: Edge) -> Result<(), KvError> {
    if let Some(e) = views::edge(s.t, Cf::Followees, edge.follower, edge.author)? {
        let new = judged(e, blocked(s.t, edge)?);
        if new != e {
            set_followee(s, edge, Some(e), new)?;
        }
    }
    Ok(())
}

/// Judges `edge` again at its author's end (owned here), after the pair's
/// block periods changed (in `effects` order).
fn settle_followers<K: Kv + ?Sized>(s: &mut Step<'_, '_, K>, edge: Edge) -> Result<(), KvError> {
    if let Some(e) = views::edge(s.t, Cf::Followers, edge.author, edge.follower)? {
        let new = judged(e, blocked_author_end(s.t, edge)?);
        if new != e {
            set_follower(s, edge, Some(e), new, false)?;
        }
    }
    Ok(())
}
