//! A data directory: its identity file, its logs and its state stores.
//!
//! ```text
//! DIR/feedlog.json                  {"layout":2,"partitions":8}
//! DIR/log/events/00000/…            embedded log partitions (see log::embedded)
//! DIR/log/effects/00000/…
//! DIR/log/dead-letter/00000/…
//! DIR/state/00000/                  one RocksDB per partition (see state/README.md)
//! DIR/state.1/00000/                 another state generation (after a swap)
//! DIR/run.lock                       held by the process that writes the state
//! DIR/control/                       requests to that process (see crate::ops::requests)
//! ```
//!
//! `feedlog.json` names the active state generation (`"state"` when absent)
//! and the inbox cap it was built with. A swap writes a new `feedlog.json`
//! (write, fsync, rename): every process that opens the directory afterwards
//! sees the new generation, and the old one stays on disk until
//! `feedlog drop-state` removes it.
//!
//! A log is made with every partition `feedlog.json` counts (see
//! `log::embedded::Logs`), so the partition directories say the count too:
//! a `feedlog.json` that counts fewer or more than a log holds is refused.

use crate::core::Disposition;
use crate::core::Generation;
use crate::core::Partition;
use crate::log::embedded::Framing;
use crate::log::topics::Topics;
use crate::log::Logs;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The data directory's own layout (`feedlog.json` and where logs and
/// states live), apart from the state stores' layout
/// ([`crate::state::LAYOUT_VERSION`]): a directory whose stores an older
/// build wrote still opens, so its log can be rebuilt into new ones.
/// Layout 2 (what a new directory gets) frames its log records compactly
/// (`log/embedded/segment.rs`); a layout-1 directory opens as it is and
/// keeps writing the fixed framing, so the version that made it can still
/// read it.
pub const DIR_LAYOUT: u32 = 2;
/// The layouts this build opens.
const READ_LAYOUTS: std::ops::RangeInclusive<u32> = 1..=DIR_LAYOUT;

/// Errors opening a data directory.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// I/O on the identity file.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// No data directory here.
    #[error("{0} is not a feedlog data directory (no feedlog.json); create one with `feedlog --data DIR produce`")]
    Missing(PathBuf),
    /// A processor was asked to run the active state with another inbox cap
    /// than it was built with.
    #[error(
        "the state of {dir} was built with inbox cap {built}, not {asked}: \
         `feedlog --data {dir} backfill --view timeline --inbox-cap {asked}` rebuilds it with {asked} \
         beside the live one and swaps it in"
    )]
    InboxCap {
        /// The data directory.
        dir: PathBuf,
        /// The cap the active state was built with.
        built: u64,
        /// The cap asked for.
        asked: u64,
    },
    /// The identity file is unreadable or names another layout.
    #[error("refusing data directory {path}: {reason}")]
    Refused {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl DataDirError {
    /// Skip, retry or stop: a passing I/O failure (a full disk) is retried;
    /// a missing or refused directory needs an operator.
    pub fn disposition(&self) -> Disposition {
        match self {
            DataDirError::Io { source, .. } => Disposition::of_io(source.kind()),
            DataDirError::Missing(_)
            | DataDirError::InboxCap { .. }
            | DataDirError::Refused { .. } => Disposition::Stop,
        }
    }
}

/// The name of the first state generation.
pub const FIRST_STATE: &str = "state";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Identity {
    layout: u32,
    partitions: u32,
    /// The active state generation, a directory under the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state: Option<String>,
    /// Inbox entries kept per user, as the active state was built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inbox_cap: Option<u64>,
    /// The pull threshold a new partition state starts with (recorded by
    /// the first processor that opens the directory; absent in directories
    /// made before it was recorded: their states start with none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pull_threshold: Option<u64>,
}

/// An opened data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
    id: Identity,
}

/// Whether `name` is a state generation's directory name: `state` or
/// `state.N` ([`Generation`] N).
pub fn is_state_name(name: &str) -> bool {
    name == FIRST_STATE || numbered(name).is_some()
}

/// The N of `state.N`, written in digits only.
fn numbered(name: &str) -> Option<Generation> {
    name.strip_prefix("state.")
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse().ok())
}

/// The generation whose state directory is `name` (`state`: the first,
/// `state.N`: N; a name that is not a generation's: the first).
pub fn generation_number(name: &str) -> Generation {
    numbered(name).unwrap_or(Generation::FIRST)
}

impl DataDir {
    /// Opens `root`, creating it with `partitions` (or the `events` spec's
    /// default) when new. `partitions` given for an existing directory must
    /// match its count.
    /// A directory that holds logs or state but no `feedlog.json` is refused:
    /// its identity is lost, and a new one could name another partition count.
    pub fn create_or_open(root: &Path, partitions: Option<u32>) -> Result<DataDir, DataDirError> {
        if !root.join("feedlog.json").exists() {
            if let Some(found) = existing_data(root) {
                return Err(DataDirError::Refused {
                    path: root.to_path_buf(),
                    reason: format!(
                        "feedlog.json is missing but the directory holds {found}: restore feedlog.json \
                         (it names the partition count; see `feedlog log check`) rather than create a new identity"
                    ),
                });
            }
        }
        if root.join("feedlog.json").exists() {
            let dir = DataDir::open(root)?;
            if let Some(n) = partitions {
                if n != dir.partitions() {
                    return Err(DataDirError::Refused {
                        path: root.to_path_buf(),
                        reason: format!(
                            "it has {} partitions; --partitions only applies when the directory is created",
                            dir.partitions()
                        ),
                    });
                }
            }
            return Ok(dir);
        }
        let partitions = partitions.unwrap_or_else(|| Topics::builtin().default_partitions());
        if partitions == 0 || partitions > 4096 {
            return Err(DataDirError::Refused {
                path: root.to_path_buf(),
                reason: format!("partition count {partitions} is outside 1..=4096"),
            });
        }
        std::fs::create_dir_all(root).map_err(io(root))?;
        let dir = DataDir {
            root: root.to_path_buf(),
            id: Identity {
                layout: DIR_LAYOUT,
                partitions,
                state: None,
                inbox_cap: None,
                pull_threshold: None,
            },
        };
        dir.write_identity()?;
        Ok(dir)
    }

    fn write_identity(&self) -> Result<(), DataDirError> {
        let bytes = serde_json::to_vec(&self.id).expect("plain struct");
        crate::state::fsutil::write_atomically(&self.root.join("feedlog.json"), &bytes)
            .map_err(|(path, source)| DataDirError::Io { path, source })
    }

    /// Opens an existing data directory.
    pub fn open(root: &Path) -> Result<DataDir, DataDirError> {
        let file = root.join("feedlog.json");
        let bytes = match std::fs::read(&file) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(DataDirError::Missing(root.to_path_buf()))
            }
            Err(source) => return Err(DataDirError::Io { path: file, source }),
        };
        let refuse = |reason: String| DataDirError::Refused {
            path: root.to_path_buf(),
            reason,
        };
        let id: Identity = serde_json::from_slice(&bytes)
            .map_err(|e| refuse(format!("feedlog.json is invalid: {e}")))?;
        if !READ_LAYOUTS.contains(&id.layout) {
            return Err(refuse(format!(
                "it was written with layout {}, this build reads layouts 1 to {DIR_LAYOUT}",
                id.layout
            )));
        }
        if id.partitions == 0 {
            return Err(refuse("feedlog.json says 0 partitions".into()));
        }
        if let Some(state) = &id.state {
            if !is_state_name(state) {
                return Err(refuse(format!(
                    "feedlog.json names state generation {state:?}, which is not `state` or `state.N`"
                )));
            }
        }
        let dir = DataDir {
            root: root.to_path_buf(),
            id,
        };
        dir.check_partition_dirs()?;
        Ok(dir)
    }

    /// Refuses a directory whose logs or state hold partitions that
    /// `feedlog.json` does not count (they would be silently ignored), and
    /// one whose logs hold fewer partitions than it counts (a log is made
    /// with all its partitions at once; events would go to partitions no
    /// state knows, and the log would be split by another partitioner).
    fn check_partition_dirs(&self) -> Result<(), DataDirError> {
        let logs = self.logs();
        // (directory, partitions it should hold, whether it is a log)
        let mut places: Vec<(PathBuf, u32, bool)> =
            [crate::log::Topic::Events, crate::log::Topic::Effects]
                .into_iter()
                .map(|t| {
                    let dir = logs.dir(t, Partition(0));
                    let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
                    (parent, logs.partitions(t), true)
                })
                .collect();
        places.push((self.state_root(), self.partitions(), false));
        for (dir, count, is_log) in places {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut held = 0u32;
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(index) = name
                    .to_str()
                    .filter(|n| n.len() == 5 && n.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                held += 1;
                if index >= count {
                    return Err(DataDirError::Refused {
                        path: self.root.clone(),
                        reason: format!(
                            "feedlog.json says {} partitions but {} exists: the directory holds partitions \
                             it does not count (was feedlog.json replaced?)",
                            self.partitions(),
                            entry.path().display()
                        ),
                    });
                }
            }
            // Only a log made whole (it has the marker) says its count: an
            // older one made each partition's directory on its first write.
            if is_log && held < count && dir.join(crate::log::PARTITIONS_MARKER).exists() {
                return Err(DataDirError::Refused {
                    path: self.root.clone(),
                    reason: format!(
                        "feedlog.json says {count} partitions but {} holds {held} partition logs: it counts \
                         partitions the log was not made with (was feedlog.json replaced?)",
                        dir.display()
                    ),
                });
            }
        }
        Ok(())
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Partition count.
    pub fn partitions(&self) -> u32 {
        self.id.partitions
    }

    /// The active state generation's name (`state`, `state.1`, ...).
    pub fn state_name(&self) -> &str {
        self.id.state.as_deref().unwrap_or(FIRST_STATE)
    }

    /// The active state generation's number: 0 for `state`, N for
    /// `state.N`. Generations only move forward (a swap or reset makes the
    /// next one), so the embedded processor uses it as its owner epoch.
    pub fn generation(&self) -> Generation {
        generation_number(self.state_name())
    }

    /// The active state generation's directory.
    pub fn state_root(&self) -> PathBuf {
        self.root.join(self.state_name())
    }

    /// The inbox cap the active state was built with, when recorded.
    pub fn inbox_cap(&self) -> Option<u64> {
        self.id.inbox_cap
    }

    /// Records the inbox cap of the active state.
    pub fn set_inbox_cap(&mut self, cap: u64) -> Result<(), DataDirError> {
        self.id.inbox_cap = Some(cap);
        self.write_identity()
    }

    /// The inbox cap to work with: the one `asked` for, else the one the
    /// active state was built with, else the default. (A rebuild takes it
    /// as it is; a processor also passes it through
    /// [`DataDir::settle_inbox_cap`].)
    pub fn inbox_cap_or_built(&self, asked: Option<u64>) -> u64 {
        asked
            .or(self.id.inbox_cap)
            .unwrap_or(crate::core::DEFAULT_INBOX_CAP)
    }

    /// The check every processor of this directory's state makes, library
    /// callers included: it refuses to run the active state with another
    /// inbox cap than the state was built with (inboxes are trimmed to the
    /// cap as they grow: one state, one cap; `backfill` rebuilds with
    /// another), and records `cap` when the state has none recorded yet.
    pub fn settle_inbox_cap(&mut self, cap: u64) -> Result<(), DataDirError> {
        *self = DataDir::open(&self.root)?;
        match self.id.inbox_cap {
            Some(built) if built != cap => Err(DataDirError::InboxCap {
                dir: self.root.clone(),
                built,
                asked: cap,
            }),
            Some(_) => Ok(()),
            None => self.set_inbox_cap(cap),
        }
    }

    /// The pull threshold a partition state that has applied nothing
    /// starts with, so that a processor decides under it from the first
    /// event however far behind it starts (docs/design.md, "Big accounts are pulled").
    pub fn pull_threshold(&self) -> Option<u64> {
        self.id.pull_threshold
    }

    /// The recorded starting pull threshold, recording `configured` first
    /// when there is none. Once recorded it never changes: a processor
    /// configured otherwise asks for its own threshold through the
    /// partitions' `effects` logs, which a rebuild replays.
    /// The identity is read again first: another handle may have recorded
    /// one (or swapped the state) since this one was opened.
    pub fn starting_threshold(
        &mut self,
        configured: Option<u64>,
    ) -> Result<Option<u64>, DataDirError> {
        *self = DataDir::open(&self.root)?;
        if self.id.pull_threshold.is_none() && configured.is_some() {
            self.id.pull_threshold = configured;
            self.write_identity()?;
        }
        Ok(self.id.pull_threshold)
    }

    /// Makes `name` (a directory under the root) the active state
    /// generation, built with `inbox_cap`: one atomic rename of
    /// `feedlog.json`.
    pub fn set_state(&mut self, name: &str, inbox_cap: u64) -> Result<(), DataDirError> {
        assert!(is_state_name(name), "not a state generation name: {name}");
        self.id.state = (name != FIRST_STATE).then(|| name.to_string());
        self.id.inbox_cap = Some(inbox_cap);
        self.write_identity()
    }

    /// The state generations on disk (active or not), by name.
    pub fn state_generations(&self) -> Result<Vec<String>, DataDirError> {
        let mut out: Vec<String> = std::fs::read_dir(&self.root)
            .map_err(io(&self.root))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| is_state_name(n))
            .collect();
        out.sort_by_key(|n| generation_number(n));
        Ok(out)
    }

    /// A name for a new state generation: one past the highest on disk.
    pub fn next_state_name(&self) -> Result<String, DataDirError> {
        let highest = self
            .state_generations()?
            .iter()
            .map(|n| generation_number(n))
            .max()
            .unwrap_or(Generation::FIRST);
        Ok(format!("state.{}", highest.next()))
    }

    /// The directory's logs.
    pub fn logs(&self) -> Logs {
        let framing = match self.id.layout {
            1 => Framing::Fixed,
            _ => Framing::Compact,
        };
        Logs::new(&self.root.join("log"), self.partitions(), Topics::builtin())
            .with_framing(framing)
    }

    /// The state store directory of one partition, in the active
    /// generation.
    pub fn state_dir(&self, partition: Partition) -> PathBuf {
        self.state_root().join(format!("{partition:05}"))
    }

    /// Takes `DIR/run.lock`, held while this process writes the state;
    /// `None` when another process holds it.
    pub fn try_lock(&self) -> Result<Option<std::fs::File>, DataDirError> {
        let path = self.root.join("run.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(source)) => Err(DataDirError::Io { path, source }),
        }
    }
}

/// What data `root` holds without a `feedlog.json` (logs or a state
/// generation), if any.
fn existing_data(root: &Path) -> Option<String> {
    if root.join("log").is_dir() {
        return Some("logs (log/)".into());
    }
    std::fs::read_dir(root)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .find(|n| is_state_name(n))
        .map(|n| format!("state ({n}/)"))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DataDirError {
    let path = path.to_path_buf();
    move |source| DataDirError::Io { path, source }
}

#[cfg(test)]
mod tests;
