//! What a query returns, and why it fails.

use crate::core::Disposition;
use crate::core::Partition;
use crate::state::{StoreError, Unavailable};
use serde::Serialize;

/// Why a query failed.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The cursor is not one this view issued for this user.
    #[error("bad cursor: {0}")]
    BadCursor(String),
    /// The limit is out of range.
    #[error("limit must be between 1 and {max}, got {got}")]
    BadLimit {
        /// Requested.
        got: usize,
        /// Maximum.
        max: usize,
    },
    /// The user id is not valid.
    #[error("user ids start at 1, got {0}")]
    BadUser(u64),
    /// The view name is not one of the views.
    #[error("unknown view {0:?} (expected one of: {names})", names = crate::api::reads::cli_names().join(", "))]
    BadView(String),
    /// A read was given a parameter it does not take, or a value it cannot
    /// use (the table of reads, [`crate::api::reads`]).
    #[error(transparent)]
    BadParam(#[from] crate::api::reads::BadParam),
    /// The partition that owns the user is moving between processors
    /// (revoked, or replaying before it serves): retry shortly.
    #[error("partition {partition} is moving between processors; retry shortly")]
    Moving {
        /// The partition.
        partition: Partition,
    },
    /// Another processor owns the partition (Kafka mode): ask it.
    #[error("partition {partition} is owned by another processor")]
    Elsewhere {
        /// The partition.
        partition: Partition,
    },
    /// Reading from another processor failed.
    #[error("reading from the processor that owns partition {partition}: {reason}")]
    Remote {
        /// The partition.
        partition: Partition,
        /// Why.
        reason: String,
    },
    /// A view as of a log time older than the history kept.
    #[error(
        "history is kept from log time {kept_from} (--history-retention); as_of={asked} is older"
    )]
    HistoryGone {
        /// The time asked for.
        asked: u64,
        /// The oldest time answered.
        kept_from: u64,
    },
    /// This processor answers no view as of an earlier time.
    #[error("no earlier states here: {0}")]
    NoHistory(String),
    /// Reading state failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading a view failed.
    #[error(transparent)]
    State(#[from] crate::core::kv::KvError),
    /// The post asked for is not there: `unknown_post` (no post or repost
    /// event of the id applied), `deleted`, or `not_live` (a repost whose
    /// original is not live), as `timeline/why` says.
    #[error("post {author}/{post_id}: {reason}{detail}")]
    NoPost {
        /// The post's author.
        author: u64,
        /// The post.
        post_id: u64,
        /// Why: `unknown_post`, `deleted` or `not_live`.
        reason: &'static str,
        /// More for a person to read (may be empty).
        detail: String,
    },
    /// Something else failed while answering: reading the log's end, or
    /// encoding the answer.
    #[error("{0}")]
    Internal(String),
}

impl From<Unavailable> for QueryError {
    fn from(u: Unavailable) -> QueryError {
        match u {
            Unavailable::Moving { partition } => QueryError::Moving { partition },
            Unavailable::Elsewhere { partition } => QueryError::Elsewhere { partition },
        }
    }
}

impl QueryError {
    /// Skip, retry or stop: a request that cannot be answered as asked is
    /// refused (and the reader goes on); a partition moving or owned
    /// elsewhere answers a retry; a failing store answers for itself.
    pub fn disposition(&self) -> Disposition {
        match self {
            QueryError::BadCursor(_)
            | QueryError::BadLimit { .. }
            | QueryError::BadUser(_)
            | QueryError::BadView(_)
            | QueryError::BadParam(_)
            | QueryError::HistoryGone { .. }
            | QueryError::NoHistory(_)
            | QueryError::NoPost { .. } => Disposition::Skip,
            QueryError::Moving { .. }
            | QueryError::Elsewhere { .. }
            | QueryError::Remote { .. } => Disposition::Retry,
            QueryError::Store(e) => e.disposition(),
            QueryError::State(e) => e.disposition(),
            QueryError::Internal(_) => Disposition::Retry,
        }
    }

    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            QueryError::BadCursor(_) => "bad_cursor",
            QueryError::BadLimit { .. } => "bad_limit",
            QueryError::BadUser(_) => "bad_user",
            QueryError::BadView(_) => "bad_view",
            QueryError::BadParam(e) => e.code,
            QueryError::Moving { .. }
            | QueryError::Elsewhere { .. }
            | QueryError::Remote { .. } => "unavailable",
            QueryError::HistoryGone { .. } => "history_gone",
            QueryError::NoHistory(_) => "no_history",
            QueryError::NoPost { reason, .. } => reason,
            QueryError::Store(_) | QueryError::State(_) | QueryError::Internal(_) => "internal",
        }
    }
}

/// A post in a timeline or posts page. A timeline entry with no repost
/// among its appearances, and an original in a posts page, has only
/// `post_id`, `author` and `ts` (and `reposts` and `likes` in a posts page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = Post)]
pub struct PostItem {
    /// The post (in a posts page, a repost's own id).
    pub post_id: u64,
    /// Its author (in a posts page, the reposter of a repost).
    pub author: u64,
    /// Its place, ms since the epoch: a timeline entry's is the time of the
    /// appearance the mode places it at (its newest by default).
    pub ts: u64,
    /// Timeline, when followed users reposted it: the post's own time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_ts: Option<u64>,
    /// Timeline: the followed users who reposted it, each at their newest
    /// repost of it, newest first, at most 10.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reposted_by: Option<Vec<RepostedBy>>,
    /// Timeline: how many followed users reposted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reposters: Option<u64>,
    /// Posts page, an original: its live reposts, by anyone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reposts: Option<u64>,
    /// Posts page, an original: its live likes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub likes: Option<u64>,
    /// Posts page, a repost: the original it reposts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repost_of: Option<RepostOf>,
    /// Timeline with `explain=1`: the entry's appearances, newest first,
    /// each with the events that decided it (docs/http-api.md, "Explain").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<Vec<super::WhyItem>>,
    /// The original's counts (a timeline entry's post; a posts page's
    /// original, or the original a repost reposts); left out with
    /// `counts=0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counts: Option<Counts>,
    /// The reader's flags on that original (the timeline's user; a posts
    /// page's `viewer`); left out with `counts=0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub viewer: Option<Flags>,
}

impl PostItem {
    /// A post with no repost about it: its id, author and time.
    pub fn plain(post_id: u64, author: u64, ts: u64) -> PostItem {
        PostItem {
            post_id,
            author,
            ts,
            post_ts: None,
            reposted_by: None,
            reposters: None,
            reposts: None,
            likes: None,
            repost_of: None,
            why: None,
            counts: None,
            viewer: None,
        }
    }

    /// The original whose counts the item carries: a posts page's repost's
    /// original, else the item's own post.
    pub fn root(&self) -> crate::core::keys::PostRef {
        use crate::core::event::{PostId, UserId};
        match self.repost_of {
            Some(r) => (UserId(r.author), PostId(r.post_id)),
            None => (UserId(self.author), PostId(self.post_id)),
        }
    }
}

/// An original's counts (docs/semantics.md, "Likes").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Counts {
    /// Its live likes.
    pub likes: u64,
    /// Its live direct replies (a reply to one of its reposts included).
    pub replies: u64,
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

/// A followed user who reposted a timeline entry's post.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RepostedBy {
    /// The reposting user.
    pub user: u64,
    /// Their repost's id.
    pub post_id: u64,
    /// Their repost's time, ms since the epoch.
    pub ts: u64,
}

/// The original a repost reposts (or the post a reply names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RepostOf {
    /// The original's author.
    pub author: u64,
    /// The original.
    pub post_id: u64,
}

impl RepostOf {
    /// The post `(author, post_id)`.
    pub fn of((author, post_id): crate::core::keys::PostRef) -> RepostOf {
        RepostOf {
            author: author.0,
            post_id: post_id.0,
        }
    }
}

/// A user in a follower or followee list, with the follow time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = UserItem)]
pub struct FollowerItem {
    /// The follower.
    pub user: u64,
    /// Follow time, ms since the epoch.
    pub ts: u64,
}

/// A user a user mutes or blocks, since when (and for a mute, until when).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FilteredItem {
    /// The user muted or blocked.
    pub user: u64,
    /// The time of the mute or block event, ms since the epoch.
    pub since: u64,
    /// Mutes only: the log time the mute ends at (absent: until unmuted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
    /// Mutes only: whether the mute filters now — false once the log time
    /// of the muting user's partition has reached `until`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_force: Option<bool>,
    /// Mutes only: `false` when the mute leaves the user's notifications
    /// in place (`"notifications": false`; absent: it hides them too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notifications: Option<bool>,
}

/// A user's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Counters {
    /// The user.
    pub user: u64,
    /// Live followers.
    pub followers: u64,
    /// Live followees.
    pub followees: u64,
    /// Live posts (originals).
    pub posts: u64,
    /// Live reposts (of live originals).
    pub reposts: u64,
    /// Live likes given (of live originals).
    pub likes: u64,
}

/// One page of a view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Page<T> {
    /// The items, in view order.
    pub items: Vec<T>,
    /// Pass back to get the next page; `null` on the last page.
    pub next_cursor: Option<String>,
    /// Timeline only: pass back as `newer_than` for the entries newer than
    /// this page's first (absent on an empty page and in other views).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prev_cursor: Option<String>,
}

/// A list without paging (recent followers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct List<T> {
    /// The items, in view order.
    pub items: Vec<T>,
}

/// The counters of several users, in the order asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CountersList {
    /// One per user asked.
    pub counters: Vec<Counters>,
}
