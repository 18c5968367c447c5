//! The commands' status lines on stderr: plain lines, or with
//! `--log-format json` log records like every other line, so a processor's
//! stderr is one format.

use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);

/// Status lines go out as JSON log records from now on.
pub fn set_json(json: bool) {
    JSON.store(json, Ordering::Relaxed);
}

/// One status line: as it is, or as an `info` record whose message it is.
pub fn line(text: String) {
    if JSON.load(Ordering::Relaxed) {
        tracing::info!(target: "feedlog", "{text}");
    } else {
        eprintln!("{text}");
    }
}

/// The command's error, as `error: ...` or an `error` record.
pub fn error(text: String) {
    if JSON.load(Ordering::Relaxed) {
        tracing::error!(target: "feedlog", "{text}");
    } else {
        eprintln!("error: {text}");
    }
}

/// `say!("...", args)`: a status line ([`line`]).
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::say::line(format!($($arg)*))
    };
}
pub(crate) use say;
