//! What the contract tests generate: events (also at the edges of the id
//! ranges), records that are not events, and the scheduler's actions.

use crate::common::filters::filter_change;
use feedlog::core::codec::Format;
use feedlog::core::event::{Event, Feed, FilterChange, Place, PostId, Ts, UserId};
use feedlog::core::partition::partition_for;
use feedlog::core::Partition;
use proptest::prelude::*;

pub(crate) const USERS: u64 = 12;

/// User ids from the edges of the valid range, for user indices 1..=12
/// (the first ones are the most active): JavaScript's 2^53 boundary, the
/// 32-bit boundary, and u64::MAX, whose keys are all 0xff.
pub(crate) const EDGE_USERS: [u64; 12] = [
    u64::MAX,
    1,
    (1 << 53) + 1,
    u64::MAX - 1,
    1 << 53,
    (1 << 53) - 1,
    2,
    1 << 32,
    u64::MAX - 2,
    3,
    u32::MAX as u64,
    4,
];

/// The same event with ids and times moved to the edges of their ranges:
/// users through [`EDGE_USERS`], post ids 1..=3 to u64::MAX..=u64::MAX-2,
/// times 38 and 39 to the last two an event may carry.
pub(crate) fn at_edges(e: Event) -> Event {
    let u = |u: UserId| UserId(EDGE_USERS[(u.0 - 1) as usize % EDGE_USERS.len()]);
    let p = |p: PostId| PostId(if p.0 <= 3 { u64::MAX - (p.0 - 1) } else { p.0 });
    // The latest times an event may carry (Ts::check_unit).
    let t = |t: Ts| {
        Ts(if t.0 >= 38 {
            Ts::MILLIS_UNTIL - 1 - (39 - t.0.min(39))
        } else {
            t.0
        })
    };
    match e {
        Event::Follow {
            follower,
            followee,
            ts,
        } => Event::Follow {
            follower: u(follower),
            followee: u(followee),
            ts: t(ts),
        },
        Event::Unfollow {
            follower,
            followee,
            ts,
        } => Event::Unfollow {
            follower: u(follower),
            followee: u(followee),
            ts: t(ts),
        },
        Event::Post {
            author,
            post_id,
            ts,
        } => Event::Post {
            author: u(author),
            post_id: p(post_id),
            ts: t(ts),
        },
        Event::PostTo {
            author,
            post_id,
            ts,
            reply_to,
            mentions,
        } => Event::PostTo {
            author: u(author),
            post_id: p(post_id),
            ts: t(ts),
            reply_to: reply_to.map(|(a, q)| (u(a), p(q))),
            mentions: mentions.into_iter().map(u).collect(),
        },
        Event::DeletePost {
            author,
            post_id,
            ts,
        } => Event::DeletePost {
            author: u(author),
            post_id: p(post_id),
            ts: t(ts),
        },
        Event::Seen { user, ts } => Event::Seen {
            user: u(user),
            ts: t(ts),
        },
        Event::Mark {
            user,
            ts,
            feed,
            read_up_to: r,
            force,
        } => Event::Mark {
            user: u(user),
            ts: t(ts),
            feed,
            // A place's post id may be 0 (below every entry's): kept.
            read_up_to: Place {
                ts: t(r.ts),
                post_id: if r.post_id.0 == 0 {
                    r.post_id
                } else {
                    p(r.post_id)
                },
                author: u(r.author),
            },
            force,
        },
        Event::Repost {
            author,
            post_id,
            of_author,
            of_post_id,
            ts,
        } => Event::Repost {
            author: u(author),
            post_id: p(post_id),
            of_author: u(of_author),
            of_post_id: p(of_post_id),
            ts: t(ts),
        },
        Event::Filter {
            user,
            target,
            change,
            ts,
        } => Event::Filter {
            user: u(user),
            target: u(target),
            change: match change {
                // An end after the event's own time, or none when the event
                // carries the last time there is.
                FilterChange::Mute { until } => FilterChange::Mute {
                    until: until
                        .map(|x| t(x).max(Ts(t(ts).0 + 1)))
                        .filter(|x| x.check_unit().is_ok()),
                },
                FilterChange::MuteKeepingNotifications { until } => {
                    FilterChange::MuteKeepingNotifications {
                        until: until
                            .map(|x| t(x).max(Ts(t(ts).0 + 1)))
                            .filter(|x| x.check_unit().is_ok()),
                    }
                }
                c => c,
            },
            ts: t(ts),
        },
        Event::Like {
            user,
            author,
            post_id,
            liked,
            ts,
        } => Event::Like {
            user: u(user),
            author: u(author),
            post_id: p(post_id),
            liked,
            ts: t(ts),
        },
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// A valid event, as JSON or bincode.
    Event(Event, bool),
    /// The previous valid event again (a redundant record).
    Repeat,
    /// A record that is not an event.
    Invalid(u8, u32),
}

#[derive(Debug, Clone)]
pub(crate) enum Action {
    Step(u32, u8),
    Crash(u32, u8),
    Redeliver(u32, bool, u8),
    /// The group commits a partition's positions (Kafka mode).
    Commit(u32),
    /// A partition moves to a new owner with an empty store.
    Handover(u32),
    /// A partition moves to a new owner with an empty store, and its old
    /// owner (its session expired) keeps running on its own store.
    Zombie(u32),
    /// An old owner steps `n` times; with `stall`, its last step commits
    /// and stops before shipping (the process paused there).
    ZombieStep(u32, u8, bool),
    /// A stalled old owner resumes: it ships what it committed, late.
    ZombieShip(u32),
}

/// A skewed user choice: the first few users are the most active.
pub(crate) fn user(users: u64) -> impl Strategy<Value = u64> {
    prop_oneof![4 => 1u64..=3.min(users), 2 => 1u64..=7.min(users), 1 => 1u64..=users]
}

pub(crate) fn event(users: u64) -> impl Strategy<Value = Event> {
    let user = move || user(users);
    let ts = 0u64..40;
    prop_oneof![
        4 => (user(), user(), ts.clone()).prop_filter("self-follow", |(a, b, _)| a != b)
            .prop_map(|(a, b, t)| Event::Follow { follower: UserId(a), followee: UserId(b), ts: Ts(t) }),
        2 => (user(), user(), ts.clone()).prop_filter("self-follow", |(a, b, _)| a != b)
            .prop_map(|(a, b, t)| Event::Unfollow { follower: UserId(a), followee: UserId(b), ts: Ts(t) }),
        4 => (user(), 1u64..=20, ts.clone())
            .prop_map(|(a, p, t)| Event::Post { author: UserId(a), post_id: PostId(p), ts: Ts(t) }),
        1 => (user(), 1u64..=20, ts.clone())
            .prop_map(|(a, p, t)| Event::DeletePost { author: UserId(a), post_id: PostId(p), ts: Ts(t) }),
        1 => (user(), ts.clone()).prop_map(|(a, t)| Event::Seen { user: UserId(a), ts: Ts(t) }),
        // Read markers of both feeds, at places of the posts' id space and
        // times (entries' own places, and between them), some forced.
        2 => (user(), ts.clone(), any::<bool>(), (0u64..40, 0u64..=20, user()), proptest::bool::weighted(0.2))
            .prop_map(|(a, t, home, (pt, pp, pa), force)| Event::Mark {
                user: UserId(a), ts: Ts(t),
                feed: if home { Feed::Home } else { Feed::Notifications },
                read_up_to: Place { ts: Ts(pt), post_id: PostId(pp), author: UserId(pa) },
                force,
            }),
        // Reposts in the posts' id space: of posts, of reposts, of ids
        // never posted; a repost naming itself is not generated (invalid).
        3 => (user(), 1u64..=20, user(), 1u64..=20, ts).prop_filter_map(
            "a repost naming itself",
            |(a, p, b, q, t)| ((a, p) != (b, q)).then_some(Event::Repost {
                author: UserId(a), post_id: PostId(p), of_author: UserId(b), of_post_id: PostId(q), ts: Ts(t),
            }),
        ),
        // Blocks, mutes and hidden reposts, among the same users.
        2 => (user(), user(), 0u64..40).prop_filter("self-filter", |(a, b, _)| a != b)
            .prop_flat_map(|(a, b, t)| filter_change(t).prop_map(move |c| Event::Filter {
                user: UserId(a), target: UserId(b), change: c, ts: Ts(t),
            })),
        // Likes and unlikes of posts, reposts and ids never posted.
        2 => (user(), user(), 1u64..=20, any::<bool>(), 0u64..40).prop_map(|(a, b, p, liked, t)| Event::Like {
            user: UserId(a), author: UserId(b), post_id: PostId(p), liked, ts: Ts(t),
        }),
        // Replies (to posts, reposts and ids never posted) and mentions,
        // in the posts' id space.
        2 => (user(), 1u64..=20, proptest::option::of((user(), 1u64..=20)), proptest::collection::btree_set(user(), 0..3), 0u64..40)
            .prop_filter_map("a reply naming itself", |(a, p, to, mentions, t)| {
                let mentions = mentions.into_iter().filter(|&m| m != a).map(UserId).collect();
                let to = to.map(|(b, q)| (UserId(b), PostId(q)));
                let post = Event::post(UserId(a), PostId(p), Ts(t), to, mentions);
                post.validate().is_ok().then_some(post)
            }),
    ]
}

pub(crate) fn op(users: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (event(users), any::<bool>()).prop_map(|(e, b)| Op::Event(e, b)),
        1 => Just(Op::Repeat),
        1 => (0u8..8, any::<u32>()).prop_map(|(k, p)| Op::Invalid(k, p)),
    ]
}

pub(crate) fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        8 => (any::<u32>(), 1u8..6).prop_map(|(p, n)| Action::Step(p, n)),
        1 => (any::<u32>(), 0u8..3).prop_map(|(p, c)| Action::Crash(p, c)),
        1 => (any::<u32>(), any::<bool>(), 1u8..20).prop_map(|(p, e, n)| Action::Redeliver(p, e, n)),
        1 => any::<u32>().prop_map(Action::Commit),
        1 => any::<u32>().prop_map(Action::Handover),
    ]
}

/// [`action`] with expired owners beside their successors.
pub(crate) fn action_with_zombies() -> impl Strategy<Value = Action> {
    prop_oneof![
        12 => action(),
        1 => any::<u32>().prop_map(Action::Zombie),
        4 => (any::<u32>(), 1u8..4, any::<bool>()).prop_map(|(z, n, s)| Action::ZombieStep(z, n, s)),
        2 => any::<u32>().prop_map(Action::ZombieShip),
    ]
}

pub(crate) fn invalid_record(kind: u8, seed: u32, partitions: u32) -> (Partition, u8, Vec<u8>) {
    let p = Partition(seed % partitions);
    let json = Format::Json.as_u8();
    match kind {
        0 => (p, json, b"{not json".to_vec()),
        1 => (
            p,
            json,
            br#"{"type":"follow","follower":3,"followee":3,"ts":1}"#.to_vec(),
        ),
        2 => (
            p,
            json,
            br#"{"type":"post","author":0,"post_id":1,"ts":1}"#.to_vec(),
        ),
        3 => {
            let binary = [Format::Bincode, Format::Postcard][(seed / 7) as usize % 2];
            (p, binary.as_u8(), vec![0xff, 0xfe, 0xfd])
        }
        4 => (
            p,
            77,
            br#"{"type":"post","author":1,"post_id":1,"ts":1}"#.to_vec(),
        ),
        5 => (
            // A time in seconds.
            p,
            json,
            br#"{"type":"post","author":1,"post_id":1,"ts":1700000000}"#.to_vec(),
        ),
        6 => (
            // A repost naming itself.
            p,
            json,
            br#"{"type":"repost","author":2,"post_id":5,"of_author":2,"of_post_id":5,"ts":1}"#
                .to_vec(),
        ),
        _ => (
            // A forwarded record whose wrapper does not decode.
            p,
            Format::Forwarded.as_u8(),
            vec![0xff; 3],
        ),
    }
}

/// Which binary codec an event is written in: a fixed function of its ids,
/// so a repeat of it is written the same way.
pub(crate) fn event_id_parity(e: &Event) -> u64 {
    (e.actor().0 ^ e.ts().0) % 2
}

/// Whether `actor`'s events are written to a partition that does not own
/// it (all of them, to the same one, so their order is still defined):
/// the processor must forward them to the owner.
pub(crate) fn misrouted(actor: UserId, partitions: u32) -> Option<Partition> {
    (partitions > 1 && actor.0 % 4 == 3)
        .then(|| Partition((partition_for(actor, partitions).0 + 1) % partitions))
}
