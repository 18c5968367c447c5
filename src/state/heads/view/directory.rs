//! The directory's entries of the reposters a page asks about, read
//! through the heads (`state/heads/reposters.rs`) when they are
//! held at the snapshot's epoch, from the snapshot otherwise; a reposter
//! not held is recorded, to keep after the page.

use super::HeadView;
use crate::core::event::UserId;
use crate::core::keys;
use crate::core::kv::{Cf, InRange, Kv, KvError};
use crate::state::heads::reposters::{DirRange, Entries, Held, REPOSTS_MOST};
use crate::state::heads::Heads;
use std::sync::Arc;

/// Reposters one page reads and keeps at most: a reader who follows many
/// who repost leaves the rest to the next pages.
const KEPT_PER_PAGE: usize = 8;

impl HeadView<'_, '_> {
    /// `reposter`'s entries, when held at the snapshot's epoch (looked up
    /// once per view); a reposter of whom nothing is held is recorded.
    pub(super) fn reposter(&self, reposter: u64) -> Option<Arc<Entries>> {
        let (heads, epoch) = self.heads?;
        if let Some(e) = self.reposters.borrow().get(&reposter) {
            return e.clone();
        }
        let got = match heads.reposter(epoch, reposter) {
            Some(Held::Entries(e)) => Some(e),
            Some(Held::Over) => None,
            None => {
                self.seen.borrow_mut().reposters.push(reposter);
                None
            }
        };
        self.reposters.borrow_mut().insert(reposter, got.clone());
        got
    }

    /// The directory's value at `key` when it is a held reposter's
    /// `1 | reposter | repost` entry; `None`: the store answers.
    pub(super) fn dir_get(&self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        if key.len() != 17 || key.first() != Some(&1) {
            return None;
        }
        let entries = self.reposter(keys::be(key, 1)?)?;
        Some(entries.get(keys::be(key, 9)?))
    }

    /// [`Kv::for_each_in_ranges`] of the directory: each range of a held
    /// reposter's entries from memory, each run of the others from the
    /// snapshot through one iterator.
    pub(super) fn dir_ranges(
        &self,
        ranges: &[(Vec<u8>, Vec<u8>)],
        f: &mut InRange<'_>,
    ) -> Result<(), KvError> {
        let held = |(lo, prefix): &(Vec<u8>, Vec<u8>)| {
            let range = DirRange::of(lo, prefix)?;
            Some((self.reposter(range.reposter())?, range))
        };
        let mut i = 0;
        while i < ranges.len() {
            if let Some((entries, range)) = held(&ranges[i]) {
                entries.walk(&range, &ranges[i].0, &mut |k, v| f(i, k, v));
                i += 1;
                continue;
            }
            let start = i;
            i += 1;
            while i < ranges.len() && held(&ranges[i]).is_none() {
                i += 1;
            }
            self.snap
                .for_each_in_ranges(Cf::RepostDir, &ranges[start..i], &mut |j, k, v| {
                    f(start + j, k, v)
                })?;
        }
        Ok(())
    }

    /// Keeps the entries of the reposters the page asked about and found
    /// nothing held of (at most [`KEPT_PER_PAGE`]), read from the snapshot
    /// (the heads refuse them if a commit landed since it was taken).
    pub(super) fn keep_reposters(&self, heads: &Heads, epoch: u64, reposters: &mut Vec<u64>) {
        reposters.sort_unstable();
        reposters.dedup();
        for &reposter in reposters.iter().take(KEPT_PER_PAGE) {
            let Ok(Some(entries)) = self.read_reposter(reposter) else {
                continue;
            };
            heads.keep_reposter(epoch, reposter, entries);
        }
    }

    /// `reposter`'s entries from the snapshot: `Some(None)` when they
    /// have more than [`REPOSTS_MOST`], `None` when one is not of this
    /// layout.
    fn read_reposter(&self, reposter: u64) -> Result<Option<Option<Entries>>, KvError> {
        let prefix = keys::dir_by_repost_prefix(UserId(reposter));
        let (mut rows, mut over, mut bad) = (Vec::new(), false, false);
        self.snap.for_each_in_ranges(
            Cf::RepostDir,
            &[(prefix.clone(), prefix)],
            &mut |_, k, v| {
                if rows.len() == REPOSTS_MOST {
                    over = true;
                    return false;
                }
                match keys::be(k, 9).filter(|_| k.len() == 17) {
                    Some(repost) => rows.push((repost, v.to_vec())),
                    None => bad = true,
                }
                !bad
            },
        )?;
        Ok(match (bad, over) {
            (true, _) => None,
            (false, true) => Some(None),
            (false, false) => Entries::from_reposts(&rows).map(Some),
        })
    }
}
