//! Partition checkpoints for Kafka-mode handover.
//!
//! Processors of one group that share a checkpoint directory
//! (`run --kafka --checkpoints DIR`) write a RocksDB checkpoint of a
//! partition's store when they give the partition up (revoke, shutdown) and,
//! with `--checkpoint-every`, while they own it. A processor that is given a
//! partition whose local store is missing or behind seeds the store from the
//! newest usable checkpoint and replays only the tail of the log after it.
//!
//! Layout: `DIR/p00003/<created_ms>-<events>-<effects>/` holds `state/` (the
//! RocksDB checkpoint) and `checkpoint.json` ([`PartitionCheckpoint`]). A
//! checkpoint is written under a `.tmp-` name and renamed into place, so a
//! reader never sees half of one. The newest [`KEEP`] per partition are kept.
//!
//! Which checkpoint is usable is decided by [`choose`], which has no I/O:
//! one of the same topic, partition count and inbox cap, which the log
//! still holds (retention) and which is ahead of the local store; and
//! either
//! - at or below the positions the group has committed: every output below
//!   them is acknowledged, so the new owner replays from the checkpoint
//!   quietly up to the group's positions and emits only above them, exactly
//!   as with a local store that is behind; or
//! - the one its owner wrote as it gave the partition up (its task stopped
//!   at those positions), when nobody has owned the partition since (the
//!   group's positions carry that owner's epoch). That is the owner's own
//!   store at its last positions, moved: the new owner carries on from it as
//!   the old one would have on a restart. This covers a handover commit the
//!   broker refused (a rebalance in progress), which leaves the group's
//!   positions behind the owner's.

use crate::cluster::ClusterError;
use crate::state::{meta, Store};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Checkpoints kept per partition (the newest).
pub const KEEP: usize = 2;

/// What a checkpoint must match to seed a store: the same log, partitioning
/// and view settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The `events` topic's name.
    pub events_topic: String,
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
    pub partition: u32,
    /// Next `events` and `effects` offsets of the checkpointed state (read
    /// back from the checkpoint itself).
    pub positions: (u64, u64),
    /// The ownership epoch of the processor that wrote it.
    pub epoch: String,
    /// Written as the owner gave the partition up: its task had stopped at
    /// `positions`, and it applied nothing after them.
    pub handed_over: bool,
    /// When it was written, ms since the epoch.
    pub created_ms: u64,
}

/// Where the group is for one partition, as a new owner finds it.
#[derive(Debug, Clone, Copy)]
pub struct GroupPosition<'a> {
    /// The group's committed `events` and `effects` positions.
    pub committed: (u64, u64),
    /// The epoch those positions were committed under.
    pub epoch: &'a str,
}

impl PartitionCheckpoint {
    /// Whether the group has committed this checkpoint's positions (so its
    /// outputs are acknowledged); otherwise it can only be the handed-over
    /// store of the group's last owner.
    pub fn within(&self, committed: (u64, u64)) -> bool {
        self.positions.0 <= committed.0 && self.positions.1 <= committed.1
    }
}

/// Picks the checkpoint to seed partition `partition`'s store from, if any
/// (index into `candidates`): one of `identity` and `partition`, at or above
/// the log's first offsets `log_start`, ahead of the `local` store (more
/// records applied), and either within the group's committed positions or
/// handed over by the owner whose epoch the group's positions carry (see the
/// module docs). Of those, the one furthest along (then the newest).
pub fn choose(
    candidates: &[PartitionCheckpoint],
    identity: &Identity,
    partition: u32,
    local: (u64, u64),
    group: GroupPosition<'_>,
    log_start: (u64, u64),
) -> Option<usize> {
    candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            let (e, f) = c.positions;
            c.identity == *identity
                && c.partition == partition
                && (c.within(group.committed) || (c.handed_over && c.epoch == group.epoch))
                && e >= log_start.0
                && f >= log_start.1
                && e + f > local.0 + local.1
        })
        .max_by_key(|(_, c)| (c.positions.0 + c.positions.1, c.created_ms))
        .map(|(i, _)| i)
}

fn partition_dir(root: &Path, p: u32) -> PathBuf {
    root.join(format!("p{p:05}"))
}

/// Every readable checkpoint of partition `p` under the checkpoint
/// directory `root`, oldest first, with its directory. Unreadable ones are
/// skipped with a warning.
pub fn list_in(root: &Path, p: u32) -> Vec<(PathBuf, PartitionCheckpoint)> {
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

fn io(what: String) -> impl FnOnce(std::io::Error) -> ClusterError {
    move |e| ClusterError::Refused(format!("{what}: {e}"))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
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

    fn partition_dir(&self, p: u32) -> PathBuf {
        partition_dir(&self.root, p)
    }

    /// Writes a checkpoint of `store` (partition `p`, owned under `epoch`;
    /// `handed_over` when its task has stopped for good), publishes it with
    /// one rename, and prunes all but the newest [`KEEP`].
    pub fn write(
        &self,
        p: u32,
        store: &Store,
        epoch: &str,
        handed_over: bool,
    ) -> Result<PartitionCheckpoint, ClusterError> {
        let dir = self.partition_dir(p);
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let created_ms = now_ms();
        let tmp = dir.join(format!(
            ".tmp-{created_ms}-{}-{}",
            std::process::id(),
            self.written.fetch_add(1, Ordering::SeqCst)
        ));
        let result = self.write_into(&tmp, p, store, epoch, handed_over, created_ms);
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        let info = result?;
        let name = format!("{created_ms:015}-{}-{}", info.positions.0, info.positions.1);
        let to = dir.join(&name);
        std::fs::rename(&tmp, &to).map_err(io(format!("publishing {}", to.display())))?;
        crate::fsutil::sync_dir(&dir).map_err(io(format!("syncing {}", dir.display())))?;
        self.prune(p);
        Ok(info)
    }

    fn write_into(
        &self,
        tmp: &Path,
        p: u32,
        store: &Store,
        epoch: &str,
        handed_over: bool,
        created_ms: u64,
    ) -> Result<PartitionCheckpoint, ClusterError> {
        std::fs::create_dir(tmp).map_err(io(format!("creating {}", tmp.display())))?;
        let state = tmp.join("state");
        store.checkpoint(&state)?;
        let positions = {
            let cache = rocksdb::Cache::new_lru_cache(1 << 20);
            let c = Store::open_read_only(&state, p, self.identity.partitions, &cache)?;
            (
                c.meta_u64(meta::POS_EVENTS)?,
                c.meta_u64(meta::POS_EFFECTS)?,
            )
        };
        let info = PartitionCheckpoint {
            identity: self.identity.clone(),
            partition: p,
            positions,
            epoch: epoch.to_string(),
            handed_over,
            created_ms,
        };
        let file = tmp.join("checkpoint.json");
        let bytes = serde_json::to_vec_pretty(&info).expect("a checkpoint serializes");
        crate::fsutil::write_atomically(&file, &bytes).map_err(|(path, e)| {
            ClusterError::Refused(format!("writing {}: {e}", path.display()))
        })?;
        Ok(info)
    }

    /// Every readable checkpoint of partition `p`, oldest first, with its
    /// directory.
    pub fn list(&self, p: u32) -> Vec<(PathBuf, PartitionCheckpoint)> {
        list_in(&self.root, p)
    }

    /// Removes all but the newest [`KEEP`] checkpoints of `p`, and temporary
    /// directories of writers that died over an hour ago.
    fn prune(&self, p: u32) {
        let all = self.list(p);
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

    /// The best checkpoint to seed partition `p`'s store from (see
    /// [`choose`]) and its directory, if any.
    pub fn best(
        &self,
        p: u32,
        local: (u64, u64),
        group: GroupPosition<'_>,
        log_start: (u64, u64),
    ) -> Option<(PathBuf, PartitionCheckpoint)> {
        let mut found = self.list(p);
        let infos: Vec<PartitionCheckpoint> = found.iter().map(|(_, c)| c.clone()).collect();
        choose(&infos, &self.identity, p, local, group, log_start).map(|i| found.swap_remove(i))
    }

    /// Replaces the store at `state_dir` (closed) with a copy of the
    /// checkpoint in `from`. The copy is made beside `state_dir` and renamed
    /// into place, so a crash leaves the old store or the new one.
    pub fn seed(from: &Path, state_dir: &Path) -> Result<(), ClusterError> {
        let seeding = state_dir.with_extension("seeding");
        if seeding.exists() {
            std::fs::remove_dir_all(&seeding)
                .map_err(io(format!("removing {}", seeding.display())))?;
        }
        crate::fsutil::copy_tree_linking_tables(&from.join("state"), &seeding).map_err(io(
            format!(
                "copying checkpoint {} into {}",
                from.display(),
                seeding.display()
            ),
        ))?;
        if state_dir.exists() {
            std::fs::remove_dir_all(state_dir)
                .map_err(io(format!("removing {}", state_dir.display())))?;
        }
        std::fs::rename(&seeding, state_dir).map_err(io(format!(
            "moving the seeded store to {}",
            state_dir.display()
        )))?;
        if let Some(parent) = state_dir.parent() {
            crate::fsutil::sync_dir(parent).map_err(io(format!("syncing {}", parent.display())))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> Identity {
        Identity {
            events_topic: "events".into(),
            partitions: 4,
            inbox_cap: 800,
        }
    }

    fn cp(positions: (u64, u64), created_ms: u64) -> PartitionCheckpoint {
        PartitionCheckpoint {
            identity: id(),
            partition: 1,
            positions,
            epoch: "m/1/0".into(),
            handed_over: false,
            created_ms,
        }
    }

    fn at(committed: (u64, u64)) -> GroupPosition<'static> {
        GroupPosition {
            committed,
            epoch: "other/2/0",
        }
    }

    // Proves the choice: the furthest checkpoint within the group's committed positions, held by the log, ahead of the local store, of the same identity and partition.
    #[test]
    fn choose_takes_the_furthest_committed_held_checkpoint_ahead_of_local() {
        let all = vec![cp((10, 5), 1), cp((40, 20), 2), cp((90, 50), 3)];
        // (90, 50) is past what the group committed: its outputs may not be acknowledged.
        assert_eq!(
            choose(&all, &id(), 1, (0, 0), at((60, 30)), (0, 0)),
            Some(1)
        );
        // Everything committed: the furthest.
        assert_eq!(
            choose(&all, &id(), 1, (0, 0), at((90, 50)), (0, 0)),
            Some(2)
        );
        // The local store is further along than any usable checkpoint.
        assert_eq!(choose(&all, &id(), 1, (45, 20), at((60, 30)), (0, 0)), None);
        // Retention took offsets 0..15 of events: (10, 5) is not held, (40, 20) is.
        assert_eq!(
            choose(&all, &id(), 1, (0, 0), at((60, 30)), (15, 0)),
            Some(1)
        );
        assert_eq!(
            choose(&all[..1], &id(), 1, (0, 0), at((60, 30)), (15, 0)),
            None
        );
        // Another partition, topic, partition count or inbox cap: never.
        assert_eq!(choose(&all, &id(), 2, (0, 0), at((90, 50)), (0, 0)), None);
        for other in [
            Identity {
                events_topic: "other".into(),
                ..id()
            },
            Identity {
                partitions: 8,
                ..id()
            },
            Identity {
                inbox_cap: 50,
                ..id()
            },
        ] {
            assert_eq!(choose(&all, &other, 1, (0, 0), at((90, 50)), (0, 0)), None);
        }
        // Past the committed positions, a checkpoint is usable only if its
        // owner wrote it handing the partition over and nobody owned the
        // partition since (the group's epoch is still the owner's).
        let mut handed = cp((90, 50), 4);
        let mine = GroupPosition {
            committed: (60, 30),
            epoch: "m/1/0",
        };
        assert_eq!(
            choose(&[handed.clone()], &id(), 1, (0, 0), mine, (0, 0)),
            None
        );
        handed.handed_over = true;
        assert_eq!(
            choose(&[handed.clone()], &id(), 1, (0, 0), mine, (0, 0)),
            Some(0)
        );
        assert_eq!(
            choose(&[handed], &id(), 1, (0, 0), at((60, 30)), (0, 0)),
            None
        );
        // Equal positions: the newest.
        let twins = vec![cp((40, 20), 7), cp((40, 20), 9), cp((40, 20), 8)];
        assert_eq!(
            choose(&twins, &id(), 1, (0, 0), at((60, 30)), (0, 0)),
            Some(1)
        );
    }

    // Proves a written checkpoint is listed with the store's positions, only the newest KEEP survive, and seeding replaces the store with a copy that has the checkpointed state.
    #[test]
    fn write_list_prune_and_seed() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = rocksdb::Cache::new_lru_cache(1 << 20);
        let opts = crate::state::StoreOptions::default();
        let store = Store::open(&tmp.path().join("live"), 1, 4, &cache, &opts).unwrap();
        let dir = CheckpointDir::new(&tmp.path().join("cps"), id());
        for n in 1..=3u64 {
            store
                .commit(&Default::default(), |b| {
                    b.put(crate::state::Cf::Meta, meta::POS_EVENTS, &n.to_be_bytes());
                    b.put(
                        crate::state::Cf::Meta,
                        meta::POS_EFFECTS,
                        &(n * 2).to_be_bytes(),
                    );
                })
                .unwrap();
            let info = dir.write(1, &store, "m/1/0", n == 3).unwrap();
            assert_eq!(info.positions, (n, n * 2));
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let listed: Vec<((u64, u64), bool)> = dir
            .list(1)
            .iter()
            .map(|(_, c)| (c.positions, c.handed_over))
            .collect();
        assert_eq!(
            listed,
            vec![((2, 4), false), ((3, 6), true)],
            "the newest {KEEP} are kept"
        );
        assert!(dir.list(0).is_empty());

        let target = tmp.path().join("state").join("00001");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("old"), b"x").unwrap();
        let (from, best) = dir.best(1, (0, 0), at((2, 5)), (0, 0)).unwrap();
        assert_eq!(best.positions, (2, 4));
        CheckpointDir::seed(&from, &target).unwrap();
        assert!(!target.join("old").exists(), "the old store is gone");
        let s = Store::open(&target, 1, 4, &cache, &opts).unwrap();
        assert_eq!(s.meta_u64(meta::POS_EVENTS).unwrap(), 2);
        assert_eq!(s.meta_u64(meta::POS_EFFECTS).unwrap(), 4);
        drop(s);
        // Nothing within the committed positions: no candidate.
        assert!(dir.best(1, (0, 0), at((1, 1)), (0, 0)).is_none());
    }
}
