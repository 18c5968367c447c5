//! A new generation seeded from another generation's checkpoints at one
//! consistent cut (docs/kafka.md, "Generations"): a reset of a running
//! deployment to a checkpoint, while the live generation keeps serving.
//!
//! Why a cut makes this sound: at a cut every partition has applied
//! `events` up to the cut and every `effects` record there was, and
//! nothing was in flight (`crate::ops::cut`). A set of one cut's
//! checkpoints is then a state of the whole deployment that owes nothing
//! to any `effects` topic: the new generation starts it at the cut's
//! `events` offsets and offset 0 of its own, empty, `effects` topic. Each
//! checkpoint is copied with its `effects` position set to 0 and written
//! into the checkpoint directory under the new generation's identity, as
//! handed over under a new epoch; the new generation's group gets that
//! epoch at the start of the log. Its processors, run with `--checkpoints`
//! on that directory, seed from the copies as from a last owner's
//! handover (`crate::task::handover`) and replay `events` from the cut; a
//! processor that cannot use them (no `--checkpoints`, another inbox cap)
//! rebuilds the partition from the start of the log instead: slower, the
//! same views. (Committing the cut's positions to the group instead would
//! make such a processor replay quietly up to them, emitting nothing that
//! the other partitions need.)

use super::reset::{commit_from_outside, GroupReset};
use crate::core::fence::Epoch;
use crate::core::kv::Kv;
use crate::core::position::Positions;
use crate::core::Partition;
use crate::log::kafka::{GroupClient, KafkaConfig, KafkaLog};
use crate::log::{Log, Topic};
use crate::state::checkpoint::{list_in, CheckpointDir, Identity, PartitionCheckpoint};
use crate::state::{meta, BlockCache, Cf, Store, StoreOptions};
use crate::task::kafka::ClusterError;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Whether generation `cfg` (≥ 1) has never committed a position: a
/// generation that can be seeded.
pub fn never_ran(cfg: &KafkaConfig) -> Result<bool, ClusterError> {
    let client = GroupClient::new(cfg, "a reset client")?;
    let all: Vec<Partition> = Partition::all(client.partitions()?).collect();
    Ok(client
        .committed_all(&all)?
        .iter()
        .all(|(at, epoch)| *at == Positions::START && epoch.is_none()))
}

/// Seeds generation `cfg` (one that never ran, its group without members)
/// from the newest cut in `dir` of which every partition has a checkpoint
/// of another generation of the same `events` topic; with `execute`
/// false, makes every check and changes nothing. The report's positions
/// are where each partition resumes (its copy's); the group itself is
/// committed at the start of the log under the report's epoch (see above).
// Long: every refusal before any write, then the writes in the order a crash must leave them (the copies first, the group last).
pub fn seed_generation(
    cfg: &KafkaConfig,
    dir: &Path,
    execute: bool,
) -> Result<GroupReset, ClusterError> {
    let refused = |why: String| ClusterError::Refused(format!("{why}; nothing was changed"));
    let log = KafkaLog::connect(cfg.clone(), Arc::new(AtomicBool::new(false)))?;
    let client = GroupClient::new(cfg, "a reset client")?;
    let members = client.members()?.unwrap_or_default();
    if execute && !members.is_empty() {
        return Err(refused(format!(
            "group {} has members ({}): seed a generation before running its processors",
            cfg.group,
            members.join(", ")
        )));
    }
    if !never_ran(cfg)? {
        return Err(refused(format!(
            "group {} has committed positions: only a generation that never ran can be seeded \
             from another generation's cut",
            cfg.group
        )));
    }
    let (events, effects) = (log.name(Topic::Events), log.name(Topic::Effects));
    let n = log.partitions(Topic::Events);
    let cut = newest_cut(dir, events, effects, n).ok_or_else(|| {
        refused(format!(
            "{} holds no consistent cut of {events} ({n} partitions) with every partition's \
             checkpoint: take one with `feedlog --generation G checkpoint` (processors run with \
             --checkpoints {})",
            dir.display(),
            dir.display()
        ))
    })?;
    let cache = BlockCache::new(8 << 20);
    let mut chosen = Vec::new();
    for p in Partition::all(n) {
        let (path, c) = list_in(dir, p)
            .into_iter()
            .rfind(|(_, c)| c.cut == Some(cut) && of_other(c, events, effects, n))
            .ok_or_else(|| refused(format!("cut {cut} has no checkpoint of partition {p}")))?;
        let start = log.start_offset(Topic::Events, p)?;
        if c.positions.events.0 < start {
            return Err(refused(format!(
                "{events}[{p}] starts at offset {start} (retention), after the cut's offset {}",
                c.positions.events.0
            )));
        }
        let state =
            Store::open_read_only(&path.join("state"), p, n, &cache, crate::state::Kept::NONE)?;
        if state.scan(Cf::Pending, &[], None).next().is_some() {
            return Err(refused(format!(
                "{}: the checkpoint holds records it had not sent, so it was not taken at a \
                 consistent cut",
                path.display()
            )));
        }
        chosen.push((path, c));
    }
    // Above every epoch the copies carry (their owners', stamped on the
    // records they applied), so no receiver fences the new owners.
    let seen = chosen.iter().filter_map(|(_, c)| c.epoch);
    let epoch = Epoch::succeeding(seen, crate::log::now_ms());
    let positions: Vec<(Positions, Option<PartitionCheckpoint>)> = chosen
        .iter()
        .map(|(_, c)| (Positions::new(c.positions.events.0, 0), Some(c.clone())))
        .collect();
    if !execute {
        return Ok(GroupReset {
            executed: false,
            members,
            epoch,
            positions,
        });
    }
    let into = CheckpointDir::new(
        dir,
        Identity {
            events_topic: events.to_string(),
            effects_topic: Some(effects.to_string()),
            partitions: n,
            inbox_cap: chosen[0].1.identity.inbox_cap,
        },
    );
    // The copies first, the group last: a seed stopped halfway leaves a
    // generation that never ran, to seed again.
    for (p, (path, c)) in Partition::all(n).zip(&chosen) {
        transplant(&into, path, c, p, epoch, &cache)?;
    }
    let commit: Vec<(Partition, Positions, Epoch)> = Partition::all(n)
        .map(|p| (p, Positions::START, epoch))
        .collect();
    commit_from_outside(&client, cfg, &commit)?;
    // The epoch travels as the commit's metadata, which some brokers drop:
    // read back, and on such a broker the copies go again and the group is
    // as it was (at the start, without an epoch).
    let all: Vec<Partition> = Partition::all(n).collect();
    if (client.committed_all(&all)?.iter()).any(|(_, e)| *e != Some(epoch)) {
        remove_copies(dir, effects, n, epoch)?;
        return Err(ClusterError::Refused(format!(
            "the brokers did not keep the epoch committed with group {}'s positions (offset-commit \
             metadata), which processors need to trust a seeded copy: this cluster cannot seed a \
             generation; rebuild the generation from the log instead. The copies were removed \
             again; the group is at the start of the log, as before",
            cfg.group
        )));
    }
    Ok(GroupReset {
        executed: true,
        members,
        epoch,
        positions,
    })
}

/// Removes the copies a seed under `epoch` wrote into `dir` for the
/// generation whose `effects` topic is `effects`.
fn remove_copies(dir: &Path, effects: &str, n: u32, epoch: Epoch) -> Result<(), ClusterError> {
    for p in Partition::all(n) {
        let ours = (list_in(dir, p).into_iter())
            .filter(|(_, c)| c.epoch == Some(epoch))
            .filter(|(_, c)| c.identity.effects_topic.as_deref() == Some(effects));
        for (path, _) in ours {
            std::fs::remove_dir_all(&path).map_err(|source| ClusterError::Io {
                action: "removing",
                path: path.clone(),
                source,
            })?;
        }
    }
    Ok(())
}

/// A checkpoint of another generation of `events` (not of `effects`'s).
fn of_other(c: &PartitionCheckpoint, events: &str, effects: &str, n: u32) -> bool {
    c.identity.events_topic == events
        && c.identity.partitions == n
        && c.identity.effects_topic.as_deref() != Some(effects)
}

/// The newest cut id in `dir` with a checkpoint of every partition.
fn newest_cut(dir: &Path, events: &str, effects: &str, n: u32) -> Option<u64> {
    let mut common: Option<BTreeSet<u64>> = None;
    for p in Partition::all(n) {
        let cuts: BTreeSet<u64> = (list_in(dir, p).into_iter())
            .filter(|(_, c)| of_other(c, events, effects, n))
            .filter_map(|(_, c)| c.cut)
            .collect();
        common = Some(match common {
            None => cuts,
            Some(c) => c.intersection(&cuts).copied().collect(),
        });
    }
    common?.last().copied()
}

/// Copies checkpoint `c` (at `path`) of partition `p` into `into`, its
/// `effects` position set to 0.
fn transplant(
    into: &CheckpointDir,
    path: &Path,
    c: &PartitionCheckpoint,
    p: Partition,
    epoch: Epoch,
    cache: &BlockCache,
) -> Result<(), ClusterError> {
    let scratch: PathBuf = path.with_file_name(format!(".tmp-seed-{}-{p}", crate::log::now_ms()));
    let state = scratch.join("state");
    let result = (|| -> Result<(), ClusterError> {
        std::fs::create_dir_all(&scratch).map_err(|source| ClusterError::Io {
            action: "creating",
            path: scratch.clone(),
            source,
        })?;
        CheckpointDir::seed(path, &state)?;
        let n = c.identity.partitions;
        let store = Store::open(&state, p, n, cache, &StoreOptions::default())?;
        let at = Positions::new(c.positions.events.0, 0);
        store.commit(&Default::default(), |b| {
            b.put(Cf::Meta, meta::POS_EFFECTS, &0u64.to_be_bytes());
            b.put(Cf::Meta, meta::APPLIED, &meta::applied_value(at));
        })?;
        let written = into.write(p, &store, epoch, true)?;
        tracing::info!(partition = p.0, from = %path.display(), at = %written.positions, "seeded");
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}
