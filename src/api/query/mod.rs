//! The read side: every view of every user, paged with opaque cursors.
//!
//! Each view is read from a RocksDB snapshot of the partition that owns the
//! user. A timeline page reads the materialized inbox, and where the page
//! reaches past the inbox's horizon, completes it from the current followees'
//! outboxes (the pull path), so a page always equals the pull-model result.

use crate::core::event::{PostId, Ts, UserId};
use crate::core::filter::{self, FilterVal};
use crate::core::partition::partition_for;
use crate::core::views::{self, live_edges};
use crate::core::Partition;
use crate::state::datadir::DataDir;
use crate::state::{Cf, Partitions, Store, StoreError};
use std::sync::Arc;

mod changes;
mod cursor;
mod explain;
mod markers;
mod notifications;
mod post;
mod timeline;
mod types;

pub use crate::core::reply::rule::Replies;
pub use crate::core::repost::Mode as RepostMode;
pub use changes::{changes, Change, Changes, MAX_CHANGES};
use cursor::{cursor_u64, decode_cursor, encode_cursor, CursorView};
pub use explain::{EventAt, WhyAnswer, WhyItem};
pub use markers::{key_of_place, MarkerItem, Markers, PlaceItem, DEFAULT_MAX_UNREAD, MAX_UNREAD};
pub use notifications::{Act, Kind as NotificationKind, NotificationGroup, GROUP_ACTORS};
pub use post::{Engaged, Engagement, PostAnswer};
pub use types::{
    Counters, CountersList, Counts, FilteredItem, Flags, FollowerItem, List, Page, PostItem,
    QueryError, RepostOf, RepostedBy,
};

/// How a home timeline shows its posts: where reposts place a post
/// (`?reposts=`) and which replies show (`?replies=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Modes {
    /// Where reposts place a post.
    pub reposts: RepostMode,
    /// Which replies by followed users show.
    pub replies: Replies,
}

impl Modes {
    /// Reposts placed as `reposts` says, replies by the default rule.
    pub fn reposts(reposts: RepostMode) -> Modes {
        Modes {
            reposts,
            ..Modes::default()
        }
    }
}

/// Default page size.
pub const DEFAULT_LIMIT: usize = 20;
/// Default number of recent followers (K).
pub const DEFAULT_RECENT: usize = 100;
/// Largest page a query may ask for.
pub const MAX_LIMIT: usize = 10_000;

/// Per author, some of its outbox: `(ts, post_id)`, newest first.
pub type Outboxes = Vec<(UserId, Vec<(Ts, PostId)>)>;

/// Outboxes that live in other processors (Kafka mode), for the pull path
/// of timelines.
pub trait Remote: Send + Sync {
    /// For each author: up to `limit` of its live posts, newest first,
    /// starting at `(ts, post_id)` inclusive, in outbox order.
    fn outboxes(
        &self,
        authors: &[UserId],
        from: (Ts, PostId),
        limit: usize,
    ) -> Result<Outboxes, QueryError>;

    /// A post id's record at its author's partition (for `explain`).
    fn post(
        &self,
        post: crate::core::keys::PostRef,
    ) -> Result<Option<crate::core::keys::PostVal>, QueryError>;

    /// Originals' counts, read at their authors' partition `at`, or a
    /// viewer's flags on them, read at the viewer's partition `at`.
    fn engagement(&self, at: Partition, asked: Engagement<'_>) -> Result<Vec<Engaged>, QueryError>;

    /// When the processor serving partition `at` did not answer just now:
    /// for how long its reads go to a warm standby here, if one is kept.
    fn unreachable(&self, _at: Partition) -> Option<std::time::Duration> {
        None
    }
}

/// Every view as of an earlier log time (docs/http-api.md, "Earlier states"): the
/// operations part builds that state from the log and hands a reader of it.
pub trait Rewind: Send + Sync {
    /// A reader whose every view answers as of log time `t` (ms):
    /// [`QueryError::HistoryGone`] when `t` is older than the history kept.
    fn at(&self, t: Ts) -> Result<Reader, QueryError>;
}

/// Queries over partition stores.
#[derive(Clone)]
pub struct Reader {
    parts: Arc<dyn Partitions>,
    remote: Option<Arc<dyn Remote>>,
    partitions: u32,
    secondary: bool,
    /// The thread reading the inbox heads of stores this reader opened:
    /// it stops when the last copy of the reader is dropped.
    warming: Option<Arc<crate::state::heads::warm::Warming>>,
    /// Whether pages are read from the inbox and outbox heads kept beside
    /// the stores (off only to check them: [`Reader::past_heads`]).
    heads: bool,
}

fn check_limit(limit: usize) -> Result<(), QueryError> {
    if limit == 0 || limit > MAX_LIMIT {
        return Err(QueryError::BadLimit {
            got: limit,
            max: MAX_LIMIT,
        });
    }
    Ok(())
}

fn check_user(user: UserId) -> Result<(), QueryError> {
    if user.0 == 0 {
        return Err(QueryError::BadUser(0));
    }
    Ok(())
}

impl Reader {
    /// A reader over `stores`, indexed by partition.
    pub fn new(stores: Vec<Arc<Store>>) -> Reader {
        Reader::over(Arc::new(stores), None)
    }

    /// A reader of `dir`'s state, opened read-only (beside a running
    /// processor it sees the state as of the open).
    pub fn open(dir: &DataDir) -> Result<Reader, StoreError> {
        Reader::open_keeping(dir, crate::state::Kept::default())
    }

    /// As [`Reader::open`], keeping `kept` bytes of timeline pages
    /// ([`crate::state::PageCache`]) and of readers' newest inbox rows
    /// ([`crate::state::Heads`], read in the background from the open on);
    /// [`crate::state::Kept::NONE`]: every page is read from the stores.
    pub fn open_keeping(dir: &DataDir, kept: crate::state::Kept) -> Result<Reader, StoreError> {
        let stores = crate::state::set::open_read_only(dir, kept)?;
        let warming = crate::state::heads::warm::in_background(&stores);
        Ok(Reader {
            warming: warming.map(Arc::new),
            ..Reader::new(stores)
        })
    }

    /// A reader over `parts`, reading outboxes it does not hold through
    /// `remote`.
    pub fn over(parts: Arc<dyn Partitions>, remote: Option<Arc<dyn Remote>>) -> Reader {
        Reader {
            partitions: parts.count(),
            parts,
            remote,
            secondary: false,
            warming: None,
            heads: true,
        }
    }

    /// This reader, reading outboxes it does not hold through `remote`.
    pub fn with_remote(self, remote: Arc<dyn Remote>) -> Reader {
        Reader {
            remote: Some(remote),
            ..self
        }
    }

    /// This reader over the stores as they are now: for a replaceable set,
    /// pinned, so every read through it sees one set of stores.
    pub fn current(&self) -> Reader {
        match self.parts.pinned() {
            Some(parts) => Reader {
                parts,
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    /// This reader reading every page from the stores, past the inbox and
    /// outbox heads: a page it reads is the one the heads must give.
    pub fn past_heads(&self) -> Reader {
        Reader {
            heads: false,
            ..self.clone()
        }
    }

    /// Whether the inbox heads of the stores this reader opened are read
    /// (true when it opened none: see [`Reader::open_keeping`]).
    pub fn heads_read(&self) -> bool {
        self.warming.as_ref().is_none_or(|w| w.is_done())
    }

    /// The partition count.
    pub fn partition_count(&self) -> u32 {
        self.partitions
    }

    /// The partition that owns `user`.
    pub fn partition_of(&self, user: UserId) -> Partition {
        partition_for(user, self.partitions)
    }

    /// Marks the stores as RocksDB secondaries, which [`Reader::refresh`]
    /// moves forward.
    pub fn following(mut self) -> Reader {
        self.secondary = true;
        self
    }

    /// Moves secondary stores to the primary's latest committed state; a
    /// no-op over the processor's own stores, which are always current.
    pub fn refresh(&self) -> Result<(), QueryError> {
        if self.secondary {
            for (_, s) in self.parts.local() {
                s.catch_up()?;
            }
        }
        Ok(())
    }

    /// The stores here, by partition.
    pub fn stores(&self) -> Vec<(Partition, Arc<Store>)> {
        self.parts.local()
    }

    /// Kafka mode: reads of partition `p`, whose owner cannot be reached,
    /// go to this processor's warm standby of it for `span`, if it keeps
    /// one caught up with the group's committed positions; those
    /// positions, or `None`.
    pub fn read_standby(
        &self,
        p: Partition,
        span: std::time::Duration,
    ) -> Option<crate::core::position::Positions> {
        self.parts.read_standby(p, span)
    }

    /// The positions of the warm standby that answers partition `p` here
    /// now (see [`Reader::read_standby`]), if one does.
    pub fn standby_reading(&self, p: Partition) -> Option<crate::core::position::Positions> {
        self.parts.standby_reading(p)
    }

    /// `Ok` when partition `p` is here and serving; why not otherwise.
    pub fn partition_state(&self, p: Partition) -> Result<(), QueryError> {
        self.parts.store(p).map(|_| ()).map_err(QueryError::from)
    }

    /// Up to `limit` of `author`'s live posts, newest first, from
    /// `(ts, post_id)` inclusive (for another processor's pull path).
    pub fn outbox_from(
        &self,
        author: UserId,
        from: (Ts, PostId),
        limit: usize,
    ) -> Result<Vec<(Ts, PostId)>, QueryError> {
        check_user(author)?;
        check_limit(limit)?;
        let store = self.store_of(author)?;
        let snap = store.snapshot();
        Ok(views::outbox(&snap, author, Some(from))
            .take(limit)
            .collect::<Result<_, _>>()?)
    }

    /// The store that owns `user`, if it is here and serving.
    /// The store that holds `user`'s views.
    pub fn store_of(&self, user: UserId) -> Result<Arc<Store>, QueryError> {
        Ok(self.parts.store(self.partition_of(user))?)
    }

    /// The users with the most live followers, most first (ties by id), at
    /// most `n`. Scans every user record: for tours and tools, not requests.
    pub fn most_followed(&self, n: usize) -> Result<Vec<Counters>, QueryError> {
        let mut all = Vec::new();
        for (_, store) in self.parts.local() {
            let snap = store.snapshot();
            for r in views::users(&snap) {
                let (u, v) = r?;
                all.push(Counters {
                    user: u.0,
                    followers: v.followers,
                    followees: v.followees,
                    posts: v.posts,
                    reposts: v.reposts,
                    likes: crate::core::like::given(&snap, u)?,
                });
            }
        }
        all.sort_by_key(|c| (std::cmp::Reverse(c.followers), c.user));
        all.truncate(n);
        Ok(all)
    }

    /// A user's counters.
    pub fn counters(&self, user: UserId) -> Result<Counters, QueryError> {
        check_user(user)?;
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let u = views::user(&snap, user)?;
        Ok(Counters {
            user: user.0,
            followers: u.followers,
            followees: u.followees,
            posts: u.posts,
            reposts: u.reposts,
            likes: crate::core::like::given(&snap, user)?,
        })
    }

    /// Counters of many users, in the order asked.
    pub fn counters_many(&self, users: &[UserId]) -> Result<Vec<Counters>, QueryError> {
        users.iter().map(|&u| self.counters(u)).collect()
    }

    /// The `limit` most recent live followers, newest follow first.
    pub fn recent_followers(
        &self,
        user: UserId,
        limit: usize,
    ) -> Result<List<FollowerItem>, QueryError> {
        check_user(user)?;
        check_limit(limit)?;
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let items = views::recent_followers(&snap, user)
            .take(limit)
            .map(|r| {
                r.map(|(u, ts)| FollowerItem {
                    user: u.0,
                    ts: ts.0,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(List { items })
    }

    /// A page of followers (`Cf::Followers`) or followees, by user id.
    fn edges(
        &self,
        cf: Cf,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<FollowerItem>, QueryError> {
        check_user(user)?;
        check_limit(limit)?;
        let view = if cf == Cf::Followers {
            CursorView::Followers
        } else {
            CursorView::Followees
        };
        let after = match cursor {
            Some(c) => Some(UserId(cursor_u64(&decode_cursor(c, view, user, 8)?, 0)?)),
            None => None,
        };
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let mut items: Vec<FollowerItem> = live_edges(&snap, cf, user, after)
            .take(limit + 1)
            .map(|r| {
                r.map(|(u, e)| FollowerItem {
                    user: u.0,
                    ts: e.ts.0,
                })
            })
            .collect::<Result<_, _>>()?;
        let next_cursor = (items.len() > limit).then(|| {
            items.truncate(limit);
            encode_cursor(view, user, &items[limit - 1].user.to_be_bytes())
        });
        Ok(Page {
            items,
            next_cursor,
            prev_cursor: None,
        })
    }

    /// A page of the user's followers (with follow time), by id.
    pub fn followers(
        &self,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<FollowerItem>, QueryError> {
        self.edges(Cf::Followers, user, limit, cursor)
    }

    /// A page of the users this user follows (with follow time), by id.
    pub fn followees(
        &self,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<FollowerItem>, QueryError> {
        self.edges(Cf::Followees, user, limit, cursor)
    }

    /// A page of the users `user` mutes, by user id: every mute on, also one
    /// whose `until` the partition's clock has reached (it no longer
    /// filters: `in_force` is false).
    pub fn mutes(
        &self,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<FilteredItem>, QueryError> {
        self.filtered(CursorView::Mutes, user, limit, cursor, |f| {
            f.mute.filter(|(t, _)| t.on).map(|(t, until)| (t.ts, until))
        })
    }

    /// A page of the users `user` blocks, by user id.
    pub fn blocks(
        &self,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<FilteredItem>, QueryError> {
        self.filtered(CursorView::Blocks, user, limit, cursor, |f| {
            f.block_out
                .filter(|b| b.toggle.on)
                .map(|b| (b.toggle.ts, None))
        })
    }

    /// A page of the pairs of `user` that `pick` lists (with since and until).
    fn filtered(
        &self,
        view: CursorView,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
        pick: impl Fn(&FilterVal) -> Option<(Ts, Option<Ts>)>,
    ) -> Result<Page<FilteredItem>, QueryError> {
        check_user(user)?;
        check_limit(limit)?;
        let after = match cursor {
            Some(c) => Some(cursor_u64(&decode_cursor(c, view, user, 8)?, 0)?),
            None => None,
        };
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let now = views::clock(&snap)?;
        let mut items = Vec::new();
        // From the cursor's user on: a page reads only its own records.
        for r in filter::after(&snap, user, after.map(UserId)) {
            let (other, f) = r?;
            if let Some((since, until)) = pick(&f) {
                items.push(FilteredItem {
                    user: other.0,
                    since: since.0,
                    until: until.map(|u| u.0),
                    // The rule the read filter applies (`core::filter`).
                    in_force: (view == CursorView::Mutes).then(|| until.is_none_or(|u| now < u)),
                    notifications: (view == CursorView::Mutes && f.mute_keeps_notifications)
                        .then_some(false),
                });
                if items.len() > limit {
                    break;
                }
            }
        }
        let next_cursor = (items.len() > limit).then(|| {
            items.truncate(limit);
            encode_cursor(view, user, &items[limit - 1].user.to_be_bytes())
        });
        Ok(Page {
            items,
            next_cursor,
            prev_cursor: None,
        })
    }

    /// A page of the user's own live posts, newest first.
    pub fn posts(
        &self,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<PostItem>, QueryError> {
        check_user(user)?;
        check_limit(limit)?;
        let after = match cursor {
            Some(c) => {
                let b = decode_cursor(c, CursorView::Posts, user, 16)?;
                Some((Ts(cursor_u64(&b, 0)?), PostId(cursor_u64(&b, 8)?)))
            }
            None => None,
        };
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let mut items: Vec<PostItem> = views::outbox_items(&snap, user, after)
            .filter(|r| !matches!((r, after), (Ok(x), Some(a)) if (x.ts, x.post_id) == a))
            .take(limit + 1)
            .map(|r| {
                let x = r?;
                let mut item = PostItem::plain(x.post_id.0, user.0, x.ts.0);
                match x.repost_of {
                    Some(((a, p), _)) => {
                        item.repost_of = Some(types::RepostOf {
                            author: a.0,
                            post_id: p.0,
                        })
                    }
                    None => {
                        let n = crate::core::repost::count(&snap, (user, x.post_id))?;
                        item.reposts = Some(n);
                        let n = crate::core::like::count(&snap, (user, x.post_id))?;
                        item.likes = Some(n);
                    }
                }
                Ok::<_, QueryError>(item)
            })
            .collect::<Result<_, _>>()?;
        let next_cursor = (items.len() > limit).then(|| {
            items.truncate(limit);
            let last = &items[limit - 1];
            let mut b = last.ts.to_be_bytes().to_vec();
            b.extend_from_slice(&last.post_id.to_be_bytes());
            encode_cursor(CursorView::Posts, user, &b)
        });
        Ok(Page {
            items,
            next_cursor,
            prev_cursor: None,
        })
    }

    /// Whether some partitions are read from other processors (Kafka mode).
    pub fn has_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// Whether the stores are RocksDB secondaries (whose reads wait while
    /// [`Reader::refresh`] catches up).
    pub fn is_following(&self) -> bool {
        self.secondary
    }
}
