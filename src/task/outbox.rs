//! The transactional outbox: every outgoing record of a batch is committed
//! in the batch's `WriteBatch` (column family `pending`), then shipped to
//! its log, then forgotten in the next commit. Only committed work is ever
//! shipped; a crash can repeat a suffix of it, never send what was not
//! committed.

use super::faults::{CrashPoint, Faults};
use super::TaskError;
use crate::core::codec::{self, Format};
use crate::core::Out;
use crate::log::now_ms;
use crate::log::{NewRecord, Sink, Topic};

/// An outgoing record, as kept in the `pending` column family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pending {
    pub(super) topic: Topic,
    pub(super) partition: u32,
    pub(super) format: Format,
    pub(super) key: Vec<u8>,
    pub(super) value: Vec<u8>,
}

impl Pending {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(10 + self.key.len() + self.value.len());
        v.push(self.topic.as_u8());
        v.extend_from_slice(&self.partition.to_be_bytes());
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
            partition: u32::from_be_bytes(b.get(1..5)?.try_into().ok()?),
            format: Format::from_u8(*b.get(5)?)?,
            key: b.get(10..10 + klen)?.to_vec(),
            value: b.get(10 + klen..)?.to_vec(),
        })
    }

    pub(super) fn effect(out: Out) -> Pending {
        Pending {
            topic: Topic::Effects,
            partition: out.partition,
            format: Format::Effect,
            key: out.effect.key_user().to_string().into_bytes(),
            value: codec::encode_bin(&out.effect),
        }
    }
}

/// Appends records to their logs, preserving order per destination, and
/// returns once they are durable.
pub(super) fn ship(
    sink: &mut dyn Sink,
    pending: &[Pending],
    faults: &mut dyn Faults,
) -> Result<(), TaskError> {
    let mut groups: Vec<((Topic, u32), Vec<&Pending>)> = Vec::new();
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
                format: r.format.as_u8(),
                key: &r.key,
                value: &r.value,
            })
            .collect();
        sink.append(*topic, *partition, &records)?;
    }
    sink.flush()?;
    Ok(())
}
