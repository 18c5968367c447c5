//! `feedlog-bench notifications`: the first page of grouped
//! notifications, feedlog against the seeds' Redis design doing the same
//! grouping server-side, in one run. Each of the readers has 10 posts,
//! each liked 20 times and reposted 5 times, and 30 followers: 280 acts in
//! 21 groups (the likes of a post, its reposts, the follows), every act
//! of a reader at its own time. feedlog answers
//! `GET /v1/users/{u}/notifications?limit=20` over HTTP (wrk); the design
//! keeps each reader's acts in a sorted set by time and answers one Lua
//! script: every act oldest first, grouped by the same rule (one key, a
//! gap of at most 12 hours, fewer than 50 acts), the groups sorted newest
//! first, the first 20 with their newest 10 actors. Both answers are
//! checked to be the same page for every reader before the load.

use crate::common::Cleanup;
use crate::filters::processed;
use crate::http::{paths_script, with_wrk};
use crate::redis_server::RedisServer;
use crate::say::say;
use anyhow::Result;
use feedlog::api::query::Reader;
use feedlog::core::event::{Event, PostId, Ts, UserId};
use feedlog::state::Kept;

/// Readers (users notified): ids 1 to this.
const READERS: u64 = 1_000;
/// Posts per reader.
const POSTS: u64 = 10;
/// Likes per post.
const LIKES: u64 = 20;
/// Reposts per post.
const REPOSTS: u64 = 5;
/// Followers per reader.
const FOLLOWERS: u64 = 30;
/// Groups a page holds.
const PAGE: usize = 20;
/// The first post's time.
const T0: u64 = 1_700_000_000_000;
const HOUR: u64 = 3_600_000;
/// The first actor's id: actors are not readers.
const ACTORS: u64 = 1_000_000;

/// The design's grouping of a reader's acts (members `kind:post:actor`,
/// 12-digit numbers, scored by time), as `core::notification` groups them:
/// each group as `key|count|newest|oldest|actors` (newest 10, newest first).
const GROUPS_SCRIPT: &str = "\
local rows = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local groups, open = {}, {}
for i = 1, #rows, 2 do
  local m, ts = rows[i], tonumber(rows[i + 1])
  local key, actor = string.sub(m, 1, 14), string.sub(m, 16)
  local g = open[key]
  if g == nil or ts - g[3] > 43200000 or g[2] >= 50 then
    g = {key, 0, ts, ts, {}}
    open[key] = g
    groups[#groups + 1] = g
  end
  g[2] = g[2] + 1
  g[3] = ts
  local a = g[5]
  a[#a + 1] = actor
end
table.sort(groups, function(x, y)
  if x[3] ~= y[3] then return x[3] > y[3] end
  return x[1] > y[1]
end)
local page = {}
for i = 1, math.min(tonumber(ARGV[1]), #groups) do
  local g = groups[i]
  local a, newest = g[5], {}
  for j = #a, math.max(1, #a - 9), -1 do newest[#newest + 1] = a[j] end
  page[i] = g[1] .. '|' .. g[2] .. '|' .. string.format('%d', g[3]) .. '|' ..
    string.format('%d', g[4]) .. '|' .. table.concat(newest, ',')
end
return page
";

/// Post `p`'s time for reader `r`: a reader's posts 2 hours apart, readers
/// a millisecond apart.
fn post_ts(r: u64, p: u64) -> u64 {
    T0 + p * 2 * HOUR + r
}

/// One act on a reader, as the design keeps it and as feedlog's event.
struct Act {
    /// `l` (like), `r` (repost) or `f` (follow).
    kind: char,
    post: u64,
    actor: u64,
    ts: u64,
}

/// Reader `r`'s acts: each post's likes and reposts a second apart after
/// it, the follows a second apart before the first post.
fn acts(r: u64) -> Vec<Act> {
    let mut out = Vec::new();
    for p in 1..=POSTS {
        let at = post_ts(r, p);
        for k in 0..LIKES {
            let actor = ACTORS + (r * 7 + p * 31 + k) % 50_000;
            out.push(Act {
                kind: 'l',
                post: p,
                actor,
                ts: at + 1_000 * (k + 1),
            });
        }
        for k in 0..REPOSTS {
            let actor = ACTORS + 60_000 + (r * 3 + p * 11 + k) % 20_000;
            let ts = at + 1_000 * (LIKES + k + 1) + 500;
            out.push(Act {
                kind: 'r',
                post: p,
                actor,
                ts,
            });
        }
    }
    for k in 0..FOLLOWERS {
        let actor = ACTORS + 90_000 + (r * 13 + k) % 30_000;
        out.push(Act {
            kind: 'f',
            post: 0,
            actor,
            ts: T0 - HOUR + 1_000 * k + r,
        });
    }
    out
}

/// The readers' posts, then every act as its event.
fn events() -> Vec<Event> {
    let mut out = Vec::new();
    for r in 1..=READERS {
        for p in 1..=POSTS {
            out.push(Event::Post {
                author: UserId(r),
                post_id: PostId(p),
                ts: Ts(post_ts(r, p)),
            });
        }
    }
    for r in 1..=READERS {
        for a in acts(r) {
            let (actor, ts) = (UserId(a.actor), Ts(a.ts));
            out.push(match a.kind {
                'l' => Event::Like {
                    user: actor,
                    author: UserId(r),
                    post_id: PostId(a.post),
                    liked: true,
                    ts,
                },
                // The repost's own id: one per reader and post.
                'r' => Event::Repost {
                    author: actor,
                    post_id: PostId(r * 100 + a.post),
                    of_author: UserId(r),
                    of_post_id: PostId(a.post),
                    ts,
                },
                _ => Event::Follow {
                    follower: actor,
                    followee: UserId(r),
                    ts,
                },
            });
        }
    }
    out
}

/// Writes each reader's acts to `n:{index:012}`, the key redis-benchmark's
/// `__rand_int__` names.
fn write_acts(server: &RedisServer) -> Result<()> {
    let mut c = server.connect()?;
    let mut queued = 0;
    for r in 1..=READERS {
        let key = format!("n:{:012}", r - 1);
        for a in acts(r) {
            let member = format!("{}:{:012}:{:012}", a.kind, a.post, a.actor);
            let score = a.ts.to_string();
            c.queue(&[b"ZADD", key.as_bytes(), score.as_bytes(), member.as_bytes()]);
            queued += 1;
        }
    }
    c.flush()?;
    for _ in 0..queued {
        c.reply_line()?;
    }
    Ok(())
}

/// Reader `r`'s first page as the design's script answers it, from
/// feedlog's answer: `key|count|newest|oldest|actors`.
fn as_design(reader: &Reader, r: u64) -> Result<Vec<String>> {
    let page = reader.notifications(UserId(r), (PAGE, None), true, None)?;
    Ok(page
        .items
        .iter()
        .map(|g| {
            let kind = match g.kind {
                "like" => 'l',
                "repost" => 'r',
                _ => 'f',
            };
            let post = g.post.as_ref().map_or(0, |p| p.post_id);
            let actors: Vec<String> = g.actors.iter().map(|a| format!("{a:012}")).collect();
            format!(
                "{kind}:{post:012}|{}|{}|{}|{}",
                g.count,
                g.newest_ts,
                g.oldest_ts,
                actors.join(",")
            )
        })
        .collect())
}

/// The run, as the module says.
pub fn notifications(partitions: u32, threads: usize, connections: usize, secs: u64) -> Result<()> {
    let Some((server_bin, bench_bin)) = crate::redis_server::tools("notifications") else {
        return Ok(());
    };
    let wrk = crate::http::need_wrk()?;
    let tmp = std::env::temp_dir().join(format!(
        "feedlog-bench-notifications-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&tmp)?;
    let _cleanup = Cleanup(tmp.clone());
    let events = events();
    let per_reader = POSTS * (LIKES + REPOSTS) + FOLLOWERS;
    say!(
        "setup: {READERS} readers, each with {POSTS} posts liked {LIKES} and reposted {REPOSTS} \
         times and {FOLLOWERS} followers ({per_reader} acts, {} groups each; {} events, \
         {partitions} partitions)",
        2 * POSTS + 1,
        events.len()
    );
    let (dir, per_sec, _) = processed(&tmp.join("feedlog"), partitions, &events)?;
    say!("processed at {per_sec:.0} events/s");
    let server = RedisServer::start(&server_bin, &tmp)?;
    write_acts(&server)?;
    let sha = server.load_script(GROUPS_SCRIPT)?;
    // Every reader's page is checked before the load: the same groups.
    let reader = Reader::open(&dir)?;
    let limit = PAGE.to_string();
    for r in 1..=READERS {
        let ours = as_design(&reader, r)?;
        let theirs = server.eval(&sha, &format!("n:{:012}", r - 1), &[&limit])?;
        let theirs: Vec<String> = theirs
            .into_iter()
            .map(|g| String::from_utf8_lossy(&g).into_owned())
            .collect();
        anyhow::ensure!(ours.len() == PAGE, "reader {r}: {} groups", ours.len());
        anyhow::ensure!(
            ours == theirs,
            "reader {r}: {ours:?}\n  vs the design's {theirs:?}"
        );
    }
    let paths: Vec<String> = (1..=READERS)
        .map(|u| format!("/v1/users/{u}/notifications?limit={PAGE}"))
        .collect();
    println!(
        "first pages of {PAGE} grouped notifications, {per_reader} acts per reader \
         ({threads} server threads, {connections} connections, {secs}s):"
    );
    let load = with_wrk(
        &wrk,
        &dir,
        Reader::open_keeping(&dir, Kept::DEFAULT)?,
        &paths_script(&paths),
        threads,
        connections,
        secs,
    )?;
    println!("  feedlog notifications: {}", load.line());
    let redis = server.script_under_load(
        &bench_bin,
        (&sha, "n", &[&limit]),
        READERS as usize,
        (threads, connections),
        secs,
    )?;
    println!("  redis grouping script: {}", redis.line());
    println!(
        "  ratio feedlog/redis pages/s: {:.2}",
        load.per_sec / redis.per_sec
    );
    Ok(())
}
