//! The oracle's notifications (docs/semantics.md, "Notifications"), by
//! their definition.

use super::Oracle;
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

    /// `GET /v1/users/{u}/notifications?grouped=&types=`, every page's
    /// items in order.
    pub fn notifications(&self, u: u64, grouped: bool, types: Option<&[&str]>) -> Vec<Value> {
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
