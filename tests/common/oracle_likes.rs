//! The oracle's likes, replies and flags (docs/semantics.md, "Likes",
//! "Replies and mentions").

use super::{Id, Kind, Oracle, MAX_REPOST_HOPS};
use feedlog::api::query::Replies;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

impl Oracle {
    /// The author of the post `(a, p)` replies to, if it is a reply.
    pub fn parent_of(&self, (a, p): (u64, u64)) -> Option<u64> {
        self.addressed
            .get(&(a, p))
            .and_then(|(to, _)| *to)
            .map(|(y, _)| y)
    }

    /// Whether `(a, p)` shows through its own author in `u`'s timeline by
    /// the replies rule `replies`: a post that is no reply always; a reply
    /// to a post of Y with `followed` when `u` is Y or follows Y, with
    /// `all` always, with `none` when `u` is Y.
    pub fn reply_shows(&self, u: u64, post: (u64, u64), replies: Replies) -> bool {
        match (self.parent_of(post), replies) {
            (None, _) | (_, Replies::All) => true,
            (Some(y), Replies::None) => y == u,
            (Some(y), Replies::Followed) => y == u || self.follows(u, y),
        }
    }

    /// Whether `(a, p)` is a live original post.
    pub(super) fn live_original(&self, (a, p): (u64, u64)) -> Option<u64> {
        match self.ids.get(&(a, p)) {
            Some(Id {
                kind: Some(Kind::Original { ts }),
                deleted: false,
                ..
            }) => Some(*ts),
            _ => None,
        }
    }

    /// The original a post or repost of `(x, q)` names, following repost
    /// links (at most [`MAX_REPOST_HOPS`] of them; a longer chain or a cycle
    /// names nothing): an id no repost event made is an original (live or
    /// not).
    pub(super) fn root(&self, mut at: (u64, u64), mut hops: usize) -> Option<(u64, u64)> {
        loop {
            match self.ids.get(&at).and_then(|i| i.kind) {
                Some(Kind::Repost { of, .. }) => {
                    if hops == MAX_REPOST_HOPS {
                        return None;
                    }
                    hops += 1;
                    at = of;
                }
                _ => return Some(at),
            }
        }
    }

    /// Each (liker, live original) whose like counts, with the time of
    /// the like that decides: the liker's latest like or unlike of any id
    /// resolving to that original is a like.
    fn live_likes(&self) -> BTreeMap<(u64, (u64, u64)), u64> {
        let mut latest: BTreeMap<(u64, (u64, u64)), super::LikeAt> = BTreeMap::new();
        for (&(u, named), &(liked, seq, ts)) in &self.likes {
            let Some(root) = self.root(named, 0) else {
                continue;
            };
            let e = latest.entry((u, root)).or_insert((liked, seq, ts));
            if seq > e.1 {
                *e = (liked, seq, ts);
            }
        }
        latest
            .into_iter()
            .filter(|&((_, root), (liked, _, _))| liked && self.live_original(root).is_some())
            .map(|(k, (_, _, ts))| (k, ts))
            .collect()
    }

    /// A live original's likers, newest first (by the like's time, then
    /// by user id, descending): (user, ts).
    pub fn likers(&self, post: (u64, u64)) -> Vec<(u64, u64)> {
        let e = self.engagements();
        let mut l: Vec<(u64, u64)> = e.likers.get(&post).cloned().unwrap_or_default();
        l.sort_by_key(|&(u, ts)| std::cmp::Reverse((ts, u)));
        l
    }

    /// A live original's live likes (`None`: not a live original).
    pub fn likes_of(&self, post: (u64, u64)) -> Option<u64> {
        self.live_original(post)?;
        Some(self.engagements().counts.get(&post).map_or(0, |c| c.0))
    }

    /// The user's live likes given (their `likes` counter).
    pub fn likes_counter(&self, u: u64) -> u64 {
        let e = self.engagements();
        e.liked
            .range((u, (0, 0))..=(u, (u64::MAX, u64::MAX)))
            .count() as u64
    }

    /// Whether `u` likes the live original `post`.
    pub fn liked(&self, u: u64, post: (u64, u64)) -> bool {
        self.engagements().liked.contains(&(u, post))
    }

    /// Whether `u` has a live repost of the live original `post`.
    pub fn reposted(&self, u: u64, post: (u64, u64)) -> bool {
        self.engagements().reposted.contains(&(u, post))
    }

    /// A live original's live reposts by anyone.
    pub fn reposts_of(&self, post: (u64, u64)) -> u64 {
        self.engagements().counts.get(&post).map_or(0, |c| c.1)
    }

    /// Every live original, as (author, id).
    pub fn live_originals(&self) -> Vec<(u64, u64)> {
        self.ids
            .keys()
            .copied()
            .filter(|&k| self.live_original(k).is_some())
            .collect()
    }

    /// Every live original's counts and flags, computed when first asked
    /// after an event (a check of every post asks for them per post).
    pub fn engagements(&self) -> Arc<Engagements> {
        if let Some(e) = self.engagements.borrow().as_ref() {
            return e.clone();
        }
        let mut e = Engagements::default();
        for (&(u, root), &ts) in &self.live_likes() {
            e.likers.entry(root).or_default().push((u, ts));
            e.counts.entry(root).or_default().0 += 1;
            e.by_root.entry(root).or_default().insert(u);
            e.liked.insert((u, root));
        }
        for (&reply, (to, _)) in &self.addressed {
            let Some(ts) = self.live_original(reply) else {
                continue;
            };
            let root = to.and_then(|to| self.root(to, 0));
            if let Some(root) = root.filter(|&r| self.live_original(r).is_some()) {
                e.replies.entry(root).or_default().push((reply, ts));
                e.counts.entry(root).or_default().2 += 1;
            }
        }
        for list in e.replies.values_mut() {
            list.sort_by_key(|&(reply, ts)| (ts, reply));
        }
        for (u, _, ts, root) in self.all_reposts() {
            e.reposters.entry(root).or_default().push((u, ts));
            e.counts.entry(root).or_default().1 += 1;
            e.by_root.entry(root).or_default().insert(u);
            e.reposted.insert((u, root));
        }
        let e = Arc::new(e);
        *self.engagements.borrow_mut() = Some(e.clone());
        e
    }

    /// The answer of `GET /v1/posts/{a}/{p}` (`?viewer=`) given the
    /// [`Oracle::engagements`]: the post with its original's counts (and
    /// the viewer's flags), or `{"error": reason}` for one that is not
    /// there.
    pub fn post_answer(&self, e: &Engagements, (a, p): (u64, u64), viewer: Option<u64>) -> Value {
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
        let mut answer = json!({"post_id": p, "author": a, "ts": ts, "counts": e.counts_of(root)});
        if root != (a, p) {
            answer["repost_of"] = json!({"author": root.0, "post_id": root.1});
        } else if let Some((to, mentions)) = self.addressed.get(&(a, p)) {
            if let Some((ta, tp)) = to {
                answer["reply_to"] = json!({"author": ta, "post_id": tp});
            }
            if !mentions.is_empty() {
                answer["mentions"] = json!(mentions);
            }
        }
        if let Some(v) = viewer {
            answer["viewer"] = json!({"liked": e.liked.contains(&(v, root)),
                "reposted": e.reposted.contains(&(v, root))});
        }
        answer
    }
}

impl Oracle {
    /// `items` (timeline entries, or a posts page's items) each with its
    /// original's counts and, with a `viewer`, the viewer's flags on it, as
    /// the API puts them on.
    pub fn with_counts(
        &self,
        e: &Engagements,
        mut items: Vec<Value>,
        viewer: Option<u64>,
    ) -> Vec<Value> {
        for i in &mut items {
            let at = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
            let root = match i.get("repost_of") {
                Some(r) => (at(r, "author"), at(r, "post_id")),
                None => (at(i, "author"), at(i, "post_id")),
            };
            i["counts"] = e.counts_of(root);
            if let Some(v) = viewer {
                i["viewer"] = json!({"liked": e.liked.contains(&(v, root)),
                    "reposted": e.reposted.contains(&(v, root))});
            }
        }
        items
    }
}

/// A reply (author, id) and its time.
type Reply = ((u64, u64), u64);

/// The oracle's counts and flags of every live original.
#[derive(Debug, Default)]
pub struct Engagements {
    /// Each live original's (likes, reposts, replies), when any is not 0.
    counts: BTreeMap<(u64, u64), (u64, u64, u64)>,
    /// Each live original's live direct replies: (reply, its time),
    /// oldest first.
    replies: BTreeMap<(u64, u64), Vec<Reply>>,
    /// The users who like or have a live repost of each live original.
    by_root: BTreeMap<(u64, u64), BTreeSet<u64>>,
    liked: BTreeSet<(u64, (u64, u64))>,
    reposted: BTreeSet<(u64, (u64, u64))>,
    /// Each live original's likers: (user, the like's time).
    likers: BTreeMap<(u64, u64), Vec<(u64, u64)>>,
    /// Each live original's live reposts: (reposter, the repost's time).
    reposters: BTreeMap<(u64, u64), Vec<(u64, u64)>>,
}

impl Engagements {
    /// The `counts` object of the original `root`.
    pub fn counts_of(&self, root: (u64, u64)) -> Value {
        let (likes, reposts, replies) = self.counts.get(&root).copied().unwrap_or_default();
        json!({"likes": likes, "replies": replies, "reposts": reposts})
    }

    /// A live original's live direct replies, oldest first: (reply, ts).
    pub fn replies(&self, root: (u64, u64)) -> &[Reply] {
        self.replies.get(&root).map_or(&[], |v| v)
    }

    /// A live original's live direct replies (0 when not live).
    pub fn replies_count(&self, root: (u64, u64)) -> u64 {
        self.counts.get(&root).map_or(0, |c| c.2)
    }

    /// A live original's live reposts: (reposter, the repost's time).
    pub fn reposters(&self, root: (u64, u64)) -> &[(u64, u64)] {
        self.reposters.get(&root).map_or(&[], |v| v)
    }

    /// The users whose flags on the original `root` are set.
    pub fn engaged(&self, root: (u64, u64)) -> impl Iterator<Item = u64> + '_ {
        self.by_root.get(&root).into_iter().flatten().copied()
    }
}
