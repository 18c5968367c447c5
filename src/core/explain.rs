//! Why a post is, or is not, in a reader's home timeline
//! (docs/http-api.md, "Explain"): the appearances that put it there, each with the events
//! that decided it and where they sit in the log, or the one reason it is
//! not there.
//!
//! Everything here is read from the reader's partition (its follow edges,
//! filters and copy of the live reposts) and the records of the post ids
//! involved at their authors' partitions (`post`, a read the caller
//! routes). Like every view, the answer is a function of the log: the same
//! after any replay of it (the positions name places in its partitions).

use crate::edge::Edge;
use crate::event::{PostId, Ts, UserId};
use crate::filter::{self, Blocked, Pair, ReadFilter};
use crate::keys::{EdgeVal, PostRef, PostVal, RepostState, TimelineKey};
use crate::kv::{Cf, Kv, KvError};
use crate::partition::partition_for;
use crate::partition::Partition;
use crate::position::Version;
use crate::reply::rule::Rule;
use crate::repost;
use crate::views;

/// Where an event sits in the log: its partition of `events` and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    /// The partition of `events` (the actor's).
    pub partition: Partition,
    /// The event's offset there.
    pub offset: u64,
}

impl At {
    /// The event of `version` in `actor`'s partition of `partitions`.
    pub fn of(actor: UserId, partitions: u32, version: Version) -> Option<At> {
        (version.0 > 0).then(|| At {
            partition: partition_for(actor, partitions),
            offset: version.0 - 1,
        })
    }
}

/// One appearance of a post in a reader's timeline: the post itself, by a
/// followed author, or a followed user's repost of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appearance {
    /// A repost (else the original).
    pub repost: bool,
    /// The followed user it came through (the author, or the reposter).
    pub via: UserId,
    /// The post's id, or the repost's.
    pub post_id: PostId,
    /// The post's or the repost's time.
    pub ts: Ts,
    /// When the reader's follow of `via` counts from.
    pub followed_at: Ts,
    /// The follow event (`None`: not recorded by the build that applied it).
    pub follow_event: Option<At>,
    /// The post or repost event (`None`: not recorded).
    pub event: Option<At>,
}

/// The one reason a post is not in a reader's timeline, with the event
/// that decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No post or repost event of the id has been applied.
    UnknownPost,
    /// The id is a repost: entries are originals. `original`: the original
    /// it reposts, while the repost is live.
    IsRepost {
        /// The original, while live.
        original: Option<PostRef>,
        /// The repost event.
        event: Option<At>,
    },
    /// The post was deleted (for good, also from the past).
    Deleted {
        /// The deletion's time.
        ts: Option<Ts>,
        /// The deletion event.
        event: Option<At>,
    },
    /// The reader's own post: a home timeline holds the followed users'.
    OwnPost {
        /// The post event.
        event: Option<At>,
    },
    /// A block between the reader and `via` (the author, or the only
    /// followed users who reposted it).
    Blocked {
        /// The user it hides.
        via: UserId,
        /// Who blocks whom: the blocker.
        by: UserId,
        /// Since when.
        since: Ts,
        /// The block event.
        event: Option<At>,
    },
    /// The reader mutes `via`.
    Muted {
        /// The muted user.
        via: UserId,
        /// Since when.
        since: Ts,
        /// When the mute ends, if it does.
        until: Option<Ts>,
        /// The mute event.
        event: Option<At>,
    },
    /// The reader hides `via`'s reposts (and does not follow the author).
    RepostsHidden {
        /// The reposting user.
        via: UserId,
        /// Since when.
        since: Ts,
        /// The event.
        event: Option<At>,
    },
    /// A reply to a post of `parent`, whom the reader does not follow
    /// (nor is): the replies rule leaves it out, and no followed user
    /// reposted it.
    ReplyToUnfollowed {
        /// The author of the post it replies to.
        parent: UserId,
    },
    /// The reader does not follow the author, and no followed user
    /// reposted the post.
    NotFollowing {
        /// How the follow ended, if there was one.
        ended: Option<FollowEnd>,
    },
}

/// How a reader's follow of an author ended, or why it does not count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowEnd {
    /// Unfollowed at `ts` by the event at `event`.
    Unfollowed {
        /// The unfollow's time (an unfollow applied by an earlier build:
        /// the follow's).
        ts: Ts,
        /// The unfollow event.
        event: Option<At>,
    },
    /// Followed at `followed_at`, within a block period between the two
    /// that ended at `block_ended`: the follow does not count.
    Voided {
        /// The follow's time.
        followed_at: Ts,
        /// The follow event.
        event: Option<At>,
        /// The end of the block periods.
        block_ended: Ts,
    },
}

/// Is the post in the timeline, and why (not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// In the timeline, through these appearances (newest first).
    Shown(Vec<Appearance>),
    /// Not in the timeline.
    NotShown(Reason),
}

/// What a question reads: the reader's partition, the record of a post id
/// at its author's partition, and the partition count.
pub struct Sources<'a, K: Kv + ?Sized> {
    /// The reader's partition.
    pub kv: &'a K,
    /// The reader.
    pub user: UserId,
    /// Partitions of the log.
    pub partitions: u32,
    /// A post id's record at its author's partition.
    pub post: &'a mut dyn FnMut(PostRef) -> Result<Option<PostVal>, KvError>,
}

impl<K: Kv + ?Sized> Sources<'_, K> {
    fn at(&self, actor: UserId, version: Option<Version>) -> Option<At> {
        version.and_then(|v| At::of(actor, self.partitions, v))
    }

    /// The reader's counted follow of `other`.
    fn follow(&self, other: UserId) -> Result<Option<EdgeVal>, KvError> {
        Ok(views::edge(self.kv, Cf::Followees, self.user, other)?.filter(|e| e.live))
    }

    fn appearance(&self, e: &EdgeVal, via: UserId, (post_id, ts): (PostId, Ts)) -> Appearance {
        Appearance {
            repost: false,
            via,
            post_id,
            ts,
            followed_at: e.ts,
            follow_event: self.at(self.user, e.follow_version()),
            event: None,
        }
    }
}

/// Every appearance of the original `root` in the reader's timeline under
/// `filter` (with reposts unless `originals_only`), newest first; empty
/// when the post is not there. `posted`: the original's time and post
/// event version, when it is live.
pub fn appearances<K: Kv + ?Sized>(
    s: &mut Sources<'_, K>,
    root: PostRef,
    posted: (Ts, Option<Version>),
    filter: &ReadFilter,
    originals_only: bool,
) -> Result<Vec<Appearance>, KvError> {
    let (author, post_id) = root;
    let mut out = Vec::new();
    if author == s.user || filter.hidden.contains(&author) {
        return Ok(out);
    }
    let mut rule = Rule::new(filter.replies, !filter.no_reply_here);
    let follow = match s.follow(author)? {
        Some(e) if rule.shows(s.kv, s.user, root)? => Some(e),
        _ => None,
    };
    if let Some(e) = follow {
        let mut a = s.appearance(&e, author, (post_id, posted.0));
        a.event = s.at(author, posted.1);
        out.push(a);
    }
    if !originals_only {
        for k in repost::reposts_of(s.kv, root)? {
            if !filter.shows(author, k.author, true) {
                continue;
            }
            let Some(e) = s.follow(k.author)? else {
                continue;
            };
            let Some(event) = live_repost(s, &k)? else {
                continue;
            };
            let mut a = s.appearance(&e, k.author, (k.post_id, k.ts));
            (a.repost, a.event) = (true, event);
            out.push(a);
        }
    }
    out.sort_by_key(|a| TimelineKey {
        ts: a.ts,
        post_id: a.post_id,
        author: a.via,
    });
    Ok(out)
}

/// Is `(author, post_id)` in the reader's timeline (reposts shown, at the
/// reader's partition's clock, replies by the default rule), and if not,
/// the first reason in this order: unknown, a repost, deleted, the
/// reader's own, blocked, muted, a reply to a user the reader does not
/// follow (the reader following the author), and then — the reader not
/// following the author — the newest followed reposter's filter
/// (blocked, muted, reposts hidden), or not following.
pub fn why<K: Kv + ?Sized>(s: &mut Sources<'_, K>, root: PostRef) -> Result<Verdict, KvError> {
    let (author, _) = root;
    let not = |r| Ok(Verdict::NotShown(r));
    let (ts, by) = match (s.post)(root)? {
        None => return not(Reason::UnknownPost),
        Some(PostVal::Repost(rv)) => {
            let live = rv.state == RepostState::Live && !rv.deleted;
            return not(Reason::IsRepost {
                original: rv.root.filter(|_| live).map(|r| r.0),
                event: s.at(author, rv.by),
            });
        }
        Some(PostVal::Deleted(_, p)) => {
            return not(Reason::Deleted {
                ts: p.deleted.map(|d| d.1),
                event: s.at(author, p.deleted.map(|d| d.0)),
            })
        }
        Some(PostVal::Live(ts, p)) => (ts, p.post),
    };
    if author == s.user {
        return not(Reason::OwnPost {
            event: s.at(author, by),
        });
    }
    let now = views::clock(s.kv)?;
    if let Some(r) = hidden_by(s, author, now)? {
        return not(r);
    }
    let filter = ReadFilter::of(s.kv, s.user, now)?;
    let shown = appearances(s, root, (ts, by), &filter, false)?;
    if !shown.is_empty() {
        return Ok(Verdict::Shown(shown));
    }
    // Following the author: only the replies rule leaves the post out.
    if s.follow(author)?.is_some() {
        if let Some(parent) = Rule::default().parent(s.kv, root)? {
            return not(Reason::ReplyToUnfollowed { parent });
        }
    }
    // Not following the author: followed users' reposts, all filtered out.
    let mut reposts = repost::reposts_of(s.kv, root)?;
    reposts.sort();
    for k in reposts {
        if k.author == s.user || s.follow(k.author)?.is_none() || live_repost(s, &k)?.is_none() {
            continue;
        }
        if let Some(r) = hidden_by(s, k.author, now)? {
            return not(r);
        }
        let f = filter::pair(
            s.kv,
            Pair {
                owner: s.user,
                other: k.author,
            },
        )?;
        if let Some(t) = f.hide_reposts.filter(|t| t.on) {
            return not(Reason::RepostsHidden {
                via: k.author,
                since: t.ts,
                event: s.at(s.user, Some(t.version)),
            });
        }
    }
    let edge = views::edge(s.kv, Cf::Followees, s.user, author)?;
    let ended = match edge {
        None => None,
        Some(e) if e.void => Some(FollowEnd::Voided {
            followed_at: e.first,
            event: s.at(s.user, Some(e.version)),
            block_ended: match filter::blocked(
                s.kv,
                Edge {
                    follower: s.user,
                    author,
                },
            )? {
                Blocked::Until(end) => end,
                Blocked::Never | Blocked::Live => Ts(0),
            },
        }),
        Some(e) => Some(FollowEnd::Unfollowed {
            ts: e.ts,
            event: s.at(s.user, Some(e.version)),
        }),
    };
    not(Reason::NotFollowing { ended })
}

/// Whether the repost `k` (a directory entry: its reposter, id and time)
/// is live by its reposter's own record — the record decides, should the
/// directory's copy lag behind it — and if so, where its event sits.
fn live_repost<K: Kv + ?Sized>(
    s: &mut Sources<'_, K>,
    k: &TimelineKey,
) -> Result<Option<Option<At>>, KvError> {
    Ok(match (s.post)((k.author, k.post_id))? {
        Some(PostVal::Repost(rv)) if rv.state == RepostState::Live && !rv.deleted => {
            Some(s.at(k.author, rv.by))
        }
        _ => None,
    })
}

/// The block (either way) or mute that hides `other` from the reader at
/// `now`, if any: the reader's own block first.
fn hidden_by<K: Kv + ?Sized>(
    s: &Sources<'_, K>,
    other: UserId,
    now: Ts,
) -> Result<Option<Reason>, KvError> {
    let f = filter::pair(
        s.kv,
        Pair {
            owner: s.user,
            other,
        },
    )?;
    for (by, b) in [(s.user, f.block_out), (other, f.block_in)] {
        if let Some(t) = b.map(|b| b.toggle).filter(|t| t.on) {
            return Ok(Some(Reason::Blocked {
                via: other,
                by,
                since: t.ts,
                event: s.at(by, Some(t.version)),
            }));
        }
    }
    match f.mute {
        Some((t, until)) if t.on && until.is_none_or(|u| now < u) => Ok(Some(Reason::Muted {
            via: other,
            since: t.ts,
            until,
            event: s.at(s.user, Some(t.version)),
        })),
        _ => Ok(None),
    }
}
