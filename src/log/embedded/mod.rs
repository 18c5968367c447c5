//! The embedded log: every partition of every topic of a data directory
//! in segmented, checksummed files on local disk, with Kafka's offset
//! semantics (`segment.rs` has the format and the rules for torn tails and
//! corruption). [`Logs`] gathers the partitions of the three topics of a
//! data directory, shares one writer per partition between the tasks of a
//! process, and hands out tailing readers.

mod framing;
mod reader;
mod repair;
mod segment;
mod writer;

#[cfg(test)]
mod framing_tests;
#[cfg(test)]
mod tailing_tests;
#[cfg(test)]
mod tests;

pub use framing::{Framing, BODY_FIXED, MAX_RECORD_BYTES};
pub use reader::{end_offset, PartitionReader};
pub use repair::{check, truncate_at, Damage, PartitionCheck, Truncated};
pub use writer::PartitionWriter;

use super::{Log, LogError, NewRecord, Record, Sink, Source, Topic};
use crate::core::position::Offset;
use crate::core::Partition;
use crate::log::topics::{TopicSpec, Topics};
use segment::io_err;
use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

impl Source for PartitionReader {
    fn read(
        &mut self,
        max_records: usize,
        max_bytes: usize,
        end: Option<Offset>,
    ) -> Result<Vec<Record>, LogError> {
        // Embedded offsets are contiguous: `end - position` records at most.
        let max = end.map_or(max_records, |e| {
            max_records.min(e.0.saturating_sub(PartitionReader::position(self)) as usize)
        });
        if max == 0 {
            return Ok(Vec::new());
        }
        PartitionReader::read(self, max, max_bytes)
    }

    fn position(&self) -> Offset {
        Offset(PartitionReader::position(self))
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
        partition: Partition,
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
    fn source(
        &self,
        topic: Topic,
        partition: Partition,
        from: Offset,
    ) -> Result<Box<dyn Source>, LogError> {
        Ok(Box::new(self.reader(topic, partition, from.0)?))
    }

    fn sink(self: Arc<Self>, sync: bool) -> Result<Box<dyn Sink>, LogError> {
        Ok(Box::new(EmbeddedSink { logs: self, sync }))
    }

    fn end_offset(&self, topic: Topic, partition: Partition) -> Result<Offset, LogError> {
        Logs::end_offset(self, topic, partition).map(Offset)
    }

    fn partitions(&self, topic: Topic) -> u32 {
        Logs::partitions(self, topic)
    }
}

/// In a topic's directory: the log was made with all its partitions at
/// once, so the partition directories say the count (holds the count).
/// Logs made before it have each partition's directory from its first
/// write, and say nothing about partitions never written.
pub const PARTITIONS_MARKER: &str = ".partitions";

/// A partition writer shared by the tasks of a process.
type SharedWriter = Arc<Mutex<PartitionWriter>>;

/// Tells apart the temporary directories one process makes.
static TEMP_DIRS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The logs of one data directory.
pub struct Logs {
    root: PathBuf,
    partitions: u32,
    topics: Topics,
    /// Writers that hold their partition's lock for the life of this `Logs`.
    writers: Mutex<HashMap<(Topic, Partition), SharedWriter>>,
    /// Writers of partitions other processes write too (the dead-letter log,
    /// forwarded events): each takes the lock per append.
    turns: Mutex<HashMap<(Topic, Partition), SharedWriter>>,
    /// How this directory's writers frame records (its layout's).
    framing: Framing,
}

/// How long a writer that takes turns waits for another process's append
/// before it reports the partition locked.
const TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

impl Logs {
    /// The logs under `root` of a directory with `partitions` partitions.
    pub fn new(root: &Path, partitions: u32, topics: Topics) -> Logs {
        Logs {
            root: root.to_path_buf(),
            partitions,
            topics,
            writers: Mutex::new(HashMap::new()),
            turns: Mutex::new(HashMap::new()),
            framing: Framing::Compact,
        }
    }

    /// Writers frame records as `framing` says (compact by default: a data
    /// directory of layout 1 keeps the fixed framing its version wrote).
    pub fn with_framing(mut self, framing: Framing) -> Logs {
        self.framing = framing;
        self
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
    pub fn dir(&self, topic: Topic, partition: Partition) -> PathBuf {
        self.root
            .join(&self.spec(topic).name)
            .join(format!("{partition:05}"))
    }

    fn writer(
        &self,
        topic: Topic,
        partition: Partition,
    ) -> Result<Arc<Mutex<PartitionWriter>>, LogError> {
        let mut writers = self.writers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(w) = writers.get(&(topic, partition)) {
            return Ok(w.clone());
        }
        self.create_partitions(topic, partition)?;
        let w = PartitionWriter::open(&self.dir(topic, partition), self.spec(topic).segment_bytes)?
            .with_framing(self.framing);
        let w = Arc::new(Mutex::new(w));
        writers.insert((topic, partition), w.clone());
        Ok(w)
    }

    /// Makes every partition directory of `topic` the first time one is
    /// needed, all in one rename: a log on disk holds every partition the
    /// directory counts, so a `feedlog.json` that counts more is noticed
    /// (see `state::datadir`). Partitions still missing from an existing
    /// topic directory are made one by one.
    fn create_partitions(&self, topic: Topic, partition: Partition) -> Result<(), LogError> {
        if self.dir(topic, partition).is_dir() {
            return Ok(());
        }
        let topic_dir = self.root.join(&self.spec(topic).name);
        if !topic_dir.exists() {
            fs::create_dir_all(&self.root).map_err(io_err(&self.root))?;
            // A name no other maker uses (processes in containers may share
            // a pid), made with `create_dir`, which fails rather than share.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let tmp = self.root.join(format!(
                ".{}.new-{}-{nanos}-{}",
                self.spec(topic).name,
                std::process::id(),
                TEMP_DIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            fs::create_dir(&tmp).map_err(io_err(&tmp))?;
            for p in Partition::all(self.partitions(topic)) {
                let dir = tmp.join(format!("{p:05}"));
                fs::create_dir_all(&dir).map_err(io_err(&dir))?;
            }
            let marker = tmp.join(PARTITIONS_MARKER);
            fs::write(&marker, format!("{}\n", self.partitions(topic))).map_err(io_err(&marker))?;
            let renamed = File::open(&tmp)
                .and_then(|d| d.sync_all())
                .and_then(|()| fs::rename(&tmp, &topic_dir));
            match renamed {
                Ok(()) => File::open(&self.root)
                    .and_then(|d| d.sync_all())
                    .map_err(io_err(&self.root))?,
                // Another process made the topic's directory first.
                Err(_) if topic_dir.is_dir() => {
                    let _ = fs::remove_dir_all(&tmp);
                }
                Err(e) => {
                    let _ = fs::remove_dir_all(&tmp);
                    return Err(io_err(&topic_dir)(e));
                }
            }
        }
        for p in Partition::all(self.partitions(topic)) {
            let dir = self.dir(topic, p);
            fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        }
        Ok(())
    }

    /// Locks a writer; one that panicked while locked is lost (see
    /// [`LogError::WriterLost`]), never used again.
    fn lock_writer<'w>(
        &self,
        w: &'w Mutex<PartitionWriter>,
        topic: Topic,
        partition: Partition,
    ) -> Result<MutexGuard<'w, PartitionWriter>, LogError> {
        w.lock()
            .map_err(|_| LogError::WriterLost(self.dir(topic, partition)))
    }

    /// Appends records to one partition; returns the first offset. With
    /// `sync`, the records are on disk when this returns.
    ///
    /// `events` and `effects` partitions keep their writer (and its lock) for
    /// the life of this `Logs`. The low-volume `dead-letter` log is shared by
    /// `produce` and the processor: its writer takes the lock per append
    /// (waiting for the other process's append to finish) and always syncs.
    pub fn append(
        &self,
        topic: Topic,
        partition: Partition,
        records: &[NewRecord<'_>],
        sync: bool,
    ) -> Result<u64, LogError> {
        self.check_partition(topic, partition)?;
        if topic == Topic::DeadLetter {
            return self.append_in_turn(topic, partition, records);
        }
        let w = self.writer(topic, partition)?;
        let mut w = self.lock_writer(&w, topic, partition)?;
        let first = w.append(records)?;
        if sync {
            w.sync()?;
        }
        Ok(first)
    }

    /// Appends and syncs through this process's turn-taking writer of one
    /// partition (opened on first use; see [`PartitionWriter::open_shared`]).
    fn append_in_turn(
        &self,
        topic: Topic,
        partition: Partition,
        records: &[NewRecord<'_>],
    ) -> Result<u64, LogError> {
        let w = self.turn_writer(topic, partition)?;
        let mut w = self.lock_writer(&w, topic, partition)?;
        w.append(records)
    }

    /// This process's turn-taking writer of one partition, opened (and its
    /// last segment checked) on first use.
    fn turn_writer(&self, topic: Topic, partition: Partition) -> Result<SharedWriter, LogError> {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(w) = turns.get(&(topic, partition)) {
            return Ok(w.clone());
        }
        self.create_partitions(topic, partition)?;
        let dir = self.dir(topic, partition);
        let segment_bytes = self.spec(topic).segment_bytes;
        let w = PartitionWriter::open_shared(&dir, segment_bytes, TURN_WAIT)?
            .with_framing(self.framing);
        let w = Arc::new(Mutex::new(w));
        turns.insert((topic, partition), w.clone());
        Ok(w)
    }

    /// [`LogError::NoPartition`] unless `topic` has `partition`.
    fn check_partition(&self, topic: Topic, partition: Partition) -> Result<(), LogError> {
        if partition.0 >= self.partitions(topic) {
            return Err(LogError::NoPartition {
                topic: format!("{topic:?}"),
                partition,
                partitions: self.partitions(topic),
            });
        }
        Ok(())
    }

    /// Opens the turn-taking writer of one partition of the dead-letter log
    /// now rather than at the first append: a damaged log is an error before
    /// the caller writes anything anywhere else.
    pub fn open_dead_letter(&self, partition: Partition) -> Result<(), LogError> {
        let topic = Topic::DeadLetter;
        self.check_partition(topic, partition)?;
        self.turn_writer(topic, partition).map(drop)
    }

    /// Appends to a partition another process may be writing (an `events`
    /// partition a `produce` holds), taking turns with it, waiting as long
    /// as it takes, and syncs.
    pub fn append_beside_writer(
        &self,
        topic: Topic,
        partition: Partition,
        records: &[NewRecord<'_>],
    ) -> Result<u64, LogError> {
        loop {
            match self.append_in_turn(topic, partition, records) {
                Err(LogError::Locked { path }) => tracing::warn!(
                    log = %path.display(),
                    "waiting for another writer of this log partition to finish"
                ),
                other => return other,
            }
        }
    }

    /// fsyncs every partition this process has written.
    pub fn sync_all(&self) -> Result<(), LogError> {
        let writers: Vec<_> = self
            .writers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(&(topic, p), w)| (topic, p, w.clone()))
            .collect();
        for (topic, p, w) in writers {
            self.lock_writer(&w, topic, p)?.sync()?;
        }
        Ok(())
    }

    /// A reader of one partition from `from`.
    pub fn reader(
        &self,
        topic: Topic,
        partition: Partition,
        from: u64,
    ) -> Result<PartitionReader, LogError> {
        PartitionReader::open(&self.dir(topic, partition), from)
    }

    /// The offset the next record of one partition will get.
    pub fn end_offset(&self, topic: Topic, partition: Partition) -> Result<u64, LogError> {
        let held = self
            .writers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(topic, partition))
            .cloned();
        match held {
            Some(w) => Ok(self.lock_writer(&w, topic, partition)?.next_offset()),
            None => end_offset(&self.dir(topic, partition)),
        }
    }
}
