//! Logs: partitioned, append-only topics, behind one [`Log`] trait with two
//! engines.
//!
//! [`embedded`] is a partition log on local disk with Kafka's offset
//! semantics. [`Logs`] gathers the partitions of the three topics of a data
//! directory, shares one writer per partition between the tasks of a process,
//! and hands out tailing readers. [`kafka`] is the same trait over Kafka.
//! A partition task reads its inputs through [`Source`]s and ships its
//! outbox through a [`Sink`], and does not know which engine it runs on.

pub mod embedded;
pub mod kafka;
pub mod topics;

pub use embedded::{Logs, PartitionReader, PartitionWriter, PARTITIONS_MARKER};

pub use crate::core::position::Offset;

use crate::core::codec::Marker;
use crate::core::Disposition;
use crate::core::Partition;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Milliseconds since the Unix epoch: the time new records (and
/// checkpoints, epochs) are stamped with.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The topics feedlog uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Topic {
    /// Input events.
    Events,
    /// Internal messages between partitions.
    Effects,
    /// Records that could not be processed.
    DeadLetter,
}

impl Topic {
    /// Byte used for this topic in stored positions and pending records.
    pub fn as_u8(self) -> u8 {
        match self {
            Topic::Events => 0,
            Topic::Effects => 1,
            Topic::DeadLetter => 2,
        }
    }

    /// Inverse of [`Topic::as_u8`].
    pub fn from_u8(b: u8) -> Option<Topic> {
        Some(match b {
            0 => Topic::Events,
            1 => Topic::Effects,
            2 => Topic::DeadLetter,
            _ => return None,
        })
    }
}

/// One input partition, read in offset order from a position.
pub trait Source: Send {
    /// Up to `max_records` records (and about `max_bytes` bytes), in offset
    /// order, none at or past `end` when given; empty when nothing new has
    /// arrived (or the position has reached `end`).
    fn read(
        &mut self,
        max_records: usize,
        max_bytes: usize,
        end: Option<Offset>,
    ) -> Result<Vec<Record>, LogError>;
    /// The offset of the next record [`Source::read`] returns.
    fn position(&self) -> Offset;
}

/// Where one task's outgoing records go: appended in order per destination
/// partition; durable once [`Sink::flush`] returns.
pub trait Sink: Send {
    /// Appends `records` to `topic[partition]` (or queues them, on an engine
    /// that acknowledges asynchronously).
    fn append(
        &mut self,
        topic: Topic,
        partition: Partition,
        records: &[NewRecord<'_>],
    ) -> Result<(), LogError>;
    /// Returns once everything appended is durable (fsynced, or
    /// acknowledged by every in-sync replica).
    fn flush(&mut self) -> Result<(), LogError>;
}

/// A log engine: the embedded log of a data directory, or Kafka.
pub trait Log: Send + Sync {
    /// A reader of `topic[partition]` from offset `from`.
    fn source(
        &self,
        topic: Topic,
        partition: Partition,
        from: Offset,
    ) -> Result<Box<dyn Source>, LogError>;
    /// A sink for one task's outgoing records; `sync` makes every append
    /// durable before [`Sink::flush`] returns (engines that always
    /// acknowledge durably ignore it).
    fn sink(self: Arc<Self>, sync: bool) -> Result<Box<dyn Sink>, LogError>;
    /// The offset the next record of `topic[partition]` will get.
    fn end_offset(&self, topic: Topic, partition: Partition) -> Result<Offset, LogError>;
    /// Partition count of `topic`.
    fn partitions(&self, topic: Topic) -> u32;
}

/// One record as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Position of the record in the partition (0 for the first record ever appended).
    pub offset: Offset,
    /// Producer-supplied timestamp, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// How key and value are encoded (its marker byte as stored).
    pub format: Marker,
    /// Record key (may be empty).
    pub key: Vec<u8>,
    /// Record value (may be empty).
    pub value: Vec<u8>,
}

/// A record to append (the log assigns the offset).
#[derive(Debug, Clone, Copy)]
pub struct NewRecord<'a> {
    /// Producer-supplied timestamp, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// How key and value are encoded (its marker byte as stored).
    pub format: Marker,
    /// Record key (may be empty).
    pub key: &'a [u8],
    /// Record value (may be empty).
    pub value: &'a [u8],
}

/// Errors of the partition log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An operating-system call on `path` failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file or directory being accessed.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A segment holds bytes that are not a valid record where one must be
    /// (not a torn tail: see the module docs).
    #[error(
        "corrupt log segment {path} at byte {position}: {reason} \
         (nothing was cut; `feedlog log check` reports every partition, \
         `feedlog log repair` cuts one explicitly)"
    )]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// Byte position of the bad record in that file.
        position: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A reader was asked to start at an offset the partition does not hold.
    #[error("offset {requested} is outside the log {path} (it holds offsets {start}..{end})")]
    OffsetOutOfRange {
        /// The partition directory.
        path: PathBuf,
        /// The offset asked for.
        requested: u64,
        /// The first offset held (base of the first segment).
        start: u64,
        /// The offset the next appended record will get.
        end: u64,
    },
    /// Another [`PartitionWriter`] (in this or another process) holds the directory.
    #[error("log {path} is locked by another writer")]
    Locked {
        /// The partition directory.
        path: PathBuf,
    },
    /// A record body (21 bytes of fixed fields + key + value) exceeds the limit.
    #[error("record too large: {size} bytes (max {max})")]
    TooLarge {
        /// The record's body size in bytes.
        size: usize,
        /// The largest allowed body size.
        max: usize,
    },
    /// A partition the log does not have.
    #[error("{topic} has no partition {partition} (it has {partitions})")]
    NoPartition {
        /// The topic's name.
        topic: String,
        /// The partition asked for.
        partition: Partition,
        /// How many it has.
        partitions: u32,
    },
    /// A writer panicked in an earlier append: what it left on disk is
    /// unknown to this process, which appends no more to it.
    #[error("the writer of {0} failed in an earlier append; restart to recover the log")]
    WriterLost(PathBuf),
    /// An append through a log opened only for reading (a rebuild).
    #[error("{0}: this log is open for reading only")]
    ReadOnly(String),
    /// A Kafka client call failed.
    #[error("kafka: {what}: {reason}{}", .code.map(|c| format!(" (librdkafka code {c})")).unwrap_or_default())]
    Kafka {
        /// What was being done (with the topic and partition).
        what: String,
        /// The client's error.
        reason: String,
        /// librdkafka's error code (`rd_kafka_resp_err_t`), when it gave one.
        code: Option<i32>,
        /// What kind of failure that code (or the call) makes it.
        kind: KafkaFailure,
    },
    /// A Kafka topic feedlog needs does not exist.
    #[error("kafka: topic {topic} does not exist (create the topics with `feedlog topics apply --kafka BROKERS`)")]
    NoTopic {
        /// The topic's Kafka name.
        topic: String,
    },
    /// A Kafka partition does not hold the position a reader needs (its
    /// retention deleted it): never skipped silently.
    #[error("kafka: {topic}[{partition}] no longer holds offset {offset} (retention?): {reason}")]
    KafkaOutOfRange {
        /// The topic.
        topic: String,
        /// The partition.
        partition: Partition,
        /// The position asked for.
        offset: u64,
        /// The client's error.
        reason: String,
    },
    /// A Kafka partition ends before the position a reader asked for: the
    /// position was never written there (a store of another topic or
    /// cluster, or records the brokers lost). Never waited on.
    #[error(
        "kafka: {topic}[{partition}] ends at offset {end}, so it never held offset {offset} \
         (a state of another topic or cluster, or records the brokers lost?)"
    )]
    KafkaPastEnd {
        /// The topic.
        topic: String,
        /// The partition.
        partition: Partition,
        /// The position asked for.
        offset: u64,
        /// The offset the partition's next record will get.
        end: u64,
    },
    /// Waiting for acknowledgements was interrupted by a shutdown; what was
    /// not acknowledged is re-shipped from the outbox on the next start.
    #[error("interrupted while waiting for the log to acknowledge")]
    Interrupted,
}

/// What kind of Kafka failure a [`LogError::Kafka`] is, decided where
/// librdkafka's code is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaFailure {
    /// The broker or the network: a timeout, a broker away, a rebalance, a
    /// full queue. It passes.
    Transient,
    /// The cluster's setup contradicts feedlog's: a missing topic, partition
    /// counts that differ, an authorization or a setting refused. An
    /// operator must act.
    Setup,
    /// librdkafka's fatal error: this client is out of the group for good.
    Fatal,
}

impl LogError {
    /// A Kafka failure without a librdkafka code.
    pub fn kafka(
        what: impl Into<String>,
        reason: impl Into<String>,
        kind: KafkaFailure,
    ) -> LogError {
        LogError::Kafka {
            what: what.into(),
            reason: reason.into(),
            code: None,
            kind,
        }
    }

    /// Skip, retry or stop: a full disk, a lock another process holds, a
    /// broker away pass; a corrupt segment, a position the log no longer
    /// holds, a setup that contradicts feedlog's do not; a record too large
    /// stays too large.
    pub fn disposition(&self) -> Disposition {
        match self {
            LogError::Io { source, .. } => Disposition::of_io(source.kind()),
            LogError::Locked { .. } | LogError::Interrupted => Disposition::Retry,
            LogError::TooLarge { .. } => Disposition::Skip,
            LogError::Kafka { kind, .. } => match kind {
                KafkaFailure::Transient => Disposition::Retry,
                KafkaFailure::Setup | KafkaFailure::Fatal => Disposition::Stop,
            },
            LogError::Corrupt { .. }
            | LogError::OffsetOutOfRange { .. }
            | LogError::NoPartition { .. }
            | LogError::WriterLost(_)
            | LogError::ReadOnly(_)
            | LogError::NoTopic { .. }
            | LogError::KafkaOutOfRange { .. }
            | LogError::KafkaPastEnd { .. } => Disposition::Stop,
        }
    }
}
