//! `bench failover`: the time from a SIGKILL of one of two Kafka-mode
//! processors to every partition served fresh again by the other, without
//! standbys (the survivor rebuilds the dead one's partitions from the log)
//! and with them, on the log of a processed data directory (the demo's).

use super::redis::logged_events;
use super::{processed_dir, Cleanup};
use crate::cli::say::say;
use anyhow::{bail, Context, Result};
use feedlog::log::kafka::mock::MockBroker;
use feedlog::log::kafka::{apply_topics, produce_events, KafkaConfig, PartitionState};
use feedlog::ops::status::{status, Status};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Events per partition produced to the mock broker: what fits in its
/// 5 MB per partition, with the effects they cause, compressed.
const MOCK_EVENTS_PER_PARTITION: usize = 100_000;

/// How long one phase may take before the bench gives up.
const PHASE_LIMIT: Duration = Duration::from_secs(1800);

/// One failover: what it measured.
struct Failover {
    /// Processing the whole log with both processors (informative).
    load_secs: f64,
    /// From the kill until the survivor claims the first of the dead
    /// processor's partitions (the session timeout and the rebalance).
    claimed_secs: f64,
    /// From the kill until every partition is served by the survivor and
    /// consumed to the end of both topics.
    served_secs: f64,
}

/// Runs the failover without and with standbys on the events of the
/// processed directory `data`; `base`: brokers, else an in-process mock.
pub fn failover(base: Option<KafkaConfig>, data: &Path, session_timeout_ms: u64) -> Result<()> {
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
            // The mock broker keeps 5 MB of record batches per partition
            // and drops the oldest past it (a replay from the start needs
            // them): compressed, the demo's log fits.
            let mut c = KafkaConfig::new(&m.bootstrap(), "");
            c.client = vec![("compression.type".into(), "zstd".into())];
            c
        }
        (None, None) => bail!("neither brokers nor a mock broker"),
    };
    let tag = format!("bench-failover-{}", std::process::id());
    let mut shared = base.clone();
    shared.topic_prefix = format!("{tag}-");
    shared.group = format!("{tag}-load");
    make_topics(mock.as_ref(), &shared, partitions)?;
    let start = Instant::now();
    produce_events(&shared, &events, partitions)?;
    say!(
        "workload: {} events of {} ({partitions} partitions), produced in {:.1}s; session timeout {session_timeout_ms} ms",
        events.len(),
        data.display(),
        start.elapsed().as_secs_f64()
    );
    let tmp = std::env::temp_dir().join(&tag);
    let _cleanup = Cleanup(tmp.clone());
    // The processors' logs are kept, to look at what a failover did.
    let logs = std::env::temp_dir().join(format!("{tag}-logs"));
    let mut rows = Vec::new();
    for standbys in [0usize, 1] {
        let mut cfg = base.clone();
        cfg.events_topic = Some(shared.name(feedlog::log::Topic::Events).to_string());
        cfg.topic_prefix = format!("{tag}-s{standbys}-");
        cfg.group = format!("{tag}-s{standbys}");
        make_topics(mock.as_ref(), &cfg, partitions)?;
        let dirs = Dirs {
            data: tmp.join(format!("s{standbys}")),
            logs: logs.join(format!("s{standbys}")),
        };
        let f = one(&cfg, &dirs, standbys, session_timeout_ms)?;
        println!(
            "{:<22} load {:>6.1}s   kill → first partition claimed {:>5.2}s   kill → every partition served fresh {:>6.2}s",
            match standbys {
                0 => "without standbys",
                _ => "with --standbys 1",
            },
            f.load_secs,
            f.claimed_secs,
            f.served_secs
        );
        rows.push(f);
    }
    println!(
        "failover with standbys: {:.2}s against {:.2}s without ({:.1}x faster); the session timeout is {:.1}s of it",
        rows[1].served_secs,
        rows[0].served_secs,
        rows[0].served_secs / rows[1].served_secs,
        session_timeout_ms as f64 / 1000.0
    );
    say!("the processors' logs: {}", logs.display());
    Ok(())
}

/// Creates `cfg`'s topics: on the mock directly (it has no admin API; an
/// `events` topic named by `events_topic` exists already), else as `topics
/// apply` does.
fn make_topics(mock: Option<&MockBroker>, cfg: &KafkaConfig, partitions: u32) -> Result<()> {
    match mock {
        Some(m) => {
            let mut own = cfg.clone();
            own.events_topic = None;
            m.create_topics(&own, partitions)?
        }
        None => {
            apply_topics(cfg, partitions, 1)?;
        }
    }
    Ok(())
}

/// Where one failover's processors keep their data and their logs.
struct Dirs {
    data: std::path::PathBuf,
    logs: std::path::PathBuf,
}

/// Two processors on `cfg`; kills the first once the group is idle (and,
/// with standbys, once every standby is at the committed positions).
fn one(cfg: &KafkaConfig, dirs: &Dirs, standbys: usize, session_ms: u64) -> Result<Failover> {
    let exe = std::env::current_exe().context("finding this executable")?;
    let spawn = |i: usize| -> Result<Child> {
        let data = dirs.data.join(format!("p{i}"));
        std::fs::create_dir_all(&dirs.logs)?;
        let log = std::fs::File::create(dirs.logs.join(format!("p{i}.log")))?;
        let mut c = Command::new(&exe);
        c.arg("--data").arg(&data);
        c.args(["--kafka", &cfg.brokers, "--group", &cfg.group]);
        c.args(["--topic-prefix", &cfg.topic_prefix]);
        if let Some(e) = &cfg.events_topic {
            c.args(["--events-topic", e]);
        }
        for (k, v) in &cfg.client {
            c.args(["--kafka-option", &format!("{k}={v}")]);
        }
        c.args(["run", "--no-sync", "--member", &format!("p{i}")]);
        c.args(["--session-timeout-ms", &session_ms.to_string()]);
        c.args(["--standbys", &standbys.to_string()]);
        // The survivor keeps its own partitions through the rebalance.
        c.arg("--cooperative");
        c.stdout(Stdio::null()).stderr(log);
        c.spawn().context("starting a processor")
    };
    let mut procs = Kill {
        children: vec![spawn(0)?, spawn(1)?],
        logs: dirs.logs.clone(),
        killed: false,
    };
    let start = Instant::now();
    wait(cfg, "the log processed", &mut procs, |s| {
        s.idle
            && s.partitions
                .iter()
                .any(|p| p.owner.as_deref() == Some("p0"))
            && s.partitions
                .iter()
                .any(|p| p.owner.as_deref() == Some("p1"))
    })?;
    let load_secs = start.elapsed().as_secs_f64();
    if standbys > 0 {
        wait(
            cfg,
            "every standby at the committed positions",
            &mut procs,
            |s| {
                s.idle
                    && (s.partitions.iter()).all(|p| {
                        p.standbys.len() == standbys && p.standbys.iter().all(|s| s.behind == 0)
                    })
            },
        )?;
    }
    let dead: Vec<_> = (status(cfg)?.partitions.into_iter())
        .filter(|p| p.owner.as_deref() == Some("p0"))
        .map(|p| p.partition)
        .collect();
    procs.killed = true;
    procs.children[0].kill()?;
    let killed = Instant::now();
    procs.children[0].wait()?;
    let mut claimed_secs = None;
    wait(
        cfg,
        "every partition served by the survivor",
        &mut procs,
        |s| {
            let by_p1 =
                |p: &&feedlog::ops::status::PartitionStatus| p.owner.as_deref() == Some("p1");
            if claimed_secs.is_none()
                && s.partitions
                    .iter()
                    .filter(by_p1)
                    .any(|p| dead.contains(&p.partition))
            {
                claimed_secs = Some(killed.elapsed().as_secs_f64());
            }
            s.idle
                && s.partitions
                    .iter()
                    .all(|p| by_p1(&p) && p.state == Some(PartitionState::Serving))
        },
    )?;
    let served_secs = killed.elapsed().as_secs_f64();
    Ok(Failover {
        load_secs,
        claimed_secs: claimed_secs.unwrap_or(served_secs),
        served_secs,
    })
}

/// Polls the group's status every 50 ms until `done` says so; fails when a
/// processor not killed on purpose has stopped.
fn wait(
    cfg: &KafkaConfig,
    what: &str,
    procs: &mut Kill,
    mut done: impl FnMut(&Status) -> bool,
) -> Result<()> {
    let start = Instant::now();
    loop {
        procs.running()?;
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

/// The processors, killed when the bench ends however it ends, and where
/// their logs are.
struct Kill {
    children: Vec<Child>,
    logs: std::path::PathBuf,
    /// Whether the first was killed on purpose.
    killed: bool,
}

impl Kill {
    /// Fails, naming its log, when a processor not yet killed has exited.
    fn running(&mut self) -> Result<()> {
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Some(status) = c.try_wait()? {
                if !(i == 0 && self.killed) {
                    let log = std::fs::read_to_string(self.logs.join(format!("p{i}.log")))
                        .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(3).collect();
                    bail!("processor p{i} exited ({status}); its last lines: {tail:?}");
                }
            }
        }
        Ok(())
    }
}

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
