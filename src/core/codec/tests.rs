//! The codec's tests: every shape decodes or is refused with its reason.
use super::*;
use crate::event::{FilterChange, PostId, Ts, UserId};

fn json(s: &str) -> Result<Event, DecodeError> {
    decode_event(Format::Json.as_u8(), s.as_bytes())
}

// Proves the five JSON shapes of docs/events.md decode, with and without "v".
#[test]
fn json_shapes_decode() {
    assert_eq!(
        json(r#"{"type":"follow","follower":1,"followee":2,"ts":1700000000000}"#),
        Ok(Event::Follow {
            follower: UserId(1),
            followee: UserId(2),
            ts: Ts(1700000000000)
        })
    );
    assert_eq!(
        json(r#"{"type":"delete_post","author":2,"post_id":77,"ts":5,"v":1}"#),
        Ok(Event::DeletePost {
            author: UserId(2),
            post_id: PostId(77),
            ts: Ts(5)
        })
    );
    assert_eq!(
        json(r#"{"type":"seen","user":3,"ts":1700000000000}"#),
        Ok(Event::Seen {
            user: UserId(3),
            ts: Ts(1700000000000)
        })
    );
    assert!(matches!(
        json(r#"{"type":"seen","author":3,"ts":1}"#),
        Err(DecodeError::MissingField { field: "user", .. })
    ));
    assert!(matches!(
        json(r#"{"type":"seen","user":0,"ts":1}"#),
        Err(DecodeError::Invalid(_))
    ));
}

// Proves a `seen` with a feed decodes to a read marker (ids as strings too, `force` optional), and that a marker of the wrong shape, or half of one, is refused naming its field.
#[test]
fn a_seen_with_a_feed_is_a_read_marker() {
    use crate::event::{Feed, Place};
    let want = |force| {
        Ok(Event::Mark {
            user: UserId(3),
            ts: Ts(9),
            feed: Feed::Home,
            read_up_to: Place {
                ts: Ts(5),
                post_id: PostId(77),
                author: UserId(2),
            },
            force,
        })
    };
    let up_to = r#""read_up_to":{"ts":5,"post_id":"77","author":2}"#;
    let seen = |more: &str| json(&format!(r#"{{"type":"seen","user":3,"ts":9{more}}}"#));
    assert_eq!(seen(&format!(r#","feed":"home",{up_to}"#)), want(false));
    let forced = seen(&format!(r#","feed":"home",{up_to},"force":true"#));
    assert_eq!(forced, want(true));
    assert_eq!(
        seen(r#","feed":null,"force":null"#),
        Ok(Event::Seen {
            user: UserId(3),
            ts: Ts(9)
        })
    );
    let refused = |more: &str| seen(more).unwrap_err().to_string();
    assert!(refused(&format!(",{up_to}")).contains("missing field `feed`"));
    assert!(refused(r#","force":false"#).contains("missing field `feed`"));
    assert!(refused(r#","feed":"home""#).contains("missing field `read_up_to`"));
    assert!(refused(&format!(r#","feed":"lists",{up_to}"#))
        .contains(r#"`feed` must be "home" or "notifications""#));
    assert!(refused(r#","feed":"home","read_up_to":[1,2,3]"#)
        .contains("`read_up_to` must be an object"));
    assert!(
        refused(r#","feed":"home","read_up_to":{"ts":5,"post_id":1}"#)
            .contains("`read_up_to.author`")
    );
    assert!(refused(&format!(r#","feed":"home",{up_to},"force":1"#))
        .contains("`force` must be true or false"));
    // A place's time is a time: in milliseconds, and not a string.
    assert!(
        refused(r#","feed":"home","read_up_to":{"ts":"5","post_id":1,"author":1}"#)
            .contains("`read_up_to.ts`")
    );
    let seconds = r#","feed":"home","read_up_to":{"ts":1700000000,"post_id":1,"author":1}"#;
    assert!(refused(seconds).contains("seconds"));
}

// Proves fields the event kind does not use are ignored whatever their type, as docs/events.md promises.
#[test]
fn unused_fields_are_ignored_whatever_their_type() {
    assert_eq!(
        json(
            r#"{"type":"follow","follower":1,"followee":2,"ts":3,"author":"x","post_id":[1],"extra":{}}"#
        ),
        Ok(Event::Follow {
            follower: UserId(1),
            followee: UserId(2),
            ts: Ts(3)
        })
    );
    assert_eq!(
        json(r#"{"type":"post","author":1,"post_id":2,"ts":3,"follower":-7,"followee":null}"#),
        Ok(Event::Post {
            author: UserId(1),
            post_id: PostId(2),
            ts: Ts(3)
        })
    );
}

// Proves a dead letter of a huge payload carries a bounded excerpt and the payload's size.
#[test]
fn dead_letter_payloads_are_excerpts() {
    let big = "é".repeat(DEAD_LETTER_EXCERPT); // two bytes each
    let v: serde_json::Value = serde_json::from_slice(&dead_letter_value(
        "too large",
        serde_json::json!({"input": "f:1"}),
        "json",
        big.as_bytes(),
    ))
    .unwrap();
    assert_eq!(v["payload_bytes"], 2 * DEAD_LETTER_EXCERPT);
    assert_eq!(v["payload_truncated"], true);
    let excerpt = v["payload"].as_str().unwrap();
    assert!(excerpt.len() <= DEAD_LETTER_EXCERPT && excerpt.len() >= DEAD_LETTER_EXCERPT - 1);
    let small: serde_json::Value = serde_json::from_slice(&dead_letter_value(
        "r",
        serde_json::json!({}),
        "json",
        b"abc",
    ))
    .unwrap();
    assert_eq!(small["payload"], "abc");
    assert!(small.get("payload_truncated").is_none());
}

// Proves every event survives both encodings and the marker selects the decoder.
#[test]
fn round_trips() {
    let events = [
        Event::Follow {
            follower: UserId(1),
            followee: UserId(u64::MAX),
            ts: Ts(3),
        },
        Event::Unfollow {
            follower: UserId(9),
            followee: UserId(8),
            ts: Ts(0),
        },
        Event::Post {
            author: UserId(4),
            post_id: PostId(5),
            ts: Ts(6),
        },
        Event::DeletePost {
            author: UserId(4),
            post_id: PostId(5),
            ts: Ts(7),
        },
        Event::Seen {
            user: UserId(u64::MAX),
            ts: Ts(8),
        },
        Event::Mark {
            user: UserId(u64::MAX),
            ts: Ts(9),
            feed: crate::event::Feed::Home,
            read_up_to: crate::event::Place::default(),
            force: false,
        },
    ];
    for e in events {
        assert_eq!(json(&event_to_json(&e)), Ok(e.clone()));
        let compact = event_to_postcard(&e);
        assert_eq!(
            decode_event(Format::Postcard.as_u8(), &compact),
            Ok(e.clone())
        );
        let bin = event_to_bincode(&e);
        assert_eq!(decode_event(Format::Bincode.as_u8(), &bin), Ok(e.clone()));
        // The same bytes under another marker are not silently accepted.
        assert!(decode_event(Format::Json.as_u8(), &bin).is_err());
        assert!(decode_event(Format::Json.as_u8(), &compact).is_err());
    }
}

// Proves an effects record decodes to its stamp and effects in order under every marker (unstamped for the earlier ones), and that an empty, truncated or mismarked one is refused with a reason.
#[test]
fn effects_records_round_trip_and_bad_ones_are_refused() {
    use crate::position::Version;
    let effects = vec![
        Effect::FollowerRemoved {
            author: UserId(1),
            follower: UserId(2),
            version: Version(3),
        },
        Effect::Deliver {
            author: UserId(1),
            post_id: PostId(7),
            ts: Ts(8),
            targets: vec![(UserId(2), Version(3)), (UserId(4), Version(5))],
        },
        Effect::Pull {
            author: UserId(1),
            pulled: false,
            posts: vec![(Ts(8), PostId(7))],
            truncated: true,
            targets: vec![(UserId(2), Version(3))],
        },
        Effect::Copy {
            author: UserId(1),
            pulled: true,
            posts: vec![(Ts(8), PostId(7))],
            truncated: false,
        },
        Effect::CopyPost {
            author: UserId(1),
            post_id: PostId(9),
            ts: Ts(10),
            live: false,
        },
    ];
    let stamp = Stamp {
        from: Partition(3),
        epoch: Epoch(1_700_000_000_000),
    };
    let (format, value) = encode_effects(stamp, &effects);
    assert_eq!(format, Format::StampedEffects);
    assert_eq!(
        decode_effects(format.as_u8(), &value),
        Ok(Envelope {
            stamp: Some(stamp),
            effects: effects.clone()
        })
    );
    let unstamped = |effects: &[Effect]| Envelope {
        stamp: None,
        effects: effects.to_vec(),
    };
    // What earlier versions wrote: a postcard or bincode sequence, or one
    // bincode effect, all without a stamp.
    let (f, plain) = encode_unstamped_effects(&effects);
    assert_eq!(decode_effects(f.as_u8(), &plain), Ok(unstamped(&effects)));
    let old = bincode::serde::encode_to_vec(&effects, bincode::config::standard()).unwrap();
    assert_eq!(
        decode_effects(Format::Effects.as_u8(), &old),
        Ok(unstamped(&effects))
    );
    let one = bincode::serde::encode_to_vec(&effects[1], bincode::config::standard()).unwrap();
    assert_eq!(
        decode_effects(Format::Effect.as_u8(), &one),
        Ok(unstamped(&effects[1..2]))
    );
    let reason = |format: Format, value: &[u8]| {
        decode_effects(format.as_u8(), value)
            .expect_err("refused")
            .to_string()
    };
    assert!(reason(Format::StampedEffects, &encode_effects(stamp, &[]).1).contains("no effects"));
    assert!(
        reason(Format::PostcardEffects, &encode_unstamped_effects(&[]).1).contains("no effects")
    );
    let cut = &value[..value.len() - 1];
    assert!(reason(Format::StampedEffects, cut).contains("invalid effects (postcard)"));
    assert!(reason(Format::PostcardEffects, &plain[..plain.len() - 1]).contains("invalid effects"));
    assert!(reason(Format::Effects, &old[..old.len() - 1]).contains("invalid effects (bincode)"));
    assert!(reason(Format::Effect, &old).contains("invalid effects"));
    // The marker says which codec and layout: a stamped record read as an
    // unstamped one is refused, not misread.
    assert!(decode_effects(Format::PostcardEffects.as_u8(), &value).is_err());
    assert!(reason(Format::Postcard, &value).contains("format marker 7"));
}

// Proves a forwarded event round-trips in postcard, a bincode one from an earlier version still decodes, and a record of another format is not taken for one.
#[test]
fn forwarded_records_decode_in_either_codec() {
    let f = Forwarded {
        from_partition: Partition(3),
        from_offset: u64::MAX - 1,
        format: Format::Json.as_u8(),
        payload: br#"{"type":"seen","user":1,"ts":5}"#.to_vec(),
    };
    let (format, value) = encode_forwarded(&f);
    assert_eq!(format, Format::PostcardForwarded);
    assert_eq!(
        decode_forwarded(format.as_u8(), &value),
        Some(Ok(f.clone()))
    );
    let old = bincode::serde::encode_to_vec(&f, bincode::config::standard()).unwrap();
    assert_eq!(
        decode_forwarded(Format::Forwarded.as_u8(), &old),
        Some(Ok(f))
    );
    assert!(matches!(
        decode_forwarded(format.as_u8(), &value[..2]),
        Some(Err(_))
    ));
    assert_eq!(decode_forwarded(Format::Json.as_u8(), &value), None);
}

// Proves every marker byte and name maps back to its format, and the bytes no format owns are refused.
#[test]
fn markers_and_names_round_trip() {
    for b in 0..=255u8 {
        match Format::from_u8(b) {
            Some(f) => {
                assert_eq!(f.as_u8(), b);
                assert_eq!(Format::from_name(f.name()), Some(f));
            }
            None => assert!(b == 0 || b > 10, "marker {b} unowned"),
        }
    }
}

// Proves each kind of bad record gets its own clear reason.
#[test]
fn bad_records_have_reasons() {
    let cases = [
        ("not json", "invalid JSON"),
        (
            r#"{"type":"bookmark","ts":1}"#,
            "unknown event type \"bookmark\"",
        ),
        (
            r#"{"follower":1,"followee":2,"ts":1}"#,
            "unknown event type \"\"",
        ),
        (
            r#"{"type":"follow","follower":1,"ts":1}"#,
            "follow: missing field `followee`",
        ),
        (
            r#"{"type":"post","author":1,"post_id":2}"#,
            "post: missing field `ts`",
        ),
        (
            r#"{"type":"post","author":-1,"post_id":2,"ts":1}"#,
            "post: field `author` must be a whole number",
        ),
        (
            r#"{"type":"post","author":1.5,"post_id":2,"ts":1}"#,
            "post: field `author` must be a whole number",
        ),
        (
            r#"{"type":"follow","follower":1,"followee":2,"ts":"1"}"#,
            "follow: field `ts` must be a whole number",
        ),
        (
            r#"{"type":"post","author":1,"post_id":2,"ts":1,"v":"one"}"#,
            "event: field `v` must be a whole number",
        ),
        (
            r#"{"type":"post","author":1,"post_id":2,"ts":1,"v":2}"#,
            "unsupported schema version 2",
        ),
        (
            r#"{"type":"follow","follower":3,"followee":3,"ts":1}"#,
            "cannot follow or unfollow themself",
        ),
        (
            r#"{"type":"post","author":0,"post_id":2,"ts":1}"#,
            "field `author` is 0",
        ),
    ];
    for (input, want) in cases {
        let err = json(input).expect_err(input).to_string();
        assert!(err.contains(want), "{input}: {err:?} lacks {want:?}");
    }
    assert_eq!(decode_event(9, b"{}"), Err(DecodeError::Format(9)));
    assert!(decode_event(Format::Bincode.as_u8(), &[0xff, 0xff]).is_err());
}

// Regression: a negative id's reason said "a whole number from 0", but 0 is refused too. Ids now say from 1; a timestamp, which may be 0, still says from 0.
#[test]
fn bad_field_reason_names_the_lowest_valid_value() {
    let reason = |input: &str| {
        decode_event(Format::Json.as_u8(), input.as_bytes())
            .expect_err(input)
            .to_string()
    };
    let id = reason(r#"{"type":"follow","follower":-3,"followee":2,"ts":1}"#);
    assert!(
        id.contains(
            "`follower` must be a whole number from 1 to 18446744073709551615 \
             (a JSON number, or a string of its decimal digits), got -3"
        ),
        "{id}"
    );
    let ts = reason(r#"{"type":"post","author":1,"post_id":2,"ts":-1}"#);
    assert!(
        ts.contains("`ts` must be a whole number from 0 to 18446744073709551615, got -1"),
        "{ts}"
    );
    let version = reason(r#"{"type":"post","author":1,"post_id":2,"ts":1,"v":"1"}"#);
    assert!(!version.contains("decimal digits"), "{version}");
    let padded = reason(r#"{"type":"post","author":"042","post_id":2,"ts":1}"#);
    assert!(padded.contains(r#"decimal digits), got "042""#), "{padded}");
}

// Proves the six filter events of docs/events.md decode (a mute with and without `until`), and that a self-filter, a missing target, a mute ending at or before its own time and an `until` written as a string are refused with their reasons.
#[test]
fn filter_events_decode_or_are_refused() {
    let filter = |change| {
        Ok(Event::Filter {
            user: UserId(1),
            target: UserId(2),
            change,
            ts: Ts(10),
        })
    };
    for (kind, change) in [
        ("block", FilterChange::Block),
        ("unblock", FilterChange::Unblock),
        ("mute", FilterChange::Mute { until: None }),
        ("unmute", FilterChange::Unmute),
        ("hide_reposts", FilterChange::HideReposts),
        ("show_reposts", FilterChange::ShowReposts),
    ] {
        let line = format!(r#"{{"type":"{kind}","user":1,"target":"2","ts":10}}"#);
        assert_eq!(json(&line), filter(change), "{kind}");
        assert_eq!(
            event_to_json(&filter(change).unwrap()).replace("\"2\"", "2"),
            line.replace("\"2\"", "2")
        );
    }
    assert_eq!(
        json(r#"{"type":"mute","user":1,"target":2,"ts":10,"until":20}"#),
        filter(FilterChange::Mute {
            until: Some(Ts(20))
        })
    );
    let refused = |line: &str| json(line).unwrap_err().to_string();
    assert!(
        refused(r#"{"type":"block","user":3,"target":3,"ts":1}"#).contains("cannot block themself")
    );
    assert!(refused(r#"{"type":"mute","user":1,"ts":1}"#).contains("missing field `target`"));
    assert!(
        refused(r#"{"type":"mute","user":1,"target":2,"ts":10,"until":10}"#)
            .contains("`until` 10 must be later than the event's `ts` 10")
    );
    assert!(
        refused(r#"{"type":"mute","user":1,"target":2,"ts":10,"until":"20"}"#)
            .contains("field `until` must be a whole number from 0")
    );
    // A mute that keeps notifications: `"notifications": false`, with or
    // without an end; `true` (or null) is the plain mute.
    let keeping = r#"{"type":"mute","user":1,"target":2,"until":20,"notifications":false,"ts":10}"#;
    let kept = filter(FilterChange::MuteKeepingNotifications {
        until: Some(Ts(20)),
    });
    assert_eq!(json(keeping), kept);
    assert_eq!(event_to_json(&kept.unwrap()), keeping);
    assert_eq!(
        json(r#"{"type":"mute","user":1,"target":2,"ts":10,"notifications":true}"#),
        filter(FilterChange::Mute { until: None })
    );
    assert!(
        refused(r#"{"type":"mute","user":1,"target":2,"ts":10,"notifications":"no"}"#)
            .contains("notifications")
    );
    assert!(refused(
        r#"{"type":"mute","user":1,"target":2,"ts":10,"until":9,"notifications":false}"#
    )
    .contains("must be later than the event's `ts`"));
}

// Proves a post's reply_to and mentions decode (ids as numbers or strings, null as absent), a post with neither stays a plain post, and every wrong shape or broken rule is refused with a reason naming the field and the rule.
#[test]
fn replies_and_mentions_decode_or_say_why_not() {
    let post = |more: &str| {
        json(&format!(
            r#"{{"type":"post","author":1,"post_id":5{more},"ts":1}}"#
        ))
    };
    assert_eq!(
        post(r#","reply_to":{"author":"2","post_id":7},"mentions":[3,"4"]"#),
        Ok(Event::post(
            UserId(1),
            PostId(5),
            Ts(1),
            Some((UserId(2), PostId(7))),
            vec![UserId(3), UserId(4)]
        ))
    );
    let plain = Event::Post {
        author: UserId(1),
        post_id: PostId(5),
        ts: Ts(1),
    };
    assert_eq!(
        post(r#","reply_to":null,"mentions":null"#),
        Ok(plain.clone())
    );
    assert_eq!(post(r#","mentions":[]"#), Ok(plain));
    let many: Vec<String> = (2..=52).map(|i| i.to_string()).collect();
    for (more, reason) in [
        (r#","reply_to":7"#, "field `reply_to` must be an object"),
        (
            r#","reply_to":{"author":2}"#,
            "missing field `reply_to.post_id`",
        ),
        (
            r#","reply_to":{"author":0,"post_id":7}"#,
            "`reply_to.author` is 0",
        ),
        (
            r#","reply_to":{"author":1,"post_id":5}"#,
            "names itself in `reply_to`",
        ),
        (r#","mentions":3"#, "field `mentions` must be an array"),
        (
            r#","mentions":[2,-1]"#,
            "field `mentions` must be a whole number",
        ),
        (r#","mentions":[0]"#, "`mentions` is 0"),
        (r#","mentions":[2,3,2]"#, "lists user 2 twice"),
        (r#","mentions":[1]"#, "lists the post's author 1"),
        (
            &format!(r#","mentions":[{}]"#, many.join(",")),
            "lists 51 users; a post mentions at most 50",
        ),
    ] {
        let got = post(more).map_err(|e| e.to_string());
        assert!(
            got.as_ref().is_err_and(|e| e.contains(reason)),
            "{more}: {got:?}, want an error with {reason:?}"
        );
    }
}
