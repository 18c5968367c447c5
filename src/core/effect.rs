//! The internal messages between partitions, and the settings the core
//! decides with.

use crate::event::{PostId, Ts, UserId};
use crate::partition::{partition_for, Partition};
use crate::position::{Offset, Version};
use serde::{Deserialize, Serialize};

/// Inbox entries kept per user unless configured otherwise: the
/// materialized cache of the timeline (docs/design.md, "The bounded inbox and its horizon").
pub const DEFAULT_INBOX_CAP: u64 = 800;

/// Live followers from which an author's posts are pulled by readers
/// instead of pushed into every follower's inbox (docs/design.md, "Big accounts are pulled").
pub const DEFAULT_PULL_THRESHOLD: u64 = 10_000;

/// Log time (ms) without an event of their own after which a reader is
/// skipped by push fan-out: 30 days (docs/design.md, "Inactive readers are pulled").
pub const DEFAULT_INACTIVE_AFTER_MS: u64 = 30 * 24 * 3600 * 1000;

/// What applying one message works with: the partition's staged state,
/// its context, what the message has changed so far, and the messages it
/// sends.
pub struct Step<'s, 't, K: crate::kv::Kv + ?Sized> {
    /// The staged state.
    pub t: &'s mut crate::kv::Txn<'t, K>,
    /// The partition.
    pub ctx: &'s Ctx,
    /// What changed so far.
    pub applied: &'s mut Applied,
    /// What the message sends.
    pub out: &'s mut Vec<Out>,
}

impl<'s, 't, K: crate::kv::Kv + ?Sized> Step<'s, 't, K> {
    /// A step over `t` in the partition `ctx`.
    pub fn new(
        t: &'s mut crate::kv::Txn<'t, K>,
        ctx: &'s Ctx,
        applied: &'s mut Applied,
        out: &'s mut Vec<Out>,
    ) -> Self {
        Step {
            t,
            ctx,
            applied,
            out,
        }
    }

    /// Sends `effect` to the partition that owns `to`.
    pub fn send(&mut self, to: crate::event::UserId, effect: Effect) {
        self.ctx.send(self.out, to, effect);
    }
}

/// One of a reader's wakes, named by the reader's count of wakes: an
/// answer to a refill counts only for the wake that asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Wake(pub u64);

/// Internal messages between partitions (the `effects` topic). Each is
/// addressed to users owned by one partition. Variants are append-only:
/// the wire formats encode them by index (the codec's golden bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Effect {
    /// At the followee's partition: `follower` now follows `author`.
    FollowerAdded {
        /// The followee.
        author: UserId,
        /// The new follower.
        follower: UserId,
        /// Version of the follow event.
        version: Version,
        /// Follow time.
        ts: Ts,
    },
    /// At the followee's partition: `follower` no longer follows `author`.
    FollowerRemoved {
        /// The followee.
        author: UserId,
        /// The former follower.
        follower: UserId,
        /// Version of the unfollow event.
        version: Version,
    },
    /// At followers' partition: a new post for each target's inbox.
    Deliver {
        /// The post's author.
        author: UserId,
        /// The post.
        post_id: PostId,
        /// Post time.
        ts: Ts,
        /// Followers, each with the edge version the author knows them by.
        targets: Vec<(UserId, Version)>,
    },
    /// At the follower's partition: the author's newest posts after a
    /// follow. It replaces the follower's inbox entries of the author
    /// within its range (see `apply_effect`).
    Backfill {
        /// The followee.
        author: UserId,
        /// The new follower.
        follower: UserId,
        /// The follow's version.
        version: Version,
        /// Newest first.
        posts: Vec<(Ts, PostId)>,
        /// Whether the author has older posts than those sent.
        truncated: bool,
    },
    /// At followers' partition: a deleted post leaves each target's inbox.
    Retract {
        /// The post's author.
        author: UserId,
        /// The post.
        post_id: PostId,
        /// Post time.
        ts: Ts,
        /// Followers whose inbox may hold it.
        targets: Vec<UserId>,
    },
    /// At followers' partition: `author` is now pulled, or pushed again.
    /// Each target following through the version named is marked in
    /// `pulls` and loses the author's inbox entries (the partition's copy
    /// serves them), or is unmarked and gets the author's newest `posts`
    /// back into the inbox, as a backfill does.
    Pull {
        /// The author.
        author: UserId,
        /// Pulled (`true`) or pushed again.
        pulled: bool,
        /// When pushed again: the author's newest posts, newest first.
        posts: Vec<(Ts, PostId)>,
        /// Whether the author has older posts than those sent.
        truncated: bool,
        /// Followers, each with the edge version the author knows them by.
        targets: Vec<(UserId, Version)>,
    },
    /// At every partition: its copy of `author`'s newest posts becomes
    /// `posts` (`pulled`), or is dropped (the author is pushed again).
    Copy {
        /// The author.
        author: UserId,
        /// Whether the author is pulled.
        pulled: bool,
        /// The author's newest posts, newest first.
        posts: Vec<(Ts, PostId)>,
        /// Whether the author has older posts than those sent.
        truncated: bool,
    },
    /// At the sending partition itself: the pull threshold in force from
    /// here on in its `effects` log (0: no author is pulled). A processor
    /// asks for its configured threshold this way, so whoever replays the
    /// log decides every promotion and demotion as it was decided.
    PullThreshold {
        /// Live followers from which an author is pulled.
        threshold: u64,
    },
    /// At every partition: a pulled author's post enters (`live`) or
    /// leaves the partition's copy.
    CopyPost {
        /// The post's author.
        author: UserId,
        /// The post.
        post_id: PostId,
        /// Post time.
        ts: Ts,
        /// Posted (`true`) or deleted.
        live: bool,
    },
    /// At the followee's partition: `follower`, who follows `author`
    /// through `version`, woke up and asks for the author's newest posts.
    Refill {
        /// The followee.
        author: UserId,
        /// The waking follower.
        follower: UserId,
        /// The follow's version.
        version: Version,
        /// The wake asking.
        wake: Wake,
    },
    /// At the follower's partition: the answer to a [`Effect::Refill`], as
    /// the author's partition would answer a new follow: the author is
    /// pulled, or here are their newest posts (a backfill).
    Refilled {
        /// The followee.
        author: UserId,
        /// The waking follower.
        follower: UserId,
        /// The follow's version.
        version: Version,
        /// The wake answered.
        wake: Wake,
        /// Whether the author is pulled (then `posts` is empty).
        pulled: bool,
        /// The author's newest posts, newest first.
        posts: Vec<(Ts, PostId)>,
        /// Whether the author has older posts than those sent.
        truncated: bool,
    },
    /// At the partition of the post a repost names: resolve `reposter`'s
    /// repost of it. An original (or a post not known yet) registers it
    /// and answers with [`Effect::Reposted`]; another repost passes it on
    /// to the post that one names.
    RepostOf {
        /// The named post's author.
        of_author: UserId,
        /// The named post.
        of_post_id: PostId,
        /// The reposter.
        reposter: UserId,
        /// The repost's own id.
        repost: PostId,
        /// The repost's time.
        ts: Ts,
        /// Repost links followed so far, this one included (at most
        /// [`crate::event::MAX_REPOST_HOPS`]).
        hops: u32,
        /// The version of the repost event (its place in the reposter's
        /// `events`).
        version: Version,
    },
    /// At the reposter's partition: the original a repost resolved to, and
    /// whether it is live (a repost is live exactly while its original is).
    Reposted {
        /// The reposter.
        reposter: UserId,
        /// The repost.
        repost: PostId,
        /// The original's author.
        root_author: UserId,
        /// The original.
        root_post_id: PostId,
        /// The original's time.
        post_ts: Ts,
        /// Whether the original is live.
        live: bool,
        /// The version of the repost event.
        version: Version,
    },
    /// At the original's partition: the reposter took the repost back.
    Unrepost {
        /// The original's author.
        root_author: UserId,
        /// The original.
        root_post_id: PostId,
        /// The reposter.
        reposter: UserId,
        /// The repost.
        repost: PostId,
    },
    /// At every partition: a repost became live (`live`) or stopped being,
    /// for its copy of the live reposts (readers aggregate a post's
    /// appearances with it).
    RepostDir {
        /// The reposter.
        reposter: UserId,
        /// The repost.
        repost: PostId,
        /// The repost's time.
        ts: Ts,
        /// The original's author.
        root_author: UserId,
        /// The original.
        root_post_id: PostId,
        /// The original's time.
        post_ts: Ts,
        /// Live, or gone.
        live: bool,
    },
    /// At the blocked user's partition: `by`'s block of `user` is now on
    /// or off, as of `by`'s event `version` (docs/semantics.md, "Blocks and mutes").
    /// Also sent to `by`'s own partition, whose end of the follow edges to
    /// `by` judges by it in `effects` order.
    Blocked {
        /// The user blocked (or no longer).
        user: UserId,
        /// The blocking user.
        by: UserId,
        /// The version of `by`'s block or unblock event.
        version: Version,
        /// Whether the block is on.
        on: bool,
        /// That event's time.
        ts: Ts,
        /// The greatest end of a block period of `by`'s that ended.
        ended: Option<Ts>,
    },
    /// At the followee's partition: `follower` followed `author` again at
    /// `last`, within the follow `version` started (a later follow revives
    /// one that block periods void).
    Refollowed {
        /// The followee.
        author: UserId,
        /// The follower.
        follower: UserId,
        /// The version of the follow that started the edge.
        version: Version,
        /// The new follow's time.
        last: Ts,
    },
    /// At the partition of the post a like names: `liker`'s like or
    /// unlike of it. An original (or a post not known yet) registers it,
    /// the latest by version deciding; another repost passes it on to the
    /// post that one names. Appended last: variants are append-only.
    LikeOf {
        /// The named post's author.
        of_author: UserId,
        /// The named post.
        of_post_id: PostId,
        /// The liker.
        liker: UserId,
        /// A like (true) or an unlike.
        liked: bool,
        /// Repost links followed so far (at most
        /// [`crate::event::MAX_REPOST_HOPS`]).
        hops: u32,
        /// The version of the like or unlike event (its place in the
        /// liker's `events`).
        version: Version,
        /// The like or unlike event's time (the likers list's order).
        ts: Ts,
    },
    /// At the liker's partition: whether `liker` now likes the live
    /// original `(root_author, root_post_id)` (the user's `likes` counter
    /// and the `liked` flag).
    LikeLive {
        /// The liker.
        liker: UserId,
        /// The original's author.
        root_author: UserId,
        /// The original.
        root_post_id: PostId,
        /// Whether the like counts now.
        live: bool,
    },
    /// At the partition of the post a reply names (`reply_to`): reply
    /// `(replier, reply_post_id)` was posted (`live`) or deleted. An
    /// original (or a post not known yet) registers it, the latest by
    /// version deciding; a repost passes it on to the post it names.
    /// Appended last, as `LikeLive` was.
    ReplyOf {
        /// The named post's author.
        of_author: UserId,
        /// The named post.
        of_post_id: PostId,
        /// The reply's author.
        replier: UserId,
        /// The reply.
        reply_post_id: PostId,
        /// Posted (true) or deleted.
        live: bool,
        /// Repost links followed so far (at most
        /// [`crate::event::MAX_REPOST_HOPS`]).
        hops: u32,
        /// The version of the post or delete event (its place in the
        /// replier's `events`).
        version: Version,
        /// The reply's time (the replies list's order).
        ts: Ts,
    },
    /// At every partition: post `(author, post_id)` is a reply to a post
    /// of `parent` (its `reply_to`'s author, as written), for the replies
    /// rule of home timelines. Sent before the post's deliveries and
    /// copies, so a partition knows it before any of its readers can.
    /// Appended last, as `ReplyOf` was.
    ReplyDir {
        /// The reply's author.
        author: UserId,
        /// The reply.
        post_id: PostId,
        /// The author of the post it replies to.
        parent: UserId,
    },
    /// At the partition of `user`: post `(author, post_id)`, which
    /// mentions `user`, went live (`live`) or was deleted. Per post the
    /// word of the greatest version decides. Appended last, as `ReplyDir`
    /// was.
    MentionOf {
        /// The user mentioned.
        user: UserId,
        /// The post's author.
        author: UserId,
        /// The post.
        post_id: PostId,
        /// Posted (true) or deleted.
        live: bool,
        /// The version of the post or delete event (its place in the
        /// author's `events`).
        version: Version,
        /// The post's time.
        ts: Ts,
    },
}

impl Effect {
    /// A user the message is addressed to (its key in the `effects` topic).
    pub fn key_user(&self) -> UserId {
        match self {
            Effect::FollowerAdded { author, .. } | Effect::FollowerRemoved { author, .. } => {
                *author
            }
            Effect::Backfill { follower, .. } | Effect::Refilled { follower, .. } => *follower,
            Effect::Refill { author, .. } => *author,
            Effect::Deliver { targets, .. } | Effect::Pull { targets, .. } => targets[0].0,
            Effect::Retract { targets, .. } => targets[0],
            // Addressed to a partition, not to a user.
            Effect::Copy { author, .. } | Effect::CopyPost { author, .. } => *author,
            Effect::PullThreshold { .. } => UserId(0),
            Effect::RepostOf { of_author, .. } => *of_author,
            Effect::Reposted { reposter, .. } | Effect::RepostDir { reposter, .. } => *reposter,
            Effect::Unrepost { root_author, .. } => *root_author,
            Effect::Blocked { user, .. } => *user,
            Effect::Refollowed { author, .. } => *author,
            Effect::LikeOf { of_author, .. } => *of_author,
            Effect::LikeLive { liker, .. } => *liker,
            Effect::ReplyOf { of_author, .. } => *of_author,
            Effect::ReplyDir { author, .. } => *author,
            Effect::MentionOf { user, .. } => *user,
        }
    }

    /// The position of the receiving partition's own `events` log that must
    /// be applied before this message can be decided: a delivery or backfill
    /// names the follow it was sent for by its version (one past that
    /// follow's offset in the receiver's `events`), and a receiver that has
    /// not applied that follow yet would wrongly drop it. In live processing this always
    /// holds already (the follow caused the message); a replay, which
    /// interleaves the two inputs its own way, must wait for it.
    pub fn requires_events(&self) -> Offset {
        match self {
            Effect::Deliver { targets, .. } | Effect::Pull { targets, .. } => targets
                .iter()
                .map(|t| t.1.applied_at())
                .max()
                .unwrap_or_default(),
            Effect::Backfill { version, .. } | Effect::Refilled { version, .. } => {
                version.applied_at()
            }
            // The answer to a repost names the repost event, which its
            // receiver (the reposter's partition) must have applied.
            Effect::Reposted { version, .. } => version.applied_at(),
            Effect::FollowerAdded { .. }
            | Effect::Refill { .. }
            | Effect::FollowerRemoved { .. }
            | Effect::Retract { .. }
            | Effect::Copy { .. }
            | Effect::CopyPost { .. }
            | Effect::PullThreshold { .. }
            | Effect::RepostOf { .. }
            | Effect::Unrepost { .. }
            | Effect::RepostDir { .. }
            | Effect::Blocked { .. }
            | Effect::Refollowed { .. }
            | Effect::LikeOf { .. }
            | Effect::LikeLive { .. }
            | Effect::ReplyOf { .. }
            | Effect::ReplyDir { .. }
            | Effect::MentionOf { .. } => Offset(0),
        }
    }

    /// Short name for metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Effect::FollowerAdded { .. } => "follower_added",
            Effect::FollowerRemoved { .. } => "follower_removed",
            Effect::Deliver { .. } => "deliver",
            Effect::Backfill { .. } => "backfill",
            Effect::Retract { .. } => "retract",
            Effect::Pull { .. } => "pull",
            Effect::Copy { .. } => "copy",
            Effect::CopyPost { .. } => "copy_post",
            Effect::PullThreshold { .. } => "pull_threshold",
            Effect::Refill { .. } => "refill",
            Effect::Refilled { .. } => "refilled",
            Effect::RepostOf { .. } => "repost_of",
            Effect::Reposted { .. } => "reposted",
            Effect::Unrepost { .. } => "unrepost",
            Effect::RepostDir { .. } => "repost_dir",
            Effect::Blocked { .. } => "blocked",
            Effect::Refollowed { .. } => "refollowed",
            Effect::LikeOf { .. } => "like_of",
            Effect::LikeLive { .. } => "like_live",
            Effect::ReplyOf { .. } => "reply_of",
            Effect::ReplyDir { .. } => "reply_dir",
            Effect::MentionOf { .. } => "mention_of",
        }
    }
}

/// Whether an author with `followers` live followers, pulled now or not
/// (`pulled`), is pulled from here on under `threshold`: from the threshold
/// up, and until fewer than half of it remain (hysteresis: an author near
/// the line does not flip on every follow). 0: never.
pub fn pulls(threshold: u64, followers: u64, pulled: bool) -> bool {
    match threshold {
        0 => false,
        n if pulled => followers.saturating_mul(2) >= n,
        n => followers >= n,
    }
}

/// An effect with the partition it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    /// Destination partition of `effects`.
    pub partition: Partition,
    /// The message.
    pub effect: Effect,
}

/// What applying a message did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Applied {
    /// Inbox entries written.
    pub delivered: u64,
    /// Inbox entries removed (purge, retraction, trim).
    pub removed: u64,
    /// Whether state changed at all (false: a duplicate, stale or redundant message).
    pub changed: bool,
    /// Whether it asked for refills (a reader woke): a replay that drops
    /// what it sends leaves those to [`crate::requests::Requests`].
    pub asked_refills: bool,
}

impl Applied {
    /// `other`, applied after this, added to it.
    pub fn add(&mut self, other: Applied) {
        self.delivered += other.delivered;
        self.removed += other.removed;
        self.changed |= other.changed;
        self.asked_refills |= other.asked_refills;
    }
}

/// The partition's settings the core needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx {
    /// This partition.
    pub partition: Partition,
    /// Partition count of the data directory.
    pub partitions: u32,
    /// Inbox entries kept per user (the materialized cache of the timeline).
    pub inbox_cap: u64,
    /// Targets per fan-out message.
    pub fanout_chunk: usize,
    /// The pull threshold this processor asks for (`None`: keep the one
    /// in force). Decisions never read it: they use the threshold in force
    /// in the partition's state, which only a [`Effect::PullThreshold`] in
    /// its `effects` log changes.
    pub pull_threshold: Option<u64>,
    /// Log time (ms) a reader goes without an event of their own before a
    /// delivery finds them asleep (`None`: never). Only this partition's
    /// own users are concerned, and reads are exact asleep or awake, so an
    /// owner may use another setting than the one before it.
    pub inactive_after: Option<u64>,
}

impl Ctx {
    /// Defaults for `partitions` partitions: inbox 800, chunks of 1024,
    /// authors pulled from 10,000 followers, readers asleep after 30 days.
    pub fn new(partition: Partition, partitions: u32) -> Ctx {
        Ctx {
            partition,
            partitions,
            inbox_cap: DEFAULT_INBOX_CAP,
            fanout_chunk: 1024,
            pull_threshold: Some(DEFAULT_PULL_THRESHOLD),
            inactive_after: Some(DEFAULT_INACTIVE_AFTER_MS),
        }
    }

    /// Inbox entries tolerated before a trim back to `inbox_cap`: an
    /// eighth over it. A quarter made heavy trimming faster (0.59 -> 0.65 of
    /// raw puts) but timeline pages of a large state slower (the Epinions
    /// demo: 23-31k against 33k pages/s), so it stays an eighth
    /// (docs/benchmark-runs.md, "Fan-out inbox writes through the processor
    /// vs raw RocksDB puts").
    pub(super) fn inbox_trim_at(&self) -> u64 {
        self.inbox_cap + (self.inbox_cap / 8).max(1)
    }

    /// Whether this partition owns `user`.
    pub fn owns(&self, user: UserId) -> bool {
        partition_for(user, self.partitions) == self.partition
    }

    pub(super) fn send(&self, out: &mut Vec<Out>, to: UserId, effect: Effect) {
        out.push(Out {
            partition: partition_for(to, self.partitions),
            effect,
        });
    }
}
