//! What entered and what left a user's timeline between two log times
//! (`timeline/changes`): the entries of the timeline as of `to` that it did
//! not hold as of `from`, and the other way round, each with the `why`
//! answer as of `to` — how an entry that entered is there (its
//! appearances, with the follows they came through), and why one that
//! left is not (the reason and its time: an unfollow, a block, a mute, a
//! deletion).

use super::{PostItem, QueryError, Reader, RepostMode, WhyAnswer};
use crate::core::event::{PostId, UserId};
use serde::Serialize;
use std::collections::HashSet;

/// Most changes one answer lists (`truncated` past it).
pub const MAX_CHANGES: usize = 1_000;

/// One entry that entered or left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Change {
    /// The post's author.
    pub author: u64,
    /// The post.
    pub post_id: u64,
    /// Its place in the timeline it is listed from (as of `to` for an
    /// entry that entered, as of `from` for one that left).
    pub ts: u64,
    /// As of `to`: in the timeline with its appearances, or the reason it
    /// is not. Log positions are left out: a state as of a time knows none.
    pub why: WhyAnswer,
}

/// The changes of a user's timeline between two log times.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Changes {
    /// The reader.
    pub user: u64,
    /// The earlier log time.
    pub from: u64,
    /// The later log time.
    pub to: u64,
    /// In the timeline as of `to`, not as of `from`; newest first.
    pub entered: Vec<Change>,
    /// In the timeline as of `from`, not as of `to`; newest first.
    pub left: Vec<Change>,
    /// More changes than [`MAX_CHANGES`]: the newest are listed.
    pub truncated: bool,
}

/// Every entry of `user`'s timeline as `r` reads it (reposts placed at
/// their newest appearance).
fn entries(r: &Reader, user: UserId) -> Result<Vec<PostItem>, QueryError> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = r.timeline_in(user, RepostMode::Newest, 1_000, cursor.as_deref())?;
        all.extend(page.items);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(all),
        }
    }
}

/// `answer` without log positions.
fn unplaced(mut answer: WhyAnswer) -> WhyAnswer {
    answer.event = None;
    for item in answer.why.iter_mut().flatten() {
        item.event = None;
        item.follow_event = None;
    }
    answer
}

/// The changes of `user`'s timeline from `before` (read as of `from`) to
/// `after` (as of `to`).
pub fn changes(
    (before, after): (&Reader, &Reader),
    user: UserId,
    (from, to): (u64, u64),
) -> Result<Changes, QueryError> {
    let (then, now) = (entries(before, user)?, entries(after, user)?);
    let key = |e: &PostItem| (e.author, e.post_id);
    let had: HashSet<_> = then.iter().map(key).collect();
    let has: HashSet<_> = now.iter().map(key).collect();
    let mut listed = 0;
    let mut list = |items: &[PostItem], other: &HashSet<(u64, u64)>| {
        let mut out = Vec::new();
        for e in items.iter().filter(|e| !other.contains(&key(e))) {
            if listed == MAX_CHANGES {
                break;
            }
            listed += 1;
            let why = after.why(user, (UserId(e.author), PostId(e.post_id)))?;
            out.push(Change {
                author: e.author,
                post_id: e.post_id,
                ts: e.ts,
                why: unplaced(why),
            });
        }
        Ok::<_, QueryError>(out)
    };
    let entered = list(&now, &had)?;
    let left = list(&then, &has)?;
    let all = now.iter().filter(|e| !had.contains(&key(e))).count()
        + then.iter().filter(|e| !has.contains(&key(e))).count();
    Ok(Changes {
        user: user.0,
        from,
        to,
        entered,
        left,
        truncated: all > MAX_CHANGES,
    })
}
