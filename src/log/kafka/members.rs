//! The `members` topic: each processor of a group announces which
//! partitions it owns and serves, and where its read API answers; readers
//! in a cluster and `feedlog status` replay it.

use super::{kafka_err, KafkaConfig, REQUEST_TIMEOUT};
use crate::core::position::Positions;
use crate::core::Generation;
use crate::core::Partition;
use crate::log::{KafkaFailure, LogError};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A partition's place in this processor, for readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionState {
    /// Owned, caught up: answers reads.
    Serving,
    /// Owned, replaying what previous owners did: 503 for now.
    Rebuilding,
}

/// A processor's announcement in the `members` topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    /// Its name.
    pub member: String,
    /// Where its read API answers, if it serves one.
    pub api: Option<String>,
    /// Partitions it owns and serves.
    pub serving: Vec<Partition>,
    /// Partitions it owns and is still replaying.
    pub rebuilding: Vec<Partition>,
    /// Warm standbys it keeps of partitions it does not own, with the
    /// positions each has applied (docs/kafka.md, "Standbys").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub standby: Vec<StandbyRecord>,
    /// When it wrote this, ms since the epoch.
    pub at_ms: u64,
}

/// One warm standby in a [`MemberRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandbyRecord {
    /// The partition.
    pub partition: Partition,
    /// The next `events` offset it applies.
    pub events: u64,
    /// The next `effects` offset it applies.
    pub effects: u64,
}

/// The key of a deployment's live-generation record, in the `members` topic
/// of its generation 0 (docs/kafka.md, "Swap"). Member names may not
/// start with `~`.
pub const LIVE_GENERATION_KEY: &str = "~live-generation";

/// Which generation of a deployment answers its readers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveGeneration {
    /// The generation that answers readers (0 until a swap).
    pub live: Generation,
    /// The one it replaced, kept until `swap --confirm`.
    pub previous: Option<Generation>,
    /// Generations retired by `swap --confirm`: their processors stop.
    pub retired: Vec<Generation>,
    /// When it was written, ms since the epoch.
    pub at_ms: u64,
}

/// Writes `live` as the live-generation record of the deployment `cfg`
/// (its generation 0's settings).
pub fn write_live_generation(cfg: &KafkaConfig, live: &LiveGeneration) -> Result<(), LogError> {
    let value = serde_json::to_vec(live)
        .expect("a live-generation record (numbers) always encodes as JSON");
    MembersWriter::new(cfg, LIVE_GENERATION_KEY, None)?.send(Some(&value))
}

/// Writes this processor's records to `members`.
pub struct MembersWriter {
    topic: String,
    member: String,
    api: Option<String>,
    producer: ThreadedProducer<rdkafka::producer::DefaultProducerContext>,
}

impl MembersWriter {
    /// A writer of `member`'s records, announcing `api` as its read API.
    pub fn new(
        cfg: &KafkaConfig,
        member: &str,
        api: Option<String>,
    ) -> Result<MembersWriter, LogError> {
        let topic = cfg.members_topic();
        let producer = cfg
            .client_config()
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .create()
            .map_err(kafka_err("creating the members producer"))?;
        Ok(MembersWriter {
            topic,
            member: member.to_string(),
            api,
            producer,
        })
    }

    fn send(&self, value: Option<&[u8]>) -> Result<(), LogError> {
        let mut rec = BaseRecord::to(&self.topic).key(self.member.as_bytes());
        if let Some(v) = value {
            rec = rec.payload(v);
        }
        self.producer
            .send(rec)
            .map_err(|(e, _)| kafka_err(format!("writing to {}", self.topic))(e))?;
        self.producer
            .flush(REQUEST_TIMEOUT)
            .map_err(kafka_err(format!("writing to {}", self.topic)))?;
        Ok(())
    }

    /// Announces what this processor owns now.
    pub fn announce(
        &self,
        partitions: &BTreeMap<Partition, PartitionState>,
        standby: &BTreeMap<Partition, Positions>,
    ) -> Result<(), LogError> {
        let of = |s: PartitionState| {
            partitions
                .iter()
                .filter(|(_, st)| **st == s)
                .map(|(&p, _)| p)
                .collect()
        };
        let rec = MemberRecord {
            member: self.member.clone(),
            api: self.api.clone(),
            serving: of(PartitionState::Serving),
            rebuilding: of(PartitionState::Rebuilding),
            standby: standby
                .iter()
                .map(|(&partition, at)| StandbyRecord {
                    partition,
                    events: at.events.0,
                    effects: at.effects.0,
                })
                .collect(),
            at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        };
        let value = serde_json::to_vec(&rec)
            .expect("a members record (strings and numbers) always encodes as JSON");
        self.send(Some(&value))
    }

    /// Announces that this processor left (a tombstone).
    pub fn leave(&self) -> Result<(), LogError> {
        self.send(None)
    }
}

/// Who owns what, from the `members` topic: for each partition, the latest
/// claim (a processor's newer record replaces its older one; of two
/// processors claiming one partition, the later record wins).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Owners {
    /// Partition → (member, state, API address).
    pub partitions: BTreeMap<Partition, (String, PartitionState, Option<String>)>,
    /// Every member with a current record.
    pub members: BTreeMap<String, MemberRecord>,
    /// Partition → its warm standbys: (member, positions applied).
    pub standbys: BTreeMap<Partition, Vec<(String, Positions)>>,
    /// The deployment's live generation (in generation 0's `members`).
    pub live: LiveGeneration,
}

/// Folds `members` records, in offset order, into [`Owners`].
#[derive(Default)]
struct OwnersBuilder {
    /// Each member's newest record and its offset.
    newest: BTreeMap<String, (i64, MemberRecord)>,
    live: LiveGeneration,
}

impl OwnersBuilder {
    fn ingest(&mut self, offset: i64, key: &[u8], payload: Option<&[u8]>) {
        let key = String::from_utf8_lossy(key).into_owned();
        if key == LIVE_GENERATION_KEY {
            match payload.map(serde_json::from_slice::<LiveGeneration>) {
                Some(Ok(live)) => self.live = live,
                Some(Err(e)) => {
                    tracing::warn!(offset, error = %e, "unreadable live-generation record")
                }
                None => self.live = LiveGeneration::default(),
            }
            return;
        }
        match payload.filter(|p| !p.is_empty()) {
            // A member that left.
            None => {
                self.newest.remove(&key);
            }
            Some(p) => match serde_json::from_slice::<MemberRecord>(p) {
                Ok(r) => {
                    self.newest.insert(key, (offset, r));
                }
                Err(e) => tracing::warn!(offset, error = %e, "unreadable member record"),
            },
        }
    }

    fn owners(&self) -> Owners {
        let mut claims: Vec<&(i64, MemberRecord)> = self.newest.values().collect();
        claims.sort_by_key(|(o, _)| *o);
        let mut owners = Owners::default();
        for (_, r) in claims {
            for (list, state) in [
                (&r.serving, PartitionState::Serving),
                (&r.rebuilding, PartitionState::Rebuilding),
            ] {
                for &p in list {
                    owners
                        .partitions
                        .insert(p, (r.member.clone(), state, r.api.clone()));
                }
            }
        }
        for r in self.newest.values().map(|(_, r)| r) {
            for s in &r.standby {
                let at = Positions::new(s.events, s.effects);
                owners
                    .standbys
                    .entry(s.partition)
                    .or_default()
                    .push((r.member.clone(), at));
            }
        }
        owners.live = self.live.clone();
        owners.members = self
            .newest
            .iter()
            .map(|(m, (_, r))| (m.clone(), r.clone()))
            .collect();
        owners
    }
}

fn members_consumer(cfg: &KafkaConfig, topic: &str, from: i64) -> Result<BaseConsumer, LogError> {
    let err = |what: &str| {
        let what = format!("{what} {topic}");
        kafka_err(what)
    };
    let consumer: BaseConsumer = cfg
        .client_config()
        .set("group.id", format!("{}.members", cfg.group))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .map_err(err("creating a reader of"))?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(from))
        .map_err(err("assigning"))?;
    consumer.assign(&tpl).map_err(err("assigning"))?;
    Ok(consumer)
}

/// Replays the `members` topic to its end.
pub fn read_owners(cfg: &KafkaConfig) -> Result<Owners, LogError> {
    let topic = cfg.members_topic();
    let meta: BaseConsumer = cfg
        .client_config()
        .set("group.id", format!("{}.members", cfg.group))
        .create()
        .map_err(kafka_err(format!("creating a reader of {topic}")))?;
    let (lo, _) = meta
        .fetch_watermarks(&topic, 0, REQUEST_TIMEOUT)
        .map_err(kafka_err(format!("reading the start of {topic}")))?;
    let hi = super::admin::high_watermarks(cfg, &topic, &[Partition(0)])?[0] as i64;
    let mut b = OwnersBuilder::default();
    if hi > lo {
        let consumer = members_consumer(cfg, &topic, lo)?;
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        let mut next = lo;
        while next < hi {
            if Instant::now() > deadline {
                return Err(LogError::kafka(
                    format!("reading {topic}"),
                    format!("timed out at offset {next} of {hi}"),
                    KafkaFailure::Transient,
                ));
            }
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    next = m.offset() + 1;
                    b.ingest(m.offset(), m.key().unwrap_or_default(), m.payload());
                }
                Some(Err(e)) => tracing::warn!(error = %e, "reading members"),
                None => {}
            }
        }
    }
    Ok(b.owners())
}

/// Who owns what, kept current by a thread that tails `members`.
pub struct MembersView {
    owners: Arc<std::sync::RwLock<Owners>>,
    /// Whether it has read what the topic held when it started.
    caught_up: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MembersView {
    /// Starts tailing `members` from its start.
    pub fn start(cfg: &KafkaConfig) -> Result<MembersView, LogError> {
        let topic = cfg.members_topic();
        let consumer = members_consumer(cfg, &topic, 0)?;
        let (_, end) = consumer
            .fetch_watermarks(&topic, 0, REQUEST_TIMEOUT)
            .map_err(kafka_err(format!("reading the end of {topic}")))?;
        let owners = Arc::new(std::sync::RwLock::new(Owners::default()));
        let caught_up = Arc::new(AtomicBool::new(end <= 0));
        let stop = Arc::new(AtomicBool::new(false));
        let (o, st, up) = (owners.clone(), stop.clone(), caught_up.clone());
        let thread = std::thread::Builder::new()
            .name("feedlog-members".into())
            .spawn(move || {
                let mut b = OwnersBuilder::default();
                while !st.load(Ordering::SeqCst) {
                    let mut changed = false;
                    while let Some(r) = consumer.poll(Duration::from_millis(50)) {
                        match r {
                            Ok(m) => {
                                b.ingest(m.offset(), m.key().unwrap_or_default(), m.payload());
                                changed = true;
                                if m.offset() + 1 >= end {
                                    *o.write().unwrap_or_else(|e| e.into_inner()) = b.owners();
                                    up.store(true, Ordering::SeqCst);
                                }
                            }
                            Err(e) => tracing::warn!(error = %e, "tailing members"),
                        }
                        if st.load(Ordering::SeqCst) {
                            return;
                        }
                    }
                    if changed {
                        *o.write().unwrap_or_else(|e| e.into_inner()) = b.owners();
                    }
                }
            })
            .map_err(|e| {
                LogError::kafka(
                    "starting the reader of members",
                    e.to_string(),
                    KafkaFailure::Transient,
                )
            })?;
        Ok(MembersView {
            owners,
            caught_up,
            stop,
            thread: Some(thread),
        })
    }

    /// The API of the processor serving partition `p`, as last read.
    pub fn serving(&self, p: Partition) -> Option<String> {
        match self
            .owners
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .partitions
            .get(&p)
        {
            Some((_, PartitionState::Serving, Some(api))) => Some(api.clone()),
            _ => None,
        }
    }

    /// The deployment's live-generation record, as last read (in
    /// generation 0's `members`).
    pub fn live(&self) -> LiveGeneration {
        self.owners
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .live
            .clone()
    }

    /// Whether it has read everything `members` held when it started.
    pub fn caught_up(&self) -> bool {
        self.caught_up.load(Ordering::SeqCst)
    }

    /// The owners as last read.
    pub fn owners(&self) -> Owners {
        self.owners
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for MembersView {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
