//! A data directory: its identity file, its logs and its state stores.
//!
//! ```text
//! DIR/feedlog.json                  {"layout":1,"partitions":8}
//! DIR/log/events/00000/…            embedded log partitions (see log::embedded)
//! DIR/log/effects/00000/…
//! DIR/log/dead-letter/00000/…
//! DIR/state/00000/                  one RocksDB per partition (see state/README.md)
//! ```

use crate::log::Logs;
use crate::state::LAYOUT_VERSION;
use crate::topics::Topics;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
    /// The identity file is unreadable or names another layout.
    #[error("refusing data directory {path}: {reason}")]
    Refused {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct Identity {
    layout: u32,
    partitions: u32,
}

/// An opened data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
    partitions: u32,
}

impl DataDir {
    /// Opens `root`, creating it with `partitions` (or the `events` spec's
    /// default) when new. `partitions` given for an existing directory must
    /// match its count.
    pub fn create_or_open(root: &Path, partitions: Option<u32>) -> Result<DataDir, DataDirError> {
        if root.join("feedlog.json").exists() {
            let dir = DataDir::open(root)?;
            if let Some(n) = partitions {
                if n != dir.partitions {
                    return Err(DataDirError::Refused {
                        path: root.to_path_buf(),
                        reason: format!(
                            "it has {} partitions; --partitions only applies when the directory is created",
                            dir.partitions
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
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| DataDirError::Io { path, source }
        };
        std::fs::create_dir_all(root).map_err(io(root))?;
        let id = serde_json::to_vec(&Identity {
            layout: LAYOUT_VERSION,
            partitions,
        })
        .expect("plain struct");
        let file = root.join("feedlog.json");
        let tmp = root.join("feedlog.json.tmp");
        std::fs::write(&tmp, id).map_err(io(&tmp))?;
        std::fs::rename(&tmp, &file).map_err(io(&file))?;
        Ok(DataDir {
            root: root.to_path_buf(),
            partitions,
        })
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
        if id.layout != LAYOUT_VERSION {
            return Err(refuse(format!(
                "it was written with layout {}, this build reads layout {LAYOUT_VERSION}",
                id.layout
            )));
        }
        if id.partitions == 0 {
            return Err(refuse("feedlog.json says 0 partitions".into()));
        }
        Ok(DataDir {
            root: root.to_path_buf(),
            partitions: id.partitions,
        })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Partition count.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The directory's logs.
    pub fn logs(&self) -> Logs {
        Logs::new(&self.root.join("log"), self.partitions, Topics::builtin())
    }

    /// The state store directory of one partition.
    pub fn state_dir(&self, partition: u32) -> PathBuf {
        self.root.join("state").join(format!("{partition:05}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a data directory keeps its partition count and refuses another layout.
    #[test]
    fn identity_is_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let d = DataDir::create_or_open(tmp.path(), Some(3)).unwrap();
        assert_eq!(d.partitions(), 3);
        assert_eq!(
            DataDir::create_or_open(tmp.path(), None)
                .unwrap()
                .partitions(),
            3
        );
        let err = DataDir::create_or_open(tmp.path(), Some(4))
            .unwrap_err()
            .to_string();
        assert!(err.contains("it has 3 partitions"), "{err}");
        std::fs::write(
            tmp.path().join("feedlog.json"),
            r#"{"layout":9,"partitions":3}"#,
        )
        .unwrap();
        let err = DataDir::open(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("layout 9"), "{err}");
        let err = DataDir::open(&tmp.path().join("nope"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a feedlog data directory"), "{err}");
    }
}
