//! What the Kafka-mode process benches (`failover`, `kafka-swap`) share:
//! the demo log's events produced to a broker (an in-process mock unless
//! `--kafka` names brokers), processors started as child processes of the
//! `feedlog` binary beside this one, and a wait on the group's status.

use crate::common::processed_dir;
use crate::redis::logged_events;
use crate::say::say;
use anyhow::{bail, Context, Result};
use feedlog::core::event::Event;
use feedlog::core::Generation;
use feedlog::log::kafka::mock::MockBroker;
use feedlog::log::kafka::{apply_topics, produce_events, KafkaConfig};
use feedlog::ops::status::{status, Status};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Events per partition produced to the mock broker: what fits in its
/// 5 MB per partition, with the effects they cause, compressed.
const MOCK_EVENTS_PER_PARTITION: usize = 100_000;

/// How long one phase may take before a bench gives up.
const PHASE_LIMIT: Duration = Duration::from_secs(1800);

/// The log of a processed data directory, produced to a broker.
pub(super) struct Workload {
    /// The in-process broker, when no brokers were given; stops when dropped.
    pub mock: Option<MockBroker>,
    /// The brokers and client settings every deployment of the bench uses.
    pub base: KafkaConfig,
    /// The deployment whose `events` topic holds the produced log.
    pub shared: KafkaConfig,
    /// What names this run's groups, topics and directories.
    pub tag: String,
    pub partitions: u32,
    /// The events produced.
    pub events: Vec<Event>,
}

/// Produces the events of the processed directory `data` to `base`'s
/// brokers, else to an in-process mock broker (the first
/// [`MOCK_EVENTS_PER_PARTITION`] of each partition: it keeps 5 MB per
/// partition); `bench` names the run.
pub(super) fn workload(base: Option<KafkaConfig>, data: &Path, bench: &str) -> Result<Workload> {
    let dir = processed_dir(data)?;
    let partitions = dir.partitions();
    let mut logged = logged_events(&dir)?;
    drop(dir);
    if base.is_none() {
        // The mock broker keeps 5 MB of record batches per partition and
        // drops the oldest past it, which a replay from the start needs.
        for p in &mut logged {
            p.truncate(MOCK_EVENTS_PER_PARTITION);
        }
        say!(
            "the mock broker keeps 5 MB per partition: the first {MOCK_EVENTS_PER_PARTITION} events of \
             each partition of the log, compressed (give --kafka BROKERS for all of it)"
        );
    }
    let events: Vec<_> = logged.into_iter().flatten().collect();
    let mock = match &base {
        Some(_) => None,
        None => Some(MockBroker::start()?),
    };
    let base = match (base, &mock) {
        (Some(b), _) => b,
        (None, Some(m)) => {
            let mut c = KafkaConfig::new(&m.bootstrap(), "");
            c.client = vec![("compression.type".into(), "zstd".into())];
            c
        }
        (None, None) => bail!("neither brokers nor a mock broker"),
    };
    let tag = format!("bench-{bench}-{}", std::process::id());
    let mut shared = base.clone();
    // Its own `events` topic, never a configured input topic.
    shared.events_topic = None;
    shared.topic_prefix = format!("{tag}-");
    shared.group = format!("{tag}-load");
    make_topics(mock.as_ref(), &shared, partitions)?;
    let start = Instant::now();
    produce_events(&shared, &events, partitions)?;
    say!(
        "workload: {} events of {} ({partitions} partitions), produced in {:.1}s",
        events.len(),
        data.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(Workload {
        mock,
        base,
        shared,
        tag,
        partitions,
        events,
    })
}

impl Workload {
    /// A deployment named `name` that reads the produced `events` topic,
    /// its topics made.
    pub fn deployment(&self, name: &str) -> Result<KafkaConfig> {
        let mut cfg = self.base.clone();
        cfg.events_topic = Some(self.shared.name(feedlog::log::Topic::Events));
        cfg.topic_prefix = format!("{}-{name}-", self.tag);
        cfg.group = format!("{}-{name}", self.tag);
        self.make_topics(&cfg)?;
        Ok(cfg)
    }

    /// A deployment named `name` with an `events` topic of its own, left
    /// empty: a baseline with no state to recover.
    pub fn empty_deployment(&self, name: &str) -> Result<KafkaConfig> {
        let mut cfg = self.base.clone();
        cfg.events_topic = None;
        cfg.topic_prefix = format!("{}-{name}-", self.tag);
        cfg.group = format!("{}-{name}", self.tag);
        self.make_topics(&cfg)?;
        Ok(cfg)
    }

    /// Creates `cfg`'s topics (not its `events` when it names an existing one).
    pub fn make_topics(&self, cfg: &KafkaConfig) -> Result<()> {
        make_topics(self.mock.as_ref(), cfg, self.partitions)
    }
}

/// Creates `cfg`'s topics: on the mock directly (it has no admin API), else
/// as `topics apply` does.
fn make_topics(mock: Option<&MockBroker>, cfg: &KafkaConfig, partitions: u32) -> Result<()> {
    match mock {
        Some(m) => m.create_topics(cfg, partitions)?,
        None => {
            apply_topics(cfg, partitions, 1)?;
        }
    }
    Ok(())
}

/// The `feedlog` binary in this executable's directory (Cargo builds both
/// into the same one).
fn feedlog_exe() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("finding this executable")?;
    let feedlog = exe.with_file_name(format!("feedlog{}", std::env::consts::EXE_SUFFIX));
    if !feedlog.is_file() {
        bail!(
            "no feedlog binary beside {} to run the processors (build both: \
             cargo build --release -p feedlog -p feedlog-bench)",
            exe.display()
        );
    }
    Ok(feedlog)
}

/// `feedlog` with `cfg`'s connection flags, then `args`.
pub(super) fn feedlog(cfg: &KafkaConfig, args: &[&str]) -> Result<Command> {
    let mut c = Command::new(feedlog_exe()?);
    c.args(["--kafka", &cfg.brokers, "--group", &cfg.group]);
    c.args(["--topic-prefix", &cfg.topic_prefix]);
    if let Some(e) = &cfg.events_topic {
        c.args(["--events-topic", e]);
    }
    for (k, v) in &cfg.client {
        c.args(["--kafka-option", &format!("{k}={v}")]);
    }
    c.args(args);
    Ok(c)
}

/// Processors run by a bench: stopped when the bench ends however it ends;
/// each logs to `LOGS/NAME.log`.
pub(super) struct Procs {
    children: Vec<(String, Child)>,
    logs: PathBuf,
    /// The processors stopped on purpose.
    killed: Vec<String>,
}

impl Procs {
    pub fn new(logs: PathBuf) -> Procs {
        Procs {
            children: Vec::new(),
            logs,
            killed: Vec::new(),
        }
    }

    /// Starts `feedlog --data DATA [--generation G] run --no-sync --member
    /// NAME ARGS` for `cfg`.
    pub fn run(
        &mut self,
        cfg: &KafkaConfig,
        data: &Path,
        generation: Generation,
        name: &str,
        args: &[&str],
    ) -> Result<()> {
        std::fs::create_dir_all(&self.logs)?;
        let log = std::fs::File::create(self.logs.join(format!("{name}.log")))?;
        let mut c = feedlog(cfg, &[])?;
        c.arg("--data").arg(data);
        c.args(["--generation", &generation.to_string()]);
        c.args(["run", "--no-sync", "--member", name]);
        c.args(args);
        c.stdout(Stdio::null()).stderr(log);
        let child = c.spawn().context("starting a processor")?;
        self.children.push((name.to_string(), child));
        Ok(())
    }

    /// SIGKILLs processor `name` and waits for it.
    pub fn kill(&mut self, name: &str) -> Result<()> {
        self.killed.push(name.to_string());
        for (n, c) in &mut self.children {
            if n == name {
                c.kill()?;
                c.wait()?;
            }
        }
        Ok(())
    }

    /// Fails, with its last lines, when a processor not killed on purpose
    /// has exited.
    fn running(&mut self) -> Result<()> {
        for (name, c) in &mut self.children {
            if let Some(status) = c.try_wait()? {
                if !self.killed.contains(name) {
                    let log = std::fs::read_to_string(self.logs.join(format!("{name}.log")))
                        .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(3).collect();
                    bail!("processor {name} exited ({status}); its last lines: {tail:?}");
                }
            }
        }
        Ok(())
    }

    /// Polls `cfg`'s status every 50 ms until `done` says so; fails when a
    /// processor not killed on purpose has stopped.
    pub fn wait(
        &mut self,
        cfg: &KafkaConfig,
        what: &str,
        mut done: impl FnMut(&Status) -> bool,
    ) -> Result<()> {
        let start = Instant::now();
        loop {
            self.running()?;
            match status(cfg) {
                Ok(s) if done(&s) => return Ok(()),
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "reading the group's status"),
            }
            if start.elapsed() > PHASE_LIMIT {
                bail!("waited {PHASE_LIMIT:?} for {what}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A free loopback address.
pub(super) fn free_addr() -> Result<std::net::SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}
