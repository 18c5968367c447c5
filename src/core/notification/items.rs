//! A user's notification items, read from the indexes their partition already keeps for their posts and followers.
//!
//! Every act a notification names is registered at the notified user's
//! partition before this reads it, so no message of its own carries it:
//! a follow of the user counts in their `recent_followers`; a like, a
//! repost and a reply of one of their posts is registered with that post
//! at its author's partition (`engagement` tags 5 and 8, `reposts` tag 0;
//! state/README.md), and a live post that mentions them at theirs (tag
//! 11, `crate::reply::mention`). Only a live original's registrations are
//! items (one waiting at a post not known yet is not), and acts of the
//! user on their own posts are not; a reply to one of their posts that
//! also mentions them is one item, the reply. Filters (blocks, mutes) are
//! the reader's, applied when read.

use super::{GroupKey, Item};
use crate::event::{PostId, Ts, UserId};
use crate::explain::At;
use crate::keys::{self, PostRef, PostVal};
use crate::kv::{u64_at, Cf, Kv, KvError};
use crate::position::Version;
use crate::views;
use std::collections::HashMap;

/// The items of `user` in this partition's state, in no order, with the
/// post each reply answers (the notified user's post).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Items {
    /// Every item.
    pub items: Vec<Item>,
    /// For each [`GroupKey::Reply`] item: the post it replies to.
    pub parents: HashMap<PostRef, PostRef>,
}

/// Every notification item of `user` (owned by this partition): follows
/// that count, live likes, reposts and replies of their live originals by
/// others, and live posts that mention them (but reply to them already).
pub fn items_of<K: Kv + ?Sized>(kv: &K, user: UserId) -> Result<Items, KvError> {
    let mut out = Items::default();
    for r in views::recent_followers(kv, user) {
        let (follower, ts) = r?;
        out.items.push(Item {
            key: GroupKey::Follows,
            ts,
            actor: follower,
        });
    }
    let mut live: HashMap<PostId, bool> = HashMap::new();
    let mut is_live = |p: PostId| -> Result<bool, KvError> {
        if let Some(&l) = live.get(&p) {
            return Ok(l);
        }
        let l = matches!(views::post(kv, user, p)?, Some(PostVal::Live(..)));
        live.insert(p, l);
        Ok(l)
    };
    let prefix = keys::likers_of_author(user);
    for r in kv.scan_prefix(Cf::Engagement, &prefix) {
        let (k, _) = r?;
        let at = |i| u64_at(Cf::Engagement, &k, &k, i);
        let (post, ts, liker) = (PostId(at(9)?), Ts(!at(17)?), UserId(!at(25)?));
        if liker != user && is_live(post)? {
            out.items.push(Item {
                key: GroupKey::Likes((user, post)),
                ts,
                actor: liker,
            });
        }
    }
    for r in kv.scan_prefix(Cf::Reposts, &keys::reposts_of_author(user)) {
        let (k, v) = r?;
        let post = PostId(u64_at(Cf::Reposts, &k, &k, 9)?);
        let reposter = UserId(u64_at(Cf::Reposts, &k, &k, 17)?);
        let ts = Ts(u64_at(Cf::Reposts, &k, &v, 0)?);
        if reposter != user && is_live(post)? {
            out.items.push(Item {
                key: GroupKey::Reposts((user, post)),
                ts,
                actor: reposter,
            });
        }
    }
    let prefix = keys::repliers_of_author(user);
    for r in kv.scan_prefix(Cf::Engagement, &prefix) {
        let (k, _) = r?;
        let at = |i| u64_at(Cf::Engagement, &k, &k, i);
        let (post, ts) = (PostId(at(9)?), Ts(at(17)?));
        let reply = (UserId(at(25)?), PostId(at(33)?));
        if reply.0 != user && is_live(post)? {
            out.items.push(Item {
                key: GroupKey::Reply(reply),
                ts,
                actor: reply.0,
            });
            out.parents.insert(reply, (user, post));
        }
    }
    for r in crate::reply::mention::mentions_of(kv, user) {
        let (ts, post) = r?;
        if !out.parents.contains_key(&post) {
            out.items.push(Item {
                key: GroupKey::Mention(post),
                ts,
                actor: post.0,
            });
        }
    }
    Ok(out)
}

/// Where the event that made `item` of `user` sits in the log (`explain`),
/// with `partitions` partitions: the follow that started the edge (none
/// for a follow revived after a block: the reviving follow's position is
/// not kept at this end), the like or unlike that decided the like, the
/// repost, or the post that replies or mentions. `parent`: a reply's
/// parent (from [`Items::parents`]). `None` also when the item is gone.
pub fn event_of<K: Kv + ?Sized>(
    kv: &K,
    user: UserId,
    (item, parent): (&Item, Option<PostRef>),
    partitions: u32,
) -> Result<Option<At>, KvError> {
    let version_at = |cf: Cf, k: &[u8], at: usize| -> Result<Option<Version>, KvError> {
        match kv.get(cf, k)? {
            Some(v) => Ok(Some(Version(u64_at(cf, k, &v, at)?))),
            None => Ok(None),
        }
    };
    let (actor, version) = match item.key {
        GroupKey::Follows => {
            let edge = views::edge(kv, Cf::Followers, user, item.actor)?;
            let made = edge.filter(|e| e.live && e.ts == item.ts);
            (item.actor, made.and_then(|e| e.follow_version()))
        }
        GroupKey::Likes(post) => {
            let k = keys::like_of(post, item.actor);
            (item.actor, version_at(Cf::Engagement, &k, 5)?)
        }
        GroupKey::Reposts(post) => {
            let mut prefix = keys::repost_of_prefix(post);
            prefix.extend_from_slice(&item.actor.0.to_be_bytes());
            let mut found = None;
            for r in kv.scan_prefix(Cf::Reposts, &prefix) {
                let (k, v) = r?;
                if u64_at(Cf::Reposts, &k, &v, 0)? == item.ts.0 {
                    found = Some(Version(u64_at(Cf::Reposts, &k, &v, 12)?));
                    break;
                }
            }
            (item.actor, found)
        }
        GroupKey::Reply(reply) => match parent {
            Some(parent) => {
                let k = keys::reply_of(parent, reply);
                (reply.0, version_at(Cf::Engagement, &k, 5)?)
            }
            None => (reply.0, None),
        },
        GroupKey::Mention(post) => {
            let k = keys::mention(user, item.ts, post);
            (post.0, version_at(Cf::Engagement, &k, 1)?)
        }
    };
    Ok(version.and_then(|v| At::of(actor, partitions, v)))
}
