//! `feedlog-bench markers`: unread counts, feedlog against the seeds'
//! Redis design, in one run. Readers in groups, each group following its
//! own authors, who post in turn so that every reader's home timeline has
//! the same times; each reader's `seen` marks its home timeline read up to
//! an entry 0 to 100 below the top (`reader % 101`). feedlog answers
//! `GET /v1/users/{u}/markers` — the marker, and the exact count of the
//! timeline as it reads now (filters, modes), walked from the top — over
//! HTTP (wrk); the design answers `ZCOUNT` of the reader's inbox above the
//! marker's time (the same inboxes, replayed by the design's worker; every
//! marker 50 below the top: one seek and a count, whatever the depth).

use crate::common::Cleanup;
use crate::filters::processed;
use crate::http::{paths_script, with_wrk};
use crate::redis_server::RedisServer;
use crate::say::say;
use anyhow::Result;
use feedlog::api::query::{Modes, Reader, DEFAULT_MAX_UNREAD};
use feedlog::core::event::{Event, Feed, Place, PostId, Ts, UserId};
use feedlog::state::Kept;

/// Groups of readers.
const GROUPS: u64 = 10;
/// Readers per group.
const READERS: u64 = 200;
/// Authors each group follows (its own).
const AUTHORS: u64 = 20;
/// Posts per author: every home timeline holds `AUTHORS * POSTS` entries.
const POSTS: u64 = 10;
/// The first post's time.
const T0: u64 = 1_700_000_000_000;
/// The unread count of the design's markers.
const REDIS_UNREAD: u64 = 50;

fn reader(g: u64, i: u64) -> UserId {
    UserId(100_000 + g * 1_000 + i)
}

fn author(g: u64, j: u64) -> UserId {
    UserId(1 + g * 100 + j)
}

/// The time of post `n` of author `j` (of any group): the authors of a
/// group post in turn, so every timeline's `k`-th newest entry has the
/// time `top - k`.
fn post_ts(n: u64, j: u64) -> u64 {
    T0 + n * AUTHORS + j
}

/// The follows, the posts, then each reader's `seen` of its home timeline.
fn events() -> Vec<Event> {
    let mut out = Vec::new();
    for g in 0..GROUPS {
        for i in 0..READERS {
            for j in 0..AUTHORS {
                out.push(Event::Follow {
                    follower: reader(g, i),
                    followee: author(g, j),
                    ts: Ts(T0 - 1_000),
                });
            }
        }
    }
    for n in 0..POSTS {
        for g in 0..GROUPS {
            for j in 0..AUTHORS {
                out.push(Event::Post {
                    author: author(g, j),
                    post_id: PostId(n + 1),
                    ts: Ts(post_ts(n, j)),
                });
            }
        }
    }
    let top = post_ts(POSTS - 1, AUTHORS - 1) - T0;
    for g in 0..GROUPS {
        for i in 0..READERS {
            let user = reader(g, i);
            let k = user.0 % 101;
            let x = top - k;
            out.push(Event::Mark {
                user,
                ts: Ts(T0 + top + 1),
                feed: Feed::Home,
                read_up_to: Place {
                    ts: Ts(T0 + x),
                    post_id: PostId(x / AUTHORS + 1),
                    author: author(g, x % AUTHORS),
                },
                force: false,
            });
        }
    }
    out
}

/// The run, as the module says.
pub fn markers(partitions: u32, threads: usize, connections: usize, secs: u64) -> Result<()> {
    let Some((server_bin, bench_bin)) = crate::redis_server::tools("markers") else {
        return Ok(());
    };
    let wrk = crate::http::need_wrk()?;
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-markers-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let _cleanup = Cleanup(tmp.clone());
    let events = events();
    let readers: Vec<u64> = (0..GROUPS)
        .flat_map(|g| (0..READERS).map(move |i| reader(g, i).0))
        .collect();
    say!(
        "setup: {} readers in {GROUPS} groups, each following its group's {AUTHORS} authors \
         ({} entries per home timeline), each marked read 0 to 100 entries below the top \
         ({partitions} partitions)",
        readers.len(),
        AUTHORS * POSTS
    );
    let (dir, _, _) = processed(&tmp.join("feedlog"), partitions, &events)?;
    // Every answer is checked before the load: the count is the marker's depth.
    let reader = Reader::open(&dir)?;
    for &u in &readers {
        let m = reader.markers(UserId(u), Modes::default(), DEFAULT_MAX_UNREAD)?;
        let unread = m.feeds[0].unread;
        anyhow::ensure!(unread == Some(u % 101), "user {u}: unread {unread:?}");
    }
    let server = RedisServer::start(&server_bin, &tmp)?;
    server.replay(&events.iter().collect::<Vec<_>>(), u64::MAX)?;
    server.name_pages(&readers)?;
    let paths: Vec<String> = readers
        .iter()
        .map(|u| format!("/v1/users/{u}/markers"))
        .collect();
    println!(
        "unread counts of the home timeline ({threads} server threads, {connections} connections, {secs}s):"
    );
    for (label, kept) in [
        ("page cache on", Kept::DEFAULT),
        ("page cache off", Kept::NONE),
    ] {
        let load = with_wrk(
            &wrk,
            &dir,
            Reader::open_keeping(&dir, kept)?,
            &paths_script(&paths),
            threads,
            connections,
            secs,
        )?;
        println!("  feedlog markers ({label}, 0-100 unread): {}", load.line());
        let min = T0 + post_ts(POSTS - 1, AUTHORS - 1) - T0 - REDIS_UNREAD;
        let redis = server.counts_under_load(
            &bench_bin,
            (readers.len(), min),
            (threads, connections),
            secs,
        )?;
        println!("  redis ZCOUNT ({REDIS_UNREAD} unread): {}", redis.line());
        println!(
            "  ratio feedlog/redis answers/s: {:.2}",
            load.per_sec / redis.per_sec
        );
    }
    Ok(())
}
