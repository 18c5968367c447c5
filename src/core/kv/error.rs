//! Why a read of state failed.

use super::Cf;
use crate::keys;

/// Why a read of state failed: a stored value that does not decode, or the
/// engine behind the [`Kv`](super::Kv) (RocksDB, in the state layer) failed.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// A stored value does not decode.
    #[error("corrupt value in column family {cf} at key {key}: {reason}")]
    Corrupt {
        /// Column family name.
        cf: &'static str,
        /// The key, in hex.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The storage engine failed (its own error, with where).
    #[error("{source}")]
    Backend {
        /// What the engine's error answers: skip, retry or stop.
        disposition: crate::Disposition,
        /// The engine's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl KvError {
    /// A corrupt value needs an operator; the engine's failure answers as
    /// the engine decided.
    pub fn disposition(&self) -> crate::Disposition {
        match self {
            KvError::Corrupt { .. } => crate::Disposition::Stop,
            KvError::Backend { disposition, .. } => *disposition,
        }
    }

    /// A corrupt-value error for `key` in `cf`.
    pub fn corrupt(cf: Cf, key: &[u8], reason: impl Into<String>) -> KvError {
        KvError::Corrupt {
            cf: cf.name(),
            key: key.iter().map(|b| format!("{b:02x}")).collect(),
            reason: reason.into(),
        }
    }
}

/// The big-endian u64 at `at` of `bytes`, read at `key` in `cf`: a
/// corrupt-record error (the runner stops) when `bytes` ends before it.
pub fn u64_at(cf: Cf, key: &[u8], bytes: &[u8], at: usize) -> Result<u64, KvError> {
    keys::be(bytes, at).ok_or_else(|| {
        KvError::corrupt(
            cf,
            key,
            format!("shorter than its layout: no 8 bytes at {at}"),
        )
    })
}

/// The timeline key at `at` of `key` in `cf` (an inbox or a copy's key):
/// a corrupt-record error when `key` ends before it.
pub fn timeline_key_at(cf: Cf, key: &[u8], at: usize) -> Result<keys::TimelineKey, KvError> {
    key.get(at..)
        .and_then(keys::TimelineKey::decode)
        .ok_or_else(|| {
            KvError::corrupt(
                cf,
                key,
                format!("shorter than its layout: no timeline key at {at}"),
            )
        })
}
