//! The oracle's likes and flags (docs/semantics.md, "Likes").

use super::Oracle;
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
}
