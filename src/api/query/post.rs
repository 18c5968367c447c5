//! One post: its counts, and for a viewer the viewer's flags.

use super::{check_user, QueryError, Reader, RepostOf};
use crate::core::event::{PostId, UserId};
use crate::core::keys::{PostRef, PostVal, RepostState};
use crate::core::Partition;
use crate::core::{like, repost, views};
use serde::Serialize;

/// An original's counts (docs/semantics.md, "Likes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Counts {
    /// Its live likes.
    pub likes: u64,
    /// Its live reposts, by anyone.
    pub reposts: u64,
}

/// What a viewer did with an original.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Flags {
    /// The viewer likes it.
    pub liked: bool,
    /// The viewer has a live repost of it.
    pub reposted: bool,
}

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
    /// The original's counts.
    pub counts: Counts,
    /// With `viewer`: the viewer's flags on the original.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub viewer: Option<Flags>,
}

/// What an [`Engagement`] read asks for, of each original.
#[derive(Debug, Clone, Copy)]
pub enum Engagement<'a> {
    /// The originals' counts (at their authors' partition).
    Counts(&'a [PostRef]),
    /// The viewer's flags on the originals (at the viewer's partition).
    Flags(UserId, &'a [PostRef]),
}

/// One original's answer to an [`Engagement`] read: its `(likes,
/// reposts)`, or the viewer's `(liked, reposted)` as 1 or 0 (the pair
/// the internal route carries).
pub type Engaged = (u64, u64);

impl Reader {
    /// An [`Engagement`] read of the partitions this processor serves.
    pub fn engagement_here(&self, asked: Engagement<'_>) -> Result<Vec<Engaged>, QueryError> {
        match asked {
            Engagement::Counts(roots) => roots
                .iter()
                .map(|&root| {
                    check_user(root.0)?;
                    let store = self.store_of(root.0)?;
                    let snap = store.snapshot();
                    Ok((like::count(&snap, root)?, repost::count(&snap, root)?))
                })
                .collect(),
            Engagement::Flags(viewer, roots) => {
                check_user(viewer)?;
                let store = self.store_of(viewer)?;
                let snap = store.snapshot();
                roots
                    .iter()
                    .map(|&root| {
                        let liked = like::likes(&snap, viewer, root)?;
                        let reposted = like::reposted(&snap, viewer, root)?;
                        Ok((u64::from(liked), u64::from(reposted)))
                    })
                    .collect()
            }
        }
    }

    /// One original's engagement: here, or from the processor serving
    /// partition `at` (Kafka mode).
    fn engaged(&self, at: Partition, asked: Engagement<'_>) -> Result<Engaged, QueryError> {
        let read = match (self.engagement_here(asked), &self.remote) {
            (Err(QueryError::Elsewhere { .. }), Some(remote)) => remote.engagement(at, asked),
            (read, _) => read,
        }?;
        read.first()
            .copied()
            .ok_or_else(|| QueryError::Internal("no engagement answered".into()))
    }

    /// Post `(author, post_id)` with its original's counts, and `viewer`'s
    /// flags on that original; [`QueryError::NoPost`] when it is not
    /// there (unknown, deleted, or a repost that is not live).
    pub fn post(
        &self,
        (author, post_id): PostRef,
        viewer: Option<UserId>,
    ) -> Result<PostAnswer, QueryError> {
        check_user(author)?;
        if let Some(v) = viewer {
            check_user(v)?;
        }
        let missing = |reason, detail: String| QueryError::NoPost {
            author: author.0,
            post_id: post_id.0,
            reason,
            detail,
        };
        let store = self.store_of(author)?;
        let (ts, root, repost_of) = match views::post(&store.snapshot(), author, post_id)? {
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
        let (likes, reposts) =
            self.engaged(self.partition_of(root.0), Engagement::Counts(&[root]))?;
        let counts = Counts { likes, reposts };
        let viewer = match viewer {
            None => None,
            Some(v) => {
                let (liked, reposted) =
                    self.engaged(self.partition_of(v), Engagement::Flags(v, &[root]))?;
                Some(Flags {
                    liked: liked == 1,
                    reposted: reposted == 1,
                })
            }
        };
        Ok(PostAnswer {
            post_id: post_id.0,
            author: author.0,
            ts: ts.0,
            repost_of: repost_of.map(|(a, p): (UserId, PostId)| RepostOf {
                author: a.0,
                post_id: p.0,
            }),
            counts,
            viewer,
        })
    }
}
