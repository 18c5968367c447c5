//! Unit tests of every core flow, on the in-memory [`MemKv`].

use super::*;
use crate::event::{Event, PostId, Ts, UserId};
use crate::keys::{TimelineKey, UserVal};
use crate::kv::{MemKv, Txn};
use crate::partition::partition_for;
use crate::views;

const A: UserId = UserId(1);
const B: UserId = UserId(2);
const C: UserId = UserId(3);

/// One partition owning everyone, inbox of 2, chunks of 2.
fn ctx() -> Ctx {
    Ctx {
        partition: Partition(0),
        partitions: 1,
        inbox_cap: 2,
        fanout_chunk: 2,
        pull_threshold: None,
        inactive_after: None,
    }
}

fn event(kv: &mut MemKv, ev: Event, version: u64) -> (Applied, Vec<Out>) {
    let version = Version(version);
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
fn settle(kv: &mut MemKv, ev: Event, version: u64) {
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
            partition: Partition(0),
            effect: Effect::FollowerAdded {
                author: B,
                follower: A,
                version: Version(1),
                ts: Ts(10)
            }
        }]
    );
    // A follow of a live edge changes nothing, and neither does a replayed event.
    assert_eq!(
        event(&mut kv, follow(A, B, 10), 2),
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
        version: Version(3),
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
        version: Version(2),
    };
    assert_eq!(effect(&mut kv, &removed_old), (Applied::default(), vec![]));
    assert_eq!(views::user(&kv, B).unwrap().followers, 1);
    effect(
        &mut kv,
        &Effect::FollowerRemoved {
            author: B,
            follower: A,
            version: Version(4),
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
        targets: vec![(A, Version(1))],
    };
    assert_eq!(effect(&mut kv, &stale).0.delivered, 0);
    let current = Effect::Deliver {
        author: B,
        post_id: PostId(5),
        ts: Ts(9),
        targets: vec![(A, Version(3))],
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
        pull_threshold: None,
        inactive_after: None,
    };
    let (f, a) = (1..50)
        .flat_map(|x| (1..50).map(move |y| (UserId(x), UserId(y))))
        .find(|&(x, y)| partition_for(x, 2) == Partition(0) && partition_for(y, 2) == Partition(1))
        .expect("two users in different partitions");
    let run = |kv: &mut MemKv, ctx: Ctx, input: Result<(&Event, u64), &Effect>| {
        let mut t = Txn::new(&*kv);
        let mut out = Vec::new();
        match input {
            Ok((ev, v)) => apply_event(&mut t, &ctx, ev, Version(v), &mut out).unwrap(),
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
        run(owner, at(Partition(1)), Ok((&post(a, 7, 10), 1)));
    }
    let added = run(&mut follower, at(Partition(0)), Ok((&follow(f, a, 15), 1))).remove(0);
    // The first owner: the follow, then (crashing before the delete) nothing.
    let backfill = run(&mut first, at(Partition(1)), Err(&added)).remove(0);
    run(&mut follower, at(Partition(0)), Err(&backfill));
    assert_eq!(inbox(&follower, f), vec![(7, a.0)]);
    // The second owner: the delete first (no retraction for f), then the follow.
    let retracts = run(&mut second, at(Partition(1)), Ok((&delete, 2)));
    assert!(retracts.is_empty(), "{retracts:?}");
    let backfill = run(&mut second, at(Partition(1)), Err(&added));
    assert_eq!(backfill.len(), 1, "sent although no post is live");
    run(&mut follower, at(Partition(0)), Err(&backfill[0]));
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
        targets: vec![(A, Version(1))],
    };
    assert_eq!(effect(&mut kv, &old).0.delivered, 0);
}

// Proves a `seen` event sends nothing and changes no view, only the user's last activity (a new user's record holds nothing else) and the partition's clock.
#[test]
fn seen_changes_nothing_but_activity() {
    let mut kv = MemKv::default();
    settle(&mut kv, follow(A, B, 10), 1);
    settle(&mut kv, post(B, 7, 20), 2);
    for user in [A, C] {
        let before = views::user(&kv, user).unwrap();
        let mut t = Txn::new(&kv);
        let mut out = Vec::new();
        let seen = Event::Seen { user, ts: Ts(30) };
        apply_event(&mut t, &ctx(), &seen, Version(3), &mut out).unwrap();
        assert!(out.is_empty(), "{user}");
        assert_eq!(t.staged(), 2, "{user}: the user record and the clock only");
        assert_eq!(views::clock(&t).unwrap(), Ts(30));
        let after = t.user(user).unwrap();
        assert_eq!(
            after,
            UserVal {
                active: Ts(30),
                ..before
            },
            "{user}"
        );
    }
}

/// A's filter change of B at `ts`.
fn a_filters_b(change: crate::event::FilterChange, ts: u64) -> Event {
    Event::Filter {
        user: A,
        target: B,
        change,
        ts: Ts(ts),
    }
}

// Proves an unblock that comes again sends a counting follower the author's newest posts again (a successor of the blocker's partition may have dropped the first answer), and a repeated block sends nothing.
#[test]
fn a_repeated_unblock_sends_the_newest_posts_again() {
    use crate::event::FilterChange;
    let mut kv = MemKv::default();
    let filter = a_filters_b;
    // The follow comes in log order while the block is on, made after it ended.
    settle(&mut kv, filter(FilterChange::Block, 3), 1);
    settle(&mut kv, follow(A, B, 5), 2);
    settle(&mut kv, post(B, 7, 2), 3);
    let (_, outs) = event(&mut kv, filter(FilterChange::Unblock, 4), 4);
    let unblock = outs
        .iter()
        .find(|o| matches!(o.effect, Effect::Blocked { .. }));
    let unblock = unblock.expect("the unblock is sent").effect.clone();
    for o in outs {
        effect(&mut kv, &o.effect);
    }
    let (_, again) = effect(&mut kv, &unblock);
    let backfills: Vec<_> = again
        .iter()
        .filter(|o| matches!(o.effect, Effect::Backfill { author, follower, .. } if author == B && follower == A))
        .collect();
    assert_eq!(backfills.len(), 1, "{again:?}");
    let block = Effect::Blocked {
        user: B,
        by: A,
        version: Version(5),
        on: true,
        ts: Ts(6),
        ended: Some(Ts(4)),
    };
    effect(&mut kv, &block);
    let (_, again) = effect(&mut kv, &block);
    assert!(again.is_empty(), "{again:?}");
}

// Proves a follow that revives a voided edge and comes again sends the follower the author's newest posts again (a successor of the follower's partition may have dropped the first answer while its end was still void), and a stale one sends nothing.
#[test]
fn a_repeated_revival_sends_the_newest_posts_again() {
    use crate::event::FilterChange;
    let mut kv = MemKv::default();
    let filter = a_filters_b;
    // The first follow falls in a block period; the second, after it,
    // revives the edge.
    settle(&mut kv, follow(A, B, 2), 1);
    settle(&mut kv, filter(FilterChange::Block, 3), 2);
    settle(&mut kv, filter(FilterChange::Unblock, 4), 3);
    settle(&mut kv, post(B, 7, 1), 4);
    let (_, outs) = event(&mut kv, follow(A, B, 5), 5);
    let again = outs
        .iter()
        .find(|o| matches!(o.effect, Effect::Refollowed { .. }));
    let again = again.expect("the revival is sent").effect.clone();
    for o in outs {
        effect(&mut kv, &o.effect);
    }
    let backfills = |outs: &[Out]| {
        outs.iter()
            .filter(|o| matches!(o.effect, Effect::Backfill { author, follower, .. } if author == B && follower == A))
            .count()
    };
    let (_, outs) = effect(&mut kv, &again);
    assert_eq!(backfills(&outs), 1, "{outs:?}");
    let Effect::Refollowed {
        author,
        follower,
        version,
        ..
    } = again
    else {
        unreachable!()
    };
    let stale = Effect::Refollowed {
        author,
        follower,
        version,
        last: Ts(4),
    };
    let (_, outs) = effect(&mut kv, &stale);
    assert!(outs.is_empty(), "{outs:?}");
}
