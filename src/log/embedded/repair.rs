//! The operator's tools: read a whole partition and report damage
//! ([`check`]); cut a partition explicitly ([`truncate_at`]).

use super::segment::{
    io_err, list_segments, read_synced, segment_path, write_synced, SegmentCursor, Stop,
    SYNCED_FILE,
};
use super::writer::{lock_file, try_lock};
use crate::log::LogError;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

/// What is wrong at one place of a partition directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The segment file.
    pub path: PathBuf,
    /// Byte position of the first bad record in it.
    pub position: u64,
    /// The offset that record should have had.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

/// What [`check`] found in one partition directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionCheck {
    /// Segment files.
    pub segments: usize,
    /// Bytes in them.
    pub bytes: u64,
    /// The first offset held.
    pub start: u64,
    /// The offset after the last valid record before any damage.
    pub end: u64,
    /// A torn tail the next writer will cut (bytes never synced, nothing valid after).
    pub torn: Option<Damage>,
    /// Corruption: readers and writers stop here.
    pub corrupt: Option<Damage>,
}

/// Reads every record of every segment of a partition directory (a missing one is
/// empty) and reports where it is torn or corrupt. Changes nothing.
pub fn check(dir: &Path) -> Result<PartitionCheck, LogError> {
    let bases = list_segments(dir)?;
    let mut report = PartitionCheck {
        segments: bases.len(),
        bytes: 0,
        start: bases.first().copied().unwrap_or(0),
        end: bases.first().copied().unwrap_or(0),
        torn: None,
        corrupt: None,
    };
    for (i, &base) in bases.iter().enumerate() {
        let path = segment_path(dir, base);
        report.bytes += fs::metadata(&path).map_err(io_err(&path))?.len();
        if report.torn.is_some() || report.corrupt.is_some() {
            continue;
        }
        if base != report.end {
            report.corrupt = Some(Damage {
                path,
                position: 0,
                offset: report.end,
                reason: format!(
                    "the previous segment ends at offset {} but this one starts at {base}",
                    report.end
                ),
            });
            continue;
        }
        let mut cursor = SegmentCursor::open_existing(dir, base)?;
        let (end, stop) = cursor.skip_until(base, u64::MAX)?;
        report.end = end;
        let last = i + 1 == bases.len();
        let damage = |reason: String| Damage {
            path: cursor.path.clone(),
            position: cursor.file_pos,
            offset: end,
            reason,
        };
        match stop {
            Some(Stop::End) | None => {}
            Some(Stop::Torn(reason)) if last => report.torn = Some(damage(reason)),
            Some(Stop::Torn(reason) | Stop::Corrupt(reason)) => {
                report.corrupt = Some(damage(reason))
            }
        }
    }
    Ok(report)
}

/// What [`truncate_at`] cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncated {
    /// The segment cut short (the one that holds the new end).
    pub segment: PathBuf,
    /// Its new length in bytes.
    pub at_byte: u64,
    /// Bytes removed, later segments included.
    pub bytes_cut: u64,
    /// Later segments removed.
    pub segments_removed: usize,
}

/// Cuts a partition so that its next record gets offset `offset`: every byte from
/// that record on, valid or not, is removed (later segments too), and the directory
/// and watermark are fsynced. Takes the partition's writer lock
/// ([`LogError::Locked`] while a writer runs). The records before `offset` must be
/// valid: cutting inside or past corruption is refused (cut at the corrupt record's
/// offset instead, as [`check`] reports it).
pub fn truncate_at(dir: &Path, offset: u64) -> Result<Truncated, LogError> {
    let lock = lock_file(dir)?;
    try_lock(dir, &lock)?;
    let bases = list_segments(dir)?;
    let first = bases.first().copied().unwrap_or(0);
    if offset < first || bases.is_empty() {
        return Err(LogError::OffsetOutOfRange {
            path: dir.to_path_buf(),
            requested: offset,
            start: first,
            end: first,
        });
    }
    let index = bases.partition_point(|&b| b <= offset) - 1;
    let base = bases[index];
    let mut cursor = SegmentCursor::open_existing(dir, base)?;
    match cursor.skip_until(base, offset)? {
        (_, None) => {}
        (end, Some(Stop::End)) => {
            return Err(LogError::OffsetOutOfRange {
                path: dir.to_path_buf(),
                requested: offset,
                start: first,
                end,
            })
        }
        (end, Some(Stop::Torn(reason) | Stop::Corrupt(reason))) => {
            return Err(cursor.corrupt(format!(
                "cannot cut at offset {offset}: the record at offset {end} is invalid ({reason}); \
                 cut at offset {end}"
            )))
        }
    }
    let at_byte = cursor.file_pos;
    let segment = cursor.path.clone();
    let mut bytes_cut = 0;
    for &later in &bases[index + 1..] {
        let path = segment_path(dir, later);
        bytes_cut += fs::metadata(&path).map_err(io_err(&path))?.len();
        fs::remove_file(&path).map_err(io_err(&path))?;
    }
    let file = File::options()
        .write(true)
        .open(&segment)
        .map_err(io_err(&segment))?;
    bytes_cut += file.metadata().map_err(io_err(&segment))?.len() - at_byte;
    file.set_len(at_byte)
        .and_then(|()| file.sync_all())
        .map_err(io_err(&segment))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))?;
    // The watermark may not claim more than is there any more.
    if let Some((b, len)) = read_synced(dir) {
        if b > base || (b == base && len > at_byte) {
            let path = dir.join(SYNCED_FILE);
            let f = File::options()
                .write(true)
                .open(&path)
                .map_err(io_err(&path))?;
            write_synced(&f, base, at_byte)
                .and_then(|()| f.sync_all())
                .map_err(io_err(&path))?;
        }
    }
    Ok(Truncated {
        segment,
        at_byte,
        bytes_cut,
        segments_removed: bases.len() - index - 1,
    })
}
