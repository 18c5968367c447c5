//! What a new owner of a partition starts from, in Kafka mode: the choice
//! among the group's checkpoints (see `crate::state::checkpoint`), with no
//! I/O.
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
//! reader never sees half of one. The newest [`crate::state::checkpoint::KEEP`] per partition are kept.
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

use crate::core::fence::Epoch;
use crate::core::position::Positions;
use crate::core::Partition;
use crate::state::checkpoint::{CheckpointDir, Identity, PartitionCheckpoint};
use std::path::PathBuf;

/// Where the group is for one partition, as a new owner finds it.
#[derive(Debug, Clone, Copy)]
pub struct GroupPosition {
    /// The group's committed `events` and `effects` positions.
    pub committed: Positions,
    /// The epoch those positions were committed under (`None`: none, or
    /// one of an earlier version).
    pub epoch: Option<Epoch>,
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
    partition: Partition,
    local: Positions,
    group: GroupPosition,
    log_start: Positions,
) -> Option<usize> {
    let records = |p: Positions| p.events.0 + p.effects.0;
    candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            c.identity == *identity
                && c.partition == partition
                && (c.within(group.committed)
                    || (c.handed_over && c.epoch.is_some() && c.epoch == group.epoch))
                && c.positions.covers(log_start)
                && records(c.positions) > records(local)
        })
        .max_by_key(|(_, c)| (records(c.positions), c.created_ms))
        .map(|(i, _)| i)
}

/// The best checkpoint in `dir` to seed partition `p`'s store from (see
/// [`choose`]) and its directory, if any.
pub fn best(
    dir: &CheckpointDir,
    p: Partition,
    local: Positions,
    group: GroupPosition,
    log_start: Positions,
) -> Option<(PathBuf, PartitionCheckpoint)> {
    let mut found = dir.list(p);
    let infos: Vec<PartitionCheckpoint> = found.iter().map(|(_, c)| c.clone()).collect();
    choose(&infos, dir.identity(), p, local, group, log_start).map(|i| found.swap_remove(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The partition the cases choose for.
    const P1: Partition = Partition(1);
    use crate::state::checkpoint::KEEP;
    use crate::state::{meta, BlockCache, Store, StoreOptions};

    #[allow(non_snake_case)]
    fn P(e: u64, f: u64) -> Positions {
        Positions::new(e, f)
    }

    fn id() -> Identity {
        Identity {
            events_topic: "events".into(),
            effects_topic: Some("effects".into()),
            partitions: 4,
            inbox_cap: crate::core::DEFAULT_INBOX_CAP,
        }
    }

    fn cp(positions: (u64, u64), created_ms: u64) -> PartitionCheckpoint {
        PartitionCheckpoint {
            identity: id(),
            partition: Partition(1),
            positions: positions.into(),
            epoch: Some(Epoch(1)),
            handed_over: false,
            created_ms,
            cut: None,
        }
    }

    fn at(committed: (u64, u64)) -> GroupPosition {
        GroupPosition {
            committed: committed.into(),
            epoch: Some(Epoch(2)),
        }
    }

    // Proves the choice: the furthest checkpoint within the group's committed positions, held by the log, ahead of the local store, of the same identity and partition.
    #[test]
    fn choose_takes_the_furthest_committed_held_checkpoint_ahead_of_local() {
        let all = vec![cp((10, 5), 1), cp((40, 20), 2), cp((90, 50), 3)];
        // (90, 50) is past what the group committed: its outputs may not be acknowledged.
        assert_eq!(
            choose(&all, &id(), P1, P(0, 0), at((60, 30)), P(0, 0)),
            Some(1)
        );
        // Everything committed: the furthest.
        assert_eq!(
            choose(&all, &id(), P1, P(0, 0), at((90, 50)), P(0, 0)),
            Some(2)
        );
        // The local store is further along than any usable checkpoint.
        assert_eq!(
            choose(&all, &id(), Partition(1), P(45, 20), at((60, 30)), P(0, 0)),
            None
        );
        // Retention took offsets 0..15 of events: (10, 5) is not held, (40, 20) is.
        assert_eq!(
            choose(&all, &id(), P1, P(0, 0), at((60, 30)), P(15, 0)),
            Some(1)
        );
        assert_eq!(
            choose(&all[..1], &id(), P1, P(0, 0), at((60, 30)), P(15, 0)),
            None
        );
        // Another partition, topic, partition count or inbox cap: never.
        assert_eq!(
            choose(&all, &id(), Partition(2), P(0, 0), at((90, 50)), P(0, 0)),
            None
        );
        for other in [
            Identity {
                events_topic: "other".into(),
                ..id()
            },
            Identity {
                partitions: 8,
                ..id()
            },
            // Another generation of the deployment: the same events.
            Identity {
                effects_topic: Some("g1.effects".into()),
                ..id()
            },
            Identity {
                inbox_cap: 50,
                ..id()
            },
        ] {
            assert_eq!(
                choose(&all, &other, P1, P(0, 0), at((90, 50)), P(0, 0)),
                None
            );
        }
        // Past the committed positions, a checkpoint is usable only if its
        // owner wrote it handing the partition over and nobody owned the
        // partition since (the group's epoch is still the owner's).
        let mut handed = cp((90, 50), 4);
        let mine = GroupPosition {
            committed: P(60, 30),
            epoch: Some(Epoch(1)),
        };
        assert_eq!(
            choose(&[handed.clone()], &id(), P1, P(0, 0), mine, P(0, 0)),
            None
        );
        handed.handed_over = true;
        assert_eq!(
            choose(&[handed.clone()], &id(), P1, P(0, 0), mine, P(0, 0)),
            Some(0)
        );
        assert_eq!(
            choose(&[handed.clone()], &id(), P1, P(0, 0), at((60, 30)), P(0, 0)),
            None
        );
        // An earlier version's checkpoint and group carry no epoch: unknown
        // owners are never taken for the same one.
        let unknown = GroupPosition {
            epoch: None,
            ..mine
        };
        handed.epoch = None;
        assert_eq!(
            choose(&[handed], &id(), P1, P(0, 0), unknown, P(0, 0)),
            None
        );
        // Equal positions: the newest.
        let twins = vec![cp((40, 20), 7), cp((40, 20), 9), cp((40, 20), 8)];
        assert_eq!(
            choose(&twins, &id(), P1, P(0, 0), at((60, 30)), P(0, 0)),
            Some(1)
        );
    }

    // Proves a written checkpoint is listed with the store's positions, only the newest KEEP survive, and seeding replaces the store with a copy that has the checkpointed state.
    #[test]
    fn write_list_prune_and_seed() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = BlockCache::new(1 << 20);
        let opts = StoreOptions::default();
        let store = Store::open(&tmp.path().join("live"), Partition(1), 4, &cache, &opts).unwrap();
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
            let info = dir.write(Partition(1), &store, Epoch(1), n == 3).unwrap();
            assert_eq!(info.positions, P(n, n * 2));
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let listed: Vec<(Positions, bool)> = dir
            .list(Partition(1))
            .iter()
            .map(|(_, c)| (c.positions, c.handed_over))
            .collect();
        assert_eq!(
            listed,
            vec![(P(2, 4), false), (P(3, 6), true)],
            "the newest {KEEP} are kept"
        );
        assert!(dir.list(Partition(0)).is_empty());

        let target = tmp.path().join("state").join("00001");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("old"), b"x").unwrap();
        let (from, found) = best(&dir, P1, P(0, 0), at((2, 5)), P(0, 0)).unwrap();
        assert_eq!(found.positions, P(2, 4));
        CheckpointDir::seed(&from, &target).unwrap();
        assert!(!target.join("old").exists(), "the old store is gone");
        let s = Store::open(&target, Partition(1), 4, &cache, &opts).unwrap();
        assert_eq!(s.meta_u64(meta::POS_EVENTS).unwrap(), 2);
        assert_eq!(s.meta_u64(meta::POS_EFFECTS).unwrap(), 4);
        drop(s);
        // Nothing within the committed positions: no candidate.
        assert!(best(&dir, P1, P(0, 0), at((1, 1)), P(0, 0)).is_none());

        // Another generation writing into the same directory prunes only
        // its own checkpoints.
        let other = Identity {
            effects_topic: Some("g1.effects".into()),
            ..id()
        };
        let g1 = CheckpointDir::new(&tmp.path().join("cps"), other.clone());
        for _ in 0..3 {
            g1.write(Partition(1), &store, Epoch(2), false).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let of = |i: &Identity| {
            dir.list(Partition(1))
                .iter()
                .filter(|(_, c)| c.identity == *i)
                .count()
        };
        assert_eq!(
            (of(&id()), of(&other)),
            (KEEP, KEEP),
            "each generation keeps its newest {KEEP}"
        );
    }
}
