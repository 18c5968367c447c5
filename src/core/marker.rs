//! Read markers: how far each user has read each feed (docs/semantics.md,
//! "Read markers").
//!
//! A `seen` with a `feed` ([`Event::Mark`](crate::event::Event::Mark))
//! names the place its reader has read up to. The marker of (user, feed)
//! is the greatest place among the user's such events, in the user's log
//! order, so that one device cannot move another's marker back; a `force`
//! sets it to its own place ("mark as unread"), and later events take the
//! greatest from there. The marker lives at the user's partition, where
//! the user's events arrive in log order; a redelivered event (a version
//! not above the marker's) changes nothing. [`next`] is the rule; the
//! rest reads and writes it.

use super::effect::Step;
use crate::event::{Feed, Place, PostId, Ts, UserId};
use crate::keys;
use crate::kv::{u64_at, Cf, Kv, KvError};
use crate::position::Version;

/// A read marker as kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// The place read up to.
    pub read_up_to: Place,
    /// The event that set `read_up_to` (moved it up, or forced it).
    pub moved: Version,
    /// That event's time.
    pub since: Ts,
    /// The last of the user's `seen` events of the feed applied: an
    /// event of a version not above it is a redelivery.
    pub version: Version,
}

/// One `seen` of a feed: its place, `force`, version and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// `read_up_to`.
    pub place: Place,
    /// `force`.
    pub force: bool,
    /// The event's version.
    pub version: Version,
    /// The event's time.
    pub ts: Ts,
}

/// The marker after `seen`, given the marker before it; `None` when the
/// event changes nothing (it was applied already: a redelivery).
pub fn next(before: Option<Marker>, seen: Seen) -> Option<Marker> {
    let set = Marker {
        read_up_to: seen.place,
        moved: seen.version,
        since: seen.ts,
        version: seen.version,
    };
    match before {
        None => Some(set),
        Some(b) if b.version >= seen.version => None,
        Some(_) if seen.force => Some(set),
        Some(b) if seen.place > b.read_up_to => Some(set),
        Some(b) => Some(Marker {
            version: seen.version,
            ..b
        }),
    }
}

/// Applies a `seen` of `feed` by `user` (owned here): whether the marker
/// changed (a repeat of a lower place still records its version).
pub(super) fn event<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    user: UserId,
    feed: Feed,
    seen: Seen,
) -> Result<bool, KvError> {
    let before = get(&*s.t, user, feed)?;
    let Some(after) = next(before, seen) else {
        return Ok(false);
    };
    s.t.put(Cf::Engagement, keys::marker(user, feed), encode(&after));
    Ok(before.map(|b| b.read_up_to) != Some(after.read_up_to))
}

/// `user`'s marker of `feed`, if any `seen` of it was applied.
pub fn get<K: Kv + ?Sized>(kv: &K, user: UserId, feed: Feed) -> Result<Option<Marker>, KvError> {
    let k = keys::marker(user, feed);
    let Some(v) = kv.get(Cf::Engagement, &k)? else {
        return Ok(None);
    };
    let at = |i: usize| u64_at(Cf::Engagement, &k, &v, i * 8);
    Ok(Some(Marker {
        version: Version(at(0)?),
        moved: Version(at(1)?),
        since: Ts(at(2)?),
        read_up_to: Place {
            ts: Ts(at(3)?),
            post_id: PostId(at(4)?),
            author: UserId(at(5)?),
        },
    }))
}

fn encode(m: &Marker) -> Vec<u8> {
    let p = m.read_up_to;
    [
        m.version.0,
        m.moved.0,
        m.since.0,
        p.ts.0,
        p.post_id.0,
        p.author.0,
    ]
    .iter()
    .flat_map(|x| x.to_be_bytes())
    .collect()
}

#[cfg(test)]
mod tests;
