//! `feedlog-bench mixed`: timeline pages read while the writes are applied
//! — the normal state of a feed service, and the moment commits drop cached
//! pages — feedlog against the Redis design on the same events, in one run.
//!
//! Each side applies the events twice: alone, then while 16 connections
//! (by default) read first pages of 20 of random users (ids drawn
//! uniformly from the same range on both sides; a user who follows nobody
//! reads an empty page on both). feedlog's reads last 80 % of the time its
//! writes alone took, so that they end before the writes do; redis-benchmark
//! takes a request count instead of a duration, sized from an idle probe at
//! half its rate. Reported: pages/s, p50 and p99 of the reads, how long
//! they ran against how long the writes ran, and the writes' entries/s
//! alone and under the reads.

use crate::common::Cleanup;
use crate::http::{which, with_wrk, Load};
use crate::redis::{fresh_dir, workload, RedisBench, RedisServer};
use crate::say::say;
use anyhow::Result;
use feedlog::core::event::Event;
use feedlog::task::embedded::Processor;
use feedlog::task::Shutdown;
use std::time::Instant;

/// Reads that ran beside the writes: their figures and how long they ran.
struct Reads {
    load: Load,
    secs: f64,
}

/// Pages read while writing, feedlog against Redis (see the module's doc).
// Long: one benchmark read top to bottom (both sides, alone and under
// reads, then the report), sharing its locals.
pub fn mixed(b: &RedisBench<'_>) -> Result<()> {
    let (Some(server_bin), Some(wrk), Some(bench_bin)) = (
        which("redis-server"),
        which("wrk"),
        which("redis-benchmark"),
    ) else {
        say!(
            "feedlog-bench mixed: skipped: it needs redis-server, wrk and redis-benchmark \
             (Debian/Ubuntu: apt-get install redis-server redis-tools wrk; scripts/setup.sh --bench installs them)"
        );
        return Ok(());
    };
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-mixed-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let _cleanup = Cleanup(tmp.clone());
    let (by_partition, partitions, cap) = workload(b)?;
    let events: Vec<&Event> = by_partition.iter().flatten().collect();
    anyhow::ensure!(!events.is_empty(), "the workload has no events");
    let max_user = events.iter().map(|e| e.actor().0).max().unwrap_or(1);
    let (threads, connections) = (b.threads, b.connections);

    // feedlog: alone, then under reads.
    let pass = |name: &str, reads: Option<u64>| -> Result<(f64, Option<Reads>)> {
        let (dir, cfg) = fresh_dir(&tmp.join(name), b, events.iter().copied(), partitions, cap)?;
        let processor = Processor::open(&dir, cfg)?;
        let reader = feedlog::ops::serve::reader_of(&processor);
        let script = format!(
            "request = function()\n  \
             return wrk.format(\"GET\", \"/v1/users/\" .. math.random({max_user}) .. \"/timeline?limit=20&counts=0\")\nend\n"
        );
        std::thread::scope(|s| {
            let reading = reads.map(|secs| {
                let (dir, wrk, script) = (&dir, &wrk, &script);
                s.spawn(move || -> Result<Reads> {
                    let start = Instant::now();
                    let load = with_wrk(wrk, dir, reader, script, threads, connections, secs)?;
                    Ok(Reads {
                        load,
                        secs: start.elapsed().as_secs_f64(),
                    })
                })
            });
            let start = Instant::now();
            processor.run(&Shutdown::new(), true)?;
            let secs = start.elapsed().as_secs_f64();
            let reads = match reading {
                Some(h) => Some(
                    h.join()
                        .map_err(|_| anyhow::anyhow!("the read load panicked"))??,
                ),
                None => None,
            };
            Ok((secs, reads))
        })
    };
    say!("feedlog: applying {} events alone", events.len());
    let (feed_alone, _) = pass("alone", None)?;
    let read_secs = ((feed_alone * 0.8) as u64).max(1);
    say!("feedlog: applying them again while reading for {read_secs}s");
    let (feed_read, feed_pages) = pass("read", Some(read_secs))?;
    let feed_pages = feed_pages.ok_or_else(|| anyhow::anyhow!("no reads were made"))?;

    // Redis: alone, then under reads.
    let server = RedisServer::start(&server_bin, &tmp)?;
    let mut by_time = events.clone();
    by_time.sort_by_key(|e| e.ts());
    say!("redis: mass insertion of the same events alone");
    let (entries, _, redis_alone) = server.replay(&by_time, cap)?;
    let range = max_user as usize + 1;
    let probe = server.pages(&bench_bin, ("i", range, 0), threads, connections, 20_000)?;
    server.flush_all()?;
    let redis_read_secs = (redis_alone * 0.8).max(1.0);
    let n = ((probe.per_sec * 0.5 * redis_read_secs) as u64).max(10_000);
    say!("redis: mass insertion again while redis-benchmark reads {n} pages");
    let (redis_read, redis_pages) = std::thread::scope(|s| -> Result<(f64, Reads)> {
        let reading = s.spawn(|| -> Result<Reads> {
            let start = Instant::now();
            let load = server.pages(&bench_bin, ("i", range, 0), threads, connections, n)?;
            Ok(Reads {
                load,
                secs: start.elapsed().as_secs_f64(),
            })
        });
        let (_, _, secs) = server.replay(&by_time, cap)?;
        let reads = reading
            .join()
            .map_err(|_| anyhow::anyhow!("the read load panicked"))??;
        Ok((secs, reads))
    })?;

    println!(
        "workload: {} events, {partitions} partitions, inbox cap {cap}; {entries} inbox entries; \
         readers: first pages of 20 of random users among 1..={max_user}, {connections} connections, {threads} threads",
        events.len()
    );
    let rate = |secs: f64| entries as f64 / secs;
    for (who, alone, read, pages) in [
        ("feedlog", feed_alone, feed_read, &feed_pages),
        ("redis", redis_alone, redis_read, &redis_pages),
    ] {
        println!(
            "{who}: writes alone {alone:.2}s = {:.0} entries/s; under reads {read:.2}s = {:.0} entries/s ({:+.0} %)",
            rate(alone),
            rate(read),
            100.0 * (alone / read - 1.0)
        );
        println!(
            "{who}: pages while writing: {} (reads ran {:.1}s of the writes' {read:.1}s)",
            pages.load.line(),
            pages.secs
        );
    }
    println!(
        "ratio feedlog/redis pages/s while writing: {:.2}; p50 {:.2}; p99 {:.2} (latency ratios: redis/feedlog)",
        feed_pages.load.per_sec / redis_pages.load.per_sec,
        redis_pages.load.p50_ms / feed_pages.load.p50_ms,
        redis_pages.load.p99_ms / feed_pages.load.p99_ms
    );
    println!(
        "ratio feedlog/redis inbox entries/s under reads: {:.2} (alone: {:.2})",
        redis_read / feed_read,
        redis_alone / feed_alone
    );
    Ok(())
}
