//! The pull path: a timeline page past the inbox's horizon, from the
//! followees' outboxes, read from their outbox heads where these agree
//! with the page's views ([`crate::state::heads::outbox`]).

use super::super::{QueryError, Reader};
use crate::core::event::UserId;
use crate::core::keys::{self, TimelineKey};
use crate::core::kv::Kv;
use crate::core::timeline::TOP;
use crate::core::views::{self, live_edges};
use crate::core::Partition;
use crate::state::heads::{followees::FOLLOWEES_MOST, Heads, Rows, HEAD_ROWS};
use crate::state::{Cf, Snapshot, Store, Unavailable};
use std::collections::{BTreeMap, BinaryHeap, HashSet};
use std::sync::Arc;

/// Followees' outboxes in this processor's stores, by partition: the
/// store (`None`: the reader's own, read through the page's snapshot) and
/// the followees there.
type OutboxesHere = BTreeMap<Partition, (Option<Arc<Store>>, Vec<UserId>)>;

impl Reader {
    /// Where `user`'s followees' outboxes are read (but those of `hidden`):
    /// by partition, from the stores here (the user's own partition as
    /// `None`: read through the page's snapshot), and the followees whose
    /// partitions another processor serves. The followees are `held` (the
    /// reader's head's, at the snapshot's epoch), else read from `snap`
    /// and kept in the reader's head when one is held.
    fn followee_outboxes(
        &self,
        snap: &Snapshot<'_>,
        user: UserId,
        (hidden, held): (&HashSet<UserId>, Option<Vec<UserId>>),
    ) -> Result<(OutboxesHere, Vec<UserId>), QueryError> {
        let followees = match held {
            Some(f) => f,
            None => {
                let f = live_edges(snap, Cf::Followees, user, None)
                    .map(|r| r.map(|(a, _)| a))
                    .collect::<Result<Vec<_>, _>>()?;
                let heads = snap.heads().filter(|_| self.heads);
                if let Some((h, epoch)) = heads.filter(|_| f.len() <= FOLLOWEES_MOST) {
                    h.keep_followees(epoch, user.0, f.clone());
                }
                f
            }
        };
        // Followees' outboxes: from the stores here, by partition, or in one
        // request per other processor. The user's own partition is read
        // through `snap` (its store is `None` below): a second snapshot of a
        // secondary would take its read lock twice, which deadlocks against
        // a catch-up waiting between the two.
        let own = self.partition_of(user);
        let mut here: OutboxesHere = BTreeMap::new();
        let mut elsewhere: Vec<UserId> = Vec::new();
        for author in followees {
            if hidden.contains(&author) {
                continue;
            }
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
        Ok((here, elsewhere))
    }

    /// Completes a timeline page past the inbox's horizon: the first
    /// entries of the current followees' outboxes from `from` on, until
    /// `keys` holds `want` — each outbox read from its head in memory
    /// where one agrees with the partition's view, the rest in one
    /// positioned read per partition, a seek per followee; each outbox
    /// left as soon as its next entry cannot enter the page (a heap holds
    /// the best so far), so about `want + followees` entries are read
    /// whatever the timeline's length. `followees`: the hidden users,
    /// whose outboxes are not read, and the reader's followees when their
    /// head holds them.
    pub(super) fn pull(
        &self,
        snap: &Snapshot<'_>,
        user: UserId,
        (from, after): (TimelineKey, Option<TimelineKey>),
        want: usize,
        followees: (&HashSet<UserId>, Option<Vec<UserId>>),
        keys: &mut Vec<TimelineKey>,
    ) -> Result<(), QueryError> {
        let (here, elsewhere) = self.followee_outboxes(snap, user, followees)?;
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
        // The `need` first entries from `from` on (but `after`) among every
        // followee's outbox: a max-heap of the best so far, and each
        // outbox read only while its entries can still enter it.
        let need = want.saturating_sub(keys.len());
        if need == 0 {
            return Ok(());
        }
        let mut best: BinaryHeap<TimelineKey> = BinaryHeap::with_capacity(need + 1);
        let mut offer = |k: TimelineKey| {
            if k < from || Some(k) == after {
                return true;
            }
            if best.len() == need && best.peek().is_some_and(|worst| k >= *worst) {
                // The rest of this outbox sorts after `k`: none enters.
                return false;
            }
            best.push(k);
            if best.len() > need {
                best.pop();
            }
            true
        };
        for (other, authors) in &snaps {
            let s = other.as_ref().unwrap_or(snap);
            let heads = s.heads().filter(|_| self.heads);
            offer_outboxes(s, heads, authors, from, &mut offer)?;
        }
        for (author, posts) in fetched {
            for (ts, post_id) in posts {
                if !offer(TimelineKey {
                    ts,
                    post_id,
                    author,
                }) {
                    break;
                }
            }
        }
        keys.extend(best.into_sorted_vec());
        Ok(())
    }
}

/// Where an author's outbox is read from the store after its head.
#[derive(Clone, Copy)]
enum Held {
    /// Every key that could enter the page was offered.
    Done,
    /// The head ran out with keys still entering: read on after this one
    /// (`None`: from `from`, the head holding none there).
    After(Option<TimelineKey>),
}

/// One author's outbox read from the store: the author's index, the key
/// the read starts at, the key to pass over (the last one offered from
/// its head), whether its keys may still enter the page, and its first
/// keys when they are read to keep as its head.
struct StoreRead {
    author: usize,
    start: TimelineKey,
    skip: Option<TimelineKey>,
    offering: bool,
    keep: Option<Vec<TimelineKey>>,
}

/// Offers `authors`' outbox keys from `from` on, as `s` reads them, to
/// `offer` (which says whether the outbox's next key could still enter
/// the page): from each one's outbox head among `heads` (those of `s`'s
/// store, at the epoch `s` was taken at), from
/// the store past the head or without one, in one positioned read
/// (ascending ids: disjoint, ascending ranges). An outbox read from its
/// top is read on to [`HEAD_ROWS`] keys and kept as the author's head.
fn offer_outboxes(
    s: &Snapshot<'_>,
    heads: Option<(&Heads, u64)>,
    authors: &[UserId],
    from: TimelineKey,
    offer: &mut impl FnMut(TimelineKey) -> bool,
) -> Result<(), QueryError> {
    let mut reads: Vec<StoreRead> = Vec::new();
    for (i, &a) in authors.iter().enumerate() {
        let held =
            heads.and_then(|(h, epoch)| h.outbox(epoch, a.0, |r| offer_held(r, from, offer)));
        let (start, skip) = match held {
            Some(Held::Done) => continue,
            Some(Held::After(Some(last))) => (last, Some(last)),
            Some(Held::After(None)) | None => (from, None),
        };
        let keep = (held.is_none() && heads.is_some() && from == TOP).then(Vec::new);
        reads.push(StoreRead {
            author: i,
            start,
            skip,
            offering: true,
            keep,
        });
    }
    if reads.is_empty() {
        return Ok(());
    }
    let ranges: Vec<(Vec<u8>, Vec<u8>)> = reads
        .iter()
        .map(|r| {
            let a = authors[r.author];
            (
                keys::outbox(a, r.start.ts, r.start.post_id),
                keys::key([a.0]),
            )
        })
        .collect();
    let mut bad = None;
    s.for_each_in_ranges(Cf::Outbox, &ranges, &mut |j, k, _| {
        let r = &mut reads[j];
        let key = match views::outbox_entry(k) {
            Ok((ts, post_id)) => TimelineKey {
                ts,
                post_id,
                author: authors[r.author],
            },
            Err(e) => {
                bad = Some(e);
                return false;
            }
        };
        if Some(key) == r.skip {
            return true;
        }
        r.offering = r.offering && offer(key);
        match &mut r.keep {
            // Read on to one key past a head's rows: then `all` is known.
            Some(rows) if rows.len() <= HEAD_ROWS => {
                rows.push(key);
                true
            }
            _ => r.offering,
        }
    })?;
    if let Some(e) = bad {
        return Err(e.into());
    }
    if let Some((h, epoch)) = heads {
        for r in reads {
            if let Some(rows) = r.keep {
                // Fewer than one past a head's rows: the range ended.
                let all = rows.len() <= HEAD_ROWS;
                h.keep_outbox(epoch, authors[r.author].0, Rows::new(rows, all), true);
            }
        }
    }
    Ok(())
}

/// Offers a head's keys from `from` on until one cannot enter the page.
fn offer_held(head: &Rows, from: TimelineKey, offer: &mut impl FnMut(TimelineKey) -> bool) -> Held {
    let at = head.rows.partition_point(|k| *k < from);
    for &k in &head.rows[at..] {
        if !offer(k) {
            return Held::Done;
        }
    }
    match head.rows[at..].last() {
        _ if head.all => Held::Done,
        last => Held::After(last.copied()),
    }
}
