//! Notifications on named scenarios: the cases of a peer's suite
//! (Mastodon's grouped notifications request spec: five likes of one post
//! make one group; `types` keeps kinds), translated, and the edges of the
//! grouping rule (a gap of exactly 12 hours joins, one millisecond more
//! splits; the 51st item starts a group), undos, deletes, blocks and
//! mutes, a late like, a reply to a repost's id, mentions (a reply that
//! mentions is one item), and the unread count of the notifications
//! marker. Each runs on two partitions and checks every
//! view of every user — the notifications pages included — against the
//! oracle (`Run`), and states what it expects in plain terms.
//!
//! Where Mastodon and feedlog differ (docs/semantics.md, "Notifications"):
//! Mastodon groups by an hour bucket kept in a Redis key that expires 12
//! hours after its last item, so the same acts group differently by the
//! order and hour they were processed in; feedlog's groups are a function
//! of the acts' own times.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::scenario::{delete, filter, follow, mute, post, repost, unfollow, Run};
use feedlog::api::query::{Modes, NotificationGroup, NotificationKind};
use feedlog::core::event::{Event, Feed, FilterChange, Place, PostId, Ts, UserId};

const ALICE: u64 = 1;
const HOUR: u64 = 60 * 60 * 1000;

fn like(user: u64, (author, post_id): (u64, u64), liked: bool, ts: u64) -> Event {
    Event::Like {
        user: UserId(user),
        author: UserId(author),
        post_id: PostId(post_id),
        liked,
        ts: Ts(ts),
    }
}

/// `a` posts `p` at `ts`, a reply to post `to` (author, id).
fn reply(a: u64, p: u64, to: (u64, u64), ts: u64) -> Event {
    let to = Some((UserId(to.0), PostId(to.1)));
    Event::post(UserId(a), PostId(p), Ts(ts), to, Vec::new())
}

/// `user`'s notifications, all on one page (`grouped`, of `types`).
fn notes(
    r: &Run,
    user: u64,
    grouped: bool,
    types: Option<&[NotificationKind]>,
) -> Vec<NotificationGroup> {
    let page = r
        .reader()
        .notifications(UserId(user), (1000, None), grouped, types)
        .unwrap();
    assert!(page.next_cursor.is_none());
    page.items
}

/// Each group as (kind, count, newest actors).
fn shape(groups: &[NotificationGroup]) -> Vec<(&'static str, u64, Vec<u64>)> {
    groups
        .iter()
        .map(|g| (g.kind, g.count, g.actors.clone()))
        .collect()
}

// Mastodon "with grouped notifications": five users liking one post make one group naming them newest first, and a follow is a group of its own kind.
#[test]
fn five_likes_of_one_post_make_one_group() {
    let mut log = vec![post(ALICE, 10, 1_000)];
    for u in 2..=6 {
        log.push(like(u, (ALICE, 10), true, 1_000 + u));
    }
    log.push(follow(7, ALICE, 2_000));
    let r = Run::new(8, &[&log]);
    let got = notes(&r, ALICE, true, None);
    assert_eq!(
        shape(&got),
        vec![("follow", 1, vec![7]), ("like", 5, vec![6, 5, 4, 3, 2])]
    );
    assert_eq!(got[1].oldest_ts, 1_002);
    assert_eq!(notes(&r, ALICE, false, None).len(), 6);
}

// `explain=1` names every act of a group, newest first, with the event that made it: a like undone and made again is explained by the like that counts now, a follow by the follow event; the grouped answer equals the oracle's, positions included.
#[test]
fn explain_names_each_act_and_the_event_that_made_it() {
    let log = vec![
        post(ALICE, 10, 1_000),
        like(2, (ALICE, 10), true, 1_001),
        like(3, (ALICE, 10), true, 1_002),
        like(2, (ALICE, 10), false, 1_003),
        like(2, (ALICE, 10), true, 1_004),
        follow(4, ALICE, 1_005),
    ];
    let r = Run::new(5, &[&log]);
    let page = r
        .reader()
        .notifications_with(UserId(ALICE), (10, None), (true, None), true)
        .unwrap();
    let got = serde_json::to_value(&page.items).unwrap();
    let want = r.oracle.notifications_explained(ALICE, (true, None), true);
    assert_eq!(got, serde_json::Value::from(want));
    let likes = page.items[1].why.as_ref().unwrap();
    let acts: Vec<(u64, u64)> = likes.iter().map(|a| (a.actor, a.ts)).collect();
    assert_eq!(acts, vec![(2, 1_004), (3, 1_002)], "the relike decides");
    assert!(likes.iter().all(|a| a.event.is_some()));
    let follow = page.items[0].why.as_ref().unwrap()[0].event.unwrap();
    assert_eq!(
        follow.partition,
        feedlog::core::partition::partition_for(UserId(4), 2)
    );
}

// Mastodon's `types[]`: kinds are kept before grouping, so leaving follows out leaves the likes' group whole.
#[test]
fn types_keep_only_the_kinds_asked_for() {
    let log = vec![
        post(ALICE, 10, 1_000),
        like(2, (ALICE, 10), true, 1_001),
        follow(3, ALICE, 1_002),
        reply(4, 40, (ALICE, 10), 1_003),
    ];
    let r = Run::new(5, &[&log]);
    let likes = notes(&r, ALICE, true, Some(&[NotificationKind::Like]));
    assert_eq!(shape(&likes), vec![("like", 1, vec![2])]);
    let replies = notes(&r, ALICE, true, Some(&[NotificationKind::Reply]));
    assert_eq!(shape(&replies), vec![("reply", 1, vec![4])]);
    assert_eq!(
        replies[0].reply.map(|p| (p.author, p.post_id)),
        Some((4, 40))
    );
    assert_eq!(
        replies[0].post.map(|p| (p.author, p.post_id)),
        Some((ALICE, 10))
    );
}

// A gap of exactly 12 hours keeps two likes in one group; one millisecond more starts a new group, whichever order the likes came in.
#[test]
fn a_gap_of_twelve_hours_joins_and_one_ms_more_splits() {
    let log = vec![
        post(ALICE, 10, 1_000),
        post(ALICE, 11, 1_000),
        like(2, (ALICE, 10), true, 2_000 + 12 * HOUR),
        like(3, (ALICE, 10), true, 2_000),
        like(2, (ALICE, 11), true, 2_001 + 12 * HOUR),
        like(3, (ALICE, 11), true, 2_000),
    ];
    let r = Run::new(4, &[&log]);
    let got = notes(&r, ALICE, true, None);
    let posts: Vec<(u64, u64)> = got
        .iter()
        .map(|g| (g.post.unwrap().post_id, g.count))
        .collect();
    assert_eq!(posts, vec![(11, 1), (10, 2), (11, 1)]);
}

// The 51st like of a post starts a new group: a group holds 50 at most, counted from the oldest.
#[test]
fn fifty_items_fill_a_group_and_the_next_starts_one() {
    let mut log = vec![post(ALICE, 10, 1_000)];
    for u in 2..=52 {
        log.push(like(u, (ALICE, 10), true, 1_000 + u));
    }
    let r = Run::new(53, &[&log]);
    let got = notes(&r, ALICE, true, None);
    let counts: Vec<u64> = got.iter().map(|g| g.count).collect();
    assert_eq!(counts, vec![1, 50]);
    assert_eq!(got[0].actors, vec![52]);
    assert_eq!(got[1].actors.len(), 10);
}

// An unlike, an unfollow, a deleted reply and a deleted post take their items away; a like that arrives late lands at its own time; acts on a post not posted yet are no items until it is.
#[test]
fn undone_and_deleted_acts_leave_and_a_late_like_lands_in_place() {
    let first = vec![
        post(ALICE, 10, 1_000),
        post(ALICE, 11, 1_000),
        like(2, (ALICE, 10), true, 1_001),
        like(3, (ALICE, 10), true, 1_002),
        follow(4, ALICE, 1_003),
        reply(5, 50, (ALICE, 10), 1_004),
        like(6, (ALICE, 11), true, 1_005),
    ];
    let undo = vec![
        like(3, (ALICE, 10), false, 1_010),
        unfollow(4, ALICE, 1_011),
        delete(5, 50, 1_012),
        delete(ALICE, 11, 1_013),
        like(7, (ALICE, 10), true, 900),
        // Acts on a post not posted yet wait for it: no item.
        like(2, (ALICE, 12), true, 1_014),
        repost(3, 30, (ALICE, 12), 1_015),
        reply(6, 60, (ALICE, 12), 1_016),
    ];
    let r = Run::new(8, &[&first, &undo]);
    let got = notes(&r, ALICE, true, None);
    assert_eq!(shape(&got), vec![("like", 2, vec![2, 7])]);
    assert_eq!((got[0].oldest_ts, got[0].newest_ts), (900, 1_001));
    let late = vec![post(ALICE, 12, 1_017)];
    let r = Run::new(8, &[&first, &undo, &late]);
    let got = shape(&notes(&r, ALICE, true, None));
    let want = vec![
        ("reply", 1, vec![6]),
        ("repost", 1, vec![3]),
        ("like", 1, vec![2]),
        ("like", 2, vec![2, 7]),
    ];
    assert_eq!(got, want);
}

// A block either way and a mute hide the actor's items when read (and their groups shrink); unblocking and unmuting bring them back.
#[test]
fn blocks_and_mutes_hide_items_reversibly() {
    let base = vec![
        post(ALICE, 10, 1_000),
        like(2, (ALICE, 10), true, 1_001),
        like(3, (ALICE, 10), true, 1_002),
        like(4, (ALICE, 10), true, 1_003),
    ];
    let filters = vec![
        mute(ALICE, 2, 1_010, None),
        filter("block", 3, ALICE, 1_011),
    ];
    let r = Run::new(5, &[&base, &filters]);
    assert_eq!(
        shape(&notes(&r, ALICE, true, None)),
        vec![("like", 1, vec![4])]
    );
    let undo = vec![
        filter("unmute", ALICE, 2, 1_020),
        filter("unblock", 3, ALICE, 1_021),
    ];
    let r = Run::new(5, &[&base, &filters, &undo]);
    let back = shape(&notes(&r, ALICE, true, None));
    assert_eq!(back, vec![("like", 3, vec![4, 3, 2])]);
}

// A mute with `"notifications": false` hides the muted user from the timeline only: their likes still notify; a plain mute after it hides them again, and unmuting with the keeping mute on brings nothing new.
#[test]
fn a_mute_can_keep_notifications() {
    let mute_keeping = Event::Filter {
        user: UserId(ALICE),
        target: UserId(2),
        change: FilterChange::MuteKeepingNotifications { until: None },
        ts: Ts(1_010),
    };
    let base = vec![
        follow(ALICE, 2, 900),
        post(ALICE, 10, 1_000),
        post(2, 20, 1_001),
        like(2, (ALICE, 10), true, 1_002),
    ];
    let r = Run::new(3, &[&base, std::slice::from_ref(&mute_keeping)]);
    assert_eq!(
        shape(&notes(&r, ALICE, true, None)),
        vec![("like", 1, vec![2])]
    );
    let home = r.reader().timeline(UserId(ALICE), 10, None).unwrap();
    assert!(home.items.is_empty(), "muted in the timeline");
    let plain = vec![mute(ALICE, 2, 1_020, None)];
    let r = Run::new(3, &[&base, &[mute_keeping], &plain]);
    assert!(notes(&r, ALICE, true, None).is_empty());
}

// A like and a repost of a repost's id, and a reply to it, notify the original's author; the reposter is notified of none of them, and one's own like of one's own post notifies no one.
#[test]
fn acts_on_a_repost_notify_the_originals_author() {
    let log = vec![
        post(ALICE, 10, 1_000),
        repost(2, 20, (ALICE, 10), 1_001),
        like(3, (2, 20), true, 1_002),
        reply(4, 40, (2, 20), 1_003),
        repost(5, 50, (2, 20), 1_004),
        like(ALICE, (ALICE, 10), true, 1_005),
    ];
    let r = Run::new(6, &[&log]);
    let got = shape(&notes(&r, ALICE, true, None));
    let want = vec![
        ("repost", 2, vec![5, 2]),
        ("reply", 1, vec![4]),
        ("like", 1, vec![3]),
    ];
    assert_eq!(got, want);
    assert!(notes(&r, 2, true, None).is_empty());
}

// A post mentioning Alice notifies her once, apart, naming the post; a reply to her post that mentions her is one item (the reply); a reply to someone else's post that mentions her is a mention; deleting the post, or muting its author, takes it away; mentioning others notifies only them.
#[test]
fn mentions_notify_the_users_named_apart_until_deleted() {
    let mention = |a: u64, p: u64, to: Option<(u64, u64)>, who: &[u64], ts: u64| {
        let to = to.map(|(x, q)| (UserId(x), PostId(q)));
        let who = who.iter().map(|&u| UserId(u)).collect();
        Event::post(UserId(a), PostId(p), Ts(ts), to, who)
    };
    let log = vec![
        post(ALICE, 10, 1_000),
        post(5, 50, 1_001),
        mention(2, 20, None, &[ALICE, 3], 1_002),
        mention(3, 30, Some((ALICE, 10)), &[ALICE], 1_003),
        mention(4, 40, Some((5, 50)), &[ALICE], 1_004),
        mention(4, 41, None, &[ALICE], 1_005),
    ];
    let r = Run::new(6, &[&log]);
    let got = notes(&r, ALICE, true, None);
    let want = vec![
        ("mention", 1, vec![4]),
        ("mention", 1, vec![4]),
        ("reply", 1, vec![3]),
        ("mention", 1, vec![2]),
    ];
    assert_eq!(shape(&got), want);
    let named = got[0].post.as_ref().map(|p| (p.author, p.post_id));
    assert_eq!(named, Some((4, 41)), "a mention names the post");
    let only = Some(&[NotificationKind::Mention][..]);
    assert_eq!(notes(&r, ALICE, true, only).len(), 3);
    assert_eq!(
        shape(&notes(&r, 3, true, None)),
        vec![("mention", 1, vec![2])]
    );
    let later = vec![delete(2, 20, 1_009), mute(ALICE, 4, 1_010, None)];
    let r = Run::new(6, &[&log, &later]);
    assert_eq!(
        shape(&notes(&r, ALICE, true, None)),
        vec![("reply", 1, vec![3])]
    );
    assert!(notes(&r, 3, true, None).is_empty());
}

// The notifications marker counts the groups placed above it, as they read now: a `seen` at the top group's place reads them all, and a new like lifts its group above it again.
#[test]
fn the_notifications_marker_counts_groups_above_it() {
    let base = vec![
        post(ALICE, 10, 1_000),
        like(2, (ALICE, 10), true, 1_001),
        follow(3, ALICE, 1_002),
    ];
    let r = Run::new(4, &[&base]);
    let unread = |r: &Run| {
        let m = r
            .reader()
            .markers(UserId(ALICE), Modes::default(), 1000)
            .unwrap();
        assert_eq!(m.feeds[1].feed, "notifications");
        m.feeds[1].unread
    };
    assert_eq!(unread(&r), Some(2));
    let top = notes(&r, ALICE, true, None)[0].place;
    let seen = vec![Event::Mark {
        user: UserId(ALICE),
        ts: Ts(1_003),
        feed: Feed::Notifications,
        read_up_to: Place {
            ts: Ts(top.ts),
            post_id: PostId(top.post_id),
            author: UserId(top.author),
        },
        force: false,
    }];
    let r = Run::new(4, &[&base, &seen]);
    assert_eq!(unread(&r), Some(0));
    let more = vec![like(3, (ALICE, 10), true, 1_004)];
    let r = Run::new(4, &[&base, &seen, &more]);
    assert_eq!(unread(&r), Some(1));
}

// Proves a catch-up read gives the groups above the notifications marker oldest first, one page at a time up to the top, that its last `prev_cursor` finds a group that moves above it later, that a page's cursor starts a catch-up above that group, and that another user's cursor or garbage is refused with the reason.
#[test]
fn catch_up_reads_the_groups_above_the_marker_oldest_first() {
    let base = vec![
        post(ALICE, 10, 1_000),
        like(2, (ALICE, 10), true, 1_001),
        like(3, (ALICE, 10), true, 1_002),
        repost(4, 40, (ALICE, 10), 1_003),
        reply(5, 50, (ALICE, 10), 1_004),
        follow(6, ALICE, 1_005),
    ];
    let r = Run::new(6, &[&base]);
    let all = notes(&r, ALICE, true, None);
    let kinds = |g: &[NotificationGroup]| g.iter().map(|g| g.kind).collect::<Vec<_>>();
    assert_eq!(kinds(&all), ["follow", "reply", "repost", "like"]);
    let at = all[2].place;
    let seen = vec![Event::Mark {
        user: UserId(ALICE),
        ts: Ts(1_006),
        feed: Feed::Notifications,
        read_up_to: Place {
            ts: Ts(at.ts),
            post_id: PostId(at.post_id),
            author: UserId(at.author),
        },
        force: false,
    }];
    let more = vec![like(7, (ALICE, 10), true, 1_007)];
    let r = Run::new(7, &[&base, &seen]);
    let up = |r: &Run, after: &str| {
        r.reader()
            .notifications_catch_up(UserId(ALICE), (1, after), (true, None), false)
            .unwrap()
    };
    let first = up(&r, "marker");
    assert_eq!(kinds(&first.items), ["reply"]);
    let second = up(&r, first.prev_cursor.as_deref().unwrap());
    assert_eq!(kinds(&second.items), ["follow"]);
    let top = up(&r, second.prev_cursor.as_deref().unwrap());
    assert!(top.items.is_empty() && top.next_cursor.is_none());
    // The same log with a later like: the likes' group moves to the top,
    // and the cursor from the top finds it.
    let later = Run::new(7, &[&base, &seen, &more]);
    let moved = up(&later, top.prev_cursor.as_deref().unwrap());
    assert_eq!(shape(&moved.items), [("like", 3, vec![7, 3, 2])]);
    // A page's cursor (below the reply): the groups above it, from there.
    let page = r
        .reader()
        .notifications(UserId(ALICE), (2, None), true, None)
        .unwrap();
    let from = up(&r, page.next_cursor.as_deref().unwrap());
    assert_eq!(kinds(&from.items), ["follow"]);
    for (cursor, why) in [
        ("garbage", "not a cursor this server issued"),
        (
            first.prev_cursor.as_deref().unwrap(),
            "cursor belongs to another user",
        ),
    ] {
        let e = r
            .reader()
            .notifications_catch_up(UserId(2), (1, cursor), (true, None), false)
            .unwrap_err();
        assert!(e.to_string().contains(why), "{cursor}: {e}");
    }
}
