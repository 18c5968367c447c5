//! Digests of what readers see, to verify two states against each other.
//!
//! A digest is computed from reads, never from RocksDB files: per partition
//! and per view, a SHA-256 over every user's view in user order (users whose
//! views are all empty contribute nothing), so it does not depend on
//! compaction, batch boundaries, or how full an inbox is. The materialized
//! inbox behind `timeline` is not digested as stored: which entries it holds
//! beyond what reads return (how far it was trimmed, where its horizon is)
//! depends on how follows and deliveries interleaved in batches, while the
//! timelines read from it do not.

use super::rebuild::ReplayError;
use crate::api::query::{QueryError, Reader, DEFAULT_RECENT, MAX_LIMIT};
use crate::core::event::UserId;
use crate::core::position::Positions;
use crate::core::Partition;
use crate::core::View;
use crate::state::datadir::DataDir;
use crate::state::{Cf, Kv, Store, StoreError};
use serde::Serialize;
use sha2::{Digest as _, Sha256};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

/// How deep the timeline digest goes per user: the newest entries, as
/// readers page them. Deeper pages are computed from the followees and
/// their outboxes, which are digested whole.
pub const TIMELINE_DEPTH: usize = 800;

/// One partition's digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PartitionDigest {
    /// The partition.
    pub partition: Partition,
    /// Next `events` and `effects` offsets: the log position of the state.
    pub position: Positions,
    /// Users with a non-empty view.
    pub users: u64,
    /// Per view (in [`View::ALL`] order), hex SHA-256.
    pub views: Vec<(View, String)>,
}

/// Every partition's digests and one over all of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateDigest {
    /// Per partition.
    pub partitions: Vec<PartitionDigest>,
    /// SHA-256 over every partition's view digests, in order.
    pub overall: String,
}

/// One user's view, as the bytes digested (fixed-width big-endian fields).
pub fn view_bytes(reader: &Reader, view: View, user: UserId) -> Result<Vec<u8>, QueryError> {
    let mut out = Vec::new();
    let mut put = |xs: &[u64]| {
        for x in xs {
            out.extend_from_slice(&x.to_be_bytes());
        }
    };
    match view {
        View::Counters => {
            let c = reader.counters(user)?;
            if c.followers + c.followees + c.posts + c.reposts + c.likes > 0 {
                put(&[c.followers, c.followees, c.posts, c.reposts, c.likes]);
            }
        }
        View::Followers | View::Followees => {
            let mut cursor = None;
            loop {
                let page = if view == View::Followers {
                    reader.followers(user, MAX_LIMIT, cursor.as_deref())?
                } else {
                    reader.followees(user, MAX_LIMIT, cursor.as_deref())?
                };
                for i in &page.items {
                    put(&[i.user, i.ts]);
                }
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
        }
        View::Mutes | View::Blocks => {
            let mut cursor = None;
            loop {
                let page = if view == View::Mutes {
                    reader.mutes(user, MAX_LIMIT, cursor.as_deref())?
                } else {
                    reader.blocks(user, MAX_LIMIT, cursor.as_deref())?
                };
                for i in &page.items {
                    put(&[i.user, i.since, i.until.map_or(0, |u| u + 1)]);
                }
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
        }
        View::Markers => {
            // Where each marker is and since when; not the log position of
            // the `seen` that set it, which depends on the partition count.
            for (feed, m) in reader.kept_markers(user)? {
                let p = m.read_up_to;
                let feed = u64::from(feed.as_u8());
                put(&[feed, p.ts.0, p.post_id.0, p.author.0, m.since.0]);
            }
        }
        View::RecentFollowers => {
            for i in reader.recent_followers(user, DEFAULT_RECENT)?.items {
                put(&[i.user, i.ts]);
            }
        }
        View::Posts => {
            let mut cursor = None;
            loop {
                let page = reader.posts(user, MAX_LIMIT, cursor.as_deref())?;
                for i in &page.items {
                    put(&[i.post_id, i.ts]);
                    // An original's reposts, or a repost's original.
                    match &i.repost_of {
                        Some(o) => put(&[1, o.author, o.post_id]),
                        None => put(&[0, i.reposts.unwrap_or(0)]),
                    }
                }
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
        }
        View::Timeline => {
            for i in reader.timeline(user, TIMELINE_DEPTH, None)?.items {
                put(&[i.post_id, i.author, i.ts]);
                // Who reposted it, when followed users did.
                let by = i.reposted_by.as_deref().unwrap_or_default();
                put(&[i.post_ts.unwrap_or(0), i.reposters.unwrap_or(0)]);
                for r in by {
                    put(&[r.user, r.post_id, r.ts]);
                }
            }
        }
    }
    Ok(out)
}

/// Every user with any record in `store` (by the user-id prefix of the
/// per-user column families), ascending.
pub fn users_of(store: &Store) -> Result<Vec<UserId>, StoreError> {
    let mut users = BTreeSet::new();
    for cf in [
        Cf::Users,
        Cf::Followees,
        Cf::Followers,
        Cf::Outbox,
        Cf::Inbox,
        Cf::Filters,
    ] {
        // Jump from one user's prefix to the next.
        let mut from = 0u64;
        loop {
            let next = store
                .scan(cf, &from.to_be_bytes(), None)
                .next()
                .transpose()?;
            let Some((k, _)) = next else { break };
            if k.len() < 8 {
                break;
            }
            let u = u64::from_be_bytes(k[..8].try_into().expect("8 bytes"));
            users.insert(u);
            match u.checked_add(1) {
                Some(n) => from = n,
                None => break,
            }
        }
    }
    Ok(users.into_iter().filter(|&u| u != 0).map(UserId).collect())
}

/// The digests of every view of every partition of `stores`.
pub fn digest(stores: &[Arc<Store>]) -> Result<StateDigest, ReplayError> {
    let reader = Reader::new(stores.to_vec());
    let partitions = stores
        .iter()
        .enumerate()
        .map(|(p, store)| partition_digest(&reader, Partition(p as u32), store))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(StateDigest {
        overall: overall(&partitions),
        partitions,
    })
}

/// The SHA-256 over every partition's view digests, in order.
pub fn overall(partitions: &[PartitionDigest]) -> String {
    let mut overall = Sha256::new();
    for (_, d) in partitions.iter().flat_map(|p| &p.views) {
        overall.update(d.as_bytes());
    }
    hex(&overall.finalize())
}

/// The digests of every view of partition `p`, whose store is `store`,
/// read through `reader` (which reaches the other partitions' outboxes
/// for the timelines' pull path, here or on other processors).
pub fn partition_digest(
    reader: &Reader,
    p: Partition,
    store: &Store,
) -> Result<PartitionDigest, ReplayError> {
    let mut hashers: Vec<Sha256> = View::ALL.iter().map(|_| Sha256::new()).collect();
    let mut users = 0u64;
    for user in users_of(store)? {
        let mut any = false;
        for (&view, h) in View::ALL.iter().zip(&mut hashers) {
            let bytes = view_bytes(reader, view, user)?;
            if !bytes.is_empty() {
                any = true;
                h.update(user.0.to_be_bytes());
                h.update((bytes.len() as u64).to_be_bytes());
                h.update(&bytes);
            }
        }
        users += u64::from(any);
    }
    Ok(PartitionDigest {
        partition: p,
        position: store.positions()?,
        users,
        views: View::ALL
            .iter()
            .zip(hashers)
            .map(|(&v, h)| (v, hex(&h.finalize())))
            .collect(),
    })
}

/// The first user (ascending) whose `view` differs between two states of
/// partition `p`, with both sides' bytes.
pub fn first_difference(
    a: &[Arc<Store>],
    b: &[Arc<Store>],
    p: Partition,
    view: View,
) -> Result<Option<UserId>, ReplayError> {
    let (ra, rb) = (Reader::new(a.to_vec()), Reader::new(b.to_vec()));
    let mut users: BTreeSet<UserId> = users_of(&a[p.index()])?.into_iter().collect();
    users.extend(users_of(&b[p.index()])?);
    for u in users {
        if view_bytes(&ra, view, u)? != view_bytes(&rb, view, u)? {
            return Ok(Some(u));
        }
    }
    Ok(None)
}

/// Opens every store of a data directory read-only.
pub fn open_stores(dir: &Path) -> Result<Vec<Arc<Store>>, ReplayError> {
    Ok(crate::state::set::open_read_only(
        &DataDir::open(dir)?,
        crate::state::Kept::NONE,
    )?)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
