//! Timeline pages as the read API sends them, kept in memory beside a
//! store and dropped by the commit that changes them.
//!
//! Most reads of a timeline ask for its first page, again and again
//! between two changes of it, and the next few pages after it (by their
//! cursors) less often. Reading that page costs a RocksDB iterator
//! over the memtable and every level, then the JSON encoding; a
//! [`PageCache`] answers the next read of the same page with the bytes
//! already encoded.
//!
//! It is exact:
//! - an entry is a page read from its store and encoded, nothing else;
//! - [`Store::commit`](super::Store::commit) opens a [`Landing`] before it
//!   writes to RocksDB, which drops the entries of every user whose inbox
//!   or user record the commit writes (a page that the inbox fills depends
//!   on nothing else; one that it does not fill, on the user having no
//!   horizon, which is in the user record), so no kept page is older than
//!   what RocksDB answers;
//! - a page read while a commit may be landing is not kept:
//!   [`PageCache::keep`] refuses while a landing is open, and when the
//!   [`PageCache::epoch`] read before the page was read has moved (each
//!   landing moves it when it closes, after the write).
//!
//! A store whose data changes without a commit (a RocksDB secondary, which
//! catches up with its primary) has no page cache. The contract tests read
//! first pages through the cache between processing steps and compare what
//! it keeps with the final views.

use bytes::Bytes;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::core::kv::{Cf, Writes};

/// Bytes counted for an entry on top of its body (map slot, vector, body
/// header).
const ENTRY_OVERHEAD: usize = 96;
/// Pages kept per user at most: a reader paging far back through one
/// timeline keeps its first pages and the latest of the others.
const PER_USER: usize = 8;

/// Encoded pages by user, page size and cursor (none for a first page), at
/// most `budget` bytes.
pub struct PageCache {
    inner: Mutex<Inner>,
    budget: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Default)]
struct Inner {
    /// Landings closed so far.
    epoch: u64,
    /// Landings open now.
    landing: usize,
    bytes: usize,
    users: FxHashMap<u64, Vec<Kept>>,
}

/// A commit on its way into RocksDB (see [`PageCache::landing`]); closing
/// it (dropping it, after the write, whether the write succeeded or not)
/// moves the epoch.
pub struct Landing<'a>(Option<&'a PageCache>);

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        if let Some(cache) = self.0 {
            let mut inner = cache.lock();
            inner.epoch += 1;
            inner.landing -= 1;
        }
    }
}

struct Kept {
    limit: usize,
    /// The cursor the page was read from; `None` for a first page.
    cursor: Option<Box<str>>,
    body: Bytes,
    /// Read since the last sweep.
    read: bool,
}

impl PageCache {
    /// An empty cache of at most `budget` bytes (`0`: nothing is kept).
    pub fn new(budget: usize) -> PageCache {
        PageCache {
            inner: Mutex::default(),
            budget,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether pages are kept at all.
    pub fn is_on(&self) -> bool {
        self.budget > 0
    }

    /// The most bytes kept.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The kept page of `limit` entries of `user`'s timeline from `cursor`
    /// (`None`: the first page).
    pub fn get(&self, user: u64, limit: usize, cursor: Option<&str>) -> Option<Bytes> {
        if !self.is_on() {
            return None;
        }
        let mut inner = self.lock();
        let found = inner
            .users
            .get_mut(&user)
            .and_then(|kept| kept.iter_mut().find(|k| k.is(limit, cursor)))
            .map(|k| {
                k.read = true;
                k.body.clone()
            });
        drop(inner);
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// The current epoch: read it before reading a page to [`keep`](Self::keep).
    pub fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// Keeps `body`, the page of `limit` entries of `user` from `cursor`
    /// (`None`: the first page), read after [`epoch`](Self::epoch)
    /// returned `epoch`; refused (`false`) while a commit is landing or
    /// when one has landed since, and for a page over a quarter of the
    /// budget.
    pub fn keep(
        &self,
        epoch: u64,
        (user, limit, cursor): (u64, usize, Option<&str>),
        body: Bytes,
    ) -> bool {
        let size = body.len() + ENTRY_OVERHEAD;
        if !self.is_on() || size > self.budget / 4 {
            return false;
        }
        let mut inner = self.lock();
        if inner.epoch != epoch || inner.landing > 0 {
            return false;
        }
        if inner.bytes + size > self.budget {
            inner.sweep(self.budget);
        }
        let kept = inner.users.entry(user).or_default();
        let same = kept.iter().position(|k| k.is(limit, cursor));
        // At most `PER_USER` pages: the oldest page read from a cursor goes
        // first (first pages are the ones read most).
        let full = (kept.len() >= PER_USER)
            .then(|| kept.iter().position(|k| k.cursor.is_some()).unwrap_or(0));
        let old = match same.or(full) {
            Some(i) => kept.remove(i).body.len() + ENTRY_OVERHEAD,
            None => 0,
        };
        kept.push(Kept {
            limit,
            cursor: cursor.map(Box::from),
            body,
            read: false,
        });
        inner.bytes = inner.bytes + size - old;
        true
    }

    /// Opens the landing of a commit of `writes`, before they are written:
    /// drops the pages of every user whose inbox or user record they write
    /// (`everything`, or a change to a pulled author's copy, which any
    /// follower's page may show: of every user), and refuses new pages
    /// until the landing is dropped, after the write.
    pub fn landing(&self, writes: &Writes, everything: bool) -> Landing<'_> {
        if !self.is_on() {
            return Landing(None);
        }
        // A copy of a pulled author, or the partition's copy of the live
        // reposts, is part of many users' pages.
        let everything =
            everything || !writes.cf(Cf::Copies).is_empty() || !writes.cf(Cf::RepostDir).is_empty();
        let empty = {
            let mut inner = self.lock();
            inner.landing += 1;
            inner.users.is_empty()
        };
        // Nothing can be kept from here on, so the users are listed
        // without holding the lock that readers take.
        if !empty {
            if everything {
                self.lock().clear();
            } else {
                let users = touched_users(writes);
                let mut inner = self.lock();
                for user in users {
                    inner.drop_user(user);
                }
            }
        }
        Landing(Some(self))
    }

    /// Pages answered from the cache and pages read, since the start.
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    /// Bytes held (bodies plus a fixed overhead per entry).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

impl Kept {
    fn is(&self, limit: usize, cursor: Option<&str>) -> bool {
        self.limit == limit && self.cursor.as_deref() == cursor
    }
}

impl Inner {
    fn drop_user(&mut self, user: u64) {
        if let Some(kept) = self.users.remove(&user) {
            let freed: usize = kept.iter().map(|k| k.body.len() + ENTRY_OVERHEAD).sum();
            self.bytes -= freed;
        }
    }

    fn clear(&mut self) {
        self.users.clear();
        self.bytes = 0;
    }

    /// Keeps the pages read since the last sweep; when they alone fill
    /// half the budget, starts over (rather than sweep again soon).
    fn sweep(&mut self, budget: usize) {
        let mut bytes = 0;
        self.users.retain(|_, kept| {
            kept.retain_mut(|k| std::mem::replace(&mut k.read, false));
            bytes += kept
                .iter()
                .map(|k| k.body.len() + ENTRY_OVERHEAD)
                .sum::<usize>();
            !kept.is_empty()
        });
        self.bytes = bytes;
        if self.bytes > budget / 2 {
            self.clear();
        }
    }
}

/// The users whose inbox (or its sources), user record, followees (the
/// replies rule reads them) or filters `writes` change, each once.
fn touched_users(writes: &Writes) -> Vec<u64> {
    let mut users = Vec::new();
    for cf in [
        Cf::Inbox,
        Cf::InboxReposts,
        Cf::Users,
        Cf::Followees,
        Cf::Filters,
    ] {
        let mut last = None;
        for k in writes.cf(cf).keys() {
            let user = user_of(k);
            if last != Some(user) {
                last = Some(user);
                users.push(user);
            }
        }
    }
    users
}

/// The user a key of the inbox, users, filters or inbox-reposts column
/// family belongs to (its first 8 bytes, big-endian).
pub(super) fn user_of(key: &[u8]) -> u64 {
    let mut b = [0; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::kv::{MemKv, Txn};

    fn body(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    /// Writes of one key of `cf` for `user`.
    fn writes(cf: Cf, user: u64) -> Writes {
        let mem = MemKv::default();
        let mut t = Txn::new(&mem);
        let mut key = user.to_be_bytes().to_vec();
        key.extend_from_slice(&[1, 2, 3]);
        t.put(cf, key, vec![0]);
        t.into_writes()
    }

    /// While a commit lands its users' pages are gone and no page is kept;
    /// a page read before it landed is refused, one read after is kept.
    #[test]
    fn nothing_is_kept_while_a_commit_lands() {
        let c = PageCache::new(1 << 20);
        assert!(c.keep(c.epoch(), (7, 20, None), body("old")));
        let w = writes(Cf::Users, 7);
        let landing = c.landing(&w, false);
        assert_eq!(c.get(7, 20, None), None, "dropped before the write");
        assert!(
            !c.keep(c.epoch(), (7, 20, None), body("mid")),
            "refused while landing"
        );
        assert!(
            !c.keep(c.epoch(), (8, 20, None), body("mid")),
            "for every user"
        );
        let before = c.epoch();
        drop(landing);
        assert!(
            !c.keep(before, (7, 20, None), body("mid")),
            "read before it closed"
        );
        assert!(c.keep(c.epoch(), (7, 20, None), body("new")));
        assert_eq!(c.get(7, 20, None), Some(body("new")));
    }

    /// A page read before a commit landed is refused; one read after is kept.
    #[test]
    fn keeps_only_pages_read_after_the_last_commit() {
        let c = PageCache::new(1 << 20);
        let before = c.epoch();
        drop(c.landing(&Writes::default(), false));
        assert!(!c.keep(before, (7, 20, None), body("old")));
        assert_eq!(c.get(7, 20, None), None);
        assert!(c.keep(c.epoch(), (7, 20, None), body("new")));
        assert_eq!(c.get(7, 20, None), Some(body("new")));
    }

    /// A commit drops the pages of the users whose inbox or record it
    /// writes, and only theirs.
    #[test]
    fn commits_drop_the_users_they_write() {
        for cf in [Cf::Inbox, Cf::Users] {
            let c = PageCache::new(1 << 20);
            for user in [6, 7, 8] {
                assert!(c.keep(c.epoch(), (user, 20, None), body("p")));
            }
            assert!(c.keep(c.epoch(), (7, 5, None), body("q")));
            drop(c.landing(&writes(cf, 7), false));
            assert_eq!(c.get(7, 20, None), None, "{cf:?}");
            assert_eq!(c.get(7, 5, None), None, "{cf:?}");
            assert_eq!(c.get(6, 20, None), Some(body("p")));
            assert_eq!(c.get(8, 20, None), Some(body("p")));
            drop(c.landing(&writes(Cf::Outbox, 6), false));
            assert_eq!(
                c.get(6, 20, None),
                Some(body("p")),
                "outbox writes change no page"
            );
            drop(c.landing(&Writes::default(), true));
            assert_eq!(
                c.get(8, 20, None),
                None,
                "a commit of raw writes drops everything"
            );
            assert_eq!(c.bytes(), 0);
        }
    }

    /// A change to a pulled author's copy drops every page: any follower's
    /// first page may show it.
    #[test]
    fn a_copy_change_drops_every_page() {
        let c = PageCache::new(1 << 20);
        for user in [6, 7] {
            assert!(c.keep(c.epoch(), (user, 20, None), body("p")));
        }
        drop(c.landing(&writes(Cf::Copies, 1), false));
        assert_eq!((c.get(6, 20, None), c.get(7, 20, None)), (None, None));
    }

    /// Past its budget the cache keeps the pages read since the last sweep.
    #[test]
    fn a_full_cache_keeps_what_was_read() {
        let size = 10 + ENTRY_OVERHEAD;
        let c = PageCache::new(10 * size);
        for user in 1..=10 {
            assert!(c.keep(c.epoch(), (user, 20, None), body("0123456789")));
        }
        assert!(c.get(3, 20, None).is_some());
        assert!(c.keep(c.epoch(), (11, 20, None), body("0123456789")));
        assert!(c.get(3, 20, None).is_some(), "read since the sweep: kept");
        assert!(c.get(11, 20, None).is_some(), "the new page");
        assert!(c.get(4, 20, None).is_none(), "not read: swept");
        assert_eq!(c.bytes(), 2 * size);
    }

    /// A cache of no bytes keeps nothing.
    #[test]
    fn off_keeps_nothing() {
        let c = PageCache::new(0);
        assert!(!c.keep(c.epoch(), (1, 20, None), body("p")));
        assert_eq!(c.get(1, 20, None), None);
    }

    /// Pages read from a cursor are kept apart from first pages, dropped
    /// with them, and at most `PER_USER` a user (first pages stay).
    #[test]
    fn cursor_pages_are_kept_apart_and_bounded() {
        let c = PageCache::new(1 << 20);
        assert!(c.keep(c.epoch(), (7, 20, None), body("first")));
        assert!(c.keep(c.epoch(), (7, 20, Some("a")), body("second")));
        assert_eq!(c.get(7, 20, None), Some(body("first")));
        assert_eq!(c.get(7, 20, Some("a")), Some(body("second")));
        assert_eq!(c.get(7, 20, Some("b")), None);
        assert_eq!(c.get(7, 10, Some("a")), None);
        for i in 0..2 * PER_USER {
            let cursor = format!("c{i}");
            assert!(c.keep(c.epoch(), (7, 20, Some(&cursor)), body("deep")));
        }
        assert_eq!(
            c.get(7, 20, None),
            Some(body("first")),
            "the first page stays"
        );
        assert_eq!(c.get(7, 20, Some("a")), None, "the oldest cursor page went");
        let last = format!("c{}", 2 * PER_USER - 1);
        assert!(c.get(7, 20, Some(&last)).is_some());
        drop(c.landing(&writes(Cf::Inbox, 7), false));
        assert_eq!(
            (c.get(7, 20, None), c.get(7, 20, Some(&last))),
            (None, None)
        );
    }
}
