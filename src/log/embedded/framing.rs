//! The bytes of one record in a segment, in either framing (the layouts are drawn in
//! `segment.rs`'s module docs): encoding, and parsing what a cursor has buffered. Pure:
//! no I/O.

use super::{NewRecord, Record};

/// Bytes of `body_len` + `crc32` before each body (fixed framing).
pub(super) const HEADER: usize = 8;
/// Bytes of offset + timestamp_ms + format + key_len at the start of each body (fixed
/// framing): also the framing a record's size is counted with against the limits,
/// whatever the framing it is stored in.
pub const BODY_FIXED: usize = 21;
/// The first byte of a compact record.
pub(super) const COMPACT: u8 = 0x82;
/// The shortest compact record (empty key and value).
pub(super) const COMPACT_MIN: usize = 1 + 1 + 4 + 5;
/// A compact body's fields besides key and value take at most this much more than
/// [`BODY_FIXED`] (varints of 64-bit values take up to 10 bytes).
const COMPACT_SLACK: usize = 16;
/// Values at least this long are stored compressed when that is smaller.
const COMPRESS_FROM: usize = 64;
/// `flags` bit: the value is a Zstandard frame after its raw length.
const ZSTD: u8 = 1;
/// Zstandard's fastest regular level: a log is written once and read a few times.
const ZSTD_LEVEL: i32 = 1;

/// How a writer frames the records it appends (see the module docs); readers read both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Layout 1: what earlier versions write and read.
    Fixed,
    /// Layout 2: relative offsets, varints, large values compressed.
    Compact,
}
/// The largest body (fixed fields + key + value) the format allows: the hard limit
/// every reader checks. Producers enforce a smaller, configurable limit (see `topics/`).
pub const MAX_RECORD_BYTES: usize = 16 << 20;
/// The offset of the valid fixed record at the start of `b`, if one is there.
pub(super) fn fixed_record_at(b: &[u8]) -> Option<u64> {
    if b.len() < HEADER + BODY_FIXED {
        return None;
    }
    let body_len = be_u32(b) as usize;
    if !(BODY_FIXED..=MAX_RECORD_BYTES).contains(&body_len) || HEADER + body_len > b.len() {
        return None;
    }
    let body = &b[HEADER..HEADER + body_len];
    let valid = be_u32(&body[17..]) as usize <= body_len - BODY_FIXED
        && crc32fast::hash(body) == be_u32(&b[4..]);
    valid.then(|| be_u64(body))
}

/// The offset of the valid compact record at the start of `b` in the segment whose
/// first offset is `base`, if one is there.
pub(super) fn compact_record_at(b: &[u8], base: u64) -> Option<u64> {
    let (body_len, crc, header) = compact_header(b)?;
    let body = b.get(header..header.checked_add(body_len)?)?;
    if crc32fast::hash(body) != crc {
        return None;
    }
    base.checked_add(compact_body(body).ok()?.rel)
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

pub(super) fn be_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

/// Appends record `r` with `offset` to `buf`, framed as `framing` says, in the segment
/// whose first offset is `base`.
pub(super) fn encode(
    buf: &mut Vec<u8>,
    framing: Framing,
    base: u64,
    offset: u64,
    r: &NewRecord<'_>,
) {
    match framing {
        Framing::Fixed => encode_fixed(buf, offset, r),
        Framing::Compact => encode_compact(buf, offset - base, r),
    }
}

fn encode_fixed(buf: &mut Vec<u8>, offset: u64, r: &NewRecord<'_>) {
    let start = buf.len();
    let body_len = BODY_FIXED + r.key.len() + r.value.len();
    buf.extend_from_slice(&(body_len as u32).to_be_bytes());
    buf.extend_from_slice(&[0; 4]); // checksum, filled in below
    buf.extend_from_slice(&offset.to_be_bytes());
    buf.extend_from_slice(&r.timestamp_ms.to_be_bytes());
    buf.push(r.format.as_u8());
    buf.extend_from_slice(&(r.key.len() as u32).to_be_bytes());
    buf.extend_from_slice(r.key);
    buf.extend_from_slice(r.value);
    let crc = crc32fast::hash(&buf[start + HEADER..]);
    buf[start + 4..start + HEADER].copy_from_slice(&crc.to_be_bytes());
}

fn encode_compact(buf: &mut Vec<u8>, rel: u64, r: &NewRecord<'_>) {
    let mut body = Vec::with_capacity(COMPACT_SLACK + r.key.len() + r.value.len());
    put_varint(&mut body, rel);
    put_varint(&mut body, r.timestamp_ms);
    body.push(r.format.as_u8());
    let packed = (r.value.len() >= COMPRESS_FROM)
        .then(|| compress(r.value))
        .flatten()
        .filter(|c| c.len() + 5 < r.value.len());
    body.push(if packed.is_some() { ZSTD } else { 0 });
    put_varint(&mut body, r.key.len() as u64);
    body.extend_from_slice(r.key);
    match &packed {
        Some(c) => {
            put_varint(&mut body, r.value.len() as u64);
            body.extend_from_slice(c);
        }
        None => body.extend_from_slice(r.value),
    }
    buf.push(COMPACT);
    put_varint(buf, body.len() as u64);
    buf.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    buf.extend_from_slice(&body);
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// A varint at the start of `b` and its length; `None` when `b` ends inside it or it is
/// longer than 10 bytes.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().take(10).enumerate() {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// The fields of a compact body (checksum already checked): relative offset,
/// timestamp, format, key and stored value, and whether the value is compressed.
struct CompactBody<'a> {
    rel: u64,
    timestamp_ms: u64,
    format: u8,
    key: &'a [u8],
    value: &'a [u8],
    compressed: bool,
}

/// Why a compact body whose checksum matched is still not a record (every
/// one is corruption: the reader stops and reports it).
#[derive(Debug, PartialEq, Eq)]
enum BadBody {
    /// A field that does not parse (a varint running off the body, say).
    Field(&'static str),
    /// Flag bits this version does not know.
    Flags(u8),
    /// A key longer than the rest of the body.
    KeyLength(u64),
    /// A compressed value that claims more than a record may hold.
    RawLength(u64),
    /// A compressed value Zstandard refuses (its error name).
    Zstd(&'static str),
    /// A compressed value that decompresses to another length than it claims.
    RawSize { got: usize, claimed: u64 },
}

impl std::fmt::Display for BadBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadBody::Field(what) => write!(f, "bad compact record: {what}"),
            BadBody::Flags(flags) => write!(f, "bad compact record: unknown flags {flags:#04x}"),
            BadBody::KeyLength(n) => write!(f, "key length {n} too big"),
            BadBody::RawLength(n) => write!(f, "compressed value of {n} bytes is over the limit"),
            BadBody::Zstd(name) => write!(f, "bad compressed value: {name}"),
            BadBody::RawSize { got, claimed } => {
                write!(f, "compressed value is {got} bytes, not {claimed}")
            }
        }
    }
}

fn compact_body(body: &[u8]) -> Result<CompactBody<'_>, BadBody> {
    let (rel, a) = varint(body).ok_or(BadBody::Field("offset"))?;
    let (timestamp_ms, b) = varint(&body[a..]).ok_or(BadBody::Field("timestamp"))?;
    let at = a + b;
    let (&format, &flags) = match body.get(at..at + 2) {
        Some([f, g]) => (f, g),
        _ => return Err(BadBody::Field("format")),
    };
    if flags & !ZSTD != 0 {
        return Err(BadBody::Flags(flags));
    }
    let (key_len, c) = varint(&body[at + 2..]).ok_or(BadBody::Field("key length"))?;
    let key_at = at + 2 + c;
    if key_len > (body.len() - key_at) as u64 {
        return Err(BadBody::KeyLength(key_len));
    }
    let (key, value) = body[key_at..].split_at(key_len as usize);
    Ok(CompactBody {
        rel,
        timestamp_ms,
        format,
        key,
        value,
        compressed: flags & ZSTD != 0,
    })
}

/// `value` as a Zstandard frame; `None` if the library refuses (never expected).
fn compress(value: &[u8]) -> Option<Vec<u8>> {
    let mut out = vec![0; zstd_safe::compress_bound(value.len())];
    let n = zstd_safe::compress(&mut out[..], value, ZSTD_LEVEL).ok()?;
    out.truncate(n);
    Some(out)
}

/// The raw value of a compressed one (raw length varint + Zstandard frame).
fn decompress(stored: &[u8]) -> Result<Vec<u8>, BadBody> {
    let (raw_len, n) = varint(stored).ok_or(BadBody::Field("compressed value length"))?;
    if raw_len > MAX_RECORD_BYTES as u64 {
        return Err(BadBody::RawLength(raw_len));
    }
    let mut raw = vec![0; raw_len as usize];
    let got = zstd_safe::decompress(&mut raw[..], &stored[n..])
        .map_err(|code| BadBody::Zstd(zstd_safe::get_error_name(code)))?;
    if got as u64 != raw_len {
        return Err(BadBody::RawSize {
            got,
            claimed: raw_len,
        });
    }
    Ok(raw)
}

/// The length, checksum and header length of the compact record at the start of `b`
/// (whose first byte is [`COMPACT`]); `None` when `b` ends inside its header.
fn compact_header(b: &[u8]) -> Option<(usize, u32, usize)> {
    let (body_len, n) = varint(&b[1..])?;
    let at = 1 + n;
    let crc = b.get(at..at + 4)?;
    Some((
        usize::try_from(body_len).unwrap_or(usize::MAX),
        be_u32(crc),
        at + 4,
    ))
}

/// What [`parse`] found at the start of a buffer.
pub(super) enum Parsed {
    /// A valid record and its encoded length.
    Record(Record, usize),
    /// The buffer ends inside the record: it needs at least this many bytes (what is
    /// partial, for a torn tail's reason).
    Short(usize, &'static str),
    /// A record of this length whose checksum does not match.
    BadChecksum(usize),
    /// Not a valid record.
    Invalid(String),
}

/// The record at the start of `b` (at least one byte), which must have offset
/// `expected` in the segment whose first offset is `base`; its key and value are
/// copied out only with `keep`. `Short` only when `b` is shorter than it says.
pub(super) fn parse(b: &[u8], base: u64, expected: u64, keep: bool) -> Parsed {
    if b[0] == COMPACT {
        return parse_compact(b, base, expected, keep);
    }
    if b.len() < HEADER {
        return Parsed::Short(HEADER, "partial record header");
    }
    let body_len = be_u32(b) as usize;
    let crc = be_u32(&b[4..]);
    if !(BODY_FIXED..=MAX_RECORD_BYTES).contains(&body_len) {
        return Parsed::Invalid(format!("bad record length {body_len}"));
    }
    let total = HEADER + body_len;
    if b.len() < total {
        return Parsed::Short(total, "partial record");
    }
    let body = &b[HEADER..total];
    if crc32fast::hash(body) != crc {
        return Parsed::BadChecksum(total);
    }
    let offset = be_u64(body);
    let key_len = be_u32(&body[17..]) as usize;
    if offset != expected {
        return Parsed::Invalid(format!("record has offset {offset}, expected {expected}"));
    }
    if key_len > body_len - BODY_FIXED {
        return Parsed::Invalid(format!("key length {key_len} too big"));
    }
    let (key, value) = body[BODY_FIXED..].split_at(key_len);
    let kept = keep.then(|| (key.to_vec(), value.to_vec()));
    let record = record((offset, be_u64(&body[8..]), body[16]), kept);
    Parsed::Record(record, total)
}

/// A parsed record: offset, timestamp and format, with its key and value
/// when they were copied out (empty when skipped).
fn record(
    (offset, timestamp_ms, format): (u64, u64, u8),
    kv: Option<(Vec<u8>, Vec<u8>)>,
) -> Record {
    let (key, value) = kv.unwrap_or_default();
    Record {
        offset: crate::core::position::Offset(offset),
        timestamp_ms,
        format: format.into(),
        key,
        value,
    }
}

/// The longest compact header: marker, a 10-byte varint, the checksum.
const COMPACT_HEADER_MAX: usize = 1 + 10 + 4;

fn parse_compact(b: &[u8], base: u64, expected: u64, keep: bool) -> Parsed {
    let Some((body_len, crc, header)) = compact_header(b) else {
        return match b.len() {
            n if n >= COMPACT_HEADER_MAX => Parsed::Invalid("bad record length".into()),
            _ => Parsed::Short(COMPACT_HEADER_MAX, "partial record header"),
        };
    };
    if !(5..=MAX_RECORD_BYTES + COMPACT_SLACK).contains(&body_len) {
        return Parsed::Invalid(format!("bad record length {body_len}"));
    }
    let total = header + body_len;
    if b.len() < total {
        return Parsed::Short(total, "partial record");
    }
    let body = &b[header..total];
    if crc32fast::hash(body) != crc {
        return Parsed::BadChecksum(total);
    }
    let f = match compact_body(body) {
        Ok(f) => f,
        Err(bad) => return Parsed::Invalid(bad.to_string()),
    };
    if base.checked_add(f.rel) != Some(expected) {
        let reason = format!("record has offset {base} + {}, expected {expected}", f.rel);
        return Parsed::Invalid(reason);
    }
    let kept = match (keep, f.compressed) {
        (false, _) => None,
        (true, false) => Some((f.key.to_vec(), f.value.to_vec())),
        (true, true) => match decompress(f.value) {
            Ok(v) => Some((f.key.to_vec(), v)),
            Err(bad) => return Parsed::Invalid(bad.to_string()),
        },
    };
    Parsed::Record(record((expected, f.timestamp_ms, f.format), kept), total)
}
