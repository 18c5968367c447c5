//! What one partition holds of a user's home timeline: the materialized
//! inbox, merged with the partition's copies of the pulled authors the user
//! follows, exact up to a bound past which a reader completes the page from
//! the followees' outboxes (the pull path). The API's reader and the core's
//! property tests both read timelines through this.

use crate::event::UserId;
use crate::keys::TimelineKey;
use crate::kv::{Kv, KvError};
use crate::views;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The first key of every timeline: a bound here means nothing is held and
/// the pull path reads it all.
pub const TOP: TimelineKey = TimelineKey::TOP;

/// Up to `want` entries of `user`'s timeline after `after` (exclusive), as
/// this partition (the user's) holds them, and where the pull path must go
/// on from (`Some`) when they fall short of `want`: every timeline entry
/// that sorts before that bound is among those returned.
///
/// Without pulled followees that is the inbox up to its horizon (none while
/// the user is asleep or waits for refills: the pull path reads it all). With them,
/// the inbox (which holds no pulled author's posts) is merged with this
/// partition's copy of each pulled author, and the bound is the nearest of
/// the inbox's horizon and the copies'. A pulled followee whose copy is
/// missing here (a message still on its way) puts the bound at the top: the
/// pull path reads the whole page, exact but slower.
pub fn held_timeline(
    kv: &(impl Kv + ?Sized),
    user: UserId,
    after: Option<TimelineKey>,
    want: usize,
) -> Result<(Vec<TimelineKey>, Option<TimelineKey>), KvError> {
    // Past `after` only: a copy's scan starts at its (ts, post id), where
    // entries of other authors may sort before it.
    let not_after =
        |r: &Result<TimelineKey, KvError>| !matches!((r, after), (Ok(k), Some(a)) if *k <= a);
    let u = views::user(kv, user)?;
    if u.read_horizon() == Some(TOP) {
        return Ok(continue_from(Vec::new(), want, Some(TOP), after));
    }
    if u.pulls == 0 {
        let keys: Vec<TimelineKey> = views::inbox(kv, user, after.as_ref())
            .filter(not_after)
            .take(want)
            .collect::<Result<_, _>>()?;
        return Ok(continue_from(keys, want, u.read_horizon(), after));
    }
    let mut bound = u.read_horizon();
    let mut lower = |h: TimelineKey| bound = Some(bound.map_or(h, |b| b.min(h)));
    type Head<'a> = Box<dyn Iterator<Item = Result<TimelineKey, KvError>> + 'a>;
    let mut heads: Vec<Head<'_>> = vec![Box::new(views::inbox(kv, user, after.as_ref()))];
    for author in views::pulls(kv, user) {
        let author = author?;
        match views::copy_of(kv, author)? {
            None => lower(TOP),
            Some(c) => {
                if let Some(h) = c.horizon {
                    lower(h);
                }
                heads.push(Box::new(views::copy_entries(kv, author, after.as_ref())));
            }
        }
    }
    let mut heap = BinaryHeap::new();
    for (i, it) in heads.iter_mut().enumerate() {
        if let Some(k) = it.find(not_after).transpose()? {
            heap.push(Reverse((k, i)));
        }
    }
    let mut keys: Vec<TimelineKey> = Vec::new();
    while let Some(Reverse((k, i))) = heap.pop() {
        if keys.len() == want || bound.is_some_and(|b| k >= b) {
            break;
        }
        // The inbox may still hold an entry a copy holds too (a delivery
        // made before the author was pulled, on its way out).
        if keys.last() != Some(&k) {
            keys.push(k);
        }
        if let Some(next) = heads[i].find(not_after).transpose()? {
            heap.push(Reverse((next, i)));
        }
    }
    Ok(continue_from(keys, want, bound, after))
}

/// `keys`, and the pull path's start when they fall short of `want` and a
/// bound exists: the bound, or `after` when that lies past it.
pub fn continue_from(
    keys: Vec<TimelineKey>,
    want: usize,
    bound: Option<TimelineKey>,
    after: Option<TimelineKey>,
) -> (Vec<TimelineKey>, Option<TimelineKey>) {
    if keys.len() == want {
        return (keys, None);
    }
    let from = bound.map(|b| match after {
        Some(a) if a > b => a,
        _ => b,
    });
    (keys, from)
}
