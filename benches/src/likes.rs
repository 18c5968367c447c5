//! `feedlog-bench likes`: likes applied per second, feedlog against the
//! seeds' Redis design on the same likes, in one run. The design's like is
//! an `SADD` to the user's set of liked posts and an `HINCRBY` of the
//! post's counts hash, sent over one pipelined connection with no reply
//! awaited (the design at its fastest: no check that the post is live, no
//! resolution of a repost's id, nothing durable). feedlog applies each
//! like at the liker's partition and registers it with the post's
//! (counts, likers list, the liker's flag), committing every batch
//! durably. Both sides first take the same posts (untimed); then the likes
//! and unlikes are timed alone.

use crate::common::{run_until_idle, Cleanup};
use crate::filters::processed;
use crate::http::which;
use crate::redis_server::RedisServer;
use crate::say::say;
use anyhow::Result;
use feedlog::core::codec::Format;
use feedlog::core::event::{Event, PostId, Ts, UserId};
use feedlog::ingest::produce::Producer;
use feedlog::task::embedded::{Processor, ProcessorConfig};

/// Users who like.
const USERS: u64 = 20_000;
/// Authors, each posting [`POSTS`] times.
const AUTHORS: u64 = 2_000;
/// Posts per author.
const POSTS: u64 = 25;
/// Likes (a tenth of them undone later by an unlike).
const LIKES: u64 = 200_000;

/// The posts (untimed setup), then the likes and unlikes: each like by a
/// user drawn uniformly, of a post drawn with a skew toward the first
/// (popular) ones.
fn events() -> (Vec<Event>, Vec<Event>) {
    let mut ts = 1_700_000_000_000u64;
    let mut posts = Vec::new();
    for n in 0..POSTS {
        for a in 1..=AUTHORS {
            ts += 1;
            posts.push(Event::Post {
                author: UserId(a),
                post_id: PostId(n + 1),
                ts: Ts(ts),
            });
        }
    }
    // xorshift64*: the same likes every run.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    };
    let total = (AUTHORS * POSTS) as f64;
    let mut likes = Vec::new();
    let mut undo = Vec::new();
    for i in 0..LIKES {
        ts += 1;
        let user = UserId(10_000 + (next() * USERS as f64) as u64);
        let k = (next().powi(3) * total) as u64;
        let (author, post_id) = (UserId(k % AUTHORS + 1), PostId(k / AUTHORS + 1));
        let like = |liked, ts| Event::Like {
            user,
            author,
            post_id,
            liked,
            ts: Ts(ts),
        };
        likes.push(like(true, ts));
        if i % 10 == 0 {
            undo.push(like(false, ts + LIKES));
        }
    }
    likes.extend(undo);
    (posts, likes)
}

/// The run, as the module says.
pub fn likes(partitions: u32) -> Result<()> {
    let Some(server_bin) = which("redis-server") else {
        say!(
            "feedlog-bench likes: skipped: redis-server is not installed \
             (Debian/Ubuntu: apt-get install redis-server; scripts/setup.sh --bench installs it)"
        );
        return Ok(());
    };
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-likes-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let _cleanup = Cleanup(tmp.clone());
    let (posts, likes) = events();
    say!(
        "setup: {} posts by {AUTHORS} authors; then {} likes and unlikes by {USERS} users \
         ({partitions} partitions)",
        posts.len(),
        likes.len()
    );
    let (dir, _, _) = processed(&tmp.join("feedlog"), partitions, &posts)?;
    let mut producer = Producer::new(&dir)?;
    for e in &likes {
        producer.event(e, Format::Postcard)?;
    }
    producer.finish()?;
    drop(producer);
    let processor = Processor::open(&dir, ProcessorConfig::default())?;
    let (_, feed_secs) = run_until_idle(&processor)?;
    drop(processor);

    let server = RedisServer::start(&server_bin, &tmp)?;
    server.replay(&posts.iter().collect::<Vec<_>>(), u64::MAX)?;
    let (_, commands, redis_secs) = server.replay(&likes.iter().collect::<Vec<_>>(), u64::MAX)?;
    let n = likes.len() as f64;
    println!(
        "likes and unlikes applied, the posts in place ({} events):",
        likes.len()
    );
    println!(
        "  feedlog (embedded log, durable): {feed_secs:.2}s = {:.0} likes/s",
        n / feed_secs
    );
    println!(
        "  redis (SADD + HINCRBY, {commands} commands by mass insertion, in memory): \
         {redis_secs:.2}s = {:.0} likes/s",
        n / redis_secs
    );
    println!(
        "  ratio feedlog/redis likes/s: {:.2}",
        redis_secs / feed_secs
    );
    Ok(())
}
