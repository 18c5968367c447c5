//! The read side: every view of every user, paged with opaque cursors.
//!
//! Each view is read from a RocksDB snapshot of the partition that owns the
//! user. A timeline page reads the materialized inbox, and where the page
//! reaches past the inbox's horizon, completes it from the current followees'
//! outboxes (the pull path), so a page always equals the pull-model result.

use crate::core::event::{PostId, Ts, UserId};
use crate::core::keys::TimelineKey;
use crate::core::partition::partition_for;
use crate::core::views::{self, live_edges};
use crate::state::datadir::DataDir;
use crate::state::{Cf, Partitions, Snapshot, Store, StoreError, Unavailable};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

mod cursor;
mod types;

use cursor::{decode_cursor, encode_cursor, CursorView};
pub use types::{Counters, FollowerItem, List, Page, PostItem, QueryError};

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
}

/// Queries over partition stores.
#[derive(Clone)]
pub struct Reader {
    parts: Arc<dyn Partitions>,
    remote: Option<Arc<dyn Remote>>,
    partitions: u32,
    secondary: bool,
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
        let pages = crate::state::StoreOptions::default().page_cache_bytes;
        Reader::open_with_page_cache(dir, pages)
    }

    /// As [`Reader::open`], keeping `bytes` of first timeline pages
    /// ([`crate::state::PageCache`]; `0`: every page is read from the
    /// stores).
    pub fn open_with_page_cache(dir: &DataDir, bytes: usize) -> Result<Reader, StoreError> {
        Ok(Reader::new(crate::state::set::open_read_only(dir, bytes)?))
    }

    /// A reader over `parts`, reading outboxes it does not hold through
    /// `remote`.
    pub fn over(parts: Arc<dyn Partitions>, remote: Option<Arc<dyn Remote>>) -> Reader {
        Reader {
            partitions: parts.count(),
            parts,
            remote,
            secondary: false,
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

    /// The partition count.
    pub fn partition_count(&self) -> u32 {
        self.partitions
    }

    /// The partition that owns `user`.
    pub fn partition_of(&self, user: UserId) -> u32 {
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
    pub fn stores(&self) -> Vec<(u32, Arc<Store>)> {
        self.parts.local()
    }

    /// `Ok` when partition `p` is here and serving; why not otherwise.
    pub fn partition_state(&self, p: u32) -> Result<(), QueryError> {
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
        let u = views::user(&self.store_of(user)?.snapshot(), user)?;
        Ok(Counters {
            user: user.0,
            followers: u.followers,
            followees: u.followees,
            posts: u.posts,
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
            Some(c) => Some(UserId(crate::core::keys::be(
                &decode_cursor(c, view, user, 8)?,
                0,
            ))),
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
        Ok(Page { items, next_cursor })
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
                Some((
                    Ts(crate::core::keys::be(&b, 0)),
                    PostId(crate::core::keys::be(&b, 8)),
                ))
            }
            None => None,
        };
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let mut items: Vec<PostItem> = views::outbox(&snap, user, after)
            .filter(|r| !matches!((r, after), (Ok(x), Some(a)) if *x == a))
            .take(limit + 1)
            .map(|r| {
                r.map(|(ts, p)| PostItem {
                    post_id: p.0,
                    author: user.0,
                    ts: ts.0,
                })
            })
            .collect::<Result<_, _>>()?;
        let next_cursor = (items.len() > limit).then(|| {
            items.truncate(limit);
            let last = items[limit - 1];
            let mut b = last.ts.to_be_bytes().to_vec();
            b.extend_from_slice(&last.post_id.to_be_bytes());
            encode_cursor(CursorView::Posts, user, &b)
        });
        Ok(Page { items, next_cursor })
    }

    /// A page of the user's home timeline: live posts of current followees,
    /// newest first (ts desc, post id desc, author desc).
    pub fn timeline(
        &self,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<PostItem>, QueryError> {
        let after = timeline_after(user, limit, cursor)?;
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let (mut keys, past_horizon) = inbox_part(&snap, user, after, limit + 1)?;
        if let Some(from) = past_horizon {
            self.pull(&snap, user, from, after, limit + 1, &mut keys)?;
        }
        Ok(timeline_page(user, limit, keys))
    }

    /// The same page as [`Reader::timeline`] when the materialized inbox
    /// alone holds it; `None` when the page reaches past the inbox's horizon
    /// and needs the pull path. A short read, whatever the user's followee
    /// count: one seek when the inbox fills the page (its entries are exact
    /// up to the horizon, which they all sort before), else that seek and a
    /// point read.
    pub fn timeline_if_materialized(
        &self,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Option<Page<PostItem>>, QueryError> {
        let store = self.store_of(user)?;
        self.materialized(&store, user, limit, cursor)
    }

    /// [`Reader::timeline_if_materialized`] in `store`, the user's.
    fn materialized(
        &self,
        store: &Store,
        user: UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Option<Page<PostItem>>, QueryError> {
        let after = timeline_after(user, limit, cursor)?;
        let want = limit + 1;
        let (lo, hi) = views::inbox_range(user, after.as_ref());
        let mut page = Vec::with_capacity(want);
        store.for_each_key(Cf::Inbox, &lo, hi.as_deref(), |k| {
            let entry = TimelineKey::decode(&k[8..]);
            if Some(entry) != after {
                page.push(entry);
            }
            page.len() < want
        })?;
        // Short of the page, the inbox is the whole rest of the timeline
        // when the user has no horizon. The record is read after the scan,
        // not from the scan's view, and that is enough: a store never
        // removes or raises a horizon (the core only ever lowers it), so
        // none now means none when the scan read.
        if page.len() == want || views::user(store, user)?.horizon.is_none() {
            return Ok(Some(timeline_page(user, limit, page)));
        }
        Ok(None)
    }

    /// The first page of `limit` entries of `user`'s timeline, encoded by
    /// `encode`, when the materialized inbox holds it (as
    /// [`Reader::timeline_if_materialized`]; `None` too when `encode`
    /// fails): kept beside the user's store ([`crate::state::PageCache`])
    /// and answered from there until a commit changes the user's inbox or
    /// record.
    pub fn first_page_encoded(
        &self,
        user: UserId,
        limit: usize,
        encode: impl FnOnce(&Page<PostItem>) -> Option<bytes::Bytes>,
    ) -> Result<Option<bytes::Bytes>, QueryError> {
        check_user(user)?;
        check_limit(limit)?;
        let store = self.store_of(user)?;
        let pages = store.pages();
        if let Some(body) = pages.get(user.0, limit) {
            return Ok(Some(body));
        }
        let epoch = pages.epoch();
        let Some(page) = self.materialized(&store, user, limit, None)? else {
            return Ok(None);
        };
        let Some(body) = encode(&page) else {
            return Ok(None);
        };
        pages.keep(epoch, user.0, limit, body.clone());
        Ok(Some(body))
    }

    /// Whether the stores are RocksDB secondaries (whose reads wait while
    /// [`Reader::refresh`] catches up).
    pub fn is_following(&self) -> bool {
        self.secondary
    }

    /// Completes a timeline page past the inbox's horizon: merges the current
    /// followees' outboxes from `from` on, lazily (a heap holds each
    /// followee's next entry), until `keys` holds `want` entries — reading
    /// about `want + followees` entries whatever the timeline's length.
    fn pull(
        &self,
        snap: &Snapshot<'_>,
        user: UserId,
        from: TimelineKey,
        after: Option<TimelineKey>,
        want: usize,
        keys: &mut Vec<TimelineKey>,
    ) -> Result<(), QueryError> {
        // Followees' outboxes: from the stores here, by partition, or in one
        // request per other processor. The user's own partition is read
        // through `snap` (its store is `None` below): a second snapshot of a
        // secondary would take its read lock twice, which deadlocks against
        // a catch-up waiting between the two.
        let own = self.partition_of(user);
        let mut here: BTreeMap<u32, (Option<Arc<Store>>, Vec<UserId>)> = BTreeMap::new();
        let mut elsewhere: Vec<UserId> = Vec::new();
        for r in live_edges(snap, Cf::Followees, user, None) {
            let (author, _) = r?;
            let p = self.partition_of(author);
            if let Some((_, authors)) = here.get_mut(&p) {
                authors.push(author);
                continue;
            }
            match self.parts.store(p) {
                Ok(s) => {
                    here.insert(p, ((p != own).then_some(s), vec![author]));
                }
                Err(Unavailable::Elsewhere { .. }) if self.remote.is_some() => {
                    elsewhere.push(author)
                }
                Err(e) => return Err(e.into()),
            }
        }
        let fetched = match (&self.remote, elsewhere.is_empty()) {
            (Some(remote), false) => {
                remote.outboxes(&elsewhere, (from.ts, from.post_id), want + 1)?
            }
            _ => Vec::new(),
        };
        let snaps: Vec<(Option<Snapshot<'_>>, &Vec<UserId>)> = here
            .values()
            .map(|(store, authors)| (store.as_ref().map(|s| s.snapshot()), authors))
            .collect();
        type Head<'a> = Box<dyn Iterator<Item = Result<TimelineKey, QueryError>> + 'a>;
        let mut heads: Vec<Head<'_>> = Vec::new();
        let keep = move |r: &Result<TimelineKey, QueryError>| !matches!(r, Ok(k) if *k < from || Some(*k) == after);
        for (other, authors) in &snaps {
            let s = other.as_ref().unwrap_or(snap);
            for &author in authors.iter() {
                let it = views::outbox(s, author, Some((from.ts, from.post_id)))
                    .map(move |r| {
                        r.map(|(ts, post_id)| TimelineKey {
                            ts,
                            post_id,
                            author,
                        })
                        .map_err(QueryError::from)
                    })
                    .filter(keep);
                heads.push(Box::new(it));
            }
        }
        for (author, posts) in fetched {
            let it = posts
                .into_iter()
                .map(move |(ts, post_id)| {
                    Ok(TimelineKey {
                        ts,
                        post_id,
                        author,
                    })
                })
                .filter(keep);
            heads.push(Box::new(it));
        }
        let mut heap = BinaryHeap::new();
        for (i, it) in heads.iter_mut().enumerate() {
            if let Some(k) = it.next().transpose()? {
                heap.push(Reverse((k, i)));
            }
        }
        while keys.len() < want {
            let Some(Reverse((k, i))) = heap.pop() else {
                break;
            };
            keys.push(k);
            if let Some(next) = heads[i].next().transpose()? {
                heap.push(Reverse((next, i)));
            }
        }
        Ok(())
    }
}

/// Checks a timeline request; the key its cursor continues after.
fn timeline_after(
    user: UserId,
    limit: usize,
    cursor: Option<&str>,
) -> Result<Option<TimelineKey>, QueryError> {
    check_user(user)?;
    check_limit(limit)?;
    Ok(match cursor {
        Some(c) => Some(TimelineKey::decode(&decode_cursor(
            c,
            CursorView::Timeline,
            user,
            TimelineKey::LEN,
        )?)),
        None => None,
    })
}

/// Up to `want` entries of the materialized inbox after `after`, and where
/// the pull path must go on from (`Some`) when they fall short of `want`
/// and the inbox has a horizon (every entry sorts before it).
fn inbox_part(
    snap: &Snapshot<'_>,
    user: UserId,
    after: Option<TimelineKey>,
    want: usize,
) -> Result<(Vec<TimelineKey>, Option<TimelineKey>), QueryError> {
    let keys: Vec<TimelineKey> = views::inbox(snap, user, after.as_ref())
        .filter(|r| !matches!((r, after), (Ok(k), Some(a)) if *k == a))
        .take(want)
        .collect::<Result<_, _>>()?;
    if keys.len() == want {
        // A full page from the inbox: its entries are exact up to the
        // horizon, which they all sort before; the user record is not read.
        return Ok((keys, None));
    }
    let past_horizon = views::user(snap, user)?.horizon.map(|h| match after {
        Some(a) if a > h => a,
        _ => h,
    });
    Ok((keys, past_horizon))
}

/// The page of `limit` from `keys` (at most `limit + 1`: one more means a
/// next page, whose cursor is the last key shown).
fn timeline_page(user: UserId, limit: usize, mut keys: Vec<TimelineKey>) -> Page<PostItem> {
    let next_cursor = (keys.len() > limit).then(|| {
        keys.truncate(limit);
        encode_cursor(CursorView::Timeline, user, &keys[limit - 1].encode())
    });
    let items = keys
        .into_iter()
        .map(|k| PostItem {
            post_id: k.post_id.0,
            author: k.author.0,
            ts: k.ts.0,
        })
        .collect();
    Page { items, next_cursor }
}
