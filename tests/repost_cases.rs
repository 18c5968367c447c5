//! Reposts on named scenarios: the reblog cases of a peer's own test suite
//! (Mastodon's feed manager, reblog and status-removal specs), translated,
//! and the contract's edge cases (a repost before its original, deletes in
//! either order, reposts of reposts, cycles, self-reposts, double reposts,
//! unfollows and follows of reposters). Each runs on two partitions and
//! checks every view of every user, in every placement mode, against the
//! oracle, and states the entry it expects in plain terms.
//!
//! Where Mastodon and feedlog differ (docs/semantics.md, "The timeline"): Mastodon drops a
//! reblog whose original (or an earlier reblog) is among the newest 40 items
//! of a feed, lets a post appear twice once that window has passed, keeps
//! "spare" reblogs only inside the window, and shows one reblogging account
//! per entry. feedlog's timeline is a function of the log: a post is one
//! entry however many appearances it has, at its newest appearance (or its
//! oldest, or without reposts), listing every followed reposter.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::scenario::{delete, follow, post, repost, unfollow, Run};
use feedlog::api::query::{Reader, RepostMode};
use feedlog::core::event::{Event, UserId};
use serde_json::{json, Value};

const JEFF: u64 = 1;
const ALICE: u64 = 2;
const BOB: u64 = 3;
const CAROL: u64 = 4;

fn plain(post_id: u64, author: u64, ts: u64) -> Value {
    json!({"post_id": post_id, "author": author, "ts": ts})
}

/// An entry placed at `ts` with reposts by `by` (user, repost id, ts), newest first.
fn reposted(post_id: u64, author: u64, ts: u64, post_ts: u64, by: &[(u64, u64, u64)]) -> Value {
    let by: Vec<Value> = by
        .iter()
        .map(|&(u, r, t)| json!({"user": u, "post_id": r, "ts": t}))
        .collect();
    json!({"post_id": post_id, "author": author, "ts": ts, "post_ts": post_ts,
        "reposted_by": by, "reposters": by.len()})
}

// Mastodon "returns false for reblog by followee", "saves reblogs of unseen statuses": bob follows alice; jeff posts; alice reposts it: bob's timeline has jeff's post once, at the repost's time, reposted by alice.
#[test]
fn a_repost_by_a_followee_shows_the_original() {
    let r = Run::new(
        CAROL,
        &[&[
            follow(BOB, ALICE, 1),
            post(JEFF, 10, 5),
            repost(ALICE, 20, (JEFF, 10), 7),
        ]],
    );
    let want = vec![reposted(10, JEFF, 7, 5, &[(ALICE, 20, 7)])];
    assert_eq!(r.timeline(BOB, RepostMode::Newest), want);
    assert_eq!(r.timeline(BOB, RepostMode::First), want);
    assert!(r.timeline(BOB, RepostMode::None).is_empty());
    assert_eq!(
        r.posts(ALICE),
        vec![
            json!({"post_id": 20, "author": ALICE, "ts": 7, "repost_of": {"author": JEFF, "post_id": 10}})
        ]
    );
    assert_eq!(
        r.posts(JEFF),
        vec![json!({"post_id": 10, "author": JEFF, "ts": 5, "reposts": 1, "likes": 0})]
    );
}

// Mastodon "does not save a new reblog of a recent status" (and "saves a new reblog of an old status"): bob follows jeff and alice; jeff posts X (then other posts); alice reposts X: one entry, moved up to the repost (first: at X's time), listing alice — never twice, whatever lies between.
#[test]
fn a_repost_of_a_followed_post_is_one_entry_moved_up() {
    let r = Run::new(
        CAROL,
        &[&[
            follow(BOB, JEFF, 1),
            follow(BOB, ALICE, 1),
            post(JEFF, 10, 5),
            post(JEFF, 11, 6),
            post(JEFF, 12, 7),
            repost(ALICE, 20, (JEFF, 10), 9),
        ]],
    );
    assert_eq!(
        r.timeline(BOB, RepostMode::Newest),
        vec![
            reposted(10, JEFF, 9, 5, &[(ALICE, 20, 9)]),
            plain(12, JEFF, 7),
            plain(11, JEFF, 6),
        ]
    );
    assert_eq!(
        r.timeline(BOB, RepostMode::First),
        vec![
            plain(12, JEFF, 7),
            plain(11, JEFF, 6),
            reposted(10, JEFF, 5, 5, &[(ALICE, 20, 9)]),
        ]
    );
    assert_eq!(
        r.timeline(BOB, RepostMode::None),
        vec![plain(12, JEFF, 7), plain(11, JEFF, 6), plain(10, JEFF, 5)]
    );
}

// Mastodon "does not save a new reblog of a recently-reblogged status", "...multiply-reblogged-then-unreblogged", "leaves a multiply-reblogged status if another reblog was in feed": alice and carol repost X; bob follows both: one entry listing both, newest first; taking reposts back moves it down, then removes it.
#[test]
fn reposts_by_several_followees_are_listed_and_taken_back_one_by_one() {
    let first: &[Event] = &[
        follow(BOB, ALICE, 1),
        follow(BOB, CAROL, 1),
        post(JEFF, 10, 5),
        repost(ALICE, 20, (JEFF, 10), 7),
        repost(CAROL, 30, (JEFF, 10), 8),
    ];
    let r = Run::new(CAROL, &[first]);
    assert_eq!(
        r.timeline(BOB, RepostMode::Newest),
        vec![reposted(10, JEFF, 8, 5, &[(CAROL, 30, 8), (ALICE, 20, 7)])]
    );
    let r = Run::new(CAROL, &[first, &[delete(CAROL, 30, 9)]]);
    assert_eq!(
        r.timeline(BOB, RepostMode::Newest),
        vec![reposted(10, JEFF, 7, 5, &[(ALICE, 20, 7)])]
    );
    let r = Run::new(
        CAROL,
        &[first, &[delete(CAROL, 30, 9), delete(ALICE, 20, 9)]],
    );
    assert!(r.timeline(BOB, RepostMode::Newest).is_empty());
}

// Mastodon "leaves a reblogged status if original was on feed" / "removes a reblogged status if it was only reblogged once": taking back the only repost leaves the post where its author is followed, at its own time, and removes it otherwise.
#[test]
fn taking_a_repost_back_leaves_the_original_where_its_author_is_followed() {
    let r = Run::new(
        CAROL,
        &[&[
            follow(BOB, JEFF, 1),
            follow(CAROL, ALICE, 1),
            follow(BOB, ALICE, 1),
            post(JEFF, 10, 5),
            repost(ALICE, 20, (JEFF, 10), 7),
            delete(ALICE, 20, 8),
        ]],
    );
    assert_eq!(
        r.timeline(BOB, RepostMode::Newest),
        vec![plain(10, JEFF, 5)]
    );
    assert!(r.timeline(CAROL, RepostMode::Newest).is_empty());
    assert_eq!(r.posts(JEFF)[0]["reposts"], 0);
}

// Mastodon "does not push when the given status's reblog is already inserted" (an original after its reblog): here the repost applied before its original exists shows once the original comes, and the original is the same entry.
#[test]
fn a_repost_applied_before_its_original_shows_once_the_original_comes() {
    let r = Run::new(
        CAROL,
        &[
            &[
                follow(BOB, JEFF, 1),
                follow(BOB, ALICE, 1),
                repost(ALICE, 20, (JEFF, 10), 7),
            ],
            &[post(JEFF, 10, 5)],
        ],
    );
    assert_eq!(
        r.timeline(BOB, RepostMode::Newest),
        vec![reposted(10, JEFF, 7, 5, &[(ALICE, 20, 7)])]
    );
}

// Mastodon remove-status spec ("removes status from ... home feeds"): deleting the original removes it and every repost of it everywhere (timelines, the reposter's posts and counters), in either order of arrival.
#[test]
fn deleting_the_original_removes_every_repost_in_any_order() {
    let before: &[Event] = &[
        follow(BOB, ALICE, 1),
        follow(CAROL, JEFF, 1),
        post(JEFF, 10, 5),
        repost(ALICE, 20, (JEFF, 10), 7),
    ];
    for batches in [
        vec![before, &[delete(JEFF, 10, 9)][..]],
        vec![&[delete(JEFF, 10, 3)][..], before],
    ] {
        let r = Run::new(CAROL, &batches);
        assert!(r.timeline(BOB, RepostMode::Newest).is_empty());
        assert!(r.timeline(CAROL, RepostMode::Newest).is_empty());
        assert!(r.posts(ALICE).is_empty());
        let c = r.reader().counters(UserId(ALICE)).unwrap();
        assert_eq!((c.posts, c.reposts), (0, 0));
    }
}

// Mastodon reblog-of-own-status (no spec; its code lets the owner's reblog in): a self-repost is an appearance of its author at the repost's time for followers; a post of one's own never enters one's own timeline, whoever reposts it.
#[test]
fn a_self_repost_moves_the_post_up_and_own_posts_stay_out() {
    let r = Run::new(
        CAROL,
        &[&[
            follow(BOB, ALICE, 1),
            follow(ALICE, BOB, 1),
            post(ALICE, 10, 5),
            repost(ALICE, 11, (ALICE, 10), 7),
            repost(BOB, 20, (ALICE, 10), 8),
        ]],
    );
    assert_eq!(
        r.timeline(BOB, RepostMode::Newest),
        vec![reposted(10, ALICE, 7, 5, &[(ALICE, 11, 7)])]
    );
    assert!(r.timeline(ALICE, RepostMode::Newest).is_empty());
}

// Mastodon reblog service ("a reblog of a reblog is a reblog of the original"): carol reposts alice's repost of jeff's post; bob follows carol: jeff's post, reposted by carol; a chain of 16 links still resolves, 17 or a cycle do not.
#[test]
fn a_repost_of_a_repost_reposts_the_original_up_to_sixteen_links() {
    let r = Run::new(
        CAROL,
        &[&[
            follow(BOB, CAROL, 1),
            post(JEFF, 10, 5),
            repost(ALICE, 20, (JEFF, 10), 7),
            repost(CAROL, 30, (ALICE, 20), 8),
        ]],
    );
    assert_eq!(
        r.timeline(BOB, RepostMode::Newest),
        vec![reposted(10, JEFF, 8, 5, &[(CAROL, 30, 8)])]
    );
    // alice's reposts 101..=116 each name the one before; 101 names the post.
    let chain = |links: u64| -> Vec<Event> {
        let mut v = vec![follow(BOB, CAROL, 1), post(JEFF, 10, 5)];
        v.push(repost(ALICE, 101, (JEFF, 10), 6));
        for i in 2..links {
            v.push(repost(ALICE, 100 + i, (ALICE, 100 + i - 1), 6));
        }
        v.push(repost(CAROL, 30, (ALICE, 100 + links - 1), 8));
        v
    };
    let r = Run::new(CAROL, &[&chain(16)]);
    assert_eq!(r.timeline(BOB, RepostMode::Newest).len(), 1, "16 links");
    let r = Run::new(CAROL, &[&chain(17)]);
    assert!(r.timeline(BOB, RepostMode::Newest).is_empty(), "17 links");
    let cycle = [
        follow(BOB, CAROL, 1),
        follow(BOB, ALICE, 1),
        repost(ALICE, 20, (CAROL, 30), 7),
        repost(CAROL, 30, (ALICE, 20), 8),
    ];
    let r = Run::new(CAROL, &[&cycle]);
    assert!(r.timeline(BOB, RepostMode::Newest).is_empty(), "a cycle");
}

// Mastodon reblog service ("reblogging twice returns the existing reblog"): two reposts of one post by one user are two appearances: the entry lists the user once, at the newer; taking one back leaves the other.
#[test]
fn a_double_repost_lists_its_user_once() {
    let both: &[Event] = &[
        follow(BOB, ALICE, 1),
        post(JEFF, 10, 5),
        repost(ALICE, 20, (JEFF, 10), 7),
        repost(ALICE, 21, (JEFF, 10), 9),
    ];
    let r = Run::new(CAROL, &[both]);
    assert_eq!(
        r.timeline(BOB, RepostMode::Newest),
        vec![reposted(10, JEFF, 9, 5, &[(ALICE, 21, 9)])]
    );
    assert_eq!(
        r.timeline(BOB, RepostMode::First),
        vec![reposted(10, JEFF, 7, 5, &[(ALICE, 21, 9)])]
    );
    let r = Run::new(CAROL, &[both, &[delete(ALICE, 21, 10)]]);
    assert_eq!(
        r.timeline(BOB, RepostMode::Newest),
        vec![reposted(10, JEFF, 7, 5, &[(ALICE, 20, 7)])]
    );
    assert_eq!(r.reader().counters(UserId(ALICE)).unwrap().reposts, 1);
}

// Mastodon unmerge on unfollow (no spec; its code promotes a spare reblog): unfollowing one reposter keeps the entry through the other, moved to that one's repost; a follow backfills the followee's reposts with their posts.
#[test]
fn unfollowing_a_reposter_keeps_the_others_and_a_follow_backfills_reposts() {
    let r = Run::new(
        CAROL,
        &[
            &[
                follow(BOB, ALICE, 1),
                follow(BOB, CAROL, 1),
                post(JEFF, 10, 5),
                repost(CAROL, 30, (JEFF, 10), 7),
                repost(ALICE, 20, (JEFF, 10), 8),
            ],
            &[unfollow(BOB, ALICE, 9)],
        ],
    );
    assert_eq!(
        r.timeline(BOB, RepostMode::Newest),
        vec![reposted(10, JEFF, 7, 5, &[(CAROL, 30, 7)])]
    );
    let r = Run::new(
        CAROL,
        &[
            &[post(JEFF, 10, 5), repost(ALICE, 20, (JEFF, 10), 7)],
            &[follow(BOB, ALICE, 9)],
        ],
    );
    assert_eq!(
        r.timeline(BOB, RepostMode::Newest),
        vec![reposted(10, JEFF, 7, 5, &[(ALICE, 20, 7)])]
    );
}

// Proves an inbox capped at one entry, with posts and reposts past it, pages the same entries as the oracle (the pull path aggregates reposts too).
#[test]
fn reposts_past_a_small_inbox_are_aggregated_by_the_pull_path() {
    let mut events = vec![
        follow(BOB, JEFF, 1),
        follow(BOB, ALICE, 1),
        follow(BOB, CAROL, 1),
    ];
    for i in 0..8 {
        events.push(post(JEFF, 10 + i, 2 + i));
        events.push(repost(ALICE, 40 + i, (JEFF, 10 + i / 2), 20 + i));
        events.push(repost(CAROL, 60 + i, (ALICE, 40 + i), 30 - i));
    }
    // check_all (in Run) compares every page of every mode with the oracle.
    let r = Run::with_cap(CAROL, &[&events], 1);
    assert_eq!(r.timeline(BOB, RepostMode::Newest).len(), 8);
}

// A first page with reposts that the partition holds is kept by the page cache and answered from it, equal to the page read in full.
#[test]
fn a_first_page_with_reposts_is_kept_and_answered_from_the_cache() {
    let r = Run::new(
        CAROL,
        &[&[
            follow(BOB, JEFF, 1),
            follow(BOB, ALICE, 1),
            post(JEFF, 10, 5),
            post(JEFF, 11, 6),
            repost(ALICE, 20, (JEFF, 10), 9),
        ]],
    );
    let reader = r.reader();
    let user = UserId(BOB);
    let store = r
        .processor
        .store(feedlog::core::partition::partition_for(user, 2));
    let keep = |reader: &Reader| {
        reader
            .first_page_encoded(user, 20, |p| {
                feedlog::api::http::kept_timeline_page(user, 20, p)
            })
            .unwrap()
            .expect("the partition holds the whole page: it is kept")
    };
    let first = keep(&reader);
    let hits = store.pages().hits_and_misses().0;
    assert_eq!(keep(&reader), first);
    assert_eq!(
        store.pages().hits_and_misses().0,
        hits + 1,
        "answered from the cache"
    );
    let (_, body) = feedlog::api::http::split_kept_page(&first);
    let kept: Value = serde_json::from_slice(&body).unwrap();
    let full = serde_json::to_value(reader.timeline(user, 20, None).unwrap()).unwrap();
    assert_eq!(kept, full);
    assert_eq!(
        kept["items"][0],
        reposted(10, JEFF, 9, 5, &[(ALICE, 20, 9)]),
        "the reposted post leads, listing alice"
    );
}
