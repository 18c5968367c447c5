//! A follow edge named by its two ends, and whether a user follows an
//! author through one given follow: what deliveries and backfills are
//! checked against before they enter an inbox.

use super::effect::Ctx;
use crate::event::UserId;
use crate::kv::{Cf, Kv, KvError, Txn};
use crate::position::Version;
use crate::views;

/// A follow edge: `follower` follows `author`. Named, so that its two
/// ends cannot be swapped: the follower's partition holds it in
/// `followees`, the author's in `followers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Edge {
    pub follower: UserId,
    pub author: UserId,
}

/// Whether `user` (owned here) follows `author` through exactly the edge
/// `version` the author knows them by. A delivery made for an older follow
/// of the same pair is dropped: the newer follow brings its own backfill.
pub(super) fn follows_at<K: Kv + ?Sized>(
    t: &Txn<'_, K>,
    ctx: &Ctx,
    user: UserId,
    author: UserId,
    version: Version,
) -> Result<bool, KvError> {
    if !ctx.owns(user) {
        return Ok(false);
    }
    Ok(
        views::edge(t, Cf::Followees, user, author)?
            .is_some_and(|e| e.live && e.version == version),
    )
}
