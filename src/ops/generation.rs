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
use crate::core::Generation;
use crate::core::Partition;
use crate::log::kafka::members::{read_owners, write_live_generation, LiveGeneration};
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
    /// The generation is live already.
    #[error("generation {0} already answers readers")]
    AlreadyLive(Generation),
    /// The generation was retired, or is kept for a rollback.
    #[error(
        "generation {0} was live before (retired, or kept for `swap --rollback`): its topics hold \
         its records; rebuild into a generation never used"
    )]
    Retired(Generation),
    /// The generation has not caught up with the live one in time.
    #[error(
        "generation {generation} is behind the live generation {live}: partition {partition} \
         at events {at}, the live one at {want} (is it running and serving? `feedlog --generation \
         {generation} status` shows where it is)"
    )]
    Behind {
        /// The generation to swap in.
        generation: Generation,
        /// The live one.
        live: Generation,
        /// The first partition behind.
        partition: Partition,
        /// Its committed `events` position (or 0 while it is not serving).
        at: u64,
        /// The live generation's.
        want: u64,
    },
    /// The last swap's replaced generation is still kept.
    #[error(
        "generation {kept} is still kept for a rollback of the swap to generation {live}: \
         `swap --confirm` (retire it) or `swap --rollback` first"
    )]
    Kept {
        /// The kept generation.
        kept: Generation,
        /// The live one.
        live: Generation,
    },
    /// The live-generation record changed while the swap waited.
    #[error("another swap, rollback or confirm was made while this swap waited: nothing was changed; look and try again")]
    Changed,
    /// The swap was called off (its processor is stopping).
    #[error("the swap was called off before it was made: this processor is stopping")]
    Cancelled,
    /// Nothing to roll back to, or to confirm.
    #[error("no swap to {0}: generation {1} answers readers and no earlier generation is kept")]
    NoPrevious(&'static str, Generation),
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
            GenerationError::Behind { .. }
            | GenerationError::Changed
            | GenerationError::Cancelled => Disposition::Retry,
            GenerationError::Kept { .. } => Disposition::Stop,
            GenerationError::Live
            | GenerationError::AlreadyLive(_)
            | GenerationError::Retired(_)
            | GenerationError::NoPrevious(..)
            | GenerationError::Retention { .. } => Disposition::Stop,
        }
    }
}

/// Checks that a rebuild of `generation` of `deployment` can start: it has
/// never answered readers (its topics hold no records of an earlier life),
/// and every `events` partition still starts at offset 0. Returns the `events` ends now: what the rebuild must reach to
/// have replayed the log as it was when it started.
pub fn check_rebuild(
    deployment: &KafkaConfig,
    generation: Generation,
) -> Result<Vec<u64>, GenerationError> {
    let live = live_generation(deployment)?;
    if generation.is_first() && live.live.is_first() {
        return Err(GenerationError::Live);
    }
    if generation == live.live {
        return Err(GenerationError::AlreadyLive(generation));
    }
    if live.retired.contains(&generation) || live.previous == Some(generation) {
        // A rebuild replays from offset 0 into the generation's topics,
        // which hold that generation's earlier records.
        return Err(GenerationError::Retired(generation));
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

/// The deployment's live-generation record (generation 0 until a swap).
pub fn live_generation(deployment: &KafkaConfig) -> Result<LiveGeneration, LogError> {
    Ok(read_owners(deployment)?.live)
}

/// What a swap did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Swapped {
    /// The generation that answered readers.
    pub from: Generation,
    /// The one that answers them now.
    pub to: Generation,
    /// How long it waited for `to` to catch up with `from`, ms.
    pub waited_ms: u64,
}

/// Writes `to` as the live generation in place of `cur`'s, which is kept
/// for a rollback.
fn make_live(
    deployment: &KafkaConfig,
    cur: LiveGeneration,
    to: Generation,
    waited_ms: u64,
) -> Result<Swapped, GenerationError> {
    let from = cur.live;
    let record = LiveGeneration {
        live: to,
        previous: Some(from),
        retired: cur.retired,
        at_ms: crate::log::now_ms(),
    };
    write_live_generation(deployment, &record)?;
    Ok(Swapped {
        from,
        to,
        waited_ms,
    })
}

/// Makes `generation` answer the deployment's readers, once every one of
/// its partitions serves and has applied `events` at least as far as the
/// live generation had when the swap began (waiting up to `timeout`): every
/// processor of every generation forwards its readers' requests to it from
/// then on. The generation it replaces keeps processing until
/// [`confirm`], and [`rollback`] makes it live again.
pub fn swap(
    deployment: &KafkaConfig,
    generation: Generation,
    timeout: std::time::Duration,
) -> Result<Swapped, GenerationError> {
    swap_unless(deployment, generation, timeout, &|| false)
}

/// [`swap`], unless `cancelled` says so while it waits or just before it
/// writes the record (a backfill's processor that stops).
pub fn swap_unless(
    deployment: &KafkaConfig,
    generation: Generation,
    timeout: std::time::Duration,
    cancelled: &dyn Fn() -> bool,
) -> Result<Swapped, GenerationError> {
    let cur = live_generation(deployment)?;
    if generation == cur.live {
        return Err(GenerationError::AlreadyLive(generation));
    }
    if cur.retired.contains(&generation) {
        return Err(GenerationError::Retired(generation));
    }
    if let Some(kept) = cur.previous.filter(|&k| k != generation) {
        return Err(GenerationError::Kept {
            kept,
            live: cur.live,
        });
    }
    let want: Vec<u64> = status(&deployment.generation(cur.live))?
        .partitions
        .iter()
        .map(|p| p.events.committed)
        .collect();
    let started = std::time::Instant::now();
    loop {
        let new = status(&deployment.generation(generation))?;
        let behind = new.partitions.iter().find(|p| {
            p.state != Some(PartitionState::Serving)
                || p.events.committed < want.get(p.partition.index()).copied().unwrap_or(0)
        });
        if cancelled() {
            return Err(GenerationError::Cancelled);
        }
        let Some(b) = behind else { break };
        if started.elapsed() > timeout {
            return Err(GenerationError::Behind {
                generation,
                live: cur.live,
                partition: b.partition,
                at: match b.state {
                    Some(PartitionState::Serving) => b.events.committed,
                    _ => 0,
                },
                want: want.get(b.partition.index()).copied().unwrap_or(0),
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    if live_generation(deployment)? != cur {
        return Err(GenerationError::Changed);
    }
    if cancelled() {
        return Err(GenerationError::Cancelled);
    }
    make_live(
        deployment,
        cur,
        generation,
        started.elapsed().as_millis() as u64,
    )
}

/// Makes the generation the last swap replaced answer readers again.
pub fn rollback(deployment: &KafkaConfig) -> Result<Swapped, GenerationError> {
    let cur = live_generation(deployment)?;
    let previous = cur
        .previous
        .ok_or(GenerationError::NoPrevious("roll back", cur.live))?;
    make_live(deployment, cur, previous, 0)
}

/// Retires the generation the last swap replaced: its processors stop, and
/// it can no longer be rolled back to. Returns it.
pub fn confirm(deployment: &KafkaConfig) -> Result<Generation, GenerationError> {
    let cur = live_generation(deployment)?;
    let previous = cur
        .previous
        .ok_or(GenerationError::NoPrevious("confirm", cur.live))?;
    let mut retired = cur.retired;
    retired.push(previous);
    write_live_generation(
        deployment,
        &LiveGeneration {
            live: cur.live,
            previous: None,
            retired,
            at_ms: crate::log::now_ms(),
        },
    )?;
    Ok(previous)
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
