//! The commands' status lines on stderr: plain lines, or with
//! `--log-format json` log records like every other line, so a processor's
//! stderr is one format. Long commands show a progress bar instead on a
//! terminal ([`Meter`]).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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

/// Progress of a long command (rebuild, import): a bar redrawn in place
/// when stderr is a terminal and logs are text, else a status line at
/// each update.
pub struct Meter {
    bar: Option<indicatif::ProgressBar>,
}

impl Meter {
    /// A meter of `total` `unit`s (records, bytes).
    pub fn new(total: u64, unit: &str) -> Meter {
        let tty = std::io::stderr().is_terminal() && !JSON.load(Ordering::Relaxed);
        let bar = tty.then(|| {
            let counts = match unit {
                "bytes" => "{binary_bytes}/{binary_total_bytes}".to_string(),
                _ => format!("{{human_pos}}/{{human_len}} {unit}"),
            };
            let template = format!(
                "{{elapsed_precise}} [{{bar:30}}] {{percent:>3}}% {counts}, ETA {{eta}}  {{msg}}"
            );
            let style = indicatif::ProgressStyle::with_template(&template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> ");
            indicatif::ProgressBar::new(total).with_style(style)
        });
        Meter { bar }
    }

    /// How often to update: a bar often, lines at `lines_every`.
    pub fn every(&self, lines_every: Duration) -> Duration {
        match self.bar {
            Some(_) => Duration::from_millis(100),
            None => lines_every,
        }
    }

    /// Moves the bar to `done` with `msg` beside it; without a bar, says
    /// `line()`.
    pub fn show(&self, done: u64, msg: String, line: impl FnOnce() -> String) {
        match &self.bar {
            Some(b) => {
                b.set_position(done);
                b.set_message(msg);
            }
            None => self::line(line()),
        }
    }

    /// Takes the bar away: the command's summary line follows.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// `say!("...", args)`: a status line ([`line`]).
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::say::line(format!($($arg)*))
    };
}
pub(crate) use say;
