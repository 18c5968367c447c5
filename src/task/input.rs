//! One input record through the core: decode it (a record that is not a
//! valid message becomes a dead letter), forward an event that arrived in
//! a partition that does not own its actor, skip a forwarded copy already
//! applied, fence an `effects` record of an owner older than one already
//! applied from its sender (listed in the dead-letter log), and apply the
//! rest.

use super::outbox::Pending;
use crate::core::codec::{self, EffectsError, Envelope, Format, Forwarded, Marker};
use crate::core::event::Event;
use crate::core::fence::{self, Admission, Stamp};
use crate::core::kv::{Cf, Kv, KvError, Txn};
use crate::core::metrics::StepStats;
use crate::core::partition::partition_for;
use crate::core::Partition;
use crate::core::{self, Applied, Ctx, Out, Version};
use crate::log::{Record, Topic};
use crate::state::meta::{self, meta_u64};

/// A dead-letter record for `rec` read from `topic[partition]`.
pub(super) fn dead_letter(
    topic: &str,
    partition: Partition,
    rec: &Record,
    reason: &str,
) -> Pending {
    let source = serde_json::json!({"topic": topic, "partition": partition, "offset": rec.offset});
    let format = rec.format.name();
    Pending {
        topic: Topic::DeadLetter,
        partition: Partition(0),
        format: Format::DeadLetter,
        key: format!("{topic}/{partition}/{}", rec.offset).into_bytes(),
        value: codec::dead_letter_value(reason, source, format, &rec.value),
    }
}

/// One input record to apply; an effects record comes decoded (or with
/// why it does not decode).
pub(super) enum Input {
    Event(Record),
    Effect(Record, Result<Envelope, EffectsError>),
}

/// Applies one input record; a record that is not a valid message becomes
/// a dead letter. What it did (nothing, for a record not applied).
pub(super) fn apply_record<K: Kv + ?Sized>(
    ctx: &Ctx,
    txn: &mut Txn<'_, K>,
    input: Input,
    out: &mut Vec<Out>,
    pending: &mut Vec<Pending>,
    stats: &mut StepStats,
) -> Result<Applied, KvError> {
    let p = ctx.partition;
    let applied = match input {
        Input::Effect(rec, decoded) => match decoded {
            Ok(envelope) => {
                if let Admission::Fenced { applied } = fence::admit(txn, envelope.stamp)? {
                    stats.fenced += 1;
                    if let Some(stamp) = envelope.stamp {
                        pending.push(fenced(p, &rec, stamp, applied));
                    }
                    return Ok(Applied::default());
                }
                let mut all = Applied::default();
                for e in &envelope.effects {
                    stats.effects += 1;
                    all.add(core::apply_effect(txn, ctx, e, out)?);
                }
                all
            }
            Err(reason) => {
                stats.dead_letters += 1;
                pending.push(dead_letter("effects", p, &rec, &reason.to_string()));
                return Ok(Applied::default());
            }
        },
        Input::Event(rec) => {
            let rec = &rec;
            // A forwarded event: skip a copy already applied, else unwrap it.
            let forwarded;
            let (format, payload, forwarded_from) =
                if let Some(f) = codec::decode_forwarded(rec.format, &rec.value) {
                    match f {
                        Ok(f) => {
                            let mark = meta::forwarded_from(f.from_partition);
                            if f.from_offset < meta_u64(txn, &mark)? {
                                stats.duplicates += 1;
                                return Ok(Applied::default());
                            }
                            txn.put(Cf::Meta, mark, (f.from_offset + 1).to_be_bytes().to_vec());
                            forwarded = f;
                            (
                                Marker::from(forwarded.format),
                                &forwarded.payload[..],
                                Some(forwarded.from_partition),
                            )
                        }
                        Err(e) => {
                            stats.dead_letters += 1;
                            let reason = format!("invalid forwarded record: {e}");
                            pending.push(dead_letter("events", p, rec, &reason));
                            return Ok(Applied::default());
                        }
                    }
                } else {
                    (rec.format, &rec.value[..], None)
                };
            match codec::decode_event(format, payload) {
                Ok(ev) if ctx.owns(ev.actor()) => {
                    stats.count_event(ev.kind());
                    core::apply_event(txn, ctx, &ev, Version::of(rec.offset), out)?
                }
                Ok(ev) if forwarded_from.is_none() => {
                    stats.forwarded += 1;
                    pending.push(forward(ctx, &ev, rec));
                    return Ok(Applied::default());
                }
                Ok(ev) => {
                    // Forwarded by a partition that counts partitions differently.
                    stats.dead_letters += 1;
                    pending.push(dead_letter(
                        "events",
                        p,
                        rec,
                        &misrouted(&ev, ctx.partitions),
                    ));
                    return Ok(Applied::default());
                }
                Err(e) => {
                    stats.dead_letters += 1;
                    pending.push(dead_letter("events", p, rec, &e.to_string()));
                    return Ok(Applied::default());
                }
            }
        }
    };
    stats.delivered += applied.delivered;
    stats.removed += applied.removed;
    Ok(applied)
}

/// The effects of one `effects` record and who sent them, or why it holds
/// none.
pub(super) fn decode_effects(rec: &Record) -> Result<Envelope, EffectsError> {
    codec::decode_effects(rec.format, &rec.value)
}

/// The dead-letter record that lists a fenced `effects` record read from
/// `effects[partition]`: its reason names the sender, its epoch and the
/// newer epoch already applied; the record itself is the payload.
fn fenced(partition: Partition, rec: &Record, stamp: Stamp, applied: core::Epoch) -> Pending {
    let reason = format!(
        "fenced: sent by {stamp}, but records of epoch {applied} from partition {} were applied \
         already (an owner that had lost the partition shipped it late; its successor answered \
         the same inputs)",
        stamp.from
    );
    dead_letter("effects", partition, rec, &reason)
}

fn misrouted(ev: &Event, partitions: u32) -> String {
    format!(
        "forwarded to partition that does not own actor {} (it belongs to partition {} of {partitions})",
        ev.actor(),
        partition_for(ev.actor(), partitions)
    )
}

/// An event that arrived in this partition but belongs to another: its
/// record, unchanged, wrapped with where it came from, for the owner's
/// `events` partition (where it gets a version from the owner's own log).
fn forward(ctx: &Ctx, ev: &Event, rec: &Record) -> Pending {
    let actor = ev.actor();
    let (format, value) = codec::encode_forwarded(&Forwarded {
        from_partition: ctx.partition,
        from_offset: rec.offset.0,
        format: rec.format.as_u8(),
        payload: rec.value.clone(),
    });
    Pending {
        topic: Topic::Events,
        partition: partition_for(actor, ctx.partitions),
        format,
        key: actor.to_string().into_bytes(),
        value,
    }
}
