//! Pages read from a reader's inbox head in memory ([`crate::state::Heads`]),
//! and the head kept after a page read from the store.

use super::timeline_page;
use crate::api::query::{Page, PostItem, RepostMode};
use crate::core::event::UserId;
use crate::core::keys::{TimelineKey, UserVal};
use crate::core::reply::rule::{Replies, Rule};
use crate::core::repost::Entry;
use crate::core::timeline::TOP;
use crate::state::{heads::Head, Cf, Store};

/// What a reader's inbox head says of a page.
pub(super) enum FromHead {
    /// The page, read from the head.
    Page(Page<PostItem>),
    /// The reader sleeps: the pull path reads the page.
    Asleep,
    /// Nothing: no head, or not one that holds the page.
    Unknown,
}

/// The page of `limit` entries of `user`'s timeline after `after` from the
/// head kept beside `store`, when it holds the page and the page is the
/// inbox's rows as they are: the partition has no repost, the reader
/// neither follows pulled authors nor sleeps (the inbox read's own
/// conditions, `Reader::materialized`); or that the reader sleeps.
pub(super) fn page(
    store: &Store,
    user: UserId,
    after: Option<TimelineKey>,
    limit: usize,
) -> FromHead {
    let want = limit + 1;
    // With replies in the partition, the rule decided from the head alone
    // in the same read, where it knows every answer.
    let replies = store.may_hold(Cf::ReplyDir);
    let Some(((rows, u, plain), decided)) = store.heads().read(user.0, |h| {
        let rows = h.inbox.after(after, want).map(<[_]>::to_vec);
        let decided = replies.then(|| from_memory(h, user, after, want)).flatten();
        ((rows, h.user, h.plain), decided)
    }) else {
        return FromHead::Unknown;
    };
    // After the read: a commit that wrote the first repost marked the
    // store before its write, so before its rows reached the head (and a
    // read sees a repost only where the store is marked).
    if store.may_hold(Cf::RepostDir) {
        return FromHead::Unknown;
    }
    if u.read_horizon() == Some(TOP) {
        return FromHead::Asleep;
    }
    // A head kept by an aggregated page may be a filtered reader's.
    let Some(mut rows) = rows.filter(|_| u.marks == 0 && plain) else {
        return FromHead::Unknown;
    };
    if let Some(shown) = decided {
        rows = shown;
    } else if store.may_hold(Cf::ReplyDir) {
        match by_the_rule(store, (user, u), after, want) {
            Some(shown) => rows = shown,
            None => return FromHead::Unknown,
        }
    }
    // Short of the page, the rows are the whole timeline only without a
    // horizon.
    if rows.len() < want && u.horizon.is_some() {
        return FromHead::Unknown;
    }
    store.heads().answered();
    let entries = rows.into_iter().map(Entry::plain).collect();
    FromHead::Page(timeline_page(user, RepostMode::Newest, limit, entries))
}

/// How many of `user`'s timeline entries (the default modes) are placed
/// above `anchor`, from the head kept beside `store` alone, when it knows:
/// [`page`]'s conditions hold, the rows above the anchor are every entry
/// above it — the head holds a row at or below the anchor, or all of an
/// inbox that holds the timeline down to it (no horizon, or one at or
/// below the anchor) — and, with replies in the partition, the head knows
/// the rule's answer for each. `None`: the walk answers.
pub(in crate::api::query) fn count_above(
    store: &Store,
    user: UserId,
    anchor: TimelineKey,
) -> Option<usize> {
    let replies = store.may_hold(Cf::ReplyDir);
    let (u, plain, whole, shown) = store.heads().read(user.0, |h| {
        let rows = &h.inbox.rows;
        let n = rows.partition_point(|r| *r < anchor);
        // A row at or below the anchor, or every row (checked against the
        // horizon below).
        let whole = match n < rows.len() {
            true => Some(true),
            false => h.inbox.all.then_some(false),
        };
        let shown = match replies {
            true => shown_of(h, user, &rows[..n]),
            false => Some(n),
        };
        (h.user, h.plain, whole, shown)
    })?;
    // After the read, as for a page.
    if store.may_hold(Cf::RepostDir) || u.read_horizon() == Some(TOP) || u.marks != 0 || !plain {
        return None;
    }
    let count = match whole? {
        true => shown?,
        // Every row is above the anchor: the rest of the timeline, from the
        // horizon on, must be at or below it.
        false => u.horizon.is_none_or(|h| anchor <= h).then_some(shown?)?,
    };
    store.heads().counted();
    Some(count)
}

/// How many of `rows` (the first of `h`) the default replies rule shows,
/// when the head knows each answer.
fn shown_of(h: &Head, user: UserId, rows: &[TimelineKey]) -> Option<usize> {
    let mut shown = 0;
    for r in rows {
        let parent = h.inbox.parent(r)?;
        let follows = match parent {
            Some(y) if y != user => h.followees.as_ref()?.binary_search(&y).is_ok(),
            _ => false,
        };
        shown += usize::from(Replies::Followed.decide(user, parent, follows));
    }
    Some(shown)
}

/// The first `want` rows of `h` after `after` that the default replies
/// rule shows (fewer when they are every row), when the head knows every
/// answer: each row's parent, and the reader's followees where a reply's
/// parent is another user. `None`: the store answers.
fn from_memory(
    h: &Head,
    user: UserId,
    after: Option<TimelineKey>,
    want: usize,
) -> Option<Vec<TimelineKey>> {
    let from = match after {
        None => 0,
        Some(a) => h.inbox.rows.partition_point(|r| *r <= a),
    };
    let mut shown = Vec::with_capacity(want);
    for r in &h.inbox.rows[from..] {
        let parent = h.inbox.parent(r)?;
        let follows = match parent {
            Some(y) if y != user => h.followees.as_ref()?.binary_search(&y).is_ok(),
            _ => false,
        };
        if Replies::Followed.decide(user, parent, follows) {
            shown.push(*r);
            if shown.len() == want {
                return Some(shown);
            }
        }
    }
    h.inbox.all.then_some(shown)
}

/// The first `want` of the head's rows after `after` that the replies
/// rule shows — fewer when the head ends first — read with a snapshot:
/// the head at the snapshot's epoch (its rows' parents known where it
/// knows them), what it does not know from the snapshot, so every answer
/// is of one committed state; `None` when the head cannot say (a chunk it
/// does not hold, a commit landed, a user record other than `u` (which
/// the page was judged by) or a filtered reader, a failed read: the store
/// answers).
fn by_the_rule(
    store: &Store,
    (user, u): (UserId, UserVal),
    after: Option<TimelineKey>,
    want: usize,
) -> Option<Vec<TimelineKey>> {
    let snap = store.snapshot();
    let (heads, epoch) = snap.heads()?;
    let mut rule = Rule::new(Replies::Followed, true);
    let mut shown = Vec::with_capacity(want);
    let mut from = after;
    loop {
        let chunk = heads.inbox_at(epoch, user.0, |h| {
            let rows = h.inbox.after(from, want)?.to_vec();
            let parents: Vec<_> = rows.iter().map(|k| h.inbox.parent(k)).collect();
            (h.user == u && h.plain).then_some((rows, parents))
        });
        let (mut rows, parents) = chunk.flatten()?;
        for (k, parent) in rows.iter().zip(parents) {
            if let Some(parent) = parent {
                rule.know((k.author, k.post_id), parent);
            }
        }
        let (n, last) = (rows.len(), rows.last().copied());
        rule.keep(&snap, user, &mut rows).ok()?;
        shown.append(&mut rows);
        if n < want || shown.len() >= want {
            shown.truncate(want);
            return Some(shown);
        }
        from = last;
    }
}

/// Keeps `rows`, the first of `user`'s inbox read at `epoch` (`all`: every
/// one), with the user record `u` and the replies among the rows
/// (`replies`, with their parents) of the same read, as the user's head.
pub(super) fn keep(
    store: &Store,
    epoch: Option<u64>,
    user: UserId,
    (rows, all): (&[TimelineKey], bool),
    (u, replies): (UserVal, Vec<(TimelineKey, UserId)>),
) {
    if let Some(epoch) = epoch {
        let mut head = Head::new(rows.to_vec(), all, u);
        head.inbox = head.inbox.with_parents(replies);
        store.heads().keep(epoch, user.0, head, true);
    }
}
