//! The two framings of the embedded log's records (see `segment.rs`): both read
//! back alike, and large values are stored compressed.

use super::framing::Framing;
use super::segment::segment_path;
use super::tests::{append_range, expected, read_from};
use super::*;
use std::fs;

#[test]
fn fixed_and_compact_records_read_back_alike_in_one_segment() {
    // A segment holding records of both framings (a fixed writer, then a compact one) reads back every record as appended.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fixed = PartitionWriter::open(dir, 1 << 20).unwrap();
    append_range(&mut fixed.with_framing(Framing::Fixed), 0..30, 7);
    let fixed_len = fs::metadata(segment_path(dir, 0)).unwrap().len();
    append_range(&mut PartitionWriter::open(dir, 1 << 20).unwrap(), 30..60, 7);
    let compact_len = fs::metadata(segment_path(dir, 0)).unwrap().len() - fixed_len;
    assert_eq!(read_from(dir, 0), expected(0..60));
    assert_eq!(read_from(dir, 45), expected(45..60));
    // The same number of records of about the same sizes take less room compact.
    assert!(compact_len < fixed_len, "{compact_len} >= {fixed_len}");
    // The writer reopens on a compact tail and goes on.
    append_range(&mut PartitionWriter::open(dir, 1 << 20).unwrap(), 60..70, 3);
    assert_eq!(read_from(dir, 0), expected(0..70));
}

#[test]
fn a_large_compressible_value_is_stored_compressed_and_read_back_whole() {
    // A 64 KiB repetitive value takes a fraction of its size on disk; a random one is stored as it is; both read back byte for byte.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let repetitive: Vec<u8> = (0..65_536u32).map(|i| (i % 251) as u8).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<u8> = (0..65_536)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut w = PartitionWriter::open(dir, 1 << 20).unwrap();
    for v in [&repetitive, &random] {
        let r = NewRecord {
            timestamp_ms: 7,
            format: 3.into(),
            key: b"k",
            value: v,
        };
        w.append(&[r]).unwrap();
    }
    drop(w);
    let len = fs::metadata(segment_path(dir, 0)).unwrap().len();
    assert!(len < 65_536 + 65_536 / 10, "{len} bytes on disk");
    assert!(len > 65_536, "the random value was not kept whole: {len}");
    let back = read_from(dir, 0);
    assert_eq!(
        (back[0].value == repetitive, back[1].value == random),
        (true, true)
    );
    assert_eq!(
        (back[1].offset.0, back[1].timestamp_ms, &back[1].key[..]),
        (1, 7, &b"k"[..])
    );
}
