//! Explain (docs/http-api.md, "Explain"): why an entry is in a timeline
//! (`explain=1`), and why a post is or is not (`timeline/why`).

use super::{check_user, Modes, Page, PostItem, QueryError, Reader, RepostMode, RepostOf};
use crate::core::event::{PostId, Ts, UserId};
use crate::core::explain::{self, Appearance, At, FollowEnd, Reason, Sources, Verdict};
use crate::core::filter;
use crate::core::keys::{PostRef, PostVal};
use crate::core::kv::KvError;
use crate::core::views;
use crate::core::Partition;
use crate::state::Snapshot;
use serde::Serialize;
use std::cell::RefCell;

/// Where an event sits in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct EventAt {
    /// The partition of `events`.
    #[schema(value_type = u32)]
    pub partition: Partition,
    /// The event's offset there.
    pub offset: u64,
}

fn at(a: Option<At>) -> Option<EventAt> {
    a.map(|a| EventAt {
        partition: a.partition,
        offset: a.offset,
    })
}

/// One appearance of a timeline entry's post: the original by a followed
/// author, or a followed user's repost of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct WhyItem {
    /// `original` or `repost`.
    pub kind: &'static str,
    /// The followed user it came through (the author, or the reposter).
    pub via: u64,
    /// The post's id, or the repost's.
    pub post_id: u64,
    /// The post's or the repost's time, ms since the epoch.
    pub ts: u64,
    /// When the reader's follow of `via` counts from.
    pub followed_at: u64,
    /// The follow event (absent: applied by a build that did not record it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follow_event: Option<EventAt>,
    /// The post or repost event (absent: not recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<EventAt>,
}

impl From<&Appearance> for WhyItem {
    fn from(a: &Appearance) -> WhyItem {
        WhyItem {
            kind: if a.repost { "repost" } else { "original" },
            via: a.via.0,
            post_id: a.post_id.0,
            ts: a.ts.0,
            followed_at: a.followed_at.0,
            follow_event: at(a.follow_event),
            event: at(a.event),
        }
    }
}

/// Is a post in a user's timeline, and why (not). Fields past
/// `in_timeline` depend on the answer: `why` when it is in; else `reason`
/// and the reason's fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema, Default)]
pub struct WhyAnswer {
    /// The reader.
    pub user: u64,
    /// The post's author.
    pub author: u64,
    /// The post.
    pub post_id: u64,
    /// Whether the post is in the user's timeline.
    pub in_timeline: bool,
    /// In: its appearances, newest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<Vec<WhyItem>>,
    /// Not in: `not_applied_yet`, `unknown_post`, `is_repost`, `deleted`,
    /// `own_post`, `blocked`, `muted`, `reply_to_unfollowed`,
    /// `reposts_hidden` or `not_following`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// `blocked`, `muted`, `reposts_hidden`: the user the filter is about
    /// (the author, or a followed user who reposted the post).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<u64>,
    /// `blocked`: the blocker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<u64>,
    /// `blocked`, `muted`, `reposts_hidden`: since when (the event's time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// `muted`: when the mute ends (absent: when unmuted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
    /// `deleted`: the deletion's time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<u64>,
    /// `is_repost`: the original it reposts, while the repost is live.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original: Option<RepostOf>,
    /// `reply_to_unfollowed`: the author of the post it replies to, whom
    /// the reader does not follow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// `not_following`: `never`, `unfollowed` (at `ts`) or `voided` (a
    /// follow at `followed_at` within a block period that ended at
    /// `block_ended`: it does not count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follow: Option<&'static str>,
    /// `not_following`, `voided`: the follow's time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub followed_at: Option<u64>,
    /// `not_following`, `voided`: when the block periods ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_ended: Option<u64>,
    /// The deciding event (the deletion, the repost, the post, the block,
    /// the mute, the hiding, the unfollow or the voided follow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<EventAt>,
    /// `not_applied_yet`: the post's author's partition.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u32>)]
    pub partition: Option<Partition>,
    /// `not_applied_yet`: that partition's events not applied yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag: Option<u64>,
}

impl WhyAnswer {
    /// An `unknown_post` answer whose author's partition `p` has `lag`
    /// events not applied yet becomes `not_applied_yet` (the post may be
    /// among them).
    pub fn not_applied_yet(&mut self, p: Partition, lag: u64) {
        if self.reason == Some("unknown_post") && lag > 0 {
            (self.reason, self.partition, self.lag) = (Some("not_applied_yet"), Some(p), Some(lag));
        }
    }

    /// The answer for `user` about `post` from the core's verdict.
    pub fn of(user: UserId, (author, post_id): PostRef, verdict: &Verdict) -> WhyAnswer {
        let mut w = WhyAnswer {
            user: user.0,
            author: author.0,
            post_id: post_id.0,
            ..WhyAnswer::default()
        };
        let reason = match *verdict {
            Verdict::Shown(ref apps) => {
                w.in_timeline = true;
                w.why = Some(apps.iter().map(WhyItem::from).collect());
                return w;
            }
            Verdict::NotShown(r) => r,
        };
        let (name, event) = match reason {
            Reason::UnknownPost => ("unknown_post", None),
            Reason::IsRepost { original, event } => {
                w.original = original.map(|(a, p)| RepostOf {
                    author: a.0,
                    post_id: p.0,
                });
                ("is_repost", event)
            }
            Reason::Deleted { ts, event } => {
                w.ts = ts.map(|t| t.0);
                ("deleted", event)
            }
            Reason::OwnPost { event } => ("own_post", event),
            Reason::Blocked {
                via,
                by,
                since,
                event,
            } => {
                (w.via, w.by, w.since) = (Some(via.0), Some(by.0), Some(since.0));
                ("blocked", event)
            }
            Reason::Muted {
                via,
                since,
                until,
                event,
            } => {
                (w.via, w.since, w.until) = (Some(via.0), Some(since.0), until.map(|u| u.0));
                ("muted", event)
            }
            Reason::RepostsHidden { via, since, event } => {
                (w.via, w.since) = (Some(via.0), Some(since.0));
                ("reposts_hidden", event)
            }
            Reason::ReplyToUnfollowed { parent } => {
                w.parent = Some(parent.0);
                ("reply_to_unfollowed", None)
            }
            Reason::NotFollowing { ended } => match ended {
                None => {
                    w.follow = Some("never");
                    ("not_following", None)
                }
                Some(FollowEnd::Unfollowed { ts, event }) => {
                    (w.follow, w.ts) = (Some("unfollowed"), Some(ts.0));
                    ("not_following", event)
                }
                Some(FollowEnd::Voided {
                    followed_at,
                    event,
                    block_ended,
                }) => {
                    w.follow = Some("voided");
                    (w.followed_at, w.block_ended) = (Some(followed_at.0), Some(block_ended.0));
                    ("not_following", event)
                }
            },
        };
        w.reason = Some(name);
        w.event = at(event);
        w
    }
}

impl Reader {
    /// Is `(author, post_id)` in `user`'s home timeline (reposts shown),
    /// and why — or the one reason it is not, with the deciding event.
    /// An unknown post is only that as far as the state has applied the
    /// log: see [`WhyAnswer::not_applied_yet`].
    pub fn why(&self, user: UserId, (author, post_id): PostRef) -> Result<WhyAnswer, QueryError> {
        check_user(user)?;
        check_user(author)?;
        let verdict = self.explaining(user, |s| explain::why(s, (author, post_id)))?;
        Ok(WhyAnswer::of(user, (author, post_id), &verdict))
    }

    /// Each entry of `page` (of `user`'s timeline in `modes`) with `why`:
    /// its appearances, read from the state as it is now.
    pub fn explain_page(
        &self,
        user: UserId,
        modes: Modes,
        page: &mut Page<PostItem>,
    ) -> Result<(), QueryError> {
        let only = modes.reposts == RepostMode::None;
        let items = &mut page.items;
        self.explaining(user, |s| {
            let mut filter = filter::ReadFilter::of(s.kv, user, views::clock(s.kv)?)?;
            filter.replies = modes.replies;
            for item in items.iter_mut() {
                let root = (UserId(item.author), PostId(item.post_id));
                let (ts, by) = match (s.post)(root)? {
                    Some(PostVal::Live(ts, p)) => (ts, p.post),
                    _ => (Ts(item.post_ts.unwrap_or(item.ts)), None),
                };
                let apps = explain::appearances(s, root, (ts, by), &filter, only)?;
                item.why = Some(apps.iter().map(WhyItem::from).collect());
            }
            Ok(())
        })
    }

    /// Runs `f` over the explain sources of `user`: a snapshot of the
    /// user's partition, and post records read wherever their authors'
    /// partitions are. A record that cannot be read fails the answer with
    /// that read's error (not the core's "no such post").
    fn explaining<T>(
        &self,
        user: UserId,
        f: impl FnOnce(&mut Sources<'_, Snapshot<'_>>) -> Result<T, KvError>,
    ) -> Result<T, QueryError> {
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let failed = RefCell::new(None);
        let mut post = |r: PostRef| self.post_record(r, &failed);
        let mut s = Sources {
            kv: &snap,
            user,
            partitions: self.partitions,
            post: &mut post,
        };
        let answer = f(&mut s);
        if let Some(e) = failed.take() {
            return Err(e);
        }
        Ok(answer?)
    }

    /// A post id's record at its author's partition, here or (Kafka mode)
    /// at the processor that serves it; when it cannot be read, none, and
    /// why in `failed` (the caller answers with that error).
    fn post_record(
        &self,
        post: PostRef,
        failed: &RefCell<Option<QueryError>>,
    ) -> Result<Option<PostVal>, KvError> {
        let read = match (self.post_here(post), &self.remote) {
            (Err(QueryError::Elsewhere { .. }), Some(remote)) => remote.post(post),
            (read, _) => read,
        };
        read.or_else(|e| {
            failed.borrow_mut().get_or_insert(e);
            Ok(None)
        })
    }

    /// A post id's record, from this processor's partitions only (what
    /// another processor asks for).
    pub fn post_here(&self, (author, post_id): PostRef) -> Result<Option<PostVal>, QueryError> {
        check_user(author)?;
        let store = self.store_of(author)?;
        let record = views::post(&store.snapshot(), author, post_id)?;
        Ok(record)
    }
}
