//! The requests a running processor takes from other commands.
//!
//! Requests reach a running processor through `DIR/control/`: the
//! requester writes `request.json` (atomically) and waits for
//! `ID.result.json`; the processor polls, claims the request by renaming it
//! to `working.json`, carries it out and answers. A requester that finds
//! `run.lock` free does the work itself instead.

use super::rebuild::ReplayError;
use super::swap::swap;
use crate::core::{Disposition, DEFAULT_INBOX_CAP};
use crate::state::checkpoint::write_dir_checkpoint;
use crate::state::datadir::DataDir;
use crate::state::set::open_stores;
use crate::state::BlockCache;
use crate::task::embedded::Processor;
use crate::task::Shutdown;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A request to the process that holds `run.lock`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Write a checkpoint of every partition into `into`.
    Checkpoint {
        /// The new checkpoint directory.
        into: PathBuf,
    },
    /// Swap to the finished rebuild in `from`.
    Swap {
        /// The rebuild's directory.
        from: PathBuf,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Envelope {
    id: String,
    #[serde(flatten)]
    request: Request,
}

/// Why a request failed, as its requester reads it (across processes too:
/// it is written into the answer file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// What failed, with its causes.
    pub message: String,
    /// What the failure answers: retry the request later, or act first.
    pub disposition: Disposition,
}

impl Refusal {
    /// Skip, retry or stop, as the failure answered.
    pub fn disposition(&self) -> Disposition {
        self.disposition
    }

    /// A refusal that only an operator's action can lift.
    fn stop(message: impl Into<String>) -> Refusal {
        Refusal {
            message: message.into(),
            disposition: Disposition::Stop,
        }
    }

    /// A file-system failure `doing` something.
    fn io(doing: String) -> impl FnOnce(std::io::Error) -> Refusal {
        move |e| Refusal {
            message: format!("{doing}: {e}"),
            disposition: Disposition::of_io(e.kind()),
        }
    }
}

impl From<ReplayError> for Refusal {
    fn from(e: ReplayError) -> Refusal {
        Refusal {
            message: e.to_string(),
            disposition: e.disposition(),
        }
    }
}

/// The answer to a [`Request`]: a JSON value on success, why not on
/// failure.
pub type Answer = Result<serde_json::Value, Refusal>;

#[derive(Debug, Serialize, Deserialize)]
struct AnswerFile {
    ok: Option<serde_json::Value>,
    error: Option<String>,
    /// With `error` (absent in answers of earlier versions: read as stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    disposition: Option<Disposition>,
}

fn control_dir(d: &DataDir) -> PathBuf {
    d.root().join("control")
}

/// Sends `request` to the processor running on `d` and waits for its
/// answer; `waiting` is called about every 2 s. Errors when a request is
/// already pending, or when the processor stops before answering (its
/// request is then withdrawn).
pub fn request(d: &DataDir, request: Request, waiting: &dyn Fn(Duration)) -> Answer {
    let dir = control_dir(d);
    std::fs::create_dir_all(&dir).map_err(Refusal::io(format!("creating {}", dir.display())))?;
    let file = dir.join("request.json");
    if file.exists() || dir.join("working.json").exists() {
        return Err(Refusal {
            message: format!(
                "another request to the processor is pending ({}); wait for it, or remove the file if its requester is gone",
                dir.display()
            ),
            disposition: Disposition::Retry,
        });
    }
    let id = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.as_nanos())
    );
    let env = Envelope {
        id: id.clone(),
        request,
    };
    let bytes =
        serde_json::to_vec(&env).expect("a request (paths and names) always encodes as JSON");
    crate::state::fsutil::write_atomically(&file, &bytes)
        .map_err(|(p, e)| Refusal::io(format!("writing {}", p.display()))(e))?;
    let answer_file = dir.join(format!("{id}.result.json"));
    let start = Instant::now();
    let mut last = Instant::now();
    loop {
        if let Ok(bytes) = std::fs::read(&answer_file) {
            let _ = std::fs::remove_file(&answer_file);
            let a: AnswerFile = serde_json::from_slice(&bytes).map_err(|e| {
                Refusal::stop(format!("unreadable answer {}: {e}", answer_file.display()))
            })?;
            return match (a.ok, a.error) {
                (Some(v), _) => Ok(v),
                (None, Some(message)) => Err(Refusal {
                    message,
                    disposition: a.disposition.unwrap_or(Disposition::Stop),
                }),
                (None, None) => Err(Refusal::stop("empty answer")),
            };
        }
        // The processor holds run.lock while it runs; a free lock means it
        // is gone.
        if let Ok(Some(_lock)) = d.try_lock() {
            if std::fs::remove_file(&file).is_ok() {
                return Err(Refusal {
                    message: "no processor is running on this data directory any more; the request was withdrawn".into(),
                    disposition: Disposition::Retry,
                });
            }
            if !answer_file.exists() {
                return Err(Refusal::stop("the processor stopped while carrying out the request; check its output, then `feedlog states`"));
            }
            continue;
        }
        if last.elapsed() >= Duration::from_secs(2) {
            waiting(start.elapsed());
            last = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Takes the next pending request for the processor on `d`, if any.
fn take_request(d: &DataDir) -> Option<Envelope> {
    let dir = control_dir(d);
    let (file, working) = (dir.join("request.json"), dir.join("working.json"));
    std::fs::rename(&file, &working).ok()?;
    let bytes = std::fs::read(&working).ok()?;
    match serde_json::from_slice::<Envelope>(&bytes) {
        Ok(env) => Some(env),
        Err(e) => {
            tracing::warn!(file = %working.display(), error = %e, "ignoring an unreadable request");
            let _ = std::fs::remove_file(&working);
            None
        }
    }
}

fn answer(d: &DataDir, id: &str, a: &Answer) {
    let dir = control_dir(d);
    let file = AnswerFile {
        ok: a.as_ref().ok().cloned(),
        error: a.as_ref().err().map(|r| r.message.clone()),
        disposition: a.as_ref().err().map(|r| r.disposition),
    };
    let path = dir.join(format!("{id}.result.json"));
    let written = serde_json::to_vec(&file)
        .map_err(|e| (path.clone(), std::io::Error::other(e)))
        .and_then(|bytes| crate::state::fsutil::write_atomically(&path, &bytes));
    if let Err((p, e)) = written {
        tracing::error!(file = %p.display(), error = %e, "could not answer a request");
    }
    let _ = std::fs::remove_file(dir.join("working.json"));
}

/// Carries out `request` against `d`: through `live` when a processor runs
/// here (in this process), on the stores directly otherwise.
pub fn carry_out(
    d: &DataDir,
    live: Option<&Processor>,
    request: &Request,
    say: &dyn Fn(String),
) -> Answer {
    let value = match request {
        Request::Checkpoint { into } => {
            let (stores, cap) = match live {
                Some(p) => (p.stores().to_vec(), p.config().inbox_cap),
                None => {
                    let cache = BlockCache::new(64 << 20);
                    let s = open_stores(d, &cache, &crate::state::StoreOptions::default())
                        .map_err(ReplayError::from)?;
                    (s, d.inbox_cap().unwrap_or(DEFAULT_INBOX_CAP))
                }
            };
            let c = write_dir_checkpoint(&stores, d, cap, into).map_err(ReplayError::from)?;
            serde_json::to_value(c)
        }
        Request::Swap { from } => {
            let r = swap(d.root(), from, live, say)?;
            serde_json::to_value(r)
        }
    };
    Ok(value.expect("a checkpoint or swap report always encodes as JSON"))
}

/// Serves requests for the processor `live` on `d` until `shutdown`:
/// polls `DIR/control/` a few times a second.
pub fn serve_requests(d: &DataDir, live: &Processor, shutdown: &Shutdown) {
    while !shutdown.is_requested() && !live.ended() {
        if let Some(env) = take_request(d) {
            tracing::info!(id = %env.id, request = ?env.request, "control request");
            let say = |line: String| tracing::info!(id = %env.id, "{line}");
            let a = carry_out(d, Some(live), &env.request, &say);
            match &a {
                Ok(v) => tracing::info!(id = %env.id, "request done: {v}"),
                Err(e) => tracing::warn!(id = %env.id, "request failed: {e}"),
            }
            answer(d, &env.id, &a);
        }
        shutdown.wait(Duration::from_millis(200));
    }
}
