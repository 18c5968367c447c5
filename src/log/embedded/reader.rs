//! A reader that tails one partition directory from an offset.

use super::segment::{
    check_synced_segment_present, io_err, list_segments, segment_path, SegmentCursor, Step, Stop,
};
use crate::log::{LogError, Record};
use std::path::{Path, PathBuf};

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
        check_synced_segment_present(dir, bases.last().copied())?;
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
            // A later segment means the writer rolled past this one.
            let next = segment_path(&self.dir, self.position);
            let later =
                match cursor.base != self.position && next.try_exists().map_err(io_err(&next))? {
                    true => self.position,
                    // The last segment, maybe still being written: wait for more.
                    false => match list_segments(&self.dir)?
                        .into_iter()
                        .find(|&b| b > cursor.base)
                    {
                        None => return Ok(()),
                        Some(b) => b,
                    },
                };
            // Whatever the writer wrote here before it rolled is on disk by
            // now, maybe past where this read stopped a moment ago: read on
            // here first. A segment that ends anywhere but at the next one's
            // base is damaged. Asked again by name: a listing taken while
            // the writer creates segments may show a later one and miss the
            // one it created just before.
            let base = cursor.base;
            match cursor.next(self.position)? {
                Step::Record(..) => {}
                Step::Stop(Stop::End) if rolled_at(&self.dir, (base, self.position), later)? => {
                    self.cursor = None
                }
                Step::Stop(Stop::End) => {
                    let reason = format!(
                        "segment ends at offset {} but the next segment starts at {later}",
                        self.position
                    );
                    return Err(cursor.corrupt(reason));
                }
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
    let last = list_segments(dir)?.last().copied();
    check_synced_segment_present(dir, last)?;
    let Some(base) = last else {
        return Ok(0);
    };
    let mut cursor = SegmentCursor::open_existing(dir, base)?;
    match cursor.skip_until(base, u64::MAX)? {
        (_, Some(Stop::Corrupt(reason))) => Err(cursor.corrupt(reason)),
        (end, _) => Ok(end),
    }
}

/// Whether segment `base` of `dir`, read to its end at offset `end`, ends
/// where the writer rolled: the next segment starts there (`later`, the
/// first listed after `base`, or one the listing missed).
fn rolled_at(dir: &Path, (base, end): (u64, u64), later: u64) -> Result<bool, LogError> {
    let next = segment_path(dir, end);
    Ok(end == later || (end != base && next.try_exists().map_err(io_err(&next))?))
}
