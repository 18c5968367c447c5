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
    let events: Vec<_> = logged_events(&dir)?.into_iter().flatten().collect();
    let partitions = dir.partitions();
    drop(dir);
    let mock = match &base {
        Some(_) => None,
        None => Some(MockBroker::start()?),
    };
    let base = match (base, &mock) {
        (Some(b), _) => b,
        (None, Some(m)) => KafkaConfig::new(&m.bootstrap(), ""),
        (None, None) => bail!("neither brokers nor a mock broker"),
    };
    let tag = format!("bench-failover-{}", std::process::id());
    let mut shared = base.clone();
    shared.topic_prefix = format!("{tag}-");
    shared.group = format!("{tag}-load");
    apply_topics(&shared, partitions, 1)?;
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
    let mut rows = Vec::new();
    for standbys in [0usize, 1] {
        let mut cfg = base.clone();
        cfg.events_topic = Some(shared.name(feedlog::log::Topic::Events).to_string());
        cfg.topic_prefix = format!("{tag}-s{standbys}-");
        cfg.group = format!("{tag}-s{standbys}");
        apply_topics(&cfg, partitions, 1)?;
        let f = one(
            &cfg,
            &tmp.join(format!("s{standbys}")),
            standbys,
            session_timeout_ms,
        )?;
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
    Ok(())
}

/// Two processors on `cfg`; kills the first once the group is idle (and,
/// with standbys, once every standby is at the committed positions).
fn one(cfg: &KafkaConfig, tmp: &Path, standbys: usize, session_ms: u64) -> Result<Failover> {
    let exe = std::env::current_exe().context("finding this executable")?;
    let spawn = |i: usize| -> Result<Child> {
        let data = tmp.join(format!("p{i}"));
        std::fs::create_dir_all(tmp)?;
        let log = std::fs::File::create(tmp.join(format!("p{i}.log")))?;
        let mut c = Command::new(&exe);
        c.arg("--data").arg(&data);
        c.args(["--kafka", &cfg.brokers, "--group", &cfg.group]);
        c.args(["--topic-prefix", &cfg.topic_prefix]);
        if let Some(e) = &cfg.events_topic {
            c.args(["--events-topic", e]);
        }
        c.args(["run", "--no-sync", "--member", &format!("p{i}")]);
        c.args(["--session-timeout-ms", &session_ms.to_string()]);
        c.args(["--standbys", &standbys.to_string()]);
        c.stdout(Stdio::null()).stderr(log);
        c.spawn().context("starting a processor")
    };
    let mut procs = Kill(vec![spawn(0)?, spawn(1)?]);
    let start = Instant::now();
    wait(cfg, "the log processed", |s| {
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
        wait(cfg, "every standby at the committed positions", |s| {
            s.idle
                && (s.partitions.iter()).all(|p| {
                    p.standbys.len() == standbys && p.standbys.iter().all(|s| s.behind == 0)
                })
        })?;
    }
    let dead: Vec<_> = (status(cfg)?.partitions.into_iter())
        .filter(|p| p.owner.as_deref() == Some("p0"))
        .map(|p| p.partition)
        .collect();
    procs.0[0].kill()?;
    let killed = Instant::now();
    procs.0[0].wait()?;
    let mut claimed_secs = None;
    wait(cfg, "every partition served by the survivor", |s| {
        let by_p1 = |p: &&feedlog::ops::status::PartitionStatus| p.owner.as_deref() == Some("p1");
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
    })?;
    let served_secs = killed.elapsed().as_secs_f64();
    Ok(Failover {
        load_secs,
        claimed_secs: claimed_secs.unwrap_or(served_secs),
        served_secs,
    })
}

/// Polls the group's status every 50 ms until `done` says so.
fn wait(cfg: &KafkaConfig, what: &str, mut done: impl FnMut(&Status) -> bool) -> Result<()> {
    let start = Instant::now();
    loop {
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

/// The processors, killed when the bench ends however it ends.
struct Kill(Vec<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
