//! The founding documents' Redis design as a fan-out worker: the commands
//! each event becomes (for `feedlog-bench redis`).

use crate::resp::Resp;
use feedlog::core::event::Event;
use std::collections::{BTreeSet, HashMap, HashSet};

/// The design's fan-out worker: what it keeps in memory, and the commands
/// each event becomes.
pub(super) struct Worker {
    cap: u64,
    /// Followers of each user.
    followers: HashMap<u64, HashSet<u64>>,
    /// Each post's time while live, `None` once deleted (a post id is never
    /// used again, as in feedlog).
    posts: HashMap<(u64, u64), Option<u64>>,
    /// Each author's live posts, `(ts, post)`.
    outboxes: HashMap<u64, BTreeSet<(u64, u64)>>,
    /// Inbox entries written (members of inbox `ZADD`s).
    pub(super) entries: u64,
    /// An upper bound of each inbox's length: an inbox is trimmed only when
    /// it may hold more than the cap (the design at its cheapest; a trim
    /// per insert would double the commands).
    bounds: HashMap<u64, u64>,
    /// The (user, post) pairs liked (the design's sets of liked posts).
    liked: HashSet<(u64, u64)>,
}

/// The key of the sources of `original` in `reader`'s timeline.
pub(super) fn sources_key(reader: u64, original: u64) -> String {
    format!("s:{reader:012}:{original}")
}

/// The design's first page with reposts, server-side in one script (as a
/// feed service would run it): the newest 20 rows of the reader's inbox
/// (`KEYS[1]`, a copy named by `name_pages`, whose reader the hash
/// `readers` names), each with its 10 newest sources and their count.
pub(super) const PAGE_SCRIPT: &str = "\
local reader = redis.call('HGET', 'readers', KEYS[1])
local rows = redis.call('ZREVRANGE', KEYS[1], ARGV[1], ARGV[2], 'WITHSCORES')
local page = {}
for i = 1, #rows, 2 do
  local sources = 's:' .. reader .. ':' .. rows[i]
  page[#page + 1] = {rows[i], rows[i + 1], redis.call('ZREVRANGE', sources, 0, 9),
    redis.call('ZCARD', sources)}
end
return page
";

/// The design's first page with each entry's counts and the reader's
/// flags, server-side in one script (the seeds' page: "set the flags, and
/// assemble each post's counts"): the rows of [`PAGE_SCRIPT`] (with their
/// sources when `ARGV[3]` is 1, a log with reposts), each with `HMGET` of
/// its counts hash `c:{post}` and `SISMEMBER` of the reader's sets of
/// liked and reposted posts.
pub(super) const COUNTS_SCRIPT: &str = "\
local reader = redis.call('HGET', 'readers', KEYS[1])
local rows = redis.call('ZREVRANGE', KEYS[1], ARGV[1], ARGV[2], 'WITHSCORES')
local page = {}
for i = 1, #rows, 2 do
  local post = rows[i]
  local entry = {post, rows[i + 1],
    redis.call('HMGET', string.format('c:%012d', tonumber(post)), 'likes', 'replies', 'reposts'),
    redis.call('SISMEMBER', 'l:' .. reader, post),
    redis.call('SISMEMBER', 'r:' .. reader, post)}
  if ARGV[3] == '1' then
    local sources = 's:' .. reader .. ':' .. post
    entry[#entry + 1] = redis.call('ZREVRANGE', sources, 0, 9)
    entry[#entry + 1] = redis.call('ZCARD', sources)
  end
  page[#page + 1] = entry
end
return page
";

impl Worker {
    pub(super) fn new(cap: u64) -> Worker {
        Worker {
            cap,
            followers: HashMap::new(),
            posts: HashMap::new(),
            outboxes: HashMap::new(),
            entries: 0,
            bounds: HashMap::new(),
            liked: HashSet::new(),
        }
    }

    /// `added` entries went into `user`'s inbox: trims it when it may
    /// hold more than the cap.
    fn grown(&mut self, user: u64, added: u64, out: &mut Resp) {
        self.entries += added;
        let bound = self.bounds.entry(user).or_default();
        *bound += added;
        if *bound > self.cap {
            out.trim(user, self.cap);
            *bound = self.cap;
        }
    }

    /// The design's commands for one event.
    // Long: one arm per event kind, each the design's whole handling of it.
    pub(super) fn apply(&mut self, e: &Event, out: &mut Resp) {
        match *e {
            Event::Follow {
                follower, followee, ..
            } => {
                let (a, b) = (follower.0, followee.0);
                if a == b || !self.followers.entry(b).or_default().insert(a) {
                    return;
                }
                out.command(3);
                out.bytes(b"SADD");
                out.key('f', b);
                out.number(a);
                let newest: Vec<(u64, u64)> = self
                    .outboxes
                    .get(&b)
                    .map(|o| o.iter().rev().take(self.cap as usize).copied().collect())
                    .unwrap_or_default();
                if newest.is_empty() {
                    return;
                }
                out.command(2 + 2 * newest.len());
                out.bytes(b"ZADD");
                out.key('i', a);
                for (ts, post) in &newest {
                    out.number(*ts);
                    out.number(*post);
                }
                self.grown(a, newest.len() as u64, out);
            }
            Event::Unfollow {
                follower, followee, ..
            } => {
                let (a, b) = (follower.0, followee.0);
                if !self.followers.get_mut(&b).is_some_and(|f| f.remove(&a)) {
                    return;
                }
                out.command(3);
                out.bytes(b"SREM");
                out.key('f', b);
                out.number(a);
                let posts: Vec<u64> = self
                    .outboxes
                    .get(&b)
                    .map(|o| o.iter().map(|&(_, p)| p).collect())
                    .unwrap_or_default();
                out.zrem('i', a, &posts);
            }
            Event::Post {
                author,
                post_id,
                ts,
            }
            | Event::PostTo {
                author,
                post_id,
                ts,
                ..
            } => {
                let (author, post, ts) = (author.0, post_id.0, ts.0);
                if self.posts.contains_key(&(author, post)) {
                    return;
                }
                // The design's reply counter: the parent's counts hash
                // (no resolution of a repost's id, no check that either
                // post is live).
                if let Event::PostTo {
                    reply_to: Some((_, parent)),
                    ..
                } = e
                {
                    out.command(4);
                    out.bytes(b"HINCRBY");
                    out.key('c', parent.0);
                    out.bytes(b"replies");
                    out.bytes(b"1");
                }
                self.posts.insert((author, post), Some(ts));
                self.outboxes.entry(author).or_default().insert((ts, post));
                out.command(4);
                out.bytes(b"ZADD");
                out.key('o', author);
                out.number(ts);
                out.number(post);
                // A reply reaches only the followers who also follow the
                // author it replies to, or are them: the home rule of
                // Mastodon, decided when pushed.
                let parent = match e {
                    Event::PostTo {
                        reply_to: Some((y, _)),
                        ..
                    } => Some(y.0).filter(|&y| y != author),
                    _ => None,
                };
                // Out of the map while `grown` borrows the worker.
                let followers = self.followers.remove(&author).unwrap_or_default();
                for &f in &followers {
                    let also = |y| y == f || self.followers.get(&y).is_some_and(|s| s.contains(&f));
                    if parent.is_some_and(|y| !also(y)) {
                        continue;
                    }
                    out.command(4);
                    out.bytes(b"ZADD");
                    out.key('i', f);
                    out.number(ts);
                    out.number(post);
                    self.grown(f, 1, out);
                }
                if !followers.is_empty() {
                    self.followers.insert(author, followers);
                }
            }
            Event::DeletePost {
                author, post_id, ..
            } => {
                let (author, post) = (author.0, post_id.0);
                let Some(ts) = self.posts.insert((author, post), None).flatten() else {
                    return;
                };
                if let Some(o) = self.outboxes.get_mut(&author) {
                    o.remove(&(ts, post));
                }
                out.zrem('o', author, &[post]);
                for &f in self.followers.get(&author).into_iter().flatten() {
                    out.zrem('i', f, &[post]);
                }
            }
            // The design's repost (one timeline row per reader and
            // original, with its sources): the original's id goes into
            // each follower's inbox (sorted set) at the repost's time,
            // which moves it up, and the reposter into the row's sorted
            // set of sources `s:{reader}:{original}` by time (no check that
            // the original is live, no removal when it goes: the design
            // filters when it reads). A page reads both (`PAGE_SCRIPT`).
            Event::Repost {
                author,
                of_post_id,
                ts,
                ..
            } => {
                let followers = self.followers.remove(&author.0).unwrap_or_default();
                for &f in &followers {
                    out.command(4);
                    out.bytes(b"ZADD");
                    out.key('i', f);
                    out.number(ts.0);
                    out.number(of_post_id.0);
                    out.command(4);
                    out.bytes(b"ZADD");
                    out.bytes(sources_key(f, of_post_id.0).as_bytes());
                    out.number(ts.0);
                    out.number(author.0);
                    self.grown(f, 1, out);
                }
                if !followers.is_empty() {
                    self.followers.insert(author.0, followers);
                }
                // The design's counter and flag: the original's counts
                // hash and the reposter's set of reposted posts.
                out.command(4);
                out.bytes(b"HINCRBY");
                out.key('c', of_post_id.0);
                out.bytes(b"reposts");
                out.bytes(b"1");
                out.command(3);
                out.bytes(b"SADD");
                out.key('r', author.0);
                out.number(of_post_id.0);
            }
            // Activity: the push design has nothing to do for it.
            // The design filters nothing: blocks and mutes are feedlog's.
            Event::Seen { .. } | Event::Filter { .. } => {}
            // The design's read marker: the newest place read, per user
            // and feed, in a hash (the seeds' "last read time"; no
            // greatest-of rule, no `force`).
            Event::Mark {
                user,
                feed,
                read_up_to,
                ..
            } => {
                out.command(4);
                out.bytes(b"HSET");
                out.key('m', user.0);
                out.number(u64::from(feed.as_u8()));
                out.number(read_up_to.ts.0);
            }
            // The design's like (the seeds' counter and flag): the post's
            // counts hash `c:{post}` and the user's set of liked posts
            // `l:{user}`, changed when the set does (no resolution of a
            // repost's id, no check that the post is live).
            Event::Like {
                user,
                post_id,
                liked,
                ..
            } => {
                let pair = (user.0, post_id.0);
                let changed = match liked {
                    true => self.liked.insert(pair),
                    false => self.liked.remove(&pair),
                };
                if !changed {
                    return;
                }
                out.command(3);
                out.bytes(if liked { b"SADD" } else { b"SREM" });
                out.key('l', user.0);
                out.number(post_id.0);
                out.command(4);
                out.bytes(b"HINCRBY");
                out.key('c', post_id.0);
                out.bytes(b"likes");
                out.bytes(if liked { b"1" } else { b"-1" });
            }
        }
    }
}
