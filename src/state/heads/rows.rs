//! The first rows of an inbox or an outbox as a head holds them, with what
//! an inbox row's value says of its entry (the post it replies to), so a
//! page from a head applies the replies rule without a lookup.

use super::HEAD_ROWS;
use crate::core::event::UserId;
use crate::core::keys::{self, TimelineKey};

/// The first rows of an inbox or an outbox, in key order (newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    /// The rows, at most [`HEAD_ROWS`].
    pub rows: Vec<TimelineKey>,
    /// Whether `rows` are every row.
    pub all: bool,
    /// The rows that are replies, with their parent authors (ascending),
    /// when known for every row (an inbox's, read with their values);
    /// `None`: not known, a page looks them up.
    parents: Option<Vec<(TimelineKey, UserId)>>,
}

impl Rows {
    /// The first `rows` (`all`: every one), cut to [`HEAD_ROWS`], their
    /// parents not known.
    pub fn new(mut rows: Vec<TimelineKey>, all: bool) -> Rows {
        let all = all && rows.len() <= HEAD_ROWS;
        rows.truncate(HEAD_ROWS);
        Rows {
            rows,
            all,
            parents: None,
        }
    }

    /// These rows, knowing their parents: `replies` holds every row that
    /// is a reply (others may be there too, and are left out).
    pub fn with_parents(
        mut self,
        replies: impl IntoIterator<Item = (TimelineKey, UserId)>,
    ) -> Rows {
        let mut parents: Vec<(TimelineKey, UserId)> = replies
            .into_iter()
            .filter(|(k, _)| self.rows.binary_search(k).is_ok())
            .collect();
        parents.sort_unstable();
        parents.dedup_by_key(|(k, _)| *k);
        self.parents = Some(parents);
        self
    }

    /// Bytes counted for the rows, on top of what holds them.
    pub(super) fn bytes(&self) -> usize {
        self.rows.capacity() * std::mem::size_of::<TimelineKey>()
            + self.parents.as_ref().map_or(0, |p| {
                p.capacity() * std::mem::size_of::<(TimelineKey, UserId)>()
            })
    }

    /// Up to `want` rows after `after` (`None`: from the first), when
    /// these rows know them: `want` rows, or fewer when they are the last.
    pub fn after(&self, after: Option<TimelineKey>, want: usize) -> Option<&[TimelineKey]> {
        let from = match after {
            None => 0,
            Some(a) => match self.rows.binary_search(&a) {
                Ok(i) => i + 1,
                Err(i) => i,
            },
        };
        let end = from.saturating_add(want).min(self.rows.len());
        let rows = &self.rows[from.min(end)..end];
        (rows.len() == want || self.all).then_some(rows)
    }

    /// Whether the rows know their parents.
    pub fn parent_known(&self) -> bool {
        self.parents.is_some()
    }

    /// What row `k`'s value says (`Some(None)`: not a reply), when the
    /// rows know their parents and hold `k`.
    pub fn parent(&self, k: &TimelineKey) -> Option<Option<UserId>> {
        let parents = self.parents.as_ref()?;
        self.rows.binary_search(k).ok()?;
        Some(
            parents
                .binary_search_by(|(r, _)| r.cmp(k))
                .ok()
                .map(|i| parents[i].1),
        )
    }

    /// Applies a write of row `k` (`Some(v)`: put with value `v`);
    /// `false` when the rows can no longer follow the store.
    pub(super) fn apply_row(&mut self, k: TimelineKey, put: Option<&[u8]>) -> bool {
        match (self.rows.binary_search(&k), put) {
            (Ok(_), Some(v)) => self.set_parent(k, v),
            (Ok(i), None) => {
                self.rows.remove(i);
                self.forget_parent(&k);
            }
            // Below the last row held, and rows follow: not held.
            (Err(i), Some(_)) if i == self.rows.len() && !self.all => {}
            (Err(i), Some(v)) => {
                self.rows.insert(i, k);
                self.set_parent(k, v);
                if self.rows.len() > HEAD_ROWS {
                    if let Some(last) = self.rows.pop() {
                        self.forget_parent(&last);
                    }
                    self.all = false;
                }
            }
            (Err(_), None) => {}
        }
        // Rows that follow but none held: nothing left to answer from.
        self.all || !self.rows.is_empty()
    }

    /// Records what row `k`'s value `v` says; a value of another layout
    /// leaves every parent unknown.
    fn set_parent(&mut self, k: TimelineKey, v: &[u8]) {
        let Some(parents) = &mut self.parents else {
            return;
        };
        let Some(parent) = keys::inbox_parent(v) else {
            self.parents = None;
            return;
        };
        match (parents.binary_search_by(|(r, _)| r.cmp(&k)), parent) {
            (Ok(i), Some(y)) => parents[i].1 = y,
            (Ok(i), None) => {
                parents.remove(i);
            }
            (Err(i), Some(y)) => parents.insert(i, (k, y)),
            (Err(_), None) => {}
        }
    }

    fn forget_parent(&mut self, k: &TimelineKey) {
        if let Some(parents) = &mut self.parents {
            if let Ok(i) = parents.binary_search_by(|(r, _)| r.cmp(k)) {
                parents.remove(i);
            }
        }
    }
}
