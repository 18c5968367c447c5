//! Golden bytes: every record kind of every codec, pinned. Postcard and
//! bincode encode an enum by its variant's index and a struct by its
//! fields' order, so reordering a variant or a field would silently misread
//! every old log; these tests fail first. A new variant or field goes at
//! the end, and its own golden line is added here.

use super::*;
use crate::effect::Wake;
use crate::event::{EventKind, Feed, FilterChange, Place, PostId, Ts, UserId};
use crate::fence::{Epoch, Stamp};
use crate::position::Version;

/// One of each event kind, with ids and times that fill several bytes.
fn events() -> Vec<Event> {
    let (a, b) = (UserId(300), UserId(u64::MAX));
    let events = [
        Event::Follow {
            follower: a,
            followee: b,
            ts: Ts(1_700_000_000_000),
        },
        Event::Unfollow {
            follower: a,
            followee: b,
            ts: Ts(1_700_000_000_001),
        },
        Event::Post {
            author: a,
            post_id: PostId(77),
            ts: Ts(1_700_000_000_002),
        },
        Event::DeletePost {
            author: a,
            post_id: PostId(77),
            ts: Ts(1_700_000_000_003),
        },
        Event::Seen {
            user: b,
            ts: Ts(1_700_000_000_004),
        },
        Event::Repost {
            author: b,
            post_id: PostId(78),
            of_author: a,
            of_post_id: PostId(77),
            ts: Ts(1_700_000_000_005),
        },
    ];
    let filters = [
        FilterChange::Block,
        FilterChange::Unblock,
        FilterChange::Mute {
            until: Some(Ts(1_700_000_086_400)),
        },
        FilterChange::Unmute,
        FilterChange::HideReposts,
        FilterChange::ShowReposts,
        FilterChange::MuteKeepingNotifications { until: None },
    ];
    let filters = filters
        .into_iter()
        .zip(6..)
        .map(|(change, n)| Event::Filter {
            user: a,
            target: b,
            change,
            ts: Ts(1_700_000_000_000 + n),
        });
    let likes = [true, false]
        .into_iter()
        .zip(12..)
        .map(|(liked, n)| Event::Like {
            user: b,
            author: a,
            post_id: PostId(77),
            liked,
            ts: Ts(1_700_000_000_000 + n),
        });
    let post_to = Event::PostTo {
        author: b,
        post_id: PostId(79),
        ts: Ts(1_700_000_000_014),
        reply_to: Some((a, PostId(77))),
        mentions: vec![a, UserId(2)],
    };
    let mark = Event::Mark {
        user: b,
        ts: Ts(1_700_000_000_015),
        feed: Feed::Notifications,
        read_up_to: Place {
            ts: Ts(1_700_000_000_002),
            post_id: PostId(77),
            author: a,
        },
        force: true,
    };
    let all = events.into_iter().chain(filters).chain(likes);
    all.chain([post_to, mark]).collect()
}

/// An event's name in the golden lists: its kind, `post_to` for a post
/// that replies or mentions (kind `post` too), and `seen_mark` for a
/// `seen` with a read marker (kind `seen` too).
fn label(e: &Event) -> &'static str {
    match e {
        Event::PostTo { .. } => "post_to",
        Event::Mark { .. } => "seen_mark",
        Event::Filter {
            change: FilterChange::MuteKeepingNotifications { .. },
            ..
        } => "mute_keeping_notifications",
        e => e.kind().as_str(),
    }
}

/// One of each effect kind.
// Long: one literal of every effect kind, whose encodings the tests pin byte for byte.
fn effects() -> Vec<Effect> {
    let (a, f) = (UserId(300), UserId(2));
    let posts = vec![(Ts(9), PostId(8)), (Ts(7), PostId(6))];
    vec![
        Effect::FollowerAdded {
            author: a,
            follower: f,
            version: Version(5),
            ts: Ts(4),
        },
        Effect::FollowerRemoved {
            author: a,
            follower: f,
            version: Version(6),
        },
        Effect::Deliver {
            author: a,
            post_id: PostId(8),
            ts: Ts(9),
            targets: vec![(f, Version(5))],
        },
        Effect::Backfill {
            author: a,
            follower: f,
            version: Version(5),
            posts: posts.clone(),
            truncated: true,
        },
        Effect::Retract {
            author: a,
            post_id: PostId(8),
            ts: Ts(9),
            targets: vec![f],
        },
        Effect::Pull {
            author: a,
            pulled: false,
            posts: posts.clone(),
            truncated: false,
            targets: vec![(f, Version(5))],
        },
        Effect::Copy {
            author: a,
            pulled: true,
            posts,
            truncated: false,
        },
        Effect::PullThreshold { threshold: 10_000 },
        Effect::CopyPost {
            author: a,
            post_id: PostId(8),
            ts: Ts(9),
            live: true,
        },
        Effect::Refill {
            author: a,
            follower: f,
            version: Version(5),
            wake: Wake(3),
        },
        Effect::Refilled {
            author: a,
            follower: f,
            version: Version(5),
            wake: Wake(3),
            pulled: false,
            posts: vec![(Ts(9), PostId(8))],
            truncated: true,
        },
        Effect::RepostOf {
            of_author: a,
            of_post_id: PostId(8),
            reposter: f,
            repost: PostId(12),
            ts: Ts(11),
            hops: 2,
            version: Version(5),
        },
        Effect::Reposted {
            reposter: f,
            repost: PostId(12),
            root_author: a,
            root_post_id: PostId(8),
            post_ts: Ts(9),
            live: true,
            version: Version(5),
        },
        Effect::Unrepost {
            root_author: a,
            root_post_id: PostId(8),
            reposter: f,
            repost: PostId(12),
        },
        Effect::RepostDir {
            reposter: f,
            repost: PostId(12),
            ts: Ts(11),
            root_author: a,
            root_post_id: PostId(8),
            post_ts: Ts(9),
            live: false,
        },
        Effect::Blocked {
            user: f,
            by: a,
            version: Version(5),
            on: false,
            ts: Ts(11),
            ended: Some(Ts(11)),
        },
        Effect::Refollowed {
            author: a,
            follower: f,
            version: Version(5),
            last: Ts(12),
        },
        Effect::LikeOf {
            of_author: a,
            of_post_id: PostId(8),
            liker: f,
            liked: true,
            hops: 2,
            version: Version(5),
            ts: Ts(13),
        },
        Effect::LikeLive {
            liker: f,
            root_author: a,
            root_post_id: PostId(8),
            live: true,
        },
        Effect::ReplyOf {
            of_author: a,
            of_post_id: PostId(8),
            replier: f,
            reply_post_id: PostId(9),
            live: true,
            hops: 1,
            version: Version(5),
            ts: Ts(14),
        },
        Effect::ReplyDir {
            author: f,
            post_id: PostId(9),
            parent: a,
        },
        Effect::MentionOf {
            user: a,
            author: f,
            post_id: PostId(9),
            live: true,
            version: Version(6),
            ts: Ts(15),
        },
    ]
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn bincode_of<T: Serialize>(v: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(v, bincode::config::standard()).expect("encodes")
}

/// Every encoding this build writes or reads, as (name, hex).
fn encodings() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in events() {
        let k = label(&e);
        out.push((format!("json {k}"), hex(event_to_json(&e).as_bytes())));
        out.push((format!("postcard {k}"), hex(&event_to_postcard(&e))));
        out.push((format!("bincode {k}"), hex(&event_to_bincode(&e))));
    }
    let stamp = Stamp {
        from: Partition(3),
        epoch: Epoch(1_764_000_000_000),
    };
    for e in effects() {
        let k = e.name();
        let one = std::slice::from_ref(&e);
        out.push((format!("stamped {k}"), hex(&encode_effects(stamp, one).1)));
        out.push((
            format!("postcard {k}"),
            hex(&encode_unstamped_effects(one).1),
        ));
        out.push((format!("bincode {k}"), hex(&bincode_of(&e))));
    }
    let forwarded = Forwarded {
        from_partition: Partition(2),
        from_offset: 1_000_000,
        format: Format::Json.as_u8(),
        payload: b"{}".to_vec(),
    };
    out.push((
        "postcard forwarded".into(),
        hex(&encode_forwarded(&forwarded).1),
    ));
    out.push(("bincode forwarded".into(), hex(&bincode_of(&forwarded))));
    // What earlier versions wrote for a batch: one bincode sequence.
    out.push(("bincode effects".into(), hex(&bincode_of(&effects()))));
    out.push(("dead-letter".into(), hex(&golden_dead_letter())));
    out
}

/// A dead-letter record's value, as the processors write it.
fn golden_dead_letter() -> Vec<u8> {
    let source = serde_json::json!({"topic": "events", "partition": 2, "offset": 7});
    super::dead_letter_value("not JSON", source, "json", b"{oops")
}

mod bytes;
use bytes::GOLDEN;

// Proves every record kind of every codec (JSON, postcard and bincode events; stamped, unstamped and bincode effects, one or a batch; forwarded events in postcard and bincode; dead letters) encodes to the pinned bytes and decodes from them back to the same value.
#[test]
fn golden_bytes_of_every_record_kind() {
    let got = encodings();
    let listing: String = got
        .iter()
        .map(|(n, h)| format!("    (\"{n}\", \"{h}\"),\n"))
        .collect();
    let want: Vec<(String, String)> = GOLDEN
        .iter()
        .map(|(n, h)| (n.to_string(), h.to_string()))
        .collect();
    assert!(
        got == want,
        "an encoding changed: a variant or field was reordered, removed or inserted \
         before the last one (they are append-only). Today's bytes:\n{listing}"
    );
}

// Proves the pinned bytes decode to the values they were made from, under their format markers: a log written today reads back unchanged.
#[test]
fn golden_bytes_decode_back() {
    let unhex = |h: &str| -> Vec<u8> {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex"))
            .collect()
    };
    let golden = |name: &str| unhex(GOLDEN.iter().find(|(n, _)| *n == name).expect(name).1);
    for e in events() {
        let k = label(&e);
        for (codec, format) in [
            ("json", Format::Json),
            ("postcard", Format::Postcard),
            ("bincode", Format::Bincode),
        ] {
            let bytes = golden(&format!("{codec} {k}"));
            assert_eq!(
                decode_event(format.as_u8(), &bytes),
                Ok(e.clone()),
                "{codec} {k}"
            );
        }
    }
    for e in effects() {
        let k = e.name();
        let stamped = decode_effects(
            Format::StampedEffects.as_u8(),
            &golden(&format!("stamped {k}")),
        )
        .expect(k);
        assert_eq!(stamped.effects, vec![e.clone()]);
        assert_eq!(
            stamped.stamp,
            Some(Stamp {
                from: Partition(3),
                epoch: Epoch(1_764_000_000_000)
            })
        );
        for (codec, format) in [
            ("postcard", Format::PostcardEffects),
            ("bincode", Format::Effect),
        ] {
            let bytes = golden(&format!("{codec} {k}"));
            let got = decode_effects(format.as_u8(), &bytes).expect(k);
            assert_eq!(
                (got.stamp, got.effects),
                (None, vec![e.clone()]),
                "{codec} {k}"
            );
        }
    }
    let forwarded = decode_forwarded(
        Format::PostcardForwarded.as_u8(),
        &golden("postcard forwarded"),
    );
    let old = decode_forwarded(Format::Forwarded.as_u8(), &golden("bincode forwarded"));
    assert_eq!(forwarded, old);
    assert_eq!(
        forwarded.and_then(Result::ok).map(|f| f.from_offset),
        Some(1_000_000)
    );
    let batch = decode_effects(Format::Effects.as_u8(), &golden("bincode effects")).expect("batch");
    assert_eq!((batch.stamp, batch.effects), (None, effects()));
    let dead: serde_json::Value =
        serde_json::from_slice(&golden("dead-letter")).expect("a dead letter is JSON");
    assert_eq!(
        dead,
        serde_json::json!({"reason": "not JSON", "format": "json", "payload": "{oops",
            "source": {"topic": "events", "partition": 2, "offset": 7}})
    );
}

/// Whether postcard reads a `T` from variant `tag` followed by zeros (the
/// empty, false or zero value of every field).
fn tag_decodes<T: serde::de::DeserializeOwned>(tag: u8) -> bool {
    let mut bytes = vec![0u8; 64];
    bytes[0] = tag;
    postcard::take_from_bytes::<T>(&bytes).is_ok()
}

/// A type's name, its golden values' tags, and whether a tag decodes.
type Covered = (&'static str, Vec<u8>, fn(u8) -> bool);

/// The variant tags of `values` in postcard, repeats of a tag merged.
fn tags<T: Serialize>(values: impl IntoIterator<Item = T>) -> Vec<u8> {
    let mut tags: Vec<u8> = values.into_iter().map(|v| encode_compact(&v)[0]).collect();
    tags.dedup();
    tags
}

// Proves the golden lists hold a value of every variant of Event, FilterChange and Effect, in variant order: a variant appended without its golden line fails here.
#[test]
fn golden_lists_cover_every_variant() {
    let events = events();
    let changes = events.iter().filter_map(|e| match e {
        Event::Filter { change, .. } => Some(*change),
        _ => None,
    });
    let lists: [Covered; 3] = [
        ("Event", tags(&events), tag_decodes::<Event>),
        ("FilterChange", tags(changes), tag_decodes::<FilterChange>),
        ("Effect", tags(effects()), tag_decodes::<Effect>),
    ];
    for (what, got, next_decodes) in lists {
        let n = got.len() as u8;
        assert_eq!(
            got,
            (0..n).collect::<Vec<_>>(),
            "{what}: golden values out of variant order"
        );
        assert!(
            !next_decodes(n),
            "{what} has a variant {n} with no golden value: add one at the end of the list"
        );
    }
    // The variants of a kind besides its first: a post that replies or
    // mentions, a seen with a marker, a mute that keeps notifications.
    let later_variant = |e: &&Event| {
        matches!(
            e,
            Event::PostTo { .. }
                | Event::Mark { .. }
                | Event::Filter {
                    change: FilterChange::MuteKeepingNotifications { .. },
                    ..
                }
        )
    };
    let kinds: Vec<_> = events
        .iter()
        .filter(|e| !later_variant(e))
        .map(Event::kind)
        .collect();
    assert_eq!(
        kinds,
        EventKind::all().collect::<Vec<_>>(),
        "one golden event per kind"
    );
}

// Proves docs/design.md names every event kind and every message in its tables, docs/events.md shows every event kind, and ARCHITECTURE.md's fence table names every message: a kind added without its docs fails here.
#[test]
fn the_docs_name_every_event_kind_and_message() {
    let design = include_str!("../../../docs/design.md");
    let events_page = include_str!("../../../docs/events.md");
    let architecture = include_str!("../../../ARCHITECTURE.md");
    for kind in EventKind::all() {
        let spelled = format!("`{}`", kind.as_str());
        assert!(design.contains(&spelled), "docs/design.md: no {spelled}");
        let example = format!(r#""type":"{}""#, kind.as_str());
        assert!(
            events_page.contains(&example),
            "docs/events.md: no example of {spelled}"
        );
    }
    for e in effects() {
        let debug = format!("{e:?}");
        let name = debug.split([' ', '{']).next().unwrap_or_default();
        let row = format!("| `{name}` |");
        assert!(
            design.contains(&row),
            "docs/design.md's message table: no {row}"
        );
        let named = format!("`{name}`");
        assert!(
            architecture.contains(&named),
            "ARCHITECTURE.md's fence table: no {named}"
        );
    }
}
