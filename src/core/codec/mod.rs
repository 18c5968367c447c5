//! Wire formats, and the explicit marker that tells them apart.
//!
//! Every record carries a [`Format`] byte beside its value (a field of the
//! embedded log's record header; a `feedlog-format` header in Kafka). The
//! decoder dispatches on that byte and never guesses from the payload.
//!
//! - [`Format::Json`]: the interchange format any producer can write, one
//!   object per record, exactly as in docs/events.md.
//! - [`Format::Postcard`]: compact events for Rust producers, and what
//!   feedlog's own tools write (postcard 1.x, whose wire format is stable).
//! - [`Format::StampedEffects`]: feedlog's internal messages to one
//!   partition (`effects` topic), in postcard, with the sender's partition
//!   and owner epoch (see [`crate::fence`]): what this version writes.
//! - [`Format::PostcardForwarded`]: events forwarded to the partition that
//!   owns their actor, in postcard.
//! - [`Format::PostcardEffects`]: internal messages without a stamp, as the
//!   previous version wrote them; still read (as unstamped, never fenced).
//! - [`Format::Bincode`], [`Format::Effect`], [`Format::Effects`] and
//!   [`Format::Forwarded`]: the same in bincode 2 (standard config), as
//!   earlier versions wrote them. They are still read, never written (bincode
//!   events from outside producers excepted), so a log from before the change
//!   replays unchanged. This module is the only place that names either codec.
//! - [`Format::DeadLetter`]: a JSON dead-letter record.
//!
//! Postcard and bincode encode an enum by its variant's index and a struct
//! by its fields' order: the variants of [`Event`] and [`Effect`] and the
//! fields of every encoded type are **append-only** — a new variant or
//! field goes at the end, none is ever removed or reordered — and the
//! golden-bytes tests (`golden.rs`, `golden_bytes_*`) pin every record kind
//! of every codec, so a change that would misread an old log fails them.

use crate::disposition::Disposition;
use crate::effect::Effect;
use crate::event::{Event, EventKind, InvalidEvent, SCHEMA_VERSION};
use crate::fence::{Epoch, Stamp};
use crate::partition::Partition;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

mod json;
use json::decode_json;
pub use json::event_to_json;

/// The format marker stored with every record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Format {
    /// A JSON event.
    Json = 1,
    /// A bincode-encoded [`Event`].
    Bincode = 2,
    /// A bincode-encoded internal message.
    Effect = 3,
    /// A JSON dead-letter record.
    DeadLetter = 4,
    /// An event forwarded from the partition it arrived in to the one that
    /// owns its actor: a bincode [`Forwarded`].
    Forwarded = 5,
    /// Internal messages to one partition, in order: a bincode sequence of
    /// effects (what a processing step sends there, in chunks).
    Effects = 6,
    /// A postcard-encoded [`Event`].
    Postcard = 7,
    /// [`Format::Effects`] in postcard: what this version writes.
    PostcardEffects = 8,
    /// [`Format::Forwarded`] in postcard: what this version writes.
    PostcardForwarded = 9,
    /// [`Format::PostcardEffects`] with the sender's stamp (a postcard
    /// [`StampedEffects`]): what this version writes to `effects`.
    StampedEffects = 10,
}

impl Format {
    /// Every format, in marker order.
    pub fn all() -> impl Iterator<Item = Format> {
        std::iter::successors(Some(Format::Json), |f| f.next())
    }

    /// The format after this one in [`Format::all`] (an exhaustive match:
    /// a new format cannot be left out).
    fn next(self) -> Option<Format> {
        match self {
            Format::Json => Some(Format::Bincode),
            Format::Bincode => Some(Format::Effect),
            Format::Effect => Some(Format::DeadLetter),
            Format::DeadLetter => Some(Format::Forwarded),
            Format::Forwarded => Some(Format::Effects),
            Format::Effects => Some(Format::Postcard),
            Format::Postcard => Some(Format::PostcardEffects),
            Format::PostcardEffects => Some(Format::PostcardForwarded),
            Format::PostcardForwarded => Some(Format::StampedEffects),
            Format::StampedEffects => None,
        }
    }

    /// The marker byte.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// Reads a marker byte; `None` for a byte no format owns.
    pub fn from_u8(b: u8) -> Option<Format> {
        Format::all().find(|f| f.as_u8() == b)
    }

    /// The name used in Kafka headers and messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Bincode => "bincode",
            Format::Effect => "effect",
            Format::DeadLetter => "dead-letter",
            Format::Forwarded => "forwarded",
            Format::Effects => "effects",
            Format::Postcard => "postcard",
            Format::PostcardEffects => "effects-postcard",
            Format::PostcardForwarded => "forwarded-postcard",
            Format::StampedEffects => "effects-stamped",
        }
    }

    /// Inverse of [`Format::name`] (Kafka record headers).
    pub fn from_name(name: &str) -> Option<Format> {
        Format::all().find(|f| f.name() == name)
    }
}

/// A record's format marker as read from a log: a format this version
/// knows, or a byte none owns (a record of a later version, or damaged:
/// it is set aside in the dead-letter log, never guessed at).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Marker {
    /// A known format.
    Known(Format),
    /// A byte no format owns.
    Unknown(u8),
}

impl Marker {
    /// The format, when known.
    pub fn format(self) -> Option<Format> {
        match self {
            Marker::Known(f) => Some(f),
            Marker::Unknown(_) => None,
        }
    }

    /// The marker byte as stored.
    pub fn as_u8(self) -> u8 {
        match self {
            Marker::Known(f) => f.as_u8(),
            Marker::Unknown(b) => b,
        }
    }

    /// The format's name, or `unknown`.
    pub fn name(self) -> &'static str {
        self.format().map_or("unknown", Format::name)
    }
}

impl From<Format> for Marker {
    fn from(f: Format) -> Marker {
        Marker::Known(f)
    }
}

impl From<u8> for Marker {
    /// Reads a stored marker byte.
    fn from(b: u8) -> Marker {
        Format::from_u8(b).map_or(Marker::Unknown(b), Marker::Known)
    }
}

/// An input event that arrived in a partition that does not own its actor,
/// on its way to the owner's `events` partition. The source position makes
/// a re-shipped copy recognisable: the owner keeps, per source partition,
/// the highest source offset it has applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forwarded {
    /// The `events` partition it arrived in.
    pub from_partition: Partition,
    /// Its offset there.
    pub from_offset: u64,
    /// The original record's format marker.
    pub format: u8,
    /// The original record's value, unchanged.
    pub payload: Vec<u8>,
}

/// Every event kind's JSON spelling, for the error that names them.
fn known_kinds() -> String {
    let kinds: Vec<&str> = EventKind::all().map(EventKind::as_str).collect();
    kinds.join(", ")
}

/// Why a record could not be turned into an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The format byte names no format, or one that is not an event format.
    #[error("unknown or unexpected format marker {0}")]
    Format(u8),
    /// Not valid JSON, or a field has the wrong JSON type.
    #[error("invalid JSON: {0}")]
    Json(String),
    /// Not a valid bincode payload.
    #[error("invalid bincode: {0}")]
    Bincode(String),
    /// Not a valid postcard payload.
    #[error("invalid postcard: {0}")]
    Postcard(String),
    /// `type` is missing or names no event kind.
    #[error("unknown event type {0:?} (expected one of {kinds})", kinds = known_kinds())]
    UnknownType(String),
    /// A field the event kind needs is absent.
    #[error("{kind}: missing field `{field}`")]
    MissingField {
        /// The event kind.
        kind: &'static str,
        /// The absent field.
        field: &'static str,
    },
    /// A field the event kind needs has the wrong JSON type or range.
    #[error(
        "{kind}: field `{field}` must be a whole number from {lowest} to 18446744073709551615{}, got {got}",
        id_forms(.field)
    )]
    BadField {
        /// The event kind.
        kind: &'static str,
        /// The field.
        field: &'static str,
        /// The lowest valid value: 1 for ids and the schema version, 0 for
        /// a timestamp.
        lowest: u64,
        /// What it held, as JSON.
        got: String,
    },
    /// A field that is not a number has the wrong JSON shape (a post's
    /// `reply_to` or `mentions`).
    #[error("{kind}: field `{field}` must be {expected}, got {got}")]
    BadShape {
        /// The event kind.
        kind: &'static str,
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it held, as JSON.
        got: String,
    },
    /// `v` names a schema version this build does not read.
    #[error("unsupported schema version {0} (this build reads {SCHEMA_VERSION})")]
    Version(u64),
    /// Decoded, but not a valid event.
    #[error(transparent)]
    Invalid(#[from] InvalidEvent),
}

impl DecodeError {
    /// A record that does not decode stays so: it is set aside.
    pub fn disposition(&self) -> Disposition {
        Disposition::Skip
    }
}

/// How an id may be written, for [`DecodeError::BadField`]'s reason: ids
/// may be strings too; `ts` and `v` are numbers only.
fn id_forms(field: &str) -> &'static str {
    if !matches!(field, "ts" | "v" | "until" | "read_up_to.ts") {
        " (a JSON number, or a string of its decimal digits)"
    } else {
        ""
    }
}

/// One `effects` record: the effects to one partition, in the order they
/// are to be applied, and who sent them (`None` for records written before
/// stamps existed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The sender and its owner's epoch.
    pub stamp: Option<Stamp>,
    /// The effects (never empty).
    pub effects: Vec<Effect>,
}

/// The postcard layout of a [`Format::StampedEffects`] record (fields are
/// append-only, like every encoded type).
#[derive(Serialize, Deserialize)]
struct StampedEffects {
    from: Partition,
    epoch: Epoch,
    effects: Vec<Effect>,
}

/// Why an `effects` record holds no effects to apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EffectsError {
    /// The marker names no effects format.
    #[error(
        "effects record has format marker {0}, expected {stamped} (or {postcard}, {effects}, {effect} of earlier versions)",
        stamped = Format::StampedEffects.as_u8(),
        postcard = Format::PostcardEffects.as_u8(),
        effects = Format::Effects.as_u8(),
        effect = Format::Effect.as_u8()
    )]
    Format(u8),
    /// The value does not decode in its format.
    #[error("invalid effects ({codec}): {reason}")]
    Decode {
        /// The codec tried.
        codec: &'static str,
        /// What the decoder said.
        reason: String,
    },
    /// A well-formed record that carries no effect.
    #[error("an effects record with no effects")]
    Empty,
}

impl EffectsError {
    /// An `effects` record that does not decode stays so: it is set aside.
    pub fn disposition(&self) -> Disposition {
        Disposition::Skip
    }
}

/// One `effects` record's value, stamped with its sender, with its marker
/// ([`Format::StampedEffects`]).
pub fn encode_effects(stamp: Stamp, effects: &[Effect]) -> (Format, Vec<u8>) {
    #[derive(Serialize)]
    struct Borrowed<'a> {
        from: Partition,
        epoch: Epoch,
        effects: &'a [Effect],
    }
    let value = encode_compact(&Borrowed {
        from: stamp.from,
        epoch: stamp.epoch,
        effects,
    });
    (Format::StampedEffects, value)
}

/// The effects of one `effects` record and who sent them: a stamped
/// sequence ([`Format::StampedEffects`]), or, as earlier versions wrote
/// them, an unstamped sequence ([`Format::PostcardEffects`],
/// [`Format::Effects`]) or a single effect ([`Format::Effect`]).
pub fn decode_effects(format: impl Into<Marker>, value: &[u8]) -> Result<Envelope, EffectsError> {
    let format: Marker = format.into();
    let bad = |e: BadPayload| EffectsError::Decode {
        codec: e.codec,
        reason: e.reason,
    };
    let envelope = match format.format() {
        Some(Format::StampedEffects) => {
            let r: StampedEffects = decode_compact(value).map_err(bad)?;
            Envelope {
                stamp: Some(Stamp {
                    from: r.from,
                    epoch: r.epoch,
                }),
                effects: r.effects,
            }
        }
        Some(Format::PostcardEffects) => Envelope {
            stamp: None,
            effects: decode_compact(value).map_err(bad)?,
        },
        Some(Format::Effects) => Envelope {
            stamp: None,
            effects: decode_bincode(value).map_err(bad)?,
        },
        Some(Format::Effect) => Envelope {
            stamp: None,
            effects: vec![decode_bincode(value).map_err(bad)?],
        },
        _ => return Err(EffectsError::Format(format.as_u8())),
    };
    if envelope.effects.is_empty() {
        return Err(EffectsError::Empty);
    }
    Ok(envelope)
}

/// One `effects` record's value without a stamp ([`Format::PostcardEffects`]),
/// as the previous version wrote it: for tests of reading old logs.
pub fn encode_unstamped_effects(effects: &[Effect]) -> (Format, Vec<u8>) {
    (Format::PostcardEffects, encode_compact(&effects))
}

/// A forwarded event's record value, with its marker
/// ([`Format::PostcardForwarded`]).
pub fn encode_forwarded(forwarded: &Forwarded) -> (Format, Vec<u8>) {
    (Format::PostcardForwarded, encode_compact(forwarded))
}

/// Unwraps a forwarded event ([`Format::PostcardForwarded`] or
/// [`Format::Forwarded`]); `None` when `format` is no forwarding format.
pub fn decode_forwarded(
    format: impl Into<Marker>,
    value: &[u8],
) -> Option<Result<Forwarded, BadPayload>> {
    match format.into().format() {
        Some(Format::PostcardForwarded) => Some(decode_compact(value)),
        Some(Format::Forwarded) => Some(decode_bincode(value)),
        _ => None,
    }
}

/// Decodes and validates one record value with the given marker.
pub fn decode_event(format: impl Into<Marker>, value: &[u8]) -> Result<Event, DecodeError> {
    let format: Marker = format.into();
    let event = match format.format() {
        Some(Format::Json) => decode_json(value)?,
        Some(Format::Postcard) => {
            decode_compact::<Event>(value).map_err(|e| DecodeError::Postcard(e.reason))?
        }
        Some(Format::Bincode) => {
            decode_bincode::<Event>(value).map_err(|e| DecodeError::Bincode(e.reason))?
        }
        _ => return Err(DecodeError::Format(format.as_u8())),
    };
    event.validate()?;
    Ok(event)
}

/// Encodes an event in the compact binary format (marker
/// [`Format::Postcard`]).
pub fn event_to_postcard(event: &Event) -> Vec<u8> {
    encode_compact(event)
}

/// Encodes an event in bincode (marker [`Format::Bincode`]), the compact
/// format of earlier versions, still read: for producers that write it.
pub fn event_to_bincode(event: &Event) -> Vec<u8> {
    bincode::serde::encode_to_vec(event, bincode::config::standard())
        .expect("bincode encoding of an in-memory value cannot fail")
}

/// The most payload bytes a dead-letter record carries; a longer payload is cut
/// to this excerpt (its full size is recorded), so a dead letter always fits
/// the dead-letter log whatever was rejected.
pub const DEAD_LETTER_EXCERPT: usize = 64 << 10;

/// A dead-letter record's value: the reason, where the record came from, its
/// format, and the payload (as text when it is UTF-8, else as hex). A payload
/// over [`DEAD_LETTER_EXCERPT`] bytes is cut to that excerpt, with
/// `"payload_bytes"` (its size) and `"payload_truncated": true`.
pub fn dead_letter_value(
    reason: &str,
    source: serde_json::Value,
    format: &str,
    payload: &[u8],
) -> Vec<u8> {
    dead_letter_excerpt(reason, source, format, payload, payload.len())
}

/// [`dead_letter_value`] of a payload of which only the first bytes were
/// kept: `size` is the whole payload's size.
pub fn dead_letter_excerpt(
    reason: &str,
    source: serde_json::Value,
    format: &str,
    payload: &[u8],
    size: usize,
) -> Vec<u8> {
    let mut body = serde_json::json!({"reason": reason, "source": source, "format": format});
    let mut payload = &payload[..payload.len().min(DEAD_LETTER_EXCERPT)];
    if payload.len() < size {
        body["payload_bytes"] = size.into();
        body["payload_truncated"] = true.into();
        // Cut at a character boundary, so a text payload stays text.
        if let Err(e) = std::str::from_utf8(payload) {
            if e.error_len().is_none() {
                payload = &payload[..e.valid_up_to()];
            }
        }
    }
    match std::str::from_utf8(payload) {
        Ok(s) => body["payload"] = s.into(),
        Err(_) => {
            body["payload_hex"] = payload
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
                .into()
        }
    }
    body.to_string().into_bytes()
}

/// Encodes any serde value in postcard.
pub fn encode_compact<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_stdvec(value).expect("postcard encoding of an in-memory value cannot fail")
}

/// A value that does not decode in its codec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {codec}: {reason}")]
pub struct BadPayload {
    /// The codec tried (`postcard`, `bincode`).
    pub codec: &'static str,
    /// What the decoder said.
    pub reason: String,
}

impl BadPayload {
    /// A bad record stays bad: it is set aside.
    pub fn disposition(&self) -> Disposition {
        Disposition::Skip
    }
}

/// Decodes a postcard value, refusing trailing bytes.
pub fn decode_compact<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BadPayload> {
    let bad = |reason| BadPayload {
        codec: "postcard",
        reason,
    };
    let (value, rest) = postcard::take_from_bytes(bytes).map_err(|e| bad(e.to_string()))?;
    if !rest.is_empty() {
        return Err(bad(format!("{} trailing bytes", rest.len())));
    }
    Ok(value)
}

/// Decodes a bincode value (standard config) as earlier versions wrote it,
/// refusing trailing bytes.
fn decode_bincode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BadPayload> {
    let bad = |reason| BadPayload {
        codec: "bincode",
        reason,
    };
    let (value, used) = bincode::serde::decode_from_slice(bytes, bincode::config::standard())
        .map_err(|e| bad(e.to_string()))?;
    if used != bytes.len() {
        return Err(bad(format!("{} trailing bytes", bytes.len() - used)));
    }
    Ok(value)
}

#[cfg(test)]
mod golden;
#[cfg(test)]
mod tests;
