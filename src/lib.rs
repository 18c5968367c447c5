//! feedlog: an event-sourced stream processor for social feeds.
//!
//! Upstream apps append events — `follow`, `unfollow`, `post`,
//! `delete_post`, `repost`, `seen`, blocks, mutes and repost filters (see
//! `docs/events.md`) — to a partitioned log. One owner per partition turns its part of the log
//! into materialized views in RocksDB — home inboxes, author outboxes,
//! counters, recent followers — and readers query them.
//!
//! # Embedding
//!
//! The items at this crate's root are the library's API: a data directory
//! ([`DataDir`]) and a [`Producer`] to write events into its embedded log; a
//! [`Processor`] (embedded log) or a [`Cluster`] member (Kafka) to turn the
//! log into views until a [`Shutdown`] is requested; a [`Reader`] for the
//! views, and the HTTP read API ([`Api`], [`serve`]). `tests/library.rs`
//! runs the whole loop through these items only:
//!
//! ```no_run
//! use feedlog::{DataDir, Processor, ProcessorConfig, Producer, Shutdown, UserId};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let data = DataDir::create_or_open("data".as_ref(), Some(4))?;
//! let mut producer = Producer::new(&data)?;
//! producer.json_lines(&b"{\"type\":\"follow\",\"follower\":2,\"followee\":1,\"ts\":1}\n"[..], "stdin")?;
//! producer.finish()?;
//! let processor = Processor::open(&data, ProcessorConfig::default())?;
//! processor.run(&Shutdown::new(), true)?; // until idle
//! let reader = feedlog::reader_of(&processor);
//! assert_eq!(reader.counters(UserId(1))?.followers, 1);
//! # Ok(()) }
//! ```
//!
//! The modules below the root are the binary's and the tests' way in; they
//! are hidden from the documentation and may change with any release.
//! `ARCHITECTURE.md` maps them: the pure core, the state, the log engines,
//! the partition tasks and their runners, the operations, the read API, the
//! ingest paths.
//!
//! # Guarantees
//!
//! **Every view is a function of the log.** After the processor has consumed
//! every event and every internal message, every read of every view equals
//! the oracle of docs/semantics.md ("The contract"), for any partition count, duplicate
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

#[doc(hidden)]
pub mod api;
#[doc(hidden)]
pub use feedlog_core as core;
#[doc(hidden)]
pub mod ingest;
#[doc(hidden)]
pub mod log;
#[doc(hidden)]
pub mod ops;
#[doc(hidden)]
pub mod state;
#[doc(hidden)]
pub mod task;

// Events and their ids.
pub use crate::core::event::{Event, PostId, Ts, UserId};
// Where the log and the views are: positions, versions, the views by name.
pub use crate::core::position::{Offset, Positions, Version};
pub use crate::core::view::View;
pub use crate::core::DEFAULT_INBOX_CAP;
// A data directory, and events into its embedded log.
pub use crate::ingest::produce::{ProduceError, ProduceSummary, Producer};
pub use crate::state::datadir::{DataDir, DataDirError};
// The processors: the embedded runner, a Kafka consumer-group member.
pub use crate::log::kafka::KafkaConfig;
pub use crate::task::embedded::{Processor, ProcessorConfig, ProcessorError};
pub use crate::task::kafka::{Cluster, ClusterConfig, ClusterError};
pub use crate::task::Shutdown;
// Reading the views: in process, and over HTTP.
pub use crate::api::http::{serve, Api, ApiConfig};
pub use crate::api::query::{
    Counters, FollowerItem, List, Page, PostItem, QueryError, Reader, Rewind,
};
pub use crate::ops::asof::{LogRewind, Retention};
pub use crate::ops::serve::{cluster_api, processor_api, reader_of};
// The errors the items above return.
pub use crate::log::LogError;
pub use crate::state::StoreError;
