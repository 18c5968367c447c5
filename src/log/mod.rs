//! Logs: the topics of one data directory, partitioned and append-only.
//!
//! [`embedded`] is a partition log on local disk with Kafka's offset
//! semantics. [`Logs`] gathers the partitions of the three topics of a data
//! directory, shares one writer per partition between the tasks of a process,
//! and hands out tailing readers.

pub mod embedded;

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
