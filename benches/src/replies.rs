//! `feedlog-bench replies`: what the replies rule of home timelines costs
//! a reader. Two groups of readers follow the same 200 authors, who post
//! 10 times each; the first group also follows the 100 users the authors
//! reply to (who never post), the second does not. Two states: one where
//! every post is plain, one where every second post of each author is a
//! reply. Timeline pages through HTTP:
//! - the first group on both states: the rule's lookups alone (every
//!   reply shows);
//! - both groups on the replies state: the second group's pages leave half
//!   the posts out and read on past them (the first page, and one deep
//!   enough that the second group's inbox no longer holds it).

use crate::common::Cleanup;
use crate::filters::processed;
use crate::http::{paths_script, through_http, with_wrk, Load};
use crate::say::say;
use anyhow::Result;
use feedlog::api::query::Reader;
use feedlog::core::event::{Event, PostId, Ts, UserId};
use feedlog::state::Kept;

/// Readers per group.
const READERS: u64 = 300;
/// Authors every reader follows.
const AUTHORS: u64 = 200;
/// Users the authors reply to (the first group follows them).
const PARENTS: u64 = 100;
/// Posts per author.
const POSTS: u64 = 10;
/// The deep page read (of 20 entries): past the 400 entries a second-group
/// reader's inbox of 800 holds that the rule shows.
const DEEP_PAGE: usize = 30;

/// Reader `i` of group `g` (0: follows the parents too; 1: does not).
fn reader(g: u64, i: u64) -> UserId {
    UserId(10_000 + g * 10_000 + i)
}

/// The user author `a`'s replies answer.
fn parent(a: u64) -> UserId {
    UserId(1_000 + a % PARENTS)
}

/// Both groups' follows, then every author's posts, interleaved in time;
/// with `replies`, each author's odd-numbered posts reply to a post of
/// their parent user.
fn events(replies: bool) -> Vec<Event> {
    let mut ts = 1_700_000_000_000u64;
    let mut out = Vec::new();
    let mut follow = |follower, followee, out: &mut Vec<Event>| {
        ts += 1;
        out.push(Event::Follow {
            follower,
            followee,
            ts: Ts(ts),
        });
    };
    for i in 0..READERS {
        for a in 1..=AUTHORS {
            follow(reader(0, i), UserId(a), &mut out);
            follow(reader(1, i), UserId(a), &mut out);
        }
        for p in 0..PARENTS {
            follow(reader(0, i), parent(p), &mut out);
        }
    }
    let mut ts = ts + 1;
    for n in 0..POSTS {
        for a in 1..=AUTHORS {
            ts += 1;
            let to = (replies && n % 2 == 1).then_some((parent(a), PostId(1)));
            out.push(Event::post(
                UserId(a),
                PostId(n * 1_000 + a),
                Ts(ts),
                to,
                Vec::new(),
            ));
        }
    }
    out
}

/// The measurements, as the module says.
pub fn replies(partitions: u32, threads: usize, connections: usize, secs: u64) -> Result<()> {
    let wrk = crate::http::need_wrk()?;
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-replies-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    say!(
        "setup: {AUTHORS} authors posting {POSTS} times each, 2 x {READERS} readers following \
         all of them, the first group also the {PARENTS} users they reply to ({partitions} partitions)"
    );
    let (plain, _, _) = processed(&tmp.join("plain"), partitions, &events(false))?;
    let (dir, _, _) = processed(&tmp.join("replies"), partitions, &events(true))?;
    let group = |g: u64| -> Vec<u64> { (0..READERS).map(|i| reader(g, i).0).collect() };
    println!(
        "timeline pages of 20 through HTTP, counts=0 ({threads} server threads, \
         wrk -t{threads} -c{connections}, {secs}s):"
    );
    for cache in [true, false] {
        let kept = if cache { Kept::default() } else { Kept::NONE };
        let label = if cache {
            "page cache on"
        } else {
            "page cache off"
        };
        let first = |d, g| {
            let reader = Reader::open_keeping(d, kept)?;
            through_http(
                &wrk,
                d,
                reader,
                (&group(g), "&counts=0"),
                threads,
                connections,
                secs,
            )
        };
        let (no_replies, shown) = (first(&plain, 0)?, first(&dir, 0)?);
        print_pair(
            &format!("{label}, first pages, every reply shown"),
            ("no replies", &no_replies),
            ("half of them replies", &shown),
        );
        let hidden = first(&dir, 1)?;
        print_pair(
            &format!("{label}, first pages, half of them replies"),
            ("every reply shown", &shown),
            ("the rule leaving them out", &hidden),
        );
    }
    // A deep page: read once by a reader paging down, without the cache.
    let reader = Reader::open_keeping(&dir, Kept::NONE)?;
    let deep = |g: u64| -> Result<Load> {
        let mut paths = Vec::new();
        for u in group(g) {
            let mut cursor: Option<String> = None;
            for _ in 1..DEEP_PAGE {
                cursor = reader
                    .timeline(UserId(u), 20, cursor.as_deref())?
                    .next_cursor;
            }
            if let Some(c) = cursor {
                paths.push(format!(
                    "/v1/users/{u}/timeline?limit=20&counts=0&cursor={c}"
                ));
            }
        }
        let open = Reader::open_keeping(&dir, Kept::NONE)?;
        with_wrk(
            &wrk,
            &dir,
            open,
            &paths_script(&paths),
            threads,
            connections,
            secs,
        )
    };
    let (shown, hidden) = (deep(0)?, deep(1)?);
    print_pair(
        &format!("page cache off, page {DEEP_PAGE}"),
        ("every reply shown", &shown),
        ("the rule leaving them out", &hidden),
    );
    Ok(())
}

fn print_pair(what: &str, (base_name, base): (&str, &Load), (name, other): (&str, &Load)) {
    println!("  {what}: {base_name}: {}", base.line());
    println!(
        "  {what}: {name}: {} — pages/s {:.2}x, p99 {:.2}x",
        other.line(),
        other.per_sec / base.per_sec,
        other.p99_ms / base.p99_ms
    );
}
