//! The pure core: events and effects, what a message changes
//! ([`apply_event`], [`apply_effect`]), the key-value port the changes go
//! through ([`kv::Kv`], [`kv::Txn`], an in-memory [`kv::MemKv`]), the key
//! layout and typed views over it, the partitioner and the wire codec. No
//! I/O: nothing here touches a file, a socket, RocksDB or Kafka; the task
//! (`feedlog::task`) commits and ships what the core decides.
//!
//! It is a crate of its own, `feedlog-core` (`src/core/Cargo.toml`), whose
//! dependencies say so: serde and the codecs' libraries, nothing that does
//! I/O. The `feedlog` crate re-exports it as `feedlog::core`.

pub mod active;
pub mod apply;
pub mod codec;
pub mod disposition;
mod edge;
pub mod effect;
pub mod event;
pub mod explain;
mod fan_out;
pub mod fence;
pub mod filter;
mod filter_rules;
mod follow;
pub mod gauges;
pub mod generation;
mod inbox;
pub mod keys;
pub mod kv;
pub mod like;
pub mod marker;
pub mod metrics;
pub mod notification;
pub mod partition;
pub mod position;
mod post;
pub mod pulled;
pub mod reply;
pub mod repost;
pub mod requests;
pub mod timeline;
pub mod view;
pub mod views;

pub use apply::{apply_effect, apply_event};
pub use disposition::Disposition;
pub use effect::{
    Applied, Ctx, Effect, Out, Wake, DEFAULT_INACTIVE_AFTER_MS, DEFAULT_INBOX_CAP,
    DEFAULT_PULL_THRESHOLD,
};
pub use fence::{Epoch, Stamp};
pub use generation::Generation;
pub use partition::Partition;
pub use position::{Offset, Positions, Version};
pub use view::View;

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;
