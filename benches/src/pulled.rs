//! `feedlog-bench pulled`: timeline pages of readers who follow 0, 10 and 50
//! pulled authors (whose posts the read merges from the partition's
//! copies), each against the readers who follow none, in one run.

use crate::common::{run_until_idle, Cleanup};
use crate::http::{through_http, Load};
use crate::say::say;
use anyhow::Result;
use feedlog::api::query::Reader;
use feedlog::core::codec::Format;
use feedlog::core::event::{Event, PostId, Ts, UserId};
use feedlog::ingest::produce::Producer;
use feedlog::state::datadir::DataDir;
use feedlog::state::Kept;
use feedlog::task::embedded::{Processor, ProcessorConfig};

/// Readers per group; also the followers of each pushed author.
const READERS: u64 = 500;
/// Authors each reader follows.
const FOLLOWS: u64 = 50;
/// Posts per author.
const POSTS: u64 = 20;
/// The threshold: above a group of readers, below a group plus the fans.
const THRESHOLD: u64 = 800;

/// The state: 50 authors pulled (each followed by 500 fans who never read,
/// plus readers), 90 pushed (500 followers each), three groups of 500
/// readers following 50 authors each — 0, 10 or 50 of them pulled — and
/// every author posting 20 times, interleaved in time.
fn events() -> Vec<Event> {
    let pulled = |i: u64| UserId(1 + i); // 1..=50
    let pushed = |i: u64| UserId(101 + i); // 101..=190
    let reader = |group: u64, i: u64| UserId(1_000 + group * 1_000 + i);
    let fan = |i: u64| UserId(10_000 + i);
    let mut ts = 1_700_000_000_000u64;
    let mut out = Vec::new();
    let mut follow = |follower: UserId, followee: UserId| {
        ts += 1;
        out.push(Event::Follow {
            follower,
            followee,
            ts: Ts(ts),
        });
    };
    for i in 0..READERS {
        for a in 0..FOLLOWS {
            follow(fan(i), pulled(a));
            // Group 0: pushed authors 0-49; group 1: 10 pulled and pushed
            // 50-89; group 2: the 50 pulled.
            follow(reader(0, i), pushed(a));
            let g1 = if a < 10 { pulled(a) } else { pushed(40 + a) };
            follow(reader(1, i), g1);
            follow(reader(2, i), pulled(a));
        }
    }
    let authors: Vec<UserId> = (0..50).map(pulled).chain((0..90).map(pushed)).collect();
    for n in 0..POSTS {
        for (k, &author) in authors.iter().enumerate() {
            ts += 1;
            out.push(Event::Post {
                author,
                post_id: PostId(n * 1_000 + k as u64 + 1),
                ts: Ts(ts),
            });
        }
    }
    out
}

/// Pages/s and p99 of each group's first pages through HTTP, with the page
/// cache and without.
pub fn pulled(partitions: u32, threads: usize, connections: usize, secs: u64) -> Result<()> {
    let wrk = crate::http::need_wrk()?;
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-pulled-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    let dir = DataDir::create_or_open(&tmp.join("data"), Some(partitions))?;
    let mut producer = Producer::new(&dir)?;
    for e in events() {
        producer.event(&e, Format::Postcard)?;
    }
    producer.finish()?;
    let cfg = ProcessorConfig {
        pull_threshold: Some(THRESHOLD),
        ..ProcessorConfig::default()
    };
    say!("setup: 50 pulled and 90 pushed authors, 3 x {READERS} readers ({partitions} partitions, threshold {THRESHOLD})");
    let processor = Processor::open(&dir, cfg)?;
    run_until_idle(&processor)?;
    drop(processor);
    let group = |g: u64| -> Vec<u64> { (0..READERS).map(|i| 1_000 + g * 1_000 + i).collect() };
    let load = |users: &[u64], cache: bool| -> Result<Load> {
        let reader = match cache {
            true => Reader::open(&dir)?,
            false => Reader::open_keeping(&dir, Kept::NONE)?,
        };
        through_http(&wrk, &dir, reader, (users, ""), threads, connections, secs)
    };
    println!("timeline pages of 20 through HTTP ({threads} server threads, wrk -t{threads} -c{connections}, {secs}s):");
    for cache in [true, false] {
        let base = load(&group(0), cache)?;
        let label = if cache {
            "page cache on"
        } else {
            "page cache off"
        };
        println!(
            "  {label}, readers following 0 pulled authors: {}",
            base.line()
        );
        for (g, n) in [(1, 10), (2, 50)] {
            let l = load(&group(g), cache)?;
            println!(
                "  {label}, readers following {n} pulled authors: {} — pages/s {:.2}x, p99 {:.2}x of 0",
                l.line(),
                l.per_sec / base.per_sec,
                l.p99_ms / base.p99_ms
            );
        }
    }
    Ok(())
}
