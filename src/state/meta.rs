//! The `meta` column family: layout and identity, input positions, the
//! outbox sequence, ownership. Positions are written in the same
//! `WriteBatch` as the state they produced.

use crate::core::kv::{Cf, Kv, KvError};
use crate::core::position::Positions;
use crate::core::Partition;

/// `u32` layout version.
pub const LAYOUT: &[u8] = b"layout";
/// `u32` partition index of this store.
pub const PARTITION: &[u8] = b"partition";
/// `u32` partition count of the data directory.
pub const PARTITIONS: &[u8] = b"partitions";
/// `u64` next offset to read in `events[p]`.
pub const POS_EVENTS: &[u8] = b"pos/events";
/// `u64` next offset to read in `effects[p]`.
pub const POS_EFFECTS: &[u8] = b"pos/effects";
/// `u64` pair (`events`, `effects`): below them every input is applied
/// and answered, even while a redelivery re-reads (and `pos/*` went
/// back); absent: the `pos/*` values.
pub const APPLIED: &[u8] = b"applied";
/// `u64` next sequence number in the `pending` column family.
pub const NEXT_SEQ: &[u8] = b"pending/next";
/// Kafka mode: the ownership epoch under which this store last
/// processed (decimal text, [`crate::core::fence::Epoch`]; an earlier
/// version's `member/ms/n` text reads as none); the group's committed
/// positions carry the epoch of the latest owner, so a store can tell
/// whether another processor owned its partition since.
pub const OWNER_EPOCH: &[u8] = b"owner/epoch";

/// `fwd/` + source partition `u32`: `u64`, one past the highest source
/// offset of an event forwarded from that partition and applied here.
pub fn forwarded_from(partition: Partition) -> Vec<u8> {
    let mut k = b"fwd/".to_vec();
    k.extend_from_slice(&partition.0.to_be_bytes());
    k
}

/// Reads a `u64` meta value through any view (0 when absent).
pub fn meta_u64(kv: &(impl Kv + ?Sized), key: &[u8]) -> Result<u64, KvError> {
    match kv.get(Cf::Meta, key)? {
        None => Ok(0),
        Some(v) => v
            .try_into()
            .map(u64::from_be_bytes)
            .map_err(|_| KvError::corrupt(Cf::Meta, key, "expected 8 bytes")),
    }
}

/// The stored input positions: where processing resumes.
pub fn positions(kv: &(impl Kv + ?Sized)) -> Result<Positions, KvError> {
    Ok(Positions::new(
        meta_u64(kv, POS_EVENTS)?,
        meta_u64(kv, POS_EFFECTS)?,
    ))
}

/// The stored applied positions (see [`APPLIED`]), when recorded.
pub fn applied(kv: &(impl Kv + ?Sized)) -> Result<Option<Positions>, KvError> {
    let Some(v) = kv.get(Cf::Meta, APPLIED)? else {
        return Ok(None);
    };
    let at = |i: usize| {
        v.get(i..i + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    };
    match (at(0), at(8)) {
        (Some(e), Some(f)) => Ok(Some(Positions::new(e, f))),
        _ => Err(KvError::corrupt(Cf::Meta, APPLIED, "bad applied positions")),
    }
}

/// The value of [`APPLIED`] for `p`.
pub fn applied_value(p: Positions) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&p.events.0.to_be_bytes());
    v[8..].copy_from_slice(&p.effects.0.to_be_bytes());
    v
}
