//! The hybrid machinery's gauges, kept with each partition's state: its
//! pulled authors, sleeping readers, copies of pulled authors and refills
//! awaited. Each change of one of them stages the new figures in the same
//! batch as the change itself, so `/metrics` reads four numbers instead of
//! scanning the state, and they are never out of step with it.
//!
//! A state written before the gauges existed has none: [`recount`] counts
//! them once from the state (the store does when it opens one), and
//! [`Gauges::of`] tells a missing record apart from zeroes.

use crate::keys;
use crate::kv::{Cf, Kv, KvError, Txn};

/// One partition's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gauges {
    /// Authors owned here that are pulled (read from copies, not pushed).
    pub pulled: u64,
    /// Readers owned here who are asleep (read by the pull path).
    pub asleep: u64,
    /// Pulled authors (of any partition) this partition holds a copy of.
    pub copies: u64,
    /// Refills this partition's waking readers still await.
    pub refills: u64,
}

/// Which figure a change concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gauge {
    /// [`Gauges::pulled`].
    Pulled,
    /// [`Gauges::asleep`].
    Asleep,
    /// [`Gauges::copies`].
    Copies,
    /// [`Gauges::refills`].
    Refills,
}

impl Gauges {
    /// 32 bytes: the four figures, big-endian, in field order.
    pub fn encode(&self) -> Vec<u8> {
        keys::key([self.pulled, self.asleep, self.copies, self.refills])
    }

    /// Inverse of [`Gauges::encode`].
    pub fn decode(b: &[u8]) -> Option<Gauges> {
        if b.len() != 32 {
            return None;
        }
        Some(Gauges {
            pulled: keys::be(b, 0)?,
            asleep: keys::be(b, 8)?,
            copies: keys::be(b, 16)?,
            refills: keys::be(b, 24)?,
        })
    }

    /// The figures kept in `kv`; `None` for a state written before they
    /// were kept.
    pub fn of(kv: &(impl Kv + ?Sized)) -> Result<Option<Gauges>, KvError> {
        match kv.get(Cf::Meta, keys::GAUGES)? {
            None => Ok(None),
            Some(v) => Gauges::decode(&v)
                .map(Some)
                .ok_or_else(|| KvError::corrupt(Cf::Meta, keys::GAUGES, "expected 32 bytes")),
        }
    }

    fn field(&mut self, g: Gauge) -> &mut u64 {
        match g {
            Gauge::Pulled => &mut self.pulled,
            Gauge::Asleep => &mut self.asleep,
            Gauge::Copies => &mut self.copies,
            Gauge::Refills => &mut self.refills,
        }
    }
}

/// The figures counted from the state itself: what the kept ones must
/// always equal.
pub fn recount(kv: &(impl Kv + ?Sized)) -> Result<Gauges, KvError> {
    let mut g = Gauges::default();
    for r in crate::views::users(kv) {
        let (_, u) = r?;
        g.pulled += u64::from(u.pulled);
        g.asleep += u64::from(u.asleep);
    }
    // Copy headers are keyed by the author alone (8 bytes); entries are longer.
    for r in kv.scan(Cf::Copies, &[], None) {
        let (k, _) = r?;
        g.copies += u64::from(k.len() == 8);
    }
    for r in kv.scan(Cf::Refills, &[], None) {
        r?;
        g.refills += 1;
    }
    Ok(g)
}

impl<K: Kv + ?Sized> Txn<'_, K> {
    /// Stages `gauge` moved by `delta` (from zero in a state that keeps no
    /// figures yet: the store counts them before it lets a batch in).
    pub fn bump(&mut self, gauge: Gauge, delta: i64) -> Result<(), KvError> {
        if delta == 0 {
            return Ok(());
        }
        let mut g = Gauges::of(self)?.unwrap_or_default();
        let f = g.field(gauge);
        *f = f.saturating_add_signed(delta);
        self.put(Cf::Meta, keys::GAUGES.to_vec(), g.encode());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the gauges' record decodes to what was encoded, and that any other length is refused.
    #[test]
    fn gauges_round_trip() {
        let g = Gauges {
            pulled: 1,
            asleep: u64::MAX,
            copies: 3,
            refills: 0,
        };
        assert_eq!(Gauges::decode(&g.encode()), Some(g));
        assert_eq!(Gauges::decode(&[0; 31]), None);
    }
}
