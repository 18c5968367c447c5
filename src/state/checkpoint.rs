//! Checkpoints: a consistent copy of partition stores (RocksDB checkpoints,
//! table files hard-linked where the file system allows) with the
//! positions read back from the copies themselves, so they match the state
//! exactly even while a processor keeps writing.
//!
//! Two places keep them, one model:
//! - a **data-directory checkpoint** (`feedlog checkpoint --into C`): a data
//!   directory of its own holding every partition's store, with
//!   `checkpoint.json` ([`DirCheckpoint`]: source, positions per partition,
//!   inbox cap);
//! - a **group checkpoint directory** (`run --kafka --checkpoints DIR`):
//!   `DIR/p00003/<created_ms>-<events>-<effects>/` holds `state/` and
//!   `checkpoint.json` ([`PartitionCheckpoint`]: identity, positions, owner
//!   epoch, whether written at handover). Written under a `.tmp-` name and
//!   renamed into place, so a reader never sees half of one; the newest
//!   [`KEEP`] per partition are kept. Which one a new owner seeds from is
//!   decided in `crate::task::handover`.

use super::datadir::DataDir;
use super::store::{Store, StoreError};
use crate::core::fence::Epoch;
use crate::core::position::Positions;
use crate::core::Partition;
use crate::log::now_ms;
use crate::log::{Log, Topic};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Checkpoints kept per partition (the newest).
pub const KEEP: usize = 2;

/// What a checkpoint must match to seed a store: the same log, partitioning
/// and view settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The `events` topic's name.
    pub events_topic: String,
    /// Kafka mode: the `effects` topic's name, which tells the generations
    /// of a deployment apart (they share `events`; docs/kafka.md,
    /// "Generations"). `None` in checkpoints of earlier versions.
    #[serde(default)]
    pub effects_topic: Option<String>,
    /// Partition count.
    pub partitions: u32,
    /// The inbox cap the state was built with.
    pub inbox_cap: u64,
}

/// `checkpoint.json` of one partition checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionCheckpoint {
    /// What it was built from.
    pub identity: Identity,
    /// The partition.
    pub partition: Partition,
    /// Next `events` and `effects` offsets of the checkpointed state (read
    /// back from the checkpoint itself).
    pub positions: Positions,
    /// The ownership epoch of the processor that wrote it (`None`: written
    /// by an earlier version, whose epochs were not numbers).
    #[serde(default, deserialize_with = "epoch_or_earlier")]
    pub epoch: Option<Epoch>,
    /// Written as the owner gave the partition up: its task had stopped at
    /// `positions`, and it applied nothing after them.
    pub handed_over: bool,
    /// When it was written, ms since the epoch.
    pub created_ms: u64,
    /// Written at a consistent cut of the group (`checkpoint` in Kafka
    /// mode): the cut's id, the same in every partition's checkpoint of it.
    /// Such a set can seed a new generation (docs/kafka.md, "Generations").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<u64>,
}

/// Reads `epoch` of a `checkpoint.json`: a number, or the text an earlier
/// version wrote (`member/ms/n`), which names no epoch of this version.
fn epoch_or_earlier<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Epoch>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Number(u64),
        Text(String),
    }
    Ok(match Option::<Written>::deserialize(d)? {
        Some(Written::Number(n)) => Some(Epoch(n)),
        Some(Written::Text(s)) => Epoch::parse(&s),
        None => None,
    })
}

impl PartitionCheckpoint {
    /// Whether the group has committed this checkpoint's positions (so its
    /// outputs are acknowledged); otherwise it can only be the handed-over
    /// store of the group's last owner.
    pub fn within(&self, committed: Positions) -> bool {
        committed.covers(self.positions)
    }
}

fn partition_dir(root: &Path, p: Partition) -> PathBuf {
    root.join(format!("p{p:05}"))
}

/// Every readable checkpoint of partition `p` under the checkpoint
/// directory `root`, oldest first, with its directory. Unreadable ones are
/// skipped with a warning.
pub fn list_in(root: &Path, p: Partition) -> Vec<(PathBuf, PartitionCheckpoint)> {
    let Ok(entries) = std::fs::read_dir(partition_dir(root, p)) else {
        return Vec::new();
    };
    let mut found: Vec<(PathBuf, PartitionCheckpoint)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.'))
        })
        .filter_map(|path| {
            let file = path.join("checkpoint.json");
            match std::fs::read(&file)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            {
                Ok(info) => Some((path, info)),
                Err(e) => {
                    tracing::warn!(file = %file.display(), error = %e, "skipping an unreadable checkpoint");
                    None
                }
            }
        })
        .collect();
    found.sort_by_key(|(_, c)| c.created_ms);
    found
}

/// A checkpoint directory shared by the processors of a group.
#[derive(Debug)]
pub struct CheckpointDir {
    root: PathBuf,
    identity: Identity,
    /// Distinguishes this process's temporary directories.
    written: AtomicU64,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> StoreError {
    move |e| StoreError::Refused {
        path: PathBuf::new(),
        reason: format!("{what}: {e}"),
    }
}

impl CheckpointDir {
    /// Checkpoints of `identity`'s partitions under `root` (created when
    /// missing).
    pub fn new(root: &Path, identity: Identity) -> CheckpointDir {
        CheckpointDir {
            root: root.to_path_buf(),
            identity,
            written: AtomicU64::new(0),
        }
    }

    fn partition_dir(&self, p: Partition) -> PathBuf {
        partition_dir(&self.root, p)
    }

    /// Where the checkpoint `c` of this directory is.
    pub fn path_of(&self, c: &PartitionCheckpoint) -> PathBuf {
        self.partition_dir(c.partition).join(format!(
            "{:015}-{}-{}",
            c.created_ms, c.positions.events, c.positions.effects
        ))
    }

    /// Writes a checkpoint of `store` (partition `p`, owned under `epoch`;
    /// `handed_over` when its task has stopped for good), publishes it with
    /// one rename, and prunes all but the newest [`KEEP`].
    pub fn write(
        &self,
        p: Partition,
        store: &Store,
        epoch: Epoch,
        handed_over: bool,
    ) -> Result<PartitionCheckpoint, StoreError> {
        self.write_at(p, store, epoch, handed_over, None)
    }

    /// [`CheckpointDir::write`], naming the consistent cut it is part of.
    pub fn write_at(
        &self,
        p: Partition,
        store: &Store,
        epoch: Epoch,
        handed_over: bool,
        cut: Option<u64>,
    ) -> Result<PartitionCheckpoint, StoreError> {
        let dir = self.partition_dir(p);
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let created_ms = now_ms();
        let tmp = dir.join(format!(
            ".tmp-{created_ms}-{}-{}",
            std::process::id(),
            self.written.fetch_add(1, Ordering::SeqCst)
        ));
        let result = self.write_into(&tmp, p, store, (epoch, handed_over, cut), created_ms);
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        let info = result?;
        let to = self.path_of(&info);
        std::fs::rename(&tmp, &to).map_err(io(format!("publishing {}", to.display())))?;
        crate::state::fsutil::sync_dir(&dir).map_err(io(format!("syncing {}", dir.display())))?;
        self.prune(p);
        Ok(info)
    }

    fn write_into(
        &self,
        tmp: &Path,
        p: Partition,
        store: &Store,
        (epoch, handed_over, cut): (Epoch, bool, Option<u64>),
        created_ms: u64,
    ) -> Result<PartitionCheckpoint, StoreError> {
        std::fs::create_dir(tmp).map_err(io(format!("creating {}", tmp.display())))?;
        let state = tmp.join("state");
        store.checkpoint(&state)?;
        let positions =
            Store::stored_positions(&state, p, self.identity.partitions)?.unwrap_or_default();
        let info = PartitionCheckpoint {
            identity: self.identity.clone(),
            partition: p,
            positions,
            epoch: Some(epoch),
            handed_over,
            created_ms,
            cut,
        };
        let file = tmp.join("checkpoint.json");
        let bytes = serde_json::to_vec_pretty(&info).map_err(|e| StoreError::Refused {
            path: file.clone(),
            reason: format!("encoding the checkpoint: {e}"),
        })?;
        crate::state::fsutil::write_atomically(&file, &bytes).map_err(|(path, e)| {
            StoreError::Refused {
                path,
                reason: format!("writing: {e}"),
            }
        })?;
        Ok(info)
    }

    /// Every readable checkpoint of partition `p`, oldest first, with its
    /// directory.
    pub fn list(&self, p: Partition) -> Vec<(PathBuf, PartitionCheckpoint)> {
        list_in(&self.root, p)
    }

    /// Removes all but the newest [`KEEP`] checkpoints of `p` of this
    /// directory's log (another generation's, in a directory they share,
    /// are its own to prune), and temporary directories of writers that
    /// died over an hour ago.
    fn prune(&self, p: Partition) {
        let mine = |c: &PartitionCheckpoint| {
            c.identity.events_topic == self.identity.events_topic
                && c.identity.effects_topic == self.identity.effects_topic
        };
        let all: Vec<_> = self.list(p).into_iter().filter(|(_, c)| mine(c)).collect();
        for (path, _) in &all[..all.len().saturating_sub(KEEP)] {
            if let Err(e) = std::fs::remove_dir_all(path) {
                tracing::warn!(path = %path.display(), error = %e, "removing an old checkpoint");
            }
        }
        let cutoff = now_ms().saturating_sub(3_600_000);
        let Ok(entries) = std::fs::read_dir(self.partition_dir(p)) else {
            return;
        };
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            let stale = name
                .strip_prefix(".tmp-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|ms| ms.parse::<u64>().ok())
                .is_some_and(|ms| ms < cutoff);
            if stale {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }

    /// The identity its checkpoints have.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Replaces the store at `state_dir` (closed) with a copy of the
    /// checkpoint in `from`. The copy is made beside `state_dir` and renamed
    /// into place, so a crash leaves the old store or the new one.
    pub fn seed(from: &Path, state_dir: &Path) -> Result<(), StoreError> {
        let seeding = state_dir.with_extension("seeding");
        if seeding.exists() {
            std::fs::remove_dir_all(&seeding)
                .map_err(io(format!("removing {}", seeding.display())))?;
        }
        crate::state::fsutil::copy_tree_linking_tables(&from.join("state"), &seeding).map_err(
            io(format!(
                "copying checkpoint {} into {}",
                from.display(),
                seeding.display()
            )),
        )?;
        if state_dir.exists() {
            std::fs::remove_dir_all(state_dir)
                .map_err(io(format!("removing {}", state_dir.display())))?;
        }
        std::fs::rename(&seeding, state_dir).map_err(io(format!(
            "moving the seeded store to {}",
            state_dir.display()
        )))?;
        if let Some(parent) = state_dir.parent() {
            crate::state::fsutil::sync_dir(parent)
                .map_err(io(format!("syncing {}", parent.display())))?;
        }
        Ok(())
    }
}

/// `C/checkpoint.json`: what a data-directory checkpoint holds. Written
/// last, so a directory without it is not a (finished) checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirCheckpoint {
    /// The data directory it was taken of.
    pub source: PathBuf,
    /// Per partition, the next `events` and `effects` offsets of its state.
    pub positions: Vec<Positions>,
    /// The inbox cap the state was built with.
    pub inbox_cap: u64,
    /// When it was taken, ms since the epoch.
    pub created_ms: u64,
}

fn refused(path: &Path, reason: String) -> StoreError {
    StoreError::Refused {
        path: path.to_path_buf(),
        reason,
    }
}

impl DirCheckpoint {
    /// Reads the checkpoint in `dir`.
    pub fn open(dir: &Path) -> Result<DirCheckpoint, StoreError> {
        let file = dir.join("checkpoint.json");
        let bytes = std::fs::read(&file).map_err(|e| {
            refused(
                dir,
                format!(
                    "not a checkpoint ({}: {e}); take one with `feedlog checkpoint --into DIR`",
                    file.display()
                ),
            )
        })?;
        serde_json::from_slice(&bytes)
            .map_err(|e| refused(&file, format!("not a checkpoint file: {e}")))
    }

    /// Refuses a checkpoint of another data directory, partition count or
    /// inbox cap, or one whose positions the log no longer holds.
    pub fn check_usable(
        &self,
        source: &Path,
        partitions: u32,
        inbox_cap: u64,
        log: &dyn Log,
    ) -> Result<(), StoreError> {
        let no = |reason: String| Err(refused(source, reason));
        if self.source != source {
            return no(format!(
                "the checkpoint is of {}, not of {}",
                self.source.display(),
                source.display()
            ));
        }
        if self.positions.len() != partitions as usize {
            return no(format!(
                "the checkpoint has {} partitions, the data directory {partitions}",
                self.positions.len()
            ));
        }
        if self.inbox_cap != inbox_cap {
            return no(format!(
                "the checkpoint was built with inbox cap {}, not {inbox_cap}: use --inbox-cap {} (or rebuild from the start)",
                self.inbox_cap, self.inbox_cap
            ));
        }
        check_held(log, &self.positions)
    }
}

/// Refuses when `log` no longer holds every partition's `positions`
/// (retention removed them): replaying from there would skip records.
pub fn check_held(log: &dyn Log, positions: &[Positions]) -> Result<(), StoreError> {
    for (p, at) in positions.iter().enumerate() {
        for (topic, from) in [(Topic::Events, at.events), (Topic::Effects, at.effects)] {
            if let Err(err) = log.source(topic, Partition(p as u32), from) {
                return Err(refused(
                    Path::new(""),
                    format!(
                        "the log no longer holds {topic:?}[{p}] from offset {from}, so nothing can be replayed from there: {err}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Writes a checkpoint of `stores` (every partition of `dir`, built with
/// `inbox_cap`) into `into`, a new directory: a RocksDB checkpoint per
/// partition, then `checkpoint.json` with the positions read back from the
/// checkpoints themselves.
pub fn write_dir_checkpoint(
    stores: &[Arc<Store>],
    dir: &DataDir,
    inbox_cap: u64,
    into: &Path,
) -> Result<DirCheckpoint, StoreError> {
    if into.exists() {
        return Err(refused(
            into,
            "it exists: a checkpoint goes into a new directory".into(),
        ));
    }
    let data_dir = |e: super::datadir::DataDirError| refused(into, e.to_string());
    let mut c = DataDir::create_or_open(into, Some(dir.partitions())).map_err(data_dir)?;
    c.set_inbox_cap(inbox_cap).map_err(data_dir)?;
    let root = c.state_root();
    std::fs::create_dir_all(&root).map_err(|e| refused(&root, format!("creating it: {e}")))?;
    let mut positions = Vec::with_capacity(stores.len());
    for (p, store) in stores.iter().enumerate() {
        let to = c.state_dir(Partition(p as u32));
        store.checkpoint(&to)?;
        positions.push(
            Store::stored_positions(&to, Partition(p as u32), dir.partitions())?
                .unwrap_or_default(),
        );
    }
    let info = DirCheckpoint {
        source: canonical(dir.root()),
        positions,
        inbox_cap,
        created_ms: now_ms(),
    };
    let file = into.join("checkpoint.json");
    let bytes = serde_json::to_vec_pretty(&info)
        .map_err(|e| refused(&file, format!("encoding it: {e}")))?;
    super::fsutil::write_atomically(&file, &bytes)
        .map_err(|(p, e)| refused(&p, format!("writing it: {e}")))?;
    Ok(info)
}

/// `p` made absolute, when it exists.
pub fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a checkpoint.json reads its epoch as a number, and an earlier version's text epoch (member/ms/n) as none rather than as an error or a number.
    #[test]
    fn checkpoint_epochs_read_as_numbers_and_earlier_text_as_none() {
        let json = |epoch: &str| {
            format!(
                r#"{{"identity":{{"events_topic":"events","partitions":4,"inbox_cap":800}},"partition":1,
                "positions":[3,4],"epoch":{epoch},"handed_over":true,"created_ms":5}}"#
            )
        };
        let read = |epoch: &str| {
            serde_json::from_str::<PartitionCheckpoint>(&json(epoch))
                .expect("reads")
                .epoch
        };
        assert_eq!(read("1795625919698"), Some(Epoch(1795625919698)));
        assert_eq!(read(r#""42""#), Some(Epoch(42)));
        assert_eq!(read(r#""feedlog-1/1700000000000/3""#), None);
        let written = PartitionCheckpoint {
            epoch: Some(Epoch(7)),
            ..serde_json::from_str(&json("7")).expect("reads")
        };
        let again: PartitionCheckpoint =
            serde_json::from_slice(&serde_json::to_vec(&written).expect("writes")).expect("reads");
        assert_eq!(again, written);
    }
}
