//! The in-place upgrade of a layout-3 store to layout 4 (see
//! `state/README.md`): layout 3 indexed every inbox entry by author
//! (`inbox_by_author`, a key per entry); layout 4 keeps a marker per user
//! and author instead (`inbox_authors`).

use super::{cf_options, meta, BlockCache, Store, StoreError, StoreOptions, LAYOUT_VERSION};
use crate::core::kv::Cf;
use rocksdb::{ColumnFamilyDescriptor, Options, WriteBatch, DB};
use std::path::Path;

/// Layout 3's author index of the inbox (`user | author | !ts | !post_id`,
/// a key per entry), replaced in layout 4 by a marker per user and author
/// (`inbox_authors`). A writable open upgrades a layout-3 store in place.
pub(super) const LAYOUT_3_INDEX: &str = "inbox_by_author";

/// Why a read-only open refuses a layout-3 store.
const LAYOUT_3_HINT: &str = "it was written with state layout 3, this build reads layout 4: \
     run the processor (`feedlog run`) on it once to upgrade it in place";

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

/// Why a read-only open refuses a layout-3 store.
pub(super) fn refusal(path: &Path) -> StoreError {
    StoreError::Refused {
        path: path.to_path_buf(),
        reason: LAYOUT_3_HINT.into(),
    }
}

/// Refuses (before RocksDB would, less clearly) a read-only open of a
/// layout-3 store that was never upgraded: it has the index and no markers.
pub(super) fn refuse_layout_3(path: &Path) -> Result<(), StoreError> {
    let cfs = DB::list_cf(&Options::default(), path).unwrap_or_default();
    let has = |name: &str| cfs.iter().any(|c| c == name);
    if has(LAYOUT_3_INDEX) && !has(Cf::InboxAuthors.name()) {
        return Err(refusal(path));
    }
    Ok(())
}

/// After a writable open found `layout`: upgrades a layout-3 store, and
/// drops layout 3's index wherever it is still present.
pub(super) fn finish(store: &mut Store, layout: u32) -> Result<(), StoreError> {
    if layout == 3 {
        write_markers(store)?;
    }
    if store.db.cf_handle(LAYOUT_3_INDEX).is_some() {
        store
            .db
            .drop_cf(LAYOUT_3_INDEX)
            .map_err(|e| store.rocks(e))?;
    }
    Ok(())
}

/// Upgrades a layout-3 store in place: a marker in `inbox_authors` for
/// each user and author its author index holds entries of, written with
/// the new layout version in one batch; the caller then drops the index
/// (an open after a crash in between finds layout 4 and drops it).
fn write_markers(store: &Store) -> Result<(), StoreError> {
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
    let mut b = WriteBatch::default();
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
    it.status().map_err(|e| store.rocks(e))?;
    drop(it);
    b.put_cf(
        store.cf(Cf::Meta),
        meta::LAYOUT,
        LAYOUT_VERSION.to_be_bytes(),
    );
    store.write(b)
}
