//! `bench redis`: feedlog against the founding documents' design — Redis
//! sorted-set inboxes, fan-out on write — on the same events, in one run.
//!
//! The Redis side replays the events in time order as that design's worker
//! would, by mass insertion over one pipelined connection: a post is a
//! `ZADD` into the author's outbox and into every follower's inbox, each
//! inbox trimmed to the cap with `ZREMRANGEBYRANK` whenever it may hold
//! more; a follow is an `SADD` to
//! the followee's followers and one multi-member `ZADD` of the followee's
//! newest posts (the backfill); an unfollow is an `SREM` and a `ZREM` of the
//! followee's posts; a delete is a `ZREM` from the outbox and from every
//! follower's inbox. The worker keeps who follows whom and the outboxes in
//! its own memory, so no command waits for a reply: the design at its
//! fastest. Redis keeps everything in memory with persistence off; feedlog
//! commits every batch durably.

use super::http::{paths_script, readers, second_pages, through_http, which, with_wrk, Load};
use super::redis_worker::Worker;
use super::resp::{number, Conn, Resp};
use super::{Cleanup, Generated};
use crate::cli::say::say;
use anyhow::{bail, Context, Result};
use feedlog::api::query::Reader;
use feedlog::core::codec::{decode_event, Format};
use feedlog::core::event::{Event, UserId};
use feedlog::core::position::Offset;
use feedlog::core::Partition;
use feedlog::core::DEFAULT_INBOX_CAP;
use feedlog::ingest::produce::Producer;
use feedlog::log::{Log, Topic};
use feedlog::state::datadir::DataDir;
use feedlog::task::embedded::{Processor, ProcessorConfig};
use feedlog::task::Shutdown;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What `bench redis` compares, and on what.
pub struct RedisBench<'a> {
    /// A data directory whose `events` log holds the workload; when it does
    /// not exist, the generated workload below is used.
    pub data: &'a Path,
    /// The generated workload.
    pub generated: Generated,
    /// Partitions of the generated workload's log.
    pub partitions: u32,
    /// Server threads and load-generator threads of the read runs.
    pub threads: usize,
    /// Concurrent connections of the read runs.
    pub connections: usize,
    /// Seconds per read run.
    pub secs: u64,
    /// feedlog's pull threshold (0: every author pushed, as Redis does).
    pub pull_threshold: u64,
    /// feedlog's inactivity span in ms (`None`: every reader pushed to, as
    /// Redis does).
    pub inactive_after: Option<u64>,
}

// Long: one benchmark read top to bottom (the workload, feedlog's write
// path, Redis's, the pages of both, the report), sharing its locals.
/// Inbox entries/s end to end, timeline pages/s and page latency: feedlog
/// (embedded log, durable) against the Redis design on the same events.
pub fn redis(b: &RedisBench<'_>) -> Result<()> {
    let Some(server_bin) = which("redis-server") else {
        say!(
            "bench redis: skipped: redis-server is not installed \
             (Debian/Ubuntu: apt-get install redis-server redis-tools; scripts/setup.sh --bench installs it)"
        );
        return Ok(());
    };
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-redis-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let _cleanup = Cleanup(tmp.clone());

    let (by_partition, partitions, cap) = workload(b)?;
    let total: usize = by_partition.iter().map(Vec::len).sum();
    anyhow::ensure!(total > 0, "the workload has no events");

    // feedlog: the same events in a fresh data directory, processed until
    // idle (timed), durably as `run` does by default.
    let (dir, cfg) = fresh_dir(
        &tmp.join("feedlog"),
        b,
        by_partition.iter().flatten(),
        partitions,
        cap,
    )?;
    let processor = Processor::open(&dir, cfg.clone())?;
    say!(
        "feedlog: processing {total} events ({partitions} partitions, sync={}, pull threshold {}, \
         inactive after {} ms)",
        cfg.sync,
        b.pull_threshold,
        b.inactive_after.unwrap_or(0)
    );
    let start = Instant::now();
    let totals = processor.run(&Shutdown::new(), true)?;
    let feed_secs = start.elapsed().as_secs_f64();
    drop(processor);

    // Redis: the design's worker replays the same events in time order.
    let server = RedisServer::start(&server_bin, &tmp)?;
    let mut events: Vec<&Event> = by_partition.iter().flatten().collect();
    events.sort_by_key(|e| e.ts());
    say!("redis: mass insertion of the same {total} events");
    let cpu_before = server.cpu_secs();
    let (entries, commands, redis_secs) = server.replay(&events, cap)?;
    let busy = match (cpu_before, server.cpu_secs()) {
        (Some(a), Some(b)) => format!(
            "; redis-server busy {:.0}% of it (the rest is the worker and the wire)",
            100.0 * (b - a) / redis_secs
        ),
        _ => String::new(),
    };
    let memory = server.used_memory().unwrap_or_default();

    let reader = Reader::open(&dir)?;
    let users = readers(&reader)?;
    let same = server.first_pages_agree(&reader, &users)?;

    println!(
        "workload: {total} events, {partitions} partitions, inbox cap {cap}; \
         {entries} inbox entries (posts fanned out and follow backfills)"
    );
    println!(
        "feedlog (embedded log, sync={}): {feed_secs:.2}s = {:.0} entries/s ({} deliveries counted by the processor)",
        cfg.sync,
        entries as f64 / feed_secs,
        totals.delivered
    );
    println!(
        "redis (in memory, no persistence; {commands} commands by mass insertion): {redis_secs:.2}s = {:.0} entries/s, {memory}{busy}",
        entries as f64 / redis_secs
    );
    println!(
        "ratio feedlog/redis inbox entries/s: {:.2}",
        redis_secs / feed_secs
    );
    println!(
        "first pages of 20 equal in both for {same} of {} readers",
        users.len()
    );

    // Pages: the same readers' first pages at the same concurrency.
    let (Some(wrk), Some(bench_bin)) = (which("wrk"), which("redis-benchmark")) else {
        say!(
            "bench redis: the page runs are skipped: they need wrk and redis-benchmark \
             (Debian/Ubuntu: apt-get install wrk redis-tools; scripts/setup.sh --bench installs them)"
        );
        return Ok(());
    };
    anyhow::ensure!(!users.is_empty(), "the workload has no readers");
    let (threads, connections, secs) = (b.threads, b.connections, b.secs);
    let load = |reader| through_http(&wrk, &dir, reader, &users, threads, connections, secs);
    let http = load(reader)?;
    let cold = load(Reader::open_with_page_cache(&dir, 0)?)?;
    server.name_pages(&users)?;
    let zrev = server.pages_under_load(&bench_bin, (users.len(), 0), threads, connections, secs)?;
    // Second pages: the readers who have one, through the first page's
    // cursor; in Redis entries 20 to 39 of the same inboxes.
    let deep = second_pages(&Reader::open(&dir)?, &users)?;
    let deep_users: Vec<u64> = deep.iter().map(|(u, _)| *u).collect();
    let second = match deep.is_empty() {
        true => None,
        false => {
            let pages = Reader::open(&dir)?;
            let same = server.pages_agree(&deep_users, 20, |u| {
                let first = pages.timeline(UserId(u), 20, None)?;
                Ok(pages.timeline(UserId(u), 20, first.next_cursor.as_deref())?)
            })?;
            let paths: Vec<String> = deep.into_iter().map(|(_, p)| p).collect();
            let ours = with_wrk(
                &wrk,
                &dir,
                pages,
                &paths_script(&paths),
                threads,
                connections,
                secs,
            )?;
            server.name_pages(&deep_users)?;
            let theirs = server.pages_under_load(
                &bench_bin,
                (deep_users.len(), 20),
                threads,
                connections,
                secs,
            )?;
            Some((same, ours, theirs))
        }
    };
    println!(
        "timeline pages of 20, {} readers, {connections} connections, {threads} threads, {secs}s:",
        users.len()
    );
    println!("  feedlog HTTP (wrk):               {}", http.line());
    println!("  feedlog HTTP, no page cache:      {}", cold.line());
    println!("  redis ZREVRANGE (redis-benchmark): {}", zrev.line());
    let ratio = |what: &str, l: &Load, r: &Load| {
        println!(
            "ratio feedlog/redis {what}: {:.2}; p50 {:.2}; p99 {:.2} (latency ratios: redis/feedlog)",
            l.per_sec / r.per_sec,
            r.p50_ms / l.p50_ms,
            r.p99_ms / l.p99_ms
        )
    };
    ratio("pages/s", &http, &zrev);
    ratio("pages/s without the page cache", &cold, &zrev);
    match second {
        None => println!("second pages: no reader has one"),
        Some((same, ours, theirs)) => {
            println!(
                "second pages of 20 (through the first page's cursor; redis ZREVRANGE 20 39), {} readers, equal in both for {same}:",
                deep_users.len()
            );
            println!("  feedlog HTTP (wrk):               {}", ours.line());
            println!("  redis ZREVRANGE (redis-benchmark): {}", theirs.line());
            ratio("second pages/s", &ours, &theirs);
        }
    }
    Ok(())
}

/// The events both sides process, per partition in log order: the log in
/// `b.data` when it exists, else the generated workload; with the
/// partition count and the inbox cap.
pub(super) fn workload(b: &RedisBench<'_>) -> Result<(Vec<Vec<Event>>, u32, u64)> {
    Ok(if b.data.join("feedlog.json").exists() {
        let dir = DataDir::open(b.data)?;
        say!("workload: the events log of {}", b.data.display());
        let cap = dir.inbox_cap().unwrap_or(DEFAULT_INBOX_CAP);
        (logged_events(&dir)?, dir.partitions(), cap)
    } else {
        say!(
            "workload: generated ({}; {} has no data directory)",
            b.generated,
            b.data.display()
        );
        let (mut events, more) = b.generated.events();
        events.extend(more);
        let mut by_partition = vec![Vec::new(); b.partitions as usize];
        for e in events {
            let p = feedlog::core::partition::partition_for(e.actor(), b.partitions);
            by_partition[p.index()].push(e);
        }
        (by_partition, b.partitions, DEFAULT_INBOX_CAP)
    })
}

/// A fresh data directory at `root` whose log holds `events`, and the
/// processor settings of `b` for it (durable, as `run` by default).
pub(super) fn fresh_dir<'e>(
    root: &Path,
    b: &RedisBench<'_>,
    events: impl IntoIterator<Item = &'e Event>,
    partitions: u32,
    cap: u64,
) -> Result<(DataDir, ProcessorConfig)> {
    let mut dir = DataDir::create_or_open(root, Some(partitions))?;
    dir.set_inbox_cap(cap)?;
    let mut producer = Producer::new(&dir)?;
    for e in events {
        producer.event(e, Format::Postcard)?;
    }
    producer.finish()?;
    let cfg = ProcessorConfig {
        inbox_cap: cap,
        pull_threshold: Some(b.pull_threshold),
        inactive_after: b.inactive_after,
        ..ProcessorConfig::default()
    };
    Ok((dir, cfg))
}

/// Every event in the `events` log of `dir`, per partition in log order.
pub(super) fn logged_events(dir: &DataDir) -> Result<Vec<Vec<Event>>> {
    let logs = dir.logs();
    let mut undecodable = 0u64;
    let mut out = Vec::new();
    for p in Partition::all(dir.partitions()) {
        let end = logs.end_offset(Topic::Events, p)?;
        let mut source = logs.source(Topic::Events, p, Offset(0))?;
        let mut events = Vec::new();
        loop {
            let records = source.read(10_000, 16 << 20, Some(Offset(end)))?;
            if records.is_empty() {
                break;
            }
            for r in records {
                match decode_event(r.format, &r.value) {
                    Ok(e) => events.push(e),
                    Err(_) => undecodable += 1,
                }
            }
        }
        out.push(events);
    }
    if undecodable > 0 {
        say!("{undecodable} records of the log are not events (both sides skip them)");
    }
    Ok(out)
}

/// A `redis-server` on a free loopback port, stopped on drop.
pub(super) struct RedisServer {
    child: std::process::Child,
    port: u16,
}

impl RedisServer {
    pub(super) fn start(bin: &Path, dir: &Path) -> Result<RedisServer> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = std::process::Command::new(bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = server.connect() {
                if c.integer_or_status(&[b"PING"]).is_ok() {
                    return Ok(server);
                }
            }
            if let Some(status) = server.child.try_wait()? {
                bail!("redis-server exited at start-up ({status})");
            }
            if Instant::now() > deadline {
                bail!("redis-server did not answer on port {port} within 10 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(super) fn connect(&self) -> Result<Conn> {
        Conn::connect(self.port)
    }

    /// Replays `events` as the design's worker; inbox entries written,
    /// commands sent, and seconds until Redis acknowledged the last one.
    pub(super) fn replay(&self, events: &[&Event], cap: u64) -> Result<(u64, u64, f64)> {
        let mut conn = self.connect()?;
        let mut writer = conn.writer.get_ref().try_clone()?;
        let sent = AtomicU64::new(u64::MAX);
        let start = Instant::now();
        let (entries, commands) = std::thread::scope(|s| -> Result<(u64, u64)> {
            let worker = s.spawn(|| -> Result<(u64, u64)> {
                let mut w = Worker::new(cap);
                let mut out = Resp::default();
                for e in events {
                    w.apply(e, &mut out);
                    if out.buf.len() >= 1 << 16 {
                        writer.write_all(&out.buf)?;
                        out.buf.clear();
                    }
                }
                writer.write_all(&out.buf)?;
                sent.store(out.commands, Ordering::SeqCst);
                Ok((w.entries, out.commands))
            });
            let mut acknowledged = 0u64;
            let mut first_error = None;
            while acknowledged != sent.load(Ordering::SeqCst) {
                if worker.is_finished() && sent.load(Ordering::SeqCst) == u64::MAX {
                    break; // the worker failed; its error is below
                }
                if let Err(e) = conn.reply_line() {
                    first_error.get_or_insert(e);
                    if conn.line.is_empty() {
                        break; // the connection is gone
                    }
                }
                acknowledged += 1;
            }
            let done = worker
                .join()
                .map_err(|_| anyhow::anyhow!("the replay worker panicked"))??;
            if let Some(e) = first_error {
                return Err(e.context("redis refused a command of the replay"));
            }
            Ok(done)
        })?;
        Ok((entries, commands, start.elapsed().as_secs_f64()))
    }

    /// CPU seconds the server has used (Linux: /proc), if known.
    fn cpu_secs(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // Fields after the command name in parentheses; utime and stime are
        // the 14th and 15th fields, in clock ticks (100 per second on Linux).
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / 100.0)
    }

    fn used_memory(&self) -> Result<String> {
        let mut c = self.connect()?;
        c.send(&[b"INFO", b"memory"])?;
        let info = c.bulk()?;
        let text = String::from_utf8_lossy(&info);
        let human = text
            .lines()
            .find_map(|l| l.strip_prefix("used_memory_human:"))
            .unwrap_or("?");
        Ok(format!("{} in memory", human.trim()))
    }

    /// For how many readers the first page (20 entries, newest first) is
    /// the same in both: a check that both did the same work.
    fn first_pages_agree(&self, reader: &Reader, users: &[u64]) -> Result<usize> {
        self.pages_agree(users, 0, |u| Ok(reader.timeline(UserId(u), 20, None)?))
    }

    /// For how many readers the page of 20 from entry `from` on is the same
    /// in Redis as `ours` says it is in feedlog.
    fn pages_agree(
        &self,
        users: &[u64],
        from: usize,
        ours: impl Fn(u64) -> Result<feedlog::api::query::Page<feedlog::api::query::PostItem>>,
    ) -> Result<usize> {
        let mut c = self.connect()?;
        let mut same = 0;
        let (start, stop) = (from.to_string(), (from + 19).to_string());
        for chunk in users.chunks(1000) {
            for u in chunk {
                let key = format!("i:{u:012}");
                c.queue(&[
                    b"ZREVRANGE",
                    key.as_bytes(),
                    start.as_bytes(),
                    stop.as_bytes(),
                    b"WITHSCORES",
                ]);
            }
            c.flush()?;
            for &u in chunk {
                let items = c.array()?;
                let mut theirs: Vec<(u64, u64)> = items
                    .chunks(2)
                    .map(|m| Ok((number(&m[1])?, number(&m[0])?)))
                    .collect::<Result<_>>()?;
                let mut ours: Vec<(u64, u64)> =
                    ours(u)?.items.iter().map(|i| (i.ts, i.post_id)).collect();
                theirs.sort_unstable();
                ours.sort_unstable();
                same += usize::from(theirs == ours);
            }
        }
        Ok(same)
    }

    /// Copies reader `i`'s inbox to `p:{i:012}`, the key redis-benchmark's
    /// `__rand_int__` names.
    fn name_pages(&self, users: &[u64]) -> Result<()> {
        let mut c = self.connect()?;
        for (i, u) in users.iter().enumerate() {
            let (from, to) = (format!("i:{u:012}"), format!("p:{i:012}"));
            c.queue(&[b"COPY", from.as_bytes(), to.as_bytes(), b"REPLACE"]);
        }
        c.flush()?;
        for _ in users {
            c.reply_line()?;
        }
        Ok(())
    }

    /// `ZREVRANGE p:<random reader> FROM FROM+19 WITHSCORES` from
    /// redis-benchmark for about `secs` seconds (a short run first sizes
    /// the long one).
    fn pages_under_load(
        &self,
        bin: &Path,
        (readers, from): (usize, usize),
        threads: usize,
        connections: usize,
        secs: u64,
    ) -> Result<Load> {
        let run = |n| self.pages(bin, ("p", readers, from), threads, connections, n);
        let probe = run(20_000)?;
        run(((probe.per_sec * secs as f64) as u64).max(20_000))
    }

    /// `n` × `ZREVRANGE {prefix}:<random id below range> FROM FROM+19
    /// WITHSCORES` from redis-benchmark.
    pub(super) fn pages(
        &self,
        bin: &Path,
        (prefix, range, from): (&str, usize, usize),
        threads: usize,
        connections: usize,
        n: u64,
    ) -> Result<Load> {
        let key = format!("{prefix}:__rand_int__");
        let run = |n: u64| -> Result<Load> {
            let out = std::process::Command::new(bin)
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args([
                    "-c",
                    &connections.to_string(),
                    "--threads",
                    &threads.to_string(),
                ])
                .args(["-n", &n.to_string(), "-r", &range.to_string(), "--csv"])
                .args([
                    "ZREVRANGE",
                    &key,
                    &from.to_string(),
                    &(from + 19).to_string(),
                ])
                .arg("WITHSCORES")
                .output()
                .context("running redis-benchmark")?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            anyhow::ensure!(
                out.status.success(),
                "redis-benchmark failed:\n{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            parse_benchmark_csv(&text)
                .with_context(|| format!("reading redis-benchmark's report:\n{text}"))
        };
        run(n)
    }

    /// Removes every key.
    pub(super) fn flush_all(&self) -> Result<()> {
        self.connect()?.integer_or_status(&[b"FLUSHALL"])
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `rps`, `p50_latency_ms` and `p99_latency_ms` of `redis-benchmark --csv`.
fn parse_benchmark_csv(text: &str) -> Option<Load> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let split = |l: &str| -> Vec<String> {
        l.split(',')
            .map(|f| f.trim().trim_matches('"').to_string())
            .collect()
    };
    let header = split(lines.next()?);
    let row = split(lines.next()?);
    let field = |name: &str| -> Option<f64> {
        let i = header.iter().position(|h| h == name)?;
        row.get(i)?.parse().ok()
    };
    Some(Load {
        per_sec: field("rps")?,
        p50_ms: field("p50_latency_ms")?,
        p99_ms: field("p99_latency_ms")?,
    })
}
