//! The benches' status lines on stderr (their figures go to stdout).

/// `say!("...", args)`: one status line on stderr.
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!($($arg)*)
    };
}
pub(crate) use say;
