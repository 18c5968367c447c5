//! Fencing tokens: every `effects` record carries the partition that sent
//! it and its owner's [`Epoch`]; a receiving partition applies no record
//! with an older epoch than one it has already applied from that sender.
//!
//! Why: several messages replace state (a backfill, a refill, a pull, a
//! partition's copy of a pulled author) or insert it without knowing about
//! later deletions (a delivery, a copied post). They are right only if an
//! earlier owner's messages reach each receiver before its successor's.
//! An owner that lost its partition (its session expired during a pause or
//! a broker outage) but keeps running could ship old answers after its
//! successor's newer ones. With the fence, such a record is skipped and
//! counted, and what reaches a receiver from one sender is always a prefix
//! of older owners' records followed by newer owners' records — the order a
//! crash and restart produce, which the rest of the design already settles
//! (ARCHITECTURE.md, "Order and fencing").
//!
//! The decision is state: the highest epoch applied per sender is written
//! in the same batch as the changes of the record that raised it, so every
//! replay and rebuild of the same log fences the same records.

use crate::keys;
use crate::kv::{Cf, Kv, KvError, Txn};
use crate::partition::Partition;
use serde::{Deserialize, Serialize};
use std::fmt;

/// An owner's fencing token: it only grows from one owner of a partition
/// to the next. In Kafka mode a new owner takes one more than every epoch
/// it can see (the group's commit metadata, its own store), and at least
/// the wall clock in milliseconds, so that a lost group metadata cannot
/// make it go back; the embedded processor uses its state generation.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Epoch(pub u64);

impl Epoch {
    /// The lowest epoch. Records written before epochs existed carry no
    /// stamp at all, and are never fenced (see [`admit`]): upgrade a group
    /// by stopping every processor first.
    pub const ZERO: Epoch = Epoch(0);

    /// The epoch a new owner takes: one more than every epoch in `seen`,
    /// and at least `floor`.
    pub fn succeeding(seen: impl IntoIterator<Item = Epoch>, floor: u64) -> Epoch {
        let above = seen
            .into_iter()
            .map(|e| e.0.saturating_add(1))
            .max()
            .unwrap_or(1);
        Epoch(above.max(floor))
    }

    /// Reads the decimal text form (Kafka commit metadata, `checkpoint.json`);
    /// `None` for anything else, such as the `member/ms/n` strings of
    /// earlier versions.
    pub fn parse(s: &str) -> Option<Epoch> {
        let digits = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        digits.then(|| s.parse().ok().map(Epoch)).flatten()
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Who sent an `effects` record: the sending partition and its owner's
/// epoch when it was committed (a re-shipped outbox keeps it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// The partition that sent the record.
    pub from: Partition,
    /// Its owner's epoch.
    pub epoch: Epoch,
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "partition {} epoch {}", self.from, self.epoch)
    }
}

/// What the fence decided about one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Apply it.
    Admitted,
    /// Skip it: a record of a newer owner of its sender was applied already.
    Fenced {
        /// The epoch already applied from that sender.
        applied: Epoch,
    },
}

/// What a partition keeps per sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FenceVal {
    /// The highest epoch applied from the sender.
    pub epoch: Epoch,
    /// Records of the sender skipped because of it.
    pub fenced: u64,
}

impl FenceVal {
    /// 16 bytes: the epoch, then the count, big-endian.
    pub fn encode(&self) -> Vec<u8> {
        keys::key([self.epoch.0, self.fenced])
    }

    /// Inverse of [`FenceVal::encode`].
    pub fn decode(b: &[u8]) -> Option<FenceVal> {
        if b.len() != 16 {
            return None;
        }
        Some(FenceVal {
            epoch: Epoch(keys::be(b, 0)?),
            fenced: keys::be(b, 8)?,
        })
    }
}

/// The fence of sender `from` in this partition (zeroes when nothing came
/// from it with a stamp).
pub fn fence_of(kv: &(impl Kv + ?Sized), from: Partition) -> Result<FenceVal, KvError> {
    let k = keys::fence(from);
    match kv.get(Cf::Meta, &k)? {
        None => Ok(FenceVal::default()),
        Some(v) => {
            FenceVal::decode(&v).ok_or_else(|| KvError::corrupt(Cf::Meta, &k, "expected 16 bytes"))
        }
    }
}

/// Every sender's fence in this partition, by sender.
pub fn fences(kv: &(impl Kv + ?Sized)) -> Result<Vec<(Partition, FenceVal)>, KvError> {
    kv.scan_prefix(Cf::Meta, keys::FENCE_PREFIX)
        .map(|r| {
            let (k, v) = r?;
            let from = k
                .get(keys::FENCE_PREFIX.len()..)
                .and_then(|b| b.try_into().ok())
                .map(|b| Partition(u32::from_be_bytes(b)));
            match (from, FenceVal::decode(&v)) {
                (Some(from), Some(f)) => Ok((from, f)),
                _ => Err(KvError::corrupt(Cf::Meta, &k, "bad fence entry")),
            }
        })
        .collect()
}

/// Decides whether a record stamped `stamp` is applied, and stages what
/// that changes: a newer epoch becomes the sender's, a fenced record is
/// counted. A record without a stamp (written before epochs existed) is
/// always applied and changes nothing here.
pub fn admit<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    stamp: Option<Stamp>,
) -> Result<Admission, KvError> {
    let Some(stamp) = stamp else {
        return Ok(Admission::Admitted);
    };
    let mut f = fence_of(t, stamp.from)?;
    if stamp.epoch < f.epoch {
        f.fenced += 1;
        t.put(Cf::Meta, keys::fence(stamp.from), f.encode());
        return Ok(Admission::Fenced { applied: f.epoch });
    }
    if stamp.epoch > f.epoch {
        f.epoch = stamp.epoch;
        t.put(Cf::Meta, keys::fence(stamp.from), f.encode());
    }
    Ok(Admission::Admitted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::MemKv;

    fn stamp(from: Partition, epoch: u64) -> Option<Stamp> {
        Some(Stamp {
            from,
            epoch: Epoch(epoch),
        })
    }

    // Proves a record is fenced exactly when an epoch newer than its own was applied from the same sender, that senders are independent, and that unstamped records pass.
    #[test]
    fn fences_older_epochs_per_sender() {
        let mut kv = MemKv::default();
        let mut admit_one = |s: Option<Stamp>| {
            let mut t = Txn::new(&kv);
            let a = admit(&mut t, s).unwrap();
            let w = t.into_writes();
            kv.apply(w);
            a
        };
        assert_eq!(admit_one(stamp(Partition(1), 5)), Admission::Admitted);
        assert_eq!(
            admit_one(stamp(Partition(1), 5)),
            Admission::Admitted,
            "same owner"
        );
        assert_eq!(
            admit_one(stamp(Partition(2), 3)),
            Admission::Admitted,
            "other sender"
        );
        assert_eq!(
            admit_one(stamp(Partition(1), 7)),
            Admission::Admitted,
            "newer owner"
        );
        assert_eq!(
            admit_one(stamp(Partition(1), 5)),
            Admission::Fenced { applied: Epoch(7) }
        );
        assert_eq!(admit_one(None), Admission::Admitted, "unstamped");
        assert_eq!(admit_one(stamp(Partition(2), 3)), Admission::Admitted);
        assert_eq!(
            fences(&kv).unwrap(),
            vec![
                (
                    Partition(1),
                    FenceVal {
                        epoch: Epoch(7),
                        fenced: 1
                    }
                ),
                (
                    Partition(2),
                    FenceVal {
                        epoch: Epoch(3),
                        fenced: 0
                    }
                )
            ]
        );
    }

    // Proves a new owner's epoch is above every epoch it saw and at least the floor, and that only decimal text parses.
    #[test]
    fn a_new_epoch_is_above_everything_seen() {
        assert_eq!(Epoch::succeeding([], 0), Epoch(1));
        assert_eq!(Epoch::succeeding([Epoch(4), Epoch(9)], 0), Epoch(10));
        assert_eq!(Epoch::succeeding([Epoch(4)], 1000), Epoch(1000));
        assert_eq!(Epoch::succeeding([Epoch(u64::MAX)], 0), Epoch(u64::MAX));
        assert_eq!(Epoch::parse("42"), Some(Epoch(42)));
        for bad in ["", "m/1/0", "reset/17", "-1", "4 2"] {
            assert_eq!(Epoch::parse(bad), None, "{bad:?}");
        }
    }
}
