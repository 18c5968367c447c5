//! The harness: a data directory's processor and partition tasks, the
//! group's committed positions, handovers to new owners, and old owners
//! that keep running on their own stores.

use feedlog::core::position::Positions;
use feedlog::core::Epoch;
use feedlog::core::Partition;
use feedlog::state::datadir::DataDir;
use feedlog::state::{Store, StoreOptions};
use feedlog::task::embedded::{Processor, ProcessorConfig};
use feedlog::task::{CrashPoint, Faults, PartitionTask, Takeover, TaskError};
use std::sync::Arc;

/// Crashes at one point of the next step.
pub(crate) struct CrashOnce(pub(crate) CrashPoint);

impl Faults for CrashOnce {
    fn crash_at(&mut self, point: CrashPoint) -> bool {
        point == self.0
    }
}

pub(crate) struct Harness {
    pub(crate) dir: DataDir,
    pub(crate) cfg: ProcessorConfig,
    pub(crate) tasks: Vec<PartitionTask>,
    pub(crate) processor: Option<Processor>,
    /// Per partition, the group's committed positions (Kafka mode): where
    /// every owner's outputs are acknowledged.
    pub(crate) committed: Vec<Positions>,
    /// Per partition, its current owner's epoch (each new owner takes one
    /// more).
    pub(crate) epochs: Vec<u64>,
    /// Per partition, the group's positions its current owner's task was
    /// last opened with: below them it replays quietly.
    pub(crate) quiet: Vec<Positions>,
    /// Old owners still running on their own stores.
    pub(crate) zombies: Vec<Zombie>,
    /// Where the old owners' stores live.
    pub(crate) zombie_root: std::path::PathBuf,
}

/// An owner whose partition moved on while it kept running.
pub(crate) struct Zombie {
    pub(crate) partition: Partition,
    pub(crate) epoch: Epoch,
    /// The group's positions its task was opened with, kept for as long as
    /// it runs: an old owner still replaying quietly when its partition
    /// moved on goes on replaying quietly (it re-decides nothing its
    /// predecessors emitted, as a real one would not).
    pub(crate) quiet: Positions,
    pub(crate) store: Arc<Store>,
    /// Its task (dropped, and opened again on the new log handle, whenever
    /// the harness reopens the processor).
    pub(crate) task: Option<PartitionTask>,
    /// Stalled between a commit and its shipping.
    pub(crate) stalled: bool,
}

impl Harness {
    /// Opens every task as its owner would on a restart: below the group's
    /// positions it replays quietly (all zeros: it resumes as after a crash).
    pub(crate) fn open(&mut self) {
        let p = Processor::open(&self.dir, self.cfg.clone()).expect("open processor");
        self.quiet = self.committed.clone();
        self.tasks = Partition::all(self.dir.partitions())
            .map(|i| {
                let takeover = Takeover {
                    epoch: Epoch(self.epochs[i.index()]),
                    emitted: Some(self.committed[i.index()]),
                    reship: true,
                };
                p.task_after(i, takeover).expect("open task")
            })
            .collect();
        // Running old owners go on (on the new log handle); stalled ones
        // stay stalled.
        for z in &mut self.zombies {
            if !z.stalled {
                z.task = Some(zombie_task(&p, z, false));
            }
        }
        self.processor = Some(p);
    }

    /// Partition `p` moves to a new owner: its store is lost, and the new
    /// one rebuilds it quietly up to the group's positions, then decides
    /// the rest anew, in its own order (whatever the old owner already sent
    /// past those positions stays sent).
    pub(crate) fn handover(&mut self, p: Partition, zombie: bool) {
        self.close();
        let old = self.dir.state_dir(p);
        if zombie {
            // The old owner's store moves aside and its owner goes on there.
            let to = self.zombie_root.join(format!("z{}", self.zombies.len()));
            std::fs::create_dir_all(&self.zombie_root).unwrap();
            std::fs::rename(&old, &to).unwrap();
            let store = Store::open(
                &to,
                p,
                self.dir.partitions(),
                &feedlog::state::BlockCache::new(1 << 20),
                &StoreOptions {
                    sync: false,
                    ..StoreOptions::default()
                },
            )
            .unwrap();
            self.zombies.push(Zombie {
                partition: p,
                epoch: Epoch(self.epochs[p.index()]),
                quiet: self.quiet[p.index()],
                store: Arc::new(store),
                task: None,
                stalled: false,
            });
        } else {
            std::fs::remove_dir_all(&old).unwrap();
        }
        self.epochs[p.index()] += 1;
        self.open();
        let processor = self.processor.as_ref().unwrap();
        let takeover = Takeover {
            epoch: Epoch(self.epochs[p.index()]),
            emitted: Some(self.committed[p.index()]),
            reship: false,
        };
        self.tasks[p.index()] = processor
            .task_after(p, takeover)
            .expect("open the new owner's task");
    }

    /// Old owner `i` steps `n` times; with `stall`, the last step stops
    /// after its commit, before shipping.
    pub(crate) fn zombie_step(&mut self, i: usize, n: u8, stall: bool) {
        let Some(z) = self.zombies.get_mut(i) else {
            return;
        };
        let Some(task) = z.task.as_mut() else {
            return;
        };
        for k in 0..n {
            if stall && k + 1 == n {
                match task.step(&mut CrashOnce(CrashPoint::AfterCommit)) {
                    Err(TaskError::Crashed(_)) | Ok(_) => {
                        z.task = None;
                        z.stalled = true;
                    }
                    Err(e) => panic!("old owner's step failed: {e}"),
                }
                return;
            }
            task.step(&mut feedlog::task::NoFaults)
                .expect("old owner's step");
        }
    }

    /// A stalled old owner resumes: it ships what it committed.
    pub(crate) fn zombie_ship(&mut self, i: usize) {
        let processor = self.processor.as_ref().unwrap();
        if let Some(z) = self.zombies.get_mut(i).filter(|z| z.stalled) {
            z.task = Some(zombie_task(processor, z, true));
            z.stalled = false;
        }
    }

    /// Drops every task and store, as a killed process would, and reopens.
    pub(crate) fn restart(&mut self) {
        self.close();
        self.open();
    }

    /// Drops every task (the old owners' too: they hold the log handle)
    /// and the processor.
    pub(crate) fn close(&mut self) {
        self.tasks.clear();
        for z in &mut self.zombies {
            z.task = None;
        }
        self.processor = None;
    }

    pub(crate) fn step(&mut self, p: u32) -> u64 {
        self.tasks[p as usize]
            .step(&mut feedlog::task::NoFaults)
            .expect("step")
            .input()
    }

    /// Steps every partition round-robin until a full round reads nothing.
    pub(crate) fn quiesce(&mut self) {
        loop {
            let mut moved = 0;
            for p in 0..self.dir.partitions() {
                moved += self.step(p);
            }
            if moved == 0 {
                return;
            }
        }
    }
}

/// The task of old owner `z` on its own store, over `processor`'s log:
/// with `reship`, it ships what it committed and had not shipped (stamped
/// with its own, old epoch).
pub(crate) fn zombie_task(processor: &Processor, z: &Zombie, reship: bool) -> PartitionTask {
    let takeover = Takeover {
        epoch: z.epoch,
        emitted: Some(z.quiet),
        reship,
    };
    let cfg = processor.config();
    PartitionTask::open_after(
        processor.ctx(z.partition),
        cfg.limits,
        false,
        z.store.clone(),
        processor.logs().clone(),
        takeover,
    )
    .expect("open the old owner's task")
}
