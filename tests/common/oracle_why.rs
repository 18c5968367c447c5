//! The oracle's answers to "why is this in my timeline" and "why not"
//! (README, "Explain"), from the log alone, as the API answers them.

use super::{Kind, Mode, Oracle};
use serde_json::{json, Value};

/// Where an event sits in the log: its partition of `events` and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct At {
    /// The partition.
    pub partition: u32,
    /// The offset.
    pub offset: u64,
}

impl At {
    fn json(self) -> Value {
        json!({"partition": self.partition, "offset": self.offset})
    }
}

/// One appearance: (ts, id, via) orders them; the rest describes it.
struct App {
    key: (u64, u64, u64),
    item: Value,
}

impl Oracle {
    /// Every (author, id) an applied event names as a post or repost.
    pub fn post_ids(&self) -> Vec<(u64, u64)> {
        self.ids.keys().copied().collect()
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
    pub fn why_items(&self, u: u64, (a, p): (u64, u64), mode: Mode) -> Vec<Value> {
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
        apps.extend(item("original", a, p, post_ts, made));
        if mode != Mode::None {
            for (b, r, ts, root) in self.all_reposts() {
                let shown = !self.hides(u, b) && !self.hidden_reposts.contains(&(u, b));
                if root == (a, p) && b != u && shown {
                    apps.extend(item("repost", b, r, ts, self.ids[&(b, r)].made_at));
                }
            }
        }
        apps.sort_by_key(|x| std::cmp::Reverse(x.key));
        apps.into_iter().map(|x| x.item).collect()
    }

    /// `u`'s timeline in `mode` with `explain=1`: each entry with `why`.
    pub fn explained_timeline(&self, u: u64, mode: Mode) -> Vec<Value> {
        let mut entries = self.timeline_entries(u, mode);
        for e in &mut entries {
            let n = |f: &str| e[f].as_u64().unwrap_or_default();
            e["why"] = self.why_items(u, (n("author"), n("post_id")), mode).into();
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
                let why = self.why_items(u, (a, p), Mode::Newest);
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
        if !self.why_items(u, (a, p), Mode::Newest).is_empty() {
            return None;
        }
        // Followed users' reposts of it, newest first: all filtered out.
        let mut reposts: Vec<(u64, u64, u64)> = self
            .all_reposts()
            .into_iter()
            .filter(|r| r.3 == (a, p) && r.0 != u && self.counted(u, r.0).is_some())
            .map(|(b, r, ts, _)| (ts, r, b))
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
