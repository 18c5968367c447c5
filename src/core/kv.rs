//! The key-value surface the core reads through, and the write overlay of one
//! batch.
//!
//! [`Kv`] is what a view of state can do: point reads and bounded range
//! scans per column family. RocksDB implements it (live or at a snapshot);
//! [`MemKv`] implements it in memory for the core's tests. [`Txn`] layers one
//! batch's pending writes over a `Kv`, so later messages of a batch see earlier
//! ones, and hands the writes to the store to commit in one `WriteBatch`.

use super::event::UserId;
use super::keys::{self, UserVal};
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Bound;

/// A column family: one per view, plus bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cf {
    /// Partition metadata: layout version, input positions, outbox sequence.
    Meta,
    /// Per-user counters and inbox bookkeeping.
    Users,
    /// Edges as seen by the follower.
    Followees,
    /// Edges as seen by the followee.
    Followers,
    /// Live followers by follow time, newest first.
    RecentFollowers,
    /// Post ids seen per author (live or tombstoned).
    Posts,
    /// Live posts per author, newest first.
    Outbox,
    /// Materialized home timeline, newest first.
    Inbox,
    /// The authors a user's inbox may hold entries of (a marker set with
    /// the first entry): an unfollow or backfill scans the inbox only when
    /// it is set.
    InboxAuthors,
    /// Outgoing records committed but maybe not yet appended to their log.
    Pending,
    /// This partition's copies of pulled authors' newest posts.
    Copies,
    /// The pulled authors each user follows.
    Pulls,
    /// The followees whose refill each waking user awaits.
    Refills,
    /// Reposts registered with the post they name (at that post's
    /// partition), and their counts.
    Reposts,
    /// Every partition's copy of the live reposts, by original and by repost.
    RepostDir,
    /// Blocks, mutes and hidden reposts, per (user, other) pair.
    Filters,
    /// The reposts among each reader's inbox entries, by original: a
    /// reader's sources of a post without the directory's other reposters.
    InboxReposts,
    /// Likes registered with the post they name and their counts; each
    /// user's live likes and reposts by original (the reader's flags).
    Engagement,
    /// Every partition's copy of which posts are replies, and to whom (the
    /// replies rule of home timelines).
    ReplyDir,
}

impl Cf {
    /// Every column family, in on-disk order.
    pub const ALL: [Cf; 19] = [
        Cf::Meta,
        Cf::Users,
        Cf::Followees,
        Cf::Followers,
        Cf::RecentFollowers,
        Cf::Posts,
        Cf::Outbox,
        Cf::Inbox,
        Cf::InboxAuthors,
        Cf::Pending,
        Cf::Copies,
        Cf::Pulls,
        Cf::Refills,
        Cf::Reposts,
        Cf::RepostDir,
        Cf::Filters,
        Cf::InboxReposts,
        Cf::Engagement,
        Cf::ReplyDir,
    ];

    /// The RocksDB column family name.
    pub fn name(self) -> &'static str {
        match self {
            Cf::Meta => "meta",
            Cf::Users => "users",
            Cf::Followees => "followees",
            Cf::Followers => "followers",
            Cf::RecentFollowers => "recent_followers",
            Cf::Posts => "posts",
            Cf::Outbox => "outbox",
            Cf::Inbox => "inbox",
            Cf::InboxAuthors => "inbox_authors",
            Cf::Pending => "pending",
            Cf::Copies => "copies",
            Cf::Pulls => "pulls",
            Cf::Refills => "refills",
            Cf::Reposts => "reposts",
            Cf::RepostDir => "repost_dir",
            Cf::Filters => "filters",
            Cf::InboxReposts => "inbox_reposts",
            Cf::Engagement => "engagement",
            Cf::ReplyDir => "reply_dir",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A key-value pair from a scan.
pub type Entry = (Vec<u8>, Vec<u8>);

/// A scan: ascending entries of one column family in `[lo, hi)`.
pub type Scan<'a> = Box<dyn Iterator<Item = Result<Entry, KvError>> + 'a>;

/// What [`Kv::for_each_in_ranges`] calls with each entry: the range's
/// index, the key and the value, lent; `false` ends the range.
pub type InRange<'a> = dyn FnMut(usize, &[u8], &[u8]) -> bool + 'a;

/// Read access to one partition's state.
pub trait Kv {
    /// The value at `key`, if any.
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, KvError>;

    /// The values at `keys`, in their order: what [`Kv::get`] gives each,
    /// read in one batch where the store can (a page's counts).
    fn get_many(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        keys.iter().map(|k| self.get(cf, k)).collect()
    }

    /// Entries with `lo <= key < hi`, ascending; `hi = None` runs to the end
    /// of the column family.
    fn scan<'a>(&'a self, cf: Cf, lo: &[u8], hi: Option<&[u8]>) -> Scan<'a>;

    /// `user`'s live followees (ascending ids) when this view holds them in
    /// memory: the users whose followee edge of `user` a scan would read
    /// live. `None`: read the edges.
    fn held_followees(&self, _user: UserId) -> Option<Vec<UserId>> {
        None
    }

    /// How many live reposts `reposter` has, when this view holds their
    /// entries of the directory of reposts in memory (a lookup of their
    /// reposts of one post then costs no seek). `None`: read from the
    /// store.
    fn held_reposts(&self, _reposter: UserId) -> Option<usize> {
        None
    }

    /// What this view holds in memory of the replies directory for each
    /// of `posts` (`Some(None)`: not a reply; `None`: not held, read it).
    fn held_parents(&self, posts: &[keys::PostRef]) -> Vec<Option<Option<UserId>>> {
        vec![None; posts.len()]
    }

    /// Keeps answers of the replies directory read through this view for
    /// later reads, where it can.
    fn keep_parents(&self, _answers: &[(keys::PostRef, Option<UserId>)]) {}

    /// Entries that start with `prefix`, from `lo` (which must start with
    /// `prefix` or sort before every key that does), ascending.
    fn scan_prefix_from<'a>(&'a self, cf: Cf, lo: &[u8], prefix: &[u8]) -> Scan<'a> {
        self.scan(cf, lo, super::keys::prefix_end(prefix).as_deref())
    }

    /// Every entry that starts with `prefix`, ascending.
    fn scan_prefix<'a>(&'a self, cf: Cf, prefix: &[u8]) -> Scan<'a> {
        self.scan_prefix_from(cf, prefix, prefix)
    }

    /// Calls `f` with each key in `[lo, hi)`, ascending, until it returns
    /// `false`: the keys of [`Kv::scan`], lent instead of copied (a store
    /// overrides it to read them in place).
    fn for_each_key(
        &self,
        cf: Cf,
        lo: &[u8],
        hi: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), KvError> {
        lend_keys(self.scan(cf, lo, hi), f)
    }

    /// Calls `f(i, key, value)` with the entries of each range of `ranges`
    /// in turn — range `i` holds the keys that start with `ranges[i].1`,
    /// from `ranges[i].0` (which starts with it) on, ascending — until `f`
    /// returns `false`, which ends range `i`: the next one starts. The
    /// ranges must be disjoint and ascending (a reader's followees, each
    /// an author's prefix). A store reads them all through one positioned
    /// iterator and seeks only when it stands before a range, so a read of
    /// many small ranges pays one iterator, not one per range, and a range
    /// the iterator has passed already costs a comparison.
    fn for_each_in_ranges(
        &self,
        cf: Cf,
        ranges: &[(Vec<u8>, Vec<u8>)],
        f: &mut InRange<'_>,
    ) -> Result<(), KvError> {
        walk_ranges(self, cf, ranges, f)
    }
}

/// [`Kv::for_each_in_ranges`] as a scan of each range in turn (the
/// trait's own walk, for a view that answers scans itself).
pub fn walk_ranges<K: Kv + ?Sized>(
    kv: &K,
    cf: Cf,
    ranges: &[(Vec<u8>, Vec<u8>)],
    f: &mut InRange<'_>,
) -> Result<(), KvError> {
    for (i, (lo, prefix)) in ranges.iter().enumerate() {
        for r in kv.scan_prefix_from(cf, lo, prefix) {
            let (k, v) = r?;
            if !f(i, &k, &v) {
                break;
            }
        }
    }
    Ok(())
}

/// Calls `f` with the keys of `scan` until it returns `false`.
fn lend_keys(scan: Scan<'_>, f: &mut dyn FnMut(&[u8]) -> bool) -> Result<(), KvError> {
    for r in scan {
        if !f(&r?.0) {
            break;
        }
    }
    Ok(())
}

/// Whether `[lo, hi)` holds no key.
pub fn empty_range(lo: &[u8], hi: Option<&[u8]>) -> bool {
    hi.is_some_and(|hi| lo >= hi)
}

/// `[lo, hi)` as `BTreeMap` bounds.
fn bounds<'b>(lo: &'b [u8], hi: Option<&'b [u8]>) -> (Bound<&'b [u8]>, Bound<&'b [u8]>) {
    let hi = hi.map_or(Bound::Unbounded, Bound::Excluded);
    (Bound::Included(lo), hi)
}

/// An in-memory [`Kv`], for tests of the pure core.
#[derive(Debug, Default, Clone)]
pub struct MemKv {
    maps: [BTreeMap<Vec<u8>, Vec<u8>>; Cf::ALL.len()],
}

impl MemKv {
    /// Applies a batch's writes.
    pub fn apply(&mut self, writes: Writes) {
        for (i, map) in writes.0.into_iter().enumerate() {
            for (k, v) in map {
                match v {
                    Some(v) => self.maps[i].insert(k.to_vec(), v),
                    None => self.maps[i].remove(k.as_slice()),
                };
            }
        }
    }
}

impl Kv for MemKv {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        Ok(self.maps[cf.index()].get(key).cloned())
    }

    fn scan<'a>(&'a self, cf: Cf, lo: &[u8], hi: Option<&[u8]>) -> Scan<'a> {
        if empty_range(lo, hi) {
            return Box::new(std::iter::empty());
        }
        Box::new(
            self.maps[cf.index()]
                .range::<[u8], _>(bounds(lo, hi))
                .map(|(k, v)| Ok((k.clone(), v.clone()))),
        )
    }
}

/// One batch's writes per column family: `Some` = put, `None` = delete.
#[derive(Debug, Default)]
pub struct Writes(pub [BTreeMap<Key, Option<Vec<u8>>>; Cf::ALL.len()]);

impl Writes {
    /// The writes of one column family.
    pub fn cf(&self, cf: Cf) -> &BTreeMap<Key, Option<Vec<u8>>> {
        &self.0[cf.index()]
    }

    /// Number of puts and deletes.
    pub fn len(&self) -> usize {
        self.0.iter().map(BTreeMap::len).sum()
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `u`'s record in `kv` (zeroes when the user is unknown); a record that
/// does not decode is corrupt.
pub fn user_record(kv: &(impl Kv + ?Sized), u: UserId) -> Result<UserVal, KvError> {
    let k = keys::key([u.0]);
    match kv.get(Cf::Users, &k)? {
        None => Ok(UserVal::default()),
        Some(v) => UserVal::decode(&v).ok_or_else(|| {
            KvError::corrupt(Cf::Users, &k, format!("{} bytes do not decode", v.len()))
        }),
    }
}

/// A batch in progress: pending writes over a base view.
pub struct Txn<'a, K: Kv + ?Sized> {
    base: &'a K,
    writes: Writes,
    /// User records set in this batch, by user id, kept decoded: every
    /// delivery reads and rewrites its follower's record, many times per
    /// batch, so they are encoded once, by [`Txn::into_writes`]. A user
    /// here has no newer write in `writes` (a raw write of a user record
    /// removes it from here).
    users: FxHashMap<u64, UserVal>,
}

impl<'a, K: Kv + ?Sized> Txn<'a, K> {
    /// Starts an empty batch over `base`.
    pub fn new(base: &'a K) -> Self {
        Txn {
            base,
            writes: Writes::default(),
            users: FxHashMap::default(),
        }
    }

    /// The user record set in this batch for `key` of `cf`, if any.
    fn staged_user(&self, cf: Cf, key: &[u8]) -> Option<&UserVal> {
        if cf != Cf::Users || key.len() != 8 || self.users.is_empty() {
            return None;
        }
        self.users.get(&keys::be(key, 0)?)
    }

    /// `user`'s record as it will be after this batch (zeroes when the user
    /// is unknown).
    pub fn user(&self, user: UserId) -> Result<UserVal, KvError> {
        match self.users.get(&user.0) {
            Some(u) => Ok(*u),
            None => user_record(self, user),
        }
    }

    /// Stages `user`'s record (encoded when the batch is handed over).
    pub fn put_user(&mut self, user: UserId, val: UserVal) {
        self.users.insert(user.0, val);
    }

    /// A raw write of `key` in `cf` supersedes a decoded user record.
    fn forget_user(&mut self, cf: Cf, key: &[u8]) {
        if let Some(user) = keys::be(key, 0).filter(|_| cf == Cf::Users && key.len() == 8) {
            self.users.remove(&user);
        }
    }

    /// Whether `key` has a value.
    pub fn contains(&self, cf: Cf, key: &[u8]) -> Result<bool, KvError> {
        if self.staged_user(cf, key).is_some() {
            return Ok(true);
        }
        match self.writes.0[cf.index()].get(key) {
            Some(v) => Ok(v.is_some()),
            None => Ok(self.base.get(cf, key)?.is_some()),
        }
    }

    /// Stages a put.
    pub fn put(&mut self, cf: Cf, key: Vec<u8>, value: Vec<u8>) {
        self.forget_user(cf, &key);
        self.writes.0[cf.index()].insert(Key::from(&key[..]), Some(value));
    }

    /// Stages a delete.
    pub fn delete(&mut self, cf: Cf, key: Vec<u8>) {
        self.forget_user(cf, &key);
        self.writes.0[cf.index()].insert(Key::from(&key[..]), None);
    }

    /// Number of staged puts and deletes.
    pub fn staged(&self) -> usize {
        self.writes.len() + self.users.len()
    }

    /// The staged writes, for the store to commit.
    pub fn into_writes(mut self) -> Writes {
        let users = &mut self.writes.0[Cf::Users.index()];
        for (u, val) in self.users {
            users.insert(Key::from(&keys::key([u])[..]), Some(val.encode()));
        }
        self.writes
    }
}

impl<K: Kv + ?Sized> Kv for Txn<'_, K> {
    /// The value at `key`, this batch's writes first.
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        if let Some(u) = self.staged_user(cf, key) {
            return Ok(Some(u.encode()));
        }
        match self.writes.0[cf.index()].get(key) {
            Some(v) => Ok(v.clone()),
            None => self.base.get(cf, key),
        }
    }

    /// The values at `keys` as they will be after this batch: the staged
    /// ones, the rest in one batched read of the base.
    fn get_many(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        let (mut out, mut ask, mut at) = (vec![None; keys.len()], Vec::new(), Vec::new());
        for (i, k) in keys.iter().enumerate() {
            if let Some(u) = self.staged_user(cf, k) {
                out[i] = Some(u.encode());
                continue;
            }
            match self.writes.0[cf.index()].get(k.as_slice()) {
                Some(v) => out[i] = v.clone(),
                None => {
                    ask.push(k.clone());
                    at.push(i);
                }
            }
        }
        if !ask.is_empty() {
            for (i, v) in at.into_iter().zip(self.base.get_many(cf, &ask)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// Keys in `[lo, hi)` as they will be after this batch, ascending: the
    /// staged writes merged into the base's keys as they are lent.
    fn for_each_key(
        &self,
        cf: Cf,
        lo: &[u8],
        hi: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), KvError> {
        if empty_range(lo, hi) {
            return Ok(());
        }
        if cf == Cf::Users && !self.users.is_empty() {
            // Decoded user records: merged by `scan`.
            return lend_keys(self.scan(cf, lo, hi), f);
        }
        let mut staged = self.writes.0[cf.index()]
            .range::<[u8], _>(bounds(lo, hi))
            .peekable();
        if staged.peek().is_none() {
            return self.base.for_each_key(cf, lo, hi, f);
        }
        let mut stopped = false;
        self.base.for_each_key(cf, lo, hi, &mut |b| {
            // Staged keys before `b` first; a staged write of `b` itself
            // replaces it (a put lends it once, a delete hides it).
            while let Some((k, v)) = staged.peek() {
                match k.as_slice().cmp(b) {
                    std::cmp::Ordering::Greater => break,
                    std::cmp::Ordering::Equal => {
                        let put = v.is_some();
                        staged.next();
                        if !put {
                            return true;
                        }
                        stopped = !f(b);
                        return !stopped;
                    }
                    std::cmp::Ordering::Less => {
                        let put = v.is_some();
                        let k = k.as_slice();
                        staged.next();
                        if put && !f(k) {
                            stopped = true;
                            return false;
                        }
                    }
                }
            }
            stopped = !f(b);
            !stopped
        })?;
        if !stopped {
            for (k, v) in staged {
                if v.is_some() && !f(k) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Entries in `[lo, hi)` as they will be after this batch, ascending.
    fn scan<'s>(&'s self, cf: Cf, lo: &[u8], hi: Option<&[u8]>) -> Scan<'s> {
        let mut overlay: Vec<Staged<'_>> = if empty_range(lo, hi) {
            Vec::new()
        } else {
            self.writes.0[cf.index()]
                .range::<[u8], _>(bounds(lo, hi))
                .map(|(k, v)| (Cow::Borrowed(k), Cow::Borrowed(v)))
                .collect()
        };
        if cf == Cf::Users && !self.users.is_empty() && !empty_range(lo, hi) {
            // Decoded user records in range replace what `writes` holds.
            let mut staged: BTreeMap<Key, Cow<'_, Option<Vec<u8>>>> = overlay
                .drain(..)
                .map(|(k, v)| (k.into_owned(), v))
                .collect();
            for (u, val) in &self.users {
                let k = keys::key([*u]);
                if k.as_slice() >= lo && hi.is_none_or(|hi| k.as_slice() < hi) {
                    staged.insert(Key::from(&k[..]), Cow::Owned(Some(val.encode())));
                }
            }
            overlay = staged
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k), v))
                .collect();
        }
        if overlay.is_empty() {
            return self.base.scan(cf, lo, hi);
        }
        Box::new(Merge {
            base: self.base.scan(cf, lo, hi).peekable(),
            overlay: overlay.into_iter().peekable(),
        })
    }
}

/// A staged write seen by a scan: key, and `None` for a delete.
type Staged<'s> = (Cow<'s, Key>, Cow<'s, Option<Vec<u8>>>);

struct Merge<'s> {
    base: std::iter::Peekable<Scan<'s>>,
    overlay: std::iter::Peekable<std::vec::IntoIter<Staged<'s>>>,
}

impl Iterator for Merge<'_> {
    type Item = Result<Entry, KvError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let base_key = match self.base.peek() {
                Some(Ok((k, _))) => Some(k.as_slice()),
                Some(Err(_)) => return self.base.next(),
                None => None,
            };
            let take_overlay = match (base_key, self.overlay.peek()) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(b), Some((o, _))) => o.as_slice() <= b,
            };
            if !take_overlay {
                return self.base.next();
            }
            let (k, v) = self.overlay.next()?;
            if base_key == Some(k.as_slice()) {
                self.base.next();
            }
            if let Some(v) = v.as_ref() {
                return Some(Ok((k.to_vec(), v.clone())));
            }
        }
    }
}

mod error;
mod key;

#[cfg(test)]
mod tests;

pub use error::{timeline_key_at, u64_at, KvError};
pub use key::{Key, KEY_INLINE};
