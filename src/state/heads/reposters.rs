//! A few reposters' entries of the directory of live reposts, kept with
//! the inbox heads and changed by the same commits: an aggregated page
//! reads the reposts of the pulled authors its reader follows here
//! instead of in the store.
//!
//! A whole reader's page reads their own sources from their head, but the
//! pulled authors they follow deliver to no inbox: the page loads those
//! authors' reposts (`1 | reposter`), looks up their reposts of each post
//! it shows (`0 | a | p | reposter`) and tells their copies' reposts from
//! originals (`1 | reposter | repost`) in the directory, per page. The
//! same few authors are asked about by most readers of a partition, so
//! their entries are held once here. A reposter's entries are exact by
//! the inbox heads' rules ([`super`]):
//! - they enter only as read from a snapshot taken at the heads' epoch
//!   [`Heads::keep_reposter`] is given, refused when a commit landed
//!   since; the `1` entries are read, and the `0` entries are the same
//!   facts (state layout 6: both hold the original, its time and the
//!   repost's time, `state/README.md`);
//! - they are read only for a snapshot taken at the epoch the heads still
//!   hold ([`Heads::reposter`], checked under the shard's lock), as a
//!   shared copy a later commit does not change;
//! - a commit applies each write of a held reposter's `0` or `1` entries
//!   to them; a reposter past [`REPOSTS_MOST`] is held only as that
//!   (its reads go to the store) until one of their reposts goes; a failed
//!   write or raw operations on the directory drop them all.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Heads, Shard};
use crate::core::keys;

/// Live reposts of one reposter held at most: past it, their reads go to
/// the store.
pub const REPOSTS_MOST: usize = 4096;

/// Bytes counted per repost held (both entries, with the maps' nodes).
const REPOST_BYTES: usize = 128;

/// Bytes counted for a reposter on top of their reposts.
const REPOSTER_OVERHEAD: usize = 96;

/// One reposter's entries of the directory, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entries {
    /// `repost → value` of each `1 | reposter | repost` entry.
    by_repost: BTreeMap<u64, [u8; keys::DIR_REPOST_LEN]>,
    /// `(a, p, repost) → value` of each `0 | a | p | reposter | repost`.
    by_original: BTreeMap<(u64, u64, u64), [u8; 16]>,
}

/// A directory key of one reposter: `1 | reposter | repost` or
/// `0 | a | p | reposter | repost`.
enum DirKey {
    ByRepost { reposter: u64, repost: u64 },
    ByOriginal { reposter: u64, at: (u64, u64, u64) },
}

impl DirKey {
    fn parse(k: &[u8]) -> Option<DirKey> {
        match (k.first(), k.len()) {
            (Some(1), 17) => Some(DirKey::ByRepost {
                reposter: keys::be(k, 1)?,
                repost: keys::be(k, 9)?,
            }),
            (Some(0), 33) => Some(DirKey::ByOriginal {
                reposter: keys::be(k, 17)?,
                at: (keys::be(k, 1)?, keys::be(k, 9)?, keys::be(k, 25)?),
            }),
            _ => None,
        }
    }

    fn reposter(&self) -> u64 {
        match *self {
            DirKey::ByRepost { reposter, .. } | DirKey::ByOriginal { reposter, .. } => reposter,
        }
    }
}

/// The reposter of directory key `k`, when it is one of a reposter's
/// entries (not a count).
pub(super) fn reposter_of(k: &[u8]) -> Option<u64> {
    DirKey::parse(k).map(|d| d.reposter())
}

/// Which of a reposter's entries a range read of the directory (from
/// `lo`, within `prefix`) walks: `1 | reposter` (all of them) or
/// `0 | a | p | reposter` (their reposts of one post).
pub(super) enum DirRange {
    Reposts(u64),
    RepostsOf(u64, (u64, u64)),
}

impl DirRange {
    /// The range of `(lo, prefix)`, when it is one of those.
    pub(super) fn of(lo: &[u8], prefix: &[u8]) -> Option<DirRange> {
        if !lo.starts_with(prefix) {
            return None;
        }
        match (prefix.first(), prefix.len()) {
            (Some(1), 9) => Some(DirRange::Reposts(keys::be(prefix, 1)?)),
            (Some(0), 25) => Some(DirRange::RepostsOf(
                keys::be(prefix, 17)?,
                (keys::be(prefix, 1)?, keys::be(prefix, 9)?),
            )),
            _ => None,
        }
    }

    pub(super) fn reposter(&self) -> u64 {
        match *self {
            DirRange::Reposts(r) | DirRange::RepostsOf(r, _) => r,
        }
    }
}

impl Entries {
    /// The entries of a reposter from their `1 | reposter | repost`
    /// entries (`(repost, value)`, values of state layout 6); `None` when
    /// a value is not of that width.
    pub fn from_reposts(rows: &[(u64, Vec<u8>)]) -> Option<Entries> {
        let mut e = Entries::default();
        for (repost, v) in rows {
            let (repost, v) = (
                *repost,
                <[u8; keys::DIR_REPOST_LEN]>::try_from(v.as_slice()).ok()?,
            );
            let (a, p) = (keys::be(&v, 0)?, keys::be(&v, 8)?);
            let mut by_original = [0; 16];
            // `repost ts | original ts`, as `0` entries hold them.
            by_original[..8].copy_from_slice(&v[24..32]);
            by_original[8..].copy_from_slice(&v[16..24]);
            e.by_repost.insert(repost, v);
            e.by_original.insert((a, p, repost), by_original);
        }
        Some(e)
    }

    /// Reposts held.
    pub fn len(&self) -> usize {
        self.by_repost.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.by_repost.is_empty()
    }

    fn bytes(&self) -> usize {
        REPOSTER_OVERHEAD + REPOST_BYTES * self.by_repost.len().max(self.by_original.len())
    }

    /// The value of `1 | reposter | repost`, as the store would answer.
    pub fn get(&self, repost: u64) -> Option<Vec<u8>> {
        self.by_repost.get(&repost).map(|v| v.to_vec())
    }

    /// Calls `f(key, value)` with the entries of `range` (a range of
    /// `reposter`'s, [`DirRange`]) at or past `lo`, ascending, until it
    /// returns `false`.
    pub(super) fn walk(
        &self,
        range: &DirRange,
        lo: &[u8],
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) {
        // One key buffer: its last 8 bytes are the repost's id.
        let mut k = Vec::with_capacity(33);
        match *range {
            DirRange::Reposts(reposter) => {
                k.push(1);
                k.extend_from_slice(&reposter.to_be_bytes());
                for (&repost, v) in &self.by_repost {
                    k.truncate(9);
                    k.extend_from_slice(&repost.to_be_bytes());
                    if k.as_slice() >= lo && !f(&k, v) {
                        return;
                    }
                }
            }
            DirRange::RepostsOf(reposter, (a, p)) => {
                k.push(0);
                for part in [a, p, reposter] {
                    k.extend_from_slice(&part.to_be_bytes());
                }
                for (&(_, _, repost), v) in self.by_original.range((a, p, 0)..=(a, p, u64::MAX)) {
                    k.truncate(25);
                    k.extend_from_slice(&repost.to_be_bytes());
                    if k.as_slice() >= lo && !f(&k, v) {
                        return;
                    }
                }
            }
        }
    }

    /// Applies a committed write of one of the reposter's keys; `false`
    /// when it cannot follow (a value of another width).
    fn apply(&mut self, key: &DirKey, v: Option<&[u8]>) -> bool {
        match (key, v) {
            (DirKey::ByRepost { repost, .. }, None) => {
                self.by_repost.remove(repost);
            }
            (DirKey::ByRepost { repost, .. }, Some(v)) => match v.try_into() {
                Ok(v) => {
                    self.by_repost.insert(*repost, v);
                }
                Err(_) => return false,
            },
            (DirKey::ByOriginal { at, .. }, None) => {
                self.by_original.remove(at);
            }
            (DirKey::ByOriginal { at, .. }, Some(v)) => match v.try_into() {
                Ok(v) => {
                    self.by_original.insert(*at, v);
                }
                Err(_) => return false,
            },
        }
        true
    }
}

/// One reposter as held: their entries, or `None` when they have more
/// live reposts than [`REPOSTS_MOST`].
pub(super) struct Reposter {
    entries: Option<Arc<Entries>>,
    /// Read since the last sweep.
    pub(super) read: bool,
}

impl Reposter {
    /// Bytes counted for them.
    pub(super) fn bytes(&self) -> usize {
        self.entries
            .as_ref()
            .map_or(REPOSTER_OVERHEAD, |e| e.bytes())
    }
}

/// What the heads hold of a reposter at an epoch.
pub enum Held {
    /// Their entries, shared.
    Entries(Arc<Entries>),
    /// Too many to hold: read them from the store.
    Over,
}

impl Heads {
    /// What is held of `reposter`, when anything is and no commit landed
    /// since `epoch` (a snapshot's: [`crate::state::Snapshot::heads`]).
    pub fn reposter(&self, epoch: u64, reposter: u64) -> Option<Held> {
        let mut shard = self.at_epoch(epoch, reposter)?;
        let r = shard.reposters.get_mut(&reposter)?;
        r.read = true;
        Some(match &r.entries {
            Some(e) => Held::Entries(e.clone()),
            None => Held::Over,
        })
    }

    /// Keeps `entries` (`None`: more than [`REPOSTS_MOST`]), `reposter`'s
    /// read from a snapshot taken at `epoch`: refused (`false`) when a
    /// commit landed since or is landing, or when the budget is spent even
    /// after a sweep.
    pub fn keep_reposter(&self, epoch: u64, reposter: u64, entries: Option<Entries>) -> bool {
        let entries = entries.filter(|e| e.len() <= REPOSTS_MOST).map(Arc::new);
        let held = Reposter {
            entries,
            read: false,
        };
        self.insert(epoch, reposter, held, true)
    }
}

impl super::InShard for Reposter {
    fn bytes(&self) -> usize {
        Reposter::bytes(self)
    }
    fn map(shard: &Shard) -> &rustc_hash::FxHashMap<u64, Self> {
        &shard.reposters
    }
    fn map_mut(shard: &mut Shard) -> &mut rustc_hash::FxHashMap<u64, Self> {
        &mut shard.reposters
    }
}

impl Shard {
    /// Applies a committed write of directory key `k` (`v`: the value
    /// put, `None`: deleted) to its reposter, if held.
    pub(super) fn apply_repost_dir(&mut self, k: &[u8], v: Option<&[u8]>) {
        let Some(key) = DirKey::parse(k) else {
            return;
        };
        let reposter = key.reposter();
        let Some(held) = self.reposters.get_mut(&reposter) else {
            return;
        };
        let before = held.bytes();
        let kept = match &mut held.entries {
            // Past the cap: one repost fewer may bring them under it.
            None => v.is_some(),
            Some(e) => {
                let e = Arc::make_mut(e);
                let followed = e.apply(&key, v);
                if e.len() > REPOSTS_MOST {
                    held.entries = None;
                }
                followed
            }
        };
        self.bytes = self.bytes + held.bytes() - before;
        if !kept {
            if let Some(held) = self.reposters.remove(&reposter) {
                self.bytes -= held.bytes();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::{PostId, UserId};
    use crate::core::kv::{Cf, Kv, Txn};
    use crate::core::Partition;
    use crate::state::heads::view::HeadView;
    use crate::state::{BlockCache, Store, StoreOptions};
    use proptest::prelude::*;

    /// `reposter`'s entries of the directory in `kv`: by repost, and by
    /// original (every `0` entry whose reposter is theirs).
    fn stored(kv: &impl Kv, reposter: u64) -> Entries {
        let mut e = Entries::default();
        for r in kv.scan_prefix(Cf::RepostDir, &keys::dir_by_repost_prefix(UserId(reposter))) {
            let (k, v) = r.unwrap();
            e.by_repost
                .insert(keys::be(&k, 9).unwrap(), v.try_into().unwrap());
        }
        for r in kv.scan_prefix(Cf::RepostDir, &[0]) {
            let (k, v) = r.unwrap();
            if let Some(DirKey::ByOriginal { reposter: p, at }) = DirKey::parse(&k) {
                if p == reposter {
                    e.by_original.insert(at, v.try_into().unwrap());
                }
            }
        }
        e
    }

    /// Every entry of `ranges` of the directory read through `kv`, with
    /// each range cut after `most` entries.
    fn walk(
        kv: &impl Kv,
        ranges: &[(Vec<u8>, Vec<u8>)],
        most: usize,
    ) -> Vec<(usize, Vec<u8>, Vec<u8>)> {
        let mut out: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::new();
        kv.for_each_in_ranges(Cf::RepostDir, ranges, &mut |i, k, v| {
            out.push((i, k.to_vec(), v.to_vec()));
            out.iter().filter(|(j, _, _)| *j == i).count() < most
        })
        .unwrap();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        // Proves every reposter held equals their directory entries in the store after each commit (reposts going live and taken back, redelivered, other reposters' and counts' writes), that a view reads the same ranges and values through them as the snapshot does, and that a snapshot taken before a commit is not served.
        #[test]
        fn reposters_held_equal_the_store(
            batches in proptest::collection::vec(
                (
                    proptest::collection::vec((0u64..4, 0u64..12, (0u64..3, 0u64..3), any::<bool>()), 0..24),
                    0u64..4,
                    (0u64..3, 0u64..3),
                    1usize..6,
                ),
                1..12,
            ),
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let opts = StoreOptions { sync: false, ..StoreOptions::default() };
            let store = Store::open(tmp.path(), Partition(0), 1, &BlockCache::new(1 << 20), &opts).unwrap();
            for (writes, reread, root, most) in batches {
                // A page asks about `reread` and keeps them.
                let snap = store.snapshot();
                let view = HeadView::new(&snap, UserId(99), true);
                let prefix = keys::dir_by_repost_prefix(UserId(reread));
                walk(&view, &[(prefix.clone(), prefix)], usize::MAX);
                view.keep(|| true);
                let (_, before) = snap.heads().unwrap();
                drop(snap);
                let mut txn = Txn::new(&store);
                for (reposter, repost, (a, p), live) in writes {
                    let by_repost = keys::dir_by_repost(UserId(reposter), PostId(repost));
                    // A repost's original and times never change.
                    let (a, p) = match txn.get(Cf::RepostDir, &by_repost).unwrap() {
                        Some(v) => (keys::be(&v, 0).unwrap(), keys::be(&v, 8).unwrap()),
                        None => (a, p),
                    };
                    let (post_ts, ts) = (a * 10 + p, repost * 3 + reposter);
                    let by_original = keys::dir_by_original((UserId(a), PostId(p)), UserId(reposter), PostId(repost));
                    if live {
                        txn.put(Cf::RepostDir, by_original, keys::key([ts, post_ts]));
                        txn.put(Cf::RepostDir, by_repost, keys::key([a, p, post_ts, ts]));
                        txn.put(Cf::RepostDir, keys::dir_count((UserId(a), PostId(p))), keys::key([1]));
                    } else {
                        txn.delete(Cf::RepostDir, by_original);
                        txn.delete(Cf::RepostDir, by_repost);
                    }
                }
                let writes = txn.into_writes();
                let landed = !writes.is_empty();
                store.commit(&writes, |_| {}).unwrap();
                let snap = store.snapshot();
                let (heads, epoch) = snap.heads().unwrap();
                prop_assert!(!landed || heads.reposter(before, reread).is_none());
                for reposter in 0..4 {
                    if let Some(Held::Entries(e)) = heads.reposter(epoch, reposter) {
                        prop_assert_eq!(&*e, &stored(&store, reposter));
                    }
                }
                // Mixed ranges and point reads: through the view as from the snapshot.
                let view = HeadView::new(&snap, UserId(99), true);
                let mut ranges = Vec::new();
                for reposter in 0..4u64 {
                    let of = keys::dir_original_reposter_prefix((UserId(root.0), PostId(root.1)), UserId(reposter));
                    ranges.push((of.clone(), of));
                }
                ranges.sort();
                for reposter in 0..4u64 {
                    let all = keys::dir_by_repost_prefix(UserId(reposter));
                    ranges.push((all.clone(), all));
                }
                prop_assert_eq!(walk(&view, &ranges, most), walk(&snap, &ranges, most));
                for reposter in 0..4u64 {
                    for repost in 0..12u64 {
                        let k = keys::dir_by_repost(UserId(reposter), PostId(repost));
                        prop_assert_eq!(view.get(Cf::RepostDir, &k).unwrap(), snap.get(Cf::RepostDir, &k).unwrap());
                    }
                }
            }
        }
    }
}
