//! Read markers and unread counts (docs/http-api.md, "Read markers"):
//! each feed's marker as the user's `seen` events set it, and how many of
//! the feed's entries, as it reads now, are placed above it.

use super::timeline::key_of;
use super::{
    check_user, encode_cursor, CursorView, EventAt, Modes, Page, PostItem, QueryError, Reader,
};
use crate::core::event::{Feed, Place, UserId};
use crate::core::explain::At;
use crate::core::keys::TimelineKey;
use crate::core::marker;
use serde::Serialize;

/// The unread count's bound when `max` is not given.
pub const DEFAULT_MAX_UNREAD: u64 = 1_000;
/// The greatest `max` taken.
pub const MAX_UNREAD: u64 = 10_000;

/// A place in a feed: an entry's time, post id and author.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PlaceItem {
    /// The entry's time, ms since the epoch.
    pub ts: u64,
    /// The entry's post id.
    pub post_id: u64,
    /// The entry's author.
    pub author: u64,
}

impl From<Place> for PlaceItem {
    fn from(p: Place) -> PlaceItem {
        PlaceItem {
            ts: p.ts.0,
            post_id: p.post_id.0,
            author: p.author.0,
        }
    }
}

/// One feed's read marker and unread count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct MarkerItem {
    /// `home` or `notifications`.
    pub feed: &'static str,
    /// The place read up to; `null` while no `seen` of the feed was
    /// applied (then every entry is unread).
    pub read_up_to: Option<PlaceItem>,
    /// The time of the `seen` event that set the marker.
    pub since: Option<u64>,
    /// Where that event sits in the log.
    pub event: Option<EventAt>,
    /// The feed's entries (notification groups) placed above the marker,
    /// at most `max`.
    pub unread: Option<u64>,
    /// Whether more than `max` entries are unread (`unread` is then `max`).
    pub capped: bool,
}

/// A user's read markers, one per feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Markers {
    /// The user.
    pub user: u64,
    /// One per feed: `home`, then `notifications`.
    pub feeds: Vec<MarkerItem>,
}

impl Reader {
    /// `user`'s read marker of each feed, and the home timeline's unread
    /// entries in `modes` (at most `max`, taken within 1 to
    /// [`MAX_UNREAD`]: the count is exact up to it).
    pub fn markers(&self, user: UserId, modes: Modes, max: u64) -> Result<Markers, QueryError> {
        check_user(user)?;
        let max = max.clamp(1, MAX_UNREAD);
        let kept = self.kept_markers(user)?;
        let mut feeds = Vec::with_capacity(Feed::ALL.len());
        for feed in Feed::ALL {
            let m = kept.iter().find(|(f, _)| *f == feed).map(|(_, m)| *m);
            let (unread, capped) = match feed {
                Feed::Home => {
                    let (n, capped) =
                        self.home_unread(user, modes, m.map(|m| m.read_up_to), max)?;
                    (Some(n), capped)
                }
                Feed::Notifications => {
                    let m = m.map(|m| m.read_up_to);
                    let (n, capped) = self.notifications_unread(user, m, max)?;
                    (Some(n), capped)
                }
            };
            feeds.push(MarkerItem {
                feed: feed.as_str(),
                read_up_to: m.map(|m| m.read_up_to.into()),
                since: m.map(|m| m.since.0),
                event: m
                    .and_then(|m| At::of(user, self.partition_count(), m.moved))
                    .map(|a| EventAt {
                        partition: a.partition,
                        offset: a.offset,
                    }),
                unread,
                capped,
            });
        }
        Ok(Markers {
            user: user.0,
            feeds,
        })
    }

    /// `user`'s markers as kept, one per feed that has one.
    pub fn kept_markers(&self, user: UserId) -> Result<Vec<(Feed, marker::Marker)>, QueryError> {
        check_user(user)?;
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let mut out = Vec::new();
        for feed in Feed::ALL {
            if let Some(m) = marker::get(&snap, user, feed)? {
                out.push((feed, m));
            }
        }
        Ok(out)
    }

    /// How many entries of `user`'s `feed` (home in the default modes;
    /// notification groups of every kind) are placed above the feed's
    /// marker, at most `max` (within 1 to [`MAX_UNREAD`]), and whether
    /// there are more: a stream's `event: unread`.
    pub fn unread(&self, user: UserId, feed: Feed, max: u64) -> Result<(u64, bool), QueryError> {
        check_user(user)?;
        let max = max.clamp(1, MAX_UNREAD);
        let store = self.store_of(user)?;
        let m = marker::get(&store.snapshot(), user, feed)?.map(|m| m.read_up_to);
        match feed {
            Feed::Home => self.home_unread(user, Modes::default(), m, max),
            Feed::Notifications => self.notifications_unread(user, m, max),
        }
    }

    /// How many home timeline entries in `modes` are placed above
    /// `marker` (all of them without one), at most `max`; and whether
    /// there are more.
    pub fn home_unread(
        &self,
        user: UserId,
        modes: Modes,
        marker: Option<Place>,
        max: u64,
    ) -> Result<(u64, bool), QueryError> {
        let anchor = marker.map_or(BOTTOM, key_of_place);
        // The inbox head's count, where it knows the timeline above the
        // marker (the default modes).
        if modes == Modes::default() && self.heads {
            let store = self.store_of(user)?;
            if let Some(n) = super::timeline::head::count_above(&store, user, anchor) {
                let n = n as u64;
                return Ok((n.min(max), n > max));
            }
        }
        let most = usize::try_from(max).unwrap_or(usize::MAX).saturating_add(1);
        // One page when at most 100 are unread.
        let (above, _) = self.timeline_walk(user, (modes, most.min(101)), anchor, most)?;
        let n = above.len() as u64;
        Ok((n.min(max), n > max))
    }
}

/// Entries an `after=` read walks from the top of the timeline at most.
pub const AFTER_MOST: usize = MAX_UNREAD as usize;

impl Reader {
    /// The `limit` home timeline entries just above `after` — the user's
    /// home read marker (`marker`; the bottom of the timeline without one)
    /// or the entry a page's cursor names — **oldest first**: catch-up
    /// with no gap. `prev_cursor` (the newest entry's, or `after`'s own
    /// place when there is none yet) continues up as `after=`;
    /// `next_cursor` (the oldest entry's) reads down as `cursor=`. The
    /// timeline is walked from its top, at most [`AFTER_MOST`] entries: a
    /// place deeper than that is refused (read from the top instead).
    pub fn timeline_catch_up(
        &self,
        user: UserId,
        modes: Modes,
        limit: usize,
        after: &str,
    ) -> Result<Page<PostItem>, QueryError> {
        let mode = modes.reposts;
        let anchor = match after {
            "marker" => {
                super::timeline::timeline_after(user, mode, limit, None)?;
                let store = self.store_of(user)?;
                let m = marker::get(&store.snapshot(), user, Feed::Home)?;
                m.map_or(BOTTOM, |m| key_of_place(m.read_up_to))
            }
            c => match super::timeline::timeline_after(user, mode, limit, Some(c))? {
                Some(k) => k,
                None => return Err(QueryError::BadCursor("no cursor".into())),
            },
        };
        let (mut above, reached) = self.timeline_walk(user, (modes, 200), anchor, AFTER_MOST)?;
        if !reached {
            return Err(QueryError::BadCursor(format!(
                "more than {AFTER_MOST} entries are above it: read from the top"
            )));
        }
        let mut items = above.split_off(above.len().saturating_sub(limit));
        items.reverse();
        let view = CursorView::timeline(mode);
        let cursor = |k: TimelineKey| encode_cursor(view, user, &k.encode());
        let keys: Vec<TimelineKey> = items.iter().map(super::timeline::key_of).collect();
        Ok(Page {
            prev_cursor: Some(cursor(keys.last().copied().unwrap_or(anchor))),
            next_cursor: keys.first().map(|&k| cursor(k)),
            items,
        })
    }
}

/// Below every entry: the anchor of a feed never marked.
const BOTTOM: TimelineKey = TimelineKey {
    ts: crate::core::event::Ts(0),
    post_id: crate::core::event::PostId(0),
    author: UserId(0),
};

/// A place as a timeline key (the same order, newest first).
pub fn key_of_place(p: Place) -> TimelineKey {
    TimelineKey {
        ts: p.ts,
        post_id: p.post_id,
        author: p.author,
    }
}

impl Reader {
    /// [`Reader::timeline_above`] in `modes`: pages of `first` entries
    /// (at most 200) first, each next one twice as long up to 200, so
    /// that a walk to a near anchor reads little. In the default modes a
    /// page the inbox (or its head) holds is read as the inline reads read
    /// it ([`Reader::timeline_if_materialized`]: the same page).
    pub(super) fn timeline_walk(
        &self,
        user: UserId,
        (modes, first): (Modes, usize),
        anchor: TimelineKey,
        most: usize,
    ) -> Result<(Vec<PostItem>, bool), QueryError> {
        const STEP: usize = 200;
        let mut step = first.clamp(1, STEP);
        let mut newer = Vec::new();
        let mut cursor: Option<String> = None;
        let store = match modes == Modes::default() {
            true => Some(self.store_of(user)?),
            false => None,
        };
        loop {
            let held = match &store {
                Some(s) => self.materialized(s, user, step, cursor.as_deref(), true)?,
                None => None,
            };
            let page = match held {
                Some(page) => page,
                None => self.timeline_with(user, modes, step, cursor.as_deref())?,
            };
            step = (step * 2).min(STEP);
            let mut reached = false;
            for i in page.items {
                let k = key_of(&i);
                if k >= anchor {
                    reached = true;
                    break;
                }
                newer.push(i);
            }
            // The bottom of the timeline counts as reaching the anchor.
            let bottom = page.next_cursor.is_none();
            match page.next_cursor {
                Some(c) if !reached && newer.len() < most => cursor = Some(c),
                _ => return Ok((newer, reached || bottom)),
            }
        }
    }
}
