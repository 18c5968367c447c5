//! The writer of one partition directory: appends, rolls segments, records
//! the durability watermark, and on open cuts only a torn tail.

use super::framing::{encode, Framing, BODY_FIXED, MAX_RECORD_BYTES};
use super::segment::{
    check_synced_segment_present, io_err, list_segments, segment_path, write_synced, SegmentCursor,
    Stop, SYNCED_FILE,
};
use crate::log::{LogError, NewRecord};
use std::fs::{self, File, TryLockError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a [`PartitionWriter`] holds `dir/.lock`.
enum Locking {
    /// For the writer's whole life (released when the file closes on drop).
    Held {
        /// The locked file, kept open.
        _file: File,
    },
    /// Only during each append, so writers in several processes take turns (the
    /// dead-letter log, forwarded events): each append first reads what the others
    /// appended since. Waits up to the duration for the lock.
    PerAppend(File, Duration),
}

/// The writer of one partition directory.
pub struct PartitionWriter {
    dir: PathBuf,
    segment_bytes: u64,
    lock: Locking,
    /// The durability watermark file, `dir/.synced`.
    synced: File,
    active: File,
    active_path: PathBuf,
    /// Base offset of the active segment.
    active_base: u64,
    active_len: u64,
    next_offset: u64,
    /// A segment file was created since the directory was last fsynced.
    dir_dirty: bool,
    /// A failed write could not be rolled back: the segment may end in garbage.
    poisoned: bool,
    /// How appended records are framed.
    framing: Framing,
}

/// Opens (creating the directory if missing) the lock file of a partition directory.
pub(super) fn lock_file(dir: &Path) -> Result<File, LogError> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let lock_path = dir.join(".lock");
    let lock = File::options().create(true).append(true).open(&lock_path);
    lock.map_err(io_err(&lock_path))
}

pub(super) fn try_lock(dir: &Path, lock: &File) -> Result<(), LogError> {
    match lock.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(LogError::Locked { path: dir.into() }),
        Err(TryLockError::Error(e)) => Err(io_err(&dir.join(".lock"))(e)),
    }
}

/// Takes the lock, retrying while another writer holds it, up to `wait`.
fn lock_waiting(dir: &Path, lock: &File, wait: Duration) -> Result<(), LogError> {
    let deadline = Instant::now() + wait;
    loop {
        match try_lock(dir, lock) {
            Err(LogError::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2))
            }
            other => return other,
        }
    }
}

impl PartitionWriter {
    /// Opens (creating the directory if missing) for appending. Takes an exclusive lock on
    /// `dir/.lock` with `File::try_lock` (→ [`LogError::Locked`] if held; released on drop).
    /// Validates the last segment record by record and cuts a torn tail (see the module
    /// docs), logging the bytes cut with `tracing::warn!`; corruption is
    /// [`LogError::Corrupt`] and nothing is cut. Earlier segments are not rescanned.
    pub fn open(dir: &Path, segment_bytes: u64) -> Result<Self, LogError> {
        let lock = lock_file(dir)?;
        try_lock(dir, &lock)?;
        Self::open_locked(dir, segment_bytes, Locking::Held { _file: lock })
    }

    /// Opens a writer that holds `dir/.lock` only while it appends, so that writers in
    /// several processes can share the partition; it waits (up to `wait`) for the
    /// others' appends.
    pub fn open_shared(dir: &Path, segment_bytes: u64, wait: Duration) -> Result<Self, LogError> {
        let lock = lock_file(dir)?;
        lock_waiting(dir, &lock, wait)?;
        let w = Self::open_locked(dir, segment_bytes, Locking::PerAppend(lock, wait));
        if let Ok(w) = &w {
            w.unlock();
        }
        w
    }

    fn open_locked(dir: &Path, segment_bytes: u64, lock: Locking) -> Result<Self, LogError> {
        let last = list_segments(dir)?.last().copied();
        check_synced_segment_present(dir, last)?;
        let base = last.unwrap_or(0);
        let next_offset = last.map(|b| recover(dir, b)).transpose()?.unwrap_or(0);
        let active_path = segment_path(dir, base);
        let active = File::options().create(true).append(true).open(&active_path);
        let active = active.map_err(io_err(&active_path))?;
        let active_len = active.metadata().map_err(io_err(&active_path))?.len();
        let synced_path = dir.join(SYNCED_FILE);
        let synced = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&synced_path)
            .map_err(io_err(&synced_path))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            segment_bytes,
            lock,
            synced,
            active,
            active_path,
            active_base: base,
            active_len,
            next_offset,
            dir_dirty: last.is_none(),
            poisoned: false,
            framing: Framing::Compact,
        })
    }

    /// Frames what it appends from now on as `framing` says (compact by default;
    /// readers read both).
    pub fn with_framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    fn unlock(&self) {
        if let Locking::PerAppend(lock, _) = &self.lock {
            // Closing the file would release it too; an unlock error leaves the lock
            // to the file's close.
            let _ = lock.unlock();
        }
    }

    /// A shared writer's turn: waits for the lock and reads on past what other
    /// processes appended since this writer's last turn.
    fn take_turn(&mut self) -> Result<(), LogError> {
        let Locking::PerAppend(lock, wait) = &self.lock else {
            return Ok(());
        };
        lock_waiting(&self.dir, lock, *wait)?;
        let caught_up = self.catch_up();
        if caught_up.is_err() {
            self.unlock();
        }
        caught_up
    }

    /// Moves the writer's end to the partition's end on disk, validating only what
    /// was appended since it last looked (the whole last segment when another writer
    /// rolled to a new one, or left a tail to cut).
    fn catch_up(&mut self) -> Result<(), LogError> {
        let last = list_segments(&self.dir)?.last().copied().unwrap_or(0);
        let path = segment_path(&self.dir, last);
        let len = match fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(io_err(&path)(e)),
        };
        if last == self.active_base && len == self.active_len {
            return Ok(());
        }
        if last == self.active_base && len > self.active_len {
            let mut cursor = SegmentCursor::open_existing(&self.dir, last)?;
            cursor.seek_to(self.active_len)?;
            if let (next, Some(Stop::End)) = cursor.skip_until(self.next_offset, u64::MAX)? {
                self.next_offset = next;
                self.active_len = cursor.file_pos;
                return Ok(());
            }
        }
        self.next_offset = recover(&self.dir, last)?;
        let active = File::options().create(true).append(true).open(&path);
        self.active = active.map_err(io_err(&path))?;
        self.active_len = self.active.metadata().map_err(io_err(&path))?.len();
        self.active_path = path;
        self.active_base = last;
        Ok(())
    }

    /// Appends records in order with one write, returning the offset of the first (the
    /// next offset if `records` is empty); does not fsync. Rolls to a new segment first if
    /// the active one has reached `segment_bytes` (a batch is never split, so it may
    /// overflow a segment). A record body over 16 MiB → [`LogError::TooLarge`], and nothing
    /// of the batch is written.
    ///
    /// A shared writer ([`PartitionWriter::open_shared`]) takes the lock for the append,
    /// reads on past what others appended, appends, fsyncs and releases the lock.
    pub fn append(&mut self, records: &[NewRecord<'_>]) -> Result<u64, LogError> {
        if records.is_empty() || matches!(self.lock, Locking::Held { .. }) {
            return self.append_here(records);
        }
        self.take_turn()?;
        let appended = self.append_here(records);
        let synced = appended.is_ok().then(|| self.sync());
        self.unlock();
        let first = appended?;
        synced.unwrap_or(Ok(()))?;
        Ok(first)
    }

    fn append_here(&mut self, records: &[NewRecord<'_>]) -> Result<u64, LogError> {
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
            total += size;
        }
        if self.active_len > 0 && self.active_len >= self.segment_bytes {
            self.roll()?;
        }
        let mut buf = Vec::with_capacity(total + 8 * records.len());
        for (i, r) in records.iter().enumerate() {
            encode(
                &mut buf,
                self.framing,
                self.active_base,
                first + i as u64,
                r,
            );
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
        self.active_base = self.next_offset;
        self.active_len = 0;
        self.dir_dirty = true;
        Ok(())
    }

    /// fsyncs the active segment, and the directory if a segment was created since the last
    /// sync, so that everything appended so far survives a crash.
    /// Then it moves the durability watermark to the end of the active segment.
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.active.sync_data().map_err(io_err(&self.active_path))?;
        if self.dir_dirty {
            let dir = File::open(&self.dir).and_then(|d| d.sync_all());
            dir.map_err(io_err(&self.dir))?;
            self.dir_dirty = false;
        }
        write_synced(&self.synced, self.active_base, self.active_len)
            .map_err(io_err(&self.dir.join(SYNCED_FILE)))?;
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

/// Scans the segment `base` of `dir`, cuts a torn tail (see the module docs) and
/// returns the offset after its last valid record. Corruption is an error and
/// nothing is cut.
pub(super) fn recover(dir: &Path, base: u64) -> Result<u64, LogError> {
    let mut cursor = SegmentCursor::open_existing(dir, base)?;
    let (next, reason) = match cursor.skip_until(base, u64::MAX)? {
        (_, Some(Stop::Corrupt(reason))) => return Err(cursor.corrupt(reason)),
        (next, Some(Stop::Torn(reason))) => (next, reason),
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
        "truncated the torn tail of a partition log (bytes never synced, nothing valid after them)");
    Ok(next)
}
