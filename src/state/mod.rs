//! State: one RocksDB per partition ([`Store`]), the data directory that
//! holds the stores and the logs ([`datadir`]), the positions kept with the
//! state ([`meta`]), the replaceable set of a directory's stores
//! ([`StoreSet`]), checkpoints ([`checkpoint`]), the partition task's
//! cache of its hottest point reads ([`ReadCache`]), and what is kept beside
//! each store for readers: first timeline pages ([`PageCache`]) and the
//! newest rows of each reader's inbox ([`Heads`]).
//!
//! The on-disk layout is documented, with byte diagrams, in `state/README.md`
//! at the repository root; [`LAYOUT_VERSION`] names it. A store written with
//! another layout is refused, never misread. This is the only part that
//! names RocksDB.

pub mod cache;
pub mod checkpoint;
pub mod datadir;
pub mod fsutil;
pub mod heads;
pub mod meta;
mod options;
pub mod pages;
pub mod reads;
pub mod replies;
pub mod set;
mod store;

pub use cache::BlockCache;
pub use heads::Heads;
pub use meta::meta_u64;
pub use pages::PageCache;
pub use reads::ReadCache;
pub use set::{Partitions, StoreSet, Unavailable};
pub use store::{Batch, Kept, Snapshot, Store, StoreError, StoreOptions, LAYOUT_VERSION};

pub use crate::core::kv::{Cf, Kv, KvError, MemKv, Scan, Txn, Writes};
