//! Sending one task's records through the process's idempotent producer,
//! and waiting for their acknowledgements.

use super::{kafka_err, KafkaLog, FORMAT_HEADER};
use crate::core::Partition;
use crate::log::{LogError, NewRecord, Sink, Topic};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// What one sink is waiting for.
#[derive(Default)]
pub(super) struct Acks {
    state: Mutex<AckState>,
    changed: Condvar,
}

#[derive(Default)]
struct AckState {
    outstanding: usize,
    /// The first failed delivery: where and why, with librdkafka's code.
    failure: Option<(String, Option<RDKafkaErrorCode>)>,
}

impl Acks {
    /// The counts; a poisoned lock's are still counts, used as they are.
    fn lock(&self) -> MutexGuard<'_, AckState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The producer's context: routes each delivery report to its sink.
pub(super) struct DeliveryReports;

impl ClientContext for DeliveryReports {}

impl ProducerContext for DeliveryReports {
    type DeliveryOpaque = Arc<Acks>;

    fn delivery(&self, result: &DeliveryResult<'_>, acks: Arc<Acks>) {
        // No panic here: it would cross librdkafka's FFI boundary.
        let mut s = acks.lock();
        s.outstanding = s.outstanding.saturating_sub(1);
        if let Err((e, m)) = result {
            s.failure.get_or_insert_with(|| {
                (
                    format!("{}[{}]: {e}", m.topic(), m.partition()),
                    e.rdkafka_error_code(),
                )
            });
        }
        acks.changed.notify_all();
    }
}

/// Sends one task's records and waits for their acknowledgements.
pub(super) struct KafkaSink {
    pub(super) names: [String; 3],
    pub(super) producer: Arc<ThreadedProducer<DeliveryReports>>,
    pub(super) acks: Arc<Acks>,
    pub(super) stop: Arc<AtomicBool>,
}

impl Sink for KafkaSink {
    fn append(
        &mut self,
        topic: Topic,
        partition: Partition,
        records: &[NewRecord<'_>],
    ) -> Result<(), LogError> {
        let name = &self.names[KafkaLog::index(topic)];
        for r in records {
            let format = r.format.name();
            self.acks.lock().outstanding += 1;
            let mut record = BaseRecord::with_opaque_to(name, self.acks.clone())
                .partition(partition.0 as i32)
                .key(r.key)
                .payload(r.value)
                .timestamp(r.timestamp_ms as i64)
                .headers(OwnedHeaders::new().insert(Header {
                    key: FORMAT_HEADER,
                    value: Some(format),
                }));
            loop {
                match self.producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))
                        if self.stop.load(Ordering::SeqCst) =>
                    {
                        self.acks.lock().outstanding -= 1;
                        return Err(LogError::Interrupted);
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        record = back;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err((e, _)) => {
                        self.acks.lock().outstanding -= 1;
                        return Err(kafka_err(format!("sending to {name}[{partition}]"))(e));
                    }
                }
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), LogError> {
        let mut s = self.acks.lock();
        while s.outstanding > 0 {
            if self.stop.load(Ordering::SeqCst) {
                return Err(LogError::Interrupted);
            }
            s = self
                .acks
                .changed
                .wait_timeout(s, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        match s.failure.take() {
            Some((reason, code)) => Err(LogError::Kafka {
                what: "delivering records".into(),
                reason,
                code: code.map(|c| c as i32),
                kind: super::failure_of(code),
            }),
            None => Ok(()),
        }
    }
}
