//! The oracle's notifications (docs/semantics.md, "Notifications"), by
//! their definition.

use super::{At, Oracle};
use serde_json::{json, Value};

/// The longest gap inside a group, and the most items a group holds.
const GAP_MS: u64 = 12 * 60 * 60 * 1000;
const MOST: usize = 50;

/// What items group by, ordered as groups break ties: follows (0), likes
/// (1) and reposts (2) of a post, a reply (3, the reply itself), a
/// mention (4, the post that mentions).
type Key = (u8, (u64, u64));

/// A group as built: its key, its items (ts, actor) oldest first, and a
/// reply's parent.
type Built = (Key, Vec<(u64, u64)>, u64);

const KINDS: [&str; 5] = ["follow", "like", "repost", "reply", "mention"];

impl Oracle {
    /// Whether `u` is notified of nothing `x` does: a block either way,
    /// or a mute that has not ended and does not keep notifications.
    fn hides_notifications(&self, u: u64, x: u64) -> bool {
        let blocked = [(u, x), (x, u)]
            .iter()
            .any(|p| self.blocks.get(p).is_some_and(|b| b.0));
        blocked || (self.hides(u, x) && !self.mutes_keeping.contains(&(u, x)))
    }

    /// `u`'s items visible now, of `types` (all when `None`): (key, ts,
    /// actor), with each reply's parent.
    fn notification_items(&self, u: u64, types: Option<&[&str]>) -> Vec<(Key, u64, u64, u64)> {
        let e = self.engagements();
        let mut items: Vec<(Key, u64, u64, u64)> = Vec::new();
        for (f, ts) in self.followers(u) {
            items.push(((0, (0, 0)), ts, f, 0));
        }
        for (p, _) in self.outbox(u) {
            for (liker, ts) in self.likers((u, p)) {
                items.push(((1, (u, p)), ts, liker, 0));
            }
            for &((replier, reply), ts) in e.replies((u, p)) {
                items.push(((3, (replier, reply)), ts, replier, p));
            }
            for &(reposter, ts) in e.reposters((u, p)) {
                items.push(((2, (u, p)), ts, reposter, 0));
            }
        }
        // A live post that mentions u, unless it is a reply to u's post
        // (then it is that reply's item).
        for (&post, (_, mentions)) in &self.addressed {
            let replied = items.iter().any(|i| i.0 == (3, post) && i.2 != u);
            if let (true, Some(ts), false) =
                (mentions.contains(&u), self.live_original(post), replied)
            {
                items.push(((4, post), ts, post.0, 0));
            }
        }
        items.retain(|&(k, _, actor, _)| {
            actor != u
                && !self.hides_notifications(u, actor)
                && types.is_none_or(|t| t.contains(&KINDS[k.0 as usize]))
        });
        items.sort_unstable();
        items.dedup();
        items
    }

    /// Where the event that made an item of `u` sits: the follow that
    /// started the edge (none for one revived after a block), the like or
    /// unlike that decided the like, the repost, the post that replies or
    /// mentions.
    fn item_event(&self, u: u64, (kind, post): Key, ts: u64, actor: u64) -> Option<At> {
        let made = |id: (u64, u64)| self.ids.get(&id).and_then(|i| i.made_at);
        match kind {
            0 => {
                let first = self.edges.get(&(actor, u)).map(|e| e.0);
                (first == Some(ts)).then(|| self.follow_at[&(actor, u)].0)
            }
            1 => {
                let latest = self
                    .likes
                    .iter()
                    .filter(|&(&(l, named), _)| l == actor && self.root(named, 0) == Some(post))
                    .max_by_key(|(_, like)| like.1)?;
                self.like_at.get(latest.0).copied()
            }
            2 => self
                .all_reposts()
                .into_iter()
                .find(|&(r, _, t, root)| r == actor && t == ts && root == post)
                .and_then(|(r, id, _, _)| made((r, id))),
            _ => made(post),
        }
    }

    /// `GET /v1/users/{u}/notifications?grouped=&types=`, every page's
    /// items in order.
    pub fn notifications(&self, u: u64, grouped: bool, types: Option<&[&str]>) -> Vec<Value> {
        self.notifications_explained(u, (grouped, types), false)
    }

    /// The same, with `explain=1` when `explain`: each group's acts,
    /// newest first, with their events.
    pub fn notifications_explained(
        &self,
        u: u64,
        (grouped, types): (bool, Option<&[&str]>),
        explain: bool,
    ) -> Vec<Value> {
        // Groups: (key, [(ts, actor)] oldest first, reply parent).
        let mut groups: Vec<Built> = Vec::new();
        for (key, ts, actor, parent) in self.notification_items(u, types) {
            let gathers = grouped && key.0 < 3;
            match groups.last_mut() {
                Some((k, g, _))
                    if gathers
                        && *k == key
                        && g.len() < MOST
                        && ts - g.last().map_or(0, |l| l.0) <= GAP_MS =>
                {
                    g.push((ts, actor))
                }
                _ => groups.push((key, vec![(ts, actor)], parent)),
            }
        }
        groups.sort_by_key(|(k, g, _)| std::cmp::Reverse((g[g.len() - 1].0, *k, g[0])));
        groups
            .into_iter()
            .map(|((kind, post), g, parent)| {
                let newest = g[g.len() - 1].0;
                let mut v = json!({
                    "kind": KINDS[kind as usize],
                    "actors": g.iter().rev().take(10).map(|i| i.1).collect::<Vec<_>>(),
                    "count": g.len(),
                    "newest_ts": newest,
                    "oldest_ts": g[0].0,
                    "place": {"ts": newest, "post_id": post.1, "author": post.0},
                });
                if explain {
                    let acts = g.iter().rev().map(|&(ts, actor)| {
                        let mut act = json!({"actor": actor, "ts": ts});
                        if let Some(at) = self.item_event(u, (kind, post), ts, actor) {
                            act["event"] = at.json();
                        }
                        act
                    });
                    v["why"] = acts.collect::<Vec<_>>().into();
                }
                match kind {
                    0 => {}
                    3 => {
                        v["post"] = json!({"author": u, "post_id": parent});
                        v["reply"] = json!({"author": post.0, "post_id": post.1});
                    }
                    _ => v["post"] = json!({"author": post.0, "post_id": post.1}),
                }
                v
            })
            .collect()
    }
}
