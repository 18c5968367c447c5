//! A reader of one topic partition: an assign-mode consumer that never
//! commits and never joins a group.

use super::FORMAT_HEADER;
use crate::core::codec::{Format, Marker};
use crate::core::Partition;
use crate::log::{LogError, Offset, Record, Source};
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use std::time::Duration;

/// Reads one topic partition.
pub(super) struct KafkaSource {
    pub(super) consumer: BaseConsumer,
    pub(super) name: String,
    pub(super) partition: Partition,
    pub(super) position: u64,
    /// A record read past a read's `end`, returned first by the next read.
    pub(super) held: Option<Record>,
}

/// A record's format marker from its headers: `json` when there is none; 0
/// (owned by no format, so a clear dead letter) for a name no format has.
fn format_of(m: &impl Message) -> Marker {
    let Some(headers) = m.headers() else {
        return Marker::Known(Format::Json);
    };
    for h in headers.iter() {
        if h.key == FORMAT_HEADER {
            return h
                .value
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(Format::from_name)
                .map_or(Marker::Unknown(0), Marker::Known);
        }
    }
    Marker::Known(Format::Json)
}

impl Source for KafkaSource {
    fn read(
        &mut self,
        max_records: usize,
        max_bytes: usize,
        end: Option<Offset>,
    ) -> Result<Vec<Record>, LogError> {
        let mut out = Vec::new();
        let mut bytes = 0;
        let before_end = |offset: u64| end.is_none_or(|e| offset < e.0);
        if let Some(r) = self.held.take() {
            if !before_end(r.offset.0) {
                self.held = Some(r);
                return Ok(out);
            }
            bytes += r.key.len() + r.value.len();
            self.position = r.offset.0 + 1;
            out.push(r);
        }
        while out.len() < max_records && bytes < max_bytes && before_end(self.position) {
            match self.consumer.poll(Duration::ZERO) {
                None => break,
                Some(Ok(m)) => {
                    let offset = m.offset().max(0) as u64;
                    if offset < self.position {
                        continue; // a re-fetch of something already read
                    }
                    let rec = Record {
                        offset: Offset(offset),
                        timestamp_ms: m.timestamp().to_millis().unwrap_or(0).max(0) as u64,
                        format: format_of(&m),
                        key: m.key().unwrap_or_default().to_vec(),
                        value: m.payload().unwrap_or_default().to_vec(),
                    };
                    if !before_end(offset) {
                        // Offsets may skip: keep it for a read without `end`.
                        self.held = Some(rec);
                        break;
                    }
                    bytes += rec.key.len() + rec.value.len();
                    self.position = offset + 1;
                    out.push(rec);
                }
                Some(Err(KafkaError::MessageConsumption(
                    code @ (RDKafkaErrorCode::OffsetOutOfRange | RDKafkaErrorCode::AutoOffsetReset),
                ))) => {
                    return Err(LogError::KafkaOutOfRange {
                        topic: self.name.clone(),
                        partition: self.partition,
                        offset: self.position,
                        reason: code.to_string(),
                    })
                }
                Some(Err(e)) => {
                    // Broker outages and the like: librdkafka reconnects by
                    // itself; report and read again later.
                    tracing::warn!(topic = %self.name, partition = self.partition.0, error = %e, "kafka read");
                    break;
                }
            }
        }
        Ok(out)
    }

    fn position(&self) -> Offset {
        Offset(self.position)
    }
}
