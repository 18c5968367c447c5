//! Which partition owns a user.
//!
//! `partition_for(user, n) = (murmur2(decimal(user)) & 0x7fffffff) % n`: Kafka's
//! Java client's default partitioner applied to the user id written as a
//! decimal string. A producer that keys events by the acting user id (`"42"`)
//! with any Java-compatible client lands each event in the partition feedlog
//! expects.

use crate::event::UserId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One partition of the `events` and `effects` topics, and of the state:
/// its index, from 0 to the partition count − 1. (A count of partitions is
/// a plain `u32`.)
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Partition(pub u32);

/// Written as its index, as in JSON and in log lines (`[0, 3]`, not
/// `[Partition(0), Partition(3)]`).
impl fmt::Debug for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Partition {
    /// Every partition of `count`, in order.
    pub fn all(count: u32) -> impl DoubleEndedIterator<Item = Partition> + Clone {
        (0..count).map(Partition)
    }

    /// Its index in a list of the partitions in order.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl std::str::FromStr for Partition {
    type Err = std::num::ParseIntError;

    /// A partition written as its index (`3`).
    fn from_str(s: &str) -> Result<Partition, Self::Err> {
        s.parse().map(Partition)
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Kafka's murmur2 (seed `0x9747b28c`), bit for bit as `Utils.murmur2`.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition (of `partitions`) that owns `user`.
pub fn partition_for(user: UserId, partitions: u32) -> Partition {
    assert!(partitions > 0, "partition count must be > 0");
    let mut buf = [0u8; 20];
    let key = decimal(user.0, &mut buf);
    Partition(((murmur2(key) as u32) & 0x7fff_ffff) % partitions)
}

/// Writes `n` in decimal into `buf`, returning the used tail.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves murmur2 matches the values Apache Kafka's own UtilsTest pins.
    #[test]
    fn murmur2_matches_kafka() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), want, "{}", String::from_utf8_lossy(key));
        }
    }

    // Proves the partition is murmur2 of the decimal string, and the decimal writer is right.
    #[test]
    fn partition_uses_decimal_string() {
        for id in [1u64, 9, 10, 21, 12345, u64::MAX] {
            let s = id.to_string();
            let want = ((murmur2(s.as_bytes()) as u32) & 0x7fff_ffff) % 8;
            assert_eq!(partition_for(UserId(id), 8), Partition(want));
            assert_eq!(partition_for(UserId(id), 1), Partition(0));
        }
    }
}
