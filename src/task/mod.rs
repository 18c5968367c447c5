//! The owners of partitions: where the pure core meets I/O.
//!
//! [`PartitionTask`] owns one partition: it reads its two inputs, applies
//! them through the core, commits state, positions and outgoing records in
//! one batch, and ships the records (a transactional outbox: only committed
//! work is ever shipped, so a crash can duplicate a suffix of committed
//! effects — harmless, every effect is idempotent under version dedup — but
//! never emit effects of work that was not committed). [`runner::drive`] is
//! the one step loop both runners use: [`embedded`] runs every partition of
//! a data directory on the embedded log, [`kafka`] the partitions a
//! consumer group gives this process, with [`handover`] deciding what a new
//! owner starts from.

pub mod embedded;
pub mod faults;
pub mod handover;
mod input;
pub mod kafka;
mod outbox;
pub mod partition;
pub mod priority;
pub mod progress;
pub mod runner;
pub mod shutdown;
mod takeover;

pub use faults::{CrashPoint, Faults, NoFaults};
pub use partition::{start_with_threshold, BatchLimits, PartitionTask, Takeover};
pub use shutdown::Shutdown;

use crate::core::metrics::PartitionLag;
use crate::core::position::Positions;
use crate::core::Disposition;
use crate::core::Partition;
use crate::log::{Log, LogError, Topic};
use crate::state::{Store, StoreError};
use std::sync::Arc;

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The state store failed: stop the partition.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading state failed (a value that does not decode, or the store).
    #[error(transparent)]
    State(#[from] crate::core::kv::KvError),
    /// A log failed: stop the partition.
    #[error(transparent)]
    Log(#[from] LogError),
    /// An injected crash.
    #[error("injected crash at {0:?}")]
    Crashed(CrashPoint),
    /// A partition's thread could not be started.
    #[error("starting a partition thread: {0}")]
    Thread(#[source] std::io::Error),
}

impl TaskError {
    /// Skip, retry or stop: a task that failed is restarted from its store
    /// when the cause passes (a broker away, a full disk, an injected
    /// crash), and the work stops for an operator when it does not (a
    /// corrupt store or segment).
    pub fn disposition(&self) -> Disposition {
        match self {
            TaskError::Store(e) => e.disposition(),
            TaskError::State(e) => e.disposition(),
            TaskError::Log(e) => e.disposition(),
            TaskError::Crashed(_) | TaskError::Thread(_) => Disposition::Retry,
        }
    }
}

/// Errors reading the lag.
#[derive(Debug, thiserror::Error)]
pub enum LagError {
    /// A log.
    #[error(transparent)]
    Log(#[from] crate::log::LogError),
    /// A store.
    #[error(transparent)]
    Store(#[from] crate::state::StoreError),
}

impl LagError {
    /// Skip, retry or stop: the answer of the log or the store.
    pub fn disposition(&self) -> Disposition {
        match self {
            LagError::Log(e) => e.disposition(),
            LagError::Store(e) => e.disposition(),
        }
    }
}

/// The lag of the partitions in `stores`: log ends against the positions
/// committed with the state.
pub fn lag(
    logs: &dyn Log,
    stores: &[(Partition, Arc<Store>)],
) -> Result<Vec<PartitionLag>, LagError> {
    let mut out = Vec::with_capacity(stores.len());
    for (p, store) in stores {
        let p = *p;
        out.push(PartitionLag {
            partition: p,
            end: Positions {
                events: logs.end_offset(Topic::Events, p)?,
                effects: logs.end_offset(Topic::Effects, p)?,
            },
            at: store.positions()?,
        });
    }
    Ok(out)
}
