//! The requests a running processor takes from other commands.
//!
//! Requests reach a running processor through `DIR/control/`: the
//! requester writes `request.json` (atomically) and waits for
//! `ID.result.json`; the processor polls, claims the request by renaming it
//! to `working.json`, carries it out and answers. A requester that finds
//! `run.lock` free does the work itself instead.

use super::swap::swap;
use crate::core::DEFAULT_INBOX_CAP;
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

/// The answer to a [`Request`]: a JSON value on success, a message on
/// failure.
pub type Answer = Result<serde_json::Value, String>;

#[derive(Debug, Serialize, Deserialize)]
struct AnswerFile {
    ok: Option<serde_json::Value>,
    error: Option<String>,
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
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let file = dir.join("request.json");
    if file.exists() || dir.join("working.json").exists() {
        return Err(format!(
            "another request to the processor is pending ({}); wait for it, or remove the file if its requester is gone",
            dir.display()
        ));
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
    let bytes = serde_json::to_vec(&env).map_err(|e| format!("encoding the request: {e}"))?;
    crate::state::fsutil::write_atomically(&file, &bytes)
        .map_err(|(p, e)| format!("writing {}: {e}", p.display()))?;
    let answer_file = dir.join(format!("{id}.result.json"));
    let start = Instant::now();
    let mut last = Instant::now();
    loop {
        if let Ok(bytes) = std::fs::read(&answer_file) {
            let _ = std::fs::remove_file(&answer_file);
            let a: AnswerFile = serde_json::from_slice(&bytes)
                .map_err(|e| format!("unreadable answer {}: {e}", answer_file.display()))?;
            return match (a.ok, a.error) {
                (Some(v), _) => Ok(v),
                (None, Some(e)) => Err(e),
                (None, None) => Err("empty answer".into()),
            };
        }
        // The processor holds run.lock while it runs; a free lock means it
        // is gone.
        if let Ok(Some(_lock)) = d.try_lock() {
            if std::fs::remove_file(&file).is_ok() {
                return Err("no processor is running on this data directory any more; the request was withdrawn".into());
            }
            if !answer_file.exists() {
                return Err("the processor stopped while carrying out the request; check its output, then `feedlog states`".into());
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
        error: a.as_ref().err().cloned(),
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
                    let s = open_stores(d, &cache, true).map_err(|e| e.to_string())?;
                    (s, d.inbox_cap().unwrap_or(DEFAULT_INBOX_CAP))
                }
            };
            let c = write_dir_checkpoint(&stores, d, cap, into).map_err(|e| e.to_string())?;
            serde_json::to_value(c)
        }
        Request::Swap { from } => {
            let r = swap(d.root(), from, live, say).map_err(|e| e.to_string())?;
            serde_json::to_value(r)
        }
    };
    value.map_err(|e| format!("encoding the answer: {e}"))
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
