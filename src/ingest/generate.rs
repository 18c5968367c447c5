//! Generated social networks with a realistic shape, for the demo and the
//! benchmarks: power-law followers (a few accounts with 10^4–10^5 followers
//! at the default sizes), bursts of posts, new follows, unfollows and
//! deletes. Deterministic for a seed.

use crate::core::event::{Event, Feed, FilterChange, Place, PostId, Ts, UserId};

/// SplitMix64: a tiny deterministic generator (same output every run).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `1..=n`.
    pub fn uniform(&mut self, n: u64) -> u64 {
        1 + self.next_u64() % n.max(1)
    }

    /// A power-law pick in `1..=n` (P(i) ∝ 1/i): small values are popular.
    pub fn zipf(&mut self, n: u64) -> u64 {
        ((n as f64).powf(self.unit()).floor() as u64).clamp(1, n)
    }
}

/// A follow graph: who follows whom, as the activity generator sees it.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// `followees[u]` for users `1..=users` (index 0 unused).
    followees: Vec<Vec<u64>>,
    /// Users by follower count, most followed first.
    by_followers: Vec<u64>,
}

impl Graph {
    /// A graph from follow edges `(follower, followee)`.
    pub fn from_edges(edges: impl IntoIterator<Item = (u64, u64)>) -> Graph {
        let mut followees: Vec<Vec<u64>> = vec![Vec::new()];
        let mut followers: Vec<u64> = vec![0];
        for (a, b) in edges {
            let need = a.max(b) as usize + 1;
            if followees.len() < need {
                followees.resize(need, Vec::new());
                followers.resize(need, 0);
            }
            followees[a as usize].push(b);
            followers[b as usize] += 1;
        }
        let mut by_followers: Vec<u64> = (1..followers.len() as u64).collect();
        by_followers.sort_by_key(|&u| (std::cmp::Reverse(followers[u as usize]), u));
        Graph {
            followees,
            by_followers,
        }
    }

    /// The highest user id.
    pub fn users(&self) -> u64 {
        self.followees.len().saturating_sub(1) as u64
    }

    /// The most followed user (1 when the graph is empty).
    pub fn most_followed(&self) -> u64 {
        self.by_followers.first().copied().unwrap_or(1)
    }
}

/// A power-law follow graph: each of `users` users follows up to `follows`
/// distinct others, chosen with P(i) ∝ 1/i. Returns the follow events in
/// order, `ts` from `start_ms` one millisecond apart.
pub fn follows(users: u64, follows: u64, start_ms: u64, rng: &mut Rng) -> Vec<Event> {
    let mut out = Vec::with_capacity((users * follows) as usize);
    let mut ts = start_ms;
    let mut picked = Vec::new();
    for follower in 1..=users {
        picked.clear();
        for _ in 0..follows {
            let followee = rng.zipf(users);
            if followee != follower && !picked.contains(&followee) {
                picked.push(followee);
                ts += 1;
                out.push(Event::Follow {
                    follower: UserId(follower),
                    followee: UserId(followee),
                    ts: Ts(ts),
                });
            }
        }
    }
    out
}

/// Share of a follow-heavy network's actions taken by users in popularity
/// order (the most followed act the most) rather than in the shuffled
/// order: it sets how many inbox entries an event makes (about 4.5 at a
/// million events among 300,000 users, as in the follow-heavy real networks
/// this shape stands for).
const POPULAR_ACT: f64 = 0.005;

/// A follow-heavy network over time, the shape of messaging networks
/// (every first contact a follow, every message a post): `events` events
/// among `users` users; each is an attempted first-contact follow with
/// probability `follow_share` (one that repeats a pair is a post instead),
/// else a post. Who acts is a power law over a shuffled order of the users
/// (most act a few times, every active user also posts; a small share of
/// actions, [`POPULAR_ACT`], by the users in popularity order); whom they
/// follow is a power law over the users in order (a few accounts gather
/// many followers, most have a handful). `ts` from `start_ms` one
/// millisecond apart; post ids count up from 1.
pub fn follow_heavy(
    users: u64,
    events: u64,
    follow_share: f64,
    start_ms: u64,
    rng: &mut Rng,
) -> Vec<Event> {
    let users = users.max(2);
    // A bijection of 1..=users, multiplying by a number coprime to `users`
    // near users / φ, that spreads the most active users evenly over the
    // ids, away from the most followed ones (the smallest ids).
    let golden = (users as f64 * 0.618_033_988_75) as u64;
    let stride = (golden.max(1)..).find(|s| gcd(*s, users) == 1).unwrap_or(1);
    let actor = |rank: u64| rank % users * stride % users + 1;
    let mut followed = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(events as usize);
    let mut post_id = 0;
    for i in 0..events {
        let ts = Ts(start_ms + i + 1);
        let rank = rng.zipf(users);
        let user = if rng.unit() < POPULAR_ACT {
            rank
        } else {
            actor(rank)
        };
        let target = rng.zipf(users);
        if rng.unit() < follow_share && target != user && followed.insert((user, target)) {
            out.push(Event::Follow {
                follower: UserId(user),
                followee: UserId(target),
                ts,
            });
        } else {
            post_id += 1;
            out.push(Event::Post {
                author: UserId(user),
                post_id: PostId(post_id),
                ts,
            });
        }
    }
    out
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// What happens on the network after its follow graph is built.
#[derive(Debug, Clone, Copy)]
pub struct Activity {
    /// Posts to write (in bursts of 1–5 by one author).
    pub posts: u64,
    /// Share of posts by the most followed accounts (power-law over the
    /// follower ranking); the rest are by uniformly chosen users.
    pub celebrity_share: f64,
    /// Unfollows per post.
    pub unfollow_rate: f64,
    /// New follows per post.
    pub follow_rate: f64,
    /// Deletes (of a recent post) per post.
    pub delete_rate: f64,
    /// Share of users who never act after the graph is built (no post,
    /// follow, unfollow or `seen`; the most followed accounts' posts
    /// excepted): the readers who stop coming back.
    pub dormant_share: f64,
    /// `seen` events (an app opened) per post, by uniformly chosen users
    /// who are not dormant.
    pub seen_rate: f64,
    /// Reposts per post, by users who are not dormant: mostly of the most
    /// followed accounts' recent posts, else of any recent post, one in ten
    /// of a recent repost (which reposts its original).
    pub repost_rate: f64,
    /// Filter events per post, by users who are not dormant, of one of
    /// their followees: mutes (a third of them ending within a day of log
    /// time), hidden reposts and blocks, and one in four an undo of an
    /// earlier one.
    pub filter_rate: f64,
    /// Likes per post, by users who are not dormant, drawn as reposts are
    /// (a tenth of them of a repost's id); one in ten is an unlike of an
    /// earlier like.
    pub like_rate: f64,
    /// Share of posts that reply to a post drawn as likes are (mostly the
    /// most followed accounts' recent posts; a tenth of a repost's id).
    pub reply_share: f64,
    /// Share of posts that mention one to three users (not the author).
    pub mention_share: f64,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            posts: 100_000,
            celebrity_share: 0.002,
            unfollow_rate: 0.05,
            follow_rate: 0.05,
            delete_rate: 0.01,
            dormant_share: 0.0,
            seen_rate: 0.0,
            repost_rate: 0.0,
            filter_rate: 0.0,
            like_rate: 0.0,
            reply_share: 0.0,
            mention_share: 0.0,
        }
    }
}

/// Whether `user` is among the `share` of users who never act (a fixed
/// hash of the id, so the same users whatever the seed).
pub fn dormant(user: u64, share: f64) -> bool {
    share > 0.0 && Rng(user).unit() < share
}

/// Posts, reposts, likes, follows, unfollows, deletes and `seen` events over
/// `graph`, `ts` from `start_ms`. Post and repost ids are `first_post_id..`.
// Long: one pass over log time that draws every kind of event from the same
// running state (the pools of recent and famous posts, the follow graph),
// so the kinds stay interleaved as a real network's are.
pub fn activity(
    graph: &mut Graph,
    a: Activity,
    start_ms: u64,
    first_post_id: u64,
    rng: &mut Rng,
) -> Vec<Event> {
    let users = graph.users().max(2);
    graph.followees.resize(users as usize + 1, Vec::new());
    let mut out = Vec::new();
    let mut ts = start_ms;
    let mut post_id = first_post_id;
    let mut recent: Vec<(u64, u64)> = Vec::new();
    // The newest post written: where a reader who opens the app reads up to.
    let mut newest = Place::default();
    // Recent posts of the most followed accounts, and recent reposts.
    let mut famous: Vec<(u64, u64)> = Vec::new();
    let mut reposts: Vec<(u64, u64)> = Vec::new();
    // Filters on, to undo some: (user, target, the undoing kind).
    let mut filters: Vec<(u64, u64, FilterChange)> = Vec::new();
    // Likes given, to undo some: (user, author, post).
    let mut liked: Vec<(u64, u64, u64)> = Vec::new();
    let n_top = (graph.by_followers.len() / 100).max(1);
    let top: std::collections::HashSet<u64> =
        graph.by_followers.iter().take(n_top).copied().collect();
    let mut written = 0;
    // A uniformly chosen user who is not dormant (any, if all are).
    let active = |rng: &mut Rng| {
        let mut u = rng.uniform(users);
        for _ in 0..64 {
            if !dormant(u, a.dormant_share) {
                break;
            }
            u = rng.uniform(users);
        }
        u
    };
    while written < a.posts {
        let author = if rng.unit() < a.celebrity_share && !graph.by_followers.is_empty() {
            graph.by_followers[rng.zipf(graph.by_followers.len() as u64) as usize - 1]
        } else {
            active(rng)
        };
        let burst = 1 + rng.next_u64() % 5;
        for _ in 0..burst.min(a.posts - written) {
            ts += 1 + rng.next_u64() % 50;
            let pools = (recent.as_slice(), famous.as_slice(), reposts.as_slice());
            let (reply_to, mentions) = addressed(&a, author, pools, rng, &active);
            let id = (UserId(author), PostId(post_id));
            out.push(Event::post(id.0, id.1, Ts(ts), reply_to, mentions));
            newest = Place {
                ts: Ts(ts),
                post_id: id.1,
                author: id.0,
            };
            recent.push((author, post_id));
            if recent.len() > 1000 {
                recent.swap_remove((rng.next_u64() % 1000) as usize);
            }
            if top.contains(&author) {
                famous.push((author, post_id));
                if famous.len() > 200 {
                    famous.remove(0);
                }
            }
            post_id += 1;
            written += 1;
        }
        let mut repost = a.repost_rate * burst as f64;
        while repost > 0.0 {
            let pool = match rng.unit() {
                x if x < 0.1 && !reposts.is_empty() => &reposts,
                x if x < 0.8 && !famous.is_empty() => &famous,
                _ => &recent,
            };
            if rng.unit() < repost && !pool.is_empty() {
                let (of_author, of_post_id) = pool[(rng.next_u64() as usize) % pool.len()];
                let reposter = active(rng);
                ts += 1;
                out.push(Event::Repost {
                    author: UserId(reposter),
                    post_id: PostId(post_id),
                    of_author: UserId(of_author),
                    of_post_id: PostId(of_post_id),
                    ts: Ts(ts),
                });
                reposts.push((reposter, post_id));
                if reposts.len() > 200 {
                    reposts.remove(0);
                }
                post_id += 1;
            }
            repost -= 1.0;
        }
        let pools = (recent.as_slice(), famous.as_slice(), reposts.as_slice());
        likes(
            &mut out,
            (a.like_rate * burst as f64, &mut liked),
            pools,
            (&mut ts, &mut *rng),
            &active,
        );
        if rng.unit() < a.delete_rate * burst as f64 && !recent.is_empty() {
            let (author, id) = recent.swap_remove((rng.next_u64() as usize) % recent.len());
            ts += 1;
            out.push(Event::DeletePost {
                author: UserId(author),
                post_id: PostId(id),
                ts: Ts(ts),
            });
        }
        let mut seen = a.seen_rate * burst as f64;
        while seen > 0.0 {
            if rng.unit() < seen {
                ts += 1;
                let user = UserId(active(rng));
                // Half the readers (the even ids) mark their home timeline
                // read up to the newest post; the others only open the app.
                out.push(match user.0 % 2 {
                    0 => Event::Mark {
                        user,
                        ts: Ts(ts),
                        feed: Feed::Home,
                        read_up_to: newest,
                        force: false,
                    },
                    _ => Event::Seen { user, ts: Ts(ts) },
                });
            }
            seen -= 1.0;
        }
        if rng.unit() < a.filter_rate * burst as f64 {
            ts += 1;
            if let Some(e) = filter_event(graph, &mut filters, active(rng), ts, rng) {
                out.push(e);
            }
        }
        if rng.unit() < a.unfollow_rate * burst as f64 {
            let u = active(rng);
            let list = &mut graph.followees[u as usize];
            if !list.is_empty() {
                let followee = list.swap_remove((rng.next_u64() as usize) % list.len());
                ts += 1;
                out.push(Event::Unfollow {
                    follower: UserId(u),
                    followee: UserId(followee),
                    ts: Ts(ts),
                });
            }
        }
        if rng.unit() < a.follow_rate * burst as f64 {
            let u = active(rng);
            let followee = rng.zipf(users);
            if followee != u && !graph.followees[u as usize].contains(&followee) {
                graph.followees[u as usize].push(followee);
                ts += 1;
                out.push(Event::Follow {
                    follower: UserId(u),
                    followee: UserId(followee),
                    ts: Ts(ts),
                });
            }
        }
    }
    out
}

/// Pools of posts to pick from: (recent, famous, reposts).
type Pools<'a> = (&'a [(u64, u64)], &'a [(u64, u64)], &'a [(u64, u64)]);

/// The pool a like or reply picks from: a tenth of the time the reposts,
/// most of the rest the most followed accounts' recent posts.
fn pool<'a>((recent, famous, reposts): Pools<'a>, rng: &mut Rng) -> &'a [(u64, u64)] {
    match rng.unit() {
        x if x < 0.1 && !reposts.is_empty() => reposts,
        x if x < 0.7 && !famous.is_empty() => famous,
        _ => recent,
    }
}

/// A post of `pool`, if it has any.
fn pick(pool: &[(u64, u64)], rng: &mut Rng) -> Option<(u64, u64)> {
    pool.get((rng.next_u64() as usize) % pool.len().max(1))
        .copied()
}

/// What a new post of `author` replies to and mentions, at the shares of
/// `a` (no draw at a share of 0: the same log as before them).
fn addressed(
    a: &Activity,
    author: u64,
    pools: Pools<'_>,
    rng: &mut Rng,
    who: &dyn Fn(&mut Rng) -> u64,
) -> (Option<(UserId, PostId)>, Vec<UserId>) {
    let reply_to = match a.reply_share > 0.0 && rng.unit() < a.reply_share {
        true => {
            let pool = pool(pools, rng);
            pick(pool, rng).map(|(a, p)| (UserId(a), PostId(p)))
        }
        false => None,
    };
    let mut mentions = Vec::new();
    if a.mention_share > 0.0 && rng.unit() < a.mention_share {
        for _ in 0..1 + rng.next_u64() % 3 {
            let m = UserId(who(rng));
            if m.0 != author && !mentions.contains(&m) {
                mentions.push(m);
            }
        }
    }
    (reply_to, mentions)
}

/// About `rate` like events at `ts` on: by users `who` picks, of a post
/// from the pools (recent, famous, reposts; drawn as reposts are), one in
/// ten an unlike of an earlier like still in `liked`.
fn likes(
    out: &mut Vec<Event>,
    (mut rate, liked): (f64, &mut Vec<(u64, u64, u64)>),
    (recent, famous, reposts): Pools<'_>,
    (ts, rng): (&mut u64, &mut Rng),
    who: &dyn Fn(&mut Rng) -> u64,
) {
    while rate > 0.0 {
        if rng.unit() < rate {
            let user = who(rng);
            let pool = pool((recent, famous, reposts), rng);
            let undo = !liked.is_empty() && rng.unit() < 0.1;
            let (user, author, post, on) = if undo {
                let (u, a, p) = liked.swap_remove((rng.next_u64() as usize) % liked.len());
                (u, a, p, false)
            } else if let Some((a, p)) = pick(pool, rng) {
                liked.push((user, a, p));
                if liked.len() > 1000 {
                    liked.swap_remove(0);
                }
                (user, a, p, true)
            } else {
                rate -= 1.0;
                continue;
            };
            *ts += 1;
            out.push(Event::Like {
                user: UserId(user),
                author: UserId(author),
                post_id: PostId(post),
                liked: on,
                ts: Ts(*ts),
            });
        }
        rate -= 1.0;
    }
}

/// Filters on: (user, target, the change that undoes it).
type On = Vec<(u64, u64, FilterChange)>;

/// A filter event by `user` at `ts`: the undo of a filter on (one in four),
/// else a mute (a third of them ending within a day), hidden reposts or a
/// block of a followee; `None` when the user follows nobody.
fn filter_event(graph: &Graph, on: &mut On, user: u64, ts: u64, rng: &mut Rng) -> Option<Event> {
    let event = |user: u64, target: u64, change| Event::Filter {
        user: UserId(user),
        target: UserId(target),
        change,
        ts: Ts(ts),
    };
    if !on.is_empty() && rng.unit() < 0.25 {
        let (user, target, undo) = on.swap_remove((rng.next_u64() as usize) % on.len());
        return Some(event(user, target, undo));
    }
    let followees = graph.followees.get(user as usize)?;
    if followees.is_empty() {
        return None;
    }
    let target = followees[(rng.next_u64() as usize) % followees.len()];
    let (change, undo) = match rng.unit() {
        x if x < 0.2 => {
            let until = Ts(ts + 1 + rng.next_u64() % 86_400_000);
            (
                FilterChange::Mute { until: Some(until) },
                FilterChange::Unmute,
            )
        }
        x if x < 0.6 => (FilterChange::Mute { until: None }, FilterChange::Unmute),
        x if x < 0.8 => (FilterChange::HideReposts, FilterChange::ShowReposts),
        _ => (FilterChange::Block, FilterChange::Unblock),
    };
    on.push((user, target, undo));
    if on.len() > 1000 {
        on.swap_remove(0);
    }
    Some(event(user, target, change))
}

#[cfg(test)]
mod tests;
