//! Likes on one partition, message by message: each (liker, original)
//! decided by the latest version, whichever id it named and whenever the
//! original came or went.

use super::super::testkit::*;
use super::{count, given, likes};
use crate::Effect;

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
    let mut part = Part::with(engagement_ctx());
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
    let mut part = Part::with(engagement_ctx());
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
    let mut part = Part::with(engagement_ctx());
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
    let mut part = Part::with(engagement_ctx());
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

// Mastodon's counts and the viewer's maps (spec/models/status_spec.rb:
// `#reblogs_count`, `#favourites_count`, `.favourites_map`,
// `.reblogs_map`), translated. Where feedlog differs: an original deleted
// keeps its reposts' records (a repost that is not live), not destroying
// them; an unlike is an event in the liker's log, not a row destroyed.
// `#replies_count` waits for replies.

/// (A's post 1's likes, its reposts).
fn counts_of(part: &Part) -> (u64, u64) {
    let post = (A, PostId(1));
    (
        count(&part.kv, post).unwrap(),
        crate::repost::count(&part.kv, post).unwrap(),
    )
}

// Proves "#reblogs_count is the number of reblogs" (one by another user, one by the author) and "is decremented when reblog is removed".
#[test]
fn mastodon_reblogs_count_is_the_number_of_live_reblogs() {
    let mut part = Part::with(engagement_ctx());
    part.then(post(A, 1)).then(repost(B, 10, (A, 1)));
    part.then(repost(A, 11, (A, 1)));
    assert_eq!(counts_of(&part).1, 2, "B's and A's own");
    part.then(delete(B, 10));
    assert_eq!(counts_of(&part).1, 1, "a reblog removed");
}

// Proves "#reblogs_count does not fail when original is deleted before reblog": the original deleted, no repost of it is live and the reposter's flag goes.
#[test]
fn mastodon_reblogs_of_a_deleted_original_stop_counting() {
    let mut part = Part::with(engagement_ctx());
    part.then(post(A, 1)).then(repost(B, 10, (A, 1)));
    assert!(super::reposted(&part.kv, B, (A, PostId(1))).unwrap());
    part.then(delete(A, 1));
    assert_eq!(counts_of(&part), (0, 0));
    assert!(!super::reposted(&part.kv, B, (A, PostId(1))).unwrap());
}

// Proves "#favourites_count is the number of favorites" (one by another user, one by the author) and "is decremented when favourite is removed".
#[test]
fn mastodon_favourites_count_is_the_number_of_live_likes() {
    let mut part = Part::with(engagement_ctx());
    part.then(post(A, 1)).then(like(B, (A, 1), true));
    part.then(like(A, (A, 1), true));
    assert_eq!(counts_of(&part).0, 2, "B's and A's own");
    part.then(like(B, (A, 1), false));
    assert_eq!(counts_of(&part).0, 1, "a favourite removed");
}

// Proves ".favourites_map" and ".reblogs_map contain true value" for the viewer who liked or reblogged, and false for one who did neither.
#[test]
fn mastodon_favourites_and_reblogs_maps_are_the_viewers_flags() {
    let mut part = Part::with(engagement_ctx());
    part.then(post(A, 1)).then(like(B, (A, 1), true));
    part.then(repost(C, 10, (A, 1)));
    let root = (A, PostId(1));
    assert_eq!(
        super::flags(&part.kv, B, &[root]).unwrap(),
        vec![(true, false)]
    );
    assert_eq!(
        super::flags(&part.kv, C, &[root]).unwrap(),
        vec![(false, true)]
    );
    assert_eq!(
        super::flags(&part.kv, D, &[root]).unwrap(),
        vec![(false, false)]
    );
}
