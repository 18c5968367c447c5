//! The oracle: the contract of docs/semantics.md as a small in-memory
//! model. Feed it the valid events in log order; ask it for any view.

use feedlog::api::query::Replies;
use feedlog::core::event::{Event, FilterChange};
use feedlog::core::partition::partition_for;
use feedlog::core::Partition;
use feedlog::UserId;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A like or unlike as the oracle keeps it: whether it is a like, its
/// place in the log, its time.
type LikeAt = (bool, u64, u64);

#[path = "oracle_likes.rs"]
mod likes;
#[path = "oracle_markers.rs"]
pub mod markers;
#[path = "oracle_notifications.rs"]
mod notifications;
#[path = "oracle_why.rs"]
mod why;
pub use why::At;

/// Repost links a repost's resolution follows at most (docs/semantics.md,
/// "Follows, posts and reposts"): a chain longer than that, or a cycle, resolves to nothing.
pub const MAX_REPOST_HOPS: usize = feedlog::core::event::MAX_REPOST_HOPS as usize;

/// What an (author, id) pair is: set by its first post or repost event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Original { ts: u64 },
    Repost { ts: u64, of: (u64, u64) },
}

#[derive(Debug, Clone, Copy, Default)]
struct Id {
    kind: Option<Kind>,
    deleted: bool,
    /// Where the event that set `kind` sits.
    made_at: Option<At>,
    /// The first deletion: its time and position.
    deleted_at: Option<(u64, At)>,
}

/// A post's `reply_to` and `mentions`.
type Addressed = (Option<(u64, u64)>, Vec<u64>);

/// How the timeline places a post that has reposts (`?reposts=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// At its newest appearance (the default).
    Newest,
    /// At its oldest appearance.
    First,
    /// Reposts ignored: originals of followed authors only.
    None,
}

impl Mode {
    /// Every mode, the default first.
    pub const ALL: [Mode; 3] = [Mode::Newest, Mode::First, Mode::None];

    /// The query parameter's value.
    pub fn param(self) -> &'static str {
        match self {
            Mode::Newest => "newest",
            Mode::First => "first",
            Mode::None => "none",
        }
    }
}

/// One appearance of a post in a reader's view: the original (via its
/// author, id = the post's) or a repost (via the reposter, id = the repost's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Appearance {
    ts: u64,
    id: u64,
    via: u64,
    repost: bool,
}

/// The final state of a log, and every view derived from it.
#[derive(Debug, Default, Clone)]
pub struct Oracle {
    /// (follower, followee) -> (first follow time, latest follow time), for
    /// followed edges only (counted or void).
    edges: BTreeMap<(u64, u64), (u64, u64)>,
    /// (blocker, blocked) -> (block on, greatest end of an ended period).
    blocks: BTreeMap<(u64, u64), (bool, Option<u64>)>,
    /// (user, muted) -> the mute's end, for mutes on.
    mutes: BTreeMap<(u64, u64), Option<u64>>,
    /// (user, muted) whose mute on keeps notifications.
    mutes_keeping: BTreeSet<(u64, u64)>,
    /// (user, other) whose reposts the user hides.
    hidden_reposts: BTreeSet<(u64, u64)>,
    /// The greatest event time of each actor (partition clocks are made of them).
    clocks: BTreeMap<u64, u64>,
    /// Partitions the state is processed in (0 counts as 1): a mute's end
    /// is judged by the reader's partition's clock.
    pub partitions: u32,
    /// (author, id) -> what it is and whether it was deleted.
    ids: BTreeMap<(u64, u64), Id>,
    /// Every user any applied event names.
    named: BTreeSet<u64>,
    /// Whether any repost event was applied (views skip repost work without).
    any_repost: bool,
    /// Events applied per partition: the next event's offset there.
    offsets: BTreeMap<Partition, u64>,
    /// Set when the log holds records the oracle was not given (invalid
    /// ones, copies forwarded to their owner): the offsets it counts are
    /// not the events' positions, and checks leave positions out.
    pub positions_unknown: bool,
    /// Every live repost by its original, computed when first asked after
    /// an event (`why` answers ask it often).
    reposts_by_root: std::cell::RefCell<Option<why::ByRoot>>,
    /// (follower, followee) -> positions of the first follow and of the
    /// follow at the latest time, for followed edges.
    follow_at: BTreeMap<(u64, u64), (At, At)>,
    /// (follower, followee) -> the time and position of the unfollow that
    /// ended the edge's last follow.
    unfollowed: BTreeMap<(u64, u64), (u64, At)>,
    /// (blocker, blocked) -> when and where the block on now started.
    block_since: BTreeMap<(u64, u64), (u64, At)>,
    /// (user, muted) -> the time and position of the mute on now.
    mute_since: BTreeMap<(u64, u64), (u64, At)>,
    /// (user, other) -> when and where the hiding of reposts on now started.
    hide_since: BTreeMap<(u64, u64), (u64, At)>,
    /// (liker, post named) -> (liked, the event's place in the liker's
    /// log order, its time): each pair's latest like or unlike.
    likes: BTreeMap<(u64, (u64, u64)), LikeAt>,
    /// (user, named post) -> where the latest like or unlike sits.
    like_at: BTreeMap<(u64, (u64, u64)), At>,
    /// Events applied so far (orders each user's likes).
    applied: u64,
    /// (author, id) -> the post `reply_to` names and the users mentioned,
    /// of a post that replies or mentions (its first post event).
    addressed: BTreeMap<(u64, u64), Addressed>,
    /// Every live original's counts and flags, computed when first asked
    /// after an event.
    engagements: std::cell::RefCell<Option<std::sync::Arc<likes::Engagements>>>,
    /// (user, feed) -> the user's `seen` events of the feed, in order.
    marks: BTreeMap<(u64, feedlog::core::event::Feed), Vec<markers::Mark>>,
}

impl Oracle {
    /// An oracle of a state processed in `partitions` partitions.
    pub fn with_partitions(partitions: u32) -> Oracle {
        Oracle {
            partitions,
            ..Oracle::default()
        }
    }

    /// Applies one valid event; events of one actor must come in log order.
    /// Its position is taken to be the next offset of its actor's
    /// partition: every event applied, in order, each in its own
    /// partition (as the core's simulation writes them).
    pub fn apply(&mut self, event: &Event) {
        let p = partition_for(event.actor(), self.partitions.max(1));
        let next = self.offsets.entry(p).or_default();
        let at = At {
            partition: p.0,
            offset: *next,
        };
        *next += 1;
        self.apply_at(event, at);
    }

    /// Applies one valid event, at position `at` of the log.
    pub fn apply_at(&mut self, event: &Event, at: At) {
        *self.reposts_by_root.get_mut() = None;
        *self.engagements.get_mut() = None;
        self.applied += 1;
        match *event {
            Event::Follow {
                follower, followee, ..
            }
            | Event::Unfollow {
                follower, followee, ..
            } => self.named.extend([follower.0, followee.0]),
            Event::Post { author, .. }
            | Event::PostTo { author, .. }
            | Event::DeletePost { author, .. } => {
                self.named.insert(author.0);
            }
            Event::Repost {
                author, of_author, ..
            } => {
                self.any_repost = true;
                self.named.extend([author.0, of_author.0]);
            }
            Event::Seen { user, .. } | Event::Mark { user, .. } => {
                self.named.insert(user.0);
            }
            Event::Filter { user, target, .. } => self.named.extend([user.0, target.0]),
            Event::Like { user, author, .. } => self.named.extend([user.0, author.0]),
        }
        let clock = self.clocks.entry(event.actor().0).or_default();
        *clock = (*clock).max(event.ts().0);
        match *event {
            Event::PostTo {
                author,
                post_id,
                ts,
                reply_to,
                ref mentions,
            } => {
                let id = self.ids.entry((author.0, post_id.0)).or_default();
                if id.kind.is_none() {
                    (id.kind, id.made_at) = (Some(Kind::Original { ts: ts.0 }), Some(at));
                    let to = reply_to.map(|(a, p)| (a.0, p.0));
                    let named = mentions.iter().map(|m| m.0).collect();
                    self.addressed.insert((author.0, post_id.0), (to, named));
                }
            }
            Event::Follow {
                follower,
                followee,
                ts,
            } => {
                let pair = (follower.0, followee.0);
                let e = self.edges.entry(pair).or_insert((ts.0, ts.0));
                let pos = self.follow_at.entry(pair).or_insert((at, at));
                if ts.0 > e.1 {
                    (e.1, pos.1) = (ts.0, at);
                }
            }
            Event::Filter {
                user,
                target,
                change,
                ts,
            } => {
                let pair = (user.0, target.0);
                let block = self.blocks.entry(pair).or_default();
                match change {
                    FilterChange::Block if !block.0 => {
                        block.0 = true;
                        self.block_since.insert(pair, (ts.0, at));
                    }
                    FilterChange::Block => {}
                    FilterChange::Unblock if block.0 => {
                        *block = (false, Some(block.1.map_or(ts.0, |e| e.max(ts.0))));
                    }
                    FilterChange::Unblock => {}
                    FilterChange::Mute { until }
                    | FilterChange::MuteKeepingNotifications { until } => {
                        self.mutes.insert(pair, until.map(|u| u.0));
                        self.mute_since.insert(pair, (ts.0, at));
                        match change {
                            FilterChange::Mute { .. } => self.mutes_keeping.remove(&pair),
                            _ => self.mutes_keeping.insert(pair),
                        };
                    }
                    FilterChange::Unmute => {
                        self.mutes.remove(&pair);
                        self.mutes_keeping.remove(&pair);
                    }
                    FilterChange::HideReposts => {
                        if self.hidden_reposts.insert(pair) {
                            self.hide_since.insert(pair, (ts.0, at));
                        }
                    }
                    FilterChange::ShowReposts => {
                        self.hidden_reposts.remove(&pair);
                    }
                }
            }
            Event::Unfollow {
                follower,
                followee,
                ts,
            } => {
                let pair = (follower.0, followee.0);
                if self.edges.remove(&pair).is_some() {
                    self.follow_at.remove(&pair);
                    self.unfollowed.insert(pair, (ts.0, at));
                }
            }
            Event::Post {
                author,
                post_id,
                ts,
            } => {
                let id = self.ids.entry((author.0, post_id.0)).or_default();
                if id.kind.is_none() {
                    (id.kind, id.made_at) = (Some(Kind::Original { ts: ts.0 }), Some(at));
                }
            }
            Event::Repost {
                author,
                post_id,
                of_author,
                of_post_id,
                ts,
            } => {
                let id = self.ids.entry((author.0, post_id.0)).or_default();
                if id.kind.is_none() {
                    let of = (of_author.0, of_post_id.0);
                    id.kind = Some(Kind::Repost { ts: ts.0, of });
                    id.made_at = Some(at);
                }
            }
            Event::DeletePost {
                author,
                post_id,
                ts,
            } => {
                let id = self.ids.entry((author.0, post_id.0)).or_default();
                if !id.deleted {
                    (id.deleted, id.deleted_at) = (true, Some((ts.0, at)));
                }
            }
            Event::Like {
                user,
                author,
                post_id,
                liked,
                ts,
            } => {
                let named = (author.0, post_id.0);
                self.likes
                    .insert((user.0, named), (liked, self.applied, ts.0));
                self.like_at.insert((user.0, named), at);
            }
            // Activity changes no view.
            Event::Seen { .. } => {}
            Event::Mark { .. } => self.mark(event, at),
        }
    }

    /// Every user an applied event names, ascending.
    pub fn users(&self) -> impl Iterator<Item = u64> + '_ {
        self.named.iter().copied()
    }

    /// The end of the block periods between `a` and `b` (either way):
    /// `None` none ever, `Some(None)` one is on, `Some(Some(t))` all ended,
    /// the latest at `t`.
    fn block_end(&self, a: u64, b: u64) -> Option<Option<u64>> {
        let both = [self.blocks.get(&(a, b)), self.blocks.get(&(b, a))];
        if both.iter().any(|x| x.is_some_and(|x| x.0)) {
            return Some(None);
        }
        both.iter()
            .filter_map(|x| x.and_then(|x| x.1))
            .max()
            .map(Some)
    }

    /// The time the follow `a` -> `b` counts from, if it counts: a follow
    /// counts only when made after the end of every block period between
    /// the two (docs/semantics.md, "Blocks and mutes"); a later follow of the same
    /// edge revives one that the periods cover.
    fn counted(&self, a: u64, b: u64) -> Option<u64> {
        let &(first, last) = self.edges.get(&(a, b))?;
        match self.block_end(a, b) {
            None => Some(first),
            Some(None) => None,
            Some(Some(end)) if first > end => Some(first),
            Some(Some(end)) => (last > end).then_some(last),
        }
    }

    /// Live followers of `u` with follow time, by id.
    pub fn followers(&self, u: u64) -> Vec<(u64, u64)> {
        let set: BTreeSet<(u64, u64)> = self
            .edges
            .keys()
            .filter(|(_, b)| *b == u)
            .filter_map(|&(a, b)| Some((a, self.counted(a, b)?)))
            .collect();
        set.into_iter().collect()
    }

    /// Live followees of `u` with follow time, by id.
    pub fn followees(&self, u: u64) -> Vec<(u64, u64)> {
        self.edges
            .range((u, 0)..=(u, u64::MAX))
            .filter_map(|(&(a, b), _)| Some((b, self.counted(a, b)?)))
            .collect()
    }

    fn follows(&self, u: u64, b: u64) -> bool {
        self.counted(u, b).is_some()
    }

    /// The clock of `u`'s partition: the greatest time of the events of
    /// every actor the partition owns.
    fn clock(&self, u: u64) -> u64 {
        let n = self.partitions.max(1);
        let p = partition_for(UserId(u), n);
        self.clocks
            .iter()
            .filter(|(a, _)| partition_for(UserId(**a), n) == p)
            .map(|(_, t)| *t)
            .max()
            .unwrap_or(0)
    }

    /// Whether `u` sees nothing by `x`: a block either way, or a mute that
    /// has not ended by `u`'s partition's clock.
    pub fn hides(&self, u: u64, x: u64) -> bool {
        let blocked = [(u, x), (x, u)]
            .iter()
            .any(|p| self.blocks.get(p).is_some_and(|b| b.0));
        let muted = match self.mutes.get(&(u, x)) {
            None => false,
            Some(None) => true,
            Some(Some(until)) => self.clock(u) < *until,
        };
        blocked || muted
    }

    /// (followers, followees, posts): `posts` counts live originals.
    pub fn counters(&self, u: u64) -> (u64, u64, u64) {
        (
            self.followers(u).len() as u64,
            self.followees(u).len() as u64,
            self.outbox(u).len() as u64,
        )
    }

    /// The user's live reposts (of live originals).
    pub fn reposts_counter(&self, u: u64) -> u64 {
        self.reposts_of_user(u).len() as u64
    }

    /// The `k` live followers with the newest follow time, newest first (ties: higher id first).
    pub fn recent_followers(&self, u: u64, k: usize) -> Vec<(u64, u64)> {
        let mut v = self.followers(u);
        v.sort_by_key(|&(id, ts)| std::cmp::Reverse((ts, id)));
        v.truncate(k);
        v
    }

    /// Live reposts of `u`: (repost id, ts, root), by id.
    fn reposts_of_user(&self, u: u64) -> Vec<(u64, u64, (u64, u64))> {
        self.ids
            .range((u, 0)..=(u, u64::MAX))
            .filter_map(|(&(_, r), id)| match (id.kind, id.deleted) {
                (Some(Kind::Repost { ts, of }), false) => {
                    let root = self.root(of, 1)?;
                    self.live_original(root)?;
                    Some((r, ts, root))
                }
                _ => None,
            })
            .collect()
    }

    /// Every live repost: (reposter, repost id, ts, root).
    fn all_reposts(&self) -> Vec<(u64, u64, u64, (u64, u64))> {
        self.named
            .iter()
            .flat_map(|&u| {
                self.reposts_of_user(u)
                    .into_iter()
                    .map(move |(r, ts, root)| (u, r, ts, root))
            })
            .collect()
    }

    /// Live original posts of `u` as (post_id, ts), newest first (ties:
    /// higher id first).
    pub fn outbox(&self, u: u64) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self
            .ids
            .range((u, 0)..=(u, u64::MAX))
            .filter_map(|(&(a, p), _)| self.live_original((a, p)).map(|ts| (p, ts)))
            .collect();
        v.sort_by_key(|&(id, ts)| std::cmp::Reverse((ts, id)));
        v
    }

    /// The posts view of `u` as the API answers it: live originals (with
    /// `reposts`, their live reposts by anyone) and live reposts (with
    /// `repost_of`), newest first (ties: higher id first).
    pub fn posts_view(&self, u: u64) -> Vec<Value> {
        let all = match self.any_repost {
            true => self.all_reposts(),
            false => Vec::new(),
        };
        let mut v: Vec<(u64, u64, Value)> = self
            .outbox(u)
            .into_iter()
            .map(|(p, ts)| {
                let n = all.iter().filter(|r| r.3 == (u, p)).count();
                (
                    ts,
                    p,
                    json!({"post_id": p, "author": u, "ts": ts, "reposts": n,
                        "likes": self.likes_of((u, p)).unwrap_or(0)}),
                )
            })
            .collect();
        for (r, ts, (a, p)) in self.reposts_of_user(u) {
            let item = json!({"post_id": r, "author": u, "ts": ts,
                "repost_of": {"author": a, "post_id": p}});
            v.push((ts, r, item));
        }
        v.sort_by_key(|(ts, id, _)| std::cmp::Reverse((*ts, *id)));
        v.into_iter().map(|(_, _, item)| item).collect()
    }

    /// `u`'s home timeline in the default modes, as (post_id, author, ts) of
    /// each entry, ordered by ts desc, post_id desc, author desc.
    pub fn timeline(&self, u: u64) -> Vec<(u64, u64, u64)> {
        self.timeline_entries(u, Mode::Newest)
            .iter()
            .map(|e| {
                let n = |f: &str| e[f].as_u64().unwrap_or_default();
                (n("post_id"), n("author"), n("ts"))
            })
            .collect()
    }

    /// `u`'s home timeline in `mode` (the default replies rule), as the API answers it.
    pub fn timeline_entries(&self, u: u64, mode: Mode) -> Vec<Value> {
        self.timeline_entries_in(u, mode, Replies::Followed)
    }

    /// `u`'s home timeline in `mode` with the replies rule `replies`.
    pub fn timeline_entries_in(&self, u: u64, mode: Mode, replies: Replies) -> Vec<Value> {
        // Every appearance of every post for `u`, by the post.
        let mut by_post: BTreeMap<(u64, u64), Vec<Appearance>> = BTreeMap::new();
        let followees = self.followees(u);
        let filtered = |x: u64| self.hides(u, x);
        for &(a, _) in followees.iter().filter(|(a, _)| *a != u && !filtered(*a)) {
            for (p, ts) in self.outbox(a) {
                if !self.reply_shows(u, (a, p), replies) {
                    continue;
                }
                by_post.entry((a, p)).or_default().push(Appearance {
                    ts,
                    id: p,
                    via: a,
                    repost: false,
                });
            }
        }
        if mode != Mode::None && self.any_repost {
            let shown = |b: u64| !filtered(b) && !self.hidden_reposts.contains(&(u, b));
            for &(b, _) in followees.iter().filter(|(b, _)| shown(*b)) {
                for (r, ts, root) in self.reposts_of_user(b) {
                    if root.0 == u || filtered(root.0) {
                        continue;
                    }
                    by_post.entry(root).or_default().push(Appearance {
                        ts,
                        id: r,
                        via: b,
                        repost: true,
                    });
                }
            }
        }
        let mut entries: Vec<((u64, u64, u64), Value)> = Vec::new();
        for ((a, p), apps) in by_post {
            let Some(post_ts) = self.live_original((a, p)) else {
                continue;
            };
            // Appearances ordered as the timeline orders keys: newest
            // first (ts, then id, then the user it came through).
            let key = |x: &Appearance| (x.ts, x.id, x.via);
            let at = match mode {
                Mode::First => apps.iter().min_by_key(|x| key(x)),
                Mode::Newest | Mode::None => apps.iter().max_by_key(|x| key(x)),
            };
            let Some(at) = at else { continue };
            let mut item = json!({"post_id": p, "author": a, "ts": at.ts});
            // Each reposting user once, at their newest repost.
            let mut newest: BTreeMap<u64, Appearance> = BTreeMap::new();
            for x in apps.iter().filter(|x| x.repost) {
                let e = newest.entry(x.via).or_insert(*x);
                if key(x) > key(e) {
                    *e = *x;
                }
            }
            if !newest.is_empty() {
                let mut by: Vec<Appearance> = newest.into_values().collect();
                by.sort_by_key(|x| std::cmp::Reverse(key(x)));
                item["post_ts"] = post_ts.into();
                item["reposters"] = by.len().into();
                item["reposted_by"] = by
                    .iter()
                    .take(10)
                    .map(|x| json!({"user": x.via, "post_id": x.id, "ts": x.ts}))
                    .collect::<Vec<_>>()
                    .into();
            }
            entries.push(((at.ts, p, a), item));
        }
        entries.sort_by_key(|(k, _)| std::cmp::Reverse(*k));
        entries.into_iter().map(|(_, v)| v).collect()
    }
}
