//! The materialized inbox: insertion with a bounded size and a horizon.
//! Entries past the horizon are never materialized; reads complete a page
//! past it from the followees' outboxes, so trimming never changes an
//! answer. A horizon is only ever lowered, never removed or raised: a
//! reader that finds none knows there was none at any earlier point
//! (`tests/core_properties.rs` checks it after every step).

use super::effect::Step;
use crate::event::{PostId, Ts, UserId};
use crate::keys::{PostRef, TimelineKey};
use crate::kv::{Kv, KvError, Txn};
use crate::views;

/// The original an entry reposts, looked up in the directory at most once
/// however many inboxes take the entry, and only for a reader who keeps
/// sources ([`crate::keys::UserVal::whole`]); and the author of the post
/// it replies to, looked up once, which its inbox rows hold.
#[derive(Default)]
pub(super) struct Root(Option<Option<(PostRef, Ts)>>, Option<Option<UserId>>);

impl Root {
    /// What `k` files under in a reader's sources: its original, with the
    /// original's time, when it is a live repost and `whole` (the reader
    /// keeps sources), else none.
    pub(super) fn of<K: Kv + ?Sized>(
        &mut self,
        t: &Txn<'_, K>,
        k: &TimelineKey,
        whole: bool,
    ) -> Result<Option<(PostRef, Ts)>, KvError> {
        if !whole {
            return Ok(None);
        }
        if let Some(root) = self.0 {
            return Ok(root);
        }
        let root = t.root_of(k)?;
        self.0 = Some(root);
        Ok(root)
    }

    /// The author of the post `k`'s entry replies to (`None`: not a reply,
    /// or a repost's own appearance), from this partition's directory of
    /// replies, which holds a reply before any delivery of it arrives
    /// ([`crate::reply::rule::announce`]).
    pub(super) fn parent<K: Kv + ?Sized>(
        &mut self,
        t: &Txn<'_, K>,
        k: &TimelineKey,
    ) -> Result<Option<UserId>, KvError> {
        if let Some(parent) = self.1 {
            return Ok(parent);
        }
        let parent = crate::reply::rule::parent_in(t, (k.author, k.post_id))?;
        self.1 = Some(parent);
        Ok(parent)
    }
}

/// Adds an entry to `user`'s inbox unless it is already there or lies past
/// the horizon (where reads use the pull path), and to their sources
/// (`root`: what it reposts); trims the inbox when it grows past the cap,
/// lowering the horizon to what was cut.
pub(super) fn insert_inbox<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    (user, k): (UserId, &TimelineKey),
    root: &mut Root,
) -> Result<(), KvError> {
    let mut u = s.t.user(user)?;
    if u.horizon.is_some_and(|h| *k >= h) {
        return Ok(());
    }
    // No read of the key first: a put is idempotent, and `inbox_len` may
    // over-count a duplicate until the next trim recounts it.
    let parent = root.parent(s.t, k)?;
    let root = root.of(s.t, k, u.whole())?;
    s.t.add_inbox(user, k, root, parent)?;
    u.inbox_len += 1;
    s.applied.delivered += 1;
    s.applied.changed = true;
    if u.inbox_len >= s.ctx.inbox_trim_at() {
        // No entry lies at or past the horizon (none is added there, and
        // lowering it removes those): the scan ends at it.
        let (mut kept, mut cut) = (0, Vec::new());
        views::for_each_inbox(s.t, user, u.horizon.as_ref(), |k| {
            if kept < s.ctx.inbox_cap {
                kept += 1;
            } else {
                cut.push(k);
            }
            true
        })?;
        // A horizon ends the reader's sources: dropped whole, not looked up.
        if !cut.is_empty() && u.whole() {
            s.t.drop_sources(user)?;
        }
        for c in &cut {
            s.t.remove_inbox(user, c, None);
        }
        if let Some(first) = cut.first() {
            u.horizon = Some(u.horizon.map_or(*first, |h| h.min(*first)));
        }
        u.inbox_len = kept;
        s.applied.removed += cut.len() as u64;
    }
    s.t.set_user(user, &u);
    Ok(())
}

/// Removes every entry of `author` from `user`'s inbox (no read of the
/// inbox when its author marker says it holds none); how many.
pub(super) fn purge_author<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    user: UserId,
    author: UserId,
) -> Result<u64, KvError> {
    let mut u = t.user(user)?;
    let Some(purged) = t.inbox_of_author(user, author, u.horizon.as_ref())? else {
        return Ok(0);
    };
    t.clear_inbox_author(user, author);
    if purged.is_empty() {
        return Ok(0);
    }
    for k in &purged {
        let root = Root::default().of(t, k, u.whole())?;
        t.remove_inbox(user, k, root);
    }
    u.inbox_len = u.inbox_len.saturating_sub(purged.len() as u64);
    t.set_user(user, &u);
    Ok(purged.len() as u64)
}

pub(super) fn lower_horizon<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    user: UserId,
    to: TimelineKey,
) -> Result<(), KvError> {
    let mut u = t.user(user)?;
    let horizon = u.horizon.map_or(to, |h| h.min(to));
    // Entries at or past the horizon are never read from the inbox again;
    // none lies past the old one.
    let stale: Vec<TimelineKey> = views::inbox_before(t, user, Some(&horizon), u.horizon.as_ref())
        .collect::<Result<_, _>>()?;
    if u.whole() {
        t.drop_sources(user)?;
    }
    u.horizon = Some(horizon);
    for k in &stale {
        t.remove_inbox(user, k, None);
    }
    u.inbox_len = u.inbox_len.saturating_sub(stale.len() as u64);
    t.set_user(user, &u);
    Ok(())
}

/// The newest posts of `author` as of the follow, into `follower`'s inbox
/// (owned here, following through the edge the backfill was made for).
pub(super) fn backfill<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    (author, follower): (UserId, UserId),
    posts: &[(Ts, PostId)],
    truncated: bool,
) -> Result<(), KvError> {
    let key = |(ts, post_id): (Ts, PostId)| TimelineKey {
        ts,
        post_id,
        author,
    };
    // Entries of this author in the inbox can only come from this same
    // follow: from an earlier emission of this backfill and the deliveries
    // after it, by an owner of the author's partition that crashed before
    // the group committed them. The new owner re-decides those inputs in its
    // own order and sends their answers after this message; this list is the
    // author's posts as of this follow, so an entry it leaves out (within its
    // range) was deleted in this order, possibly before the follow, when no
    // retraction reaches this follower. A duplicate of this message (a
    // re-read from an earlier position) is followed by the same deliveries
    // again, which restore theirs.
    let newest_cut = if truncated { posts.last() } else { None };
    let mut u = s.t.user(follower)?;
    let mut gone = 0;
    let held = s.t.inbox_of_author(follower, author, u.horizon.as_ref())?;
    for k in held.unwrap_or_default() {
        let listed = posts.iter().any(|&(ts, p)| ts == k.ts && p == k.post_id);
        let in_range = newest_cut.is_none_or(|&cut| k <= key(cut));
        if !listed && in_range {
            let root = Root::default().of(s.t, &k, u.whole())?;
            s.t.remove_inbox(follower, &k, root);
            gone += 1;
        }
    }
    if gone > 0 {
        u.inbox_len = u.inbox_len.saturating_sub(gone);
        s.t.set_user(follower, &u);
        s.applied.removed += gone;
        s.applied.changed = true;
    }
    // Which of the posts are replies, in one batched read.
    let refs: Vec<PostRef> = posts.iter().map(|&(_, p)| (author, p)).collect();
    let parents = crate::reply::rule::parents_of(s.t, &refs)?;
    for (&post, parent) in posts.iter().zip(parents) {
        insert_inbox(s, (follower, &key(post)), &mut Root(None, Some(parent)))?;
    }
    if let (true, Some(&oldest)) = (truncated, posts.last()) {
        lower_horizon(s.t, follower, key(oldest))?;
        s.applied.changed = true;
    }
    Ok(())
}
