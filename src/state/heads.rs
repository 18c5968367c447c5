//! The newest entries of each reader's inbox, kept in memory beside a
//! store and changed by the commit that changes the inbox.
//!
//! A page that the [`super::PageCache`] does not hold costs a RocksDB
//! seek and a read per entry, most of the work of an uncached page; a
//! reader whose page was dropped by a commit (a followee posted) or never
//! read since the open pays it. An [`Heads`] entry holds the first rows
//! of one reader's inbox (its newest entries) and the reader's user
//! record, so that such a page is read from memory. It is not a cache
//! dropped by writes: a commit applies its inbox and user-record writes
//! to the heads it touches when it lands.
//!
//! It is exact:
//! - a head is the first rows of the user's inbox in a committed state,
//!   with `all` saying whether they are every row, and the user record of
//!   the same state; it enters the map only as read from the store
//!   ([`Heads::keep`]) when no commit landed while it was read (the epoch,
//!   as the page cache's);
//! - [`Store::commit`](super::Store::commit) opens a [`HeadsLanding`]
//!   before it writes and closes it after, which applies the commit to
//!   each head it touches under the lock of the head's shard (all of one
//!   reader's writes at once): a write to a row at or above a head's last
//!   row (or anywhere in a head holding `all`) is applied, one below it
//!   changes nothing the head holds, and a user record written replaces
//!   the head's. A write the head cannot follow (the reader's filters, the
//!   sources of its reposts, a key of another layout) drops the head; a
//!   failed write, raw operations and a partition's first repost drop
//!   them all;
//! - a head holds rows only for a reader without blocks or mutes (a
//!   sleeping reader's head holds none and no more than it: every inbox
//!   write drops it); whether the partition has reposts, pulled authors or
//!   a sleeping reader is decided by the reader from the head's user
//!   record and the store's marks, as the inbox read decides it.
//!
//! Beside them, the same budget holds authors' outbox heads ([`outbox`]),
//! a few reposters' entries of the directory ([`reposters`]) and, in a
//! reader's head, their live followees ([`followees`]), under the same
//! rules.
//!
//! A store whose data changes without a commit (a secondary) keeps none.
//! The contract tests read pages through the heads between processing
//! steps; `heads_equal_the_store` below checks every head against the
//! store after random commits.

pub mod followees;
pub mod outbox;
pub mod reposters;
mod rows;
pub mod view;
pub mod warm;

pub use rows::Rows;

use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use super::pages::user_of;
use crate::core::keys::{TimelineKey, UserVal};
use crate::core::kv::{Cf, Writes};

/// Rows a head holds at most: new entries push the oldest out.
pub const HEAD_ROWS: usize = 48;

/// Bytes counted for a head on top of its rows (map slot, vector, record).
const HEAD_OVERHEAD: usize = 64 + std::mem::size_of::<UserVal>();

/// Bytes counted for `rows` on top of what holds them.
fn rows_bytes(rows: &Rows) -> usize {
    rows.bytes()
}

/// Shards of the heads, each behind its own lock: a commit applies its
/// writes shard by shard, so a page read waits for at most one shard's
/// share of a large commit.
const SHARDS: usize = 16;

/// The shard of `user`'s head.
fn shard_of(user: u64) -> usize {
    (user.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as usize % SHARDS
}

/// The first rows of readers' inboxes, by user, at most `budget` bytes.
pub struct Heads {
    shards: Box<[Mutex<Shard>]>,
    /// Twice the landings closed so far, plus one while a commit lands.
    state: AtomicU64,
    /// Bytes per shard at most.
    budget: usize,
    /// Heads held, all shards together.
    held: AtomicUsize,
    /// Pages answered from a head.
    pages: AtomicU64,
    /// Unread counts answered from a head.
    counts: AtomicU64,
}

#[derive(Default)]
struct Shard {
    bytes: usize,
    heads: FxHashMap<u64, Head>,
    /// Authors' outbox heads ([`outbox`]).
    outboxes: FxHashMap<u64, outbox::Outbox>,
    /// Reposters' entries of the directory ([`reposters`]).
    reposters: FxHashMap<u64, reposters::Reposter>,
}

/// One reader's newest inbox rows and user record, in one committed state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The first rows of the inbox.
    pub inbox: Rows,
    /// The user record.
    pub user: UserVal,
    /// The reader's sources (`inbox_reposts`), when held whole ([`view`]).
    pub sources: Option<view::Sources>,
    /// The reader's live followees, when held whole ([`followees`]).
    pub followees: Option<Vec<crate::core::event::UserId>>,
    /// Kept by a read that found the reader without filters (a filter's
    /// write drops the head): its rows alone may answer a plain page.
    pub plain: bool,
    /// Read since the last sweep.
    read: bool,
}

impl Head {
    /// Bytes counted for the head.
    fn bytes(&self) -> usize {
        HEAD_OVERHEAD
            + rows_bytes(&self.inbox)
            + self.sources.as_ref().map_or(0, view::Sources::bytes)
            + followees::bytes(&self.followees)
    }

    /// A head of `rows` (the inbox's first, `all`: every one) and `user`,
    /// a reader without filters.
    pub fn new(rows: Vec<TimelineKey>, all: bool, user: UserVal) -> Head {
        let (inbox, sources, followees) = (Rows::new(rows, all), None, None);
        let (plain, read) = (true, false);
        Head {
            inbox,
            user,
            sources,
            followees,
            plain,
            read,
        }
    }

    /// A head of `rows` (the inbox's first, `all`: every one) with what
    /// each row's value says — the author its post replies to, or none —
    /// and `user`, a reader without filters.
    pub fn valued(
        rows: Vec<(TimelineKey, Option<crate::core::event::UserId>)>,
        all: bool,
        user: UserVal,
    ) -> Head {
        let replies: Vec<_> = (rows.iter()).filter_map(|&(r, y)| Some((r, y?))).collect();
        let mut head = Head::new(rows.into_iter().map(|(r, _)| r).collect(), all, user);
        head.inbox = head.inbox.with_parents(replies);
        head
    }
}

impl Heads {
    /// No heads yet, at most `budget` bytes of them (`0`: none kept).
    pub fn new(budget: usize) -> Heads {
        Heads {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            state: AtomicU64::new(0),
            budget: budget / SHARDS,
            held: AtomicUsize::new(0),
            pages: AtomicU64::new(0),
            counts: AtomicU64::new(0),
        }
    }

    fn lock(&self, shard: usize) -> std::sync::MutexGuard<'_, Shard> {
        self.shards[shard]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether heads are kept at all.
    pub fn is_on(&self) -> bool {
        self.budget > 0
    }

    /// The most bytes kept, all shards together.
    pub fn budget(&self) -> usize {
        self.budget * self.shards.len()
    }

    /// The epoch to read a head at for [`Heads::keep`]; `None` while a
    /// commit is landing (nothing read now can be kept) or when heads are
    /// off.
    pub fn epoch(&self) -> Option<u64> {
        let state = self.state.load(Ordering::SeqCst);
        (self.is_on() && state.is_multiple_of(2)).then_some(state)
    }

    /// `f` of `user`'s head, if one is held.
    pub fn read<T>(&self, user: u64, f: impl FnOnce(&Head) -> T) -> Option<T> {
        if !self.is_on() || self.held.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut shard = self.lock(shard_of(user));
        let head = shard.heads.get_mut(&user)?;
        head.read = true;
        Some(f(head))
    }

    /// Keeps `head`, `user`'s, read after [`Heads::epoch`] returned
    /// `epoch`: refused (`false`) when a commit landed since or is
    /// landing, and when the budget is spent (`sweep`: then drops the
    /// heads not read since the last sweep first, and keeps it if that
    /// made room).
    ///
    /// Checked under the shard's lock: a commit that opens its landing
    /// after the check writes after the head was read, and applies itself
    /// to the head once the lock is released.
    pub fn keep(&self, epoch: u64, user: u64, head: Head, sweep: bool) -> bool {
        self.insert(epoch, user, head, sweep)
    }

    /// Keeps `value` under `key` in its map ([`InShard`]), read at `epoch`,
    /// replacing what was there: refused (`false`) as [`Heads::room`]
    /// refuses.
    fn insert<V: InShard>(&self, epoch: u64, key: u64, value: V, sweep: bool) -> bool {
        let size = value.bytes();
        let old = |s: &Shard| V::map(s).get(&key).map_or(0, V::bytes);
        let Some(mut shard) = self.room(epoch, key, (size, old), sweep) else {
            return false;
        };
        // Counted by `room` already: a replaced one is not one more.
        if let Some(old) = V::map_mut(&mut shard).insert(key, value) {
            shard.bytes -= old.bytes();
            self.held.fetch_sub(1, Ordering::SeqCst);
        }
        shard.bytes += size;
        true
    }

    /// The locked shard of `key` when an entry of `size` bytes read at
    /// `epoch` may replace the one of `old` bytes there, the entry counted
    /// as held: `None` when a commit landed since or is landing, or when
    /// the budget is spent (`sweep`: after dropping what was not read
    /// since the last sweep).
    fn room(
        &self,
        epoch: u64,
        key: u64,
        (size, old): (usize, impl Fn(&Shard) -> usize),
        sweep: bool,
    ) -> Option<std::sync::MutexGuard<'_, Shard>> {
        // Counted before the epoch is checked: a commit that finds no
        // head held skips applying its writes, and it read the count
        // before this, so it moved the state before the check below.
        self.held.fetch_add(1, Ordering::SeqCst);
        let shard = self.lock(shard_of(key));
        let room = self.fit(shard, epoch, (size, old), sweep);
        if room.is_none() {
            self.held.fetch_sub(1, Ordering::SeqCst);
        }
        room
    }

    /// [`Heads::room`] once counted and locked.
    fn fit<'a>(
        &self,
        mut shard: std::sync::MutexGuard<'a, Shard>,
        epoch: u64,
        (size, old): (usize, impl Fn(&Shard) -> usize),
        sweep: bool,
    ) -> Option<std::sync::MutexGuard<'a, Shard>> {
        if !self.is_on() || self.state.load(Ordering::SeqCst) != epoch {
            return None;
        }
        if shard.bytes + size - old(&shard) > self.budget {
            if !sweep {
                return None;
            }
            let before = shard.len();
            shard.sweep();
            self.held.fetch_sub(before - shard.len(), Ordering::SeqCst);
            if shard.bytes + size > self.budget {
                return None;
            }
        }
        Some(shard)
    }

    /// Opens the landing of a commit of `writes`, before they are written:
    /// no head is kept until it closes ([`HeadsLanding::close`], after the
    /// write), which applies them to the heads held (`everything`: the
    /// commit also writes raw operations that may change any inbox, and
    /// drops every head, as does a commit that writes the partition's
    /// directory of reposts).
    pub fn landing<'a>(&'a self, writes: &'a Writes, everything: bool) -> HeadsLanding<'a> {
        if !self.is_on() {
            return HeadsLanding(None);
        }
        self.state.fetch_add(1, Ordering::SeqCst);
        HeadsLanding(Some((self, writes, everything)))
    }

    /// Counts a page answered from a head.
    pub fn answered(&self) {
        self.pages.fetch_add(1, Ordering::Relaxed);
    }

    /// Pages answered from a head since the start.
    pub fn pages(&self) -> u64 {
        self.pages.load(Ordering::Relaxed)
    }

    /// Counts an unread count answered from a head.
    pub fn counted(&self) {
        self.counts.fetch_add(1, Ordering::Relaxed);
    }

    /// Unread counts answered from a head since the start.
    pub fn counts(&self) -> u64 {
        self.counts.load(Ordering::Relaxed)
    }

    /// Readers with an inbox head, authors with an outbox head, and the
    /// bytes counted for them.
    pub fn held(&self) -> (usize, usize, usize) {
        (0..SHARDS).fold((0, 0, 0), |(n, o, b), i| {
            let shard = self.lock(i);
            (
                n + shard.heads.len(),
                o + shard.outboxes.len(),
                b + shard.bytes,
            )
        })
    }

    /// The share of the budget held.
    pub fn filled(&self) -> f64 {
        let total = self.budget * SHARDS;
        self.held().2 as f64 / total.max(1) as f64
    }

    /// Drops every head, inbox and outbox, and every reposter held.
    fn clear(&self) {
        for i in 0..SHARDS {
            let mut shard = self.lock(i);
            let before = shard.len();
            shard.heads.clear();
            shard.outboxes.clear();
            shard.reposters.clear();
            shard.bytes = 0;
            self.held.fetch_sub(before - shard.len(), Ordering::Relaxed);
        }
    }

    /// Applies committed `writes` to the heads they touch, shard by shard.
    fn apply(&self, writes: &Writes) {
        let mut by_shard: Vec<Vec<Written<'_>>> = (0..SHARDS).map(|_| Vec::new()).collect();
        for cf in [
            Cf::Inbox,
            Cf::Users,
            Cf::Filters,
            Cf::InboxReposts,
            Cf::Outbox,
            Cf::Followees,
        ] {
            for (k, v) in writes.cf(cf) {
                by_shard[shard_of(user_of(k))].push((cf, k, v.as_deref()));
            }
        }
        // A reposter's entries, under the reposter.
        for (k, v) in writes.cf(Cf::RepostDir) {
            if let Some(reposter) = reposters::reposter_of(k) {
                by_shard[shard_of(reposter)].push((Cf::RepostDir, k, v.as_deref()));
            }
        }
        for (i, written) in by_shard.iter().enumerate() {
            if written.is_empty() {
                continue;
            }
            let mut shard = self.lock(i);
            let before = shard.len();
            if before > 0 {
                shard.apply(written);
                self.held.fetch_sub(before - shard.len(), Ordering::Relaxed);
            }
        }
    }
}

/// What a shard keeps in one of its maps, by user, author or reposter.
trait InShard: Sized {
    /// Bytes counted for it.
    fn bytes(&self) -> usize;
    fn map(shard: &Shard) -> &FxHashMap<u64, Self>;
    fn map_mut(shard: &mut Shard) -> &mut FxHashMap<u64, Self>;
}

impl InShard for Head {
    fn bytes(&self) -> usize {
        Head::bytes(self)
    }
    fn map(shard: &Shard) -> &FxHashMap<u64, Self> {
        &shard.heads
    }
    fn map_mut(shard: &mut Shard) -> &mut FxHashMap<u64, Self> {
        &mut shard.heads
    }
}

/// A committed write: its column family, key and value (`None`: deleted).
type Written<'a> = (Cf, &'a [u8], Option<&'a [u8]>);

/// A commit on its way into RocksDB (see [`Heads::landing`]).
pub struct HeadsLanding<'a>(Option<(&'a Heads, &'a Writes, bool)>);

impl HeadsLanding<'_> {
    /// Closes the landing after the write: applies the writes to the heads
    /// when it succeeded (`written`), drops every head when it did not.
    pub fn close(mut self, written: bool) {
        self.finish(written);
    }

    fn finish(&mut self, written: bool) {
        let Some((heads, writes, everything)) = self.0.take() else {
            return;
        };
        if !written || everything {
            heads.clear();
        } else {
            // A repost makes every page of the partition an aggregated
            // one: a head then answers only the page's inbox reads and
            // user record (`view`), which reposts do not change.
            // A head being kept counts already (`Heads::room`).
            if heads.held.load(Ordering::SeqCst) > 0 {
                heads.apply(writes);
            }
        }
        // Applied before the landing ends: a head kept from now on was
        // read after the write.
        heads.state.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for HeadsLanding<'_> {
    /// A landing left unclosed (the write panicked): as a failed write.
    fn drop(&mut self) {
        self.finish(false);
    }
}

impl Shard {
    /// Inbox and outbox heads and reposters held.
    fn len(&self) -> usize {
        self.heads.len() + self.outboxes.len() + self.reposters.len()
    }

    /// Applies committed writes of this shard's users, in column family
    /// order (inbox rows, user records, what drops a head, outbox rows,
    /// followee edges).
    fn apply(&mut self, written: &[Written<'_>]) {
        let mut lost = Vec::new();
        for &(cf, k, v) in written {
            let user = user_of(k);
            if cf == Cf::Outbox {
                self.apply_outbox(user, k, v.is_some());
                continue;
            }
            if cf == Cf::RepostDir {
                self.apply_repost_dir(k, v);
                continue;
            }
            let Some(head) = self.heads.get_mut(&user) else {
                continue;
            };
            match cf {
                Cf::Inbox => {
                    let row = (k.len() == 8 + TimelineKey::LEN)
                        .then(|| TimelineKey::decode(&k[8..]))
                        .flatten();
                    let before = head.bytes();
                    let kept = row.is_some_and(|row| head.inbox.apply_row(row, v));
                    self.bytes = self.bytes + head.bytes() - before;
                    if !kept {
                        lost.push(user);
                    }
                }
                Cf::Users => {
                    let record = match v {
                        None => Some(UserVal::default()),
                        Some(v) => UserVal::decode(v).filter(|_| k.len() == 8),
                    };
                    match record {
                        Some(record) => head.user = record,
                        None => lost.push(user),
                    }
                }
                Cf::Followees => {
                    let before = head.bytes();
                    followees::apply(head, k, v);
                    self.bytes = self.bytes + head.bytes() - before;
                }
                Cf::InboxReposts => {
                    let before = head.bytes();
                    let kept = view::apply_source(head, k, v);
                    self.bytes = self.bytes + head.bytes() - before;
                    if !kept {
                        lost.push(user);
                    }
                }
                // What a head does not hold but its page depends on: the
                // reader's filters.
                _ => lost.push(user),
            }
        }
        for user in lost {
            if let Some(h) = self.heads.remove(&user) {
                self.bytes -= h.bytes();
            }
        }
    }

    /// Keeps the heads read since the last sweep.
    fn sweep(&mut self) {
        self.heads
            .retain(|_, h| std::mem::replace(&mut h.read, false));
        self.outboxes
            .retain(|_, o| std::mem::replace(&mut o.read, false));
        self.reposters
            .retain(|_, r| std::mem::replace(&mut r.read, false));
        let outboxes: usize = self.outboxes.values().map(outbox::Outbox::bytes).sum();
        let reposters: usize = self
            .reposters
            .values()
            .map(reposters::Reposter::bytes)
            .sum();
        self.bytes = outboxes + reposters + self.heads.values().map(Head::bytes).sum::<usize>();
    }
}

#[cfg(test)]
mod tests;
