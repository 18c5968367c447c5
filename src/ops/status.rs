//! `feedlog status`: a consumer group's partitions, owners, committed
//! positions and lag, and whether the whole group is idle.

use crate::core::position::Positions;
use crate::core::Partition;
use crate::log::kafka::members::read_owners;
use crate::log::kafka::{high_watermarks, GroupClient, KafkaConfig, PartitionState};
use crate::log::{LogError, Topic};
use serde::Serialize;
use std::collections::BTreeMap;

/// One topic partition's position and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TopicPosition {
    /// The group's committed position (0 when none).
    pub committed: u64,
    /// The partition's end offset.
    pub end: u64,
    /// `end - committed`.
    pub lag: u64,
}

/// One partition of the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionStatus {
    /// The partition.
    pub partition: Partition,
    /// The member that owns it (from `members`), if any.
    pub owner: Option<String>,
    /// `serving` or `rebuilding`, if owned.
    pub state: Option<PartitionState>,
    /// `events[p]`.
    pub events: TopicPosition,
    /// `effects[p]`.
    pub effects: TopicPosition,
    /// Its warm standbys (docs/kafka.md, "Standbys"), from `members`.
    pub standbys: Vec<StandbyStatus>,
}

/// One warm standby of a partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StandbyStatus {
    /// The member that keeps it.
    pub member: String,
    /// The next `events` offset it applies, as it last announced.
    pub events: u64,
    /// The next `effects` offset it applies, as it last announced.
    pub effects: u64,
    /// Records of both topics between it and the group's committed
    /// positions: what a takeover from it replays.
    pub behind: u64,
}

/// The group's state: what `feedlog status` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    /// The consumer group.
    pub group: String,
    /// Every partition.
    pub partitions: Vec<PartitionStatus>,
    /// Whether every partition of both topics is consumed to its end: the
    /// group has applied everything and nothing is in flight.
    pub idle: bool,
}

/// Reads the group's committed positions, the topics' ends and the owners.
pub fn status(cfg: &KafkaConfig) -> Result<Status, LogError> {
    let client = GroupClient::new(cfg, "a status client")?;
    let (events, effects) = (cfg.name(Topic::Events), cfg.name(Topic::Effects));
    let n = client.partitions()?;
    let all: Vec<Partition> = Partition::all(n).collect();
    let committed: Vec<Positions> = (client.committed_all(&all)?.into_iter())
        .map(|(at, _)| at)
        .collect();
    let owners = read_owners(cfg)?;
    // The ends, read after the committed positions (never ahead of them
    // in time, so `idle` is never claimed early).
    let mut ends: BTreeMap<(String, Partition), u64> = BTreeMap::new();
    for topic in [&events, &effects] {
        let found = high_watermarks(cfg, topic, &all)?;
        ends.extend(all.iter().map(|p| (topic.clone(), *p)).zip(found));
    }
    let position = |topic: &str, p: Partition| -> Result<TopicPosition, LogError> {
        let end = ends.get(&(topic.to_string(), p)).copied().unwrap_or(0);
        let at = committed[p.index()];
        let committed = if topic == events {
            at.events.0
        } else {
            at.effects.0
        };
        Ok(TopicPosition {
            committed,
            end,
            lag: end.saturating_sub(committed),
        })
    };
    let mut partitions = Vec::with_capacity(n as usize);
    for p in Partition::all(n) {
        let owner = owners.partitions.get(&p);
        let standbys = (owners.standbys.get(&p).into_iter().flatten())
            .map(|(member, at)| StandbyStatus {
                member: member.clone(),
                events: at.events.0,
                effects: at.effects.0,
                behind: at.records_to(committed[p.index()]),
            })
            .collect();
        partitions.push(PartitionStatus {
            standbys,
            partition: p,
            owner: owner.map(|o| o.0.clone()),
            state: owner.map(|o| o.1),
            events: position(&events, p)?,
            effects: position(&effects, p)?,
        });
    }
    // Consumed to the end by an owner that has caught up: a new owner still
    // replaying never commits below the group's positions, so the lag alone
    // cannot tell.
    let idle = partitions.iter().all(|p| {
        p.events.lag == 0 && p.effects.lag == 0 && p.state == Some(PartitionState::Serving)
    });
    Ok(Status {
        group: cfg.group.clone(),
        partitions,
        idle,
    })
}
