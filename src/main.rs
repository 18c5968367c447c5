//! The `feedlog` command line: clap → config → run. Errors and exit codes
//! live only here.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use feedlog::datadir::DataDir;
use feedlog::http::{self, Api, ApiConfig};
use feedlog::import::{ImportSummary, SnapFormat};
use feedlog::processor::{lag, per_sec, PartitionLag, Processor, ProcessorConfig, Progress};
use feedlog::produce::Producer;
use feedlog::query::{self, QueryError, Reader, StoreSet};
use feedlog::task::StepStats;
use feedlog::UserId;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod bench;
mod demo;
mod kafka_cmd;
mod replay_cmd;

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
    #[command(flatten)]
    kafka: kafka_cmd::KafkaArgs,
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
        /// Inbox entries kept per user (default: as the state was built, else
        /// 800; change it with `backfill`).
        #[arg(long)]
        inbox_cap: Option<u64>,
        /// Do not fsync commits (faster; a power loss may lose recent batches,
        /// which are then processed again).
        #[arg(long)]
        no_sync: bool,
        /// Also serve the HTTP read API on ADDR (`--listen` alone: 127.0.0.1:8080).
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = DEFAULT_LISTEN)]
        listen: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        kafka_run: kafka_cmd::KafkaRunArgs,
    },
    /// Kafka mode: the group's partitions, owners, committed positions and
    /// lag of both topics, as JSON; `"idle": true` when everything is
    /// consumed to its end.
    Status,
    /// Kafka mode: topics from `topics/`.
    Topics {
        #[command(subcommand)]
        action: TopicsAction,
    },
    /// Replay the log of --data into a fresh state directory, beside the
    /// live processor (resumes when NEWDIR holds an unfinished rebuild).
    Rebuild {
        /// The new state directory.
        #[arg(long, value_name = "NEWDIR")]
        into: PathBuf,
        /// Start from this checkpoint's state and replay only the log after
        /// it.
        #[arg(long, value_name = "C")]
        from_checkpoint: Option<PathBuf>,
        /// Inbox entries kept per user (default: as the live state).
        #[arg(long)]
        inbox_cap: Option<u64>,
        /// Do not fsync commits.
        #[arg(long)]
        no_sync: bool,
    },
    /// Write a consistent checkpoint of every partition's state, with its
    /// positions, into a new directory (asks the running processor, if
    /// any).
    Checkpoint {
        /// The new checkpoint directory.
        #[arg(long, value_name = "C")]
        into: PathBuf,
    },
    /// Switch --data (and its running processor and readers) to the
    /// finished rebuild in NEWDIR, without downtime; the old state is kept
    /// until `drop-state`.
    Swap {
        /// The rebuild's directory (on the same file system).
        newdir: PathBuf,
    },
    /// Rebuild the state with a view's new settings beside the live one,
    /// then swap it in (everything keeps serving meanwhile).
    Backfill {
        /// The view: timeline (or inbox) for --inbox-cap; any view after its
        /// code changed.
        #[arg(long)]
        view: String,
        /// Inbox entries kept per user (default: as the live state).
        #[arg(long)]
        inbox_cap: Option<u64>,
        /// Do not fsync the rebuild's commits.
        #[arg(long)]
        no_sync: bool,
    },
    /// Move the stopped data directory's state back to the start of the
    /// log or to a checkpoint; with --kafka, move the stopped group's
    /// positions back. Refuses when the log no longer holds the position.
    Reset {
        /// Back to an empty state: the next run processes the whole log.
        #[arg(
            long,
            conflicts_with = "to_checkpoint",
            required_unless_present = "to_checkpoint"
        )]
        to_start: bool,
        /// Back to this checkpoint's state (with --kafka: a --checkpoints
        /// directory; each partition goes back to its newest checkpoint).
        #[arg(long, value_name = "C")]
        to_checkpoint: Option<PathBuf>,
    },
    /// List the state generations of --data (active and kept).
    States,
    /// Remove an inactive state generation (kept after a swap or reset).
    DropState {
        /// Its name, as `states` lists it.
        name: String,
    },
    /// Digest every view of two data directories at the same log position;
    /// exit 1 naming the first differing view and user, 2 if not comparable.
    Verify {
        /// One data directory.
        a: PathBuf,
        /// The other.
        b: PathBuf,
    },
    /// Serve the HTTP read API, read-only, beside a running processor.
    Serve {
        /// Address to listen on.
        #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
        listen: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Import real network data (SNAP formats) into the `events` log.
    Import {
        /// `snap-edges` (SRC DST: every edge a follow) or `snap-temporal`
        /// (SRC DST UNIXTS: first contact a follow, every line a post by SRC).
        #[arg(value_enum)]
        format: ImportFormat,
        /// The file (gzip is detected).
        file: PathBuf,
        /// Partition count, only when the data directory is new (default 8).
        #[arg(long)]
        partitions: Option<u32>,
        /// snap-edges: time of the first follow, ms since the epoch (default
        /// now); edge N follows at this plus N ms.
        #[arg(long)]
        start_ms: Option<u64>,
    },
    /// The tour: load a real (or generated) network, process it with live
    /// progress, serve the API and show what it answers.
    Demo {
        #[command(flatten)]
        demo: demo::DemoArgs,
        /// Address to serve the API on.
        #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
        listen: String,
        /// Exit after the tour instead of serving until Ctrl-C.
        #[arg(long)]
        exit: bool,
        #[command(flatten)]
        api: ApiArgs,
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
        /// http: server threads, load-generator threads and raw reader threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// http: open connections of the load generator.
        #[arg(long, default_value_t = 16)]
        connections: usize,
        /// http: seconds each side is measured.
        #[arg(long, default_value_t = 20)]
        seconds: u64,
    },
}

const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

#[derive(Subcommand)]
enum TopicsAction {
    /// Creates every missing topic of `topics/` and checks the existing
    /// ones (partitions, retention, cleanup policy, co-partitioning);
    /// exits 1 when one differs (existing topics are never altered).
    Apply {
        /// Partitions of `events` and `effects` when created (default 8).
        #[arg(long)]
        partitions: Option<u32>,
        /// Replication factor of created topics.
        #[arg(long, default_value_t = 1)]
        replication: i32,
    },
}

/// Settings of the HTTP read API.
#[derive(clap::Args, Clone)]
struct ApiArgs {
    /// Largest page (`limit`) a request may ask for.
    #[arg(long, default_value_t = 200)]
    max_limit: usize,
    /// `/readyz` is ready while at most this many records are unapplied.
    #[arg(long, default_value_t = 1000)]
    ready_lag: u64,
}

impl ApiArgs {
    fn config(&self) -> ApiConfig {
        ApiConfig {
            max_limit: self.max_limit,
            ready_lag: self.ready_lag,
            ..ApiConfig::default()
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum ImportFormat {
    /// Directed edge list `SRC DST`.
    SnapEdges,
    /// Temporal edges `SRC DST UNIXTS`.
    SnapTemporal,
}

#[derive(Clone, Copy, ValueEnum)]
enum BenchKind {
    /// Fan-out inbox writes/s through the processor vs raw RocksDB puts.
    Fanout,
    /// Timeline pages/s and latency through the HTTP API (wrk) vs raw
    /// RocksDB seek + 20 reads, on the state in --data.
    Http,
    /// Events/s and deliveries/s through Kafka with one and two processors
    /// vs the embedded log, same workload (--kafka BROKERS, else an
    /// in-process mock broker).
    Kafka,
    /// Rebuild of the state in --data from its log vs raw reads of the log
    /// and raw RocksDB puts of the rebuilt records.
    Rebuild,
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
    let settings = kafka_cmd::Settings::load(&cli.kafka)?;
    match cli.command {
        Command::Produce { partitions, file } => {
            kafka_cmd::embedded_only(&settings, "produce")?;
            produce(&cli.data, partitions, file)
        }
        Command::Status => kafka_cmd::status(&settings),
        Command::Topics {
            action:
                TopicsAction::Apply {
                    partitions,
                    replication,
                },
        } => kafka_cmd::topics_apply(&settings, partitions, replication),
        Command::Rebuild {
            into,
            from_checkpoint,
            inbox_cap,
            no_sync,
        } => {
            kafka_cmd::embedded_only(&settings, "rebuild")?;
            let cfg = ProcessorConfig {
                inbox_cap: inbox_cap_of(&cli.data, inbox_cap)?,
                sync: !no_sync,
                ..ProcessorConfig::default()
            };
            replay_cmd::rebuild(&cli.data, &into, from_checkpoint.as_deref(), cfg)
        }
        Command::Checkpoint { into } => {
            kafka_cmd::embedded_only(&settings, "checkpoint")?;
            replay_cmd::checkpoint(&cli.data, &into)
        }
        Command::Swap { newdir } => {
            kafka_cmd::embedded_only(&settings, "swap")?;
            replay_cmd::swap_to(&cli.data, &newdir)
        }
        Command::Backfill {
            view,
            inbox_cap,
            no_sync,
        } => {
            kafka_cmd::embedded_only(&settings, "backfill")?;
            let cfg = ProcessorConfig {
                inbox_cap: inbox_cap_of(&cli.data, inbox_cap)?,
                sync: !no_sync,
                ..ProcessorConfig::default()
            };
            replay_cmd::backfill(&cli.data, &view, cfg)
        }
        Command::Reset {
            to_start: _,
            to_checkpoint,
        } => {
            if settings.kafka.is_some() {
                return kafka_cmd::reset(&settings, to_checkpoint);
            }
            let to = match to_checkpoint {
                Some(c) => feedlog::swap::ResetTo::Checkpoint(c),
                None => feedlog::swap::ResetTo::Start,
            };
            replay_cmd::reset(&cli.data, to)
        }
        Command::States => replay_cmd::states(&cli.data),
        Command::DropState { name } => replay_cmd::drop_state(&cli.data, &name),
        Command::Verify { a, b } => replay_cmd::verify(&a, &b),
        Command::Run {
            until_idle,
            inbox_cap,
            no_sync,
            listen,
            api,
            kafka_run,
        } => {
            if settings.kafka.is_some() {
                let cfg = ProcessorConfig {
                    inbox_cap: inbox_cap.unwrap_or(800),
                    sync: !no_sync,
                    ..ProcessorConfig::default()
                };
                return kafka_cmd::run(
                    &cli.data, &settings, &kafka_run, cfg, until_idle, listen, &api,
                );
            }
            let mut dir = DataDir::open(&cli.data)?;
            let Some(_lock) = dir.try_lock()? else {
                bail!(
                    "another process is running on {} (it holds {}): one processor per data directory",
                    cli.data.display(),
                    cli.data.join("run.lock").display()
                );
            };
            let inbox_cap = match (inbox_cap, dir.inbox_cap()) {
                (Some(asked), Some(built)) if asked != built => bail!(
                    "the state of {} was built with inbox cap {built}, not {asked}: \
                     `feedlog --data {} backfill --view timeline --inbox-cap {asked}` rebuilds it with {asked} \
                     beside the live one and swaps it in",
                    cli.data.display(),
                    cli.data.display()
                ),
                (asked, built) => asked.or(built).unwrap_or(800),
            };
            if dir.inbox_cap().is_none() {
                dir.set_inbox_cap(inbox_cap)?;
            }
            let cfg = ProcessorConfig {
                inbox_cap,
                sync: !no_sync,
                ..ProcessorConfig::default()
            };
            let processor = Processor::open(&dir, cfg)?;
            let server = match listen {
                Some(addr) => Some(ApiServer::start(
                    &addr,
                    processor.reader(),
                    processor.logs().clone(),
                    Some(processor.progress().clone()),
                    api.config(),
                )?),
                None => None,
            };
            let cancel = cancel_on_ctrl_c();
            let stop = AtomicBool::new(false);
            let result = std::thread::scope(|s| {
                s.spawn(|| feedlog::swap::serve_requests(&dir, &processor, &stop));
                let r = process(&dir, &processor, &cancel, until_idle);
                stop.store(true, Ordering::SeqCst);
                r
            });
            if let Some(s) = server {
                s.stop();
            }
            result?;
            Ok(0)
        }
        Command::Serve { listen, api } => {
            let dir = DataDir::open(&cli.data)?;
            let scratch = tempfile_dir("serve")?;
            let set = Arc::new(StoreSet::new(Processor::open_follower(&dir, &scratch.0)?));
            let reader = Reader::over(set.clone(), None).following();
            let server =
                ApiServer::start(&listen, reader, Arc::new(dir.logs()), None, api.config())?;
            let cancel = cancel_on_ctrl_c();
            let mut generation = dir.state_name().to_string();
            let mut checked = Instant::now();
            while !cancel.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
                if checked.elapsed() < Duration::from_secs(1) {
                    continue;
                }
                checked = Instant::now();
                // Follow a swap: the new generation's stores, all at once.
                let Ok(now) = DataDir::open(&cli.data) else {
                    continue;
                };
                if now.state_name() != generation {
                    match Processor::open_follower(&now, &scratch.0) {
                        Ok(stores) => {
                            set.replace(stores);
                            generation = now.state_name().to_string();
                            eprintln!("now serving state generation {generation}");
                        }
                        Err(e) => eprintln!(
                            "warning: could not open state generation {}: {e}",
                            now.state_name()
                        ),
                    }
                }
            }
            server.stop();
            Ok(0)
        }
        Command::Import {
            format,
            file,
            partitions,
            start_ms,
        } => {
            kafka_cmd::embedded_only(&settings, "import")?;
            import(&cli.data, format, &file, partitions, start_ms)
        }
        Command::Demo {
            demo,
            listen,
            exit,
            api,
        } => {
            kafka_cmd::embedded_only(&settings, "demo")?;
            demo::run(&cli.data, &demo, &listen, exit, api.config())
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
            kind,
            users,
            follows,
            posts,
            partitions,
            threads,
            connections,
            seconds,
        } => {
            match kind {
                BenchKind::Fanout => bench::fanout(users, follows, posts, partitions)?,
                BenchKind::Http => bench::http(&cli.data, threads, connections, seconds)?,
                BenchKind::Rebuild => bench::rebuild(&cli.data)?,
                BenchKind::Kafka => {
                    bench::kafka(settings.kafka.clone(), users, follows, posts, partitions)?
                }
            }
            Ok(0)
        }
    }
}

/// The inbox cap asked for, else the one `data`'s state was built with,
/// else 800.
fn inbox_cap_of(data: &Path, asked: Option<u64>) -> Result<u64> {
    Ok(asked.or(DataDir::open(data)?.inbox_cap()).unwrap_or(800))
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

/// Sets the returned flag on the first Ctrl-C (or SIGTERM): long-running
/// commands finish their current batches and stop cleanly.
fn cancel_on_ctrl_c() -> Arc<AtomicBool> {
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("signal runtime");
        rt.block_on(async {
            #[cfg(unix)]
            {
                let mut term =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                        .expect("SIGTERM handler");
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            #[cfg(not(unix))]
            let _ = tokio::signal::ctrl_c().await;
            eprintln!("stopping: finishing the current batches");
            flag.store(true, Ordering::SeqCst);
        })
    });
    cancel
}

/// A scratch directory removed on drop.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir(what: &str) -> Result<ScratchDir> {
    let p = std::env::temp_dir().join(format!("feedlog-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
    Ok(ScratchDir(p))
}

/// The HTTP read API, served on its own runtime thread.
struct ApiServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    addr: std::net::SocketAddr,
}

/// A bound listener, not serving yet (its address is known).
struct BoundApi {
    rt: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
    addr: std::net::SocketAddr,
}

impl BoundApi {
    fn bind(addr: &str) -> Result<BoundApi> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("feedlog-http")
            .enable_all()
            .build()?;
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(addr))
            .with_context(|| {
                format!("listening on {addr} (is another server using it? pick one with --listen)")
            })?;
        let addr = listener.local_addr()?;
        Ok(BoundApi { rt, listener, addr })
    }

    fn serve(self, api: Arc<Api>) -> Result<ApiServer> {
        let BoundApi { rt, listener, addr } = self;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("feedlog-http".into())
            .spawn(move || {
                rt.block_on(http::serve(listener, api, async {
                    let _ = rx.await;
                }))
            })?;
        eprintln!("serving the read API on http://{addr} (see http://{addr}/openapi.json)");
        Ok(ApiServer {
            stop: Some(tx),
            thread: Some(thread),
            addr,
        })
    }
}

impl ApiServer {
    fn start(
        addr: &str,
        reader: Reader,
        logs: Arc<dyn feedlog::log::Log>,
        progress: Option<Arc<Progress>>,
        cfg: ApiConfig,
    ) -> Result<ApiServer> {
        BoundApi::bind(addr)?.serve(Api::new(reader, logs, progress, cfg))
    }

    fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            match t.join() {
                Ok(Err(e)) => eprintln!("error: the read API stopped: {e}"),
                Err(_) => eprintln!("error: the read API thread panicked"),
                Ok(Ok(())) => {}
            }
        }
    }
}

/// Runs the processor with a live progress line every 2 s (events/s,
/// deliveries/s, lag, ETA) and prints a summary.
fn process(
    dir: &DataDir,
    processor: &Processor,
    cancel: &AtomicBool,
    until_idle: bool,
) -> Result<StepStats> {
    let lag_now = || -> Result<u64> {
        Ok(lag(&**processor.logs(), &processor.reader().stores())?
            .iter()
            .map(PartitionLag::total)
            .sum())
    };
    let backlog: u64 = lag(&**processor.logs(), &processor.reader().stores())?
        .iter()
        .map(|l| l.events_end.saturating_sub(l.events_pos))
        .sum();
    eprintln!(
        "{} partitions; {backlog} events to process",
        dir.partitions()
    );
    let progress = processor.progress().clone();
    let start = Instant::now();
    let totals = every_2s(
        || {
            let t = *progress.totals.lock().expect("poisoned");
            let read = t.events.iter().sum::<u64>() + t.dead_letters;
            let rate = per_sec(read, start);
            let eta = match backlog.saturating_sub(read) {
                0 => "input read; settling internal messages".to_string(),
                left if rate > 0.0 => format!("ETA {:.0}s", left as f64 / rate),
                _ => "ETA ?".to_string(),
            };
            let lag = lag_now().map_or("?".into(), |l| l.to_string());
            eprintln!(
            "{:>6.1}s  events {read}/{backlog} ({rate:.0}/s, {eta})  deliveries {} ({:.0}/s)  lag {lag}  dead letters {}",
            start.elapsed().as_secs_f64(),
            t.delivered,
            per_sec(t.delivered, start),
            t.dead_letters
        );
        },
        || processor.run(cancel, until_idle),
    )?;
    let secs = start.elapsed().as_secs_f64();
    let events: u64 = totals.events.iter().sum();
    println!(
        "processed {events} events (follow {}, unfollow {}, post {}, delete_post {}) and {} effects in {secs:.1}s \
         ({:.0} events/s); {} inbox deliveries ({:.0}/s); {} dead letters",
        totals.events[0], totals.events[1], totals.events[2], totals.events[3], totals.effects,
        events as f64 / secs.max(1e-9), totals.delivered, totals.delivered as f64 / secs.max(1e-9), totals.dead_letters
    );
    Ok(totals)
}

/// Runs `work`, calling `tick` every 2 s on another thread until it ends.
pub(crate) fn every_2s<R: Send>(tick: impl Fn() + Sync, work: impl FnOnce() -> R) -> R {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut last = Instant::now();
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
                if last.elapsed() >= Duration::from_secs(2) {
                    last = Instant::now();
                    tick();
                }
            }
        });
        let r = work();
        done.store(true, Ordering::SeqCst);
        r
    })
}

fn import(
    data: &Path,
    format: ImportFormat,
    file: &Path,
    partitions: Option<u32>,
    start_ms: Option<u64>,
) -> Result<i32> {
    let dir = DataDir::create_or_open(data, partitions)?;
    let mut producer = Producer::new(&dir);
    let format = match format {
        ImportFormat::SnapEdges => SnapFormat::Edges,
        ImportFormat::SnapTemporal => SnapFormat::Temporal,
    };
    let s = import_file(
        &mut producer,
        format,
        file,
        start_ms.unwrap_or_else(feedlog::task::now_ms),
        &mut |_| {},
    )?;
    producer.finish()?;
    println!(
        "imported {}: {} lines, {} comment or blank, {} events into {} partitions, {} lines to the dead-letter log \
         (SNAP ids start at 0, feedlog's at 1: every id was shifted by +1)",
        file.display(), s.lines, s.comments, s.events, dir.partitions(), s.dead_lettered
    );
    Ok(0)
}

/// Imports one file with a progress line (percent of the file, lines/s).
fn import_file(
    producer: &mut Producer,
    format: SnapFormat,
    file: &Path,
    start_ms: u64,
    observe: &mut dyn FnMut(&feedlog::Event),
) -> Result<ImportSummary> {
    let input = feedlog::import::open(file)?;
    let start = Instant::now();
    let mut last = Instant::now();
    let (size, consumed) = (input.size.max(1), input.consumed.clone());
    let name = file.display().to_string();
    let s = feedlog::import::import(
        format,
        input.reader,
        &name,
        start_ms,
        producer,
        observe,
        |s| {
            if last.elapsed() >= Duration::from_secs(1) {
                last = Instant::now();
                let pct = 100.0 * consumed.load(Ordering::Relaxed) as f64 / size as f64;
                eprintln!(
                    "importing {name}: {pct:>5.1}%  {} lines ({:.0}/s)  {} events",
                    s.lines,
                    per_sec(s.lines, start),
                    s.events
                );
            }
        },
    )?;
    Ok(s)
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
