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
//! A segment has no file header: it is records back to back, in one of two framings that
//! a reader tells apart by a record's first byte (a data directory's layout chooses which
//! one its writers use: [`Framing`](super::framing::Framing); `framing.rs` encodes and
//! parses them). Fixed integers are big-endian; `varint` is LEB128.
//!
//! **Compact** (layout 2, first byte `0x82`): the offset is stored relative to the
//! segment's base, the timestamp as a varint, and a value of 64 bytes or more is stored
//! Zstandard-compressed (a frame, after its raw length as a varint) when that is smaller.
//!
//! ```text
//!  0x82 | body_len varint | crc32 u32 | body: rel_offset varint | timestamp_ms varint |
//!       |                 |           |       format u8 | flags u8 | key_len varint |
//!       |                 |           |       key | value (flags bit 0: raw_len varint
//!       |                 |           |                    + Zstandard frame)
//!                                     |<----- body_len bytes, crc32 covers all of it ----->|
//! ```
//!
//! **Fixed** (layout 1, first byte `0x00` or `0x01`: the top byte of a length of at
//! most 16 MiB):
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
//! the roll, so only the last segment can end in a torn record.
//!
//! `.synced` (20 bytes: base `u64`, length `u64`, crc32 of those 16 bytes) is the
//! durability watermark: after each fsync the writer records how far the active segment
//! is on disk. Bytes below it were acknowledged as durable and are never cut.
//!
//! **Torn tail or corruption.** An invalid record (incomplete, bad checksum, bad length,
//! wrong offset) is a *torn tail* only when it lies at or past the watermark **and** no
//! valid record follows it in the file: that is what a crash during an unsynced write
//! leaves. Readers wait at a torn tail (a write may be in progress) and
//! [`PartitionWriter::open`] cuts it. Anything else is corruption: every reader and writer
//! stops with [`LogError::Corrupt`] naming the segment and byte position, and nothing is
//! cut. A segment that ends cleanly below the watermark, or a missing segment the
//! watermark names, is corruption too: records that were durable are gone.
//! `feedlog log check` reports it; `feedlog log repair --truncate-at OFFSET` is the
//! explicit, logged way to cut a partition ([`truncate_at`]), and it lowers the watermark.

use super::framing::{
    be_u64, compact_record_at, fixed_record_at, parse, Parsed, COMPACT, COMPACT_MIN,
};
use super::{LogError, Record};
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The durability watermark file of a partition directory.
pub(super) const SYNCED_FILE: &str = ".synced";
/// How much a reader asks the OS for at a time.
const READ_CHUNK: usize = 64 << 10;

pub(super) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(super) fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

/// Base offsets of the segments in `dir`, ascending; none if `dir` does not exist.
pub(super) fn list_segments(dir: &Path) -> Result<Vec<u64>, LogError> {
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

/// The durability watermark of `dir`: (segment base, bytes of it known to be on disk);
/// `None` when absent or unreadable (then nothing is known to be synced).
pub(super) fn read_synced(dir: &Path) -> Option<(u64, u64)> {
    let b = fs::read(dir.join(SYNCED_FILE)).ok()?;
    if b.len() != 20 || crc32fast::hash(&b[..16]).to_be_bytes() != b[16..20] {
        return None;
    }
    Some((be_u64(&b[..8]), be_u64(&b[8..16])))
}

/// Records that segment `base` is on disk up to `len` bytes. Written after the fsync
/// it describes and not fsynced itself: a watermark lost in a crash is only older,
/// which is safe (less is protected from cutting, nothing is cut wrongly).
pub(super) fn write_synced(file: &File, base: u64, len: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 20];
    b[..8].copy_from_slice(&base.to_be_bytes());
    b[8..16].copy_from_slice(&len.to_be_bytes());
    let crc = crc32fast::hash(&b[..16]);
    b[16..].copy_from_slice(&crc.to_be_bytes());
    file.write_all_at(&b, 0)
}

/// Bytes of segment `base` in `dir` known to be durable: all of a segment before the
/// watermark's (closed segments are fsynced at the roll), the watermark's length in its
/// own segment, none in a later one.
fn synced_len(dir: &Path, base: u64) -> u64 {
    synced_len_of(read_synced(dir), base)
}

fn synced_len_of(synced: Option<(u64, u64)>, base: u64) -> u64 {
    match synced {
        Some((b, _)) if b > base => u64::MAX,
        Some((b, len)) if b == base => len,
        _ => 0,
    }
}

/// [`LogError::Corrupt`] if the segment the durability watermark names is gone while
/// the writer had synced bytes of it (a log cut by deleting its last segment files).
/// `last` is the last segment present, if any.
pub(super) fn check_synced_segment_present(dir: &Path, last: Option<u64>) -> Result<(), LogError> {
    let Some((b, len)) = read_synced(dir) else {
        return Ok(());
    };
    let path = segment_path(dir, b);
    if last.is_some_and(|l| l >= b)
        || (b == 0 && len == 0)
        || path.try_exists().map_err(io_err(&path))?
    {
        return Ok(());
    }
    Err(LogError::Corrupt {
        path,
        position: 0,
        reason: format!("the segment is missing but the writer had synced {len} bytes of it"),
    })
}

/// The first position after `from` in the segment file `path` where a valid record
/// with an offset of at least `expected` starts, with that offset. A torn tail is
/// followed by nothing valid; corruption usually is.
fn valid_record_after(
    path: &Path,
    from: u64,
    expected: u64,
    base: u64,
) -> Result<Option<(u64, u64)>, LogError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    file.seek(SeekFrom::Start(from + 1)).map_err(io_err(path))?;
    let mut rest = Vec::new();
    file.read_to_end(&mut rest).map_err(io_err(path))?;
    // A record after `from` has at most one offset per `COMPACT_MIN` bytes before it.
    let most = expected + (rest.len() / COMPACT_MIN) as u64 + 1;
    let plausible = |offset: u64| (expected..=most).contains(&offset);
    for at in 0..rest.len() {
        let b = &rest[at..];
        let found = if b[0] == COMPACT {
            compact_record_at(b, base).filter(|&o| plausible(o))
        } else {
            fixed_record_at(b).filter(|&o| plausible(o))
        };
        if let Some(offset) = found {
            return Ok(Some((from + 1 + at as u64, offset)));
        }
    }
    Ok(None)
}

/// What a [`SegmentCursor`] found at its position.
#[derive(Debug)]
pub(super) enum Step {
    /// A valid record and its encoded length (not consumed yet: call `advance`).
    Record(Record, usize),
    /// No record here (yet).
    Stop(Stop),
}

#[derive(Debug)]
pub(super) enum Stop {
    /// The file ends exactly here.
    End,
    /// An invalid record past the durability watermark with nothing valid after it: a
    /// write still in progress, or a crash's torn write.
    Torn(String),
    /// An invalid record that is not a torn tail.
    Corrupt(String),
}

fn stop(stop: fn(String) -> Stop, reason: impl Into<String>) -> Result<Step, LogError> {
    Ok(Step::Stop(stop(reason.into())))
}

/// Buffered sequential reader of one segment file that notices the file growing: the
/// `File`'s own position is always at the end of `buf`, so reading at EOF and again later
/// simply picks up what was appended meanwhile.
pub(super) struct SegmentCursor {
    pub(super) path: PathBuf,
    pub(super) base: u64,
    pub(super) file: File,
    pub(super) buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    pub(super) pos: usize,
    /// Byte position in the file of `buf[pos]`.
    pub(super) file_pos: u64,
    /// The end position last checked against the durability watermark.
    pub(super) end_checked: Option<u64>,
}

impl SegmentCursor {
    pub(super) fn open(dir: &Path, base: u64) -> Result<Option<Self>, LogError> {
        let path = segment_path(dir, base);
        match File::open(&path) {
            Ok(file) => Ok(Some(Self {
                path,
                base,
                file,
                buf: Vec::new(),
                pos: 0,
                file_pos: 0,
                end_checked: None,
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    pub(super) fn open_existing(dir: &Path, base: u64) -> Result<Self, LogError> {
        let missing = || io_err(&segment_path(dir, base))(io::ErrorKind::NotFound.into());
        Self::open(dir, base)?.ok_or_else(missing)
    }

    pub(super) fn corrupt(&self, reason: String) -> LogError {
        LogError::Corrupt {
            path: self.path.clone(),
            position: self.file_pos,
            reason,
        }
    }

    /// Reads until `n` unconsumed bytes are buffered; false if the file ends before that.
    pub(super) fn fill_to(&mut self, n: usize) -> Result<bool, LogError> {
        while self.buf.len() - self.pos < n {
            self.buf.drain(..self.pos);
            self.pos = 0;
            // Into the buffer's spare capacity (never zero-filled first);
            // `read_to_end` retries interrupted reads itself.
            let want = (n - self.buf.len()).max(READ_CHUNK) as u64;
            let got = (&mut self.file).take(want).read_to_end(&mut self.buf);
            if got.map_err(io_err(&self.path))? == 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub(super) fn advance(&mut self, len: usize) {
        self.pos += len;
        self.file_pos += len as u64;
    }

    /// Moves to byte `pos` of the file (a record boundary).
    pub(super) fn seek_to(&mut self, pos: u64) -> Result<(), LogError> {
        self.file_pos = pos;
        self.rewind()
    }

    /// Drops the buffer so that the bytes at the position are read from the file again.
    pub(super) fn rewind(&mut self) -> Result<(), LogError> {
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
    /// mistaken for corruption. An invalid record is then classified: a torn tail only
    /// past the durability watermark with no valid record after it (see the module docs).
    pub(super) fn next(&mut self, expected: u64) -> Result<Step, LogError> {
        self.next_with(expected, true)
    }

    /// [`SegmentCursor::next`], checking the record as fully but copying
    /// its key and value out only with `keep` (skipping leaves them empty).
    fn next_with(&mut self, expected: u64, keep: bool) -> Result<Step, LogError> {
        let step = match self.decode(expected, keep)? {
            Step::Stop(Stop::Corrupt(_)) => {
                self.rewind()?;
                self.decode(expected, keep)?
            }
            step => step,
        };
        self.settle(step, expected, keep)
    }

    /// What a step that decoded no record means: a torn tail, corruption,
    /// or the end (see [`SegmentCursor::next`]).
    pub(super) fn settle(
        &mut self,
        step: Step,
        expected: u64,
        keep: bool,
    ) -> Result<Step, LogError> {
        match step {
            Step::Stop(Stop::Torn(reason) | Stop::Corrupt(reason)) => {
                let classified = self.classify(expected, reason)?;
                if let Step::Stop(Stop::Corrupt(_)) = classified {
                    // A valid record after this one: the writer may have
                    // finished this one since it was read (a reader that
                    // reads while a record is being written sees part of
                    // it: the file grows a page at a time, and the search
                    // for a later record reads the file again later). The
                    // single writer appends in order, so read it once more;
                    // real corruption fails again.
                    self.rewind()?;
                    if let step @ Step::Record(..) = self.decode(expected, keep)? {
                        return Ok(step);
                    }
                }
                Ok(classified)
            }
            Step::Stop(Stop::End) if self.end_checked != Some(self.file_pos) => {
                // Ending cleanly short of what the writer had synced: records
                // that were durable are gone (a file cut under the log).
                // Checked once per end position; a cut is reported on every call.
                let dir = self.path.parent().unwrap_or(Path::new("."));
                check_synced_segment_present(dir, Some(self.base))?;
                match synced_len(dir, self.base) {
                    synced if synced != u64::MAX && self.file_pos < synced => stop(
                        Stop::Corrupt,
                        format!(
                            "the segment ends at byte {} but the writer had synced {synced} bytes of it",
                            self.file_pos
                        ),
                    ),
                    _ => {
                        self.end_checked = Some(self.file_pos);
                        Ok(Step::Stop(Stop::End))
                    }
                }
            }
            step => Ok(step),
        }
    }

    pub(super) fn classify(&mut self, expected: u64, reason: String) -> Result<Step, LogError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let synced = synced_len(dir, self.base);
        if self.file_pos < synced {
            let synced = match synced {
                u64::MAX => "the whole segment, which a later one closed".to_string(),
                n => format!("its first {n} bytes"),
            };
            return stop(
                Stop::Corrupt,
                format!("{reason}, in bytes the writer had synced ({synced})"),
            );
        }
        if let Some((at, offset)) =
            valid_record_after(&self.path, self.file_pos, expected, self.base)?
        {
            return stop(
                Stop::Corrupt,
                format!("{reason}, and a valid record (offset {offset}) follows at byte {at}"),
            );
        }
        stop(Stop::Torn, reason)
    }

    pub(super) fn decode(&mut self, expected: u64, keep: bool) -> Result<Step, LogError> {
        if !self.fill_to(1)? {
            return Ok(Step::Stop(Stop::End));
        }
        loop {
            match parse(&self.buf[self.pos..], self.base, expected, keep) {
                Parsed::Record(record, len) => return Ok(Step::Record(record, len)),
                Parsed::Short(need, what) => {
                    if !self.fill_to(need)? {
                        return stop(Stop::Torn, what);
                    }
                }
                Parsed::BadChecksum(total) => {
                    // Torn when it reaches the end of the file, else corrupt
                    // (settled later; see [`SegmentCursor::next`]).
                    let len = self.file.metadata().map_err(io_err(&self.path))?.len();
                    let at_tail = self.file_pos + total as u64 >= len;
                    let kind = if at_tail { Stop::Torn } else { Stop::Corrupt };
                    return stop(kind, "bad checksum");
                }
                Parsed::Invalid(reason) => return stop(Stop::Corrupt, reason),
            }
        }
    }

    /// Consumes records from offset `at` on until offset `target` is reached (→ `None`)
    /// or no valid record follows; returns the offset reached.
    pub(super) fn skip_until(
        &mut self,
        mut at: u64,
        target: u64,
    ) -> Result<(u64, Option<Stop>), LogError> {
        while at < target {
            match self.next_with(at, false)? {
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
