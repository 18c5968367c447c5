//! Replies on one partition, message by message: each reply counted for
//! the original its `reply_to` resolves to while both are live, in any
//! order and however often repeated.

use super::super::testkit::*;
use super::{addressed, count, replies, Addressed};
use crate::Effect;

fn reply(a: UserId, id: u64, to: (UserId, u64), mentions: &[UserId]) -> Event {
    Event::post(
        a,
        PostId(id),
        Ts(id),
        Some((to.0, PostId(to.1))),
        mentions.to_vec(),
    )
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

/// A's post 1's reply count and its replies, oldest first.
fn state(part: &Part) -> (u64, Vec<(UserId, u64)>) {
    let post = (A, PostId(1));
    let list = replies(&part.kv, post, None)
        .map(|r| r.map(|((a, p), _)| (a, p.0)).unwrap())
        .collect();
    (count(&part.kv, post).unwrap(), list)
}

// Proves a reply counts once for the original however often it is applied, a reply to a repost's id counts for its original, the list is oldest first, and a deleted reply leaves both.
#[test]
fn a_reply_counts_for_its_original_while_it_is_live() {
    let mut part = Part::with(engagement_ctx());
    part.then(post(A, 1)).then(repost(C, 2, (A, 1)));
    part.then(reply(B, 5, (A, 1), &[]))
        .then(reply(B, 5, (A, 1), &[]));
    part.then(reply(D, 7, (C, 2), &[A]));
    assert_eq!(state(&part), (2, vec![(B, 5), (D, 7)]));
    part.then(delete(B, 5)).then(delete(B, 5));
    assert_eq!(state(&part), (1, vec![(D, 7)]));
    let kept = addressed(&part.kv, (D, PostId(7))).unwrap();
    let want = Addressed {
        reply_to: Some((C, PostId(2))),
        mentions: vec![A],
    };
    assert_eq!(kept, Some(want), "the reply keeps what it names");
    assert_eq!(
        addressed(&part.kv, (B, PostId(5))).unwrap(),
        None,
        "gone with it"
    );
}

// Proves replies wait for a post not come yet, follow an id that turns out a repost, and all go for good when the original is deleted.
#[test]
fn replies_wait_for_their_post_and_go_with_it() {
    let mut part = Part::with(engagement_ctx());
    part.then(reply(B, 5, (A, 1), &[]))
        .then(reply(D, 7, (C, 2), &[]));
    part.then(post(A, 1)).then(repost(C, 2, (A, 1)));
    assert_eq!(state(&part), (2, vec![(B, 5), (D, 7)]));
    part.then(delete(A, 1));
    assert_eq!(state(&part), (0, vec![]));
    part.then(reply(B, 9, (A, 1), &[]));
    assert_eq!(state(&part), (0, vec![]), "a deleted post gets no reply");
}

// Proves a deletion that reaches the original before the reply's post (an earlier version arriving late) keeps the reply out: the greatest version decides.
#[test]
fn a_post_arriving_after_its_deletion_changes_nothing() {
    let mut part = Part::with(engagement_ctx());
    part.then(post(A, 1));
    let msg = |live, version| Effect::ReplyOf {
        of_author: A,
        of_post_id: PostId(1),
        replier: B,
        reply_post_id: PostId(5),
        live,
        hops: 0,
        version: crate::Version(version),
        ts: Ts(5),
    };
    part.effect(&msg(false, 9));
    part.settle();
    part.effect(&msg(true, 4));
    part.settle();
    assert_eq!(state(&part), (0, vec![]));
}

// Proves a reply deleted before its post arrives never counts, and a self-reply (a thread) counts as any reply.
#[test]
fn a_reply_deleted_first_never_counts() {
    let mut part = Part::with(engagement_ctx());
    part.then(post(A, 1))
        .then(delete(B, 5))
        .then(reply(B, 5, (A, 1), &[]));
    assert_eq!(state(&part), (0, vec![]));
    part.then(reply(A, 6, (A, 1), &[]));
    assert_eq!(state(&part), (1, vec![(A, 6)]));
}

// Mastodon's reply count (spec/models/status_spec.rb, `#replies_count`:
// "is the number of replies", "is decremented when reply removed"),
// translated. Where feedlog differs: a reply to a reblog counts for the
// reblogged original (Mastodon replies to the original itself).

// Proves Mastodon's "is the number of replies" and "is decremented when reply removed".
#[test]
fn mastodon_replies_count_is_the_number_of_live_replies() {
    let mut part = Part::with(engagement_ctx());
    part.then(post(A, 1));
    part.then(reply(B, 5, (A, 1), &[]))
        .then(reply(C, 6, (A, 1), &[]));
    assert_eq!(state(&part).0, 2);
    part.then(delete(B, 5));
    assert_eq!(state(&part).0, 1);
}

/// The live posts that mention `u` here: (ts, author, post).
fn mentioning(part: &Part, u: UserId) -> Vec<(u64, UserId, u64)> {
    super::mention::mentions_of(&part.kv, u)
        .map(|r| r.map(|(ts, (a, p))| (ts.0, a, p.0)).unwrap())
        .collect()
}

// Proves a post registers with each user it mentions while it is live, oldest first, once however often applied, and leaves when deleted (a reply to someone else's post too).
#[test]
fn a_mention_registers_with_the_user_while_the_post_is_live() {
    let mut part = Part::with(engagement_ctx());
    part.then(post(C, 1));
    part.then(reply(B, 5, (C, 1), &[A, D]))
        .then(reply(B, 5, (C, 1), &[A, D]));
    part.then(Event::post(D, PostId(7), Ts(7), None, vec![A]));
    assert_eq!(mentioning(&part, A), vec![(5, B, 5), (7, D, 7)]);
    assert_eq!(mentioning(&part, D), vec![(5, B, 5)]);
    part.then(delete(B, 5)).then(delete(B, 5));
    assert_eq!(mentioning(&part, A), vec![(7, D, 7)]);
    assert_eq!(mentioning(&part, D), vec![]);
}

// Proves a post's deletion that reaches the mentioned user before the post (a later version arriving first) keeps the mention out, and a repeat of either changes nothing: the greatest version decides.
#[test]
fn a_mention_arriving_after_its_deletion_changes_nothing() {
    let mut part = Part::with(engagement_ctx());
    let msg = |live, version| Effect::MentionOf {
        user: A,
        author: B,
        post_id: PostId(version / 10 + 5),
        live,
        version: crate::Version(version),
        ts: Ts(5),
    };
    for m in [msg(false, 9), msg(true, 4), msg(false, 9), msg(true, 4)] {
        part.effect(&m);
        part.settle();
    }
    assert_eq!(mentioning(&part, A), vec![]);
    part.effect(&msg(true, 10));
    part.settle();
    assert_eq!(mentioning(&part, A), vec![(5, B, 6)]);
}
