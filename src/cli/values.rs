//! The command line's own value parsers, and why a value is refused (clap
//! prints the reason and exits 2: the user fixes the command line).

use feedlog::core::View;
use std::time::Duration;

/// A command-line value that is not one the flag takes.
#[derive(Debug, thiserror::Error)]
pub enum BadValue {
    /// Not a view's name.
    #[error("unknown view {given:?} (one of: {names})")]
    View {
        /// What was given.
        given: String,
        /// Every view's name.
        names: String,
    },
    /// Not a number of seconds of at least 0.01.
    #[error("{0:?} is not a number of seconds of at least 0.01")]
    Seconds(String),
    /// Zero where at least one is needed.
    #[error("must be at least 1")]
    Zero,
    /// Not a whole number.
    #[error(transparent)]
    Count(#[from] std::num::ParseIntError),
}

/// `--view`: any spelling [`View::parse`] takes (clap's derive stays out of
/// the core).
pub fn view_arg(name: &str) -> Result<View, BadValue> {
    View::parse(name).ok_or_else(|| BadValue::View {
        given: name.to_string(),
        names: View::ALL
            .iter()
            .map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// A progress interval: a number of seconds, at least 0.01.
pub fn progress_secs(s: &str) -> Result<Duration, BadValue> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.01 => Ok(Duration::from_secs_f64(v)),
        _ => Err(BadValue::Seconds(s.to_string())),
    }
}

/// A count of 1 or more: an inbox of 0 entries would hold nothing to read.
pub fn at_least_one(s: &str) -> Result<u64, BadValue> {
    match s.parse::<u64>()? {
        0 => Err(BadValue::Zero),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves each parser takes what its flag means and refuses the rest with a reason that names it.
    #[test]
    fn values_are_taken_or_refused_with_a_reason() {
        assert_eq!(at_least_one("3").unwrap(), 3);
        assert_eq!(
            at_least_one("0").unwrap_err().to_string(),
            "must be at least 1"
        );
        assert!(matches!(at_least_one("x"), Err(BadValue::Count(_))));
        assert_eq!(progress_secs("0.5").unwrap(), Duration::from_millis(500));
        for bad in ["0.001", "NaN", "inf", "-1", "s"] {
            assert!(
                progress_secs(bad)
                    .unwrap_err()
                    .to_string()
                    .contains("seconds of at least 0.01"),
                "{bad}"
            );
        }
        assert_eq!(view_arg("timeline").unwrap(), View::Timeline);
        let e = view_arg("tl").unwrap_err().to_string();
        assert!(
            e.starts_with("unknown view \"tl\" (one of: ") && e.contains("timeline"),
            "{e}"
        );
    }
}
