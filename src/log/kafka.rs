//! The Kafka engine of [`Log`] (librdkafka through `rdkafka`).
//!
//! - A [`Source`] is one assign-mode consumer of one topic partition,
//!   started at the position the task stored with its state. It never
//!   commits and never joins a group: positions live in RocksDB, and the
//!   group's committed offsets are the processor's business
//!   (`crate::cluster`).
//! - A [`Sink`] sends through one idempotent producer (`acks=all`,
//!   `enable.idempotence=true`) shared by the process, and
//!   [`Sink::flush`] waits for the acknowledgement of every record that
//!   sink sent. Messages never time out locally: while the brokers are
//!   away a task waits (and a shutdown interrupts the wait; the outbox
//!   re-ships on the next start).
//! - A record's format marker travels in the `feedlog-format` header
//!   (`json`, `bincode`, `effect`, `dead-letter`, `forwarded`); a record
//!   without it — any producer's plain JSON — is JSON.

use super::{Log, LogError, NewRecord, Record, Sink, Source, Topic};
use crate::codec::Format;
use crate::topics::Topics;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
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

    /// The Kafka name of `topic`.
    pub fn name(&self, topic: Topic) -> String {
        let spec = match topic {
            Topic::Events => &self.topics.events,
            Topic::Effects => &self.topics.effects,
            Topic::DeadLetter => &self.topics.dead_letter,
        };
        format!("{}{}", self.topic_prefix, spec.name)
    }

    /// The Kafka name of the `members` topic.
    pub fn members_topic(&self) -> String {
        format!("{}{}", self.topic_prefix, self.topics.members.name)
    }
}

fn kafka_err(what: impl Into<String>) -> impl FnOnce(KafkaError) -> LogError {
    let what = what.into();
    move |e| LogError::Kafka {
        what,
        reason: e.to_string(),
    }
}

/// Partition counts of a topic, or why it cannot be used.
pub fn topic_partitions(consumer: &BaseConsumer, name: &str) -> Result<u32, LogError> {
    let md = consumer
        .fetch_metadata(Some(name), REQUEST_TIMEOUT)
        .map_err(kafka_err(format!("reading the metadata of topic {name}")))?;
    let missing = || LogError::Kafka {
        what: format!("topic {name}"),
        reason: "it does not exist (create the topics with `feedlog topics apply --kafka BROKERS`)"
            .into(),
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
            },
        });
    }
    match t.partitions().len() {
        0 => Err(missing()),
        n => Ok(n as u32),
    }
}

/// What one sink is waiting for.
#[derive(Default)]
struct Acks {
    state: Mutex<AckState>,
    changed: Condvar,
}

#[derive(Default)]
struct AckState {
    outstanding: usize,
    failure: Option<String>,
}

/// The producer's context: routes each delivery report to its sink.
struct DeliveryReports;

impl ClientContext for DeliveryReports {}

impl ProducerContext for DeliveryReports {
    type DeliveryOpaque = Arc<Acks>;

    fn delivery(&self, result: &DeliveryResult<'_>, acks: Arc<Acks>) {
        let mut s = acks.state.lock().expect("poisoned");
        s.outstanding -= 1;
        if let Err((e, m)) = result {
            s.failure
                .get_or_insert_with(|| format!("{}[{}]: {e}", m.topic(), m.partition()));
        }
        acks.changed.notify_all();
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
            return Err(LogError::Kafka {
                what: format!("topics {} and {}", names[0], names[1]),
                reason: format!(
                    "they must be co-partitioned (same partition count), but have {} and {}",
                    partitions[0], partitions[1]
                ),
            });
        }
        let producer: ThreadedProducer<DeliveryReports> = cfg
            .client_config()
            .set("enable.idempotence", "true")
            .set("acks", "all")
            // Never give up on a record: a broker outage stalls, not loses.
            .set("message.timeout.ms", "0")
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

    /// The Kafka name of `topic`.
    pub fn name(&self, topic: Topic) -> &str {
        &self.names[KafkaLog::index(topic)]
    }

    /// The first offset `topic[partition]` still holds (retention).
    pub fn start_offset(&self, topic: Topic, partition: u32) -> Result<u64, LogError> {
        Ok(self.watermarks(topic, partition)?.0)
    }

    fn watermarks(&self, topic: Topic, partition: u32) -> Result<(u64, u64), LogError> {
        let name = self.name(topic);
        let (lo, hi) = self
            .meta
            .fetch_watermarks(name, partition as i32, REQUEST_TIMEOUT)
            .map_err(kafka_err(format!("reading the end of {name}[{partition}]")))?;
        Ok((lo.max(0) as u64, hi.max(0) as u64))
    }
}

impl Log for KafkaLog {
    fn source(&self, topic: Topic, partition: u32, from: u64) -> Result<Box<dyn Source>, LogError> {
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
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&name, partition as i32, Offset::Offset(from as i64))
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

    fn end_offset(&self, topic: Topic, partition: u32) -> Result<u64, LogError> {
        Ok(self.watermarks(topic, partition)?.1)
    }

    fn partitions(&self, topic: Topic) -> u32 {
        self.partitions[KafkaLog::index(topic)]
    }
}

/// Reads one topic partition.
struct KafkaSource {
    consumer: BaseConsumer,
    name: String,
    partition: u32,
    position: u64,
    /// A record read past a read's `end`, returned first by the next read.
    held: Option<Record>,
}

/// A record's format marker from its headers: `json` when there is none; 0
/// (owned by no format, so a clear dead letter) for a name no format has.
fn format_of(m: &impl Message) -> u8 {
    let Some(headers) = m.headers() else {
        return Format::Json.as_u8();
    };
    for h in headers.iter() {
        if h.key == FORMAT_HEADER {
            return h
                .value
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(Format::from_name)
                .map_or(0, Format::as_u8);
        }
    }
    Format::Json.as_u8()
}

impl Source for KafkaSource {
    fn read(
        &mut self,
        max_records: usize,
        max_bytes: usize,
        end: Option<u64>,
    ) -> Result<Vec<Record>, LogError> {
        let mut out = Vec::new();
        let mut bytes = 0;
        let before_end = |offset: u64| end.is_none_or(|e| offset < e);
        if let Some(r) = self.held.take() {
            if !before_end(r.offset) {
                self.held = Some(r);
                return Ok(out);
            }
            bytes += r.key.len() + r.value.len();
            self.position = r.offset + 1;
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
                        offset,
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
                    tracing::warn!(topic = %self.name, partition = self.partition, error = %e, "kafka read");
                    break;
                }
            }
        }
        Ok(out)
    }

    fn position(&self) -> u64 {
        self.position
    }
}

/// Sends one task's records and waits for their acknowledgements.
struct KafkaSink {
    names: [String; 3],
    producer: Arc<ThreadedProducer<DeliveryReports>>,
    acks: Arc<Acks>,
    stop: Arc<AtomicBool>,
}

impl Sink for KafkaSink {
    fn append(
        &mut self,
        topic: Topic,
        partition: u32,
        records: &[NewRecord<'_>],
    ) -> Result<(), LogError> {
        let name = &self.names[KafkaLog::index(topic)];
        for r in records {
            let format = Format::from_u8(r.format).map_or("unknown", Format::name);
            self.acks.state.lock().expect("poisoned").outstanding += 1;
            let mut record = BaseRecord::with_opaque_to(name, self.acks.clone())
                .partition(partition as i32)
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
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        record = back;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err((e, _)) => {
                        self.acks.state.lock().expect("poisoned").outstanding -= 1;
                        return Err(LogError::Kafka {
                            what: format!("sending to {name}[{partition}]"),
                            reason: e.to_string(),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), LogError> {
        let mut s = self.acks.state.lock().expect("poisoned");
        while s.outstanding > 0 {
            if self.stop.load(Ordering::SeqCst) {
                return Err(LogError::Interrupted);
            }
            s = self
                .acks
                .changed
                .wait_timeout(s, Duration::from_millis(100))
                .expect("poisoned")
                .0;
        }
        match s.failure.take() {
            Some(reason) => Err(LogError::Kafka {
                what: "delivering records".into(),
                reason,
            }),
            None => Ok(()),
        }
    }
}

impl Drop for KafkaLog {
    fn drop(&mut self) {
        // Queued records of an interrupted flush are re-shipped from the
        // outbox on the next start; give in-flight ones a moment.
        let _ = self.producer.flush(Duration::from_secs(1));
    }
}

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
}

/// `forever` → `-1`; `90s`, `15m`, `12h`, `7d` → milliseconds.
pub fn retention_ms(retention: &str) -> Result<String, String> {
    if retention == "forever" {
        return Ok("-1".into());
    }
    let split = retention
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("retention {retention:?} has no unit (s, m, h or d)"))?;
    let (n, unit) = retention.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("retention {retention:?} does not start with a number"))?;
    let ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "retention {retention:?}: unit must be s, m, h or d"
            ))
        }
    };
    Ok((n * ms).to_string())
}

/// Every topic of `topics/` with the settings it must have, `events` and
/// `effects` with `partitions` partitions.
pub fn wanted_topics(cfg: &KafkaConfig, partitions: u32) -> Result<Vec<WantedTopic>, String> {
    let t = &cfg.topics;
    [&t.events, &t.effects, &t.dead_letter, &t.members]
        .into_iter()
        .map(|spec| {
            Ok(WantedTopic {
                name: format!("{}{}", cfg.topic_prefix, spec.name),
                partitions: spec.partitions_in(partitions),
                retention_ms: retention_ms(&spec.retention)
                    .map_err(|e| format!("topics/{}.toml: {e}", spec.name))?,
                cleanup_policy: spec.cleanup_policy.clone(),
            })
        })
        .collect()
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
    use rdkafka::admin::{
        AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication,
    };
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
            Err(LogError::Kafka { reason, .. }) if reason.contains("does not exist") => Ok(None),
            Err(e) => Err(e),
        }
    };
    let events_now = existing(&cfg.name(Topic::Events))?;
    let effects_now = existing(&cfg.name(Topic::Effects))?;
    if let (Some(e), Some(f)) = (events_now, effects_now) {
        if e != f {
            return Err(LogError::Kafka {
                what: format!(
                    "topics {} and {}",
                    cfg.name(Topic::Events),
                    cfg.name(Topic::Effects)
                ),
                reason: format!(
                    "not co-partitioned ({e} and {f} partitions): feedlog refuses to run on them"
                ),
            });
        }
    }
    let partitions = events_now.or(effects_now).unwrap_or(partitions);
    let wanted = wanted_topics(cfg, partitions).map_err(|reason| LogError::Kafka {
        what: "reading topics/".into(),
        reason,
    })?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LogError::Kafka {
            what: "starting a runtime for the admin client".into(),
            reason: e.to_string(),
        })?;
    let opts = AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT));
    let mut out = Vec::new();
    for w in &wanted {
        match existing(&w.name)? {
            None => {
                let topic = NewTopic::new(
                    &w.name,
                    w.partitions as i32,
                    TopicReplication::Fixed(replication),
                )
                .set("retention.ms", &w.retention_ms)
                .set("cleanup.policy", &w.cleanup_policy);
                let results = rt
                    .block_on(admin.create_topics([&topic], &opts))
                    .map_err(kafka_err(format!("creating {}", w.name)))?;
                for r in results {
                    if let Err((name, code)) = r {
                        if code != RDKafkaErrorCode::TopicAlreadyExists {
                            return Err(LogError::Kafka {
                                what: format!("creating {name}"),
                                reason: code.to_string(),
                            });
                        }
                    }
                }
                out.push(TopicOutcome {
                    topic: w.name.clone(),
                    outcome: "created".into(),
                    problems: Vec::new(),
                });
            }
            Some(n) => {
                let mut problems = Vec::new();
                if n != w.partitions {
                    problems.push(format!("{n} partitions, the spec says {}", w.partitions));
                }
                let described = rt
                    .block_on(admin.describe_configs([&ResourceSpecifier::Topic(&w.name)], &opts))
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
                    }
                    Some(Err(code)) => {
                        problems.push(format!("its configuration could not be read: {code}"))
                    }
                    None => problems.push("its configuration could not be read".into()),
                }
                out.push(TopicOutcome {
                    topic: w.name.clone(),
                    outcome: if problems.is_empty() { "ok" } else { "differs" }.into(),
                    problems,
                });
            }
        }
    }
    Ok(out)
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
    partitions: &[u32],
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
            .fetch_watermarks(topic, p as i32, REQUEST_TIMEOUT)
            .map_err(kafka_err(format!("reading the end of {topic}[{p}]")))?;
        ends.insert(p as i32, hi.max(0));
        tpl.add_partition_offset(topic, p as i32, Offset::Offset(hi.max(0)))
            .map_err(kafka_err(format!("assigning {topic}[{p}]")))?;
    }
    consumer
        .assign(&tpl)
        .map_err(kafka_err(format!("assigning {topic}")))?;
    let mut pending: std::collections::BTreeSet<i32> = ends.keys().copied().collect();
    let deadline = std::time::Instant::now() + REQUEST_TIMEOUT;
    while !pending.is_empty() {
        if std::time::Instant::now() > deadline {
            return Err(LogError::Kafka {
                what: format!("reading the end of {topic}"),
                reason: format!(
                    "partitions {pending:?} not read to their end within {REQUEST_TIMEOUT:?}"
                ),
            });
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
        .map(|p| ends[&(*p as i32)] as u64)
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
    }
}
