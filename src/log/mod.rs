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

pub use embedded::{LogError, NewRecord, PartitionReader, PartitionWriter, Record};

use crate::topics::{TopicSpec, Topics};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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
        end: Option<u64>,
    ) -> Result<Vec<Record>, LogError>;
    /// The offset of the next record [`Source::read`] returns.
    fn position(&self) -> u64;
}

/// Where one task's outgoing records go: appended in order per destination
/// partition; durable once [`Sink::flush`] returns.
pub trait Sink: Send {
    /// Appends `records` to `topic[partition]` (or queues them, on an engine
    /// that acknowledges asynchronously).
    fn append(
        &mut self,
        topic: Topic,
        partition: u32,
        records: &[NewRecord<'_>],
    ) -> Result<(), LogError>;
    /// Returns once everything appended is durable (fsynced, or
    /// acknowledged by every in-sync replica).
    fn flush(&mut self) -> Result<(), LogError>;
}

/// A log engine: the embedded log of a data directory, or Kafka.
pub trait Log: Send + Sync {
    /// A reader of `topic[partition]` from offset `from`.
    fn source(&self, topic: Topic, partition: u32, from: u64) -> Result<Box<dyn Source>, LogError>;
    /// A sink for one task's outgoing records; `sync` makes every append
    /// durable before [`Sink::flush`] returns (engines that always
    /// acknowledge durably ignore it).
    fn sink(self: Arc<Self>, sync: bool) -> Result<Box<dyn Sink>, LogError>;
    /// The offset the next record of `topic[partition]` will get.
    fn end_offset(&self, topic: Topic, partition: u32) -> Result<u64, LogError>;
    /// Partition count of `topic`.
    fn partitions(&self, topic: Topic) -> u32;
}

impl Source for PartitionReader {
    fn read(
        &mut self,
        max_records: usize,
        max_bytes: usize,
        end: Option<u64>,
    ) -> Result<Vec<Record>, LogError> {
        // Embedded offsets are contiguous: `end - position` records at most.
        let max = end.map_or(max_records, |e| {
            max_records.min(e.saturating_sub(self.position()) as usize)
        });
        if max == 0 {
            return Ok(Vec::new());
        }
        PartitionReader::read(self, max, max_bytes)
    }

    fn position(&self) -> u64 {
        PartitionReader::position(self)
    }
}

/// The embedded log's sink: appends go straight to the partition files.
struct EmbeddedSink {
    logs: Arc<Logs>,
    sync: bool,
}

impl Sink for EmbeddedSink {
    fn append(
        &mut self,
        topic: Topic,
        partition: u32,
        records: &[NewRecord<'_>],
    ) -> Result<(), LogError> {
        match topic {
            // Forwarded events: `produce` may hold the partition's writer.
            Topic::Events => self.logs.append_beside_writer(topic, partition, records)?,
            _ => self.logs.append(topic, partition, records, self.sync)?,
        };
        Ok(())
    }

    fn flush(&mut self) -> Result<(), LogError> {
        Ok(())
    }
}

impl Log for Logs {
    fn source(&self, topic: Topic, partition: u32, from: u64) -> Result<Box<dyn Source>, LogError> {
        Ok(Box::new(self.reader(topic, partition, from)?))
    }

    fn sink(self: Arc<Self>, sync: bool) -> Result<Box<dyn Sink>, LogError> {
        Ok(Box::new(EmbeddedSink { logs: self, sync }))
    }

    fn end_offset(&self, topic: Topic, partition: u32) -> Result<u64, LogError> {
        Logs::end_offset(self, topic, partition)
    }

    fn partitions(&self, topic: Topic) -> u32 {
        Logs::partitions(self, topic)
    }
}

/// A partition writer shared by the tasks of a process.
type SharedWriter = Arc<Mutex<PartitionWriter>>;

/// The logs of one data directory.
pub struct Logs {
    root: PathBuf,
    partitions: u32,
    topics: Topics,
    writers: Mutex<HashMap<(Topic, u32), SharedWriter>>,
}

impl Logs {
    /// The logs under `root` of a directory with `partitions` partitions.
    pub fn new(root: &Path, partitions: u32, topics: Topics) -> Logs {
        Logs {
            root: root.to_path_buf(),
            partitions,
            topics,
            writers: Mutex::new(HashMap::new()),
        }
    }

    /// The spec of `topic`.
    pub fn spec(&self, topic: Topic) -> &TopicSpec {
        match topic {
            Topic::Events => &self.topics.events,
            Topic::Effects => &self.topics.effects,
            Topic::DeadLetter => &self.topics.dead_letter,
        }
    }

    /// Partition count of `topic`.
    pub fn partitions(&self, topic: Topic) -> u32 {
        self.spec(topic).partitions_in(self.partitions)
    }

    /// Directory of one partition.
    pub fn dir(&self, topic: Topic, partition: u32) -> PathBuf {
        self.root
            .join(&self.spec(topic).name)
            .join(format!("{partition:05}"))
    }

    fn writer(
        &self,
        topic: Topic,
        partition: u32,
    ) -> Result<Arc<Mutex<PartitionWriter>>, LogError> {
        let mut writers = self.writers.lock().expect("writer map poisoned");
        if let Some(w) = writers.get(&(topic, partition)) {
            return Ok(w.clone());
        }
        let w = PartitionWriter::open(&self.dir(topic, partition), self.spec(topic).segment_bytes)?;
        let w = Arc::new(Mutex::new(w));
        writers.insert((topic, partition), w.clone());
        Ok(w)
    }

    /// Appends records to one partition; returns the first offset. With
    /// `sync`, the records are on disk when this returns.
    ///
    /// `events` and `effects` partitions keep their writer (and its lock) for
    /// the life of this `Logs`. The low-volume `dead-letter` log is shared by
    /// `produce` and the processor, so its writer is opened per append,
    /// waiting for the other process's append to finish.
    pub fn append(
        &self,
        topic: Topic,
        partition: u32,
        records: &[NewRecord<'_>],
        sync: bool,
    ) -> Result<u64, LogError> {
        assert!(
            partition < self.partitions(topic),
            "{topic:?} has no partition {partition}"
        );
        if topic == Topic::DeadLetter {
            let mut w = self.open_shared(topic, partition)?;
            let first = w.append(records)?;
            w.sync()?;
            return Ok(first);
        }
        let w = self.writer(topic, partition)?;
        let mut w = w.lock().expect("writer poisoned");
        let first = w.append(records)?;
        if sync {
            w.sync()?;
        }
        Ok(first)
    }

    fn open_shared(&self, topic: Topic, partition: u32) -> Result<PartitionWriter, LogError> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            match PartitionWriter::open(&self.dir(topic, partition), self.spec(topic).segment_bytes)
            {
                Err(LogError::Locked { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                other => return other,
            }
        }
    }

    /// Appends to a partition another process may be writing (an `events`
    /// partition a `produce` holds): opens the writer for this append only,
    /// waiting as long as it takes for the other writer, and syncs.
    pub fn append_beside_writer(
        &self,
        topic: Topic,
        partition: u32,
        records: &[NewRecord<'_>],
    ) -> Result<u64, LogError> {
        let mut w = loop {
            match self.open_shared(topic, partition) {
                Err(LogError::Locked { path }) => tracing::warn!(
                    log = %path.display(),
                    "waiting for another writer of this log partition to finish"
                ),
                other => break other?,
            }
        };
        let first = w.append(records)?;
        w.sync()?;
        Ok(first)
    }

    /// fsyncs every partition this process has written.
    pub fn sync_all(&self) -> Result<(), LogError> {
        let writers: Vec<_> = self
            .writers
            .lock()
            .expect("writer map poisoned")
            .values()
            .cloned()
            .collect();
        for w in writers {
            w.lock().expect("writer poisoned").sync()?;
        }
        Ok(())
    }

    /// A reader of one partition from `from`.
    pub fn reader(
        &self,
        topic: Topic,
        partition: u32,
        from: u64,
    ) -> Result<PartitionReader, LogError> {
        PartitionReader::open(&self.dir(topic, partition), from)
    }

    /// The offset the next record of one partition will get.
    pub fn end_offset(&self, topic: Topic, partition: u32) -> Result<u64, LogError> {
        let held = self
            .writers
            .lock()
            .expect("writer map poisoned")
            .get(&(topic, partition))
            .cloned();
        match held {
            Some(w) => Ok(w.lock().expect("writer poisoned").next_offset()),
            None => embedded::end_offset(&self.dir(topic, partition)),
        }
    }
}
