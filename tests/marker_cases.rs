//! Read markers on named scenarios: the cases of a peer's own test suite
//! (Mastodon's markers request spec: a marker is created, then updated,
//! and both feeds answer), translated, and the edge cases of the unread
//! count and of catch-up (several devices, `force`, a follow, a mute and a
//! deletion moving the count with no new `seen`, the bound, catch-up past
//! the inbox cap). Each runs on two partitions and checks every view of
//! every user — the markers and the catch-up pages included — against the
//! oracle (`Run`), and states what it expects in plain terms.
//!
//! Where Mastodon and feedlog differ (docs/semantics.md, "Read markers"):
//! Mastodon's last write wins, so a second device that read less moves
//! the marker back (its `lock_version` only refuses a stale write with a
//! 409); feedlog keeps the greatest place, and moves it back only with
//! `force`. Mastodon counts no unread home entries; feedlog counts them
//! exactly, as the timeline reads now.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::scenario::{delete, follow, mute, post, Run};
use feedlog::api::query::{Markers, Modes, RepostMode};
use feedlog::core::event::{Event, Feed, Place, PostId, Ts, UserId};

const JEFF: u64 = 1;
const ALICE: u64 = 2;
const BOB: u64 = 3;

/// `user`'s `seen` of `feed` up to the entry (`ts`, `post_id`, `author`).
fn seen(
    user: u64,
    feed: Feed,
    (ts, post_id, author): (u64, u64, u64),
    force: bool,
    at: u64,
) -> Event {
    Event::Mark {
        user: UserId(user),
        ts: Ts(at),
        feed,
        read_up_to: Place {
            ts: Ts(ts),
            post_id: PostId(post_id),
            author: UserId(author),
        },
        force,
    }
}

fn markers(r: &Run, user: u64) -> Markers {
    r.reader()
        .markers(UserId(user), Modes::default(), 1000)
        .unwrap()
}

/// `user`'s home marker place (ts, post id, author) and unread count.
fn home(r: &Run, user: u64) -> (Option<(u64, u64, u64)>, Option<u64>) {
    let m = markers(r, user);
    let h = &m.feeds[0];
    assert_eq!(h.feed, "home");
    (h.read_up_to.map(|p| (p.ts, p.post_id, p.author)), h.unread)
}

/// Jeff follows Alice, who posts 10, 11 and 12 at times 10, 11 and 12.
fn three_posts() -> Vec<Event> {
    vec![
        follow(JEFF, ALICE, 1),
        post(ALICE, 10, 10),
        post(ALICE, 11, 11),
        post(ALICE, 12, 12),
    ]
}

// Mastodon "creates a marker" and "returns markers": a first `seen` of each feed sets its marker, answered with when and where; home counts the entries above it, notifications the groups.
#[test]
fn a_first_seen_creates_the_marker_of_its_feed() {
    let mut log = three_posts();
    log.push(seen(JEFF, Feed::Home, (11, 11, ALICE), false, 20));
    log.push(seen(JEFF, Feed::Notifications, (5, 0, 0), false, 21));
    let r = Run::new(BOB, &[&log]);
    let m = markers(&r, JEFF);
    assert_eq!(home(&r, JEFF), (Some((11, 11, ALICE)), Some(1)));
    assert_eq!(m.feeds[0].since, Some(20));
    assert!(m.feeds[0].event.is_some());
    assert_eq!(m.feeds[1].feed, "notifications");
    assert_eq!(m.feeds[1].unread, Some(0));
    // Without a marker every entry is unread: Alice's timeline has none,
    // her notifications one (Jeff's follow).
    assert_eq!(home(&r, ALICE), (None, Some(0)));
    assert_eq!(markers(&r, ALICE).feeds[1].unread, Some(1));
}

// Mastodon "updates a marker": a later `seen` further up moves it, and the count falls to 0 at the top.
#[test]
fn a_seen_further_up_moves_the_marker_and_the_count_falls() {
    let mut log = three_posts();
    log.push(seen(JEFF, Feed::Home, (10, 10, ALICE), false, 20));
    let before = Run::new(BOB, &[&log]);
    assert_eq!(home(&before, JEFF).1, Some(2));
    log.push(seen(JEFF, Feed::Home, (12, 12, ALICE), false, 21));
    let after = Run::new(BOB, &[&log]);
    assert_eq!(home(&after, JEFF), (Some((12, 12, ALICE)), Some(0)));
}

// A second device that read less does not move the marker back (Mastodon's last write would); `force` does, and a later plain `seen` takes the greatest from there.
#[test]
fn one_device_cannot_move_another_back_unless_forced() {
    let mut log = three_posts();
    log.push(seen(JEFF, Feed::Home, (12, 12, ALICE), false, 20));
    log.push(seen(JEFF, Feed::Home, (10, 10, ALICE), false, 21));
    let r = Run::new(BOB, &[&log]);
    assert_eq!(home(&r, JEFF), (Some((12, 12, ALICE)), Some(0)));
    assert_eq!(markers(&r, JEFF).feeds[0].since, Some(20));
    log.push(seen(JEFF, Feed::Home, (10, 10, ALICE), true, 22));
    let r = Run::new(BOB, &[&log]);
    assert_eq!(home(&r, JEFF), (Some((10, 10, ALICE)), Some(2)));
    log.push(seen(JEFF, Feed::Home, (11, 11, ALICE), false, 23));
    let r = Run::new(BOB, &[&log]);
    assert_eq!(home(&r, JEFF), (Some((11, 11, ALICE)), Some(1)));
}

// The count is of the timeline as it reads now: a follow adds the newer posts of the followed, a mute takes the muted author's out, a deletion takes its post out — no new `seen` needed.
#[test]
fn the_count_follows_the_timeline_without_a_new_seen() {
    let mut log = three_posts();
    log.push(post(BOB, 30, 30));
    log.push(seen(JEFF, Feed::Home, (11, 11, ALICE), false, 20));
    let r = Run::new(BOB, &[&log]);
    assert_eq!(home(&r, JEFF).1, Some(1));
    log.push(follow(JEFF, BOB, 40));
    let r = Run::new(BOB, &[&log]);
    assert_eq!(home(&r, JEFF).1, Some(2));
    log.push(mute(JEFF, BOB, 41, None));
    let r = Run::new(BOB, &[&log]);
    assert_eq!(home(&r, JEFF).1, Some(1));
    log.push(delete(ALICE, 12, 42));
    let r = Run::new(BOB, &[&log]);
    assert_eq!(home(&r, JEFF).1, Some(0));
}

// A marker at an entry that is later deleted stays a place: the entries above it still count, none below.
#[test]
fn a_marker_at_a_deleted_entry_keeps_its_place() {
    let mut log = three_posts();
    log.push(seen(JEFF, Feed::Home, (11, 11, ALICE), false, 20));
    log.push(delete(ALICE, 11, 21));
    let r = Run::new(BOB, &[&log]);
    assert_eq!(home(&r, JEFF), (Some((11, 11, ALICE)), Some(1)));
}

// With the reader's inbox head kept (a first page read), the count comes from the head alone and equals the one a reader without heads walks to; a marker below every row of an inbox with a horizon is walked.
#[test]
fn the_head_counts_what_the_walk_counts() {
    let mut log = vec![follow(JEFF, ALICE, 1)];
    for p in 0..12 {
        log.push(post(ALICE, 100 + p, 100 + p));
    }
    log.push(seen(JEFF, Feed::Home, (104, 104, ALICE), false, 200));
    let r = Run::new(BOB, &[&log]);
    let reader = r.reader();
    reader.timeline(UserId(JEFF), 20, None).unwrap();
    let store = reader.store_of(UserId(JEFF)).unwrap();
    let before = store.heads().counts();
    assert_eq!(home(&r, JEFF).1, Some(7));
    assert_eq!(store.heads().counts(), before + 1, "answered from the head");
    let walked = reader
        .past_heads()
        .markers(UserId(JEFF), Modes::default(), 1000);
    assert_eq!(walked.unwrap().feeds[0].unread, Some(7));
    // An inbox of 3 with a horizon: the marker is below every row, so the
    // pull path's entries above it are walked, not guessed.
    let r = Run::with_cap(BOB, &[&log], 3);
    let reader = r.reader();
    reader.timeline(UserId(JEFF), 20, None).unwrap();
    assert_eq!(home(&r, JEFF).1, Some(7));
}

// The bound caps the work, never the truth: with max=1 two unread answer 1 and capped, with max=2 exactly 2.
#[test]
fn the_bound_says_capped() {
    let mut log = three_posts();
    log.push(seen(JEFF, Feed::Home, (10, 10, ALICE), false, 20));
    let r = Run::new(BOB, &[&log]);
    let at = |max| {
        let m = r
            .reader()
            .markers(UserId(JEFF), Modes::default(), max)
            .unwrap();
        (m.feeds[0].unread, m.feeds[0].capped)
    };
    assert_eq!(at(1), (Some(1), true));
    assert_eq!(at(2), (Some(2), false));
}

// Catch-up from the marker goes up oldest first, with no gap, past an inbox of 3 (through the pull path), and ends with an empty page at the top.
#[test]
fn catch_up_pages_oldest_first_past_the_inbox_cap() {
    let mut log = vec![follow(JEFF, ALICE, 1)];
    for p in 0..12 {
        log.push(post(ALICE, 100 + p, 100 + p));
    }
    log.push(seen(JEFF, Feed::Home, (102, 102, ALICE), false, 200));
    let r = Run::with_cap(BOB, &[&log], 3);
    let reader = r.reader();
    let (mut got, mut after) = (Vec::new(), "marker".to_string());
    loop {
        let page = reader
            .timeline_catch_up(UserId(JEFF), Modes::reposts(RepostMode::Newest), 4, &after)
            .unwrap();
        if page.items.is_empty() {
            break;
        }
        got.extend(page.items.iter().map(|i| i.post_id));
        after = page.prev_cursor.unwrap();
    }
    assert_eq!(got, (103..112).collect::<Vec<_>>());
}
