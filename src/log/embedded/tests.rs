//! The embedded log's round trips, limits, torn tails and corruption.

use super::framing::{encode, Framing, BODY_FIXED, MAX_RECORD_BYTES};
use super::segment::{list_segments, segment_path};
use super::*;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(super) fn rec(i: u64) -> Record {
    let (key, value) = (
        format!("k{i}").into_bytes(),
        vec![i as u8; (i * 7 % 90) as usize],
    );
    Record {
        offset: crate::log::Offset(i),
        timestamp_ms: 1000 + i,
        format: ((i % 3) as u8).into(),
        key,
        value,
    }
}

pub(super) fn expected(range: std::ops::Range<u64>) -> Vec<Record> {
    range.map(rec).collect()
}

pub(super) fn new_record(r: &Record) -> NewRecord<'_> {
    let (key, value) = (&r.key[..], &r.value[..]);
    NewRecord {
        timestamp_ms: r.timestamp_ms,
        format: r.format,
        key,
        value,
    }
}

/// Record `r` framed as a default writer frames it, in the segment whose first offset
/// is `base`.
pub(super) fn framed(base: u64, r: &Record) -> Vec<u8> {
    let mut b = Vec::new();
    encode(&mut b, Framing::Compact, base, r.offset.0, &new_record(r));
    b
}

/// The bytes record `r` takes in the first segment.
pub(super) fn size(r: &Record) -> u64 {
    framed(0, r).len() as u64
}

pub(super) fn append_range(w: &mut PartitionWriter, range: std::ops::Range<u64>, batch: usize) {
    for chunk in expected(range.clone()).chunks(batch) {
        let batch: Vec<NewRecord> = chunk.iter().map(new_record).collect();
        assert_eq!(w.append(&batch).unwrap(), chunk[0].offset.0);
    }
    assert_eq!(w.next_offset(), range.end);
}

/// A synced log of records `0..n` in `dir`, appended two at a time into
/// segments of `segment_bytes`; the segments' bases.
pub(super) fn synced_log(dir: &Path, segment_bytes: u64, n: u64) -> Vec<u64> {
    let mut w = PartitionWriter::open(dir, segment_bytes).unwrap();
    append_range(&mut w, 0..n, 2);
    w.sync().unwrap();
    drop(w);
    list_segments(dir).unwrap()
}

pub(super) fn read_all(r: &mut PartitionReader) -> Vec<Record> {
    let mut out = Vec::new();
    loop {
        match r.read(usize::MAX, usize::MAX).unwrap() {
            got if got.is_empty() => return out,
            got => out.extend(got),
        }
    }
}

pub(super) fn read_from(dir: &Path, from: u64) -> Vec<Record> {
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
            let last = *list_segments(dir).unwrap().last().unwrap();
            let torn = framed(last, &rec(50));
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
fn read_limits_are_honoured() {
    // read returns at most max_records, and max_bytes of keys+values unless one record is larger.
    let tmp = tempfile::tempdir().unwrap();
    let mut w = PartitionWriter::open(tmp.path(), 1 << 20).unwrap();
    let record = NewRecord {
        timestamp_ms: 0,
        format: 0.into(),
        key: b"",
        value: &[1; 100],
    };
    w.append(&[record; 10]).unwrap();
    let mut r = PartitionReader::open(tmp.path(), 0).unwrap();
    let mut read = |n, bytes| -> Vec<u64> {
        r.read(n, bytes)
            .unwrap()
            .iter()
            .map(|r| r.offset.0)
            .collect()
    };
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

fn flip(path: &Path, at: u64) {
    let mut bytes = fs::read(path).unwrap();
    bytes[at as usize] ^= 0x5a;
    fs::write(path, &bytes).unwrap();
}

fn is_corrupt<T>(r: Result<T, LogError>) -> bool {
    matches!(r, Err(LogError::Corrupt { .. }))
}

#[test]
fn synced_records_are_never_cut() {
    // Regression: a flipped byte in synced bytes (mid-segment or in the last record) stops writer and readers; nothing is cut.
    for at_end in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut w = PartitionWriter::open(dir, 1 << 20).unwrap();
        append_range(&mut w, 0..40, 4);
        w.sync().unwrap();
        drop(w);
        let path = segment_path(dir, 0);
        let len = fs::metadata(&path).unwrap().len();
        flip(&path, if at_end { len - 2 } else { len / 2 });
        let err = PartitionWriter::open(dir, 1 << 20).err();
        assert!(
            matches!(&err, Some(LogError::Corrupt { reason, .. }) if reason.contains("synced")),
            "{err:?}"
        );
        assert_eq!(fs::metadata(&path).unwrap().len(), len, "nothing cut");
        assert!(is_corrupt(end_offset(dir)));
        let mut r = PartitionReader::open(dir, 0).unwrap();
        let mut got = Vec::new();
        let err = loop {
            match r.read(7, usize::MAX) {
                Ok(batch) if batch.is_empty() => panic!("a reader waited at corruption"),
                Ok(batch) => got.extend(batch),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, LogError::Corrupt { .. }), "{err}");
        assert_eq!(got, expected(0..got.len() as u64));
        assert!(err.to_string().contains("feedlog log check"), "{err}");
    }
}

#[test]
fn unsynced_corruption_followed_by_valid_records_is_not_a_torn_tail() {
    // A bad record past the watermark with valid records after it is corruption, not a tail to cut.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    append_range(&mut PartitionWriter::open(dir, 1 << 20).unwrap(), 0..40, 40);
    let path = segment_path(dir, 0);
    let len = fs::metadata(&path).unwrap().len();
    // The length field of a record in the middle: it now points past the end.
    let at: u64 = expected(0..20).iter().map(size).sum();
    flip(&path, at + 1);
    assert!(is_corrupt(PartitionWriter::open(dir, 1 << 20)));
    assert_eq!(fs::metadata(&path).unwrap().len(), len);
    assert!(is_corrupt(end_offset(dir)));
}

// Regression: a reader that read part of a record while the writer was writing it, then (looking for a valid record after it) found the next one complete, reported the segment corrupt. It now reads the record again and returns it.
#[test]
fn a_record_completed_while_it_was_read_is_not_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    append_range(&mut PartitionWriter::open(dir, 1 << 20).unwrap(), 0..1, 1);
    let path = segment_path(dir, 0);
    let rest = framed(0, &rec(1));
    let half = rest.len() / 2;
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&rest[..half])
        .unwrap();
    let mut c = super::segment::SegmentCursor::open_existing(dir, 0).unwrap();
    match c.next(0).unwrap() {
        super::segment::Step::Record(_, len) => c.advance(len),
        other => panic!("record 0 is complete: {other:?}"),
    }
    let torn = c.decode(1, true).unwrap();
    assert!(matches!(
        torn,
        super::segment::Step::Stop(super::segment::Stop::Torn(_))
    ));
    // The writer finishes the record and appends the next one.
    let mut more = rest[half..].to_vec();
    more.extend(framed(0, &rec(2)));
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&more).unwrap();
    match c.settle(torn, 1, true).unwrap() {
        super::segment::Step::Record(r, _) => assert_eq!(r, rec(1)),
        other => panic!("record 1 is complete now: {other:?}"),
    }
}

#[test]
fn torn_tails_are_cut_only_past_the_watermark() {
    // Garbage, zeros or a partial record after the last synced byte, with nothing valid after, is cut; synced records stay.
    for tail in [
        vec![0u8; 300],
        vec![0xab; 7],
        b"\x00\x00\x01\x00garbage".to_vec(),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut w = PartitionWriter::open(dir, 1 << 20).unwrap();
        append_range(&mut w, 0..10, 3);
        w.sync().unwrap();
        append_range(&mut w, 10..12, 2);
        drop(w);
        let path = segment_path(dir, 0);
        let mut f = File::options().append(true).open(&path).unwrap();
        f.write_all(&tail).unwrap();
        let mut r = PartitionReader::open(dir, 0).unwrap();
        assert_eq!(
            read_all(&mut r),
            expected(0..12),
            "readers wait at a torn tail"
        );
        let mut w = PartitionWriter::open(dir, 1 << 20).unwrap();
        assert_eq!(w.next_offset(), 12);
        append_range(&mut w, 12..15, 3);
        assert_eq!(read_all(&mut r), expected(12..15));
        let c = check(dir).unwrap();
        assert_eq!((c.end, c.torn, c.corrupt), (15, None, None));
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
    #[test]
    fn corruption_never_loses_a_record_silently(
        n in 1u64..60,
        synced_batches in 0usize..20,
        batch in 1usize..6,
        at in proptest::prelude::any::<proptest::sample::Index>(),
        how in 0u8..4,
        segment in proptest::prop_oneof![proptest::prelude::Just(256u64), proptest::prelude::Just(1u64 << 20)],
    ) {
        // Random damage (a flipped byte, zeros, a cut, garbage appended) anywhere in a log: opening a writer either refuses with Corrupt or keeps every synced record and reads back exactly the originals below its end.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut w = PartitionWriter::open(dir, segment).unwrap();
        let mut synced = 0;
        for (i, chunk) in expected(0..n).chunks(batch).enumerate() {
            let records: Vec<NewRecord> = chunk.iter().map(new_record).collect();
            w.append(&records).unwrap();
            if i < synced_batches {
                w.sync().unwrap();
                synced = w.next_offset();
            }
        }
        drop(w);
        let bases = list_segments(dir).unwrap();
        let last = segment_path(dir, *bases.last().unwrap());
        let all: Vec<PathBuf> = bases.iter().map(|b| segment_path(dir, *b)).collect();
        let sizes: Vec<u64> = all.iter().map(|p| fs::metadata(p).unwrap().len()).collect();
        let total: u64 = sizes.iter().sum();
        proptest::prop_assume!(total > 0);
        let mut pos = at.index(total as usize) as u64;
        let mut file = 0;
        while pos >= sizes[file] { pos -= sizes[file]; file += 1; }
        let mut bytes = fs::read(&all[file]).unwrap();
        match how {
            0 => bytes[pos as usize] ^= 0x5a,
            1 => { let end = (pos as usize + 9).min(bytes.len()); bytes[pos as usize..end].fill(0) }
            2 => bytes.truncate(pos as usize),
            _ => { bytes = fs::read(&last).unwrap(); bytes.extend_from_slice(&[0xcd; 13]); file = all.len() - 1 }
        }
        fs::write(&all[file], &bytes).unwrap();
        match PartitionWriter::open(dir, segment) {
            Err(LogError::Corrupt { .. }) => {}
            Err(e) => proptest::prop_assert!(false, "unexpected error {e}"),
            Ok(w) => {
                let end = w.next_offset();
                proptest::prop_assert!(end >= synced, "cut synced records: end {end} < synced {synced}");
                // Damage in an earlier segment is for readers to find: they must not skip it.
                drop(w);
                let mut r = PartitionReader::open(dir, 0).unwrap();
                let mut got = Vec::new();
                loop {
                    match r.read(usize::MAX, usize::MAX) {
                        Ok(b) if b.is_empty() => break,
                        Ok(b) => got.extend(b),
                        Err(LogError::Corrupt { .. }) => break,
                        Err(e) => proptest::prop_assert!(false, "unexpected error {e}"),
                    }
                }
                proptest::prop_assert_eq!(&got[..], &expected(0..got.len() as u64)[..]);
                if (got.len() as u64) < end {
                    // A reader stopped early: only at corruption it reports.
                    proptest::prop_assert!(is_corrupt(PartitionReader::open(dir, got.len() as u64).and_then(|mut r| r.read(1, 1))));
                }
            }
        }
    }
}

#[test]
fn writers_taking_turns_see_each_other() {
    // Two shared writers of one partition (two processes' dead-letter writers) interleave appends; none is lost or reordered.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let wait = Duration::from_secs(5);
    let mut a = PartitionWriter::open_shared(dir, 300, wait).unwrap();
    let mut b = PartitionWriter::open_shared(dir, 300, wait).unwrap();
    let all = expected(0..60);
    for (i, r) in all.iter().enumerate() {
        let w = if i % 3 == 0 { &mut a } else { &mut b };
        assert_eq!(w.append(&[new_record(r)]).unwrap(), i as u64);
    }
    assert_eq!(read_from(dir, 0), all);
    // While one holds the lock exclusively, the other reports Locked after its wait.
    let held = PartitionWriter::open(dir, 300).unwrap();
    let mut c = PartitionWriter::open_shared(dir, 300, Duration::ZERO).err();
    assert!(matches!(c.take(), Some(LogError::Locked { .. })));
    drop(held);
}

#[test]
fn check_reports_and_truncate_at_cuts_explicitly() {
    // check names the corrupt segment and byte; truncate_at cuts exactly there and refuses to cut past corruption.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bases = synced_log(dir, 400, 50);
    assert!(bases.len() > 3);
    let clean = check(dir).unwrap();
    assert_eq!(
        (clean.start, clean.end, clean.segments),
        (0, 50, bases.len())
    );
    let victim = segment_path(dir, bases[1]);
    flip(&victim, 30);
    let c = check(dir).unwrap();
    let damage = c.corrupt.clone().unwrap();
    assert_eq!(damage.path, victim);
    assert_eq!(damage.offset, c.end);
    assert!(c.end >= bases[1] && c.end < bases[2]);
    // Cutting past the corruption within its segment is refused; cutting at it works and removes later segments.
    assert!(is_corrupt(truncate_at(dir, damage.offset + 1)));
    let t = truncate_at(dir, damage.offset).unwrap();
    assert_eq!(t.segment, victim);
    assert_eq!(t.at_byte, damage.position);
    assert_eq!(t.segments_removed, bases.len() - 2);
    let after = check(dir).unwrap();
    assert_eq!(
        (after.end, after.corrupt, after.torn),
        (damage.offset, None, None)
    );
    assert_eq!(read_from(dir, 0), expected(0..damage.offset));
    let mut w = PartitionWriter::open(dir, 400).unwrap();
    assert_eq!(w.next_offset(), damage.offset);
    append_range(&mut w, damage.offset..damage.offset + 3, 1);
    // A writer holds the lock: truncate_at refuses.
    assert!(matches!(truncate_at(dir, 1), Err(LogError::Locked { .. })));
}

#[test]
fn a_segment_cut_short_below_the_watermark_is_corruption() {
    // A last segment that ends cleanly but shorter than the writer had synced lost records: writer and readers refuse.
    for keep in 0..3u64 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut w = PartitionWriter::open(dir, 1 << 20).unwrap();
        append_range(&mut w, 0..9, 3);
        w.sync().unwrap();
        drop(w);
        let at: u64 = expected(0..keep * 3).iter().map(size).sum();
        let path = segment_path(dir, 0);
        let mut bytes = fs::read(&path).unwrap();
        bytes.truncate(at as usize);
        fs::write(&path, &bytes).unwrap();
        assert!(
            is_corrupt(PartitionWriter::open(dir, 1 << 20)),
            "keep {keep}"
        );
        assert!(is_corrupt(end_offset(dir)));
        let mut r = PartitionReader::open(dir, 0).unwrap();
        let err = loop {
            match r.read(100, usize::MAX) {
                Ok(b) if b.is_empty() => panic!("a reader waited at a cut below the watermark"),
                Ok(_) => {}
                Err(e) => break e,
            }
        };
        assert!(err.to_string().contains("synced"), "{err}");
    }
}

#[test]
fn deleting_the_last_segments_is_corruption() {
    // Removing the segment files the watermark names (or all of them) is refused by writer, readers and end_offset; nothing is recreated.
    for remove_all in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let bases = synced_log(dir, 100, 12);
        assert!(bases.len() > 2, "{bases:?}");
        let cut = if remove_all {
            &bases[..]
        } else {
            &bases[bases.len() - 1..]
        };
        for &b in cut {
            fs::remove_file(segment_path(dir, b)).unwrap();
        }
        assert!(is_corrupt(end_offset(dir)), "remove_all {remove_all}");
        assert!(is_corrupt(PartitionWriter::open(dir, 200)));
        assert_eq!(list_segments(dir).unwrap().len(), bases.len() - cut.len());
        let read = PartitionReader::open(dir, 0).and_then(|mut r| loop {
            match r.read(100, usize::MAX) {
                Ok(b) if b.is_empty() => break Ok(()),
                Ok(_) => {}
                Err(e) => break Err(e),
            }
        });
        assert!(is_corrupt(read), "remove_all {remove_all}");
    }
}
