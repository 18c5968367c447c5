//! The pure core: given a partition's state and one message, what changes and
//! what is sent. No I/O: state is read and staged through a [`Txn`], outgoing
//! messages are pushed into a buffer, and the task (the imperative shell)
//! commits and ships them.
//!
//! One owner per user: every function here touches only users owned by the
//! partition it runs in, and reaches other users' partitions by sending an
//! [`Effect`]. See the crate docs for the guarantees this upholds.

use crate::event::{Event, PostId, Ts, UserId};
use crate::partition::partition_for;
use crate::state::keys::{EdgeVal, PostVal, TimelineKey};
use crate::state::views::{self, live_edges};
use crate::state::{Cf, Kv, StoreError, Txn};
use serde::{Deserialize, Serialize};

/// A version: the position in `events[owner]` (offset + 1) of the event that
/// caused a change. All events of one edge come from the follower's partition,
/// so versions of one key are ordered by the log.
pub type Version = u64;

/// Internal messages between partitions (the `effects` topic). Each is
/// addressed to users owned by one partition.
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
}

impl Effect {
    /// A user the message is addressed to (its key in the `effects` topic).
    pub fn key_user(&self) -> UserId {
        match self {
            Effect::FollowerAdded { author, .. } | Effect::FollowerRemoved { author, .. } => {
                *author
            }
            Effect::Backfill { follower, .. } => *follower,
            Effect::Deliver { targets, .. } => targets[0].0,
            Effect::Retract { targets, .. } => targets[0],
        }
    }

    /// The position of the receiving partition's own `events` log that must
    /// be applied before this message can be decided: a delivery or backfill
    /// names the follow it was sent for by its version (one past that
    /// follow's offset in the receiver's `events`), and a receiver that has
    /// not applied that follow yet would wrongly drop it. In live processing this always
    /// holds already (the follow caused the message); a replay, which
    /// interleaves the two inputs its own way, must wait for it.
    pub fn requires_events(&self) -> Version {
        match self {
            Effect::Deliver { targets, .. } => targets.iter().map(|t| t.1).max().unwrap_or(0),
            Effect::Backfill { version, .. } => *version,
            Effect::FollowerAdded { .. }
            | Effect::FollowerRemoved { .. }
            | Effect::Retract { .. } => 0,
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
        }
    }
}

/// An effect with the partition it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    /// Destination partition of `effects`.
    pub partition: u32,
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
}

/// The partition's settings the core needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx {
    /// This partition.
    pub partition: u32,
    /// Partition count of the data directory.
    pub partitions: u32,
    /// Inbox entries kept per user (the materialized cache of the timeline).
    pub inbox_cap: u64,
    /// Targets per fan-out message.
    pub fanout_chunk: usize,
}

impl Ctx {
    /// Defaults for `partitions` partitions: inbox 800, chunks of 1024.
    pub fn new(partition: u32, partitions: u32) -> Ctx {
        Ctx {
            partition,
            partitions,
            inbox_cap: 800,
            fanout_chunk: 1024,
        }
    }

    /// Inbox entries tolerated before a trim back to `inbox_cap`.
    fn inbox_trim_at(&self) -> u64 {
        self.inbox_cap + (self.inbox_cap / 8).max(1)
    }

    /// Whether this partition owns `user`.
    pub fn owns(&self, user: UserId) -> bool {
        partition_for(user, self.partitions) == self.partition
    }

    fn send(&self, out: &mut Vec<Out>, to: UserId, effect: Effect) {
        out.push(Out {
            partition: partition_for(to, self.partitions),
            effect,
        });
    }
}

/// Applies one input event (already validated, owned by this partition).
pub fn apply_event<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    ctx: &Ctx,
    event: &Event,
    version: Version,
    out: &mut Vec<Out>,
) -> Result<Applied, StoreError> {
    let mut applied = Applied::default();
    match *event {
        Event::Follow {
            follower,
            followee,
            ts,
        } => {
            let old = views::edge(t, Cf::Followees, follower, followee)?;
            if old.is_some_and(|e| e.live || e.version >= version) {
                return Ok(applied);
            }
            t.set_edge(
                Cf::Followees,
                follower,
                followee,
                &EdgeVal {
                    live: true,
                    version,
                    ts,
                },
            );
            let mut u = views::user(t, follower)?;
            u.followees += 1;
            t.set_user(follower, &u);
            let effect = Effect::FollowerAdded {
                author: followee,
                follower,
                version,
                ts,
            };
            ctx.send(out, followee, effect);
        }
        Event::Unfollow {
            follower, followee, ..
        } => {
            let old = views::edge(t, Cf::Followees, follower, followee)?;
            let Some(edge) = old.filter(|e| e.live && e.version < version) else {
                return Ok(applied);
            };
            t.set_edge(
                Cf::Followees,
                follower,
                followee,
                &EdgeVal {
                    live: false,
                    version,
                    ..edge
                },
            );
            let mut u = views::user(t, follower)?;
            u.followees -= 1;
            let purged = t.inbox_by_author(follower, followee)?;
            for k in &purged {
                t.set_inbox(follower, k, false);
            }
            u.inbox_len = u.inbox_len.saturating_sub(purged.len() as u64);
            t.set_user(follower, &u);
            applied.removed = purged.len() as u64;
            ctx.send(
                out,
                followee,
                Effect::FollowerRemoved {
                    author: followee,
                    follower,
                    version,
                },
            );
        }
        Event::Post {
            author,
            post_id,
            ts,
        } => {
            if views::post(t, author, post_id)?.is_some() {
                return Ok(applied);
            }
            t.set_post(author, post_id, &PostVal::Live(ts));
            t.set_outbox(author, ts, post_id, true);
            let mut u = views::user(t, author)?;
            u.posts += 1;
            t.set_user(author, &u);
            fan_out(t, ctx, author, out, |targets| Effect::Deliver {
                author,
                post_id,
                ts,
                targets,
            })?;
        }
        Event::DeletePost {
            author, post_id, ..
        } => match views::post(t, author, post_id)? {
            Some(PostVal::Deleted(_)) => return Ok(applied),
            None => t.set_post(author, post_id, &PostVal::Deleted(None)),
            Some(PostVal::Live(ts)) => {
                t.set_post(author, post_id, &PostVal::Deleted(Some(ts)));
                t.set_outbox(author, ts, post_id, false);
                let mut u = views::user(t, author)?;
                u.posts -= 1;
                t.set_user(author, &u);
                fan_out(t, ctx, author, out, |targets: Vec<(UserId, Version)>| {
                    Effect::Retract {
                        author,
                        post_id,
                        ts,
                        targets: targets.into_iter().map(|(u, _)| u).collect(),
                    }
                })?;
            }
        },
    }
    applied.changed = true;
    Ok(applied)
}

/// Sends one message per destination partition and chunk, covering every
/// live follower of `author`.
fn fan_out<K: Kv + ?Sized>(
    t: &Txn<'_, K>,
    ctx: &Ctx,
    author: UserId,
    out: &mut Vec<Out>,
    make: impl Fn(Vec<(UserId, Version)>) -> Effect,
) -> Result<(), StoreError> {
    let mut by_partition: Vec<Vec<(UserId, Version)>> = vec![Vec::new(); ctx.partitions as usize];
    for r in live_edges(t, Cf::Followers, author, None) {
        let (follower, edge) = r?;
        let p = partition_for(follower, ctx.partitions);
        let chunk = &mut by_partition[p as usize];
        chunk.push((follower, edge.version));
        if chunk.len() >= ctx.fanout_chunk {
            out.push(Out {
                partition: p,
                effect: make(std::mem::take(chunk)),
            });
        }
    }
    for (p, chunk) in by_partition.into_iter().enumerate() {
        if !chunk.is_empty() {
            out.push(Out {
                partition: p as u32,
                effect: make(chunk),
            });
        }
    }
    Ok(())
}

/// Applies one internal message addressed to users of this partition.
/// Stale, duplicate and no-longer-relevant messages change nothing.
pub fn apply_effect<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    ctx: &Ctx,
    effect: &Effect,
    out: &mut Vec<Out>,
) -> Result<Applied, StoreError> {
    let mut applied = Applied::default();
    match effect {
        &Effect::FollowerAdded {
            author,
            follower,
            version,
            ts,
        } => {
            let old = views::edge(t, Cf::Followers, author, follower)?;
            if old.is_some_and(|e| e.version >= version) {
                return Ok(applied);
            }
            let mut u = views::user(t, author)?;
            match old {
                Some(e) if e.live => t.set_recent(author, e.ts, follower, false),
                _ => u.followers += 1,
            }
            t.set_edge(
                Cf::Followers,
                author,
                follower,
                &EdgeVal {
                    live: true,
                    version,
                    ts,
                },
            );
            t.set_recent(author, ts, follower, true);
            t.set_user(author, &u);
            let mut posts = Vec::new();
            let mut truncated = false;
            for r in views::outbox(t, author, None) {
                if posts.len() as u64 == ctx.inbox_cap {
                    truncated = true;
                    break;
                }
                posts.push(r?);
            }
            // Sent also with no live posts when the author has had any: a
            // backfill replaces what an earlier emission for the same follow
            // delivered (see `Effect::Backfill`), so it must go out to undo
            // a post that this emission saw deleted.
            if !posts.is_empty() || views::has_posts(t, author)? {
                let backfill = Effect::Backfill {
                    author,
                    follower,
                    version,
                    posts,
                    truncated,
                };
                ctx.send(out, follower, backfill);
            }
        }
        &Effect::FollowerRemoved {
            author,
            follower,
            version,
        } => {
            let old = views::edge(t, Cf::Followers, author, follower)?;
            if old.is_some_and(|e| e.version >= version) {
                return Ok(applied);
            }
            let ts = match old {
                Some(e) if e.live => {
                    let mut u = views::user(t, author)?;
                    u.followers -= 1;
                    t.set_user(author, &u);
                    t.set_recent(author, e.ts, follower, false);
                    e.ts
                }
                Some(e) => e.ts,
                None => Ts(0),
            };
            t.set_edge(
                Cf::Followers,
                author,
                follower,
                &EdgeVal {
                    live: false,
                    version,
                    ts,
                },
            );
        }
        Effect::Deliver {
            author,
            post_id,
            ts,
            targets,
        } => {
            for &(user, version) in targets {
                if follows_at(t, ctx, user, *author, version)? {
                    let k = TimelineKey {
                        ts: *ts,
                        post_id: *post_id,
                        author: *author,
                    };
                    insert_inbox(t, ctx, user, &k, &mut applied)?;
                }
            }
        }
        Effect::Backfill {
            author,
            follower,
            version,
            posts,
            truncated,
        } => {
            if !follows_at(t, ctx, *follower, *author, *version)? {
                return Ok(applied);
            }
            // Entries of this author in the inbox can only come from this
            // same follow: from an earlier emission of this backfill and the
            // deliveries after it, by an owner of the author's partition that
            // crashed before the group committed them. The new owner re-decides
            // those inputs in its own order and sends their answers after
            // this message; this list is the author's posts as of this
            // follow, so an entry it leaves out (within its range) was deleted
            // in this order, possibly before the follow, when no retraction
            // reaches this follower. A duplicate of this message (a re-read
            // from an earlier position) is followed by the same deliveries
            // again, which restore theirs.
            let newest_cut = if *truncated { posts.last() } else { None };
            let mut u = views::user(t, *follower)?;
            let mut gone = 0;
            for k in t.inbox_by_author(*follower, *author)? {
                let listed = posts.iter().any(|&(ts, p)| ts == k.ts && p == k.post_id);
                let in_range = newest_cut.is_none_or(|&(ts, p)| {
                    k <= TimelineKey {
                        ts,
                        post_id: p,
                        author: *author,
                    }
                });
                if !listed && in_range {
                    t.set_inbox(*follower, &k, false);
                    gone += 1;
                }
            }
            if gone > 0 {
                u.inbox_len = u.inbox_len.saturating_sub(gone);
                t.set_user(*follower, &u);
                applied.removed += gone;
                applied.changed = true;
            }
            for &(ts, post_id) in posts {
                let k = TimelineKey {
                    ts,
                    post_id,
                    author: *author,
                };
                insert_inbox(t, ctx, *follower, &k, &mut applied)?;
            }
            if let (true, Some(&(ts, post_id))) = (*truncated, posts.last()) {
                let oldest = TimelineKey {
                    ts,
                    post_id,
                    author: *author,
                };
                lower_horizon(t, *follower, oldest)?;
                applied.changed = true;
            }
        }
        Effect::Retract {
            author,
            post_id,
            ts,
            targets,
        } => {
            let k = TimelineKey {
                ts: *ts,
                post_id: *post_id,
                author: *author,
            };
            for &user in targets {
                if ctx.owns(user) && t.inbox_has(user, &k)? {
                    t.set_inbox(user, &k, false);
                    let mut u = views::user(t, user)?;
                    u.inbox_len = u.inbox_len.saturating_sub(1);
                    t.set_user(user, &u);
                    applied.removed += 1;
                    applied.changed = true;
                }
            }
        }
    }
    if matches!(
        effect,
        Effect::FollowerAdded { .. } | Effect::FollowerRemoved { .. }
    ) {
        applied.changed = true;
    }
    Ok(applied)
}

/// Whether `user` (owned here) follows `author` through exactly the edge
/// `version` the author knows them by. A delivery made for an older follow
/// of the same pair is dropped: the newer follow brings its own backfill.
fn follows_at<K: Kv + ?Sized>(
    t: &Txn<'_, K>,
    ctx: &Ctx,
    user: UserId,
    author: UserId,
    version: Version,
) -> Result<bool, StoreError> {
    if !ctx.owns(user) {
        return Ok(false);
    }
    Ok(
        views::edge(t, Cf::Followees, user, author)?
            .is_some_and(|e| e.live && e.version == version),
    )
}

/// Adds an entry to `user`'s inbox unless it is already there or lies past
/// the horizon (where reads use the pull path); trims the inbox when it grows
/// past the cap, lowering the horizon to what was cut.
fn insert_inbox<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    ctx: &Ctx,
    user: UserId,
    k: &TimelineKey,
    applied: &mut Applied,
) -> Result<(), StoreError> {
    let mut u = views::user(t, user)?;
    if u.horizon.is_some_and(|h| *k >= h) {
        return Ok(());
    }
    // No read of the key first: a put is idempotent, and `inbox_len` may
    // over-count a duplicate until the next trim recounts it.
    t.set_inbox(user, k, true);
    u.inbox_len += 1;
    applied.delivered += 1;
    applied.changed = true;
    if u.inbox_len >= ctx.inbox_trim_at() {
        let entries: Vec<TimelineKey> = views::inbox(t, user, None).collect::<Result<_, _>>()?;
        let cut = entries.get(ctx.inbox_cap as usize..).unwrap_or_default();
        for c in cut {
            t.set_inbox(user, c, false);
        }
        if let Some(first) = cut.first() {
            u.horizon = Some(u.horizon.map_or(*first, |h| h.min(*first)));
        }
        u.inbox_len = entries.len().min(ctx.inbox_cap as usize) as u64;
        applied.removed += cut.len() as u64;
    }
    t.set_user(user, &u);
    Ok(())
}

fn lower_horizon<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    user: UserId,
    to: TimelineKey,
) -> Result<(), StoreError> {
    let mut u = views::user(t, user)?;
    u.horizon = Some(u.horizon.map_or(to, |h| h.min(to)));
    // Entries at or past the horizon are never read from the inbox again.
    let stale: Vec<TimelineKey> =
        views::inbox(t, user, Some(&u.horizon.expect("just set"))).collect::<Result<_, _>>()?;
    for k in &stale {
        t.set_inbox(user, k, false);
    }
    u.inbox_len = u.inbox_len.saturating_sub(stale.len() as u64);
    t.set_user(user, &u);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::MemKv;

    const A: UserId = UserId(1);
    const B: UserId = UserId(2);
    const C: UserId = UserId(3);

    /// One partition owning everyone, inbox of 2, chunks of 2.
    fn ctx() -> Ctx {
        Ctx {
            partition: 0,
            partitions: 1,
            inbox_cap: 2,
            fanout_chunk: 2,
        }
    }

    fn event(kv: &mut MemKv, ev: Event, version: Version) -> (Applied, Vec<Out>) {
        let mut t = Txn::new(&*kv);
        let mut out = Vec::new();
        let a = apply_event(&mut t, &ctx(), &ev, version, &mut out).unwrap();
        let w = t.into_writes();
        kv.apply(w);
        (a, out)
    }

    fn effect(kv: &mut MemKv, e: &Effect) -> (Applied, Vec<Out>) {
        let mut t = Txn::new(&*kv);
        let mut out = Vec::new();
        let a = apply_effect(&mut t, &ctx(), e, &mut out).unwrap();
        let w = t.into_writes();
        kv.apply(w);
        (a, out)
    }

    /// Applies an event and, transitively, every effect it causes.
    fn settle(kv: &mut MemKv, ev: Event, version: Version) {
        let (_, mut queue) = event(kv, ev, version);
        while !queue.is_empty() {
            let next = queue.remove(0);
            let (_, more) = effect(kv, &next.effect);
            queue.extend(more);
        }
    }

    fn inbox(kv: &MemKv, u: UserId) -> Vec<(u64, u64)> {
        views::inbox(kv, u, None)
            .map(|k| k.unwrap())
            .map(|k| (k.post_id.0, k.author.0))
            .collect()
    }

    fn follow(a: UserId, b: UserId, ts: u64) -> Event {
        Event::Follow {
            follower: a,
            followee: b,
            ts: Ts(ts),
        }
    }

    fn post(a: UserId, p: u64, ts: u64) -> Event {
        Event::Post {
            author: a,
            post_id: PostId(p),
            ts: Ts(ts),
        }
    }

    // Proves a follow records the edge, counts once, and tells the followee's owner.
    #[test]
    fn follow_records_edge_and_notifies() {
        let mut kv = MemKv::default();
        let (a, out) = event(&mut kv, follow(A, B, 10), 1);
        assert!(a.changed);
        assert_eq!(views::user(&kv, A).unwrap().followees, 1);
        assert_eq!(
            out,
            vec![Out {
                partition: 0,
                effect: Effect::FollowerAdded {
                    author: B,
                    follower: A,
                    version: 1,
                    ts: Ts(10)
                }
            }]
        );
        // A follow of a live edge changes nothing, and neither does a replayed event.
        assert_eq!(
            event(&mut kv, follow(A, B, 11), 2),
            (Applied::default(), vec![])
        );
        assert_eq!(
            event(&mut kv, follow(A, B, 10), 1),
            (Applied::default(), vec![])
        );
    }

    // Proves FollowerAdded counts once, keeps recent followers, backfills, and ignores stale versions.
    #[test]
    fn follower_added_is_versioned() {
        let mut kv = MemKv::default();
        settle(&mut kv, post(B, 7, 5), 1);
        let added = Effect::FollowerAdded {
            author: B,
            follower: A,
            version: 3,
            ts: Ts(10),
        };
        let (_, out) = effect(&mut kv, &added);
        assert_eq!(views::user(&kv, B).unwrap().followers, 1);
        assert_eq!(
            views::recent_followers(&kv, B)
                .map(Result::unwrap)
                .collect::<Vec<_>>(),
            vec![(A, Ts(10))]
        );
        assert!(
            matches!(&out[..], [Out { effect: Effect::Backfill { posts, truncated: false, .. }, .. }] if posts == &vec![(Ts(5), PostId(7))])
        );
        // Duplicate and older messages are no-ops.
        assert_eq!(effect(&mut kv, &added), (Applied::default(), vec![]));
        let removed_old = Effect::FollowerRemoved {
            author: B,
            follower: A,
            version: 2,
        };
        assert_eq!(effect(&mut kv, &removed_old), (Applied::default(), vec![]));
        assert_eq!(views::user(&kv, B).unwrap().followers, 1);
        effect(
            &mut kv,
            &Effect::FollowerRemoved {
                author: B,
                follower: A,
                version: 4,
            },
        );
        assert_eq!(views::user(&kv, B).unwrap().followers, 0);
        assert_eq!(views::recent_followers(&kv, B).count(), 0);
        // A stale re-delivery of the follow cannot resurrect the edge.
        assert_eq!(effect(&mut kv, &added), (Applied::default(), vec![]));
    }

    // Proves posts fan out to every follower, chunked, and land in their inboxes.
    #[test]
    fn post_fans_out_in_chunks() {
        let mut kv = MemKv::default();
        for (i, f) in [A, C, UserId(4)].into_iter().enumerate() {
            settle(&mut kv, follow(f, B, 1), i as u64 + 1);
        }
        let (_, out) = event(&mut kv, post(B, 9, 50), 10);
        let chunks: Vec<usize> = out
            .iter()
            .map(|o| match &o.effect {
                Effect::Deliver { targets, .. } => targets.len(),
                e => panic!("{e:?}"),
            })
            .collect();
        assert_eq!(chunks, vec![2, 1]);
        for o in out {
            effect(&mut kv, &o.effect);
        }
        for f in [A, C, UserId(4)] {
            assert_eq!(inbox(&kv, f), vec![(9, 2)]);
        }
        assert_eq!(views::user(&kv, B).unwrap().posts, 1);
    }

    // Proves an unfollow purges exactly the unfollowed author's entries.
    #[test]
    fn unfollow_purges_author() {
        let mut kv = MemKv::default();
        settle(&mut kv, follow(A, B, 1), 1);
        settle(&mut kv, follow(A, C, 1), 2);
        settle(&mut kv, post(B, 1, 10), 3);
        settle(&mut kv, post(C, 2, 11), 4);
        assert_eq!(inbox(&kv, A), vec![(2, 3), (1, 2)]);
        settle(
            &mut kv,
            Event::Unfollow {
                follower: A,
                followee: B,
                ts: Ts(20),
            },
            5,
        );
        assert_eq!(inbox(&kv, A), vec![(2, 3)]);
        assert_eq!(views::user(&kv, A).unwrap().followees, 1);
        assert_eq!(views::user(&kv, B).unwrap().followers, 0);
    }

    // Proves a delivery made for an earlier follow of the same pair is dropped.
    #[test]
    fn delivery_for_old_follow_is_dropped() {
        let mut kv = MemKv::default();
        settle(&mut kv, follow(A, B, 1), 1);
        settle(
            &mut kv,
            Event::Unfollow {
                follower: A,
                followee: B,
                ts: Ts(2),
            },
            2,
        );
        event(&mut kv, follow(A, B, 3), 3);
        let stale = Effect::Deliver {
            author: B,
            post_id: PostId(5),
            ts: Ts(9),
            targets: vec![(A, 1)],
        };
        assert_eq!(effect(&mut kv, &stale).0.delivered, 0);
        let current = Effect::Deliver {
            author: B,
            post_id: PostId(5),
            ts: Ts(9),
            targets: vec![(A, 3)],
        };
        assert_eq!(effect(&mut kv, &current).0.delivered, 1);
    }

    // Proves deletes retract, are permanent, and win over a later post event.
    #[test]
    fn delete_retracts_and_is_permanent() {
        let mut kv = MemKv::default();
        settle(&mut kv, follow(A, B, 1), 1);
        settle(&mut kv, post(B, 1, 10), 2);
        settle(
            &mut kv,
            Event::DeletePost {
                author: B,
                post_id: PostId(1),
                ts: Ts(11),
            },
            3,
        );
        assert_eq!(inbox(&kv, A), vec![]);
        assert_eq!(views::user(&kv, B).unwrap().posts, 0);
        settle(&mut kv, post(B, 1, 12), 4);
        assert_eq!(views::user(&kv, B).unwrap().posts, 0);
        // Delete before post.
        settle(
            &mut kv,
            Event::DeletePost {
                author: B,
                post_id: PostId(2),
                ts: Ts(13),
            },
            5,
        );
        settle(&mut kv, post(B, 2, 14), 6);
        assert_eq!(inbox(&kv, A), vec![]);
        assert_eq!(views::outbox(&kv, B, None).count(), 0);
    }

    // Proves a backfill replaces the author's entries an earlier emission for the same follow delivered: an owner of the author's partition that applied the follow before the delete (its backfill carried the post) crashed, and the next owner, applying the delete first, sends no retraction to the follower but a backfill without the post, which removes it.
    #[test]
    fn a_backfill_replaces_what_an_earlier_emission_delivered() {
        let at = |p| Ctx {
            partition: p,
            partitions: 2,
            inbox_cap: 10,
            fanout_chunk: 2,
        };
        let (f, a) = (1..50)
            .flat_map(|x| (1..50).map(move |y| (UserId(x), UserId(y))))
            .find(|&(x, y)| partition_for(x, 2) == 0 && partition_for(y, 2) == 1)
            .expect("two users in different partitions");
        let run = |kv: &mut MemKv, ctx: Ctx, input: Result<(&Event, Version), &Effect>| {
            let mut t = Txn::new(&*kv);
            let mut out = Vec::new();
            match input {
                Ok((ev, v)) => apply_event(&mut t, &ctx, ev, v, &mut out).unwrap(),
                Err(e) => apply_effect(&mut t, &ctx, e, &mut out).unwrap(),
            };
            let w = t.into_writes();
            kv.apply(w);
            out.into_iter().map(|o| o.effect).collect::<Vec<_>>()
        };
        let delete = Event::DeletePost {
            author: a,
            post_id: PostId(7),
            ts: Ts(20),
        };
        let (mut follower, mut first, mut second) =
            (MemKv::default(), MemKv::default(), MemKv::default());
        for owner in [&mut first, &mut second] {
            run(owner, at(1), Ok((&post(a, 7, 10), 1)));
        }
        let added = run(&mut follower, at(0), Ok((&follow(f, a, 15), 1))).remove(0);
        // The first owner: the follow, then (crashing before the delete) nothing.
        let backfill = run(&mut first, at(1), Err(&added)).remove(0);
        run(&mut follower, at(0), Err(&backfill));
        assert_eq!(inbox(&follower, f), vec![(7, a.0)]);
        // The second owner: the delete first (no retraction for f), then the follow.
        let retracts = run(&mut second, at(1), Ok((&delete, 2)));
        assert!(retracts.is_empty(), "{retracts:?}");
        let backfill = run(&mut second, at(1), Err(&added));
        assert_eq!(backfill.len(), 1, "sent although no post is live");
        run(&mut follower, at(0), Err(&backfill[0]));
        assert_eq!(inbox(&follower, f), vec![]);
        assert_eq!(views::user(&follower, f).unwrap().inbox_len, 0);
    }

    // Proves the inbox is trimmed to its cap and the horizon marks what was cut.
    #[test]
    fn inbox_trims_and_sets_horizon() {
        let mut kv = MemKv::default();
        settle(&mut kv, follow(A, B, 1), 1);
        for p in 1..=3 {
            settle(&mut kv, post(B, p, 10 + p), 1 + p);
        }
        // cap 2, trim at 3: the oldest entry is cut and becomes the horizon.
        assert_eq!(inbox(&kv, A), vec![(3, 2), (2, 2)]);
        let u = views::user(&kv, A).unwrap();
        assert_eq!(u.inbox_len, 2);
        assert_eq!(
            u.horizon,
            Some(TimelineKey {
                ts: Ts(11),
                post_id: PostId(1),
                author: B
            })
        );
        // A later delivery past the horizon is not materialized.
        let old = Effect::Deliver {
            author: B,
            post_id: PostId(9),
            ts: Ts(1),
            targets: vec![(A, 1)],
        };
        assert_eq!(effect(&mut kv, &old).0.delivered, 0);
    }
}
