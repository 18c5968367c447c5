//! Generated events for the core's property test, and the check that a
//! generator makes every event kind.

use super::filters::filter_change;
use feedlog::core::event::{Event, EventKind, Feed, Place, PostId, Ts, UserId};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use std::collections::BTreeSet;

/// Users the core's property test generates events among.
pub const USERS: u64 = 8;

/// Any event among [`USERS`] users: follows and unfollows, posts, deletions,
/// `seen` (with read markers or not), reposts, blocks, mutes and hidden reposts, likes and unlikes,
/// replies and mentions.
pub fn core_event() -> impl Strategy<Value = Event> {
    let user = || (1..=USERS).prop_map(UserId);
    let ts = || (0u64..30).prop_map(Ts);
    let post = || (1u64..=12).prop_map(PostId);
    prop_oneof![
        4 => (user(), user(), ts()).prop_filter_map("no self-follow", |(a, b, ts)| {
            (a != b).then_some(Event::Follow { follower: a, followee: b, ts })
        }),
        1 => (user(), user(), ts()).prop_filter_map("no self-unfollow", |(a, b, ts)| {
            (a != b).then_some(Event::Unfollow { follower: a, followee: b, ts })
        }),
        4 => (user(), post(), ts()).prop_map(|(author, post_id, ts)| Event::Post { author, post_id, ts }),
        1 => (user(), post(), ts()).prop_map(|(author, post_id, ts)| Event::DeletePost { author, post_id, ts }),
        1 => (user(), ts()).prop_map(|(user, ts)| Event::Seen { user, ts }),
        // Read markers of both feeds at the posts' places and between
        // them, some forced.
        2 => (user(), ts(), any::<bool>(), (ts(), 0u64..=12, user()), proptest::bool::weighted(0.2))
            .prop_map(|(user, ts, home, (pt, pp, author), force)| Event::Mark {
                user, ts,
                feed: if home { Feed::Home } else { Feed::Notifications },
                read_up_to: Place { ts: pt, post_id: PostId(pp), author },
                force,
            }),
        // Reposts share the posts' ids (a post and a repost of one id: the
        // first counts), so they name posts, reposts, themselves (refused
        // as invalid: never generated) and ids never posted.
        3 => (user(), post(), user(), post(), ts()).prop_filter_map(
            "a repost naming itself",
            |(author, post_id, of_author, of_post_id, ts)| {
                ((author, post_id) != (of_author, of_post_id)).then_some(Event::Repost {
                    author, post_id, of_author, of_post_id, ts,
                })
            },
        ),
        // Blocks, mutes (ending or not) and hidden reposts, and their ends.
        3 => (user(), user(), 0u64..30).prop_filter("no self-filter", |(a, b, _)| a != b)
            .prop_flat_map(|(user, target, t)| filter_change(t).prop_map(move |change| Event::Filter { user, target, change, ts: Ts(t) })),
        // Likes and unlikes name posts, reposts and ids never posted.
        3 => (user(), user(), post(), any::<bool>(), ts()).prop_map(|(user, author, post_id, liked, ts)| {
            Event::Like { user, author, post_id, liked, ts }
        }),
        // Replies (to posts, reposts, the author's own posts and ids never
        // posted) and posts that mention, sharing the posts' ids.
        3 => (user(), post(), proptest::option::of((user(), post())), proptest::collection::btree_set(user(), 0..3), ts())
            .prop_filter_map("a reply naming itself", |(author, post_id, reply_to, mentions, ts)| {
                let mentions: Vec<UserId> = mentions.into_iter().filter(|&m| m != author).collect();
                let post = Event::post(author, post_id, ts, reply_to, mentions);
                post.validate().is_ok().then_some(post)
            }),
    ]
}

/// Panics unless `events` makes every event kind within 5,000 values.
pub fn assert_every_kind(events: impl Strategy<Value = Event>) {
    let mut runner = TestRunner::deterministic();
    let mut made = BTreeSet::new();
    for _ in 0..5_000 {
        let tree = events.new_tree(&mut runner).expect("a value");
        made.insert(tree.current().kind().as_str());
    }
    for kind in EventKind::all() {
        assert!(
            made.contains(kind.as_str()),
            "{} is never generated",
            kind.as_str()
        );
    }
}
