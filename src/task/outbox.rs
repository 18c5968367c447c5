//! The transactional outbox: every outgoing record of a batch is committed
//! in the batch's `WriteBatch` (column family `pending`), then shipped to
//! its log, then forgotten in the next commit. Only committed work is ever
//! shipped; a crash can repeat a suffix of it, never send what was not
//! committed.

use super::faults::{CrashPoint, Faults};
use super::TaskError;
use crate::core::codec::{self, Format};
use crate::core::Partition;
use crate::core::{Effect, Out, Stamp};
use crate::log::now_ms;
use crate::log::{NewRecord, Sink, Topic};

/// An outgoing record, as kept in the `pending` column family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pending {
    pub(super) topic: Topic,
    pub(super) partition: Partition,
    pub(super) format: Format,
    pub(super) key: Vec<u8>,
    pub(super) value: Vec<u8>,
}

impl Pending {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(10 + self.key.len() + self.value.len());
        v.push(self.topic.as_u8());
        v.extend_from_slice(&self.partition.0.to_be_bytes());
        v.push(self.format.as_u8());
        v.extend_from_slice(&(self.key.len() as u32).to_be_bytes());
        v.extend_from_slice(&self.key);
        v.extend_from_slice(&self.value);
        v
    }

    pub(super) fn decode(b: &[u8]) -> Option<Pending> {
        let klen = u32::from_be_bytes(b.get(6..10)?.try_into().ok()?) as usize;
        Some(Pending {
            topic: Topic::from_u8(*b.first()?)?,
            partition: Partition(u32::from_be_bytes(b.get(1..5)?.try_into().ok()?)),
            format: Format::from_u8(*b.get(5)?)?,
            key: b.get(10..10 + klen)?.to_vec(),
            value: b.get(10 + klen..)?.to_vec(),
        })
    }

    /// A step's outgoing effects as `effects` records: per destination
    /// partition in the order they were emitted, several to a record (at
    /// most [`EFFECTS_PER_RECORD`], and a record is closed once its
    /// effects carry [`ITEMS_PER_RECORD`] targets or posts). One record per
    /// effect would cost a log record (a broker message in Kafka mode) and
    /// a `pending` write each; a follow's two effects were most of them.
    /// Every record carries `stamp`, the sender and its owner's epoch
    /// (see [`crate::core::fence`]), and keeps it when re-shipped.
    pub(super) fn effects(outs: Vec<Out>, stamp: Stamp) -> Vec<Pending> {
        // (partition, effects, items) per open record, in order of first use.
        let mut open: Vec<(Partition, Vec<Effect>, usize)> = Vec::new();
        let mut records = Vec::new();
        let close = |partition: Partition, effects: Vec<Effect>| {
            let (format, value) = codec::encode_effects(stamp, &effects);
            Pending {
                topic: Topic::Effects,
                partition,
                format,
                key: effects[0].key_user().to_string().into_bytes(),
                value,
            }
        };
        for out in outs {
            let i = match open.iter().position(|(p, ..)| *p == out.partition) {
                Some(i) => i,
                None => {
                    open.push((out.partition, Vec::new(), 0));
                    open.len() - 1
                }
            };
            let (partition, effects, items) = &mut open[i];
            *items += items_of(&out.effect);
            effects.push(out.effect);
            if effects.len() >= EFFECTS_PER_RECORD || *items >= ITEMS_PER_RECORD {
                records.push(close(*partition, std::mem::take(effects)));
                *items = 0;
            }
        }
        records.extend(
            open.into_iter()
                .filter(|(_, effects, _)| !effects.is_empty())
                .map(|(partition, effects, _)| close(partition, effects)),
        );
        records
    }
}

/// Effects per `effects` record at most.
pub(super) const EFFECTS_PER_RECORD: usize = 256;

/// Targets and posts per `effects` record before it is closed: with the
/// fan-out chunk (1,024 targets) and the inbox cap (800 posts) on top, a
/// record stays near 100 KB, far under the topics' record limit.
pub(super) const ITEMS_PER_RECORD: usize = 4096;

/// What an effect carries: its targets or posts (at least 1).
fn items_of(e: &Effect) -> usize {
    match e {
        Effect::Deliver { targets, .. } => targets.len(),
        Effect::Retract { targets, .. } => targets.len(),
        Effect::Backfill { posts, .. }
        | Effect::Copy { posts, .. }
        | Effect::Refilled { posts, .. } => posts.len(),
        Effect::Pull { targets, posts, .. } => targets.len() + posts.len(),
        Effect::FollowerAdded { .. }
        | Effect::FollowerRemoved { .. }
        | Effect::CopyPost { .. }
        | Effect::PullThreshold { .. }
        | Effect::Refill { .. }
        | Effect::RepostOf { .. }
        | Effect::Reposted { .. }
        | Effect::Unrepost { .. }
        | Effect::RepostDir { .. }
        | Effect::Blocked { .. }
        | Effect::Refollowed { .. }
        | Effect::LikeOf { .. }
        | Effect::LikeLive { .. }
        | Effect::ReplyOf { .. }
        | Effect::ReplyDir { .. }
        | Effect::MentionOf { .. } => 1,
    }
    .max(1)
}

/// Appends records to their logs, preserving order per destination, and
/// returns once they are durable.
pub(super) fn ship(
    sink: &mut dyn Sink,
    pending: &[Pending],
    faults: &mut dyn Faults,
) -> Result<(), TaskError> {
    if !pending.is_empty() && faults.crash_at(CrashPoint::BeforeShip) {
        return Err(TaskError::Crashed(CrashPoint::BeforeShip));
    }
    let mut groups: Vec<((Topic, Partition), Vec<&Pending>)> = Vec::new();
    for rec in pending {
        let dest = (rec.topic, rec.partition);
        match groups.iter_mut().find(|(d, _)| *d == dest) {
            Some((_, g)) => g.push(rec),
            None => groups.push((dest, vec![rec])),
        }
    }
    let ts = now_ms();
    for (i, ((topic, partition), recs)) in groups.iter().enumerate() {
        if i > 0 && faults.crash_at(CrashPoint::MidShip) {
            return Err(TaskError::Crashed(CrashPoint::MidShip));
        }
        let records: Vec<NewRecord<'_>> = recs
            .iter()
            .map(|r| NewRecord {
                timestamp_ms: ts,
                format: r.format.into(),
                key: &r.key,
                value: &r.value,
            })
            .collect();
        sink.append(*topic, *partition, &records)?;
    }
    sink.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::codec::decode_effects;
    use crate::core::event::{PostId, Ts, UserId};
    use crate::core::position::Version;

    fn removed(author: u64) -> Effect {
        Effect::FollowerRemoved {
            author: UserId(author),
            follower: UserId(1),
            version: Version(1),
        }
    }

    // Proves a step's effects reach each partition in the order they were emitted, all of them, in records closed at the effect and item limits, each stamped with its sender.
    #[test]
    fn effects_are_grouped_per_partition_in_order_and_chunked() {
        let mut outs = Vec::new();
        let mut sent: Vec<Vec<Effect>> = vec![Vec::new(); 3];
        for i in 0..(EFFECTS_PER_RECORD as u64 * 2 + 5) {
            let partition = Partition((i % 3) as u32);
            let effect = if i % 7 == 0 {
                Effect::Deliver {
                    author: UserId(i + 1),
                    post_id: PostId(i + 1),
                    ts: Ts(i),
                    targets: vec![(UserId(2), Version(1)); 1000],
                }
            } else {
                removed(i + 1)
            };
            sent[partition.index()].push(effect.clone());
            outs.push(Out { partition, effect });
        }
        let stamp = Stamp {
            from: Partition(2),
            epoch: crate::core::Epoch(9),
        };
        let records = Pending::effects(outs, stamp);
        let mut got: Vec<Vec<Effect>> = vec![Vec::new(); 3];
        for r in &records {
            assert_eq!(
                (r.topic, r.format),
                (Topic::Effects, Format::StampedEffects)
            );
            let envelope = decode_effects(r.format.as_u8(), &r.value).expect("decodes");
            assert_eq!(envelope.stamp, Some(stamp));
            let effects = envelope.effects;
            assert!(effects.len() <= EFFECTS_PER_RECORD);
            let items: usize = effects.iter().map(items_of).sum();
            let last = items_of(effects.last().expect("not empty"));
            assert!(
                items - last < ITEMS_PER_RECORD,
                "closed late: {items} items"
            );
            assert_eq!(r.key, effects[0].key_user().to_string().into_bytes());
            got[r.partition.index()].extend(effects);
        }
        assert_eq!(got, sent);
        // The 1,000-target deliveries close records by items, before 256 effects.
        assert!(records.len() > 3, "{} records", records.len());
        assert!(Pending::effects(Vec::new(), stamp).is_empty());
    }
}
