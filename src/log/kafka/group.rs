//! Membership in the processors' consumer group.
//!
//! The group consumer subscribes to `events` and never reads it (its
//! partitions are paused): the `events` partitions the group assigns to
//! this process are the partitions it owns. Rebalances are only *recorded*
//! by the consumer's callback, which returns at once: [`GroupMember::poll`]
//! hands them to the control loop, which does the handover (finish the
//! batches, commit, checkpoint) and only then completes the rebalance with
//! [`GroupMember::complete`] — librdkafka waits for that call. Nothing in
//! the callback blocks, locks for long, or can panic.
//!
//! Positions are committed with the owner's epoch as metadata, so a store
//! can tell whether another processor owned its partition since.

use super::{kafka_err, KafkaConfig, REQUEST_TIMEOUT};
use crate::core::fence::Epoch;
use crate::core::position::Positions;
use crate::core::Partition;
use crate::log::{KafkaFailure, LogError};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the group did to this member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEvent {
    /// These partitions are now this member's.
    Assigned(Vec<Partition>),
    /// These partitions are taken away; `lost` when the session expired
    /// (another member may own them already: do not commit).
    Revoked {
        /// The partitions.
        partitions: Vec<Partition>,
        /// Whether the assignment was lost rather than handed over.
        lost: bool,
    },
    /// The rebalance failed; the member's assignment is dropped.
    Failed(String),
}

/// A recorded rebalance, to be completed with [`GroupMember::complete`]
/// once the control loop has done its part.
pub struct Rebalance {
    /// What happened.
    pub event: GroupEvent,
    tpl: TopicPartitionList,
}

/// A synchronous commit under way on a thread of its own
/// ([`GroupMember::start_commit`]).
pub struct PendingCommit {
    answered: std::sync::mpsc::Receiver<Result<(), LogError>>,
}

impl PendingCommit {
    /// The coordinator's answer, waiting at most `within` for it.
    pub fn wait(&self, within: Duration) -> Result<(), LogError> {
        self.answered.recv_timeout(within).unwrap_or_else(|_| {
            Err(LogError::kafka(
                "committing the group's positions",
                format!("the coordinator did not answer within {within:?}"),
                KafkaFailure::Transient,
            ))
        })
    }

    /// The coordinator's answer if it came, without waiting.
    pub fn answer(&self) -> Option<Result<(), LogError>> {
        use std::sync::mpsc::TryRecvError;
        match self.answered.try_recv() {
            Ok(r) => Some(r),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Err(LogError::kafka(
                "committing the group's positions",
                "its thread ended without an answer".to_string(),
                KafkaFailure::Transient,
            ))),
        }
    }
}

/// The group consumer's context: records rebalances for the control loop.
struct Recorder {
    events_topic: String,
    pending: Mutex<Vec<Rebalance>>,
    /// While leaving, rebalances complete in the callback (nothing is
    /// owned any more, and closing waits for them).
    leaving: AtomicBool,
}

impl ClientContext for Recorder {}

impl ConsumerContext for Recorder {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let partitions: Vec<Partition> = tpl
            .elements_for_topic(&self.events_topic)
            .iter()
            .map(|e| Partition(e.partition() as u32))
            .collect();
        let event = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                GroupEvent::Assigned(partitions)
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => GroupEvent::Revoked {
                partitions,
                lost: consumer.assignment_lost(),
            },
            other => GroupEvent::Failed(RDKafkaErrorCode::from(other).to_string()),
        };
        let r = Rebalance {
            event,
            tpl: tpl.clone(),
        };
        if self.leaving.load(Ordering::SeqCst) {
            if let Err(e) = apply(consumer, &r) {
                tracing::warn!(error = %e, "completing a rebalance while leaving the group");
            }
            return;
        }
        match self.pending.lock() {
            Ok(mut q) => q.push(r),
            Err(poisoned) => poisoned.into_inner().push(r),
        }
    }
}

/// Tells librdkafka the application has taken `r` into account.
fn apply(consumer: &BaseConsumer<Recorder>, r: &Rebalance) -> Result<(), LogError> {
    let cooperative = matches!(
        consumer.rebalance_protocol(),
        RebalanceProtocol::Cooperative
    );
    let done = match (&r.event, cooperative) {
        (GroupEvent::Assigned(_), true) => consumer.incremental_assign(&r.tpl),
        (GroupEvent::Assigned(_), false) => consumer.assign(&r.tpl),
        (_, true) => consumer.incremental_unassign(&r.tpl),
        (_, false) => consumer.unassign(),
    };
    done.map_err(kafka_err("completing a rebalance"))?;
    if let GroupEvent::Assigned(_) = r.event {
        // Ownership only: the tasks read through their own consumers.
        consumer
            .pause(&r.tpl)
            .map_err(kafka_err("pausing the group consumer's partitions"))?;
    }
    Ok(())
}

/// How this process joins the group.
#[derive(Debug, Clone)]
pub struct MemberSettings {
    /// `client.id` suffix: the member's name.
    pub member: String,
    /// `group.instance.id`, for static membership.
    pub instance_id: Option<String>,
    /// Cooperative (incremental) rebalancing instead of eager.
    pub cooperative: bool,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
}

/// This process's membership in the processors' group.
pub struct GroupMember {
    consumer: Arc<BaseConsumer<Recorder>>,
    events_topic: String,
    effects_topic: String,
}

impl GroupMember {
    /// Joins the group (subscribes to `events`); partitions arrive through
    /// [`GroupMember::poll`].
    pub fn join(cfg: &KafkaConfig, s: &MemberSettings) -> Result<GroupMember, LogError> {
        let events_topic = cfg.name(crate::log::Topic::Events);
        let effects_topic = cfg.name(crate::log::Topic::Effects);
        let mut c = cfg.client_config();
        c.set("group.id", &cfg.group)
            .set("client.id", format!("feedlog/{}", s.member))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set(
                "session.timeout.ms",
                s.session_timeout.as_millis().to_string(),
            )
            .set(
                "heartbeat.interval.ms",
                (s.session_timeout.as_millis() / 4).max(100).to_string(),
            )
            .set(
                "partition.assignment.strategy",
                if s.cooperative {
                    "cooperative-sticky"
                } else {
                    "range"
                },
            );
        if let Some(id) = &s.instance_id {
            c.set("group.instance.id", id);
        }
        let consumer: BaseConsumer<Recorder> = c
            .create_with_context(Recorder {
                events_topic: events_topic.clone(),
                pending: Mutex::new(Vec::new()),
                leaving: AtomicBool::new(false),
            })
            .map_err(kafka_err("creating the group consumer"))?;
        consumer
            .subscribe(&[&events_topic])
            .map_err(kafka_err(format!("subscribing to {events_topic}")))?;
        Ok(GroupMember {
            consumer: Arc::new(consumer),
            events_topic,
            effects_topic,
        })
    }

    /// Serves the group protocol for up to `timeout`; returns the
    /// rebalances that happened, each to be completed with
    /// [`GroupMember::complete`] once handled.
    pub fn poll(&self, timeout: Duration) -> Vec<Rebalance> {
        if let Some(Err(e)) = self.consumer.poll(timeout) {
            tracing::warn!(error = %e, "group consumer");
        }
        let ctx = self.consumer.context();
        let mut q = ctx.pending.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *q)
    }

    /// Completes a rebalance the control loop has handled (a revoke after
    /// the partitions' tasks stopped and their positions were committed).
    pub fn complete(&self, r: &Rebalance) -> Result<(), LogError> {
        apply(&self.consumer, r)
    }

    /// Whether the last revoke was a loss (session expired).
    pub fn assignment_lost(&self) -> bool {
        self.consumer.assignment_lost()
    }

    /// librdkafka's fatal error of the group consumer, if one occurred
    /// (e.g. another process took this one's static membership): the
    /// member is out of the group for good.
    pub fn fatal_error(&self) -> Option<String> {
        self.consumer
            .client()
            .fatal_error()
            .map(|(code, reason)| format!("{code}: {reason}"))
    }

    /// The group's committed positions of `events[p]` and `effects[p]` (0
    /// where nothing is committed), and the epoch of the owner that
    /// committed them (`None` when none, or one of an earlier version).
    pub fn committed(&self, p: Partition) -> Result<(Positions, Option<Epoch>), LogError> {
        committed_of(&self.consumer, &self.events_topic, &self.effects_topic, p)
    }

    /// Commits positions with their owners' epochs in the background
    /// (nothing waits for the answer).
    pub fn commit_async(
        &self,
        positions: &[(Partition, Positions, Epoch)],
    ) -> Result<(), LogError> {
        let Some(tpl) = self.to_commit(positions) else {
            return Ok(());
        };
        (self.consumer.commit(&tpl, CommitMode::Async))
            .map_err(kafka_err("committing the group's positions"))
    }

    /// Starts a synchronous commit of positions with their owners' epochs
    /// on a thread of its own, and returns at once: librdkafka's own wait
    /// for the answer is its socket timeout (a minute) or longer when the
    /// coordinator cannot be reached, too long for the control loop to
    /// stand still. Success also means the coordinator took this process
    /// for a member of the current generation when it answered (it refuses
    /// commits of an expired or older member).
    pub fn start_commit(
        &self,
        positions: &[(Partition, Positions, Epoch)],
    ) -> Result<PendingCommit, LogError> {
        let (answer, answered) = std::sync::mpsc::channel();
        let Some(tpl) = self.to_commit(positions) else {
            let _ = answer.send(Ok(()));
            return Ok(PendingCommit { answered });
        };
        let consumer = Arc::clone(&self.consumer);
        std::thread::Builder::new()
            .name("feedlog-commit".into())
            .spawn(move || {
                let _ = answer.send(
                    (consumer.commit(&tpl, CommitMode::Sync))
                        .map_err(kafka_err("committing the group's positions")),
                );
            })
            .map_err(|e| {
                LogError::kafka(
                    "committing the group's positions",
                    format!("starting its thread: {e}"),
                    KafkaFailure::Transient,
                )
            })?;
        Ok(PendingCommit { answered })
    }

    /// Commits positions synchronously, waiting at most `within` for the
    /// coordinator (see [`GroupMember::start_commit`]). Past `within` the
    /// commit is left to finish or fail on its own and this returns an
    /// error; the inputs stay uncommitted, so whoever owns the partitions
    /// next processes them again (nothing is lost).
    pub fn commit_within(
        &self,
        positions: &[(Partition, Positions, Epoch)],
        within: Duration,
    ) -> Result<(), LogError> {
        self.start_commit(positions)?.wait(within)
    }

    /// The offsets of `positions` to commit, `None` when there are none.
    fn to_commit(&self, positions: &[(Partition, Positions, Epoch)]) -> Option<TopicPartitionList> {
        let tpl = positions_tpl(&self.events_topic, &self.effects_topic, positions);
        (tpl.count() > 0).then_some(tpl)
    }

    /// Leaves the group: rebalances from here on complete at once.
    pub fn leave(self) {
        self.consumer
            .context()
            .leaving
            .store(true, Ordering::SeqCst);
        // Rebalances recorded but not completed: nothing is owned any more.
        for r in self.poll(Duration::ZERO) {
            if let Err(e) = self.complete(&r) {
                tracing::warn!(error = %e, "completing a rebalance while leaving the group");
            }
        }
        self.consumer.unsubscribe();
        // Closing waits for the coordinator to hear of the departure, for
        // ever if it cannot be reached (a consumer's drop waits until it
        // closed): give it a while, then leave it to expire this member
        // after its session, and do not wait on the client any more.
        if let Err(e) = self.consumer.close_queue() {
            // Not closing (a fatal error, say): its drop does not wait.
            tracing::warn!(error = %e, "leaving the group");
            return;
        }
        let deadline = Instant::now() + LEAVE_WITHIN;
        while !self.consumer.closed() && Instant::now() < deadline {
            let _ = self.consumer.poll(Duration::from_millis(100));
        }
        if !self.consumer.closed() {
            tracing::warn!(
                "leaving the group: the coordinator did not answer within {LEAVE_WITHIN:?}; \
                 it expires this member after its session timeout"
            );
            std::mem::forget(self);
        }
    }
}

/// How long leaving the group waits for the coordinator.
const LEAVE_WITHIN: Duration = Duration::from_secs(10);

fn positions_tpl(
    events: &str,
    effects: &str,
    positions: &[(Partition, Positions, Epoch)],
) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for (p, at, epoch) in positions {
        for (topic, offset) in [(events, at.events.0), (effects, at.effects.0)] {
            let mut e = tpl.add_partition(topic, p.0 as i32);
            let _ = e.set_offset(Offset::Offset(offset as i64));
            e.set_metadata(epoch.to_string());
        }
    }
    tpl
}

fn committed_of<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    events: &str,
    effects: &str,
    p: Partition,
) -> Result<(Positions, Option<Epoch>), LogError> {
    Ok(committed_of_all(consumer, events, effects, &[p])?[0])
}

/// The group's committed positions and epochs of `partitions`, in one
/// request, in their order.
fn committed_of_all<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    events: &str,
    effects: &str,
    partitions: &[Partition],
) -> Result<Vec<(Positions, Option<Epoch>)>, LogError> {
    let mut tpl = TopicPartitionList::new();
    for p in partitions {
        tpl.add_partition(events, p.0 as i32);
        tpl.add_partition(effects, p.0 as i32);
    }
    let what = match partitions {
        [p] => format!("reading the group's committed positions of partition {p}"),
        _ => "reading the group's committed positions".to_string(),
    };
    let got = consumer
        .committed_offsets(tpl, REQUEST_TIMEOUT)
        .map_err(kafka_err(what))?;
    let at = |topic: &str, p: Partition| {
        got.find_partition(topic, p.0 as i32)
            .and_then(|e| e.offset().to_raw())
            .filter(|o| *o >= 0)
            .unwrap_or(0) as u64
    };
    Ok(partitions
        .iter()
        .map(|&p| {
            let epoch = got
                .find_partition(events, p.0 as i32)
                .and_then(|e| Epoch::parse(e.metadata()));
            (Positions::new(at(events, p), at(effects, p)), epoch)
        })
        .collect())
}

/// A client of the group that never joins it: reads and commits positions
/// from outside (status, reset).
pub struct GroupClient {
    consumer: BaseConsumer,
    cfg: KafkaConfig,
}

/// Why positions committed from outside the group were refused.
#[derive(Debug, thiserror::Error)]
pub enum OutsideCommit {
    /// The broker still counts members of the group (sessions of processors
    /// that stopped a moment ago): retry.
    #[error("the group still has members: {0}")]
    Busy(String),
    /// Any other refusal.
    #[error(transparent)]
    Failed(LogError),
}

impl GroupClient {
    /// A client of `cfg.group`.
    pub fn new(cfg: &KafkaConfig, what: &str) -> Result<GroupClient, LogError> {
        let consumer = cfg
            .client_config()
            .set("group.id", &cfg.group)
            .set("enable.auto.commit", "false")
            .create()
            .map_err(kafka_err(format!("creating {what}")))?;
        Ok(GroupClient {
            consumer,
            cfg: cfg.clone(),
        })
    }

    /// The partition count of `events`.
    pub fn partitions(&self) -> Result<u32, LogError> {
        super::topic_partitions(&self.consumer, &self.cfg.name(crate::log::Topic::Events))
    }

    /// The first offset of each of `partitions` of `topic`: above 0 where
    /// retention has deleted the start.
    pub fn log_starts(&self, topic: &str, partitions: &[Partition]) -> Result<Vec<u64>, LogError> {
        partitions
            .iter()
            .map(|p| {
                self.consumer
                    .fetch_watermarks(topic, p.0 as i32, super::REQUEST_TIMEOUT)
                    .map(|(low, _)| low.max(0) as u64)
                    .map_err(kafka_err(format!("reading the start of {topic}[{p}]")))
            })
            .collect()
    }

    /// The group's committed positions and epoch of partition `p`.
    pub fn committed(&self, p: Partition) -> Result<(Positions, Option<Epoch>), LogError> {
        let (events, effects) = (
            self.cfg.name(crate::log::Topic::Events),
            self.cfg.name(crate::log::Topic::Effects),
        );
        committed_of(&self.consumer, &events, &effects, p)
    }

    /// The group's committed positions and epochs of `partitions`, in one
    /// request, in their order.
    pub fn committed_all(
        &self,
        partitions: &[Partition],
    ) -> Result<Vec<(Positions, Option<Epoch>)>, LogError> {
        let (events, effects) = (
            self.cfg.name(crate::log::Topic::Events),
            self.cfg.name(crate::log::Topic::Effects),
        );
        committed_of_all(&self.consumer, &events, &effects, partitions)
    }

    /// The client ids of the group's members, as the broker describes the
    /// group; `None` from a broker that cannot describe groups.
    pub fn members(&self) -> Result<Option<Vec<String>>, LogError> {
        match self
            .consumer
            .fetch_group_list(Some(&self.cfg.group), REQUEST_TIMEOUT)
        {
            Ok(groups) => Ok(Some(
                groups
                    .groups()
                    .iter()
                    .flat_map(|g| g.members().iter().map(|m| m.client_id().to_string()))
                    .collect(),
            )),
            Err(e) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::UnsupportedFeature) => {
                Ok(None)
            }
            Err(e) => Err(kafka_err(format!("describing group {}", self.cfg.group))(e)),
        }
    }

    /// Commits `positions` from outside the group, as Kafka's own
    /// offset-reset tools do: brokers accept it only while the group has
    /// no members.
    pub fn commit(&self, positions: &[(Partition, Positions, Epoch)]) -> Result<(), OutsideCommit> {
        let (events, effects) = (
            self.cfg.name(crate::log::Topic::Events),
            self.cfg.name(crate::log::Topic::Effects),
        );
        let tpl = positions_tpl(&events, &effects, positions);
        match self.consumer.commit(&tpl, CommitMode::Sync) {
            Ok(()) => Ok(()),
            Err(e)
                if matches!(
                    e.rdkafka_error_code(),
                    Some(
                        RDKafkaErrorCode::UnknownMemberId
                            | RDKafkaErrorCode::IllegalGeneration
                            | RDKafkaErrorCode::RebalanceInProgress
                    )
                ) =>
            {
                Err(OutsideCommit::Busy(e.to_string()))
            }
            Err(e) => Err(OutsideCommit::Failed(kafka_err("committing")(e))),
        }
    }
}

#[cfg(test)]
mod tests;
