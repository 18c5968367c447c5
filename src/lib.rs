//! feedlog: an event-sourced stream processor for social feeds.
//!
//! Upstream apps append `follow`, `unfollow`, `post` and `delete_post` events
//! to a partitioned log. One owner per partition turns its part of the log
//! into materialized views in RocksDB — home inboxes, author outboxes,
//! counters, recent followers — and readers query them.
//!
//! # Layout
//!
//! - [`event`]: the events and the id newtypes.
//! - [`codec`]: JSON and bincode, told apart by an explicit format marker.
//! - [`partition`]: which partition owns a user (Kafka-compatible murmur2).
//! - [`topics`]: the topic specs compiled in from `topics/`.
//! - [`log`]: the `Log` abstraction (`Source`, `Sink`) and its engines: the
//!   embedded, segmented, checksummed partition log, and Kafka (`log::kafka`).
//! - [`state`]: one RocksDB per partition; key layout in `state/README.md`.
//! - [`core`]: **pure** — given state and one message, what changes and what
//!   is sent. Property tests live here and in `tests/`.
//! - [`task`]: one partition's owner: read → decode → core → commit → ship.
//! - [`processor`]: runs every partition on its own thread (embedded log).
//! - [`cluster`]: Kafka mode — one processor of a consumer group: handover
//!   on rebalance (ownership epochs, quiet replay), `members`, `status`.
//! - [`query`]: the read side, from RocksDB snapshots.
//! - [`datadir`]: a data directory's identity, logs and stores.
//! - [`http`]: the read API (axum), in one process or across a cluster.
//! - [`import`], [`generate`], [`produce`]: data into the embedded log.
//! - [`metrics`]: Prometheus text.
//! - [`replay`]: rebuild a state from the log beside the live processor;
//!   digests of every view, to verify two states.
//!
//! # Guarantees
//!
//! **Every view is a function of the log.** After the processor has consumed
//! every event and every internal message, every read of every view equals
//! the oracle of the README ("Semantics"), for any partition count, duplicate
//! delivery, crashes at any point and rebuilds from scratch. How:
//!
//! - *One owner per user.* Partition `p` owns the users that hash to `p`, and
//!   only its task writes their state. All events of one actor are in one
//!   partition, in order.
//! - *Positions with state.* A task's input positions are written in the same
//!   RocksDB `WriteBatch` as the state they produced; on restart it resumes
//!   from them, never from a guess.
//! - *A transactional outbox.* Outgoing effects are committed in that same
//!   batch and shipped afterwards, so only committed work is ever sent; a
//!   crash can only re-send a suffix of it.
//! - *Version-based dedup.* Every edge change carries the position of the
//!   event that caused it; a message whose version is not newer than the
//!   stored one is a no-op, and counters move only on real transitions.
//!   A delivery is applied only if its target still follows the author
//!   through the same follow it was sent for.
//! - *A bounded inbox with a horizon.* The inbox caches the newest timeline
//!   entries; reads past its horizon are completed from the followees'
//!   outboxes, so a page equals the pull-model result whatever was trimmed.

pub mod cluster;
pub mod codec;
pub mod core;
pub mod datadir;
pub mod event;
pub mod fsutil;
pub mod generate;
pub mod handover;
pub mod http;
pub mod import;
pub mod log;
pub mod metrics;
pub mod partition;
pub mod processor;
pub mod produce;
pub mod query;
pub mod replay;
pub mod state;
pub mod swap;
pub mod task;
pub mod topics;

pub use event::{Event, PostId, Ts, UserId};
