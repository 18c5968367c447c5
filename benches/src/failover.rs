//! `feedlog-bench failover`: the time from a SIGKILL of one of two Kafka-mode
//! processors to every partition served fresh again by the other, without
//! standbys (the survivor rebuilds the dead one's partitions from the log)
//! and with them, on the log of a processed data directory (the demo's);
//! the baseline is the same failover on an empty log, the group
//! coordinator's share alone.

use crate::common::Cleanup;
use crate::procs::{free_addr, workload, Procs};
use crate::say::say;
use anyhow::{anyhow, bail, Result};
use feedlog::api::http::client;
use feedlog::core::event::UserId;
use feedlog::core::partition::partition_for;
use feedlog::core::Generation;
use feedlog::log::kafka::{KafkaConfig, PartitionState};
use feedlog::ops::status::status;
use std::path::Path;
use std::time::Instant;

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
    /// From the kill until a reader of each of the dead processor's
    /// partitions is answered (200) through the survivor's API.
    answered_secs: f64,
}

/// Runs the failover on an empty log (the baseline), then without and with standbys on the events of the
/// processed directory `data`; `base`: brokers, else an in-process mock.
pub fn failover(base: Option<KafkaConfig>, data: &Path, session_timeout_ms: u64) -> Result<()> {
    let w = workload(base, data, "failover")?;
    say!("session timeout {session_timeout_ms} ms");
    let tag = &w.tag;
    let tmp = std::env::temp_dir().join(tag);
    let _cleanup = Cleanup(tmp.clone());
    // The processors' logs are kept, to look at what a failover did.
    let logs = std::env::temp_dir().join(format!("{tag}-logs"));
    // The baseline: the same processors on an empty log, where a failover
    // is the group coordinator's alone (nothing to replay, nothing to open
    // but empty stores).
    let mut rows = Vec::new();
    for (name, standbys) in [("empty", 0usize), ("s0", 0), ("s1", 1)] {
        let cfg = match name {
            "empty" => w.empty_deployment(name)?,
            _ => w.deployment(name)?,
        };
        let dirs = Dirs {
            data: tmp.join(name),
            logs: logs.join(name),
        };
        let f = one(&cfg, &dirs, standbys, session_timeout_ms)?;
        println!(
            "{:<22} load {:>6.1}s   kill → readers answered {:>5.2}s   first partition claimed {:>5.2}s   every partition served fresh {:>6.2}s",
            match (name, standbys) {
                ("empty", _) => "empty log (baseline)",
                (_, 0) => "without standbys",
                _ => "with --standbys 1",
            },
            f.load_secs,
            f.answered_secs,
            f.claimed_secs,
            f.served_secs
        );
        rows.push(f);
    }
    println!(
        "failover with standbys: {:.2}s against {:.2}s without ({:.1}x faster) and {:.2}s on an empty log \
         ({:.2}x the baseline); the session timeout is {:.1}s",
        rows[2].served_secs,
        rows[1].served_secs,
        rows[1].served_secs / rows[2].served_secs,
        rows[0].served_secs,
        rows[2].served_secs / rows[0].served_secs,
        session_timeout_ms as f64 / 1000.0
    );
    say!("the processors' logs: {}", logs.display());
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
    let session = session_ms.to_string();
    let standbys_arg = standbys.to_string();
    // The survivor keeps its own partitions through the rebalance.
    let args = [
        "--session-timeout-ms",
        &session,
        "--standbys",
        &standbys_arg,
        "--cooperative",
    ];
    let mut procs = Procs::new(dirs.logs.clone());
    let survivor_api = free_addr()?;
    for p in ["p0", "p1"] {
        let listen = match p {
            "p1" => survivor_api.to_string(),
            _ => free_addr()?.to_string(),
        };
        let args: Vec<&str> = args.iter().copied().chain(["--listen", &listen]).collect();
        procs.run(cfg, &dirs.data.join(p), Generation::FIRST, p, &args)?;
    }
    let start = Instant::now();
    procs.wait(cfg, "the log processed", |s| {
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
        procs.wait(cfg, "every standby at the committed positions", |s| {
            s.idle
                && (s.partitions.iter()).all(|p| {
                    p.standbys.len() == standbys && p.standbys.iter().all(|s| s.behind == 0)
                })
        })?;
    }
    let now = status(cfg)?;
    let count = now.partitions.len() as u32;
    let dead: Vec<_> = (now.partitions.into_iter())
        .filter(|p| p.owner.as_deref() == Some("p0"))
        .map(|p| p.partition)
        .collect();
    // A reader of each of them, asked through the survivor.
    let paths: Vec<String> = (dead.iter())
        .filter_map(|&p| (1..100_000u64).find(|&u| partition_for(UserId(u), count) == p))
        .map(|u| format!("/v1/users/{u}/timeline?limit=20"))
        .collect();
    let killed = Instant::now();
    procs.kill("p0")?;
    let base = format!("http://{survivor_api}");
    // The readers on a thread of their own, so that the status below sees
    // the claims when they happen.
    let (answered, served) = std::thread::scope(|scope| {
        let readers = scope.spawn(|| answered_after(&base, paths, killed));
        let mut claimed_secs = None;
        let served = procs.wait(cfg, "every partition served by the survivor", |s| {
            let by_p1 =
                |p: &&feedlog::ops::status::PartitionStatus| p.owner.as_deref() == Some("p1");
            if claimed_secs.is_none()
                && (s.partitions.iter())
                    .filter(by_p1)
                    .any(|p| dead.contains(&p.partition))
            {
                claimed_secs = Some(killed.elapsed().as_secs_f64());
            }
            s.idle
                && (s.partitions.iter())
                    .all(|p| by_p1(&p) && p.state == Some(PartitionState::Serving))
        });
        let answered = readers
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the readers panicked")));
        (answered, served.map(|()| claimed_secs))
    });
    let (answered_secs, claimed_secs) = (answered?, served?);
    let served_secs = killed.elapsed().as_secs_f64();
    Ok(Failover {
        load_secs,
        claimed_secs: claimed_secs.unwrap_or(served_secs),
        served_secs,
        answered_secs,
    })
}

/// Asks `base` for every path until each has answered 200 (every 10 ms);
/// the seconds since `since` then.
fn answered_after(base: &str, mut waiting: Vec<String>, since: Instant) -> Result<f64> {
    while !waiting.is_empty() {
        if since.elapsed() > std::time::Duration::from_secs(120) {
            bail!("readers of {waiting:?} not answered 120 s after the kill");
        }
        waiting.retain(|path| {
            client::get(base, path, &[], std::time::Duration::from_secs(5))
                .map_or(true, |r| r.status != 200)
        });
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Ok(since.elapsed().as_secs_f64())
}
