//! Generations of a Kafka deployment (docs/kafka.md, "Generations"): a
//! second state built beside the live one from the same `events` topic,
//! by a consumer group and internal topics of its own
//! ([`KafkaConfig::generation`]), while the live group keeps serving.
//!
//! What this module decides: whether the log still holds everything a
//! rebuild from the start needs, and how far a rebuilding generation has
//! come — per partition, against the `events` ends taken when the rebuild
//! started.

use super::status::{status, TopicPosition};
use crate::core::Disposition;
use crate::core::Partition;
use crate::log::kafka::{high_watermarks, GroupClient, KafkaConfig, PartitionState};
use crate::log::{LogError, Topic};
use serde::Serialize;

/// Why a generation cannot be rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum GenerationError {
    /// A Kafka call failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The generation asked for is the deployment itself.
    #[error(
        "generation 0 is the deployment itself: a rebuild beside it goes into a new generation \
         (--generation N, N ≥ 1); to rebuild generation 0 in place, use `reset --to-start` with the group stopped"
    )]
    Live,
    /// Retention has deleted the start of the log.
    #[error(
        "{topic}[{partition}] starts at offset {start}: retention has deleted offsets 0..{start}, \
         so a rebuild from the log would miss them (a rebuild needs the whole log: keep `events` \
         forever, as topics/events.toml does)"
    )]
    Retention {
        /// The topic's Kafka name.
        topic: String,
        /// The partition.
        partition: Partition,
        /// Its first offset.
        start: u64,
    },
}

impl GenerationError {
    /// Whether trying again can help.
    pub fn disposition(&self) -> Disposition {
        match self {
            GenerationError::Log(e) => e.disposition(),
            GenerationError::Live | GenerationError::Retention { .. } => Disposition::Stop,
        }
    }
}

/// Checks that a rebuild of `generation` of `deployment` can start: it is
/// not the deployment itself, and every `events` partition still starts at
/// offset 0. Returns the `events` ends now: what the rebuild must reach to
/// have replayed the log as it was when it started.
pub fn check_rebuild(
    deployment: &KafkaConfig,
    generation: u32,
) -> Result<Vec<u64>, GenerationError> {
    if generation == 0 {
        return Err(GenerationError::Live);
    }
    let client = GroupClient::new(deployment, "a rebuild check")?;
    let n = client.partitions()?;
    let topic = deployment.name(Topic::Events);
    let all: Vec<Partition> = Partition::all(n).collect();
    for (&p, start) in all.iter().zip(client.log_starts(&topic, &all)?) {
        if start > 0 {
            return Err(GenerationError::Retention {
                topic,
                partition: p,
                start,
            });
        }
    }
    Ok(high_watermarks(deployment, &topic, &all)?)
}

/// How far one partition of a rebuilding generation has come.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionRebuild {
    /// The partition.
    pub partition: Partition,
    /// The member of the new generation that owns it, if any.
    pub owner: Option<String>,
    /// `serving` once its owner has caught up with what it was given.
    pub state: Option<PartitionState>,
    /// The new generation's committed `events` position and the end now.
    pub events: TopicPosition,
    /// The `events` end when the rebuild started.
    pub target: u64,
}

impl PartitionRebuild {
    /// Whether it has replayed everything the log held when the rebuild
    /// started and serves.
    pub fn caught_up(&self) -> bool {
        self.state == Some(PartitionState::Serving) && self.events.committed >= self.target
    }

    /// Of the records to replay, the share replayed, in percent.
    pub fn percent(&self) -> f64 {
        match self.target {
            0 => 100.0,
            t => (100.0 * self.events.committed as f64 / t as f64).min(100.0),
        }
    }
}

/// How far a rebuilding generation has come.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RebuildProgress {
    /// Per partition.
    pub partitions: Vec<PartitionRebuild>,
}

impl RebuildProgress {
    /// Every partition has caught up: the generation follows the log.
    pub fn caught_up(&self) -> bool {
        self.partitions.iter().all(PartitionRebuild::caught_up)
    }

    /// One line: each partition's share replayed, and its owner while it
    /// has none or rebuilds.
    pub fn line(&self) -> String {
        self.partitions
            .iter()
            .map(|p| {
                let who = match (&p.owner, p.state) {
                    (None, _) => " (no owner yet)",
                    (Some(_), Some(PartitionState::Rebuilding)) => " (replaying)",
                    _ => "",
                };
                format!("p{} {:.0}%{who}", p.partition, p.percent())
            })
            .collect::<Vec<_>>()
            .join("  ")
    }
}

/// The progress of the generation `shadow` (its settings, from
/// [`KafkaConfig::generation`]) against the `events` ends `target`.
pub fn progress(shadow: &KafkaConfig, target: &[u64]) -> Result<RebuildProgress, LogError> {
    let s = status(shadow)?;
    Ok(RebuildProgress {
        partitions: s
            .partitions
            .into_iter()
            .map(|p| PartitionRebuild {
                target: target.get(p.partition.index()).copied().unwrap_or(0),
                partition: p.partition,
                owner: p.owner,
                state: p.state,
                events: p.events,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(
        p: u32,
        state: Option<PartitionState>,
        committed: u64,
        target: u64,
    ) -> PartitionRebuild {
        PartitionRebuild {
            partition: Partition(p),
            owner: state.map(|_| "m1".to_string()),
            state,
            events: TopicPosition {
                committed,
                end: target + 5,
                lag: target + 5 - committed,
            },
            target,
        }
    }

    // Proves a generation has caught up only when every partition serves and has passed the events end of the rebuild's start, whatever arrived since.
    #[test]
    fn caught_up_means_every_partition_serves_past_the_start_ends() {
        let serving = Some(PartitionState::Serving);
        let done = part(0, serving, 10, 10);
        assert!(done.caught_up() && done.percent() == 100.0);
        let behind = part(1, serving, 4, 10);
        assert!(!behind.caught_up());
        assert_eq!(behind.percent(), 40.0);
        let replaying = part(2, Some(PartitionState::Rebuilding), 10, 10);
        assert!(
            !replaying.caught_up(),
            "still below its predecessors' marks"
        );
        let empty = part(3, serving, 0, 0);
        assert!(empty.caught_up() && empty.percent() == 100.0);
        let all = RebuildProgress {
            partitions: vec![done.clone(), empty.clone()],
        };
        assert!(all.caught_up());
        let some = RebuildProgress {
            partitions: vec![done, behind, replaying, part(4, None, 0, 3)],
        };
        assert!(!some.caught_up());
        assert_eq!(
            some.line(),
            "p0 100%  p1 40%  p2 100% (replaying)  p4 0% (no owner yet)"
        );
    }
}
