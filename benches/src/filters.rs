//! `feedlog-bench filters`: what blocks and mutes cost. The write path: the
//! same follows and posts processed without mutes and with every reader of
//! one group muting half the authors they follow (the mutes are events of
//! their own; deliveries do not change, a mute filters when a page is
//! read). The read path: timeline pages of readers who mute 100 of the 200
//! accounts they follow against readers who mute none, on one state — the
//! first page, and a page deep enough that the muted readers' inbox no
//! longer holds it (their pages complete from the followees' outboxes).

use crate::common::{run_until_idle, Cleanup};
use crate::http::{paths_script, through_http, with_wrk, Load};
use crate::say::say;
use anyhow::Result;
use feedlog::api::query::Reader;
use feedlog::core::codec::Format;
use feedlog::core::event::{Event, FilterChange, PostId, Ts, UserId};
use feedlog::ingest::produce::Producer;
use feedlog::state::datadir::DataDir;
use feedlog::state::Kept;
use feedlog::task::embedded::{Processor, ProcessorConfig};

/// Readers per group.
pub(super) const READERS: u64 = 300;
/// Authors every reader follows.
pub(super) const AUTHORS: u64 = 200;
/// Authors each reader of the muting group mutes.
const MUTED: u64 = 100;
/// Posts per author.
const POSTS: u64 = 10;
/// The deep pages read (of 20 entries): past the 400 entries a muting
/// reader's inbox of 800 holds unmuted, within a non-muting reader's; and
/// past every reader's inbox (the pull path for both groups).
const DEEP_PAGES: [usize; 2] = [30, 45];

/// Readers of group `g` (0: no mutes; 1: mutes `MUTED` of the authors).
pub(super) fn reader(g: u64, i: u64) -> UserId {
    UserId(10_000 + g * 10_000 + i)
}

/// Every reader of both groups follows the 200 authors; with `mutes`, the
/// readers of group 1 then mute authors 1 to 100; then every author posts
/// 10 times, interleaved in time.
pub(super) fn events(mutes: bool) -> Vec<Event> {
    let mut ts = 1_700_000_000_000u64;
    let mut out = Vec::new();
    for g in 0..2 {
        for i in 0..READERS {
            for a in 1..=AUTHORS {
                ts += 1;
                out.push(Event::Follow {
                    follower: reader(g, i),
                    followee: UserId(a),
                    ts: Ts(ts),
                });
            }
        }
    }
    if mutes {
        for i in 0..READERS {
            for a in 1..=MUTED {
                ts += 1;
                out.push(Event::Filter {
                    user: reader(1, i),
                    target: UserId(a),
                    change: FilterChange::Mute { until: None },
                    ts: Ts(ts),
                });
            }
        }
    }
    for n in 0..POSTS {
        for a in 1..=AUTHORS {
            ts += 1;
            out.push(Event::Post {
                author: UserId(a),
                post_id: PostId(n * 1_000 + a),
                ts: Ts(ts),
            });
        }
    }
    out
}

/// A fresh data directory holding `events`, processed: the directory,
/// events/s and deliveries/s.
pub(super) fn processed(
    root: &std::path::Path,
    partitions: u32,
    events: &[Event],
) -> Result<(DataDir, f64, f64)> {
    let dir = DataDir::create_or_open(root, Some(partitions))?;
    let mut producer = Producer::new(&dir)?;
    for e in events {
        producer.event(e, Format::Postcard)?;
    }
    producer.finish()?;
    drop(producer);
    let processor = Processor::open(&dir, ProcessorConfig::default())?;
    let (delivered, secs) = run_until_idle(&processor)?;
    processor.flush();
    drop(processor);
    Ok((dir, events.len() as f64 / secs, delivered as f64 / secs))
}

/// Both paths, as the module says.
pub fn filters(partitions: u32, threads: usize, connections: usize, secs: u64) -> Result<()> {
    let wrk = crate::http::need_wrk()?;
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-filters-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    say!(
        "setup: {AUTHORS} authors posting {POSTS} times each, 2 x {READERS} readers following all of them; \
         the second group mutes {MUTED} ({partitions} partitions)"
    );
    let plain = events(false);
    let (_, ev0, dl0) = processed(&tmp.join("plain"), partitions, &plain)?;
    let muted = events(true);
    let (dir, ev1, dl1) = processed(&tmp.join("muted"), partitions, &muted)?;
    println!(
        "write path (the same follows and posts; the second log adds {} mutes):",
        READERS * MUTED
    );
    println!("  without mutes: {ev0:.0} events/s, {dl0:.0} inbox deliveries/s");
    println!(
        "  with mutes:    {ev1:.0} events/s, {dl1:.0} inbox deliveries/s — deliveries/s {:.2}x",
        dl1 / dl0
    );
    let group = |g: u64| -> Vec<u64> { (0..READERS).map(|i| reader(g, i).0).collect() };
    let deep = |reader: &Reader, g: u64, page: usize| -> Result<Vec<String>> {
        let mut paths = Vec::new();
        for u in group(g) {
            let mut cursor: Option<String> = None;
            for _ in 1..page {
                cursor = reader
                    .timeline(UserId(u), 20, cursor.as_deref())?
                    .next_cursor;
            }
            if let Some(c) = cursor {
                paths.push(format!("/v1/users/{u}/timeline?limit=20&cursor={c}"));
            }
        }
        Ok(paths)
    };
    println!("read path: timeline pages of 20 through HTTP ({threads} server threads, wrk -t{threads} -c{connections}, {secs}s):");
    for cache in [true, false] {
        let open = || -> Result<Reader> {
            Ok(match cache {
                true => Reader::open(&dir)?,
                false => Reader::open_keeping(&dir, Kept::NONE)?,
            })
        };
        let label = if cache {
            "page cache on"
        } else {
            "page cache off"
        };
        let first = |g: u64| {
            through_http(
                &wrk,
                &dir,
                open()?,
                (&group(g), ""),
                threads,
                connections,
                secs,
            )
        };
        let (base, filtered) = (first(0)?, first(1)?);
        print_pair(&format!("{label}, first pages"), &base, &filtered);
    }
    // Deep pages are read without the page cache: a reader pages down once.
    let open = || Reader::open_keeping(&dir, Kept::NONE);
    let reader = open()?;
    for page in DEEP_PAGES {
        let (p0, p1) = (deep(&reader, 0, page)?, deep(&reader, 1, page)?);
        let load = |paths: &[String]| {
            let script = paths_script(paths);
            with_wrk(&wrk, &dir, open()?, &script, threads, connections, secs)
        };
        let (base, filtered) = (load(&p0)?, load(&p1)?);
        print_pair(&format!("page cache off, page {page}"), &base, &filtered);
    }
    Ok(())
}

fn print_pair(what: &str, base: &Load, filtered: &Load) {
    println!("  {what}, readers muting none: {}", base.line());
    println!(
        "  {what}, readers muting {MUTED} of {AUTHORS}: {} — pages/s {:.2}x, p99 {:.2}x",
        filtered.line(),
        filtered.per_sec / base.per_sec,
        filtered.p99_ms / base.p99_ms
    );
}
