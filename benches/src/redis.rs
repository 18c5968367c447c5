//! `feedlog-bench redis`: feedlog against the founding documents' design —
//! Redis sorted-set inboxes, fan-out on write — on the same events, in one
//! run.
//!
//! The Redis side replays the events in time order as that design's worker
//! would, by mass insertion over one pipelined connection: a post is a
//! `ZADD` into the author's outbox and into every follower's inbox (a
//! reply: only those who also follow the author it replies to, or are
//! them — Mastodon's home rule, decided when pushed), each
//! inbox trimmed to the cap with `ZREMRANGEBYRANK` whenever it may hold
//! more; a follow is an `SADD` to
//! the followee's followers and one multi-member `ZADD` of the followee's
//! newest posts (the backfill); an unfollow is an `SREM` and a `ZREM` of the
//! followee's posts; a delete is a `ZREM` from the outbox and from every
//! follower's inbox; a repost is a `ZADD` of the original into every
//! follower's inbox and of the reposter into that row's sources. The worker
//! keeps who follows whom and the outboxes in its own memory, so no command
//! waits for a reply: the design at its fastest. Redis keeps everything in
//! memory with persistence off; feedlog commits every batch durably.
//!
//! Pages are read on both sides at the same concurrency: feedlog's through
//! its HTTP API (`wrk`), with its page cache and without; Redis's with
//! `ZREVRANGE`, or, when the log has reposts, with the design's page script
//! (each row with its 10 newest sources and their count; the Redis side is
//! `redis_server.rs`).

use crate::cold::{cold_passes, opened_with_heads};
use crate::common::{Cleanup, Generated};
use crate::http::{paths_script, readers, second_pages, through_http, which, with_wrk, Load};
pub(super) use crate::redis_server::RedisServer;
use crate::say::say;
use anyhow::Result;
use feedlog::api::query::Reader;
use feedlog::core::codec::{decode_event, Format};
use feedlog::core::event::{Event, UserId};
use feedlog::core::position::Offset;
use feedlog::core::Partition;
use feedlog::core::DEFAULT_INBOX_CAP;
use feedlog::ingest::produce::Producer;
use feedlog::log::{Log, Topic};
use feedlog::state::datadir::DataDir;
use feedlog::state::Kept;
use feedlog::task::embedded::{Processor, ProcessorConfig};
use feedlog::task::Shutdown;
use std::path::Path;
use std::time::Instant;

/// What `feedlog-bench redis` compares, and on what.
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
    /// What feedlog's readers keep in memory.
    pub kept: Kept,
}

// Long: one benchmark read top to bottom (the workload, feedlog's write
// path, Redis's, the pages of both, the report), sharing its locals.
/// Inbox entries/s end to end, timeline pages/s and page latency: feedlog
/// (embedded log, durable) against the Redis design on the same events.
pub fn redis(b: &RedisBench<'_>) -> Result<()> {
    let Some(server_bin) = which("redis-server") else {
        say!(
            "feedlog-bench redis: skipped: redis-server is not installed \
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
    let mut server = RedisServer::start(&server_bin, &tmp)?;
    let mut events: Vec<&Event> = by_partition.iter().flatten().collect();
    // With reposts the design's page is a row per original with its
    // sources (the script); without, a plain `ZREVRANGE`.
    let reposts = events.iter().any(|e| matches!(e, Event::Repost { .. }));
    if reposts {
        server.load_page_script()?;
    }
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

    let reader = Reader::open_keeping(&dir, b.kept)?;
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
            "feedlog-bench redis: the page runs are skipped: they need wrk and redis-benchmark \
             (Debian/Ubuntu: apt-get install wrk redis-tools; scripts/setup.sh --bench installs them)"
        );
        return Ok(());
    };
    anyhow::ensure!(!users.is_empty(), "the workload has no readers");
    let (threads, connections, secs) = (b.threads, b.connections, b.secs);
    // Pages without counts against the design's rows (and sources); then
    // pages with each entry's counts and the reader's flags against the
    // design's page with its counts hashes and flag sets.
    let load = |reader| {
        through_http(
            &wrk,
            &dir,
            reader,
            (&users, "&counts=0"),
            threads,
            connections,
            secs,
        )
    };
    let counted =
        |reader| through_http(&wrk, &dir, reader, (&users, ""), threads, connections, secs);
    // Cold first: each reader's first page once, from a reader opened now
    // (page cache and block cache empty; the files in the OS's cache), its
    // inbox heads read; the median of a few such passes.
    let first_paths: Vec<String> = users
        .iter()
        .map(|u| format!("/v1/users/{u}/timeline?limit=20&counts=0"))
        .collect();
    let (first, heads) = cold_passes(&dir, b.kept, &first_paths, (threads, connections))?;
    let http = load(reader)?;
    // Without the page cache: pages from the inbox heads kept in memory,
    // once they are read after the open (as a processor that has run a
    // while), then with nothing kept (every page read from RocksDB).
    let no_pages = Kept { pages: 0, ..b.kept };
    let cold = load(opened_with_heads(&dir, no_pages)?.0)?;
    let bare = load(Reader::open_keeping(&dir, Kept::NONE)?)?;
    let with_counts = counted(Reader::open_keeping(&dir, b.kept)?)?;
    let with_counts_cold = counted(opened_with_heads(&dir, no_pages)?.0)?;
    server.name_pages(&users)?;
    let zrev = server.pages_under_load(&bench_bin, (users.len(), 0), threads, connections, secs)?;
    let zrev_counted =
        server.counted_pages_under_load(&bench_bin, users.len(), threads, connections, secs)?;
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
    println!("  {heads}");
    println!(
        "  memory: redis-server {memory}; feedlog's reader keeps at most {} MiB of heads, {} MiB of pages and a {} MiB block cache",
        b.kept.heads >> 20,
        b.kept.pages >> 20,
        feedlog::state::set::READER_CACHE_BYTES >> 20
    );
    println!("  feedlog HTTP, cold (each once):   {}", first.line());
    println!("  feedlog HTTP (wrk):               {}", http.line());
    println!("  feedlog HTTP, no page cache:      {}", cold.line());
    println!("  feedlog HTTP, nothing kept:       {}", bare.line());
    println!("  feedlog HTTP, with counts:        {}", with_counts.line());
    println!(
        "  feedlog with counts, no page cache: {}",
        with_counts_cold.line()
    );
    let design = match reposts {
        true => "redis page script (rows + sources)",
        false => "redis ZREVRANGE (redis-benchmark)",
    };
    println!("  {design:<33}: {}", zrev.line());
    println!(
        "  redis page with counts and flags : {}",
        zrev_counted.line()
    );
    let ratio = |what: &str, l: &Load, r: &Load| {
        let p999 = match (l.p999_ms, r.p999_ms) {
            (Some(l), Some(r)) => format!("; p99.9 {:.2}", r / l),
            _ => String::new(),
        };
        // Per CPU second of each server: what the load generator, on the
        // same cores, takes from each side is left out.
        let per_cpu = match (l.per_server_cpu_sec(), r.per_server_cpu_sec()) {
            (Some(l), Some(r)) => format!("; per server CPU second {:.2}", l / r),
            _ => String::new(),
        };
        println!(
            "ratio feedlog/redis {what}: {:.2}; p50 {:.2}; p99 {:.2}{p999}{per_cpu} (latency ratios: redis/feedlog)",
            l.per_sec / r.per_sec,
            r.p50_ms / l.p50_ms,
            r.p99_ms / l.p99_ms
        )
    };
    ratio("first pages/s cold (each reader once)", &first, &zrev);
    ratio("pages/s", &http, &zrev);
    ratio("pages/s without the page cache", &cold, &zrev);
    ratio("pages/s with nothing kept in memory", &bare, &zrev);
    ratio("pages/s with counts and flags", &with_counts, &zrev_counted);
    ratio(
        "pages/s with counts and flags, no page cache",
        &with_counts_cold,
        &zrev_counted,
    );
    match second {
        None => println!("second pages: no reader has one"),
        Some((same, ours, theirs)) => {
            println!(
                "second pages of 20 (through the first page's cursor; redis rows 20 to 39), {} readers, equal in both for {same}:",
                deep_users.len()
            );
            println!("  feedlog HTTP (wrk):               {}", ours.line());
            println!("  {design:<33}: {}", theirs.line());
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
