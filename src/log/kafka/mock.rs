//! librdkafka's in-process mock broker, for benchmarks and tests that run
//! without a real Kafka: consumer groups, rebalances and commits work;
//! transactions do not.

use super::{KafkaConfig, Topic};
use crate::log::LogError;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

/// A running mock broker; it stops when dropped.
pub struct MockBroker(MockCluster<'static, DefaultProducerContext>);

impl MockBroker {
    /// Starts a one-broker mock cluster.
    pub fn start() -> Result<MockBroker, LogError> {
        MockCluster::new(1)
            .map(MockBroker)
            .map_err(super::kafka_err("starting the mock broker"))
    }

    /// Its `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.0.bootstrap_servers()
    }

    /// Creates `cfg`'s topics (with its prefix): `events` (unless `cfg`
    /// names an existing input topic) and `effects` with `partitions`
    /// partitions, `dead-letter` and `members` with one.
    /// (The mock broker has no admin API.)
    pub fn create_topics(&self, cfg: &KafkaConfig, partitions: u32) -> Result<(), LogError> {
        let events = (cfg.events_topic.is_none()).then(|| (cfg.name(Topic::Events), partitions));
        for (name, n) in events.into_iter().chain([
            (cfg.name(Topic::Effects), partitions),
            (cfg.name(Topic::DeadLetter), 1),
            (cfg.members_topic(), 1),
        ]) {
            self.0
                .create_topic(&name, n as i32, 1)
                .map_err(super::kafka_err(format!("creating {name}")))?;
        }
        Ok(())
    }
}
