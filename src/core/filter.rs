//! Blocks, mutes and hidden reposts (docs/semantics.md, "Blocks and mutes"): what a
//! reader shuts out of their timeline, kept per (user, other) pair in the
//! user's partition (`filters`), and applied when a timeline is read.
//!
//! - A **mute** or **hidden reposts** is the reader's alone: the latest
//!   such event of the pair, in the reader's log order, says whether it is
//!   on; a mute with `until` ends when the partition's clock reaches it.
//! - A **block** works both ways, so both users' partitions hold it: the
//!   blocker's as its own (`out`), the other's as sent to it
//!   ([`Effect::Blocked`], `in`). Each side's state is the blocker's
//!   latest, replaced only by a newer version of it. Besides hiding each
//!   user from the other, block periods void the follows between the two
//!   ([`Blocked::counts_from`]): a follow counts only when it was made
//!   after the end of every block period, and each end of the edge judges
//!   that from the periods its partition knows ([`crate::follow`]).
//!
//! Nothing is removed from inboxes by a mute: the entries stay, unread,
//! and come back with the unmute, deep pages included.

use super::edge::Edge;
use crate::event::{Ts, UserId};
use crate::keys::{self, be};
use crate::kv::{u64_at, Cf, Kv, KvError};
use crate::position::Version;
use std::collections::HashSet;

/// One filter's state: on or off since the event `version` at `ts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Toggle {
    /// The version of the event that set it.
    pub version: Version,
    /// On or off.
    pub on: bool,
    /// That event's time.
    pub ts: Ts,
}

/// A block's state, one direction: on or off, and the end of the latest
/// block period that ended (the greatest `unblock` time that ended one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockState {
    /// On or off, since `version` at `ts`.
    pub toggle: Toggle,
    /// The greatest end of a block period that ended.
    pub ended: Option<Ts>,
}

/// What one user's partition holds about another user: the user's mute,
/// hidden reposts and block of the other, and the other's block of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FilterVal {
    /// The user mutes the other (with the mute's end, if any).
    pub mute: Option<(Toggle, Option<Ts>)>,
    /// The user hides the other's reposts.
    pub hide_reposts: Option<Toggle>,
    /// The user blocks the other.
    pub block_out: Option<BlockState>,
    /// The other blocks the user.
    pub block_in: Option<BlockState>,
    /// The user's block of the other as the user's own `effects` log has
    /// applied it (a copy of `block_out` the block event sends to its own
    /// partition): what the user's end of the follow edges *to* the user
    /// (`followers`) judges by, so that a follower count, and the pulled or
    /// pushed mode it decides, changes only in `effects` order, as every
    /// other change of it does — the same in a replay that interleaves
    /// events and effects otherwise.
    pub block_own: Option<BlockState>,
    /// The mute (when on) leaves the other's notifications of the user in
    /// place (`"notifications": false`).
    pub mute_keeps_notifications: bool,
}

/// `version u64 | on u8 | ts u64`.
fn put_toggle(v: &mut Vec<u8>, t: &Toggle) {
    v.extend_from_slice(&t.version.0.to_be_bytes());
    v.push(u8::from(t.on));
    v.extend_from_slice(&t.ts.0.to_be_bytes());
}

fn get_toggle(b: &[u8], at: &mut usize) -> Option<Toggle> {
    let t = Toggle {
        version: Version(be(b, *at)?),
        on: *b.get(*at + 8)? == 1,
        ts: Ts(be(b, *at + 9)?),
    };
    *at += 17;
    Some(t)
}

/// An optional time as `u64`: 0 for none, else the time plus one.
fn put_opt(v: &mut Vec<u8>, t: Option<Ts>) {
    v.extend_from_slice(&t.map_or(0, |t| t.0.saturating_add(1)).to_be_bytes());
}

fn get_opt(b: &[u8], at: &mut usize) -> Option<Option<Ts>> {
    let n = be(b, *at)?;
    *at += 8;
    Some(n.checked_sub(1).map(Ts))
}

impl FilterVal {
    /// `present u8` (bit 0 mute, 1 hidden reposts, 2 block out, 3 block
    /// in, 4 block own, 5 the mute keeps notifications: no bytes of its
    /// own), then each present one of bits 0 to 4 in that order: a toggle
    /// (`version u64 | on u8 | ts u64`), and for a mute its end, for a
    /// block its latest period end (`u64`: 0 none, else time + 1).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![0u8];
        if let Some((t, until)) = &self.mute {
            v[0] |= 1;
            put_toggle(&mut v, t);
            put_opt(&mut v, *until);
            if self.mute_keeps_notifications {
                v[0] |= 32;
            }
        }
        if let Some(t) = &self.hide_reposts {
            v[0] |= 2;
            put_toggle(&mut v, t);
        }
        for (bit, b) in [
            (4, &self.block_out),
            (8, &self.block_in),
            (16, &self.block_own),
        ] {
            if let Some(b) = b {
                v[0] |= bit;
                put_toggle(&mut v, &b.toggle);
                put_opt(&mut v, b.ended);
            }
        }
        v
    }

    /// Inverse of [`FilterVal::encode`].
    pub fn decode(b: &[u8]) -> Option<FilterVal> {
        let present = *b.first()?;
        let mut at = 1;
        let mut f = FilterVal::default();
        if present & 1 != 0 {
            f.mute = Some((get_toggle(b, &mut at)?, get_opt(b, &mut at)?));
            f.mute_keeps_notifications = present & 32 != 0;
        }
        if present & 2 != 0 {
            f.hide_reposts = Some(get_toggle(b, &mut at)?);
        }
        let mut block = |bit: u8| -> Option<Option<BlockState>> {
            if present & bit == 0 {
                return Some(None);
            }
            let toggle = get_toggle(b, &mut at)?;
            let ended = get_opt(b, &mut at)?;
            Some(Some(BlockState { toggle, ended }))
        };
        f.block_out = block(4)?;
        f.block_in = block(8)?;
        f.block_own = block(16)?;
        let kept_without_mute = present & 32 != 0 && present & 1 == 0;
        (at == b.len() && present < 64 && !kept_without_mute).then_some(f)
    }

    /// Whether the user sees nothing by the other at log time `now`: a
    /// block either way, or a mute that has not ended.
    pub fn hides(&self, now: Ts) -> bool {
        let muted = self
            .mute
            .is_some_and(|(t, until)| t.on && until.is_none_or(|u| now < u));
        self.blocks_either_way() || muted
    }

    /// Whether a block either way is on.
    fn blocks_either_way(&self) -> bool {
        [self.block_out, self.block_in]
            .iter()
            .any(|b| b.is_some_and(|b| b.toggle.on))
    }

    /// Whether the user is notified of nothing the other does at log time
    /// `now`: a block either way, or a mute that has not ended and does
    /// not keep notifications.
    pub fn hides_notifications(&self, now: Ts) -> bool {
        self.blocks_either_way() || (self.hides(now) && !self.mute_keeps_notifications)
    }

    /// Whether the user hides the other's reposts.
    pub fn hides_reposts(&self) -> bool {
        self.hide_reposts.is_some_and(|t| t.on)
    }

    /// The pair's block periods, both ways, as the user's end of the edges
    /// *from* the user (`followees`, decided in the user's event order)
    /// knows them.
    pub fn blocked(&self) -> Blocked {
        periods([self.block_out, self.block_in])
    }

    /// The same, as the user's end of the edges *to* the user
    /// (`followers`, decided in `effects` order) knows them.
    pub fn blocked_author_end(&self) -> Blocked {
        periods([self.block_own, self.block_in])
    }
}

/// The block periods of both directions' states.
fn periods(both: [Option<BlockState>; 2]) -> Blocked {
    if both.iter().any(|b| b.is_some_and(|b| b.toggle.on)) {
        return Blocked::Live;
    }
    match both.iter().filter_map(|b| b.and_then(|b| b.ended)).max() {
        Some(end) => Blocked::Until(end),
        None => Blocked::Never,
    }
}

/// The block periods between two users, as one partition knows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    /// None ever.
    Never,
    /// All ended; the latest ended at this time.
    Until(Ts),
    /// One is on.
    Live,
}

impl Blocked {
    /// The time a follow whose first follow was at `first` and latest at
    /// `last` counts from, if it counts: a follow counts only when made
    /// after the end of every block period (on an equal time the block
    /// wins); a later follow revives one the periods cover.
    pub fn counts_from(self, first: Ts, last: Ts) -> Option<Ts> {
        match self {
            Blocked::Never => Some(first),
            Blocked::Live => None,
            Blocked::Until(end) if first > end => Some(first),
            Blocked::Until(end) => (last > end).then_some(last),
        }
    }
}

/// A filter record's two users: `owner` keeps it, in their partition's
/// `filters`, about `other`. Named, so that the two cannot be swapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// Whose record it is.
    pub owner: UserId,
    /// The user it is about.
    pub other: UserId,
}

/// A block, one direction: `by` blocks `user`. Both users' partitions
/// keep it (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocking {
    /// The blocked user.
    pub user: UserId,
    /// The blocker.
    pub by: UserId,
}

impl Blocking {
    /// The record the blocked user keeps about the blocker.
    pub(super) fn at_blocked(self) -> Pair {
        Pair {
            owner: self.user,
            other: self.by,
        }
    }

    /// The record the blocker keeps about the blocked user.
    pub(super) fn at_blocker(self) -> Pair {
        Pair {
            owner: self.by,
            other: self.user,
        }
    }
}

/// `filters`: `owner | other`.
pub fn key(p: Pair) -> Vec<u8> {
    keys::key([p.owner.0, p.other.0])
}

/// What `p.owner`'s partition holds about `p.other`.
pub fn pair(kv: &(impl Kv + ?Sized), p: Pair) -> Result<FilterVal, KvError> {
    let k = key(p);
    match kv.get(Cf::Filters, &k)? {
        None => Ok(FilterVal::default()),
        Some(v) => FilterVal::decode(&v)
            .ok_or_else(|| KvError::corrupt(Cf::Filters, &k, "filter record does not decode")),
    }
}

/// The block periods between `edge`'s two users, as its follower's end
/// (`followees`, owned here) knows them.
pub(super) fn blocked(kv: &(impl Kv + ?Sized), edge: Edge) -> Result<Blocked, KvError> {
    let p = Pair {
        owner: edge.follower,
        other: edge.author,
    };
    Ok(pair(kv, p)?.blocked())
}

/// The same, as `edge`'s author's end (`followers`, owned here) knows them.
pub(super) fn blocked_author_end(kv: &(impl Kv + ?Sized), edge: Edge) -> Result<Blocked, KvError> {
    let p = Pair {
        owner: edge.author,
        other: edge.follower,
    };
    Ok(pair(kv, p)?.blocked_author_end())
}

/// Every pair record of `user`: (other, record), by other.
pub fn all_of(
    kv: &(impl Kv + ?Sized),
    user: UserId,
) -> impl Iterator<Item = Result<(UserId, FilterVal), KvError>> + '_ {
    after(kv, user, None)
}

/// `user`'s pair records past `after` (exclusive): (other, record), by other.
pub fn after(
    kv: &(impl Kv + ?Sized),
    user: UserId,
    after: Option<UserId>,
) -> impl Iterator<Item = Result<(UserId, FilterVal), KvError>> + '_ {
    let prefix = user.0.to_be_bytes();
    // Seek to the first other past `after` (the last id, when `after` is
    // it: skipped below).
    let lo = match after {
        Some(a) => key(Pair {
            owner: user,
            other: UserId(a.0.saturating_add(1)),
        }),
        None => prefix.to_vec(),
    };
    let past = move |r: &Result<(UserId, FilterVal), KvError>| !matches!(r, Ok((o, _)) if after.is_some_and(|a| *o <= a));
    let records = kv.scan_prefix_from(Cf::Filters, &lo, &prefix).map(|r| {
        let (k, v) = r?;
        let f = FilterVal::decode(&v)
            .filter(|_| k.len() == 16)
            .ok_or_else(|| KvError::corrupt(Cf::Filters, &k, "filter record does not decode"))?;
        Ok((UserId(u64_at(Cf::Filters, &k, &k, 8)?), f))
    });
    records.filter(past)
}

/// What a read of `user`'s timeline leaves out, at log time `now` (the
/// partition's clock).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadFilter {
    /// Users nothing of whom shows: their posts, their reposts, and
    /// reposts of their posts.
    pub hidden: HashSet<UserId>,
    /// Users whose reposts do not show.
    pub no_reposts: HashSet<UserId>,
    /// Users in `hidden` whose acts still notify the reader: muted (not
    /// blocked) by a mute that keeps notifications. Usually empty, so a
    /// timeline read builds nothing more than `hidden`.
    pub notified_anyway: HashSet<UserId>,
    /// Whether a mute with an end is on (ended or not): what the reader
    /// sees then changes with the partition's clock alone.
    pub timed: bool,
    /// Which replies show ([`crate::reply::rule`]).
    pub replies: crate::reply::rule::Replies,
    /// The partition holds no reply at all: the replies rule looks
    /// nothing up.
    pub no_reply_here: bool,
}

impl ReadFilter {
    /// `user`'s filters in force at `now`.
    pub fn of(kv: &(impl Kv + ?Sized), user: UserId, now: Ts) -> Result<ReadFilter, KvError> {
        let mut r = ReadFilter::default();
        for p in all_of(kv, user) {
            let (other, f) = p?;
            if f.hides(now) {
                r.hidden.insert(other);
            }
            if f.hides_reposts() {
                r.no_reposts.insert(other);
            }
            if f.hides(now) && !f.hides_notifications(now) {
                r.notified_anyway.insert(other);
            }
            r.timed |= f.mute.is_some_and(|(t, until)| t.on && until.is_some());
        }
        Ok(r)
    }

    /// Whether no block or mute leaves anything out (now; the replies
    /// rule aside).
    pub fn is_empty(&self) -> bool {
        self.hidden.is_empty() && self.no_reposts.is_empty()
    }

    /// Whether `actor`'s acts notify the reader of nothing.
    pub fn hides_notifications_of(&self, actor: UserId) -> bool {
        self.hidden.contains(&actor) && !self.notified_anyway.contains(&actor)
    }

    /// Whether an appearance through `via` (a repost: `repost`) of a post
    /// by `author` shows.
    pub fn shows(&self, author: UserId, via: UserId, repost: bool) -> bool {
        let hidden = self.hidden.contains(&author) || self.hidden.contains(&via);
        let reposts_hidden = repost && self.no_reposts.contains(&via);
        !(hidden || reposts_hidden)
    }
}

/// Whether `user` has any filter record (on or off): a read of their
/// timeline then goes through the filters.
pub fn any(kv: &(impl Kv + ?Sized), user: UserId) -> Result<bool, KvError> {
    Ok(all_of(kv, user).next().transpose()?.is_some())
}
