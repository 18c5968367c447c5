//! Golden bytes: every record kind of every codec, pinned. Postcard and
//! bincode encode an enum by its variant's index and a struct by its
//! fields' order, so reordering a variant or a field would silently misread
//! every old log; these tests fail first. A new variant or field goes at
//! the end, and its own golden line is added here.

use super::*;
use crate::effect::Wake;
use crate::event::{EventKind, FilterChange, PostId, Ts, UserId};
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
    let all = events.into_iter().chain(filters).chain(likes);
    all.chain([post_to]).collect()
}

/// An event's name in the golden lists: its kind, and `post_to` for a
/// post that replies or mentions (kind `post` too).
fn label(e: &Event) -> &'static str {
    match e {
        Event::PostTo { .. } => "post_to",
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

/// The pinned bytes: (name, hex).
const GOLDEN: &[(&str, &str)] = &[
    ("json follow", "7b2274797065223a22666f6c6c6f77222c22666f6c6c6f776572223a3330302c22666f6c6c6f776565223a31383434363734343037333730393535313631352c227473223a313730303030303030303030307d"),
    ("postcard follow", "00ac02ffffffffffffffffff0180d095ffbc31"),
    ("bincode follow", "00fb2c01fdfffffffffffffffffd0068e5cf8b010000"),
    ("json unfollow", "7b2274797065223a22756e666f6c6c6f77222c22666f6c6c6f776572223a3330302c22666f6c6c6f776565223a31383434363734343037333730393535313631352c227473223a313730303030303030303030317d"),
    ("postcard unfollow", "01ac02ffffffffffffffffff0181d095ffbc31"),
    ("bincode unfollow", "01fb2c01fdfffffffffffffffffd0168e5cf8b010000"),
    ("json post", "7b2274797065223a22706f7374222c22617574686f72223a3330302c22706f73745f6964223a37372c227473223a313730303030303030303030327d"),
    ("postcard post", "02ac024d82d095ffbc31"),
    ("bincode post", "02fb2c014dfd0268e5cf8b010000"),
    ("json delete_post", "7b2274797065223a2264656c6574655f706f7374222c22617574686f72223a3330302c22706f73745f6964223a37372c227473223a313730303030303030303030337d"),
    ("postcard delete_post", "03ac024d83d095ffbc31"),
    ("bincode delete_post", "03fb2c014dfd0368e5cf8b010000"),
    ("json seen", "7b2274797065223a227365656e222c2275736572223a31383434363734343037333730393535313631352c227473223a313730303030303030303030347d"),
    ("postcard seen", "04ffffffffffffffffff0184d095ffbc31"),
    ("bincode seen", "04fdfffffffffffffffffd0468e5cf8b010000"),
    ("json repost", "7b2274797065223a227265706f7374222c22617574686f72223a31383434363734343037333730393535313631352c22706f73745f6964223a37382c226f665f617574686f72223a3330302c226f665f706f73745f6964223a37372c227473223a313730303030303030303030357d"),
    ("postcard repost", "05ffffffffffffffffff014eac024d85d095ffbc31"),
    ("bincode repost", "05fdffffffffffffffff4efb2c014dfd0568e5cf8b010000"),
    ("json block", "7b2274797065223a22626c6f636b222c2275736572223a3330302c22746172676574223a31383434363734343037333730393535313631352c227473223a313730303030303030303030367d"),
    ("postcard block", "06ac02ffffffffffffffffff010086d095ffbc31"),
    ("bincode block", "06fb2c01fdffffffffffffffff00fd0668e5cf8b010000"),
    ("json unblock", "7b2274797065223a22756e626c6f636b222c2275736572223a3330302c22746172676574223a31383434363734343037333730393535313631352c227473223a313730303030303030303030377d"),
    ("postcard unblock", "06ac02ffffffffffffffffff010187d095ffbc31"),
    ("bincode unblock", "06fb2c01fdffffffffffffffff01fd0768e5cf8b010000"),
    ("json mute", "7b2274797065223a226d757465222c2275736572223a3330302c22746172676574223a31383434363734343037333730393535313631352c22756e74696c223a313730303030303038363430302c227473223a313730303030303030303030387d"),
    ("postcard mute", "06ac02ffffffffffffffffff01020180f39affbc3188d095ffbc31"),
    ("bincode mute", "06fb2c01fdffffffffffffffff0201fd80b9e6cf8b010000fd0868e5cf8b010000"),
    ("json unmute", "7b2274797065223a22756e6d757465222c2275736572223a3330302c22746172676574223a31383434363734343037333730393535313631352c227473223a313730303030303030303030397d"),
    ("postcard unmute", "06ac02ffffffffffffffffff010389d095ffbc31"),
    ("bincode unmute", "06fb2c01fdffffffffffffffff03fd0968e5cf8b010000"),
    ("json hide_reposts", "7b2274797065223a22686964655f7265706f737473222c2275736572223a3330302c22746172676574223a31383434363734343037333730393535313631352c227473223a313730303030303030303031307d"),
    ("postcard hide_reposts", "06ac02ffffffffffffffffff01048ad095ffbc31"),
    ("bincode hide_reposts", "06fb2c01fdffffffffffffffff04fd0a68e5cf8b010000"),
    ("json show_reposts", "7b2274797065223a2273686f775f7265706f737473222c2275736572223a3330302c22746172676574223a31383434363734343037333730393535313631352c227473223a313730303030303030303031317d"),
    ("postcard show_reposts", "06ac02ffffffffffffffffff01058bd095ffbc31"),
    ("bincode show_reposts", "06fb2c01fdffffffffffffffff05fd0b68e5cf8b010000"),
    ("json like", "7b2274797065223a226c696b65222c2275736572223a31383434363734343037333730393535313631352c22617574686f72223a3330302c22706f73745f6964223a37372c227473223a313730303030303030303031327d"),
    ("postcard like", "07ffffffffffffffffff01ac024d018cd095ffbc31"),
    ("bincode like", "07fdfffffffffffffffffb2c014d01fd0c68e5cf8b010000"),
    ("json unlike", "7b2274797065223a22756e6c696b65222c2275736572223a31383434363734343037333730393535313631352c22617574686f72223a3330302c22706f73745f6964223a37372c227473223a313730303030303030303031337d"),
    ("postcard unlike", "07ffffffffffffffffff01ac024d008dd095ffbc31"),
    ("bincode unlike", "07fdfffffffffffffffffb2c014d00fd0d68e5cf8b010000"),
    ("json post_to", "7b2274797065223a22706f7374222c22617574686f72223a31383434363734343037333730393535313631352c22706f73745f6964223a37392c227265706c795f746f223a7b22617574686f72223a3330302c22706f73745f6964223a37377d2c226d656e74696f6e73223a5b3330302c325d2c227473223a313730303030303030303031347d"),
    ("postcard post_to", "08ffffffffffffffffff014f8ed095ffbc3101ac024d02ac0202"),
    ("bincode post_to", "08fdffffffffffffffff4ffd0e68e5cf8b01000001fb2c014d02fb2c0102"),
    ("stamped follower_added", "0380d0dfb4ab330100ac02020504"),
    ("postcard follower_added", "0100ac02020504"),
    ("bincode follower_added", "00fb2c01020504"),
    ("stamped follower_removed", "0380d0dfb4ab330101ac020206"),
    ("postcard follower_removed", "0101ac020206"),
    ("bincode follower_removed", "01fb2c010206"),
    ("stamped deliver", "0380d0dfb4ab330102ac020809010205"),
    ("postcard deliver", "0102ac020809010205"),
    ("bincode deliver", "02fb2c010809010205"),
    ("stamped backfill", "0380d0dfb4ab330103ac020205020908070601"),
    ("postcard backfill", "0103ac020205020908070601"),
    ("bincode backfill", "03fb2c010205020908070601"),
    ("stamped retract", "0380d0dfb4ab330104ac0208090102"),
    ("postcard retract", "0104ac0208090102"),
    ("bincode retract", "04fb2c0108090102"),
    ("stamped pull", "0380d0dfb4ab330105ac0200020908070600010205"),
    ("postcard pull", "0105ac0200020908070600010205"),
    ("bincode pull", "05fb2c0100020908070600010205"),
    ("stamped copy", "0380d0dfb4ab330106ac0201020908070600"),
    ("postcard copy", "0106ac0201020908070600"),
    ("bincode copy", "06fb2c0101020908070600"),
    ("stamped pull_threshold", "0380d0dfb4ab330107904e"),
    ("postcard pull_threshold", "0107904e"),
    ("bincode pull_threshold", "07fb1027"),
    ("stamped copy_post", "0380d0dfb4ab330108ac02080901"),
    ("postcard copy_post", "0108ac02080901"),
    ("bincode copy_post", "08fb2c01080901"),
    ("stamped refill", "0380d0dfb4ab330109ac02020503"),
    ("postcard refill", "0109ac02020503"),
    ("bincode refill", "09fb2c01020503"),
    ("stamped refilled", "0380d0dfb4ab33010aac020205030001090801"),
    ("postcard refilled", "010aac020205030001090801"),
    ("bincode refilled", "0afb2c010205030001090801"),
    ("stamped repost_of", "0380d0dfb4ab33010bac0208020c0b0205"),
    ("postcard repost_of", "010bac0208020c0b0205"),
    ("bincode repost_of", "0bfb2c0108020c0b0205"),
    ("stamped reposted", "0380d0dfb4ab33010c020cac0208090105"),
    ("postcard reposted", "010c020cac0208090105"),
    ("bincode reposted", "0c020cfb2c0108090105"),
    ("stamped unrepost", "0380d0dfb4ab33010dac0208020c"),
    ("postcard unrepost", "010dac0208020c"),
    ("bincode unrepost", "0dfb2c0108020c"),
    ("stamped repost_dir", "0380d0dfb4ab33010e020c0bac02080900"),
    ("postcard repost_dir", "010e020c0bac02080900"),
    ("bincode repost_dir", "0e020c0bfb2c01080900"),
    ("stamped blocked", "0380d0dfb4ab33010f02ac0205000b010b"),
    ("postcard blocked", "010f02ac0205000b010b"),
    ("bincode blocked", "0f02fb2c0105000b010b"),
    ("stamped refollowed", "0380d0dfb4ab330110ac0202050c"),
    ("postcard refollowed", "0110ac0202050c"),
    ("bincode refollowed", "10fb2c0102050c"),
    ("stamped like_of", "0380d0dfb4ab330111ac0208020102050d"),
    ("postcard like_of", "0111ac0208020102050d"),
    ("bincode like_of", "11fb2c0108020102050d"),
    ("stamped like_live", "0380d0dfb4ab33011202ac020801"),
    ("postcard like_live", "011202ac020801"),
    ("bincode like_live", "1202fb2c010801"),
    ("stamped reply_of", "0380d0dfb4ab330113ac020802090101050e"),
    ("postcard reply_of", "0113ac020802090101050e"),
    ("bincode reply_of", "13fb2c010802090101050e"),
    ("stamped reply_dir", "0380d0dfb4ab3301140209ac02"),
    ("postcard reply_dir", "01140209ac02"),
    ("bincode reply_dir", "140209fb2c01"),
    ("postcard forwarded", "02c0843d01027b7d"),
    ("bincode forwarded", "02fc40420f0001027b7d"),
    ("bincode effects", "1500fb2c0102050401fb2c01020602fb2c01080901020503fb2c01020502090807060104fb2c010809010205fb2c010002090807060001020506fb2c010102090807060007fb102708fb2c0108090109fb2c010205030afb2c0102050300010908010bfb2c0108020c0b02050c020cfb2c01080901050dfb2c0108020c0e020c0bfb2c010809000f02fb2c0105000b010b10fb2c0102050c11fb2c0108020102050d1202fb2c01080113fb2c010802090101050e140209fb2c01"),
    ("dead-letter", "7b22666f726d6174223a226a736f6e222c227061796c6f6164223a227b6f6f7073222c22726561736f6e223a226e6f74204a534f4e222c22736f75726365223a7b226f6666736574223a372c22706172746974696f6e223a322c22746f706963223a226576656e7473227d7d"),
];

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
    let kinds: Vec<_> = events
        .iter()
        .filter(|e| !matches!(e, Event::PostTo { .. }))
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
