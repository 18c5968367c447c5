//! What a runner does with a failure: skip the record, retry later, or stop
//! and tell the operator. Every error type of the library answers with one
//! [`Disposition`] (its `disposition()` method), and the runners act on
//! that answer only, never on an error's text or on which variant it is.

use std::fmt;

/// What to do with a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// The input is bad and will stay bad: set it aside (the dead-letter
    /// log) with the reason, and go on with the next record.
    Skip,
    /// A passing condition (a broker away, a rebalance, a lock another
    /// process holds, a full disk): keep what was accepted and try the same
    /// work again later.
    Retry,
    /// Nothing this process can do will fix it (a corrupt store, a setting
    /// that contradicts the state, history the log no longer holds): stop
    /// the work, keep everything as it is, and say what the operator must
    /// do.
    Stop,
}

impl Disposition {
    /// The answer for an operating-system failure of this kind: a full
    /// disk, a call interrupted or timed out, a resource busy pass; a
    /// permission refused, a file missing or malformed do not.
    pub fn of_io(kind: std::io::ErrorKind) -> Disposition {
        use std::io::ErrorKind::*;
        match kind {
            StorageFull | QuotaExceeded | Interrupted | TimedOut | WouldBlock | ResourceBusy
            | OutOfMemory | WriteZero => Disposition::Retry,
            _ => Disposition::Stop,
        }
    }

    /// The process exit code a command-line tool ends with: 75
    /// (`EX_TEMPFAIL`: run it again later) for [`Disposition::Retry`], 1
    /// otherwise.
    pub fn exit_code(self) -> i32 {
        match self {
            Disposition::Retry => 75,
            Disposition::Skip | Disposition::Stop => 1,
        }
    }
}

impl fmt::Display for Disposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Disposition::Skip => "skip",
            Disposition::Retry => "retry",
            Disposition::Stop => "stop",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Disposition::{self, *};

    /// Proves a retry exits 75 (run it again later) and the rest 1, and a full disk passes while a refused permission does not.
    #[test]
    fn exit_codes_and_io_answers() {
        assert_eq!(Retry.exit_code(), 75);
        assert_eq!(Stop.exit_code(), 1);
        assert_eq!(Skip.exit_code(), 1);
        assert_eq!(Disposition::of_io(std::io::ErrorKind::StorageFull), Retry);
        assert_eq!(
            Disposition::of_io(std::io::ErrorKind::PermissionDenied),
            Stop
        );
    }
}
