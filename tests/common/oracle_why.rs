//! The oracle's answers to "why is this in my timeline" and "why not"
//! (docs/http-api.md, "Explain"), from the log alone, as the API answers them.

use super::{Kind, Mode, Oracle};
use feedlog::api::query::Replies;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Where an event sits in the log: its partition of `events` and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct At {
    /// The partition.
    pub partition: u32,
    /// The offset.
    pub offset: u64,
}

impl At {
    pub(super) fn json(self) -> Value {
        json!({"partition": self.partition, "offset": self.offset})
    }
}

/// Live reposts by their original: (reposter, repost id, ts).
pub type ByRoot = BTreeMap<(u64, u64), Vec<(u64, u64, u64)>>;

/// One appearance: (ts, id, via) orders them; the rest describes it.
struct App {
    key: (u64, u64, u64),
    item: Value,
}

/// `v` without its log positions (`event`, `follow_event`), at any depth.
fn without_positions(v: &Value) -> Value {
    match v {
        Value::Object(m) => m
            .iter()
            .filter(|(k, _)| *k != "event" && *k != "follow_event")
            .map(|(k, v)| (k.clone(), without_positions(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        Value::Array(a) => a.iter().map(without_positions).collect::<Vec<_>>().into(),
        other => other.clone(),
    }
}

impl Oracle {
    /// `u`'s mutes on (whether ended by the clock or not): (user, until,
    /// whether it filters now, whether it keeps notifications).
    pub fn mutes_of(&self, u: u64) -> Vec<(u64, Option<u64>, bool, bool)> {
        self.mutes
            .range((u, 0)..=(u, u64::MAX))
            .map(|(&(_, x), until)| {
                let in_force = until.is_none_or(|t| self.clock(u) < t);
                (x, *until, in_force, self.mutes_keeping.contains(&(u, x)))
            })
            .collect()
    }

    /// The users `u` blocks, by id.
    pub fn blocks_of(&self, u: u64) -> Vec<u64> {
        self.blocks
            .range((u, 0)..=(u, u64::MAX))
            .filter(|(_, b)| b.0)
            .map(|(&(_, x), _)| x)
            .collect()
    }

    /// Whether explained answers `got` equal the oracle's `want`: whole,
    /// when the oracle knows where each event sits (it knows the partition
    /// count, and every event was written to its actor's partition, in
    /// order, and nothing else); else all but the positions.
    pub fn same_positions(&self, got: &[Value], want: &[Value]) -> bool {
        match self.positions_unknown || self.partitions == 0 {
            false => got == want,
            true => {
                let strip = |v: &[Value]| v.iter().map(without_positions).collect::<Vec<_>>();
                strip(got) == strip(want)
            }
        }
    }

    /// Every live repost as each partition's directory must list it:
    /// (reposter, repost id) -> (original, the original's time).
    pub fn repost_directory(&self) -> BTreeMap<(u64, u64), ((u64, u64), u64)> {
        self.all_reposts()
            .into_iter()
            .map(|(b, r, _, root)| {
                let ts = self
                    .live_original(root)
                    .expect("a live repost's root is live");
                ((b, r), (root, ts))
            })
            .collect()
    }

    /// Every (author, id) an applied event names as a post or repost.
    pub fn post_ids(&self) -> Vec<(u64, u64)> {
        self.ids.keys().copied().collect()
    }

    /// The post ids whose `why` answers for `u` a check asks: every one
    /// when the log names at most `all_up_to`. In larger logs (where the
    /// check of every user against every id would take hours), a bounded
    /// set that still meets every kind of answer: the first 3 ids of `u`
    /// and of every user `u` has a follow edge or a filter with (either
    /// way) and what those reposted, and the first id of every 10th other
    /// author.
    pub fn why_ids(&self, u: u64, all_up_to: usize) -> Vec<(u64, u64)> {
        if self.ids.len() <= all_up_to {
            return self.post_ids();
        }
        let mut near: BTreeSet<u64> = [u].into();
        let pairs = self.edges.keys().chain(self.unfollowed.keys());
        let filters = self.blocks.keys().chain(self.mutes.keys());
        for &(a, b) in pairs.chain(filters).chain(&self.hidden_reposts) {
            if a == u || b == u {
                near.extend([a, b]);
            }
        }
        let mut ids: BTreeSet<(u64, u64)> = BTreeSet::new();
        let (mut author, mut seen, mut authors) = (None, 0, 0u64);
        for (&(a, p), id) in &self.ids {
            if author != Some(a) {
                (author, seen, authors) = (Some(a), 0, authors + 1);
            }
            seen += 1;
            let near = near.contains(&a) && seen <= 3;
            if near || (seen == 1 && authors % 10 == 0) {
                ids.insert((a, p));
                if let Some(Kind::Repost { of, .. }) = id.kind {
                    ids.insert(of);
                }
            }
        }
        ids.into_iter().collect()
    }

    /// The live reposts of original `root`: (reposter, repost id, ts).
    fn reposts_of_root(&self, root: (u64, u64)) -> Vec<(u64, u64, u64)> {
        let mut cache = self.reposts_by_root.borrow_mut();
        let by_root = cache.get_or_insert_with(|| {
            let mut m = ByRoot::new();
            for (b, r, ts, root) in self.all_reposts() {
                m.entry(root).or_default().push((b, r, ts));
            }
            m
        });
        by_root.get(&root).cloned().unwrap_or_default()
    }

    /// Where the follow `u` -> `b` that counts was made, and from when it
    /// counts.
    fn follow_of(&self, u: u64, b: u64) -> Option<(u64, At)> {
        let ts = self.counted(u, b)?;
        let (first, latest) = self.follow_at[&(u, b)];
        let at = if ts == self.edges[&(u, b)].0 {
            first
        } else {
            latest
        };
        Some((ts, at))
    }

    /// The appearances of original `(a, p)` in `u`'s timeline in `mode`,
    /// newest first, each as the API's `why` item.
    pub fn why_items(
        &self,
        u: u64,
        (a, p): (u64, u64),
        mode: Mode,
        replies: Replies,
    ) -> Vec<Value> {
        let mut apps = Vec::new();
        let Some(post_ts) = self.live_original((a, p)) else {
            return Vec::new();
        };
        if a == u || self.hides(u, a) {
            return Vec::new();
        }
        let item = |kind: &str, via: u64, id: u64, ts: u64, event: Option<At>| {
            let (followed_at, follow) = self.follow_of(u, via)?;
            let item = json!({"kind": kind, "via": via, "post_id": id, "ts": ts,
                "followed_at": followed_at, "follow_event": follow.json(),
                "event": event.map(At::json)});
            Some(App {
                key: (ts, id, via),
                item,
            })
        };
        let made = self.ids[&(a, p)].made_at;
        if self.reply_shows(u, (a, p), replies) {
            apps.extend(item("original", a, p, post_ts, made));
        }
        if mode != Mode::None {
            for (b, r, ts) in self.reposts_of_root((a, p)) {
                let shown = !self.hides(u, b) && !self.hidden_reposts.contains(&(u, b));
                if b != u && shown {
                    apps.extend(item("repost", b, r, ts, self.ids[&(b, r)].made_at));
                }
            }
        }
        apps.sort_by_key(|x| std::cmp::Reverse(x.key));
        apps.into_iter().map(|x| x.item).collect()
    }

    /// The first `n` entries of `u`'s timeline in `mode` with
    /// `explain=1`: each entry with `why`.
    pub fn explained_timeline(&self, u: u64, mode: Mode, replies: Replies, n: usize) -> Vec<Value> {
        let mut entries = self.timeline_entries_in(u, mode, replies);
        entries.truncate(n);
        for e in &mut entries {
            let n = |f: &str| e[f].as_u64().unwrap_or_default();
            let post = (n("author"), n("post_id"));
            e["why"] = self.why_items(u, post, mode, replies).into();
        }
        entries
    }

    /// The filter (block either way, or a mute in force) that hides `x`
    /// from `u`: the reason's fields.
    fn hidden_by(&self, u: u64, x: u64) -> Option<Value> {
        for (by, pair) in [(u, (u, x)), (x, (x, u))] {
            if self.blocks.get(&pair).is_some_and(|b| b.0) {
                let (since, at) = self.block_since[&pair];
                return Some(json!({"reason": "blocked", "via": x, "by": by,
                    "since": since, "event": at.json()}));
            }
        }
        let until = self.mutes.get(&(u, x))?;
        if until.is_some_and(|t| self.clock(u) >= t) {
            return None;
        }
        let (since, at) = self.mute_since[&(u, x)];
        let mut r = json!({"reason": "muted", "via": x, "since": since, "event": at.json()});
        if let Some(t) = until {
            r["until"] = (*t).into();
        }
        Some(r)
    }

    /// Is `(a, p)` in `u`'s timeline (reposts shown), and why — or the one
    /// reason it is not, as the API's `timeline/why` answers.
    pub fn why(&self, u: u64, (a, p): (u64, u64)) -> Value {
        let mut answer = json!({"user": u, "author": a, "post_id": p});
        let reason = self.why_not(u, (a, p));
        let fields = match reason {
            None => {
                let why = self.why_items(u, (a, p), Mode::Newest, Replies::Followed);
                json!({"in_timeline": true, "why": why})
            }
            Some(mut r) => {
                r["in_timeline"] = false.into();
                r
            }
        };
        for (k, v) in fields.as_object().into_iter().flatten() {
            answer[k] = v.clone();
        }
        answer
    }

    /// The reason `(a, p)` is not in `u`'s timeline (`None`: it is).
    fn why_not(&self, u: u64, (a, p): (u64, u64)) -> Option<Value> {
        let Some(id) = self.ids.get(&(a, p)) else {
            return Some(json!({"reason": "unknown_post"}));
        };
        if let Some(Kind::Repost { .. }) = id.kind {
            let original = self
                .reposts_of_user(a)
                .into_iter()
                .find(|r| r.0 == p)
                .map(|(_, _, (oa, op))| json!({"author": oa, "post_id": op}));
            let mut r = json!({"reason": "is_repost", "event": id.made_at.map(At::json)});
            if let Some(o) = original {
                r["original"] = o;
            }
            return Some(r);
        }
        if let Some((ts, at)) = id.deleted_at {
            return Some(json!({"reason": "deleted", "ts": ts, "event": at.json()}));
        }
        if a == u {
            return Some(json!({"reason": "own_post", "event": id.made_at.map(At::json)}));
        }
        if let Some(r) = self.hidden_by(u, a) {
            return Some(r);
        }
        if !self
            .why_items(u, (a, p), Mode::Newest, Replies::Followed)
            .is_empty()
        {
            return None;
        }
        // Following the author: only the replies rule leaves it out.
        if let Some(parent) = self
            .parent_of((a, p))
            .filter(|_| self.counted(u, a).is_some())
        {
            return Some(json!({"reason": "reply_to_unfollowed", "parent": parent}));
        }
        // Followed users' reposts of it, newest first: all filtered out.
        let mut reposts: Vec<(u64, u64, u64)> = self
            .reposts_of_root((a, p))
            .into_iter()
            .filter(|r| r.0 != u && self.counted(u, r.0).is_some())
            .map(|(b, r, ts)| (ts, r, b))
            .collect();
        reposts.sort_by_key(|x| std::cmp::Reverse(*x));
        if let Some(&(_, _, b)) = reposts.first() {
            if let Some(r) = self.hidden_by(u, b) {
                return Some(r);
            }
            let (since, at) = self.hide_since[&(u, b)];
            return Some(json!({"reason": "reposts_hidden", "via": b, "since": since,
                "event": at.json()}));
        }
        let pair = (u, a);
        Some(match self.edges.get(&pair) {
            Some(&(first, _)) => {
                let block_ended = match self.block_end(u, a) {
                    Some(Some(end)) => end,
                    _ => 0,
                };
                json!({"reason": "not_following", "follow": "voided", "followed_at": first,
                    "block_ended": block_ended, "event": self.follow_at[&pair].0.json()})
            }
            None => match self.unfollowed.get(&pair) {
                Some(&(ts, at)) => json!({"reason": "not_following", "follow": "unfollowed",
                    "ts": ts, "event": at.json()}),
                None => json!({"reason": "not_following", "follow": "never"}),
            },
        })
    }
}
