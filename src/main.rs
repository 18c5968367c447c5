//! `feedlog`: a thin binary over the library. It sets up logging, parses
//! the command line, dispatches to the command's family in [`cli`], and
//! turns the outcome into an exit code: 0, the command's own code, or the
//! error and its causes on stderr with 75 when the error passes (run the
//! command again later: a full disk, a broker away, a lock another process
//! holds) and 1 when it needs an operator. `anyhow` lives only here.

mod cli;

use clap::{CommandFactory, Parser};

/// mimalloc keeps freed memory for reuse where glibc's malloc trims it and
/// faults it in again (see Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // The --config file's settings become the variables the environment
    // leaves unset; then clap reads flags, then variables.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Err(e) = cli::config::file_into_env(&cli::args::Cli::command(), &argv) {
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
    let cli = cli::args::Cli::parse_from(argv);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "feedlog=info".into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    cli::say::set_json(matches!(cli.log_format, cli::args::LogFormat::Json));
    match cli.log_format {
        cli::args::LogFormat::Json => logs.json().init(),
        cli::args::LogFormat::Text => {
            use std::io::IsTerminal;
            logs.with_ansi(std::io::stderr().is_terminal()).init()
        }
    }
    quiet_on_closed_stdout();
    match cli::dispatch(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            cli::say::error(error_text(&e));
            std::process::exit(exit_code(&e));
        }
    }
}

/// A reader that stops reading what a command prints (`feedlog demo |
/// head`) ends the command quietly with exit 0, as it ends `head`'s
/// other writers, instead of a panic's backtrace: every print to stdout
/// that meets the closed pipe ends here.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if text.starts_with("failed printing to stdout") && text.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info)
    }));
}

/// The exit code of a command that failed with `e` (docs/cli.md, "Exit
/// codes"): 2 for the command line's own mistakes, 75 for a lock another
/// process holds, else what the library's error answers.
fn exit_code(e: &anyhow::Error) -> i32 {
    for cause in e.chain() {
        if cause.is::<cli::Usage>() {
            return 2;
        }
        if cause.is::<cli::Busy>() {
            return feedlog::core::Disposition::Retry.exit_code();
        }
    }
    disposition(e).exit_code()
}

/// What the first of the library's errors in `e`'s chain answers; an error
/// of the command line itself needs its user.
fn disposition(e: &anyhow::Error) -> feedlog::core::Disposition {
    macro_rules! first_of {
        ($cause:ident: $($t:ty),+) => {
            $(if let Some(known) = $cause.downcast_ref::<$t>() {
                return known.disposition();
            })+
        };
    }
    for cause in e.chain() {
        first_of!(cause:
            feedlog::task::embedded::ProcessorError,
            feedlog::task::kafka::ClusterError,
            feedlog::ops::rebuild::ReplayError,
            feedlog::ops::requests::Refusal,
            feedlog::ingest::produce::ProduceError,
            feedlog::ingest::import::ImportError,
            feedlog::task::TaskError,
            feedlog::log::LogError,
            feedlog::state::StoreError,
            feedlog::state::datadir::DataDirError,
            feedlog::api::query::QueryError,
            feedlog::api::http::client::ClientError
        );
    }
    feedlog::core::Disposition::Stop
}

/// The error and its causes on one line, each cause once (most of the
/// library's errors already name their source), with a hint for a full
/// disk.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if !text.contains(&c) {
            if !text.is_empty() {
                text += ": ";
            }
            text += &c;
        }
    }
    if text.contains("No space left on device") || text.contains("os error 28") {
        text +=
            "\nthe disk is full: free space and run the command again (committed work is kept; \
                 what was not committed is done again)";
    }
    text
}
