//! The `feedlog` command line: clap → config → run. Errors and exit codes
//! live only here.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use feedlog::datadir::DataDir;
use feedlog::processor::{per_sec, Processor, ProcessorConfig, Progress};
use feedlog::produce::Producer;
use feedlog::query::{self, QueryError, Reader};
use feedlog::UserId;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod bench;

#[derive(Parser)]
#[command(
    name = "feedlog",
    version,
    about = "Turns a log of follows and posts into exact social-feed views"
)]
struct Cli {
    /// Data directory (logs and state).
    #[arg(
        long,
        global = true,
        env = "FEEDLOG_DATA",
        default_value = "feedlog-data"
    )]
    data: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Append JSON-lines events to the `events` log (FILE, or `-` for stdin).
    Produce {
        /// Partition count, only when the data directory is new (default 8).
        #[arg(long)]
        partitions: Option<u32>,
        /// Input file; `-` or absent reads stdin.
        file: Option<PathBuf>,
    },
    /// Process the logs into the views.
    Run {
        /// Exit 0 once every log is consumed and nothing is in flight.
        #[arg(long)]
        until_idle: bool,
        /// Inbox entries kept per user.
        #[arg(long, default_value_t = 800)]
        inbox_cap: u64,
        /// Do not fsync commits (faster; a power loss may lose recent batches,
        /// which are then processed again).
        #[arg(long)]
        no_sync: bool,
    },
    /// Read a view: `query VIEW USER`, or `query -` for JSON queries on stdin.
    Query {
        /// timeline, posts, counters, recent-followers, followers, followees; or `-`.
        view: String,
        /// The user id.
        user: Option<u64>,
        /// Page size (recent-followers: K).
        #[arg(long)]
        limit: Option<usize>,
        /// Cursor from a previous page's `next_cursor`.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Measure throughput against a raw RocksDB baseline in the same run.
    Bench {
        /// What to measure.
        #[arg(value_enum, default_value_t = BenchKind::Fanout)]
        kind: BenchKind,
        /// Users in the generated network.
        #[arg(long, default_value_t = 20_000)]
        users: u64,
        /// Follows per user (power-law choice of followees).
        #[arg(long, default_value_t = 20)]
        follows: u64,
        /// Posts to fan out.
        #[arg(long, default_value_t = 2_000)]
        posts: u64,
        /// Partitions.
        #[arg(long, default_value_t = 8)]
        partitions: u32,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum BenchKind {
    /// Fan-out inbox writes/s through the processor vs raw RocksDB puts.
    Fanout,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "feedlog=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}

fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Produce { partitions, file } => produce(&cli.data, partitions, file),
        Command::Run {
            until_idle,
            inbox_cap,
            no_sync,
        } => {
            let cfg = ProcessorConfig {
                inbox_cap,
                sync: !no_sync,
                ..ProcessorConfig::default()
            };
            process(&cli.data, until_idle, cfg)
        }
        Command::Query {
            view,
            user,
            limit,
            cursor,
        } => {
            let dir = DataDir::open(&cli.data)?;
            let reader = Processor::open_reader(&dir)?;
            if view == "-" {
                return query_stdin(&reader);
            }
            let user = user.context("query needs a USER (or `-` to read queries from stdin)")?;
            match answer(&reader, &view, user, limit, cursor.as_deref()) {
                Ok(json) => {
                    println!("{json}");
                    Ok(0)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Ok(2)
                }
            }
        }
        Command::Bench {
            kind: BenchKind::Fanout,
            users,
            follows,
            posts,
            partitions,
        } => {
            bench::fanout(users, follows, posts, partitions)?;
            Ok(0)
        }
    }
}

fn produce(data: &Path, partitions: Option<u32>, file: Option<PathBuf>) -> Result<i32> {
    let dir = DataDir::create_or_open(data, partitions)?;
    let mut producer = Producer::new(&dir);
    match file.filter(|f| f.as_os_str() != "-") {
        Some(path) => {
            let f = std::fs::File::open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            producer.json_lines(std::io::BufReader::new(f), &path.display().to_string())?;
        }
        None => producer.json_lines(std::io::stdin().lock(), "stdin")?,
    }
    let s = producer.finish()?;
    println!(
        "accepted {} events into {} partitions; {} records went to the dead-letter log",
        s.accepted,
        dir.partitions(),
        s.dead_lettered
    );
    Ok(0)
}

fn process(data: &Path, until_idle: bool, cfg: ProcessorConfig) -> Result<i32> {
    let dir = DataDir::open(data)?;
    let processor = Processor::open(&dir, cfg)?;
    let cancel = Arc::new(AtomicBool::new(false));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            rt.block_on(async {
                let _ = tokio::signal::ctrl_c().await;
                eprintln!("stopping: finishing the current batches");
                cancel.store(true, Ordering::SeqCst);
            })
        });
    }
    // The backlog of input events at start, for the progress display's ETA.
    let mut backlog = 0u64;
    for p in 0..dir.partitions() {
        let end = processor
            .logs()
            .end_offset(feedlog::log::Topic::Events, p)?;
        let pos = processor
            .store(p)
            .meta_u64(feedlog::state::meta::POS_EVENTS)?;
        backlog += end.saturating_sub(pos);
    }
    eprintln!(
        "{} partitions; {backlog} events to process",
        dir.partitions()
    );
    let progress = Progress::default();
    let start = Instant::now();
    let done = AtomicBool::new(false);
    let totals = std::thread::scope(|s| {
        s.spawn(|| {
            let mut last = Instant::now();
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
                if last.elapsed() >= Duration::from_secs(2) {
                    last = Instant::now();
                    let t = *progress.totals.lock().expect("poisoned");
                    let read = t.events.iter().sum::<u64>() + t.dead_letters;
                    let rate = per_sec(read, start);
                    let eta = match backlog.saturating_sub(read) {
                        0 => "input read; settling internal messages".to_string(),
                        left if rate > 0.0 => format!("ETA {:.0}s", left as f64 / rate),
                        _ => "ETA ?".to_string(),
                    };
                    eprintln!(
                        "{:>6.1}s  events {read}/{backlog} ({rate:.0}/s, {eta})  deliveries {} ({:.0}/s)  effects {}  dead letters {}",
                        start.elapsed().as_secs_f64(),
                        t.delivered,
                        per_sec(t.delivered, start),
                        t.effects,
                        t.dead_letters
                    );
                }
            }
        });
        let r = processor.run(&cancel, until_idle, &progress);
        done.store(true, Ordering::SeqCst);
        r
    })?;
    let secs = start.elapsed().as_secs_f64();
    let events: u64 = totals.events.iter().sum();
    println!(
        "processed {events} events (follow {}, unfollow {}, post {}, delete_post {}) and {} effects in {secs:.1}s; \
         {} inbox deliveries; {} dead letters",
        totals.events[0], totals.events[1], totals.events[2], totals.events[3], totals.effects, totals.delivered, totals.dead_letters
    );
    Ok(0)
}

/// Answers one query as a JSON string.
fn answer(
    reader: &Reader,
    view: &str,
    user: u64,
    limit: Option<usize>,
    cursor: Option<&str>,
) -> Result<String, QueryError> {
    let u = UserId(user);
    let page = limit.unwrap_or(query::DEFAULT_LIMIT);
    let json = match view {
        "timeline" => serde_json::to_string(&reader.timeline(u, page, cursor)?),
        "posts" => serde_json::to_string(&reader.posts(u, page, cursor)?),
        "counters" => serde_json::to_string(&reader.counters(u)?),
        "recent-followers" | "recent_followers" => serde_json::to_string(
            &reader.recent_followers(u, limit.unwrap_or(query::DEFAULT_RECENT))?,
        ),
        "followers" => serde_json::to_string(&reader.followers(u, page, cursor)?),
        "followees" => serde_json::to_string(&reader.followees(u, page, cursor)?),
        other => return Err(QueryError::BadView(other.to_string())),
    };
    Ok(json.expect("plain structs serialize"))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonQuery {
    view: String,
    user: u64,
    limit: Option<usize>,
    cursor: Option<String>,
}

fn query_stdin(reader: &Reader) -> Result<i32> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading queries from stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let result = match serde_json::from_str::<JsonQuery>(&line) {
            Ok(q) => answer(reader, &q.view, q.user, q.limit, q.cursor.as_deref())
                .map_err(|e| (e.code(), e.to_string())),
            Err(e) => Err(("bad_query", format!("invalid query: {e}"))),
        };
        match result {
            Ok(json) => writeln!(out, "{json}")?,
            Err((code, message)) => writeln!(
                out,
                "{}",
                serde_json::json!({"error": {"code": code, "message": message}})
            )?,
        }
    }
    out.flush()?;
    Ok(0)
}
