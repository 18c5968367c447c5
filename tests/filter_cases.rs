//! Blocks, mutes and hidden reposts on named scenarios: the block and mute
//! cases of a peer's own test suite (Mastodon's feed manager `filter?`
//! spec, its block, unblock, mute and unmute services), translated, and the
//! contract's edge cases (arrival orders, follows during a block, a mute's
//! end by log time, deep pages past a small inbox). Each runs on two
//! partitions and checks every view of every user, in every placement mode
//! and in pages of 2, against the oracle, and states what it expects in
//! plain terms.
//!
//! Where Mastodon and feedlog differ (docs/semantics.md, "Blocks and mutes"): Mastodon
//! filters a status when it is pushed, so a mute or block hides only what
//! arrives afterwards plus what a background job removes from the newest
//! items of a feed, and an unmute merges back only recent statuses; a
//! "reblogs: false" follow is not retroactive. feedlog filters when a page
//! is read, from the per-pair state the log decides: everything goes at
//! once, comes back exactly on an unmute (deep pages included), and arrival
//! order changes nothing. As in Mastodon, a block removes the follows both
//! ways and an unblock restores none.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::scenario::{filter, follow, mute, post, repost, Run};
use feedlog::api::query::{Reader, RepostMode};
use feedlog::core::codec::Format;
use feedlog::core::event::{Event, Ts, UserId};
use feedlog::ingest::produce::Producer;
use feedlog::state::datadir::DataDir;
use feedlog::task::embedded::{Processor, ProcessorConfig};
use serde_json::json;

const JEFF: u64 = 1;
const ALICE: u64 = 2;
const BOB: u64 = 3;
const CAROL: u64 = 4;

/// The (post id, author) of each entry of `user`'s timeline, newest first.
fn entries(r: &Run, user: u64) -> Vec<(u64, u64)> {
    r.timeline(user, RepostMode::Newest)
        .iter()
        .map(|e| {
            (
                e["post_id"].as_u64().unwrap(),
                e["author"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `user`'s followees (ids).
fn followees(r: &Run, user: u64) -> Vec<u64> {
    let page = r.reader().followees(UserId(user), 100, None).unwrap();
    page.items.iter().map(|i| i.user).collect()
}

fn seen(user: u64, ts: u64) -> Event {
    Event::Seen {
        user: UserId(user),
        ts: Ts(ts),
    }
}

// Mastodon "returns true for post from blocked account" and "... from account who blocked me": bob follows alice, who posts; a block either way empties bob's timeline and voids the follow (bob follows nobody, alice has no follower).
#[test]
fn a_block_either_way_hides_the_posts_and_voids_the_follow() {
    for blocker in [BOB, ALICE] {
        let other = if blocker == BOB { ALICE } else { BOB };
        let before: &[Event] = &[follow(BOB, ALICE, 1), post(ALICE, 10, 5)];
        let r = Run::new(CAROL, &[before]);
        assert_eq!(entries(&r, BOB), vec![(10, ALICE)]);
        let r = Run::new(CAROL, &[before, &[filter("block", blocker, other, 8)]]);
        assert!(entries(&r, BOB).is_empty(), "blocked by {blocker}");
        assert!(followees(&r, BOB).is_empty());
        let counters = r.reader().counters(UserId(ALICE)).unwrap();
        assert_eq!(counters.followers, 0);
    }
}

// Mastodon "returns true for reblog by followee of blocked account", "... of muted account" and "... of someone who is blocking recipient": bob follows alice, who reposts jeff's post; a block of jeff, a mute of jeff or jeff's block of bob hides the entry, and alice's own views do not change.
#[test]
fn a_repost_of_a_blocked_or_muted_author_is_hidden() {
    let base: &[Event] = &[
        follow(BOB, ALICE, 1),
        post(JEFF, 10, 5),
        repost(ALICE, 20, (JEFF, 10), 7),
    ];
    let shown = Run::new(CAROL, &[base]);
    assert_eq!(entries(&shown, BOB), vec![(10, JEFF)]);
    for cut in [
        filter("block", BOB, JEFF, 8),
        mute(BOB, JEFF, 8, None),
        filter("block", JEFF, BOB, 8),
    ] {
        let r = Run::new(CAROL, &[base, std::slice::from_ref(&cut)]);
        assert!(entries(&r, BOB).is_empty(), "{cut:?}");
        assert_eq!(r.posts(ALICE), shown.posts(ALICE), "{cut:?}");
        assert_eq!(followees(&r, BOB), vec![ALICE]);
    }
}

// Mastodon "returns true for reblog from account with reblogs disabled", made retroactive both ways: bob hides alice's reposts, and the repost of jeff's post goes while alice's own post stays; showing them brings it back where it was.
#[test]
fn hidden_reposts_go_and_come_back_while_own_posts_stay() {
    let base: &[Event] = &[
        follow(BOB, ALICE, 1),
        post(JEFF, 10, 5),
        post(ALICE, 11, 6),
        repost(ALICE, 20, (JEFF, 10), 7),
    ];
    let r = Run::new(CAROL, &[base]);
    let all = vec![(10, JEFF), (11, ALICE)];
    assert_eq!(entries(&r, BOB), all);
    let hide = filter("hide_reposts", BOB, ALICE, 8);
    let r = Run::new(CAROL, &[base, std::slice::from_ref(&hide)]);
    assert_eq!(entries(&r, BOB), vec![(11, ALICE)]);
    let show = filter("show_reposts", BOB, ALICE, 9);
    let r = Run::new(CAROL, &[base, &[hide], &[show]]);
    assert_eq!(entries(&r, BOB), all);
}

// Mastodon's MuteService clears the muted account's statuses from the home feed, and UnmuteService merges recent ones back: bob follows alice and carol past an inbox of 2; muting alice leaves carol's posts only, in full pages at every depth, and the unmute brings every entry back exactly.
#[test]
fn a_mute_hides_everything_by_the_muted_and_the_unmute_restores_deep_pages() {
    let mut base = vec![follow(BOB, ALICE, 1), follow(BOB, CAROL, 1)];
    for i in 0..12 {
        base.push(post(ALICE, 100 + i, 10 + 2 * i));
        base.push(post(CAROL, 200 + i, 11 + 2 * i));
    }
    let r = Run::with_cap(CAROL, &[&base], 2);
    assert_eq!(entries(&r, BOB).len(), 24);
    let r = Run::with_cap(CAROL, &[&base, &[mute(BOB, ALICE, 40, None)]], 2);
    let left = entries(&r, BOB);
    assert_eq!(left.len(), 12);
    assert!(left.iter().all(|&(_, a)| a == CAROL));
    // Pages of 5: full until the last.
    let page = r.reader().timeline(UserId(BOB), 5, None).unwrap();
    assert_eq!(page.items.len(), 5);
    let unmute = filter("unmute", BOB, ALICE, 41);
    let back = Run::with_cap(CAROL, &[&base, &[mute(BOB, ALICE, 40, None)], &[unmute]], 2);
    assert_eq!(entries(&back, BOB).len(), 24);
}

// A mute with an end (Mastodon's mute duration) hides until the muting user's partition's clock reaches it: a later event there brings the posts back, and the mute stays listed (with its end, no longer in force) until an unmute.
#[test]
fn a_timed_mute_ends_with_the_partition_clock() {
    let base: &[Event] = &[
        follow(BOB, ALICE, 1),
        post(ALICE, 10, 5),
        mute(BOB, ALICE, 6, Some(50)),
    ];
    let r = Run::new(CAROL, &[base]);
    assert!(entries(&r, BOB).is_empty());
    let mutes = r.reader().mutes(UserId(BOB), 10, None).unwrap();
    assert_eq!(
        serde_json::to_value(&mutes.items).unwrap(),
        json!([{"user": ALICE, "since": 6, "until": 50, "in_force": true}])
    );
    let r = Run::new(CAROL, &[base, &[seen(BOB, 50)]]);
    assert_eq!(entries(&r, BOB), vec![(10, ALICE)]);
    let mutes = r.reader().mutes(UserId(BOB), 10, None).unwrap();
    assert_eq!(
        serde_json::to_value(&mutes.items).unwrap(),
        json!([{"user": ALICE, "since": 6, "until": 50, "in_force": false}])
    );
}

// Mastodon's BlockService unfollows both ways and UnblockService restores nothing: after bob blocks alice and unblocks her, neither follows the other; bob's new follow (made after the unblock) counts and brings alice's posts back.
#[test]
fn an_unblock_restores_no_follow_and_a_new_follow_counts() {
    let base: &[Event] = &[
        follow(BOB, ALICE, 1),
        follow(ALICE, BOB, 1),
        post(ALICE, 10, 2),
        post(BOB, 11, 3),
        filter("block", BOB, ALICE, 5),
        filter("unblock", BOB, ALICE, 6),
    ];
    let r = Run::new(CAROL, &[base]);
    assert!(followees(&r, BOB).is_empty());
    assert!(followees(&r, ALICE).is_empty());
    assert!(entries(&r, BOB).is_empty());
    let blocks = r.reader().blocks(UserId(BOB), 10, None).unwrap();
    assert!(blocks.items.is_empty());
    // A follow while the old (void) follow stands revives it from its time.
    let r = Run::new(CAROL, &[base, &[follow(BOB, ALICE, 7)]]);
    assert_eq!(followees(&r, BOB), vec![ALICE]);
    assert_eq!(entries(&r, BOB), vec![(10, ALICE)]);
    let followers = r.reader().followers(UserId(ALICE), 10, None).unwrap();
    assert_eq!(
        serde_json::to_value(&followers.items).unwrap(),
        json!([{"user": BOB, "ts": 7}])
    );
}

// Blocks and follows live in two partitions: a follow made during alice's block of bob is void whether it is applied before or after the block, before and after the unblock; only a follow after the unblock counts.
#[test]
fn a_follow_during_a_block_is_void_in_any_arrival_order() {
    let block = filter("block", ALICE, BOB, 10);
    let during = follow(BOB, ALICE, 12);
    let unblock = filter("unblock", ALICE, BOB, 15);
    let orders: [&[&[Event]]; 3] = [
        &[
            &[post(ALICE, 9, 1)],
            std::slice::from_ref(&block),
            std::slice::from_ref(&during),
            std::slice::from_ref(&unblock),
        ],
        &[
            &[post(ALICE, 9, 1)],
            std::slice::from_ref(&during),
            std::slice::from_ref(&block),
            std::slice::from_ref(&unblock),
        ],
        &[
            &[post(ALICE, 9, 1)],
            &[unblock.clone(), during.clone()],
            std::slice::from_ref(&block),
        ],
    ];
    for batches in orders {
        let r = Run::new(CAROL, batches);
        assert!(followees(&r, BOB).is_empty(), "{batches:?}");
        assert!(entries(&r, BOB).is_empty());
    }
    let r = Run::new(
        CAROL,
        &[
            &[post(ALICE, 9, 1), block, during, unblock],
            &[follow(BOB, ALICE, 16)],
        ],
    );
    assert_eq!(followees(&r, BOB), vec![ALICE]);
    assert_eq!(entries(&r, BOB), vec![(9, ALICE)]);
}

// A delivery that arrives after the mute that should stop it never shows, and one delivered before it goes: the order of the post and the mute in the log changes nothing.
#[test]
fn a_mute_stops_deliveries_before_and_after_it() {
    for batches in [
        [
            &[follow(BOB, ALICE, 1), mute(BOB, ALICE, 2, None)][..],
            &[post(ALICE, 10, 3)][..],
        ],
        [
            &[follow(BOB, ALICE, 1), post(ALICE, 10, 3)][..],
            &[mute(BOB, ALICE, 2, None)][..],
        ],
    ] {
        let r = Run::new(CAROL, &batches);
        assert!(entries(&r, BOB).is_empty(), "{batches:?}");
        assert_eq!(followees(&r, BOB), vec![ALICE]);
    }
}

// A block works both ways for reposts too: jeff, followed by both, reposts alice's post and bob's; after bob blocks alice, bob does not see the repost of alice's post, and alice does not see the repost of bob's.
#[test]
fn blocked_users_do_not_see_reposts_of_each_other() {
    let base: &[Event] = &[
        follow(BOB, JEFF, 1),
        follow(ALICE, JEFF, 1),
        post(ALICE, 10, 2),
        post(BOB, 11, 3),
        repost(JEFF, 20, (ALICE, 10), 4),
        repost(JEFF, 21, (BOB, 11), 5),
    ];
    let r = Run::new(CAROL, &[base]);
    assert_eq!(entries(&r, BOB), vec![(10, ALICE)]);
    assert_eq!(entries(&r, ALICE), vec![(11, BOB)]);
    let r = Run::new(CAROL, &[base, &[filter("block", BOB, ALICE, 6)]]);
    assert!(entries(&r, BOB).is_empty());
    assert!(entries(&r, ALICE).is_empty());
    assert_eq!(entries(&r, CAROL), Vec::<(u64, u64)>::new());
}

// A first page kept by the page cache is dropped by the mute that changes it: the next read of the same page, from the same running store, leaves the muted author out (and is kept in turn), while a reader with a mute that ends by log time is never kept.
#[test]
fn a_kept_first_page_is_dropped_by_a_mute() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = DataDir::create_or_open(tmp.path(), Some(2)).unwrap();
    let cfg = ProcessorConfig {
        sync: false,
        cache_bytes: 1 << 20,
        kept: feedlog::state::Kept::DEFAULT,
        ..ProcessorConfig::default()
    };
    let processor = Processor::open(&dir, cfg).unwrap();
    let apply = |events: &[Event]| {
        let mut producer = Producer::new(&dir).unwrap();
        for e in events {
            producer.event(e, Format::Json).unwrap();
        }
        producer.finish().unwrap();
        drop(producer);
        processor
            .run(&feedlog::task::Shutdown::new(), true)
            .unwrap();
    };
    apply(&[
        follow(BOB, ALICE, 1),
        follow(BOB, JEFF, 1),
        post(ALICE, 10, 2),
        post(JEFF, 11, 3),
    ]);
    let reader = feedlog::ops::serve::reader_of(&processor);
    let user = UserId(BOB);
    let kept = |reader: &Reader| {
        reader
            .first_page_encoded(user, 20, |p| {
                feedlog::api::http::kept_timeline_page(user, 20, p)
            })
            .unwrap()
    };
    let first = kept(&reader).expect("a page the inbox holds is kept");
    assert_eq!(kept(&reader), Some(first), "and answered again");
    apply(&[mute(BOB, JEFF, 4, None)]);
    let muted = kept(&reader).expect("a filtered page the inbox holds is kept too");
    let text = String::from_utf8_lossy(&muted).to_string();
    assert!(
        text.contains(r#""post_id":10"#) && !text.contains(r#""post_id":11"#),
        "{text}"
    );
    // A mute that ends makes the page depend on the clock: never kept.
    apply(&[mute(BOB, CAROL, 5, Some(100))]);
    assert!(
        kept(&reader).is_none(),
        "a reader with a mute that ends is read in full"
    );
    let page = serde_json::to_value(reader.timeline(user, 20, None).unwrap().items).unwrap();
    assert_eq!(page, json!([{"post_id": 10, "author": ALICE, "ts": 2}]));
}
