//! Append-only, segmented, checksummed log of one topic partition on local disk, with
//! Kafka-like dense offsets (the n-th record ever appended has offset n).
//!
//! A partition is one directory:
//!
//! ```text
//! partition-dir/
//!   .lock                      flock held by the single PartitionWriter
//!   00000000000000000000.log   segment whose first record has offset 0
//!   00000000000000001234.log   next segment, first offset 1234: `{base_offset:020}.log`
//! ```
//!
//! A segment has no file header: it is records back to back, all integers big-endian.
//!
//! ```text
//! byte 0        4        8             16            24     25          29        29+K
//!      +--------+--------+-------------+-------------+------+-----------+---------+--------+
//!      |body_len| crc32  |   offset    | timestamp_ms|format| key_len K |   key   | value  |
//!      |  u32   |  u32   |    u64      |     u64     |  u8  |    u32    | K bytes | rest   |
//!      +--------+--------+-------------+-------------+------+-----------+---------+--------+
//!                        |<------------ body: body_len bytes, crc32 covers all of it ------>|
//! ```
//!
//! The offset in each body must be the previous record's + 1 (the segment's base for its
//! first record). The writer appends a batch with one write and, before a batch, rolls to a
//! new segment once the active one holds `segment_bytes`; the closed segment is fsynced at
//! the roll, so only the last segment can end in a torn record, which
//! [`PartitionWriter::open`] cuts off. Readers treat an incomplete record, or a checksum
//! failure on the very last bytes of a file, as a write still in progress.

use std::fs::{self, File, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Bytes of `body_len` + `crc32` before each body.
const HEADER: usize = 8;
/// Bytes of offset + timestamp_ms + format + key_len at the start of each body.
const BODY_FIXED: usize = 21;
/// The largest body (fixed fields + key + value) a record may have.
const MAX_RECORD_BYTES: usize = 16 << 20;
/// How much a reader asks the OS for at a time.
const READ_CHUNK: usize = 64 << 10;

/// One record as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Position of the record in the partition (0 for the first record ever appended).
    pub offset: u64,
    /// Producer-supplied timestamp, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// Caller-defined tag describing how key and value are encoded.
    pub format: u8,
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
    /// Caller-defined tag describing how key and value are encoded.
    pub format: u8,
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
    /// A segment holds bytes that are not a valid record where one must be.
    #[error("corrupt log {path} at byte {position}: {reason}")]
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
    /// A record body (21 bytes of fixed fields + key + value) exceeds 16 MiB.
    #[error("record too large: {size} bytes (max {max})")]
    TooLarge {
        /// The record's body size in bytes.
        size: usize,
        /// The largest allowed body size.
        max: usize,
    },
    /// An append through a log opened only for reading (a rebuild).
    #[error("{0}: this log is open for reading only")]
    ReadOnly(String),
    /// A Kafka client call failed.
    #[error("kafka: {what}: {reason}")]
    Kafka {
        /// What was being done (with the topic and partition).
        what: String,
        /// The client's error.
        reason: String,
    },
    /// A Kafka partition does not hold the position a reader needs (its
    /// retention deleted it): never skipped silently.
    #[error("kafka: {topic}[{partition}] no longer holds offset {offset} (retention?): {reason}")]
    KafkaOutOfRange {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The position asked for.
        offset: u64,
        /// The client's error.
        reason: String,
    },
    /// Waiting for acknowledgements was interrupted by a shutdown; what was
    /// not acknowledged is re-shipped from the outbox on the next start.
    #[error("interrupted while waiting for the log to acknowledge")]
    Interrupted,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

/// Base offsets of the segments in `dir`, ascending; none if `dir` does not exist.
fn list_segments(dir: &Path) -> Result<Vec<u64>, LogError> {
    let entries = match fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        other => other.map_err(io_err(dir))?,
    };
    let mut bases = Vec::new();
    for entry in entries {
        let name = entry.map_err(io_err(dir))?.file_name();
        let stem = name.to_str().and_then(|n| n.strip_suffix(".log"));
        let digits = stem.filter(|s| s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()));
        bases.extend(digits.and_then(|s| s.parse::<u64>().ok()));
    }
    bases.sort_unstable();
    Ok(bases)
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

fn be_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

fn encode(buf: &mut Vec<u8>, offset: u64, r: &NewRecord<'_>) {
    let start = buf.len();
    let body_len = BODY_FIXED + r.key.len() + r.value.len();
    buf.extend_from_slice(&(body_len as u32).to_be_bytes());
    buf.extend_from_slice(&[0; 4]); // checksum, filled in below
    buf.extend_from_slice(&offset.to_be_bytes());
    buf.extend_from_slice(&r.timestamp_ms.to_be_bytes());
    buf.push(r.format);
    buf.extend_from_slice(&(r.key.len() as u32).to_be_bytes());
    buf.extend_from_slice(r.key);
    buf.extend_from_slice(r.value);
    let crc = crc32fast::hash(&buf[start + HEADER..]);
    buf[start + 4..start + HEADER].copy_from_slice(&crc.to_be_bytes());
}

/// What a [`SegmentCursor`] found at its position.
enum Step {
    /// A valid record and its encoded length (not consumed yet: call `advance`).
    Record(Record, usize),
    /// No record here (yet).
    Stop(Stop),
}

enum Stop {
    /// The file ends exactly here.
    End,
    /// The file ends inside a record, or its last record fails its checksum: maybe a write
    /// still in progress (or a crash's torn write).
    Torn(String),
    /// An invalid record that is followed by more bytes.
    Corrupt(String),
}

fn stop(stop: fn(String) -> Stop, reason: impl Into<String>) -> Result<Step, LogError> {
    Ok(Step::Stop(stop(reason.into())))
}

/// Buffered sequential reader of one segment file that notices the file growing: the
/// `File`'s own position is always at the end of `buf`, so reading at EOF and again later
/// simply picks up what was appended meanwhile.
struct SegmentCursor {
    path: PathBuf,
    base: u64,
    file: File,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    pos: usize,
    /// Byte position in the file of `buf[pos]`.
    file_pos: u64,
}

impl SegmentCursor {
    fn open(dir: &Path, base: u64) -> Result<Option<Self>, LogError> {
        let path = segment_path(dir, base);
        match File::open(&path) {
            Ok(file) => Ok(Some(Self {
                path,
                base,
                file,
                buf: Vec::new(),
                pos: 0,
                file_pos: 0,
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    fn open_existing(dir: &Path, base: u64) -> Result<Self, LogError> {
        let missing = || io_err(&segment_path(dir, base))(io::ErrorKind::NotFound.into());
        Self::open(dir, base)?.ok_or_else(missing)
    }

    fn corrupt(&self, reason: String) -> LogError {
        LogError::Corrupt {
            path: self.path.clone(),
            position: self.file_pos,
            reason,
        }
    }

    /// Reads until `n` unconsumed bytes are buffered; false if the file ends before that.
    fn fill_to(&mut self, n: usize) -> Result<bool, LogError> {
        while self.buf.len() - self.pos < n {
            self.buf.drain(..self.pos);
            self.pos = 0;
            let have = self.buf.len();
            self.buf.resize(have + (n - have).max(READ_CHUNK), 0);
            let got = loop {
                match self.file.read(&mut self.buf[have..]) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    got => break got,
                }
            };
            self.buf.truncate(have + got.as_ref().map_or(0, |g| *g));
            if got.map_err(io_err(&self.path))? == 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn advance(&mut self, len: usize) {
        self.pos += len;
        self.file_pos += len as u64;
    }

    /// Drops the buffer so that the bytes at the position are read from the file again.
    fn rewind(&mut self) -> Result<(), LogError> {
        self.buf.clear();
        self.pos = 0;
        self.file
            .seek(SeekFrom::Start(self.file_pos))
            .map_err(io_err(&self.path))?;
        Ok(())
    }

    /// Decodes the record at the position, which must have offset `expected`. An invalid
    /// record in the middle of the file is re-read from disk once before it is reported, so
    /// stale buffered bytes (say, of a tail a restarted writer cut and rewrote) are not
    /// mistaken for corruption.
    fn next(&mut self, expected: u64) -> Result<Step, LogError> {
        match self.decode(expected)? {
            Step::Stop(Stop::Corrupt(_)) => {
                self.rewind()?;
                self.decode(expected)
            }
            step => Ok(step),
        }
    }

    fn decode(&mut self, expected: u64) -> Result<Step, LogError> {
        if !self.fill_to(HEADER)? {
            if self.buf.len() == self.pos {
                return Ok(Step::Stop(Stop::End));
            }
            return stop(Stop::Torn, "partial record header");
        }
        let body_len = be_u32(&self.buf[self.pos..]) as usize;
        let crc = be_u32(&self.buf[self.pos + 4..]);
        if !(BODY_FIXED..=MAX_RECORD_BYTES).contains(&body_len) {
            return stop(Stop::Corrupt, format!("bad record length {body_len}"));
        }
        let total = HEADER + body_len;
        if !self.fill_to(total)? {
            return stop(Stop::Torn, "partial record");
        }
        let body = &self.buf[self.pos + HEADER..self.pos + total];
        if crc32fast::hash(body) != crc {
            let len = self.file.metadata().map_err(io_err(&self.path))?.len();
            let at_tail = self.file_pos + total as u64 >= len;
            let kind = if at_tail { Stop::Torn } else { Stop::Corrupt };
            return stop(kind, "bad checksum");
        }
        let offset = be_u64(body);
        let key_len = be_u32(&body[17..]) as usize;
        if offset != expected {
            let reason = format!("record has offset {offset}, expected {expected}");
            return stop(Stop::Corrupt, reason);
        }
        if key_len > body_len - BODY_FIXED {
            return stop(Stop::Corrupt, format!("key length {key_len} too big"));
        }
        let (key, value) = body[BODY_FIXED..].split_at(key_len);
        let (timestamp_ms, format) = (be_u64(&body[8..]), body[16]);
        let (key, value) = (key.to_vec(), value.to_vec());
        Ok(Step::Record(
            Record {
                offset,
                timestamp_ms,
                format,
                key,
                value,
            },
            total,
        ))
    }

    /// Consumes records from offset `at` on until offset `target` is reached (→ `None`)
    /// or no valid record follows; returns the offset reached.
    fn skip_until(&mut self, mut at: u64, target: u64) -> Result<(u64, Option<Stop>), LogError> {
        while at < target {
            match self.next(at)? {
                Step::Record(_, len) => {
                    self.advance(len);
                    at += 1;
                }
                Step::Stop(stop) => return Ok((at, Some(stop))),
            }
        }
        Ok((at, None))
    }
}

/// The single writer of one partition directory.
pub struct PartitionWriter {
    dir: PathBuf,
    segment_bytes: u64,
    /// Holds the exclusive lock on `dir/.lock`; closing it on drop releases the lock.
    _lock: File,
    active: File,
    active_path: PathBuf,
    active_len: u64,
    next_offset: u64,
    /// A segment file was created since the directory was last fsynced.
    dir_dirty: bool,
    /// A failed write could not be rolled back: the segment may end in garbage.
    poisoned: bool,
}

impl PartitionWriter {
    /// Opens (creating the directory if missing) for appending. Takes an exclusive lock on
    /// `dir/.lock` with `File::try_lock` (→ [`LogError::Locked`] if held; released on drop).
    /// Validates the last segment record by record and truncates it from the first invalid
    /// record (partial, bad checksum, wrong offset) to its end, logging the bytes cut with
    /// `tracing::warn!`. Earlier segments are not rescanned.
    pub fn open(dir: &Path, segment_bytes: u64) -> Result<Self, LogError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let lock_path = dir.join(".lock");
        let lock = File::options().create(true).append(true).open(&lock_path);
        let lock = lock.map_err(io_err(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(LogError::Locked { path: dir.into() }),
            Err(TryLockError::Error(e)) => return Err(io_err(&lock_path)(e)),
        }
        let last = list_segments(dir)?.last().copied();
        let base = last.unwrap_or(0);
        let next_offset = last.map(|b| recover(dir, b)).transpose()?.unwrap_or(0);
        let active_path = segment_path(dir, base);
        let active = File::options().create(true).append(true).open(&active_path);
        let active = active.map_err(io_err(&active_path))?;
        let active_len = active.metadata().map_err(io_err(&active_path))?.len();
        Ok(Self {
            dir: dir.to_path_buf(),
            segment_bytes,
            _lock: lock,
            active,
            active_path,
            active_len,
            next_offset,
            dir_dirty: last.is_none(),
            poisoned: false,
        })
    }

    /// Appends records in order with one write, returning the offset of the first (the
    /// next offset if `records` is empty); does not fsync. Rolls to a new segment first if
    /// the active one has reached `segment_bytes` (a batch is never split, so it may
    /// overflow a segment). A record body over 16 MiB → [`LogError::TooLarge`], and nothing
    /// of the batch is written.
    pub fn append(&mut self, records: &[NewRecord<'_>]) -> Result<u64, LogError> {
        let first = self.next_offset;
        if records.is_empty() {
            return Ok(first);
        }
        if self.poisoned {
            let source = io::Error::other("an earlier failed write could not be undone; reopen");
            return Err(LogError::Io {
                path: self.active_path.clone(),
                source,
            });
        }
        let mut total = 0;
        for r in records {
            let size = BODY_FIXED + r.key.len() + r.value.len();
            if size > MAX_RECORD_BYTES {
                return Err(LogError::TooLarge {
                    size,
                    max: MAX_RECORD_BYTES,
                });
            }
            total += HEADER + size;
        }
        let mut buf = Vec::with_capacity(total);
        for (i, r) in records.iter().enumerate() {
            encode(&mut buf, first + i as u64, r);
        }
        if self.active_len > 0 && self.active_len >= self.segment_bytes {
            self.roll()?;
        }
        if let Err(e) = self.active.write_all(&buf) {
            self.poisoned = self.active.set_len(self.active_len).is_err();
            return Err(io_err(&self.active_path)(e));
        }
        self.active_len += buf.len() as u64;
        self.next_offset += records.len() as u64;
        Ok(first)
    }

    /// Closes the active segment (fsyncing it, so that only the last segment can be torn)
    /// and starts a new one whose base is the next offset.
    fn roll(&mut self) -> Result<(), LogError> {
        self.active.sync_data().map_err(io_err(&self.active_path))?;
        let path = segment_path(&self.dir, self.next_offset);
        let file = File::options().append(true).create_new(true).open(&path);
        self.active = file.map_err(io_err(&path))?;
        self.active_path = path;
        self.active_len = 0;
        self.dir_dirty = true;
        Ok(())
    }

    /// fsyncs the active segment, and the directory if a segment was created since the last
    /// sync, so that everything appended so far survives a crash.
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.active.sync_data().map_err(io_err(&self.active_path))?;
        if self.dir_dirty {
            let dir = File::open(&self.dir).and_then(|d| d.sync_all());
            dir.map_err(io_err(&self.dir))?;
            self.dir_dirty = false;
        }
        Ok(())
    }

    /// The offset the next appended record will get (= number of records ever appended).
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Scans the segment `base` of `dir`, cuts it from its first invalid record, and returns
/// the offset after its last valid record.
fn recover(dir: &Path, base: u64) -> Result<u64, LogError> {
    let mut cursor = SegmentCursor::open_existing(dir, base)?;
    let (next, reason) = match cursor.skip_until(base, u64::MAX)? {
        (next, Some(Stop::Torn(reason) | Stop::Corrupt(reason))) => (next, reason),
        (next, _) => return Ok(next),
    };
    let (path, cut_at) = (&cursor.path, cursor.file_pos);
    let file = File::options()
        .write(true)
        .open(path)
        .map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    file.set_len(cut_at)
        .and_then(|()| file.sync_all())
        .map_err(io_err(path))?;
    tracing::warn!(path = %path.display(), at = cut_at, cut_bytes = len - cut_at, %reason,
        "truncated the torn tail of a partition log");
    Ok(next)
}

/// A reader that tails one partition directory from an offset; it may run while a writer
/// (in this or another process) appends.
pub struct PartitionReader {
    dir: PathBuf,
    position: u64,
    /// The segment being read; `None` until the segment whose base is `position` exists.
    cursor: Option<SegmentCursor>,
}

impl PartitionReader {
    /// Positions the reader so the next record returned has offset `from` (`from` == end is
    /// fine: nothing to read yet). `from` beyond the end or before the first segment's base
    /// → [`LogError::OffsetOutOfRange`]. An empty or missing directory holds offsets 0..0;
    /// nothing is created, and reading returns nothing until a segment appears.
    pub fn open(dir: &Path, from: u64) -> Result<Self, LogError> {
        let out_of_range = |start, end| LogError::OffsetOutOfRange {
            path: dir.to_path_buf(),
            requested: from,
            start,
            end,
        };
        let bases = list_segments(dir)?;
        let Some(&first) = bases.first() else {
            return match from {
                0 => Ok(Self {
                    dir: dir.to_path_buf(),
                    position: 0,
                    cursor: None,
                }),
                _ => Err(out_of_range(0, 0)),
            };
        };
        if from < first {
            return Err(out_of_range(first, end_offset(dir)?));
        }
        let index = bases.partition_point(|&b| b <= from) - 1;
        let mut cursor = SegmentCursor::open_existing(dir, bases[index])?;
        match cursor.skip_until(bases[index], from)? {
            (_, None) => Ok(Self {
                dir: dir.to_path_buf(),
                position: from,
                cursor: Some(cursor),
            }),
            (_, Some(Stop::Corrupt(reason))) => Err(cursor.corrupt(reason)),
            (end, _) if index + 1 == bases.len() => Err(out_of_range(first, end)),
            (end, _) => Err(cursor.corrupt(format!(
                "segment ends at offset {end} but the next one starts at {}",
                bases[index + 1]
            ))),
        }
    }

    /// Returns the records available now, in offset order: at most `max_records`, and no
    /// more keys + values than `max_bytes` in total, except that the first available
    /// record is always returned. Empty = nothing new yet. An error is returned only when
    /// no record precedes it in this call (the next call reports it).
    pub fn read(&mut self, max_records: usize, max_bytes: usize) -> Result<Vec<Record>, LogError> {
        let mut out = Vec::new();
        match self.read_into(&mut out, max_records, max_bytes) {
            Err(e) if out.is_empty() => Err(e),
            _ => Ok(out),
        }
    }

    fn read_into(
        &mut self,
        out: &mut Vec<Record>,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<(), LogError> {
        let mut bytes = 0;
        while out.len() < max_records {
            let Some(cursor) = self.cursor.as_mut() else {
                self.cursor = SegmentCursor::open(&self.dir, self.position)?;
                if self.cursor.is_none() {
                    return Ok(());
                }
                continue;
            };
            let stop = match cursor.next(self.position)? {
                Step::Record(record, len) => {
                    let size = record.key.len() + record.value.len();
                    if !out.is_empty() && bytes + size > max_bytes {
                        return Ok(());
                    }
                    cursor.advance(len);
                    self.position += 1;
                    bytes += size;
                    out.push(record);
                    continue;
                }
                Step::Stop(stop) => stop,
            };
            match stop {
                Stop::Corrupt(reason) => return Err(cursor.corrupt(reason)),
                // Maybe a write in progress: read these bytes afresh next time.
                Stop::Torn(_) => cursor.rewind()?,
                Stop::End => {}
            }
            let next = segment_path(&self.dir, self.position);
            if cursor.base == self.position || !next.try_exists().map_err(io_err(&next))? {
                return Ok(());
            }
            // The writer rolled; whatever it wrote here before that is on disk by now.
            match cursor.next(self.position)? {
                Step::Record(..) => {}
                Step::Stop(Stop::End) => self.cursor = None,
                Step::Stop(_) => {
                    let reason = "segment ends in an invalid record but a later segment exists";
                    return Err(cursor.corrupt(reason.into()));
                }
            }
        }
        Ok(())
    }

    /// Offset of the next record `read` will return.
    pub fn position(&self) -> u64 {
        self.position
    }
}

/// The offset the next appended record would get, read from disk (scans the last segment;
/// a torn or partial record at its end is ignored, an invalid record followed by more bytes
/// is [`LogError::Corrupt`]). 0 for an empty or missing directory.
pub fn end_offset(dir: &Path) -> Result<u64, LogError> {
    let Some(&base) = list_segments(dir)?.last() else {
        return Ok(0);
    };
    let mut cursor = SegmentCursor::open_existing(dir, base)?;
    match cursor.skip_until(base, u64::MAX)? {
        (_, Some(Stop::Corrupt(reason))) => Err(cursor.corrupt(reason)),
        (end, _) => Ok(end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn rec(i: u64) -> Record {
        let (key, value) = (
            format!("k{i}").into_bytes(),
            vec![i as u8; (i * 7 % 90) as usize],
        );
        Record {
            offset: i,
            timestamp_ms: 1000 + i,
            format: (i % 3) as u8,
            key,
            value,
        }
    }

    fn expected(range: std::ops::Range<u64>) -> Vec<Record> {
        range.map(rec).collect()
    }

    fn new_record(r: &Record) -> NewRecord<'_> {
        let (key, value) = (&r.key[..], &r.value[..]);
        NewRecord {
            timestamp_ms: r.timestamp_ms,
            format: r.format,
            key,
            value,
        }
    }

    fn append_range(w: &mut PartitionWriter, range: std::ops::Range<u64>, batch: usize) {
        for chunk in expected(range.clone()).chunks(batch) {
            let batch: Vec<NewRecord> = chunk.iter().map(new_record).collect();
            assert_eq!(w.append(&batch).unwrap(), chunk[0].offset);
        }
        assert_eq!(w.next_offset(), range.end);
    }

    fn read_all(r: &mut PartitionReader) -> Vec<Record> {
        let mut out = Vec::new();
        loop {
            match r.read(usize::MAX, usize::MAX).unwrap() {
                got if got.is_empty() => return out,
                got => out.extend(got),
            }
        }
    }

    fn read_from(dir: &Path, from: u64) -> Vec<Record> {
        read_all(&mut PartitionReader::open(dir, from).unwrap())
    }

    /// `(start, end)` of the OffsetOutOfRange error of opening a reader at `from`.
    fn out_of_range(dir: &Path, from: u64) -> (u64, u64) {
        match PartitionReader::open(dir, from).err() {
            Some(LogError::OffsetOutOfRange { start, end, .. }) => (start, end),
            other => panic!("expected OffsetOutOfRange, got {other:?}"),
        }
    }

    #[test]
    fn round_trip_across_segments_and_reopen() {
        // Records round-trip through many small segments; a reopened writer continues the offsets.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut w = PartitionWriter::open(dir, 1024).unwrap();
        append_range(&mut w, 0..300, 5);
        w.sync().unwrap();
        assert!(list_segments(dir).unwrap().len() > 5);
        assert_eq!(end_offset(dir).unwrap(), 300);
        let mut r = PartitionReader::open(dir, 0).unwrap();
        assert_eq!(read_all(&mut r), expected(0..300));
        drop(w);
        let mut w = PartitionWriter::open(dir, 1024).unwrap();
        assert_eq!(w.next_offset(), 300);
        append_range(&mut w, 300..350, 7);
        assert_eq!(read_all(&mut r), expected(300..350));
        assert_eq!(read_from(dir, 0), expected(0..350));
    }

    #[test]
    fn reader_at_every_offset_and_out_of_range() {
        // A reader opened at any offset 0..=n returns exactly the suffix; other offsets are errors.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let n = 120;
        append_range(&mut PartitionWriter::open(dir, 512).unwrap(), 0..n, 3);
        for from in 0..=n {
            let mut r = PartitionReader::open(dir, from).unwrap();
            assert_eq!(read_all(&mut r), expected(from..n));
            assert_eq!(r.position(), n);
        }
        assert_eq!(out_of_range(dir, n + 1), (0, n));
        // Once the first segment is gone (retention), offsets before the second one are out of range.
        let second = list_segments(dir).unwrap()[1];
        fs::remove_file(segment_path(dir, 0)).unwrap();
        assert_eq!(out_of_range(dir, second - 1), (second, n));
        assert_eq!(read_from(dir, second), expected(second..n));
        // A missing directory holds 0..0 and is not created.
        let missing = dir.join("missing");
        assert_eq!(read_from(&missing, 0), []);
        assert_eq!(out_of_range(&missing, 1), (0, 0));
        assert!(!missing.exists());
    }

    #[test]
    fn torn_tail_is_ignored_by_readers_and_cut_by_the_writer() {
        // A partial record or bad checksum at the end is skipped by readers and cut on reopen.
        for flip_last_byte in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            append_range(&mut PartitionWriter::open(dir, 1024).unwrap(), 0..50, 4);
            let path = segment_path(dir, *list_segments(dir).unwrap().last().unwrap());
            let mut bytes = fs::read(&path).unwrap();
            let good = if flip_last_byte {
                *bytes.last_mut().unwrap() ^= 0xff;
                49
            } else {
                let mut torn = Vec::new();
                encode(&mut torn, 50, &new_record(&rec(50)));
                bytes.extend_from_slice(&torn[..torn.len() - 3]);
                50
            };
            fs::write(&path, &bytes).unwrap();
            assert_eq!(end_offset(dir).unwrap(), good);
            let mut r = PartitionReader::open(dir, 0).unwrap();
            assert_eq!(read_all(&mut r), expected(0..good));
            let mut w = PartitionWriter::open(dir, 1024).unwrap();
            assert_eq!(w.next_offset(), good);
            assert!(fs::metadata(&path).unwrap().len() < bytes.len() as u64);
            append_range(&mut w, good..good + 10, 3);
            // The reader that waited at the torn tail goes on with the records written over it.
            assert_eq!(read_all(&mut r), expected(good..good + 10));
            assert_eq!(read_from(dir, 0), expected(0..good + 10));
        }
    }

    #[test]
    fn corruption_in_the_middle_is_reported() {
        // A bad checksum on a record followed by more bytes is Corrupt, after the records before it.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let batch = expected(0..20);
        append_range(&mut PartitionWriter::open(dir, 1 << 20).unwrap(), 0..20, 20);
        let size = |r: &Record| (HEADER + BODY_FIXED + r.key.len() + r.value.len()) as u64;
        let at: u64 = batch[..5].iter().map(size).sum();
        let path = segment_path(dir, 0);
        let mut bytes = fs::read(&path).unwrap();
        bytes[(at + size(&batch[5])) as usize - 1] ^= 1;
        fs::write(&path, &bytes).unwrap();
        let mut r = PartitionReader::open(dir, 0).unwrap();
        assert_eq!(r.read(100, usize::MAX).unwrap(), expected(0..5));
        let err = r.read(100, usize::MAX).err();
        assert!(matches!(err, Some(LogError::Corrupt { position, .. }) if position == at));
        let err = PartitionReader::open(dir, 8).err();
        assert!(matches!(err, Some(LogError::Corrupt { .. })));
        assert!(matches!(end_offset(dir), Err(LogError::Corrupt { .. })));
    }

    #[test]
    fn tailing_reader_sees_every_record_once() {
        // A reader tailing a dir while a writer thread appends across rolls sees each record once.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("partition");
        let mut r = PartitionReader::open(&dir, 0).unwrap();
        const N: u64 = 3000;
        let writer_dir = dir.clone();
        let writer = std::thread::spawn(move || {
            let mut w = PartitionWriter::open(&writer_dir, 2048).unwrap();
            let mut i = 0;
            while i < N {
                let end = (i + i % 4 + 1).min(N);
                append_range(&mut w, i..end, 4);
                if i % 50 < end - i {
                    std::thread::sleep(Duration::from_millis(1));
                }
                i = end;
            }
        });
        let (mut got, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(60));
        while (got.len() as u64) < N {
            assert!(Instant::now() < deadline, "stalled at {}", r.position());
            let batch = r.read(7, 500).unwrap();
            if batch.is_empty() {
                std::thread::sleep(Duration::from_micros(200));
            }
            got.extend(batch);
        }
        writer.join().unwrap();
        assert_eq!(got, expected(0..N));
        assert_eq!(r.read(10, 10).unwrap(), []);
        assert!(list_segments(&dir).unwrap().len() > 10);
    }

    #[test]
    fn read_limits_are_honoured() {
        // read returns at most max_records, and max_bytes of keys+values unless one record is larger.
        let tmp = tempfile::tempdir().unwrap();
        let mut w = PartitionWriter::open(tmp.path(), 1 << 20).unwrap();
        let record = NewRecord {
            timestamp_ms: 0,
            format: 0,
            key: b"",
            value: &[1; 100],
        };
        w.append(&[record; 10]).unwrap();
        let mut r = PartitionReader::open(tmp.path(), 0).unwrap();
        let mut read =
            |n, bytes| -> Vec<u64> { r.read(n, bytes).unwrap().iter().map(|r| r.offset).collect() };
        assert_eq!(read(3, usize::MAX), [0, 1, 2]);
        assert_eq!(read(usize::MAX, 250), [3, 4]);
        assert_eq!(read(usize::MAX, 0), [5]);
        assert_eq!(read(usize::MAX, 100), [6]);
        assert_eq!(read(0, usize::MAX), Vec::<u64>::new());
        assert_eq!(read(usize::MAX, usize::MAX), [7, 8, 9]);
    }

    #[test]
    fn second_writer_is_locked_out_and_too_large_is_rejected() {
        // A 2nd writer gets Locked until the 1st is dropped; an oversized record fails its whole batch.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut w = PartitionWriter::open(dir, 1024).unwrap();
        let second = PartitionWriter::open(dir, 1024).err();
        assert!(matches!(second, Some(LogError::Locked { .. })));
        let (small, big) = (rec(1), vec![0; MAX_RECORD_BYTES]);
        let small = new_record(&small);
        let err = w
            .append(&[
                small,
                NewRecord {
                    value: &big,
                    ..small
                },
            ])
            .err();
        let max_size = MAX_RECORD_BYTES + BODY_FIXED;
        assert!(matches!(err, Some(LogError::TooLarge { size, .. }) if size == max_size + 2));
        assert_eq!((w.next_offset(), end_offset(dir).unwrap()), (0, 0));
        drop(w);
        assert_eq!(PartitionWriter::open(dir, 1024).unwrap().next_offset(), 0);
    }
}
