//! Timeline pages: the materialized inbox, the page cache of first pages,
//! and the pull path past the inbox's horizon.

use super::cursor::{decode_cursor, encode_cursor, CursorView};
use super::{
    check_limit, check_user, Modes, Page, PostItem, QueryError, Reader, Replies, RepostMode,
};
use crate::core::event::UserId;
use crate::core::kv::{Kv, KvError};
use crate::core::views;
use crate::state::{Cf, Snapshot, Store};

use crate::core::filter::ReadFilter;
use crate::core::keys::{self, TimelineKey};
use crate::core::reply::rule::Rule;
use crate::core::repost::{self, Entry};
use crate::core::timeline::{continue_from, held_timeline, TOP};
use crate::state::heads::view::HeadView;
use std::collections::HashSet;

pub(super) mod head;
mod held;
mod pull;
use held::{any_filter, any_repost, held_page};

/// The most followees of a reader whose page [`Reader::timeline_if_short`]
/// reads: at most a seek into each one's outbox, tens of microseconds.
pub const SHORT_READ_FOLLOWEES: u64 = 64;

impl Reader {
    /// A page of the user's home timeline: live posts of current followees,
    /// newest first (ts desc, post id desc, author desc), each post once at
    /// its newest appearance when followed users reposted it.
    pub fn timeline(
        &self,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<PostItem>, QueryError> {
        self.timeline_in(user, RepostMode::Newest, limit, cursor)
    }

    /// A page of the user's home timeline with its posts placed as `mode`
    /// says (docs/semantics.md, "The timeline"): every live post of a followee and every
    /// live repost by one, one entry per original post, in timeline order.
    pub fn timeline_in(
        &self,
        user: UserId,
        mode: RepostMode,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<PostItem>, QueryError> {
        self.timeline_with(user, Modes::reposts(mode), limit, cursor)
    }

    /// A page of the user's home timeline in `modes`: reposts placed as
    /// [`Reader::timeline_in`] places them, and only the replies the rule
    /// named shows (docs/semantics.md, "Replies in home timelines").
    pub fn timeline_with(
        &self,
        user: UserId,
        modes: Modes,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<PostItem>, QueryError> {
        let mode = modes.reposts;
        let after = timeline_after(user, mode, limit, cursor)?;
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        // No read when the store never held a filter (checked after the
        // snapshot: a commit marks the store before it writes one).
        let mut filter = match store.may_hold(Cf::Filters) {
            true => ReadFilter::of(&snap, user, views::clock(&snap)?)?,
            false => ReadFilter::default(),
        };
        (filter.replies, filter.no_reply_here) = (modes.replies, !store.may_hold(Cf::ReplyDir));
        // The reader's head, and the reposters held beside the heads, in
        // front of the snapshot (`state/heads/view.rs`): the same answers.
        let view = HeadView::new(&snap, user, self.heads);
        let entries = if !any_repost(&store, &snap)? {
            // No repost anywhere: each appearance is an entry of its own,
            // shown unless its author is hidden (read on past those).
            let (want, mut entries) = (limit + 1, Vec::with_capacity(limit + 1));
            let mut rule = Rule::new(filter.replies, !filter.no_reply_here);
            let mut from = after;
            loop {
                let keys = self.appearances((&snap, &view), user, from, want, &filter.hidden)?;
                let read = keys.len();
                from = keys.last().copied().or(from);
                let mut shown = keys;
                shown.retain(|k| !filter.hidden.contains(&k.author));
                rule.keep(&view, user, &mut shown)?;
                entries.extend(shown.into_iter().map(Entry::plain));
                if read < want || entries.len() >= want {
                    break;
                }
            }
            entries.truncate(want);
            entries
        } else {
            // Hidden users' outboxes are not read past the horizon: nothing
            // of theirs would show.
            let hidden = filter.hidden.clone();
            let read = |from, n| self.appearances((&snap, &view), user, from, n, &hidden);
            let entries = aggregated(&view, (user, mode, after), limit, filter, |f, n| {
                read(f, n).map(Some)
            })?;
            entries.unwrap_or_default()
        };
        if self.heads {
            // Whether the reader has any filter record is read only for a
            // head kept now; unknown, the head is not plain.
            view.keep(|| any_filter(&store, &snap, user).is_ok_and(|any| !any));
        }
        Ok(timeline_page(user, mode, limit, entries))
    }

    /// Up to `want` appearances (live posts and reposts of followees) of
    /// `user`'s timeline after `after`, in order: what the partition holds
    /// (read through `inbox`, a view of `snap`), completed from the
    /// followees' outboxes past its bound (but those of `hidden`, whose
    /// appearances a filter drops).
    fn appearances(
        &self,
        (snap, inbox): (&Snapshot<'_>, &(impl Kv + ?Sized)),
        user: UserId,
        after: Option<TimelineKey>,
        want: usize,
        hidden: &HashSet<UserId>,
    ) -> Result<Vec<TimelineKey>, QueryError> {
        // The reader's record and followees from their head, when it holds
        // them at the snapshot's epoch: a sleeper's page is then read with
        // no scan of theirs (the pull path, from the outbox heads).
        let held = snap
            .heads()
            .filter(|_| self.heads)
            .and_then(|(h, epoch)| h.followees(epoch, user.0));
        let (mut keys, past_horizon) = match &held {
            Some((u, _)) if u.read_horizon() == Some(TOP) => {
                continue_from(Vec::new(), want, Some(TOP), after)
            }
            _ => held_timeline(inbox, user, after, want)?,
        };
        if let Some(from) = past_horizon {
            let followees = held.map(|(_, f)| f);
            self.pull(
                snap,
                user,
                (from, after),
                want,
                (hidden, followees),
                &mut keys,
            )?;
        }
        Ok(keys)
    }

    /// The same page as [`Reader::timeline`] when the materialized inbox
    /// alone holds it; `None` when the page reaches past the inbox's horizon
    /// and needs the pull path, or the user follows pulled authors (or
    /// did). A short read, whatever the user's followee count: one seek and
    /// a point read.
    pub fn timeline_if_materialized(
        &self,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Option<Page<PostItem>>, QueryError> {
        let store = self.store_of(user)?;
        self.materialized(&store, user, limit, cursor, false)
    }

    /// [`Reader::timeline`]'s page when reading it in full is short
    /// whatever the page: the user follows at most
    /// [`SHORT_READ_FOLLOWEES`] users and every outbox is read here (no
    /// other processor is asked). `None` otherwise: the caller reads it
    /// where a long read waits no one.
    pub fn timeline_if_short(
        &self,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Option<Page<PostItem>>, QueryError> {
        if self.remote.is_some() {
            return Ok(None);
        }
        let store = self.store_of(user)?;
        // The user record of the reader's head (a committed state) or
        // of the store: only a bound on the read's length.
        let held = store.heads().read(user.0, |h| h.user.followees);
        let followees = match held.filter(|_| self.heads) {
            Some(n) => n,
            None => views::user(&store.snapshot(), user)?.followees,
        };
        if followees > SHORT_READ_FOLLOWEES {
            return Ok(None);
        }
        self.timeline(user, limit, cursor).map(Some)
    }

    /// [`Reader::timeline_if_materialized`] in `store`, the user's; with
    /// `copies`, also the page of a user who follows pulled authors when
    /// the partition's copies and the inbox hold it (read again from one
    /// snapshot).
    pub(super) fn materialized(
        &self,
        store: &Store,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
        copies: bool,
    ) -> Result<Option<Page<PostItem>>, QueryError> {
        let mode = RepostMode::Newest;
        let after = timeline_after(user, mode, limit, cursor)?;
        if self.heads {
            match head::page(store, user, after, limit) {
                head::FromHead::Page(page) => return Ok(Some(page)),
                head::FromHead::Asleep => return Ok(None),
                head::FromHead::Unknown => {}
            }
        }
        let want = limit + 1;
        // Reposts known before the scan: the page is the full read's, and
        // the scan below would be thrown away.
        let reposts_seen = store.reposts_seen();
        if reposts_seen && !copies {
            return Ok(None);
        }
        // One view for the record, the scan and the checks: what they say
        // of each other holds. (One snapshot only: on a secondary a second
        // would take its read lock twice.)
        let epoch = store.heads().epoch();
        let snap = store.snapshot();
        if reposts_seen {
            let filtered = any_filter(store, &snap, user)?;
            return held_page(&snap, (user, mode, after), limit, (filtered, self.heads));
        }
        let u = views::user(&snap, user)?;
        // Asleep or waiting for refills: nothing is held, the pull path
        // reads the page. Not scanned: the inbox emptied when the reader
        // fell asleep leaves a deletion per entry where the scan would
        // start, until compaction drops them.
        if u.read_horizon() == Some(TOP) {
            // The head says so next time: no inbox row, not all of them.
            head::keep(store, epoch, user, (&[], false), (u, Vec::new()));
            return Ok(None);
        }
        // A reader with blocks or mutes, or any repost in the partition:
        // entries are not the inbox's keys, and the full read places them.
        let filtered = any_filter(store, &snap, user)?;
        if filtered || any_repost(store, &snap)? {
            if !copies {
                return Ok(None);
            }
            return held_page(&snap, (user, mode, after), limit, (filtered, self.heads));
        }
        // The inbox's rows from `after`, a page's worth at a time, until
        // `want` of them show by the replies rule (`rows`: every one read).
        let mut rule = Rule::new(Replies::Followed, store.may_hold(Cf::ReplyDir));
        let (mut rows, mut page) = (Vec::with_capacity(want), Vec::with_capacity(want));
        let mut replies = Vec::new();
        let mut from = after;
        loop {
            let read = inbox_rows(&snap, user, from, want, &mut (&mut rule, &mut replies))?;
            let (n, mut shown) = (read.len(), read.clone());
            from = read.last().copied().or(from);
            rows.extend(read);
            rule.keep(&snap, user, &mut shown)?;
            page.extend(shown);
            if n < want || page.len() >= want {
                break;
            }
        }
        page.truncate(want);
        let plain = |keys: Vec<TimelineKey>| keys.into_iter().map(Entry::plain).collect();
        // A reader who never had a pulled followee nor slept (`marks`):
        // the inbox holds the timeline up to its horizon, and short of the
        // page it is the whole rest of the timeline when there is none.
        if u.marks == 0 {
            if after.is_none() {
                // Every row read (all of them when the page is short), up
                // to the head's size: a page from the head applies the
                // rule again.
                head::keep(store, epoch, user, (&rows, page.len() < want), (u, replies));
            }
            let whole = page.len() == want || u.horizon.is_none();
            return Ok(whole.then(|| timeline_page(user, mode, limit, plain(page))));
        }
        if !copies {
            return Ok(None);
        }
        // Copies and replies: the full read of what the partition holds
        // reads on past the replies the rule leaves out.
        if rule.any() {
            return held_page(&snap, (user, mode, after), limit, (false, self.heads));
        }
        let (keys, pull_from) = held_timeline(&snap, user, after, want)?;
        Ok(pull_from
            .is_none()
            .then(|| timeline_page(user, mode, limit, plain(keys))))
    }

    /// The first page of `limit` entries of `user`'s timeline, encoded by
    /// `encode`: [`Reader::page_encoded`] without a cursor.
    pub fn first_page_encoded(
        &self,
        user: UserId,
        limit: usize,
        encode: impl FnOnce(&Page<PostItem>) -> Option<bytes::Bytes>,
    ) -> Result<Option<bytes::Bytes>, QueryError> {
        self.page_encoded(user, limit, None, encode)
    }

    /// The page of `limit` entries of `user`'s timeline from `cursor`
    /// (`None`: the first page), encoded by `encode`, when the materialized
    /// inbox (and the partition's copies of the pulled authors the user
    /// follows) hold it, as [`Reader::timeline_if_materialized`] (`None`
    /// too when `encode` fails): kept beside the user's store
    /// ([`crate::state::PageCache`]) and answered from there until a commit
    /// changes the user's inbox or record, any copy, or the partition's
    /// directory of live reposts (a page with reposts is read in full,
    /// from this store alone).
    pub fn page_encoded(
        &self,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
        encode: impl FnOnce(&Page<PostItem>) -> Option<bytes::Bytes>,
    ) -> Result<Option<bytes::Bytes>, QueryError> {
        check_user(user)?;
        check_limit(limit)?;
        let store = self.store_of(user)?;
        let pages = store.pages();
        if let Some(body) = pages.get(user.0, limit, cursor) {
            return Ok(Some(body));
        }
        let epoch = pages.epoch();
        let Some(page) = self.materialized(&store, user, limit, cursor, true)? else {
            return Ok(None);
        };
        let Some(body) = encode(&page) else {
            return Ok(None);
        };
        pages.keep(epoch, (user.0, limit, cursor), body.clone());
        Ok(Some(body))
    }
}

/// Up to `want` rows of `user`'s inbox past `after`, in order; what each
/// row's value says of its post goes to `rule`, and the replies among
/// them to `replies` (with their parents, for the reader's head).
fn inbox_rows(
    snap: &Snapshot<'_>,
    user: UserId,
    after: Option<TimelineKey>,
    want: usize,
    (rule, replies): &mut (&mut Rule, &mut Vec<(TimelineKey, UserId)>),
) -> Result<Vec<TimelineKey>, QueryError> {
    let prefix = keys::key([user.0]);
    let lo = after.map_or_else(|| prefix.clone(), |a| keys::inbox(user, &a));
    let (mut rows, mut bad) = (Vec::with_capacity(want), None);
    let range = [(lo, prefix)];
    snap.for_each_in_ranges(Cf::Inbox, &range, &mut |_, k, v| {
        match crate::core::kv::timeline_key_at(Cf::Inbox, k, 8) {
            Ok(entry) if Some(entry) != after => match keys::inbox_parent(v) {
                Some(parent) => {
                    rows.push(entry);
                    rule.know((entry.author, entry.post_id), parent);
                    replies.extend(parent.map(|y| (entry, y)));
                }
                None => {
                    bad = Some(KvError::corrupt(
                        Cf::Inbox,
                        k,
                        "an inbox value of another layout",
                    ))
                }
            },
            Ok(_) => {}
            Err(e) => bad = Some(e),
        }
        bad.is_none() && rows.len() < want
    })?;
    match bad {
        Some(e) => Err(e.into()),
        None => Ok(rows),
    }
}

/// The entries (up to `limit + 1`) of a timeline page in `mode` past
/// `after`, read through `kv`, from the appearances `read` gives a chunk
/// at a time (from a key, how many); `None` when `read` cannot give a
/// chunk.
fn aggregated(
    kv: &(impl Kv + ?Sized),
    (user, mode, after): (UserId, RepostMode, Option<TimelineKey>),
    limit: usize,
    filter: ReadFilter,
    mut read: impl FnMut(Option<TimelineKey>, usize) -> Result<Option<Vec<TimelineKey>>, QueryError>,
) -> Result<Option<Vec<Entry>>, QueryError> {
    let mut entries = repost::Entries::new(user, mode, after, filter);
    let mut from = entries.start();
    let mut out = Vec::new();
    // The appearances, a chunk at a time, until the entries fill the page
    // (times whose entries are all known count only).
    let chunk = limit + 2;
    loop {
        let Some(keys) = read(from, chunk)? else {
            return Ok(None);
        };
        entries.prefetch(kv, &keys)?;
        for k in &keys {
            entries.push(kv, *k, &mut out)?;
        }
        if keys.len() < chunk {
            entries.flush(&mut out);
            break;
        }
        if out.len() > limit {
            break;
        }
        from = keys.last().copied();
    }
    out.truncate(limit + 1);
    Ok(Some(out))
}

/// Checks a timeline request; the entry its cursor continues after.
pub(super) fn timeline_after(
    user: UserId,
    mode: RepostMode,
    limit: usize,
    cursor: Option<&str>,
) -> Result<Option<TimelineKey>, QueryError> {
    check_user(user)?;
    check_limit(limit)?;
    Ok(match cursor {
        Some(c) => {
            let b = decode_cursor(c, CursorView::timeline(mode), user, TimelineKey::LEN)?;
            let key = TimelineKey::decode(&b);
            Some(key.ok_or_else(|| QueryError::BadCursor("too short".into()))?)
        }
        None => None,
    })
}

/// The page of `limit` from `entries` (at most `limit + 1`: one more means
/// a next page, whose cursor is the last entry shown).
fn timeline_page(
    user: UserId,
    mode: RepostMode,
    limit: usize,
    mut entries: Vec<Entry>,
) -> Page<PostItem> {
    let view = CursorView::timeline(mode);
    let next_cursor = (entries.len() > limit).then(|| {
        entries.truncate(limit);
        encode_cursor(view, user, &entries[limit - 1].key.encode())
    });
    let prev_cursor = entries
        .first()
        .map(|e| encode_cursor(view, user, &e.key.encode()));
    let items = entries.into_iter().map(item_of).collect();
    Page {
        items,
        next_cursor,
        prev_cursor,
    }
}

/// An entry as the API answers it.
fn item_of(e: Entry) -> PostItem {
    let k = e.key;
    let mut item = PostItem::plain(k.post_id.0, k.author.0, k.ts.0);
    if let Some(post_ts) = e.post_ts {
        item.post_ts = Some(post_ts.0);
        item.reposters = Some(e.reposters);
        let by = e.reposted_by.iter().map(|r| super::RepostedBy {
            user: r.user.0,
            post_id: r.post_id.0,
            ts: r.ts.0,
        });
        item.reposted_by = Some(by.collect());
    }
    item
}

impl Reader {
    /// The timeline entries newer than `anchor`, newest first, walked from
    /// the top in pages of 200 until the anchor or until at least `most`
    /// are collected; and whether the walk reached the anchor (or the
    /// bottom of the timeline). The stream's catch-up and `newer_than`
    /// pages both read this way.
    pub fn timeline_above(
        &self,
        user: UserId,
        anchor: TimelineKey,
        most: usize,
    ) -> Result<(Vec<PostItem>, bool), QueryError> {
        self.timeline_walk(user, (Modes::default(), 200), anchor, most)
    }
}

/// A timeline entry's key.
pub(super) fn key_of(i: &PostItem) -> TimelineKey {
    TimelineKey {
        ts: crate::core::event::Ts(i.ts),
        post_id: crate::core::event::PostId(i.post_id),
        author: UserId(i.author),
    }
}

/// Entries a `newer_than` read walks from the top of the timeline at most.
pub const NEWER_THAN_MOST: usize = 1_000;

impl Reader {
    /// The `limit` timeline entries just newer than the entry `newer_than`
    /// names (a page's `prev_cursor`; Mastodon's `min_id`), newest first:
    /// the page above the one that cursor came from. Its `prev_cursor`
    /// leads further up, its `next_cursor` back down. The timeline is
    /// walked from its top, at most [`NEWER_THAN_MOST`] entries: an entry
    /// deeper than that is refused (read from the top instead).
    pub fn timeline_newer(
        &self,
        user: UserId,
        modes: Modes,
        limit: usize,
        newer_than: &str,
    ) -> Result<Page<PostItem>, QueryError> {
        let mode = modes.reposts;
        let Some(anchor) = timeline_after(user, mode, limit, Some(newer_than))? else {
            return Err(QueryError::BadCursor("no cursor".into()));
        };
        let walk = (modes, 200);
        let (mut newer, reached) = self.timeline_walk(user, walk, anchor, NEWER_THAN_MOST)?;
        if !reached {
            return Err(QueryError::BadCursor(format!(
                "more than {NEWER_THAN_MOST} entries are newer than this cursor: read from the top"
            )));
        }
        // The `limit` closest to the anchor.
        let items = newer.split_off(newer.len().saturating_sub(limit));
        let view = CursorView::timeline(mode);
        let cursor = |i: &PostItem| encode_cursor(view, user, &key_of(i).encode());
        let mut page = Page {
            prev_cursor: items.first().map(cursor),
            // Down from here: this page's last entry, then the anchor.
            next_cursor: items.last().map(cursor),
            items,
        };
        if page.items.is_empty() {
            // Nothing newer yet: poll again with the same cursor.
            page.prev_cursor = Some(newer_than.to_string());
        }
        Ok(page)
    }
}
