//! A snapshot read through one reader's inbox head: their user record, the
//! first rows of their inbox, their sources and their live followees
//! answered from memory, every other read from the snapshot, with the
//! same answers.
//!
//! An aggregated page (reposts, filters, pulled authors) reads more than
//! the inbox: the reader's sources of each post (`inbox_reposts`, read
//! whole by every page), the directory, the copies. This view spares the
//! page its inbox seek, its user record reads and, for a reader with at
//! most [`SOURCES_MOST`] sources, their range; the directory's entries of
//! the reposters held beside the heads are read from memory, the copies
//! and the rest from the store. Every aggregated page reads its partition
//! through it, whether the partition holds the page or the pull path
//! completes it. The head is taken only at the snapshot's own epoch
//! ([`Heads::inbox_at`]), so the memory and the snapshot are one
//! committed state. Without a head, or a head without sources, the view
//! records what the page reads from the store, to keep.

mod directory;

use super::reposters::Entries;
use super::{shard_of, Head, Heads, Shard, HEAD_ROWS};
use crate::core::event::UserId;
use crate::core::keys::{self, PostRef, TimelineKey, UserVal};
use crate::core::kv::{Cf, InRange, Kv, KvError, Scan};
use crate::state::Snapshot;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::MutexGuard;

impl Heads {
    /// `f` of `user`'s head, when one is held and no commit landed since
    /// `epoch` (a snapshot's: [`crate::state::Snapshot::heads`]). Checked
    /// under the shard's lock, as [`Heads::outbox`].
    pub fn inbox_at<T>(&self, epoch: u64, user: u64, f: impl FnOnce(&Head) -> T) -> Option<T> {
        let mut shard = self.at_epoch(epoch, user)?;
        let head = shard.heads.get_mut(&user)?;
        head.read = true;
        Some(f(head))
    }

    /// The locked shard of `key`, when heads are held and no commit landed
    /// since `epoch`: what the shard holds is then that epoch's state until
    /// the lock is released.
    pub(super) fn at_epoch(&self, epoch: u64, key: u64) -> Option<MutexGuard<'_, Shard>> {
        if !self.is_on() || self.held.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let shard = self.lock(shard_of(key));
        (self.state.load(Ordering::SeqCst) == epoch).then_some(shard)
    }
}

impl Heads {
    /// Adds `sources`, read from a snapshot taken at `epoch`, to `user`'s
    /// head: nothing when the head is gone, refused (`false`) when a commit
    /// landed since or the budget is spent (`sweep`: even after a sweep,
    /// which leaves the head: it was just read).
    pub(super) fn keep_sources(
        &self,
        epoch: u64,
        user: u64,
        sources: Sources,
        sweep: bool,
    ) -> bool {
        let Some(mut shard) = self.room(epoch, user, (sources.bytes(), |_: &Shard| 0), sweep)
        else {
            return false;
        };
        // Counted by `room`: no head is added.
        self.held.fetch_sub(1, Ordering::SeqCst);
        let shard = &mut *shard;
        if let Some(head) = shard.heads.get_mut(&user) {
            shard.bytes -= head.bytes();
            head.sources = Some(sources);
            shard.bytes += head.bytes();
        }
        true
    }
}

/// `snap` with `user`'s head in front of it (see the module).
pub struct HeadView<'s, 'a> {
    snap: &'s Snapshot<'a>,
    user: UserId,
    /// `user | ` of their inbox keys and user record.
    prefix: [u8; 8],
    held: Option<Held>,
    /// The heads and the snapshot's epoch, when the view reads them.
    heads: Option<(&'s Heads, u64)>,
    /// The reposters asked about, with their entries when held.
    reposters: RefCell<FxHashMap<u64, Option<Arc<Entries>>>>,
    /// Without a head: what the page read of the inbox's top and of the
    /// user record, to keep as one.
    seen: RefCell<Seen>,
    /// What the inbox rows read through the view said of their posts (the
    /// replies rule's questions, answered by the rows' values).
    parents: RefCell<FxHashMap<PostRef, Option<UserId>>>,
}

/// Sources a head holds at most: a reader with more reads them from the
/// store.
pub const SOURCES_MOST: usize = 256;

/// Width of a source key past its user: `a | p | !ts | !repost | !reposter`.
const SOURCE: usize = 40;

/// Width of a source's value: the original's time.
const SOURCE_VALUE: usize = 8;

/// A source as held: its key past the user, then its value.
pub(super) type Source = [u8; SOURCE + SOURCE_VALUE];

/// A reader's sources: their `inbox_reposts` keys past the user with
/// their values, ascending, every one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sources(pub(super) Vec<Source>);

impl Sources {
    /// Bytes counted for them.
    pub(super) fn bytes(&self) -> usize {
        self.0.capacity() * std::mem::size_of::<Source>()
    }

    /// The source of key `k` (with its user) valued `v`; `None` when
    /// either is not of a source's width.
    pub(super) fn source(k: &[u8], v: &[u8]) -> Option<Source> {
        let key = k.get(8..).filter(|key| key.len() == SOURCE)?;
        let mut s = [0; SOURCE + SOURCE_VALUE];
        s[..SOURCE].copy_from_slice(key);
        s[SOURCE..].copy_from_slice(<&[u8; SOURCE_VALUE]>::try_from(v).ok()?);
        Some(s)
    }

    /// Where `key` (a source key past its user) is, or would be.
    fn find(&self, key: &[u8]) -> Result<usize, usize> {
        self.0.binary_search_by(|s| s[..SOURCE].cmp(key))
    }
}

/// Applies a committed write of source key `k` (`v`: the value put,
/// `None`: deleted) to `head`; `false` when the head can no longer follow
/// the store. Past [`SOURCES_MOST`] the head keeps no sources.
pub(super) fn apply_source(head: &mut Head, k: &[u8], v: Option<&[u8]>) -> bool {
    let Some(sources) = &mut head.sources else {
        return true;
    };
    let Some(key) = k.get(8..).filter(|key| key.len() == SOURCE) else {
        return false;
    };
    let put = match v.map(|v| Sources::source(k, v)) {
        Some(None) => return false,
        Some(Some(s)) => Some(s),
        None => None,
    };
    match (sources.find(key), put) {
        (Err(_), None) => {}
        (Ok(i), Some(s)) => sources.0[i] = s,
        (Ok(i), None) => {
            sources.0.remove(i);
        }
        (Err(i), Some(s)) => sources.0.insert(i, s),
    }
    if sources.0.len() > SOURCES_MOST {
        head.sources = None;
    }
    true
}

/// A head as the view answers from it.
struct Held {
    /// The user record as stored; `None`: a default record, read from the
    /// snapshot (which may hold none at all).
    record: Option<Vec<u8>>,
    /// The first inbox keys, ascending, with their values when the head
    /// knows them (`parents`; else empty), and whether they are every one.
    rows: Vec<(Vec<u8>, Vec<u8>)>,
    all: bool,
    parents: bool,
    sources: Option<Sources>,
    followees: Option<Vec<UserId>>,
}

#[derive(Default)]
struct Seen {
    user: Option<UserVal>,
    /// Every source, read whole from the store.
    sources: Option<Sources>,
    /// Inbox keys read from the top, in order.
    rows: Vec<TimelineKey>,
    /// Whether a read from the top ran to the inbox's end.
    all: bool,
    /// Whether any read started at the top.
    top: bool,
    /// Reposters asked about and not held ([`super::reposters`]).
    reposters: Vec<u64>,
}

impl<'s, 'a> HeadView<'s, 'a> {
    /// `snap` read through `user`'s head when one is held at the
    /// snapshot's epoch (`use_heads`: else never).
    pub fn new(snap: &'s Snapshot<'a>, user: UserId, use_heads: bool) -> HeadView<'s, 'a> {
        let prefix = user.0.to_be_bytes();
        let heads = use_heads.then(|| snap.heads()).flatten();
        let held = heads.and_then(|(heads, epoch)| {
            heads.inbox_at(epoch, user.0, |h| Held {
                record: (h.user != UserVal::default()).then(|| h.user.encode()),
                rows: (h.inbox.rows.iter())
                    .map(|r| {
                        let parent = h.inbox.parent(r).flatten();
                        (keys::inbox(user, r), keys::inbox_value(parent))
                    })
                    .collect(),
                all: h.inbox.all,
                parents: h.inbox.parent_known(),
                sources: h.sources.clone(),
                followees: h.followees.clone(),
            })
        });
        HeadView {
            snap,
            user,
            prefix,
            held,
            heads,
            reposters: RefCell::default(),
            seen: RefCell::default(),
            parents: RefCell::default(),
        }
    }

    /// Notes what inbox row `k` (with its user) valued `v` says of its
    /// post, for the replies rule.
    fn note_row(&self, k: &[u8], v: &[u8]) {
        let row = k.get(8..).and_then(TimelineKey::decode);
        if let (Some(row), Some(parent)) = (row, keys::inbox_parent(v)) {
            (self.parents.borrow_mut()).insert((row.author, row.post_id), parent);
        }
    }

    /// Whether the reads were answered from a head.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// Keeps, as `user`'s head, what the page read from the store: the
    /// user record and the inbox's first rows (or none for a reader whose
    /// inbox is emptied: asleep), and the sources when read whole;
    /// `plain`: whether the reader has no filter, asked only when a new
    /// head is kept. Nothing when the view had a head (but its missing
    /// sources), the page read neither, or a commit landed since the
    /// snapshot.
    pub fn keep(self, plain: impl FnOnce() -> bool) {
        let Some((heads, epoch)) = self.snap.heads() else {
            return;
        };
        let mut seen = self.seen.take();
        self.keep_reposters(heads, epoch, &mut seen.reposters);
        if let Some(held) = &self.held {
            if let (None, Some(sources)) = (&held.sources, seen.sources) {
                heads.keep_sources(epoch, self.user.0, sources, true);
            }
            return;
        }
        let Some(user) = seen.user else {
            return;
        };
        let asleep = user.read_horizon() == Some(crate::core::timeline::TOP);
        let mut head = if asleep {
            Head::new(Vec::new(), false, user)
        } else if seen.top && (seen.all || !seen.rows.is_empty()) {
            // Every row kept was read through this view with its value.
            let parents = self.parents.borrow();
            let valued: Option<Vec<_>> = (seen.rows.iter())
                .map(|r| Some((*r, *parents.get(&(r.author, r.post_id))?)))
                .collect();
            match valued {
                Some(rows) => Head::valued(rows, seen.all, user),
                None => Head::new(seen.rows, seen.all, user),
            }
        } else {
            return;
        };
        head.sources = seen.sources;
        head.plain = plain();
        heads.keep(epoch, self.user.0, head, true);
    }

    /// Whether `ranges` are all of the user's sources, as a page reads them.
    fn all_sources(&self, cf: Cf, ranges: &[(Vec<u8>, Vec<u8>)]) -> bool {
        cf == Cf::InboxReposts
            && matches!(ranges, [(lo, p)] if lo.as_slice() == self.prefix && p.as_slice() == self.prefix)
    }

    /// Every source of the user from the store, through `f`, recorded
    /// when the walk reads them all.
    fn read_sources(
        &self,
        ranges: &[(Vec<u8>, Vec<u8>)],
        f: &mut InRange<'_>,
    ) -> Result<(), KvError> {
        let (mut list, mut whole) = (Vec::new(), true);
        self.snap
            .for_each_in_ranges(Cf::InboxReposts, ranges, &mut |i, k, v| {
                match Sources::source(k, v) {
                    Some(s) if list.len() < SOURCES_MOST => list.push(s),
                    _ => whole = false,
                }
                let on = f(i, k, v);
                whole &= on;
                on
            })?;
        if whole {
            self.seen.borrow_mut().sources = Some(Sources(list));
        }
        Ok(())
    }

    /// Whether `[lo, hi)` lies in the user's inbox.
    fn in_inbox(&self, lo: &[u8], hi: Option<&[u8]>) -> bool {
        let end = keys::prefix_end(&self.prefix);
        lo.starts_with(&self.prefix)
            && match (hi, end.as_deref()) {
                (Some(hi), Some(end)) => hi <= end,
                (None, None) => true,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            }
    }
}

impl<'s, 'a> HeadView<'s, 'a> {
    /// A scan of `[lo, hi)` in the user's inbox: from the head where it
    /// holds the rows, else (and past them) from the snapshot, each row's
    /// value noted for the replies rule (a head's only when it knows them).
    fn inbox_scan<'b>(&'b self, lo: &[u8], hi: Option<&[u8]>) -> Scan<'b> {
        let Some(held) = &self.held else {
            if lo != self.prefix {
                return self.noted(self.snap.scan(Cf::Inbox, lo, hi));
            }
            // From the top: the rows read are the inbox's first.
            self.seen.borrow_mut().top = true;
            return Box::new(Recorded {
                scan: self.noted(self.snap.scan(Cf::Inbox, lo, hi)),
                seen: &self.seen,
                to_end: hi.map(<[u8]>::to_vec) == keys::prefix_end(&self.prefix),
            });
        };
        let below = |k: &Vec<u8>| hi.is_none_or(|hi| k.as_slice() < hi);
        let from_head: Vec<_> = (held.rows.iter())
            .filter(|(k, _)| k.as_slice() >= lo && below(k))
            .map(|(k, v)| Ok((k.clone(), v.clone())))
            .collect();
        let from_head: Scan<'b> = match held.parents {
            true => self.noted(Box::new(from_head.into_iter())),
            false => Box::new(from_head.into_iter()),
        };
        if held.all {
            return from_head;
        }
        // Past the last row held, the store at the same state goes on.
        let rest = match held.rows.last() {
            Some((last, _)) => {
                let mut after = last.clone();
                after.push(0);
                after.max(lo.to_vec())
            }
            None => lo.to_vec(),
        };
        if crate::core::kv::empty_range(&rest, hi) {
            return from_head;
        }
        // Opened (a seek) only when a read goes past the head's rows.
        let hi = hi.map(<[u8]>::to_vec);
        let rest = std::iter::once(())
            .flat_map(move |()| self.noted(self.snap.scan(Cf::Inbox, &rest, hi.as_deref())));
        Box::new(from_head.chain(rest))
    }

    /// `scan`, each row noted as it passes ([`HeadView::note_row`]).
    fn noted<'b>(&'b self, scan: Scan<'b>) -> Scan<'b> {
        Box::new(scan.inspect(move |r| {
            if let Ok((k, v)) = r {
                self.note_row(k, v);
            }
        }))
    }
}

impl Kv for HeadView<'_, '_> {
    fn held_followees(&self, user: UserId) -> Option<Vec<UserId>> {
        let held = self.held.as_ref().filter(|_| user == self.user)?;
        held.followees.clone()
    }

    fn held_reposts(&self, reposter: UserId) -> Option<usize> {
        self.reposter(reposter.0).map(|e| e.len())
    }

    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        if let Some(held) = (cf == Cf::RepostDir).then(|| self.dir_get(key)).flatten() {
            return Ok(held);
        }
        let mine = cf == Cf::Users && key == self.prefix;
        if let (true, Some(record)) = (mine, self.held.as_ref().and_then(|h| h.record.as_ref())) {
            return Ok(Some(record.clone()));
        }
        let got = self.snap.get(cf, key)?;
        if mine && self.held.is_none() {
            let record = match &got {
                None => Some(UserVal::default()),
                Some(v) => UserVal::decode(v),
            };
            self.seen.borrow_mut().user = record;
        }
        Ok(got)
    }

    /// What the rows read through the view said, then what the store
    /// keeps in memory for the rest.
    fn held_parents(&self, posts: &[PostRef]) -> Vec<Option<Option<UserId>>> {
        let rows = self.parents.borrow();
        let mut held: Vec<_> = posts.iter().map(|p| rows.get(p).copied()).collect();
        let rest: Vec<PostRef> = (posts.iter().zip(&held))
            .filter(|(_, h)| h.is_none())
            .map(|(p, _)| *p)
            .collect();
        if !rest.is_empty() {
            let mut kept = self.snap.held_parents(&rest).into_iter();
            for h in held.iter_mut().filter(|h| h.is_none()) {
                *h = kept.next().flatten();
            }
        }
        held
    }

    fn keep_parents(&self, answers: &[(PostRef, Option<UserId>)]) {
        self.snap.keep_parents(answers)
    }

    /// One batched read of the store for what a head never holds (the
    /// replies rule's directory, follow edges); key by key otherwise.
    fn get_many(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        match cf {
            Cf::RepostDir | Cf::Users => keys.iter().map(|k| self.get(cf, k)).collect(),
            _ => self.snap.get_many(cf, keys),
        }
    }

    fn scan<'b>(&'b self, cf: Cf, lo: &[u8], hi: Option<&[u8]>) -> Scan<'b> {
        if cf != Cf::Inbox || !self.in_inbox(lo, hi) {
            return self.snap.scan(cf, lo, hi);
        }
        self.inbox_scan(lo, hi)
    }

    fn for_each_in_ranges(
        &self,
        cf: Cf,
        ranges: &[(Vec<u8>, Vec<u8>)],
        f: &mut InRange<'_>,
    ) -> Result<(), KvError> {
        if self.all_sources(cf, ranges) {
            let held = self.held.as_ref().and_then(|h| h.sources.as_ref());
            let Some(sources) = held else {
                return self.read_sources(ranges, f);
            };
            let mut key = self.prefix.to_vec();
            for s in &sources.0 {
                key.truncate(8);
                key.extend_from_slice(&s[..SOURCE]);
                if !f(0, &key, &s[SOURCE..]) {
                    break;
                }
            }
            return Ok(());
        }
        if cf == Cf::RepostDir {
            return self.dir_ranges(ranges, f);
        }
        if cf != Cf::Inbox {
            return self.snap.for_each_in_ranges(cf, ranges, f);
        }
        // The trait's own walk, through `scan` above.
        crate::core::kv::walk_ranges(self, cf, ranges, f)
    }
}

/// A store scan of the inbox from its top that records its first keys.
struct Recorded<'b> {
    scan: Scan<'b>,
    seen: &'b RefCell<Seen>,
    /// Whether the scan runs to the end of the user's inbox.
    to_end: bool,
}

impl Iterator for Recorded<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), KvError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = self.scan.next();
        let mut seen = self.seen.borrow_mut();
        match &next {
            Some(Ok((k, _))) => {
                let row = k.get(8..).and_then(TimelineKey::decode);
                match row {
                    Some(row) if seen.rows.len() <= HEAD_ROWS => {
                        if seen.rows.last().is_none_or(|r| *r < row) {
                            seen.rows.push(row);
                        }
                    }
                    Some(_) => {}
                    // Not a row: nothing of this read is kept.
                    None => seen.top = false,
                }
            }
            Some(Err(_)) => seen.top = false,
            None => seen.all |= self.to_end,
        }
        next
    }
}

#[cfg(test)]
mod tests;
