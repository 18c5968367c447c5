//! Administration: the topics of `topics/` on a cluster (`topics apply`),
//! true partition ends, and a producer helper for tools and tests.

use super::{kafka_err, topic_partitions, KafkaConfig, REQUEST_TIMEOUT};
use crate::core::Partition;
use crate::log::{KafkaFailure, LogError, Topic};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::BaseRecord;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::time::Duration;

/// A topic as `topics/` wants it on Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedTopic {
    /// Kafka name (with the prefix).
    pub name: String,
    /// Partition count.
    pub partitions: u32,
    /// `retention.ms` (`-1`: forever).
    pub retention_ms: String,
    /// `cleanup.policy`.
    pub cleanup_policy: String,
    /// `max.message.bytes`: room for the spec's largest record and its
    /// batch framing and headers.
    pub max_message_bytes: u64,
}

/// Bytes a Kafka record batch adds around one record of feedlog's (batch
/// header, record framing, the `feedlog-format` header).
pub const KAFKA_FRAMING_BYTES: u64 = 4096;

/// The `max.message.bytes` a topic needs for records of up to
/// `max_record_bytes`: never below Kafka's own default (1048588).
pub fn max_message_bytes(max_record_bytes: usize) -> u64 {
    (max_record_bytes as u64 + KAFKA_FRAMING_BYTES).max(1_048_588)
}

/// A topic retention that is no duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("retention {value:?}: {why}")]
pub struct BadRetention {
    /// What was written.
    pub value: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// `forever` → `-1`; `90s`, `15m`, `12h`, `7d` → milliseconds.
pub fn retention_ms(retention: &str) -> Result<String, BadRetention> {
    if retention == "forever" {
        return Ok("-1".into());
    }
    let bad = |why| BadRetention {
        value: retention.to_string(),
        why,
    };
    let split = retention
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| bad("it has no unit (s, m, h or d)"))?;
    let (n, unit) = retention.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| bad("it does not start with a number"))?;
    let ms: u64 = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad("the unit must be s, m, h or d")),
    };
    n.checked_mul(ms)
        .map(|ms| ms.to_string())
        .ok_or_else(|| bad("it is too long"))
}

/// Every topic of `topics/` with the settings it must have, `events` and
/// `effects` with `partitions` partitions.
pub fn wanted_topics(cfg: &KafkaConfig, partitions: u32) -> Result<Vec<WantedTopic>, LogError> {
    let t = &cfg.topics;
    [&t.events, &t.effects, &t.dead_letter, &t.members]
        .into_iter()
        .map(|spec| {
            Ok(WantedTopic {
                name: cfg.name_of(spec),
                partitions: spec.partitions_in(partitions),
                retention_ms: retention_ms(&spec.retention).map_err(|e| {
                    LogError::kafka(
                        format!("topics/{}.toml", spec.name),
                        e.to_string(),
                        KafkaFailure::Setup,
                    )
                })?,
                cleanup_policy: spec.cleanup_policy.clone(),
                max_message_bytes: max_message_bytes(spec.max_record_bytes),
            })
        })
        .collect()
}

/// The topics of `cfg` (its generation's) that do not exist yet.
pub fn missing_topics(cfg: &KafkaConfig) -> Result<Vec<String>, LogError> {
    let meta: BaseConsumer = cfg
        .client_config()
        .create()
        .map_err(kafka_err("creating a metadata client"))?;
    let mut missing = Vec::new();
    for w in wanted_topics(cfg, 1)? {
        match topic_partitions(&meta, &w.name) {
            Ok(_) => {}
            Err(LogError::NoTopic { .. }) => missing.push(w.name),
            Err(e) => return Err(e),
        }
    }
    Ok(missing)
}

/// The replication factor of `topic` (its first partition's replicas).
pub fn replication_of(cfg: &KafkaConfig, topic: &str) -> Result<i32, LogError> {
    let meta: BaseConsumer = cfg
        .client_config()
        .create()
        .map_err(kafka_err("creating a metadata client"))?;
    let md = meta
        .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
        .map_err(kafka_err(format!("reading the metadata of topic {topic}")))?;
    md.topics()
        .iter()
        .find(|t| t.name() == topic)
        .and_then(|t| t.partitions().first())
        .map(|p| p.replicas().len() as i32)
        .filter(|&r| r > 0)
        .ok_or_else(|| LogError::NoTopic {
            topic: topic.to_string(),
        })
}

/// What `topics apply` did or found for one topic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TopicOutcome {
    /// The topic.
    pub topic: String,
    /// `created`, `ok`, or `differs`.
    pub outcome: String,
    /// What differs from the spec, if anything.
    pub problems: Vec<String>,
}

/// Creates every topic of `topics/` that is missing and checks the ones
/// that exist (partitions, `retention.ms`, `cleanup.policy`); existing
/// topics are never altered. `partitions` is the count for `events` (and
/// `effects`) when they are created; when `events` exists, its count is
/// used. Fails when `events` and `effects` are not co-partitioned.
pub fn apply_topics(
    cfg: &KafkaConfig,
    partitions: u32,
    replication: i32,
) -> Result<Vec<TopicOutcome>, LogError> {
    let meta: BaseConsumer = cfg
        .client_config()
        .create()
        .map_err(kafka_err("creating a metadata client"))?;
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = cfg
        .client_config()
        .create()
        .map_err(kafka_err("creating an admin client"))?;
    let existing = |name: &str| -> Result<Option<u32>, LogError> {
        match topic_partitions(&meta, name) {
            Ok(n) => Ok(Some(n)),
            Err(LogError::NoTopic { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    };
    let events_now = existing(&cfg.name(Topic::Events))?;
    let effects_now = existing(&cfg.name(Topic::Effects))?;
    if let (Some(e), Some(f)) = (events_now, effects_now) {
        if e != f {
            return Err(LogError::kafka(
                format!(
                    "topics {} and {}",
                    cfg.name(Topic::Events),
                    cfg.name(Topic::Effects)
                ),
                format!(
                    "not co-partitioned ({e} and {f} partitions): feedlog refuses to run on them"
                ),
                KafkaFailure::Setup,
            ));
        }
    }
    let partitions = events_now.or(effects_now).unwrap_or(partitions);
    let wanted = wanted_topics(cfg, partitions)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            LogError::kafka(
                "starting a runtime for the admin client",
                e.to_string(),
                KafkaFailure::Transient,
            )
        })?;
    let admin = Admin {
        client: admin,
        rt,
        opts: AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT)),
    };
    let mut out = Vec::new();
    for w in &wanted {
        out.push(match existing(&w.name)? {
            None => admin.create(w, replication)?,
            Some(n) => admin.check(w, n)?,
        });
    }
    Ok(out)
}

/// An admin client with the runtime its futures run on.
struct Admin {
    client: AdminClient<rdkafka::client::DefaultClientContext>,
    rt: tokio::runtime::Runtime,
    opts: AdminOptions,
}

impl Admin {
    /// Creates topic `w` as specified.
    fn create(&self, w: &WantedTopic, replication: i32) -> Result<TopicOutcome, LogError> {
        let max_bytes = w.max_message_bytes.to_string();
        let topic = NewTopic::new(
            &w.name,
            w.partitions as i32,
            TopicReplication::Fixed(replication),
        )
        .set("retention.ms", &w.retention_ms)
        .set("cleanup.policy", &w.cleanup_policy)
        .set("max.message.bytes", &max_bytes);
        let results = self
            .rt
            .block_on(self.client.create_topics([&topic], &self.opts))
            .map_err(kafka_err(format!("creating {}", w.name)))?;
        for r in results {
            if let Err((name, code)) = r {
                if code != RDKafkaErrorCode::TopicAlreadyExists {
                    return Err(LogError::Kafka {
                        what: format!("creating {name}"),
                        reason: code.to_string(),
                        code: Some(code as i32),
                        kind: super::failure_of(Some(code)),
                    });
                }
            }
        }
        Ok(TopicOutcome {
            topic: w.name.clone(),
            outcome: "created".into(),
            problems: Vec::new(),
        })
    }

    /// Checks existing topic `w` (`partitions` partitions) against its spec.
    fn check(&self, w: &WantedTopic, partitions: u32) -> Result<TopicOutcome, LogError> {
        let mut problems = Vec::new();
        if partitions != w.partitions {
            problems.push(format!(
                "{partitions} partitions, the spec says {}",
                w.partitions
            ));
        }
        let described = self
            .rt
            .block_on(
                self.client
                    .describe_configs([&ResourceSpecifier::Topic(&w.name)], &self.opts),
            )
            .map_err(kafka_err(format!("describing {}", w.name)))?;
        match described.into_iter().next() {
            Some(Ok(res)) => {
                for (key, want) in [
                    ("retention.ms", &w.retention_ms),
                    ("cleanup.policy", &w.cleanup_policy),
                ] {
                    let have = res.get(key).and_then(|e| e.value.clone());
                    if have.as_deref() != Some(want.as_str()) {
                        problems.push(format!(
                            "{key} is {}, the spec says {want}",
                            have.as_deref().unwrap_or("unset")
                        ));
                    }
                }
                // Larger is fine; smaller would reject records the spec allows.
                let need = w.max_message_bytes;
                let have = res.get("max.message.bytes").and_then(|e| e.value.clone());
                match have.as_deref().map(str::parse::<u64>) {
                    Some(Ok(n)) if n >= need => {}
                    // Brokers that do not report it use Kafka's default, which fits.
                    None => {}
                    _ => problems.push(format!(
                        "max.message.bytes is {}, records of up to {need} bytes need at least that \
                         (max_record_bytes in topics/ plus framing)",
                        have.as_deref().unwrap_or("unset")
                    )),
                }
            }
            Some(Err(code)) => {
                problems.push(format!("its configuration could not be read: {code}"))
            }
            None => problems.push("its configuration could not be read".into()),
        }
        Ok(TopicOutcome {
            topic: w.name.clone(),
            outcome: if problems.is_empty() { "ok" } else { "differs" }.into(),
            problems,
        })
    }
}

/// A client context for readers that ask for end-of-partition events: those
/// are what they wait for, not errors to log.
struct EofExpected;

impl ClientContext for EofExpected {
    fn error(&self, error: KafkaError, reason: &str) {
        if !matches!(
            error,
            KafkaError::PartitionEOF(_) | KafkaError::Global(RDKafkaErrorCode::PartitionEOF)
        ) {
            tracing::error!(error = %error, reason, "kafka client");
        }
    }
}

impl rdkafka::consumer::ConsumerContext for EofExpected {}

/// The end (one past the last offset) of each of `partitions` of `topic`:
/// ListOffsets, then reading on from there to end-of-partition, and the
/// larger of the two. Some Kafka-compatible brokers answer
/// ListOffsets(latest) with the base offset of the last batch + 1, short of
/// the true end; the records themselves are never wrong.
pub fn high_watermarks(
    cfg: &KafkaConfig,
    topic: &str,
    partitions: &[Partition],
) -> Result<Vec<u64>, LogError> {
    let consumer: BaseConsumer<EofExpected> = cfg
        .client_config()
        .set("group.id", format!("{}.probe", cfg.group))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("fetch.wait.max.ms", "10")
        .set("auto.offset.reset", "latest")
        .create_with_context(EofExpected)
        .map_err(kafka_err("creating an end-offset reader"))?;
    let mut ends = std::collections::BTreeMap::new();
    let mut tpl = TopicPartitionList::new();
    for &p in partitions {
        let (_, hi) = consumer
            .fetch_watermarks(topic, p.0 as i32, REQUEST_TIMEOUT)
            .map_err(kafka_err(format!("reading the end of {topic}[{p}]")))?;
        ends.insert(p.0 as i32, hi.max(0));
        tpl.add_partition_offset(topic, p.0 as i32, Offset::Offset(hi.max(0)))
            .map_err(kafka_err(format!("assigning {topic}[{p}]")))?;
    }
    consumer
        .assign(&tpl)
        .map_err(kafka_err(format!("assigning {topic}")))?;
    let mut pending: std::collections::BTreeSet<i32> = ends.keys().copied().collect();
    let deadline = std::time::Instant::now() + REQUEST_TIMEOUT;
    while !pending.is_empty() {
        if std::time::Instant::now() > deadline {
            return Err(LogError::kafka(
                format!("reading the end of {topic}"),
                format!("partitions {pending:?} not read to their end within {REQUEST_TIMEOUT:?}"),
                KafkaFailure::Transient,
            ));
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let end = ends.entry(m.partition()).or_insert(0);
                *end = (*end).max(m.offset() + 1);
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                pending.remove(&p);
            }
            Some(Err(e)) => return Err(kafka_err(format!("reading the end of {topic}"))(e)),
            None => {}
        }
    }
    Ok(partitions
        .iter()
        .map(|p| ends[&(p.0 as i32)] as u64)
        .collect())
}

/// Sends `rec` with a plain producer, waiting (and serving delivery
/// callbacks) while its queue is full; any other error is returned.
pub fn send_when_room<K, P>(
    producer: &rdkafka::producer::BaseProducer,
    mut rec: BaseRecord<'_, K, P>,
) -> Result<(), KafkaError>
where
    K: rdkafka::message::ToBytes + ?Sized,
    P: rdkafka::message::ToBytes + ?Sized,
{
    loop {
        match producer.send(rec) {
            Ok(()) => {
                producer.poll(Duration::ZERO);
                return Ok(());
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                producer.poll(Duration::from_millis(10));
                rec = back;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Produces `events` into `cfg`'s `events` topic as any client would:
/// keyed by the actor, into the partition that owns it (of `partitions`),
/// postcard with its format header; returns once every record is
/// acknowledged.
pub fn produce_events(
    cfg: &KafkaConfig,
    events: &[crate::core::event::Event],
    partitions: u32,
) -> Result<(), LogError> {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{BaseProducer, Producer};
    let producer: BaseProducer = cfg
        .client_config()
        .set("enable.idempotence", "true")
        .set("linger.ms", "20")
        .create()
        .map_err(kafka_err("creating a producer"))?;
    let topic = cfg.name(Topic::Events);
    for e in events {
        let key = e.actor().to_string();
        let payload = crate::core::codec::event_to_postcard(e);
        let rec = BaseRecord::to(&topic)
            .key(&key)
            .payload(&payload)
            .partition(crate::core::partition::partition_for(e.actor(), partitions).0 as i32)
            .headers(OwnedHeaders::new().insert(Header {
                key: super::FORMAT_HEADER,
                value: Some(crate::core::codec::Format::Postcard.name()),
            }));
        send_when_room(&producer, rec).map_err(kafka_err(format!("producing to {topic}")))?;
    }
    producer
        .flush(Duration::from_secs(120))
        .map_err(kafka_err(format!("producing to {topic}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves retention specs map to retention.ms and bad ones are refused.
    #[test]
    fn retention_maps_to_ms() {
        assert_eq!(retention_ms("forever").unwrap(), "-1");
        assert_eq!(retention_ms("7d").unwrap(), "604800000");
        assert_eq!(retention_ms("90s").unwrap(), "90000");
        assert!(retention_ms("7").is_err());
        assert!(retention_ms("7w").is_err());
        assert!(retention_ms("d").is_err());
    }

    // Proves every spec becomes a topic: events and effects co-partitioned,
    // the rest at their own counts, the prefix applied.
    #[test]
    fn wanted_topics_follow_the_specs() {
        let mut cfg = KafkaConfig::new("x:1", "g");
        cfg.topic_prefix = "t1.".into();
        let w = wanted_topics(&cfg, 12).unwrap();
        let got: Vec<(&str, u32, &str, &str)> = w
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.partitions,
                    t.retention_ms.as_str(),
                    t.cleanup_policy.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("t1.events", 12, "-1", "delete"),
                ("t1.effects", 12, "-1", "delete"),
                ("t1.dead-letter", 1, "-1", "delete"),
                ("t1.members", 1, "-1", "compact"),
            ]
        );
        // A chosen input topic keeps its own name; the others keep the prefix.
        cfg.events_topic = Some("app.social-events".into());
        let names: Vec<String> = wanted_topics(&cfg, 12)
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(
            names,
            [
                "app.social-events",
                "t1.effects",
                "t1.dead-letter",
                "t1.members"
            ]
        );
        assert_eq!(cfg.name(Topic::Events), "app.social-events");
    }
}
