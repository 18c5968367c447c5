//! Each transition of a pulled author on one partition, message by message.

use super::super::testkit::*;
use crate::keys::TimelineKey;
use crate::kv::Txn;
use crate::partition::Partition;
use crate::timeline::held_timeline;
use crate::{views, Ctx, Effect};

/// One partition owning everyone, inbox and copies of 3, asking for
/// authors pulled from 3 followers (pushed again at 1); nobody asleep.
fn ctx() -> Ctx {
    Ctx {
        partition: Partition(0),
        partitions: 1,
        inbox_cap: 3,
        fanout_chunk: 2,
        pull_threshold: Some(3),
        inactive_after: None,
    }
}

impl Part {
    /// A partition with the threshold of [`ctx`] in force.
    fn new() -> Part {
        let part = Part::with(ctx());
        assert_eq!(views::pull_threshold(&part.kv).unwrap(), 3);
        assert_eq!(super::threshold_request(&part.kv, &ctx()).unwrap(), None);
        part
    }
}

/// A with followers B, C and D: pulled.
fn pulled_author() -> Part {
    let mut part = Part::new();
    part.then(post(A, 10))
        .then(follow(B, A))
        .then(follow(C, A))
        .then(follow(D, A));
    part
}

// Proves the third follower promotes the author: every follower is marked, their inboxes lose the author's posts and the copy serves them.
#[test]
fn promotion_moves_the_author_from_inboxes_to_the_copy() {
    let part = pulled_author();
    assert!(views::user(&part.kv, A).unwrap().pulled);
    assert_eq!(part.copy(A), Some(vec![10]));
    for u in [B, C, D] {
        assert_eq!(part.pulls(u), vec![A]);
        assert_eq!(part.inbox(u), Vec::<u64>::new());
        assert_eq!(part.held(u), (vec![10], false));
    }
}

// Proves a post of a pulled author is one message per partition, not per follower, and reaches every follower's timeline through the copy.
#[test]
fn a_pulled_authors_post_is_one_message_per_partition() {
    let mut part = pulled_author();
    part.event(post(A, 11));
    assert_eq!(part.queued(), vec!["copy_post"]);
    part.settle();
    assert_eq!(part.copy(A), Some(vec![11, 10]));
    assert_eq!(part.held(B), (vec![11, 10], false));
    assert_eq!(part.inbox(B), Vec::<u64>::new());
}

// Proves a delivery made before the promotion and applied after it (a re-shipped message) does not show a post twice, and the purge at promotion removes the rest.
#[test]
fn a_delivery_in_flight_at_promotion_is_not_doubled() {
    let mut part = Part::new();
    part.then(follow(B, A)).then(follow(C, A));
    part.event(post(A, 10));
    let deliver = part.queue.clone();
    assert_eq!(part.queued(), vec!["deliver"]);
    part.then(follow(D, A));
    assert_eq!(part.held(B), (vec![10], false));
    for o in &deliver {
        part.effect(&o.effect);
    }
    assert_eq!(part.inbox(B), vec![10]);
    assert_eq!(part.held(B), (vec![10], false));
}

// Proves a follower who follows an author already pulled is marked, gets nothing in the inbox, and reads the copy.
#[test]
fn a_new_follower_of_a_pulled_author_reads_the_copy() {
    let mut part = pulled_author();
    part.then(follow(UserId(5), A));
    assert_eq!(part.pulls(UserId(5)), vec![A]);
    assert_eq!(part.inbox(UserId(5)), Vec::<u64>::new());
    assert_eq!(part.held(UserId(5)), (vec![10], false));
}

// Proves an unfollow of a pulled author unmarks it, so the copy no longer shows in the former follower's timeline.
#[test]
fn unfollowing_a_pulled_author_unmarks_it() {
    let mut part = pulled_author();
    part.then(unfollow(B, A));
    assert_eq!(part.pulls(B), vec![]);
    assert_eq!(views::user(&part.kv, B).unwrap().pulls, 0);
    assert_eq!(part.held(B), (vec![], false));
}

// Proves a deleted post of a pulled author leaves the copy (one message per partition) and every follower's timeline.
#[test]
fn deleting_a_pulled_authors_post_leaves_the_copy() {
    let mut part = pulled_author();
    part.then(post(A, 11));
    part.event(delete(A, 11));
    assert_eq!(part.queued(), vec!["copy_post"]);
    part.settle();
    assert_eq!(part.copy(A), Some(vec![10]));
    assert_eq!(part.held(C), (vec![10], false));
}

// Proves demotion (below half the threshold) refills every remaining follower's inbox with the author's posts, unmarks them and drops the copy.
#[test]
fn demotion_refills_inboxes_and_drops_the_copy() {
    let mut part = pulled_author();
    part.then(post(A, 11)).then(unfollow(C, A));
    assert!(
        views::user(&part.kv, A).unwrap().pulled,
        "2 of 3 stays pulled"
    );
    part.then(unfollow(D, A));
    assert!(!views::user(&part.kv, A).unwrap().pulled);
    assert_eq!(part.copy(A), None);
    assert_eq!(part.pulls(B), vec![]);
    assert_eq!(part.inbox(B), vec![11, 10]);
    assert_eq!(part.held(B), (vec![11, 10], false));
    // Pushed again: the next post is delivered.
    part.then(post(A, 12));
    assert_eq!(part.inbox(B), vec![12, 11, 10]);
}

// Proves a copy is kept to the cap with a horizon, and the timeline read hands the rest to the pull path.
#[test]
fn a_copy_is_trimmed_and_the_rest_is_pulled() {
    let mut part = pulled_author();
    for p in 11..=14 {
        part.then(post(A, p));
    }
    // Trimmed back to 3 at 4 entries, twice: 10, then 11 cut.
    assert_eq!(part.copy(A), Some(vec![14, 13, 12]));
    assert_eq!(part.held(B), (vec![14, 13, 12], true));
    let bound = held_timeline(&part.kv, B, None, usize::MAX).unwrap().1;
    let eleven = TimelineKey {
        ts: Ts(11),
        post_id: PostId(11),
        author: A,
    };
    assert_eq!(bound, Some(eleven));
    assert_eq!(
        views::copy_of(&part.kv, A).unwrap().unwrap().horizon,
        Some(eleven)
    );
}

// Proves the threshold in force, not the one a processor asks for, decides: until the request is applied the author stays pushed, and a new threshold of 0 demotes at the next follower change.
#[test]
fn the_threshold_in_force_decides() {
    let asks_none = Ctx {
        pull_threshold: None,
        ..ctx()
    };
    let mut part = Part::with(asks_none);
    part.then(follow(B, A))
        .then(follow(C, A))
        .then(follow(D, A));
    assert!(
        !views::user(&part.kv, A).unwrap().pulled,
        "no threshold in force yet"
    );
    part.effect(&Effect::PullThreshold { threshold: 3 });
    part.then(follow(UserId(5), A));
    assert!(views::user(&part.kv, A).unwrap().pulled);
    part.effect(&Effect::PullThreshold { threshold: 0 });
    assert!(
        views::user(&part.kv, A).unwrap().pulled,
        "until a follower change"
    );
    part.then(unfollow(UserId(5), A));
    assert!(!views::user(&part.kv, A).unwrap().pulled);
    assert_eq!(part.copy(A), None);
    assert_eq!(part.pulls(B), vec![]);
}

// Proves a pulled followee whose copy has not arrived sends the whole read to the pull path instead of showing an incomplete page.
#[test]
fn a_missing_copy_sends_the_read_to_the_pull_path() {
    let mut part = pulled_author();
    let mut t = Txn::new(&part.kv);
    t.set_copy_header(A, None);
    let w = t.into_writes();
    part.kv.apply(w);
    let (keys, from) = held_timeline(&part.kv, B, None, 10).unwrap();
    assert!(keys.is_empty());
    assert_eq!(from, Some(crate::timeline::TOP));
}
