//! The oracle's likes and flags (docs/semantics.md, "Likes").

use super::{Kind, Oracle};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

impl Oracle {
    /// Each (liker, live original) whose like counts: the liker's latest
    /// like or unlike of any id resolving to that original is a like.
    fn live_likes(&self) -> BTreeSet<(u64, (u64, u64))> {
        let mut latest: BTreeMap<(u64, (u64, u64)), (u64, bool)> = BTreeMap::new();
        for (&(u, named), &(liked, seq)) in &self.likes {
            let Some(root) = self.root(named, 0) else {
                continue;
            };
            let e = latest.entry((u, root)).or_insert((seq, liked));
            if seq > e.0 {
                *e = (seq, liked);
            }
        }
        latest
            .into_iter()
            .filter(|&((_, root), (_, liked))| liked && self.live_original(root).is_some())
            .map(|(k, _)| k)
            .collect()
    }

    /// A live original's live likes (`None`: not a live original).
    pub fn likes_of(&self, post: (u64, u64)) -> Option<u64> {
        self.live_original(post)?;
        Some(self.live_likes().iter().filter(|(_, r)| *r == post).count() as u64)
    }

    /// The user's live likes given (their `likes` counter).
    pub fn likes_counter(&self, u: u64) -> u64 {
        self.live_likes().iter().filter(|(x, _)| *x == u).count() as u64
    }

    /// Whether `u` likes the live original `post`.
    pub fn liked(&self, u: u64, post: (u64, u64)) -> bool {
        self.live_likes().contains(&(u, post))
    }

    /// Whether `u` has a live repost of the live original `post`.
    pub fn reposted(&self, u: u64, post: (u64, u64)) -> bool {
        self.reposts_of_user(u).iter().any(|r| r.2 == post)
    }

    /// A live original's live reposts by anyone.
    pub fn reposts_of(&self, post: (u64, u64)) -> u64 {
        self.all_reposts().iter().filter(|r| r.3 == post).count() as u64
    }

    /// Every live original, as (author, id).
    pub fn live_originals(&self) -> Vec<(u64, u64)> {
        self.ids
            .keys()
            .copied()
            .filter(|&k| self.live_original(k).is_some())
            .collect()
    }

    /// The answer of `GET /v1/posts/{a}/{p}` (`?viewer=`): the post with
    /// its original's counts (and the viewer's flags), or `{"error":
    /// reason}` for one that is not there.
    pub fn post_answer(&self, (a, p): (u64, u64), viewer: Option<u64>) -> Value {
        let Some(id) = self.ids.get(&(a, p)) else {
            return json!({"error": "unknown_post"});
        };
        if id.deleted {
            return json!({"error": "deleted"});
        }
        let (ts, root) = match id.kind {
            None => return json!({"error": "unknown_post"}),
            Some(Kind::Original { ts }) => (ts, (a, p)),
            Some(Kind::Repost { ts, of }) => match self.root(of, 1) {
                Some(root) if self.live_original(root).is_some() => (ts, root),
                _ => return json!({"error": "not_live"}),
            },
        };
        let mut answer = json!({"post_id": p, "author": a, "ts": ts,
            "counts": {"likes": self.likes_of(root).unwrap_or(0), "reposts": self.reposts_of(root)}});
        if root != (a, p) {
            answer["repost_of"] = json!({"author": root.0, "post_id": root.1});
        }
        if let Some(v) = viewer {
            answer["viewer"] =
                json!({"liked": self.liked(v, root), "reposted": self.reposted(v, root)});
        }
        answer
    }

    /// The users who like or have a live repost of the live original
    /// `root` (whose flags on it are set).
    pub fn engaged(&self, root: (u64, u64)) -> BTreeSet<u64> {
        let likers = self.live_likes().into_iter().filter(|(_, r)| *r == root);
        let reposters = self.all_reposts().into_iter().filter(|r| r.3 == root);
        likers
            .map(|(u, _)| u)
            .chain(reposters.map(|r| r.0))
            .collect()
    }
}
