//! The oracle: the contract of the README ("Semantics") as a small in-memory
//! model. Feed it the valid events in log order; ask it for any view.

use feedlog::core::event::Event;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PostState {
    Live(u64),
    Deleted,
}

/// The final state of a log, and every view derived from it.
#[derive(Debug, Default, Clone)]
pub struct Oracle {
    /// (follower, followee) -> follow time, for live edges only.
    edges: BTreeMap<(u64, u64), u64>,
    /// (author, post_id) -> state.
    posts: BTreeMap<(u64, u64), PostState>,
    /// Every user any applied event names.
    named: BTreeSet<u64>,
}

impl Oracle {
    /// Applies one valid event; events of one actor must come in log order.
    pub fn apply(&mut self, event: &Event) {
        match *event {
            Event::Follow {
                follower, followee, ..
            }
            | Event::Unfollow {
                follower, followee, ..
            } => self.named.extend([follower.0, followee.0]),
            Event::Post { author, .. } | Event::DeletePost { author, .. } => {
                self.named.insert(author.0);
            }
            Event::Seen { user, .. } => {
                self.named.insert(user.0);
            }
        }
        match *event {
            Event::Follow {
                follower,
                followee,
                ts,
            } => {
                self.edges.entry((follower.0, followee.0)).or_insert(ts.0);
            }
            Event::Unfollow {
                follower, followee, ..
            } => {
                self.edges.remove(&(follower.0, followee.0));
            }
            Event::Post {
                author,
                post_id,
                ts,
            } => {
                self.posts
                    .entry((author.0, post_id.0))
                    .or_insert(PostState::Live(ts.0));
            }
            Event::DeletePost {
                author, post_id, ..
            } => {
                self.posts.insert((author.0, post_id.0), PostState::Deleted);
            }
            // Activity changes no view.
            Event::Seen { .. } => {}
        }
    }

    /// Every user an applied event names, ascending.
    pub fn users(&self) -> impl Iterator<Item = u64> + '_ {
        self.named.iter().copied()
    }

    /// Live followers of `u` with follow time, by id.
    pub fn followers(&self, u: u64) -> Vec<(u64, u64)> {
        let set: BTreeSet<(u64, u64)> = self
            .edges
            .iter()
            .filter(|((_, b), _)| *b == u)
            .map(|((a, _), ts)| (*a, *ts))
            .collect();
        set.into_iter().collect()
    }

    /// Live followees of `u` with follow time, by id.
    pub fn followees(&self, u: u64) -> Vec<(u64, u64)> {
        self.edges
            .range((u, 0)..=(u, u64::MAX))
            .map(|((_, b), ts)| (*b, *ts))
            .collect()
    }

    /// (followers, followees, posts).
    pub fn counters(&self, u: u64) -> (u64, u64, u64) {
        (
            self.followers(u).len() as u64,
            self.followees(u).len() as u64,
            self.outbox(u).len() as u64,
        )
    }

    /// The `k` live followers with the newest follow time, newest first (ties: higher id first).
    pub fn recent_followers(&self, u: u64, k: usize) -> Vec<(u64, u64)> {
        let mut v = self.followers(u);
        v.sort_by_key(|&(id, ts)| std::cmp::Reverse((ts, id)));
        v.truncate(k);
        v
    }

    /// Live posts of `u` as (post_id, ts), newest first (ties: higher id first).
    pub fn outbox(&self, u: u64) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self
            .posts
            .range((u, 0)..=(u, u64::MAX))
            .filter_map(|((_, p), s)| match s {
                PostState::Live(ts) => Some((*p, *ts)),
                PostState::Deleted => None,
            })
            .collect();
        v.sort_by_key(|&(id, ts)| std::cmp::Reverse((ts, id)));
        v
    }

    /// All live posts of all current followees, as (post_id, author, ts),
    /// ordered by ts desc, post_id desc, author desc.
    pub fn timeline(&self, u: u64) -> Vec<(u64, u64, u64)> {
        let mut v: Vec<(u64, u64, u64)> = self
            .followees(u)
            .into_iter()
            .flat_map(|(b, _)| self.outbox(b).into_iter().map(move |(p, ts)| (p, b, ts)))
            .collect();
        v.sort_by_key(|&(p, a, ts)| std::cmp::Reverse((ts, p, a)));
        v
    }
}
