//! How a user's notifications group: a pure function of the items, so the
//! same log gives the same groups on every page size, device and hour
//! (docs/semantics.md's contract; peers group by a key that expires, by
//! the time of asking or by where a page ended).
//!
//! Items of one key — all `follow`s of the user, the `like`s of one post,
//! the `repost`s of one post — ordered by (ts, actor) fall into one group
//! while every gap between consecutive items is at most [`GROUP_GAP_MS`]
//! and the group holds fewer than [`GROUP_MOST`] items, counted from the
//! oldest; a `reply` or a `mention` is a group of its own. Groups are
//! ordered by (newest ts, key), newest first, and two groups of one key
//! ending at the same time (the first full) by their oldest items.
//!
//! Which items a user has is [`items::items_of`]'s; filters apply when
//! read.

use crate::event::{Ts, UserId};
use crate::keys::PostRef;

pub mod items;

/// The longest gap between two consecutive items of one group: 12 hours.
pub const GROUP_GAP_MS: u64 = 12 * 60 * 60 * 1000;

/// The most items one group holds; the next starts a new group.
pub const GROUP_MOST: usize = 50;

/// What items group by. The order is the tie-break between groups whose
/// newest items have the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupKey {
    /// Every follow of the user.
    Follows,
    /// The likes of the user's post.
    Likes(PostRef),
    /// The reposts of the user's post.
    Reposts(PostRef),
    /// A reply to the user's post: the reply itself, alone.
    Reply(PostRef),
    /// A post mentioning the user: alone.
    Mention(PostRef),
}

impl GroupKey {
    /// Whether items of this key gather (follows, likes, reposts) or
    /// each stands alone (replies, mentions).
    pub fn gathers(self) -> bool {
        matches!(
            self,
            GroupKey::Follows | GroupKey::Likes(_) | GroupKey::Reposts(_)
        )
    }
}

/// One notification: an act of `actor` at `ts`, under `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Item {
    /// What it groups by.
    pub key: GroupKey,
    /// The act's time.
    pub ts: Ts,
    /// Who acted.
    pub actor: UserId,
}

/// A group of items of one key, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The key of every item.
    pub key: GroupKey,
    /// (ts, actor), ascending: the oldest first.
    pub items: Vec<(Ts, UserId)>,
}

impl Group {
    /// The newest item's time (the group's place).
    pub fn newest(&self) -> Ts {
        self.items.last().map_or(Ts(0), |i| i.0)
    }

    /// The oldest item's time.
    pub fn oldest(&self) -> Ts {
        self.items.first().map_or(Ts(0), |i| i.0)
    }

    /// The group's place among groups, which sort newest first: by
    /// (newest ts, key), then by the oldest item (no two groups share it).
    pub fn place(&self) -> (Ts, GroupKey, (Ts, UserId)) {
        let first = self.items.first().copied().unwrap_or((Ts(0), UserId(0)));
        (self.newest(), self.key, first)
    }
}

/// The groups `items` form, newest first. The order the items come in and
/// their repeats change nothing: an item is its (key, ts, actor).
pub fn group(items: impl IntoIterator<Item = Item>) -> Vec<Group> {
    let mut items: Vec<Item> = items.into_iter().collect();
    items.sort_unstable();
    items.dedup();
    let mut groups: Vec<Group> = Vec::new();
    for it in items {
        let joins = groups.last().is_some_and(|g| {
            g.key == it.key
                && it.key.gathers()
                && g.items.len() < GROUP_MOST
                && it.ts.0 - g.newest().0 <= GROUP_GAP_MS
        });
        match (joins, groups.last_mut()) {
            (true, Some(g)) => g.items.push((it.ts, it.actor)),
            _ => groups.push(Group {
                key: it.key,
                items: vec![(it.ts, it.actor)],
            }),
        }
    }
    groups.sort_unstable_by_key(|g| std::cmp::Reverse(g.place()));
    groups
}

#[cfg(test)]
mod tests;
