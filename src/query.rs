//! The read side: every view of every user, paged with opaque cursors.
//!
//! Each view is read from a RocksDB snapshot of the partition that owns the
//! user. A timeline page reads the materialized inbox, and where the page
//! reaches past the inbox's horizon, completes it from the current followees'
//! outboxes (the pull path), so a page always equals the pull-model result.

use crate::event::{PostId, Ts, UserId};
use crate::partition::partition_for;
use crate::state::keys::TimelineKey;
use crate::state::views::{self, live_edges};
use crate::state::{Cf, Snapshot, Store, StoreError};
use base64::Engine;
use serde::Serialize;
use std::sync::Arc;

/// Default page size.
pub const DEFAULT_LIMIT: usize = 20;
/// Default number of recent followers (K).
pub const DEFAULT_RECENT: usize = 100;
/// Largest page a query may ask for.
pub const MAX_LIMIT: usize = 10_000;

/// Why a query failed.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The cursor is not one this view issued for this user.
    #[error("bad cursor: {0}")]
    BadCursor(String),
    /// The limit is out of range.
    #[error("limit must be between 1 and {max}, got {got}")]
    BadLimit {
        /// Requested.
        got: usize,
        /// Maximum.
        max: usize,
    },
    /// The user id is not valid.
    #[error("user ids start at 1, got {0}")]
    BadUser(u64),
    /// The view name is not one of the views.
    #[error("unknown view {0:?} (expected timeline, posts, counters, recent_followers, followers or followees)")]
    BadView(String),
    /// The partition that owns the user is moving between processors
    /// (revoked, or replaying before it serves): retry shortly.
    #[error("partition {partition} is moving between processors; retry shortly")]
    Moving {
        /// The partition.
        partition: u32,
    },
    /// Another processor owns the partition (Kafka mode): ask it.
    #[error("partition {partition} is owned by another processor")]
    Elsewhere {
        /// The partition.
        partition: u32,
    },
    /// Reading from another processor failed.
    #[error("reading from the processor that owns partition {partition}: {reason}")]
    Remote {
        /// The partition.
        partition: u32,
        /// Why.
        reason: String,
    },
    /// Reading state failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl QueryError {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            QueryError::BadCursor(_) => "bad_cursor",
            QueryError::BadLimit { .. } => "bad_limit",
            QueryError::BadUser(_) => "bad_user",
            QueryError::BadView(_) => "bad_view",
            QueryError::Moving { .. }
            | QueryError::Elsewhere { .. }
            | QueryError::Remote { .. } => "unavailable",
            QueryError::Store(_) => "internal",
        }
    }
}

/// A post in a timeline or outbox page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PostItem {
    /// The post.
    pub post_id: u64,
    /// Its author.
    pub author: u64,
    /// Post time, ms.
    pub ts: u64,
}

/// A user in a follower or followee list, with the follow time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FollowerItem {
    /// The follower.
    pub user: u64,
    /// Follow time, ms.
    pub ts: u64,
}

/// A user's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// The user.
    pub user: u64,
    /// Live followers.
    pub followers: u64,
    /// Live followees.
    pub followees: u64,
    /// Live posts.
    pub posts: u64,
}

/// One page of a view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Page<T> {
    /// The items, in view order.
    pub items: Vec<T>,
    /// Pass back to get the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// A list without paging (recent followers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct List<T> {
    /// The items, in view order.
    pub items: Vec<T>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum CursorView {
    Timeline = 1,
    Posts = 2,
    Followers = 3,
    Followees = 4,
}

const CURSOR_VERSION: u8 = 1;

fn encode_cursor(view: CursorView, user: UserId, payload: &[u8]) -> String {
    let mut b = vec![CURSOR_VERSION, view as u8];
    b.extend_from_slice(&user.0.to_be_bytes());
    b.extend_from_slice(payload);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

fn decode_cursor(
    cursor: &str,
    view: CursorView,
    user: UserId,
    len: usize,
) -> Result<Vec<u8>, QueryError> {
    let bad = |why: &str| QueryError::BadCursor(why.to_string());
    let b = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| bad("not a cursor this server issued"))?;
    if b.len() != 2 + 8 + len + 4 {
        return Err(bad("not a cursor this server issued"));
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32fast::hash(body).to_be_bytes() != crc {
        return Err(bad("checksum mismatch (garbled cursor)"));
    }
    if body[0] != CURSOR_VERSION {
        return Err(bad("cursor from another version"));
    }
    if body[1] != view as u8 {
        return Err(bad("cursor belongs to another view"));
    }
    if body[2..10] != user.0.to_be_bytes() {
        return Err(bad("cursor belongs to another user"));
    }
    Ok(body[10..].to_vec())
}

/// The partition stores a reader reads: all of a data directory's, or the
/// ones a Kafka-mode processor owns right now.
pub trait Partitions: Send + Sync {
    /// The partition count.
    fn count(&self) -> u32;
    /// The store of partition `p`, when it is here and serving;
    /// [`QueryError::Moving`] or [`QueryError::Elsewhere`] otherwise.
    fn store(&self, p: u32) -> Result<Arc<Store>, QueryError>;
    /// The stores here, by partition.
    fn local(&self) -> Vec<(u32, Arc<Store>)>;
    /// For a set that can be replaced while it is read: the set as it is
    /// now, to read one request from. `None`: this set never changes.
    fn pinned(&self) -> Option<Arc<dyn Partitions>> {
        None
    }
}

/// Every partition's store, replaceable as a whole while readers read (a
/// swap to a rebuilt state). A reader pins the set once per request
/// ([`Reader::current`]), so one answer comes from the old stores or from
/// the new ones, never from both.
pub struct StoreSet {
    current: std::sync::RwLock<Arc<Vec<Arc<Store>>>>,
    count: u32,
}

impl StoreSet {
    /// A set over `stores`, indexed by partition.
    pub fn new(stores: Vec<Arc<Store>>) -> StoreSet {
        StoreSet {
            count: stores.len() as u32,
            current: std::sync::RwLock::new(Arc::new(stores)),
        }
    }

    /// The stores now.
    pub fn get(&self) -> Arc<Vec<Arc<Store>>> {
        self.current.read().expect("poisoned").clone()
    }

    /// Replaces every store at once; returns the old set (its stores close
    /// when the last reader of them is done).
    pub fn replace(&self, stores: Vec<Arc<Store>>) -> Arc<Vec<Arc<Store>>> {
        assert_eq!(stores.len() as u32, self.count, "same partition count");
        std::mem::replace(
            &mut *self.current.write().expect("poisoned"),
            Arc::new(stores),
        )
    }
}

impl Partitions for StoreSet {
    fn count(&self) -> u32 {
        self.count
    }

    fn store(&self, p: u32) -> Result<Arc<Store>, QueryError> {
        Ok(self.get()[p as usize].clone())
    }

    fn local(&self) -> Vec<(u32, Arc<Store>)> {
        self.get().local()
    }

    fn pinned(&self) -> Option<Arc<dyn Partitions>> {
        Some(self.get())
    }
}

impl Partitions for Vec<Arc<Store>> {
    fn count(&self) -> u32 {
        self.len() as u32
    }

    fn store(&self, p: u32) -> Result<Arc<Store>, QueryError> {
        Ok(self[p as usize].clone())
    }

    fn local(&self) -> Vec<(u32, Arc<Store>)> {
        self.iter()
            .enumerate()
            .map(|(p, s)| (p as u32, s.clone()))
            .collect()
    }
}

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
        self.parts.store(p).map(|_| ())
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
        self.parts.store(self.partition_of(user))
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
            Some(c) => Some(UserId(crate::state::keys::be(
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
                    Ts(crate::state::keys::be(&b, 0)),
                    PostId(crate::state::keys::be(&b, 8)),
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
        check_user(user)?;
        check_limit(limit)?;
        let after = match cursor {
            Some(c) => Some(TimelineKey::decode(&decode_cursor(
                c,
                CursorView::Timeline,
                user,
                TimelineKey::LEN,
            )?)),
            None => None,
        };
        let want = limit + 1;
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let u = views::user(&snap, user)?;
        // The materialized inbox: every entry sorts before the horizon.
        let mut keys: Vec<TimelineKey> = views::inbox(&snap, user, after.as_ref())
            .filter(|r| !matches!((r, after), (Ok(k), Some(a)) if *k == a))
            .take(want)
            .collect::<Result<_, _>>()?;
        // Past the horizon: merge the current followees' outboxes, lazily
        // (a heap holds each followee's next entry), reading about
        // `limit + followees` entries whatever the timeline's length.
        if let (true, Some(h)) = (keys.len() < want, u.horizon) {
            let from = match after {
                Some(a) if a > h => a,
                _ => h,
            };
            // Followees' outboxes: from the stores here, or in one request
            // per other processor.
            let mut here: Vec<(UserId, u32)> = Vec::new();
            let mut elsewhere: Vec<UserId> = Vec::new();
            let mut stores: Vec<Option<Arc<Store>>> = vec![None; self.partitions as usize];
            for r in live_edges(&snap, Cf::Followees, user, None) {
                let (author, _) = r?;
                let p = self.partition_of(author);
                match self.parts.store(p) {
                    Ok(s) => {
                        stores[p as usize] = Some(s);
                        here.push((author, p));
                    }
                    Err(QueryError::Elsewhere { .. }) if self.remote.is_some() => {
                        elsewhere.push(author)
                    }
                    Err(e) => return Err(e),
                }
            }
            let fetched = match (&self.remote, elsewhere.is_empty()) {
                (Some(remote), false) => {
                    remote.outboxes(&elsewhere, (from.ts, from.post_id), want + 1)?
                }
                _ => Vec::new(),
            };
            // The user's own partition is read through `snap`: a second
            // snapshot of a secondary would take its read lock twice, which
            // deadlocks against a catch-up waiting between the two.
            let own = self.partition_of(user);
            let snaps: Vec<Option<Snapshot<'_>>> = stores
                .iter()
                .enumerate()
                .map(|(p, s)| s.as_ref().filter(|_| p as u32 != own).map(|s| s.snapshot()))
                .collect();
            type Head<'a> = Box<dyn Iterator<Item = Result<TimelineKey, QueryError>> + 'a>;
            let mut heads: Vec<Head<'_>> = Vec::new();
            let keep = move |r: &Result<TimelineKey, QueryError>| !matches!(r, Ok(k) if *k < from || Some(*k) == after);
            for (author, p) in here {
                let s = match p == own {
                    true => &snap,
                    false => snaps[p as usize].as_ref().expect("store taken above"),
                };
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
            let mut heap = std::collections::BinaryHeap::new();
            for (i, it) in heads.iter_mut().enumerate() {
                if let Some(k) = it.next().transpose()? {
                    heap.push(std::cmp::Reverse((k, i)));
                }
            }
            while keys.len() < want {
                let Some(std::cmp::Reverse((k, i))) = heap.pop() else {
                    break;
                };
                keys.push(k);
                if let Some(next) = heads[i].next().transpose()? {
                    heap.push(std::cmp::Reverse((next, i)));
                }
            }
        }
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
        Ok(Page { items, next_cursor })
    }
}
