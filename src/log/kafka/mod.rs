//! The Kafka engine of [`Log`] (librdkafka through `rdkafka`).
//!
//! - A [`Source`] is one assign-mode consumer of one topic partition,
//!   started at the position the task stored with its state. It never
//!   commits and never joins a group: positions live in RocksDB, and the
//!   group's committed offsets are the processor's business
//!   (`crate::task::kafka`).
//! - A [`Sink`] sends through one idempotent producer (`acks=all`,
//!   `enable.idempotence=true`) shared by the process, and
//!   [`Sink::flush`] waits for the acknowledgement of every record that
//!   sink sent. Messages never time out locally: while the brokers are
//!   away a task waits (and a shutdown interrupts the wait; the outbox
//!   re-ships on the next start).
//! - A record's format marker travels in the `feedlog-format` header
//!   (`json`, `postcard`, `effects-stamped`, `forwarded-postcard`,
//!   `dead-letter`, and the bincode formats of earlier versions); a record
//!   without it — any producer's plain JSON — is JSON.

pub mod admin;
pub mod group;
pub mod members;
pub mod mock;
mod sink;
mod source;

pub use admin::{
    apply_topics, high_watermarks, max_message_bytes, missing_topics, produce_events,
    replication_of, send_when_room, wanted_topics, TopicOutcome, WantedTopic,
};
pub use group::{GroupClient, GroupEvent, GroupMember, MemberSettings, PendingCommit, Rebalance};
pub use members::{
    MemberRecord, MembersView, MembersWriter, Owners, PartitionState, StandbyRecord,
};

use super::{KafkaFailure, Log, LogError, Sink, Source, Topic};
use crate::core::Generation;
use crate::core::Partition;
use crate::log::topics::Topics;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use sink::{DeliveryReports, KafkaSink};
use source::KafkaSource;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// The header that carries a record's format marker.
pub const FORMAT_HEADER: &str = "feedlog-format";

/// How long a metadata or watermark request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how to reach Kafka.
#[derive(Debug, Clone)]
pub struct KafkaConfig {
    /// `bootstrap.servers`: `host:port[,host:port...]`.
    pub brokers: String,
    /// The processors' consumer group.
    pub group: String,
    /// Prepended to every topic name of `topics/` (several feedlog
    /// deployments, or tests, on one cluster).
    pub topic_prefix: String,
    /// Extra librdkafka settings for every client (`security.protocol`,
    /// `sasl.*`, ...).
    pub client: Vec<(String, String)>,
    /// The input topic's full name when it is not `events` (with the
    /// prefix): an existing topic upstream apps already write to.
    pub events_topic: Option<String>,
    /// The topic specs.
    pub topics: Topics,
}

impl KafkaConfig {
    /// Settings for `brokers` and `group`, the built-in topics, no prefix.
    pub fn new(brokers: &str, group: &str) -> KafkaConfig {
        KafkaConfig {
            brokers: brokers.to_string(),
            group: group.to_string(),
            topic_prefix: String::new(),
            client: Vec::new(),
            events_topic: None,
            topics: Topics::builtin(),
        }
    }

    /// A client configuration with the brokers and the extra settings.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        for (k, v) in &self.client {
            c.set(k, v);
        }
        c
    }

    /// Whether librdkafka accepts the client settings (it checks them when
    /// a client is created, before any connection): unknown keys or
    /// values, a mechanism or codec this build lacks, an unreadable CA
    /// file.
    pub fn check_client_settings(&self) -> Result<(), LogError> {
        self.client_config()
            .create::<rdkafka::producer::BaseProducer>()
            .map(|_| ())
            .map_err(kafka_err("checking the client settings"))
    }

    /// The Kafka name of `topic`.
    pub fn name(&self, topic: Topic) -> String {
        let spec = match topic {
            Topic::Events => &self.topics.events,
            Topic::Effects => &self.topics.effects,
            Topic::DeadLetter => &self.topics.dead_letter,
        };
        self.name_of(spec)
    }

    /// The Kafka name of the topic `spec` describes: the prefix and its
    /// name, or the chosen input topic's name.
    pub fn name_of(&self, spec: &crate::log::topics::TopicSpec) -> String {
        match &self.events_topic {
            Some(name) if spec.name == self.topics.events.name => name.clone(),
            _ => format!("{}{}", self.topic_prefix, spec.name),
        }
    }

    /// The Kafka name of the `members` topic.
    pub fn members_topic(&self) -> String {
        format!("{}{}", self.topic_prefix, self.topics.members.name)
    }

    /// The settings of state generation `n` of this deployment
    /// (docs/kafka.md, "Generations"): generation 0 is the deployment
    /// itself; generation `n` ≥ 1 reads the same `events` topic, and has a
    /// consumer group (`G.gN`) and internal topics (`PgN.effects`,
    /// `PgN.dead-letter`, `PgN.members`) of its own, so two generations
    /// never mix their internal records or positions.
    pub fn generation(&self, n: Generation) -> KafkaConfig {
        if n.is_first() {
            return self.clone();
        }
        let mut g = self.clone();
        g.events_topic = Some(self.name(Topic::Events));
        g.group = format!("{}.g{n}", self.group);
        g.topic_prefix = format!("{}g{n}.", self.topic_prefix);
        g
    }
}

pub(crate) fn kafka_err(what: impl Into<String>) -> impl FnOnce(KafkaError) -> LogError {
    let what = what.into();
    move |e| {
        let code = e.rdkafka_error_code();
        LogError::Kafka {
            what,
            reason: e.to_string(),
            code: code.map(|c| c as i32),
            kind: failure_of(code),
        }
    }
}

/// What kind of failure librdkafka's `code` is: its fatal error, a refusal
/// of the cluster's setup (an authorization, a setting, a record size), or
/// a passing one (everything else: timeouts, brokers away, rebalances, full
/// queues, and an unknown topic or partition, which brokers also answer
/// while a leader moves; a topic that is really missing is found by its
/// metadata as [`LogError::NoTopic`]).
pub(crate) fn failure_of(code: Option<RDKafkaErrorCode>) -> KafkaFailure {
    use RDKafkaErrorCode as C;
    match code {
        Some(C::Fatal) => KafkaFailure::Fatal,
        Some(
            C::TopicAuthorizationFailed
            | C::GroupAuthorizationFailed
            | C::ClusterAuthorizationFailed
            | C::TransactionalIdAuthorizationFailed
            | C::SaslAuthenticationFailed
            | C::Authentication
            | C::InvalidConfig
            | C::InvalidArgument
            | C::InvalidPartitions
            | C::InvalidReplicationFactor
            | C::InvalidTopic
            | C::UnsupportedVersion
            | C::UnsupportedFeature
            | C::PolicyViolation
            | C::InvalidRecord
            | C::MessageSizeTooLarge
            | C::FencedInstanceId,
        ) => KafkaFailure::Setup,
        _ => KafkaFailure::Transient,
    }
}

/// Partition counts of a topic, or why it cannot be used.
pub fn topic_partitions(consumer: &BaseConsumer, name: &str) -> Result<u32, LogError> {
    let md = consumer
        .fetch_metadata(Some(name), REQUEST_TIMEOUT)
        .map_err(kafka_err(format!("reading the metadata of topic {name}")))?;
    let missing = || LogError::NoTopic {
        topic: name.to_string(),
    };
    let t = md
        .topics()
        .iter()
        .find(|t| t.name() == name)
        .ok_or_else(missing)?;
    if let Some(e) = t.error() {
        let code: RDKafkaErrorCode = e.into();
        return Err(match code {
            RDKafkaErrorCode::UnknownTopicOrPartition => missing(),
            code => LogError::Kafka {
                what: format!("topic {name}"),
                reason: code.to_string(),
                code: Some(code as i32),
                kind: failure_of(Some(code)),
            },
        });
    }
    match t.partitions().len() {
        0 => Err(missing()),
        n => Ok(n as u32),
    }
}

/// The Kafka log of one processor.
pub struct KafkaLog {
    cfg: KafkaConfig,
    names: [String; 3],
    partitions: [u32; 3],
    producer: Arc<ThreadedProducer<DeliveryReports>>,
    meta: BaseConsumer,
    /// Set on shutdown: waits for acknowledgements give up.
    stop: Arc<AtomicBool>,
}

impl KafkaLog {
    /// Connects, checks that the topics exist and that `events` and
    /// `effects` are co-partitioned. `stop` interrupts waits for
    /// acknowledgements.
    pub fn connect(cfg: KafkaConfig, stop: Arc<AtomicBool>) -> Result<KafkaLog, LogError> {
        let meta: BaseConsumer = cfg
            .client_config()
            .set("group.id", format!("{}.meta", cfg.group))
            .set("enable.auto.commit", "false")
            .create()
            .map_err(kafka_err("creating a metadata client"))?;
        let names = [Topic::Events, Topic::Effects, Topic::DeadLetter].map(|t| cfg.name(t));
        let mut partitions = [0u32; 3];
        for (i, name) in names.iter().enumerate() {
            partitions[i] = topic_partitions(&meta, name)?;
        }
        if partitions[0] != partitions[1] {
            return Err(LogError::kafka(
                format!("topics {} and {}", names[0], names[1]),
                format!(
                    "they must be co-partitioned (same partition count), but have {} and {}",
                    partitions[0], partitions[1]
                ),
                KafkaFailure::Setup,
            ));
        }
        let producer: ThreadedProducer<DeliveryReports> = cfg
            .client_config()
            .set("enable.idempotence", "true")
            .set("acks", "all")
            // Never give up on a record: a broker outage stalls, not loses.
            .set("message.timeout.ms", "0")
            // Room for the largest record the topic specs allow.
            .set(
                "message.max.bytes",
                max_message_bytes(
                    [
                        &cfg.topics.events,
                        &cfg.topics.effects,
                        &cfg.topics.dead_letter,
                    ]
                    .iter()
                    .map(|t| t.max_record_bytes)
                    .max()
                    .unwrap_or_default(),
                )
                .to_string(),
            )
            .set("linger.ms", "2")
            .create_with_context(DeliveryReports)
            .map_err(kafka_err("creating the producer"))?;
        Ok(KafkaLog {
            cfg,
            names,
            partitions,
            producer: Arc::new(producer),
            meta,
            stop,
        })
    }

    /// The settings it was made with.
    pub fn config(&self) -> &KafkaConfig {
        &self.cfg
    }

    fn index(topic: Topic) -> usize {
        match topic {
            Topic::Events => 0,
            Topic::Effects => 1,
            Topic::DeadLetter => 2,
        }
    }

    /// Drops every record the process's producer still holds — queued, or
    /// sent and not acknowledged — so that no task waits for them: what a
    /// processor does when it learns it lost its partitions. Their sinks'
    /// waits end with a delivery failure. A purged record may still reach
    /// the broker (it was on the wire); its receivers fence it.
    pub fn purge(&self) {
        self.producer
            .purge(rdkafka::producer::PurgeConfig::default().queue().inflight());
    }

    /// librdkafka's fatal error of the producer, if one occurred (the
    /// producer cannot be used any more).
    pub fn fatal_error(&self) -> Option<String> {
        self.producer
            .client()
            .fatal_error()
            .map(|(code, reason)| format!("{code}: {reason}"))
    }

    /// The Kafka name of `topic`.
    pub fn name(&self, topic: Topic) -> &str {
        &self.names[KafkaLog::index(topic)]
    }

    /// The first offset `topic[partition]` still holds (retention).
    pub fn start_offset(&self, topic: Topic, partition: Partition) -> Result<u64, LogError> {
        Ok(self.watermarks(topic, partition)?.0)
    }

    fn watermarks(&self, topic: Topic, partition: Partition) -> Result<(u64, u64), LogError> {
        let name = self.name(topic);
        let (lo, hi) = self
            .meta
            .fetch_watermarks(name, partition.0 as i32, REQUEST_TIMEOUT)
            .map_err(kafka_err(format!("reading the end of {name}[{partition}]")))?;
        Ok((lo.max(0) as u64, hi.max(0) as u64))
    }
}

impl Log for KafkaLog {
    fn source(
        &self,
        topic: Topic,
        partition: Partition,
        from: super::Offset,
    ) -> Result<Box<dyn Source>, LogError> {
        let from = from.0;
        let name = self.name(topic).to_string();
        let consumer: BaseConsumer = self
            .cfg
            .client_config()
            .set("group.id", format!("{}.reader", self.cfg.group))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            // A position the log no longer holds is an error, never a skip.
            .set("auto.offset.reset", "error")
            .set("queued.max.messages.kbytes", "8192")
            .set("fetch.wait.max.ms", "50")
            .create()
            .map_err(kafka_err(format!(
                "creating a reader of {name}[{partition}]"
            )))?;
        // Checked here, on every broker: Kafka answers a fetch outside the
        // partition with an error, but not every broker does (one answers
        // a fetch past the end with nothing, for ever).
        let (low, high) = consumer
            .fetch_watermarks(&name, partition.0 as i32, REQUEST_TIMEOUT)
            .map_err(kafka_err(format!(
                "reading the offsets {name}[{partition}] holds"
            )))?;
        let (low, high) = (low.max(0) as u64, high.max(0) as u64);
        if from > high {
            return Err(LogError::KafkaPastEnd {
                topic: name,
                partition,
                offset: from,
                end: high,
            });
        }
        if from < low {
            return Err(LogError::KafkaOutOfRange {
                topic: name,
                partition,
                offset: from,
                reason: format!("it holds offsets {low} to {high}"),
            });
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&name, partition.0 as i32, Offset::Offset(from as i64))
            .map_err(kafka_err(format!("assigning {name}[{partition}]")))?;
        consumer
            .assign(&tpl)
            .map_err(kafka_err(format!("assigning {name}[{partition}]")))?;
        Ok(Box::new(KafkaSource {
            consumer,
            name,
            partition,
            position: from,
            held: None,
        }))
    }

    fn sink(self: Arc<Self>, _sync: bool) -> Result<Box<dyn Sink>, LogError> {
        Ok(Box::new(KafkaSink {
            names: self.names.clone(),
            producer: self.producer.clone(),
            acks: Arc::default(),
            stop: self.stop.clone(),
        }))
    }

    fn end_offset(&self, topic: Topic, partition: Partition) -> Result<super::Offset, LogError> {
        Ok(super::Offset(self.watermarks(topic, partition)?.1))
    }

    fn partitions(&self, topic: Topic) -> u32 {
        self.partitions[KafkaLog::index(topic)]
    }
}

impl Drop for KafkaLog {
    fn drop(&mut self) {
        // Queued records of an interrupted flush are re-shipped from the
        // outbox on the next start; give in-flight ones a moment.
        let _ = self.producer.flush(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::KafkaConfig;
    use crate::core::Generation;

    /// Whether librdkafka accepts a producer with `options` on top of the
    /// brokers (it validates a configuration when the client is created,
    /// before it connects); the reason when it does not.
    fn accepted(options: &[(&str, &str)]) -> Result<(), crate::log::LogError> {
        let mut cfg = KafkaConfig::new("127.0.0.1:9", "g");
        cfg.client = options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        cfg.check_client_settings()
    }

    // Proves a generation shares only the events topic with its deployment: its group and every internal topic are its own, and generation 0 is the deployment itself.
    #[test]
    fn a_generation_has_its_own_group_and_internal_topics() {
        use crate::log::Topic;
        let mut base = KafkaConfig::new("b:9092", "feeds");
        base.topic_prefix = "prod.".into();
        let g0 = base.generation(Generation(0));
        assert_eq!(
            (g0.group.as_str(), g0.name(Topic::Effects)),
            ("feeds", "prod.effects".to_string())
        );
        let g2 = base.generation(Generation(2));
        assert_eq!(g2.group, "feeds.g2");
        assert_eq!(g2.name(Topic::Events), "prod.events");
        assert_eq!(g2.name(Topic::Effects), "prod.g2.effects");
        assert_eq!(g2.name(Topic::DeadLetter), "prod.g2.dead-letter");
        assert_eq!(g2.members_topic(), "prod.g2.members");
        base.events_topic = Some("upstream".into());
        let g1 = base.generation(Generation(1));
        assert_eq!(g1.name(Topic::Events), "upstream");
        assert_eq!(g1.name(Topic::Effects), "prod.g1.effects");
    }

    // Proves the build carries TLS, SASL (PLAIN, SCRAM, GSSAPI) and every compression codec: librdkafka names them among its features and accepts clients that use them, and still refuses what it does not know.
    #[test]
    fn tls_sasl_and_codecs_reach_librdkafka() {
        let features = KafkaConfig::new("127.0.0.1:9", "g")
            .client_config()
            .create_native_config()
            .and_then(|c| c.get("builtin.features"))
            .expect("builtin.features is readable");
        for f in [
            "gzip",
            "snappy",
            "ssl",
            "sasl",
            "lz4",
            "zstd",
            "sasl_plain",
            "sasl_scram",
            "sasl_gssapi",
            "sasl_oauthbearer",
        ] {
            assert!(
                features.split(',').any(|x| x == f),
                "librdkafka lacks {f}: {features}"
            );
        }
        for codec in ["gzip", "snappy", "lz4", "zstd"] {
            accepted(&[("compression.codec", codec)]).expect(codec);
        }
        let tls_scram = [
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
            ("sasl.username", "feedlog"),
            ("sasl.password", "secret"),
            ("ssl.endpoint.identification.algorithm", "https"),
        ];
        accepted(&tls_scram).expect("TLS + SCRAM");
        accepted(&[("security.protocol", "SSL")]).expect("TLS");
        accepted(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanisms", "PLAIN"),
            ("sasl.username", "feedlog"),
            ("sasl.password", "secret"),
        ])
        .expect("PLAIN");
        accepted(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanisms", "GSSAPI"),
            ("sasl.kerberos.service.name", "kafka"),
            // No ticket to refresh here: no kinit. (It runs through a fork
            // of this test process, which would hold a copy of every open
            // file, and so of other tests' log locks, until its exec.)
            ("sasl.kerberos.min.time.before.relogin", "0"),
        ])
        .expect("GSSAPI");
        // The check can fail: unknown values are refused at creation.
        assert!(accepted(&[("compression.codec", "brotli")]).is_err());
        assert!(accepted(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanisms", "NOPE")
        ])
        .is_err());
        assert!(accepted(&[
            ("ssl.ca.location", "/no/such/ca.pem"),
            ("security.protocol", "SSL")
        ])
        .is_err());
    }
}
