//! The state layer's errors, and what each asks of the runner: retry a
//! passing RocksDB failure, stop on anything an operator must look at.

use crate::core::kv::{Cf, KvError};
use crate::core::Disposition;
use std::path::PathBuf;

/// Errors of the state layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// RocksDB reported an error.
    #[error("rocksdb error in {path}: {source}")]
    Rocks {
        /// The store's directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: rocksdb::Error,
    },
    /// A read through the [`Kv`] port failed (a value that does not
    /// decode, or RocksDB).
    #[error(transparent)]
    Kv(#[from] KvError),
    /// The store was written by another layout or belongs elsewhere.
    #[error("refusing state store {path}: {reason}")]
    Refused {
        /// The store's directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl StoreError {
    /// Skip, retry or stop: RocksDB's passing failures (a full disk or
    /// another I/O error, a busy or timed-out call) are retried; corruption,
    /// a store of another layout, anything else stops for an operator.
    pub fn disposition(&self) -> Disposition {
        match self {
            StoreError::Rocks { source, .. } => match source.kind() {
                rocksdb::ErrorKind::IOError
                | rocksdb::ErrorKind::Busy
                | rocksdb::ErrorKind::TimedOut
                | rocksdb::ErrorKind::TryAgain
                | rocksdb::ErrorKind::Incomplete
                | rocksdb::ErrorKind::Aborted => Disposition::Retry,
                _ => Disposition::Stop,
            },
            StoreError::Kv(e) => e.disposition(),
            StoreError::Refused { .. } => Disposition::Stop,
        }
    }

    /// A corrupt-value error for `key` in `cf`.
    pub fn corrupt(cf: Cf, key: &[u8], reason: impl Into<String>) -> StoreError {
        StoreError::Kv(KvError::corrupt(cf, key, reason))
    }
}

impl From<StoreError> for KvError {
    fn from(e: StoreError) -> KvError {
        match e {
            StoreError::Kv(k) => k,
            other => KvError::Backend {
                disposition: other.disposition(),
                source: Box::new(other),
            },
        }
    }
}
