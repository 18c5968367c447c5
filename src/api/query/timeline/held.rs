//! The page a partition holds (the inbox and the copies of pulled
//! authors, nothing past the horizon), read in full — aggregated and
//! filtered — for the page cache's inline read, and whether the partition
//! has reposts at all.

use super::{aggregated, timeline_page};
use crate::api::query::{Page, PostItem, QueryError, RepostMode};
use crate::core::event::UserId;
use crate::core::filter::ReadFilter;
use crate::core::keys::TimelineKey;
use crate::core::kv::{Cf, Kv};
use crate::core::repost;
use crate::core::timeline::held_timeline;
use crate::core::views;
use crate::state::heads::view::HeadView;
use crate::state::{Snapshot, Store};

/// The page of `user`'s timeline past `after` that the partition holds
/// (inbox and copies, nothing past the horizon), read in full through
/// `snap`, a view of the user's store, with the user's inbox head in front
/// of it (`heads`: when one is held, else kept from this read):
/// entries aggregated and filtered (`filtered`: the reader has blocks or
/// mutes). `None` when it is not held, or for a reader with a mute that
/// ends.
pub(super) fn held_page(
    snap: &Snapshot<'_>,
    (user, mode, after): (UserId, RepostMode, Option<TimelineKey>),
    limit: usize,
    (filtered, heads): (bool, bool),
) -> Result<Option<Page<PostItem>>, QueryError> {
    // A page the partition holds depends on this store alone — the reposts
    // it aggregates and the reader's filters included: a page kept from it
    // is dropped by any commit that changes them (`state::pages`). Not a
    // reader with a mute that ends: the partition's clock ends it, without
    // a write of theirs.
    let mut filter = match filtered {
        true => ReadFilter::of(snap, user, views::clock(snap)?)?,
        false => ReadFilter::default(),
    };
    // The default replies rule: pages kept are the default's.
    filter.no_reply_here = !snap.may_hold(Cf::ReplyDir);
    if filter.timed {
        return Ok(None);
    }
    let view = HeadView::new(snap, user, heads);
    let held = |from, n| {
        let (keys, past_horizon) = held_timeline(&view, user, from, n)?;
        Ok(past_horizon.is_none().then_some(keys))
    };
    let entries = aggregated(&view, (user, mode, after), limit, filter, held)?;
    if heads {
        view.keep(|| !filtered);
    }
    Ok(entries.map(|e| timeline_page(user, mode, limit, e)))
}

/// Whether `store`'s partition knows of any live repost (read through
/// `kv`, a view of it), remembered once true ([`Store::reposts_seen`]).
pub(super) fn any_repost(store: &Store, kv: &(impl Kv + ?Sized)) -> Result<bool, QueryError> {
    if store.reposts_seen() {
        return Ok(true);
    }
    if !store.may_hold(Cf::RepostDir) {
        return Ok(false);
    }
    let any = repost::any_repost(kv)?;
    if any {
        store.saw_reposts();
    }
    Ok(any)
}

/// Whether `user` has any filter record in `store` (read through `kv`, a
/// view of it); no read when the store holds no filter at all.
pub(super) fn any_filter(
    store: &Store,
    kv: &(impl Kv + ?Sized),
    user: UserId,
) -> Result<bool, QueryError> {
    if !store.may_hold(Cf::Filters) {
        return Ok(false);
    }
    Ok(crate::core::filter::any(kv, user)?)
}
