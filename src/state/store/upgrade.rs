//! The in-place upgrade of a layout-3 to -9 store to layout 10 (see
//! `state/README.md`).
//!
//! Layout 3 indexed every inbox entry by author
//! (`inbox_by_author`, a key per entry), where layout 4 keeps a marker per
//! user and author (`inbox_authors`); layout 5 adds each reader's sources
//! of a post (`inbox_reposts`), written here from the inbox and the
//! directory of live reposts; layout 6 values each source with its
//! original's time and each repost's directory entry with the repost's
//! time; layout 7 adds `engagement` (likes, which older builds refused as
//! an unknown event kind, and each user's live reposts by original,
//! written here from the reposts' records); layout 8 adds `reply_dir`,
//! every partition's copy of which posts are replies (a layout-7 store
//! that holds a reply cannot have it written here — the other partitions'
//! replies are not in it — and is refused: rebuild it from the log);
//! layout 9 values each inbox row of a reply with the author it replies
//! to, written here from the store's own directory of replies; layout 10
//! registers each post that mentions a user at the user's partition (a
//! store that holds a live post with mentions is refused: the
//! registrations belong in other stores — rebuild from the log).

use super::{cf_options, meta, BlockCache, Store, StoreError, StoreOptions, LAYOUT_VERSION};
use crate::core::event::{PostId, UserId};
use crate::core::keys::{self, PostRef};
use crate::core::kv::{timeline_key_at, Cf, Kv};
use crate::core::views;
use rocksdb::{ColumnFamilyDescriptor, Options, WriteBatch, DB};
use std::path::Path;

/// Layout 3's author index of the inbox (`user | author | !ts | !post_id`,
/// a key per entry), replaced in layout 4 by a marker per user and author
/// (`inbox_authors`). A writable open upgrades a layout-3 store in place.
pub(super) const LAYOUT_3_INDEX: &str = "inbox_by_author";

/// The layouts a writable open upgrades in place.
pub(super) const UPGRADABLE: [u32; 7] = [3, 4, 5, 6, 7, 8, 9];

/// Whether the store at `path` still has layout 3's author index.
fn has_layout_3_index(path: &Path) -> bool {
    DB::list_cf(&Options::default(), path).is_ok_and(|cfs| cfs.iter().any(|c| c == LAYOUT_3_INDEX))
}

/// The column families to open: every one of this layout, and layout 3's
/// index where the store still has it (it is dropped by the upgrade).
pub(super) fn descriptors(
    path: &Path,
    cache: &BlockCache,
    opts: &StoreOptions,
) -> Vec<ColumnFamilyDescriptor> {
    let mut cfs: Vec<ColumnFamilyDescriptor> = Cf::ALL
        .iter()
        .map(|&cf| ColumnFamilyDescriptor::new(cf.name(), cf_options(cf, cache, opts)))
        .collect();
    if has_layout_3_index(path) {
        cfs.push(ColumnFamilyDescriptor::new(
            LAYOUT_3_INDEX,
            Options::default(),
        ));
    }
    cfs
}

/// Why a read-only open refuses a store of an older `layout`.
pub(super) fn refusal(path: &Path, layout: u32) -> StoreError {
    StoreError::Refused {
        path: path.to_path_buf(),
        reason: format!(
            "it was written with state layout {layout}, this build reads layout \
             {LAYOUT_VERSION}: run the processor (`feedlog run`) on it once to upgrade it in place"
        ),
    }
}

/// Refuses (before RocksDB would, less clearly) a read-only open of a
/// store that was never upgraded: a layout-3 store has the index and no
/// markers, a layout-4 one no sources.
pub(super) fn refuse_older(path: &Path) -> Result<(), StoreError> {
    let cfs = DB::list_cf(&Options::default(), path).unwrap_or_default();
    let has = |name: &str| cfs.iter().any(|c| c == name);
    if has(LAYOUT_3_INDEX) && !has(Cf::InboxAuthors.name()) {
        return Err(refusal(path, 3));
    }
    if !cfs.is_empty() && !has(Cf::InboxReposts.name()) {
        return Err(refusal(path, 4));
    }
    if !cfs.is_empty() && !has(Cf::Engagement.name()) {
        return Err(refusal(path, recorded_layout(path, &cfs).unwrap_or(6)));
    }
    if !cfs.is_empty() && !has(Cf::ReplyDir.name()) {
        return Err(refusal(path, recorded_layout(path, &cfs).unwrap_or(7)));
    }
    Ok(())
}

/// The layout recorded in the store at `path` (whose column families are
/// `cfs`), read without changing it.
fn recorded_layout(path: &Path, cfs: &[String]) -> Option<u32> {
    let db = DB::open_cf_for_read_only(&Options::default(), path, cfs, false).ok()?;
    let v = db
        .get_cf(db.cf_handle(Cf::Meta.name())?, meta::LAYOUT)
        .ok()??;
    Some(u32::from_be_bytes(v.as_slice().try_into().ok()?))
}

/// After a writable open found `layout`: upgrades a layout-3 to -9
/// store (one batch, with the new layout version; a layout-7 one holding
/// replies, or any holding a post with mentions, is refused), and drops
/// layout 3's
/// index wherever it is still present (an open after a crash in between
/// finds layout 6 and drops it).
pub(super) fn finish(store: &mut Store, layout: u32) -> Result<(), StoreError> {
    if UPGRADABLE.contains(&layout) {
        let start = std::time::Instant::now();
        let path = store.path.display().to_string();
        tracing::info!(%path, from = layout, to = LAYOUT_VERSION, "upgrading the state layout in place");
        if layout == 7 && holds_a_reply(store)? {
            return Err(StoreError::Refused {
                path: store.path.clone(),
                reason: "it was written with state layout 7 and holds replies, but not the \
                         directory of replies that layout 8 adds (every partition's copy, \
                         which one store cannot write): rebuild the state from the log \
                         (`feedlog rebuild`)"
                    .into(),
            });
        }
        if holds_a_mention(store)? {
            return Err(StoreError::Refused {
                path: store.path.clone(),
                reason: format!(
                    "it was written with state layout {layout} and holds posts that mention \
                     users, whose registrations layout {LAYOUT_VERSION} keeps at each mentioned \
                     user's partition (which one store cannot write): rebuild the state from \
                     the log (`feedlog rebuild`)"
                ),
            });
        }
        let mut b = WriteBatch::default();
        if layout == 3 {
            write_markers(store, &mut b)?;
        }
        if layout < 6 {
            write_sources(store, &mut b)?;
            write_directory(store, &mut b)?;
        }
        if layout < 7 {
            write_reposted(store, &mut b)?;
        }
        if layout == 8 {
            write_parents(store, &mut b)?;
        }
        b.put_cf(
            store.cf(Cf::Meta),
            meta::LAYOUT,
            LAYOUT_VERSION.to_be_bytes(),
        );
        store.write(b)?;
        let secs = start.elapsed().as_secs_f64();
        tracing::info!(%path, secs, "state layout upgraded");
    }
    if store.db.cf_handle(LAYOUT_3_INDEX).is_some() {
        store
            .db
            .drop_cf(LAYOUT_3_INDEX)
            .map_err(|e| store.rocks(e))?;
    }
    Ok(())
}

/// Whether a layout-7 store keeps any post's `reply_to` (its engagement
/// records of posts that reply or mention, [`keys::addressed`]).
fn holds_a_reply(store: &Store) -> Result<bool, StoreError> {
    let prefix = [9u8];
    for r in store.scan(Cf::Engagement, &prefix, Some(&[10u8])) {
        let (_, v) = r?;
        if v.first() == Some(&1) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether a store keeps a live post's `mentions` (its engagement
/// records of posts that reply or mention, [`keys::addressed`]: more
/// than the parent).
fn holds_a_mention(store: &Store) -> Result<bool, StoreError> {
    for r in store.scan(Cf::Engagement, &[9u8], Some(&[10u8])) {
        let (_, v) = r?;
        let parent = match v.first() {
            Some(1) => 17,
            _ => 1,
        };
        if v.len() > parent {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Each inbox row of a reply, valued with the author it replies to
/// (`keys::inbox_value`), onto `b`: from this partition's directory of
/// replies, which holds every reply any of its inboxes holds. Nothing is
/// read when the directory is empty.
fn write_parents(store: &Store, b: &mut WriteBatch) -> Result<(), StoreError> {
    if store
        .scan(Cf::ReplyDir, &[], None)
        .next()
        .transpose()?
        .is_none()
    {
        return Ok(());
    }
    let mut it = store.db.raw_iterator_cf(store.cf(Cf::Inbox));
    it.seek_to_first();
    while let Some(k) = it.key() {
        let app = timeline_key_at(Cf::Inbox, k, 8)?;
        if let Some(y) = crate::core::reply::rule::parent_in(store, (app.author, app.post_id))? {
            b.put_cf(store.cf(Cf::Inbox), k, keys::inbox_value(Some(y)));
        }
        it.next();
    }
    it.status().map_err(|e| store.rocks(e))
}

/// Upgrades a layout-3 store's index onto `b`: a marker in
/// `inbox_authors` for each user and author its author index holds
/// entries of.
fn write_markers(store: &Store, b: &mut WriteBatch) -> Result<(), StoreError> {
    let index = store
        .db
        .cf_handle(LAYOUT_3_INDEX)
        .ok_or_else(|| StoreError::Refused {
            path: store.path.clone(),
            reason: format!(
                "it was written with state layout 3 but has no `{LAYOUT_3_INDEX}` column \
                 family to upgrade from (rebuild it from the log into a fresh directory)"
            ),
        })?;
    let mut it = store.db.raw_iterator_cf(index);
    it.seek_to_first();
    let mut last: Option<Vec<u8>> = None;
    while let Some(k) = it.key() {
        let marker = k.get(..16).ok_or_else(|| {
            StoreError::corrupt(
                Cf::InboxAuthors,
                k,
                "a layout-3 index key of under 16 bytes",
            )
        })?;
        if last.as_deref() != Some(marker) {
            b.put_cf(store.cf(Cf::InboxAuthors), marker, []);
            last = Some(marker.to_vec());
        }
        it.next();
    }
    it.status().map_err(|e| store.rocks(e))
}

/// Each reader's sources onto `b`: for a reader whose inbox is their
/// whole timeline (`UserVal::whole`), a row in `inbox_reposts` for every
/// inbox entry that is a live repost, under the original the directory
/// names, valued the original's time (what the processor keeps from
/// layout 6 on; a layout-5 store's rows are written again with it).
fn write_sources(store: &Store, b: &mut WriteBatch) -> Result<(), StoreError> {
    let mut it = store.db.raw_iterator_cf(store.cf(Cf::Inbox));
    it.seek_to_first();
    let mut reader: Option<(u64, bool)> = None;
    while let Some(k) = it.key() {
        let user = keys::be(k, 0)
            .ok_or_else(|| StoreError::corrupt(Cf::Inbox, k, "an inbox key of under 8 bytes"))?;
        let whole = match reader {
            Some((u, whole)) if u == user => whole,
            _ => views::user(store, UserId(user))?.whole(),
        };
        reader = Some((user, whole));
        let app = timeline_key_at(Cf::Inbox, k, 8)?;
        let root = match whole {
            true => old_original_of(store, (app.author, app.post_id))?,
            false => None,
        };
        if let Some((root, post_ts)) = root {
            let row = keys::inbox_repost(UserId(user), root, &app);
            b.put_cf(store.cf(Cf::InboxReposts), row, post_ts.to_be_bytes());
        }
        it.next();
    }
    it.status().map_err(|e| store.rocks(e))
}

/// The original a repost reposts and its time, from a directory entry of
/// layout 5 or before (`a | p | original ts`) or of layout 6 (and the
/// repost's time).
fn old_original_of(
    store: &Store,
    (author, post_id): PostRef,
) -> Result<Option<(PostRef, u64)>, StoreError> {
    let k = keys::dir_by_repost(author, post_id);
    let Some(v) = store.get(Cf::RepostDir, &k)? else {
        return Ok(None);
    };
    let at = |i| keys::be(&v, i).filter(|_| v.len() == 24 || v.len() == keys::DIR_REPOST_LEN);
    match (at(0), at(8), at(16)) {
        (Some(a), Some(p), Some(ts)) => Ok(Some(((UserId(a), PostId(p)), ts))),
        _ => Err(StoreError::corrupt(
            Cf::RepostDir,
            &k,
            "expected 24 or 32 bytes",
        )),
    }
}

/// Each user's live reposts by original onto `b` (`engagement`'s
/// `reposted` counts), from the reposts' records in `posts`.
fn write_reposted(store: &Store, b: &mut WriteBatch) -> Result<(), StoreError> {
    let mut counts: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
    let mut it = store.db.raw_iterator_cf(store.cf(Cf::Posts));
    it.seek_to_first();
    while let (Some(k), Some(v)) = (it.key(), it.value()) {
        let reposter = keys::be(k, 0)
            .ok_or_else(|| StoreError::corrupt(Cf::Posts, k, "a post key of under 8 bytes"))?;
        let val = keys::PostVal::decode(v)
            .ok_or_else(|| StoreError::corrupt(Cf::Posts, k, "an undecodable post record"))?;
        if let keys::PostVal::Repost(rv) = val {
            if let (keys::RepostState::Live, Some((root, _))) = (rv.state, rv.root) {
                *counts
                    .entry(keys::reposted(UserId(reposter), root))
                    .or_default() += 1;
            }
        }
        it.next();
    }
    it.status().map_err(|e| store.rocks(e))?;
    for (k, n) in counts {
        b.put_cf(store.cf(Cf::Engagement), k, n.to_be_bytes());
    }
    Ok(())
}

/// Each live repost's `1 | reposter | repost` entry of the directory onto
/// `b` with the repost's time (from its `0 | a | p | reposter | repost`
/// entry), what layout 6 keeps.
fn write_directory(store: &Store, b: &mut WriteBatch) -> Result<(), StoreError> {
    let mut it = store.db.raw_iterator_cf(store.cf(Cf::RepostDir));
    it.seek([1u8]);
    while let (Some(k), Some(v)) = (it.key(), it.value()) {
        if k.first() != Some(&1) {
            break;
        }
        let at = |b: &[u8], i| keys::be(b, i);
        let (reposter, repost) = match (k.len(), at(k, 1), at(k, 9)) {
            (17, Some(r), Some(p)) => (UserId(r), PostId(p)),
            _ => return Err(StoreError::corrupt(Cf::RepostDir, k, "expected 17 bytes")),
        };
        let root = match (v.len(), at(v, 0), at(v, 8), at(v, 16)) {
            (24 | 32, Some(a), Some(p), Some(ts)) => ((UserId(a), PostId(p)), ts),
            _ => {
                return Err(StoreError::corrupt(
                    Cf::RepostDir,
                    k,
                    "expected 24 or 32 bytes",
                ))
            }
        };
        let by_original = keys::dir_by_original(root.0, reposter, repost);
        let ts = store
            .get(Cf::RepostDir, &by_original)?
            .and_then(|o| at(&o, 0))
            .ok_or_else(|| {
                StoreError::corrupt(
                    Cf::RepostDir,
                    k,
                    "a live repost without its entry by original",
                )
            })?;
        let value = keys::key([root.0 .0 .0, root.0 .1 .0, root.1, ts]);
        b.put_cf(store.cf(Cf::RepostDir), k, value);
        it.next();
    }
    it.status().map_err(|e| store.rocks(e))
}
