//! How a task takes its partition over: the owner's epoch, what previous
//! owners already emitted, and the first settings a fresh state starts with.

use super::TaskError;
use crate::core::keys;
use crate::core::kv::{Cf, Kv};
use crate::core::position::Positions;
use crate::core::Epoch;
use crate::state::{meta, Store};

/// How a task takes its partition over (see [`PartitionTask::open_after`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Takeover {
    /// This owner's epoch, stamped on every `effects` record it sends:
    /// receivers apply no record of an older owner of this partition once
    /// they have applied one of this owner's (see [`crate::core::fence`]).
    pub epoch: Epoch,
    /// Where every previous owner's outputs are known to be acknowledged
    /// (in Kafka mode, the group's committed positions): below them the
    /// task applies records quietly, emitting nothing. `None`: nowhere.
    pub emitted: Option<Positions>,
    /// Whether to re-ship the store's unshipped outbox: only when no other
    /// owner has had the partition since this store last did (its records
    /// answered inputs another owner has answered too).
    pub reship: bool,
}

impl Takeover {
    /// The owner of a store nobody else processed since: it re-ships its
    /// outbox and replays nothing quietly.
    pub fn resume(epoch: Epoch) -> Takeover {
        Takeover {
            epoch,
            emitted: None,
            reship: true,
        }
    }
}

/// Puts `threshold` in force in a partition state that has applied
/// nothing yet (no positions, no outbox, no threshold), before its first
/// input: promotions are then decided under it however far behind its
/// first owner starts, where a threshold asked for through the `effects`
/// log lands after a share of the backlog that depends on timing.
/// `true` when it wrote it; a state that has applied anything is left as it
/// is (its log decides its threshold).
pub fn start_with_threshold(store: &Store, threshold: Option<u64>) -> Result<bool, TaskError> {
    let Some(threshold) = threshold.filter(|&t| t > 0) else {
        return Ok(false);
    };
    let fresh = store.positions()? == Positions::default()
        && meta::applied(store)?.is_none()
        && store.meta_u64(meta::NEXT_SEQ)? == 0
        && store.get(Cf::Meta, keys::PULL_THRESHOLD)?.is_none();
    if fresh {
        store.commit(&Default::default(), |b| {
            b.put(Cf::Meta, keys::PULL_THRESHOLD, &threshold.to_be_bytes())
        })?;
    }
    Ok(fresh)
}
