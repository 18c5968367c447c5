//! Likes on one partition, message by message: each (liker, original)
//! decided by the latest version, whichever id it named and whenever the
//! original came or went.

use super::super::testkit::*;
use super::{count, given, likes};
use crate::partition::Partition;
use crate::{Ctx, Effect};

fn ctx() -> Ctx {
    Ctx {
        partition: Partition(0),
        partitions: 1,
        inbox_cap: 10,
        fanout_chunk: 2,
        pull_threshold: Some(0),
        inactive_after: None,
    }
}

fn like(u: UserId, (a, p): (UserId, u64), liked: bool) -> Event {
    Event::Like {
        user: u,
        author: a,
        post_id: PostId(p),
        liked,
        ts: Ts(50),
    }
}

fn repost(a: UserId, id: u64, of: (UserId, u64)) -> Event {
    Event::Repost {
        author: a,
        post_id: PostId(id),
        of_author: of.0,
        of_post_id: PostId(of.1),
        ts: Ts(id),
    }
}

/// (A's post 1's likes, B's likes given, whether B likes it).
fn state(part: &Part) -> (u64, u64, bool) {
    let post = (A, PostId(1));
    (
        count(&part.kv, post).unwrap(),
        given(&part.kv, B).unwrap(),
        likes(&part.kv, B, post).unwrap(),
    )
}

// Proves a like counts once however often it is repeated, an unlike takes it back, and a like of a repost's id counts for its original as the same like.
#[test]
fn a_like_counts_once_for_its_original() {
    let mut part = Part::with(ctx());
    part.then(post(A, 1)).then(repost(C, 2, (A, 1)));
    part.then(like(B, (A, 1), true)).then(like(B, (A, 1), true));
    assert_eq!(state(&part), (1, 1, true));
    part.then(like(B, (C, 2), true));
    assert_eq!(
        state(&part),
        (1, 1, true),
        "the repost's id names the same post"
    );
    part.then(like(B, (C, 2), false));
    assert_eq!(state(&part), (0, 0, false), "the latest event decides");
    part.then(like(D, (C, 2), true));
    assert_eq!(count(&part.kv, (A, PostId(1))).unwrap(), 1);
}

// Proves a like of a post not come yet counts when it comes, one of an id that turns out a repost follows its link, and a deletion takes every like of the original away for good.
#[test]
fn likes_wait_for_their_post_and_go_with_it() {
    let mut part = Part::with(ctx());
    part.then(like(B, (A, 1), true)).then(like(B, (C, 2), true));
    assert_eq!((state(&part).1, state(&part).2), (0, false));
    part.then(post(A, 1));
    assert_eq!(state(&part), (1, 1, true));
    part.then(repost(C, 2, (A, 1)));
    assert_eq!(state(&part), (1, 1, true), "one like of the original");
    part.then(delete(A, 1));
    assert_eq!(state(&part), (0, 0, false));
    part.then(like(B, (A, 1), true));
    assert_eq!(state(&part), (0, 0, false), "a deleted post is never liked");
}

// Proves a like that reaches an original after a later unlike of the same user (through another id) changes nothing: the greatest version decides, in any arrival order.
#[test]
fn an_older_like_arriving_late_changes_nothing() {
    let mut part = Part::with(ctx());
    part.then(post(A, 1));
    let late = |liked, version| Effect::LikeOf {
        of_author: A,
        of_post_id: PostId(1),
        liker: B,
        liked,
        hops: 1,
        version: crate::Version(version),
        ts: Ts(version),
    };
    part.effect(&late(false, 9));
    part.settle();
    part.effect(&late(true, 5));
    part.settle();
    assert_eq!(state(&part), (0, 0, false));
    part.effect(&late(true, 10));
    part.settle();
    assert_eq!(state(&part), (1, 1, true));
}

// Proves an original posted after a like and its unlike waited for it tells the liker the like does not count, settling a "live" an earlier owner of the partition answered when it applied the same inputs in another order.
#[test]
fn a_post_coming_late_answers_the_unlikes_that_waited() {
    let mut part = Part::with(ctx());
    part.effect(&Effect::LikeLive {
        liker: B,
        root_author: A,
        root_post_id: PostId(1),
        live: true,
    });
    part.settle();
    assert_eq!(state(&part), (0, 1, true), "as an earlier owner answered");
    part.then(like(B, (A, 1), true))
        .then(like(B, (A, 1), false));
    part.then(post(A, 1));
    assert_eq!(state(&part), (0, 0, false));
}
