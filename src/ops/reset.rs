//! Moving state back: a data directory's state to the start of its log or
//! to a checkpoint (a new state generation; the old one is kept), and a
//! consumer group's positions (Kafka mode). Also the state generations of a
//! data directory: list, drop.

use super::rebuild::ReplayError;
use crate::core::fence::Epoch;
use crate::core::position::Positions;
use crate::core::Partition;
use crate::core::DEFAULT_INBOX_CAP;
use crate::log::kafka::group::OutsideCommit;
use crate::log::kafka::members::read_owners;
use crate::log::kafka::{GroupClient, KafkaConfig, KafkaLog};
use crate::log::{Log, Topic};
use crate::state::checkpoint::{
    canonical, check_held, list_in, DirCheckpoint, PartitionCheckpoint,
};
use crate::state::datadir::DataDir;
use crate::task::kafka::ClusterError;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn refused(msg: String) -> ReplayError {
    ReplayError::Refused(msg)
}

/// Where [`reset`] moves a data directory's state.
#[derive(Debug, Clone)]
pub enum ResetTo {
    /// An empty state: the next run processes the whole log.
    Start,
    /// An empty state and an empty `effects` log (the old one is kept
    /// beside it, renamed): the next run processes every event again and
    /// derives every internal message anew. After a cut of `events` (or
    /// `effects`), the old effects answer events that are gone (or miss
    /// answers): this rebuilds every view from what the events log holds.
    Regenerate,
    /// The state of a checkpoint of this data directory.
    Checkpoint(PathBuf),
}

/// What [`reset`] did, or what [`preview`] says it would do.
#[derive(Debug, Clone, Serialize)]
pub struct ResetReport {
    /// Whether anything changed: false for a [`preview`].
    pub executed: bool,
    /// The generation now active (for a preview: the one a reset would make).
    pub generation: String,
    /// The generation that was active, kept on disk.
    pub previous: String,
    /// Per partition, where processing resumes (next `events`, `effects`).
    pub positions: Vec<Positions>,
    /// Records the next run processes again (both inputs, to today's ends).
    pub to_process: u64,
}

/// Moves the idle data directory `dir` (the caller holds `run.lock`) back
/// to `to` as a new state generation; the old one stays until dropped.
/// Refuses, changing nothing, when the log no longer holds a position
/// processing would resume from (retention).
pub fn reset(dir: &Path, to: &ResetTo) -> Result<ResetReport, ReplayError> {
    reset_or_preview(dir, to, true)
}

/// What [`reset`] would do to `dir`, with every check it makes, changing
/// nothing: `feedlog reset --dry-run`, as Kafka's offset tools preview
/// before `--execute`.
pub fn preview(dir: &Path, to: &ResetTo) -> Result<ResetReport, ReplayError> {
    reset_or_preview(dir, to, false)
}

fn reset_or_preview(dir: &Path, to: &ResetTo, execute: bool) -> Result<ResetReport, ReplayError> {
    let mut d = DataDir::open(dir)?;
    let logs = d.logs();
    let (positions, cap) = match to {
        ResetTo::Start | ResetTo::Regenerate => (
            vec![Positions::START; d.partitions() as usize],
            d.inbox_cap().unwrap_or(DEFAULT_INBOX_CAP),
        ),
        ResetTo::Checkpoint(c) => {
            let info = DirCheckpoint::open(c)?;
            info.check_usable(&canonical(dir), d.partitions(), info.inbox_cap, &logs)?;
            (info.positions, info.inbox_cap)
        }
    };
    if matches!(to, ResetTo::Regenerate) {
        // Only `events` must be held from the start: effects are made anew.
        for p in Partition::all(d.partitions()) {
            if let Err(err) = logs.reader(Topic::Events, p, 0) {
                return Err(refused(format!(
                    "the log no longer holds events[{p}] from offset 0, so nothing can be regenerated: {err}"
                )));
            }
        }
    } else {
        check_held(&logs, &positions)?;
    }
    let mut to_process = 0;
    for (p, at) in positions.iter().enumerate() {
        let end = Positions::new(
            logs.end_offset(Topic::Events, Partition(p as u32))?,
            match to {
                ResetTo::Regenerate => 0,
                _ => logs.end_offset(Topic::Effects, Partition(p as u32))?,
            },
        );
        to_process += at.records_to(end);
    }
    let generation = d.next_state_name()?;
    let previous = d.state_name().to_string();
    if !execute {
        return Ok(ResetReport {
            executed: false,
            generation,
            previous,
            positions,
            to_process,
        });
    }
    let root = d.root().join(&generation);
    let made = match to {
        ResetTo::Start | ResetTo::Regenerate => std::fs::create_dir(&root),
        ResetTo::Checkpoint(c) => {
            let from = DataDir::open(c)?.state_root();
            crate::state::fsutil::copy_tree_linking_tables(&from, &root).map(|_| ())
        }
    };
    made.map_err(ReplayError::io("creating", &root))?;
    if matches!(to, ResetTo::Regenerate) {
        // Before the switch: a crash in between leaves the old state over
        // an empty effects log, which `run` refuses, never old effects
        // under an empty state.
        let effects = logs.dir(Topic::Effects, Partition(0));
        let effects = effects.parent().unwrap_or(&effects).to_path_buf();
        if effects.exists() {
            let kept = effects.with_file_name(format!("effects.before-{generation}"));
            std::fs::rename(&effects, &kept).map_err(ReplayError::io("moving aside", &effects))?;
        }
    }
    d.set_state(&generation, cap)?;
    Ok(ResetReport {
        executed: true,
        generation,
        previous,
        positions,
        to_process,
    })
}

/// One state generation of a data directory.
#[derive(Debug, Clone, Serialize)]
pub struct Generation {
    /// Its directory name.
    pub name: String,
    /// Whether it is the active one.
    pub active: bool,
    /// Bytes on disk.
    pub bytes: u64,
}

/// Every state generation of `d`.
pub fn generations(d: &DataDir) -> Result<Vec<Generation>, ReplayError> {
    Ok(d.state_generations()?
        .into_iter()
        .map(|name| Generation {
            active: name == d.state_name(),
            bytes: crate::state::fsutil::tree_size(&d.root().join(&name)),
            name,
        })
        .collect())
}

/// Removes the inactive state generation `name` of `d`; the bytes freed.
pub fn drop_state(d: &DataDir, name: &str) -> Result<u64, ReplayError> {
    if !crate::state::datadir::is_state_name(name) {
        return Err(refused(format!(
            "{name:?} is not a state generation (`state` or `state.N`; see `feedlog states`)"
        )));
    }
    if name == d.state_name() {
        return Err(refused(format!(
            "{name} is the active state generation; only an inactive one can be dropped"
        )));
    }
    let path = d.root().join(name);
    if !path.is_dir() {
        return Err(refused(format!("there is no {}", path.display())));
    }
    let bytes = crate::state::fsutil::tree_size(&path);
    std::fs::remove_dir_all(&path).map_err(ReplayError::io("removing", &path))?;
    Ok(bytes)
}

/// Where `feedlog reset --kafka` moves a consumer group.
#[derive(Debug, Clone)]
pub enum GroupResetTo {
    /// The start of the log: every processor rebuilds what it takes from
    /// the log and emits every output again.
    Start,
    /// Each partition's newest checkpoint in this `--checkpoints` directory
    /// (of this topic and partition count) that the log still holds.
    Checkpoints(std::path::PathBuf),
}

/// What a group reset did, per partition, or would do ([`GroupReset::executed`]
/// false: a preview).
#[derive(Debug, Clone)]
pub struct GroupReset {
    /// Whether the positions were committed: false for a preview.
    pub executed: bool,
    /// Members the group has now. A reset refuses while there are any; a
    /// preview lists them instead.
    pub members: Vec<String>,
    /// The epoch the new positions were committed under (for a preview:
    /// the one it would take).
    pub epoch: Epoch,
    /// Per partition: the `events` and `effects` positions committed, and
    /// the checkpoint they came from.
    pub positions: Vec<(Positions, Option<PartitionCheckpoint>)>,
}

/// Moves the group's positions back, under a new epoch above every one
/// the group has committed (so above every store's, and every epoch stamped
/// on a record: the processors after the reset take higher ones still, and
/// receivers never fence them): every processor then treats each partition it takes as
/// owned by someone else since — a store ahead of the new positions is
/// dropped and rebuilt (from a checkpoint within them when it runs with
/// `--checkpoints`, else from the log), and outputs above the new
/// positions are emitted again (receivers skip them by version). Refuses,
/// changing nothing, while the group has members or when the log no longer
/// holds a position (retention). With `execute` false, makes every check
/// but the members one and commits nothing: a preview that lists the
/// members instead.
pub fn reset_group(
    cfg: &KafkaConfig,
    to: &GroupResetTo,
    execute: bool,
) -> Result<GroupReset, ClusterError> {
    let log = KafkaLog::connect(cfg.clone(), Arc::new(AtomicBool::new(false)))?;
    let client = GroupClient::new(cfg, "a reset client")?;
    let members: Vec<String> = match client.members()? {
        Some(members) => members,
        // A broker that cannot describe groups: the processors that have
        // announced themselves and not left (one that crashed stays listed
        // until it runs again and leaves).
        None => read_owners(cfg)?.members.into_keys().collect(),
    };
    if execute && !members.is_empty() {
        return Err(ClusterError::Refused(format!(
            "group {} has {} member(s) ({}): stop every processor of the group first; nothing was changed",
            cfg.group,
            members.len(),
            members.join(", ")
        )));
    }
    let events = log.name(Topic::Events).to_string();
    let effects = log.name(Topic::Effects).to_string();
    let n = log.partitions(Topic::Events);
    let mut positions = Vec::new();
    let mut seen = Vec::new();
    for p in Partition::all(n) {
        seen.extend(client.committed(p)?.1);
        let start = Positions::new(
            log.start_offset(Topic::Events, p)?,
            log.start_offset(Topic::Effects, p)?,
        );
        let end = Positions {
            events: log.end_offset(Topic::Events, p)?,
            effects: log.end_offset(Topic::Effects, p)?,
        };
        let (at, from) = match to {
            GroupResetTo::Start => (Positions::START, None),
            GroupResetTo::Checkpoints(dir) => {
                let c = list_in(dir, p)
                    .into_iter()
                    .map(|(_, c)| c)
                    .rfind(|c| {
                        c.identity.events_topic == events
                            // Checkpoints of earlier versions name no
                            // effects topic: they are generation 0's.
                            && c.identity.effects_topic.as_ref().is_none_or(|t| *t == effects)
                            && c.identity.partitions == n
                            && end.covers(c.positions)
                    })
                    .ok_or_else(|| {
                        ClusterError::Refused(format!(
                            "{} holds no checkpoint of {events}[{p}] ({n} partitions) within the log; nothing was changed",
                            dir.display()
                        ))
                    })?;
                (c.positions, Some(c))
            }
        };
        for (topic, at, start) in [
            (Topic::Events, at.events, start.events),
            (Topic::Effects, at.effects, start.effects),
        ] {
            if at < start {
                return Err(ClusterError::Refused(format!(
                    "{}[{p}] starts at offset {start} (retention), so nothing can be replayed from offset {at}; nothing was changed",
                    log.name(topic)
                )));
            }
        }
        positions.push((at, from));
    }
    let epoch = Epoch::succeeding(seen, crate::log::now_ms());
    if !execute {
        return Ok(GroupReset {
            executed: false,
            members,
            epoch,
            positions,
        });
    }
    let commit: Vec<(Partition, Positions, Epoch)> = positions
        .iter()
        .enumerate()
        .map(|(p, (at, _))| (Partition(p as u32), *at, epoch))
        .collect();
    commit_from_outside(&client, cfg, &commit)?;
    Ok(GroupReset {
        executed: true,
        members,
        epoch,
        positions,
    })
}

/// Commits `commit` from outside the group, as Kafka's own offset-reset
/// tools do: brokers accept it only while the group has no members, and
/// one that stopped a moment ago stays a member until its session times
/// out, so this waits up to 60 s for that.
pub(super) fn commit_from_outside(
    client: &GroupClient,
    cfg: &KafkaConfig,
    commit: &[(Partition, Positions, Epoch)],
) -> Result<(), ClusterError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match client.commit(commit) {
            Ok(()) => return Ok(()),
            Err(OutsideCommit::Busy(e)) if Instant::now() < deadline => {
                tracing::info!(error = %e, "the broker still lists members of the group: waiting for their sessions to end");
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => {
                return Err(ClusterError::Refused(format!(
                    "the broker refused the reset positions of group {}: {e} (it accepts them only while the group \
                     has no members: stop every processor of the group and retry); nothing was changed",
                    cfg.group
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{NewRecord, PartitionWriter};

    /// A data directory of one partition whose `events` log holds `n`
    /// records in segments of about 200 bytes; the segment base offsets.
    fn small_segments(root: &Path, n: u64) -> (DataDir, Vec<u64>) {
        let d = DataDir::create_or_open(root, Some(1)).unwrap();
        let dir = d.logs().dir(Topic::Events, Partition(0));
        let mut w = PartitionWriter::open(&dir, 200).unwrap();
        for i in 0..n {
            let v = format!("record {i}");
            w.append(&[NewRecord {
                timestamp_ms: i,
                format: crate::core::codec::Marker::Unknown(0),
                key: b"1",
                value: v.as_bytes(),
            }])
            .unwrap();
        }
        w.sync().unwrap();
        let mut bases: Vec<u64> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".log").and_then(|b| b.parse().ok()))
            .collect();
        bases.sort();
        (d, bases)
    }

    // Proves reset refuses, changing nothing, once retention removed the start of the log, and moves to a new generation (keeping the old) while it is held.
    #[test]
    fn reset_refuses_positions_the_log_no_longer_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, bases) = small_segments(tmp.path(), 40);
        assert!(bases.len() >= 3, "several segments: {bases:?}");
        let r = reset(d.root(), &ResetTo::Start).unwrap();
        assert_eq!(
            (r.previous.as_str(), r.generation.as_str()),
            ("state", "state.1")
        );
        assert_eq!(r.to_process, 40);
        let d = DataDir::open(tmp.path()).unwrap();
        assert_eq!(d.state_name(), "state.1");

        // Retention removes the first segment: the start is gone.
        let seg0 = d
            .logs()
            .dir(Topic::Events, Partition(0))
            .join(format!("{:020}.log", bases[0]));
        std::fs::remove_file(seg0).unwrap();
        let err = reset(d.root(), &ResetTo::Start).unwrap_err().to_string();
        assert!(
            err.contains("no longer holds Events[0] from offset 0"),
            "{err}"
        );
        let d = DataDir::open(tmp.path()).unwrap();
        assert_eq!(d.state_name(), "state.1", "unchanged");
        assert_eq!(
            d.state_generations().unwrap(),
            ["state.1"],
            "no new generation"
        );
    }

    // Proves drop-state removes an inactive generation and refuses the active one or a name that is not a generation.
    #[test]
    fn drop_state_only_removes_inactive_generations() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, _) = small_segments(tmp.path(), 5);
        std::fs::create_dir_all(d.root().join("state/00000")).unwrap();
        std::fs::write(d.root().join("state/00000/x"), b"12345").unwrap();
        reset(d.root(), &ResetTo::Start).unwrap();
        let d = DataDir::open(tmp.path()).unwrap();
        let gens = generations(&d).unwrap();
        assert_eq!(gens.len(), 2);
        assert!(gens[1].active && !gens[0].active && gens[0].bytes == 5);
        let err = drop_state(&d, "state.1").unwrap_err().to_string();
        assert!(err.contains("is the active state generation"), "{err}");
        let err = drop_state(&d, "log").unwrap_err().to_string();
        assert!(err.contains("is not a state generation"), "{err}");
        assert_eq!(drop_state(&d, "state").unwrap(), 5);
        assert_eq!(d.state_generations().unwrap(), ["state.1"]);
    }
}
