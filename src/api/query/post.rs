//! One post with its counts and a viewer's flags, who likes it, its replies, and the counts and flags a page's entries carry.

use super::cursor::{decode_cursor, encode_cursor, CursorView};
use super::{
    check_limit, check_user, cursor_u64, Counts, Flags, FollowerItem, Page, PostItem, QueryError,
    Reader, RepostOf,
};
use crate::core::event::{PostId, Ts, UserId};
use crate::core::keys::{PostRef, PostVal, RepostState};
use crate::core::Partition;
use crate::core::{like, reply, repost, views};
use serde::Serialize;

/// A post with its counts: an original, or a live repost with the
/// original it reposts (whose counts these are).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PostAnswer {
    /// The post (a repost's own id).
    pub post_id: u64,
    /// Its author (a repost's reposter).
    pub author: u64,
    /// Its time, ms since the epoch.
    pub ts: u64,
    /// A repost: the original it reposts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repost_of: Option<RepostOf>,
    /// A reply: the post it names in `reply_to` (as written: a repost's
    /// id stays; its counts go to the original).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<RepostOf>,
    /// The users it mentions, in the order written (absent: none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<u64>,
    /// The original's counts.
    pub counts: Counts,
    /// With `viewer`: the viewer's flags on the original.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub viewer: Option<Flags>,
}

/// A post's time, the original its counts are of, and for a repost that
/// original.
type Resolved = (Ts, PostRef, Option<PostRef>);

/// What an [`Engagement`] read asks for, of each original.
#[derive(Debug, Clone, Copy)]
pub enum Engagement<'a> {
    /// The originals' counts (at their authors' partition).
    Counts(&'a [PostRef]),
    /// The viewer's flags on the originals (at the viewer's partition).
    Flags(UserId, &'a [PostRef]),
}

/// One original's answer to an [`Engagement`] read: its `(likes,
/// reposts, replies)`, or the viewer's `(liked, reposted, 0)` as 1 or 0
/// (the triple the internal route carries).
pub type Engaged = (u64, u64, u64);

impl Reader {
    /// An [`Engagement`] read of the partitions this processor serves:
    /// one snapshot of each partition read.
    pub fn engagement_here(&self, asked: Engagement<'_>) -> Result<Vec<Engaged>, QueryError> {
        match asked {
            Engagement::Counts(roots) => {
                let mut out = vec![(0, 0, 0); roots.len()];
                for &root in roots {
                    check_user(root.0)?;
                }
                // One snapshot of each partition, its counts read in a batch.
                for (_, idx, of_p) in self.by_partition(roots) {
                    let store = self.store_of(of_p[0].0)?;
                    let snap = store.snapshot();
                    // Likes and replies in one batch (both in `engagement`).
                    let (likes, replies) = reply::likes_and_replies(&snap, &of_p)?;
                    let reposts = repost::counts(&snap, &of_p)?;
                    for (j, i) in idx.into_iter().enumerate() {
                        out[i] = (likes[j], reposts[j], replies[j]);
                    }
                }
                Ok(out)
            }
            Engagement::Flags(viewer, roots) => {
                check_user(viewer)?;
                let store = self.store_of(viewer)?;
                let snap = store.snapshot();
                let flags = like::flags(&snap, viewer, roots)?;
                Ok(flags
                    .into_iter()
                    .map(|(l, r)| (u64::from(l), u64::from(r), 0))
                    .collect())
            }
        }
    }

    /// `roots` grouped by the partition of their authors: each partition
    /// once, with the places in `roots` of its originals and those
    /// originals.
    fn by_partition(&self, roots: &[PostRef]) -> Vec<(Partition, Vec<usize>, Vec<PostRef>)> {
        let mut groups: Vec<(Partition, Vec<usize>, Vec<PostRef>)> = Vec::new();
        for (i, &root) in roots.iter().enumerate() {
            let p = self.partition_of(root.0);
            match groups.iter_mut().find(|g| g.0 == p) {
                Some(g) => {
                    g.1.push(i);
                    g.2.push(root);
                }
                None => groups.push((p, vec![i], vec![root])),
            }
        }
        groups
    }

    /// An [`Engagement`] read of the partition `at`: here, or from the
    /// processor serving it (Kafka mode).
    fn engaged(&self, at: Partition, asked: Engagement<'_>) -> Result<Vec<Engaged>, QueryError> {
        let read = match (self.engagement_here(asked), &self.remote) {
            (Err(QueryError::Elsewhere { .. }), Some(remote)) => {
                match remote.engagement(at, asked) {
                    // Its owner did not answer (killed, say): a warm standby
                    // here answers, as it answers every request for that
                    // partition until the owner does again.
                    Err(e) => match remote
                        .unreachable(at)
                        .and_then(|span| self.read_standby(at, span))
                    {
                        Some(_) => self.engagement_here(asked),
                        None => Err(e),
                    },
                    read => read,
                }
            }
            (read, _) => read,
        }?;
        let want = match asked {
            Engagement::Counts(r) | Engagement::Flags(_, r) => r.len(),
        };
        if read.len() != want {
            return Err(QueryError::Internal(format!(
                "engagement: {} answers for {want} posts",
                read.len()
            )));
        }
        Ok(read)
    }

    /// The counts of each original of `roots`, read at its author's
    /// partition (one read of each partition), and with a `viewer` the
    /// viewer's flags on each, read at the viewer's.
    pub fn engagement_of(
        &self,
        roots: &[PostRef],
        viewer: Option<UserId>,
    ) -> Result<(Vec<Counts>, Option<Vec<Flags>>), QueryError> {
        let mut counts = vec![Counts::default(); roots.len()];
        for (p, idx, of_p) in self.by_partition(roots) {
            for (i, (likes, reposts, replies)) in idx
                .into_iter()
                .zip(self.engaged(p, Engagement::Counts(&of_p))?)
            {
                counts[i] = Counts {
                    likes,
                    replies,
                    reposts,
                };
            }
        }
        let flags = match viewer {
            None => None,
            Some(v) => {
                let read = self.engaged(self.partition_of(v), Engagement::Flags(v, roots))?;
                let flag = |(liked, reposted, _): Engaged| Flags {
                    liked: liked == 1,
                    reposted: reposted == 1,
                };
                Some(read.into_iter().map(flag).collect())
            }
        };
        Ok((counts, flags))
    }

    /// Puts on each item of a timeline or posts page its original's counts
    /// and, with a `viewer`, the viewer's flags.
    pub fn decorate(
        &self,
        items: &mut [PostItem],
        viewer: Option<UserId>,
    ) -> Result<(), QueryError> {
        let roots: Vec<PostRef> = items.iter().map(PostItem::root).collect();
        let (counts, flags) = self.engagement_of(&roots, viewer)?;
        for (i, (item, c)) in items.iter_mut().zip(counts).enumerate() {
            item.counts = Some(c);
            item.viewer = flags.as_ref().map(|f| f[i]);
        }
        Ok(())
    }

    /// Where post `(author, post_id)` stands: its time, the original its
    /// counts are of, and for a repost that original; [`QueryError::NoPost`]
    /// when it is not there (unknown, deleted, or a repost that is not
    /// live).
    fn resolve(&self, (author, post_id): PostRef) -> Result<Resolved, QueryError> {
        check_user(author)?;
        let missing = |reason, detail: String| QueryError::NoPost {
            author: author.0,
            post_id: post_id.0,
            reason,
            detail,
        };
        let store = self.store_of(author)?;
        let resolved = match views::post(&store.snapshot(), author, post_id)? {
            None => return Err(missing("unknown_post", String::new())),
            Some(PostVal::Deleted(_, p)) => {
                let at = p
                    .deleted
                    .map_or(String::new(), |(_, ts)| format!(" at {ts}"));
                return Err(missing("deleted", at));
            }
            Some(PostVal::Live(ts, _)) => (ts, (author, post_id), None),
            Some(PostVal::Repost(rv)) => match (rv.deleted, rv.state, rv.root) {
                (true, ..) => return Err(missing("deleted", " (a repost taken back)".into())),
                (false, RepostState::Live, Some((root, _))) => (rv.ts, root, Some(root)),
                _ => {
                    let detail = format!(
                        " (a repost of {}/{}, whose original is not live)",
                        rv.of.0, rv.of.1
                    );
                    return Err(missing("not_live", detail));
                }
            },
        };
        Ok(resolved)
    }

    /// Post `(author, post_id)` with its original's counts, and `viewer`'s
    /// flags on that original; [`QueryError::NoPost`] when it is not
    /// there (unknown, deleted, or a repost that is not live).
    pub fn post(
        &self,
        (author, post_id): PostRef,
        viewer: Option<UserId>,
    ) -> Result<PostAnswer, QueryError> {
        if let Some(v) = viewer {
            check_user(v)?;
        }
        let (ts, root, repost_of) = self.resolve((author, post_id))?;
        let addressed = match repost_of {
            Some(_) => None,
            None => reply::addressed(&self.store_of(author)?.snapshot(), (author, post_id))?,
        };
        let (reply_to, mentions) = match addressed {
            Some(a) => (a.reply_to, a.mentions.iter().map(|m| m.0).collect()),
            None => (None, Vec::new()),
        };
        let (counts, flags) = self.engagement_of(&[root], viewer)?;
        let counts = counts[0];
        let viewer = flags.map(|f| f[0]);
        Ok(PostAnswer {
            post_id: post_id.0,
            author: author.0,
            ts: ts.0,
            repost_of: repost_of.map(RepostOf::of),
            reply_to: reply_to.map(RepostOf::of),
            mentions,
            counts,
            viewer,
        })
    }

    /// A page of who likes post `(author, post_id)` — a repost's id: its
    /// original — newest first (by the like's time, then user id,
    /// descending); [`QueryError::NoPost`] when it is not there. In Kafka
    /// mode a repost whose original another processor serves answers
    /// `is_repost`, naming the original to ask about.
    pub fn likers(
        &self,
        post: PostRef,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<FollowerItem>, QueryError> {
        check_limit(limit)?;
        let (_, root, _) = self.resolve(post)?;
        let view = CursorView::Likers;
        let after = match cursor {
            Some(c) => {
                let b = decode_cursor(c, view, root.0, 24)?;
                if cursor_u64(&b, 0)? != root.1 .0 {
                    return Err(QueryError::BadCursor("a cursor of another post".into()));
                }
                Some((Ts(cursor_u64(&b, 8)?), UserId(cursor_u64(&b, 16)?)))
            }
            None => None,
        };
        let store = self.root_store(post, root)?;
        let snap = store.snapshot();
        let mut items: Vec<FollowerItem> = like::likers(&snap, root, after)
            .take(limit + 1)
            .map(|r| {
                r.map(|(u, ts)| FollowerItem {
                    user: u.0,
                    ts: ts.0,
                })
            })
            .collect::<Result<_, _>>()?;
        let next_cursor = (items.len() > limit).then(|| {
            items.truncate(limit);
            let last = &items[limit - 1];
            let mut b = root.1 .0.to_be_bytes().to_vec();
            b.extend_from_slice(&last.ts.to_be_bytes());
            b.extend_from_slice(&last.user.to_be_bytes());
            encode_cursor(view, root.0, &b)
        });
        Ok(Page {
            items,
            next_cursor,
            prev_cursor: None,
        })
    }

    /// The store of `root`, the original `post` resolves to; in Kafka mode
    /// a repost whose original another processor serves answers
    /// `is_repost`, naming the original to ask about.
    fn root_store(
        &self,
        post: PostRef,
        root: PostRef,
    ) -> Result<std::sync::Arc<crate::state::Store>, QueryError> {
        match self.store_of(root.0) {
            Err(QueryError::Elsewhere { .. }) => Err(QueryError::NoPost {
                author: post.0 .0,
                post_id: post.1 .0,
                reason: "is_repost",
                detail: format!(
                    " (of {}/{}, served by another processor: ask about it)",
                    root.0, root.1
                ),
            }),
            other => other,
        }
    }

    /// A page of the direct replies to post `(author, post_id)` — a
    /// repost's id: its original — oldest first (by the reply's time, then
    /// author and id), each with its counts and `viewer`'s flags;
    /// [`QueryError::NoPost`] when it is not there (as for
    /// [`Reader::likers`]).
    pub fn replies(
        &self,
        post: PostRef,
        limit: usize,
        cursor: Option<&str>,
        viewer: Option<UserId>,
    ) -> Result<Page<PostItem>, QueryError> {
        check_limit(limit)?;
        if let Some(v) = viewer {
            check_user(v)?;
        }
        let (_, root, _) = self.resolve(post)?;
        let view = CursorView::Replies;
        let after = match cursor {
            Some(c) => {
                let b = decode_cursor(c, view, root.0, 32)?;
                if cursor_u64(&b, 0)? != root.1 .0 {
                    return Err(QueryError::BadCursor("a cursor of another post".into()));
                }
                let reply = (UserId(cursor_u64(&b, 16)?), PostId(cursor_u64(&b, 24)?));
                Some((Ts(cursor_u64(&b, 8)?), reply))
            }
            None => None,
        };
        let store = self.root_store(post, root)?;
        let snap = store.snapshot();
        let mut items: Vec<PostItem> = reply::replies(&snap, root, after)
            .take(limit + 1)
            .map(|r| r.map(|((a, p), ts)| PostItem::plain(p.0, a.0, ts.0)))
            .collect::<Result<_, _>>()?;
        let next_cursor = (items.len() > limit).then(|| {
            items.truncate(limit);
            let last = &items[limit - 1];
            let b = crate::core::keys::key([root.1 .0, last.ts, last.author, last.post_id]);
            encode_cursor(view, root.0, &b)
        });
        self.decorate(&mut items, viewer)?;
        Ok(Page {
            items,
            next_cursor,
            prev_cursor: None,
        })
    }
}
