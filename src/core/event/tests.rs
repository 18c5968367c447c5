//! Event validation and the kinds' table.

use super::*;

// Proves `EventKind::all` lists every kind once, in declaration order, so `index` and `COUNT` make a table by kind.
#[test]
fn kinds_are_listed_in_declaration_order() {
    let all: Vec<EventKind> = EventKind::all().collect();
    assert_eq!(all.len(), EventKind::COUNT);
    for (i, k) in all.iter().enumerate() {
        assert_eq!(k.index(), i, "{k:?}");
    }
}

// Proves a ts in seconds or in micro/nanoseconds is refused at both edges of each window, and synthetic and real ms clocks are kept.
#[test]
fn ts_in_the_wrong_unit_is_refused() {
    let at = |ts| {
        Event::Seen {
            user: UserId(1),
            ts: Ts(ts),
        }
        .validate()
    };
    for ok in [
        0,
        29,
        Ts::SECONDS_FROM - 1,
        Ts::MILLIS_FROM,
        1_700_000_000_000,
        Ts::MILLIS_UNTIL - 1,
    ] {
        assert_eq!(at(ok), Ok(()), "{ok}");
    }
    for (bad, unit) in [
        (Ts::SECONDS_FROM, "seconds"),
        (1_700_000_000, "seconds"),
        (Ts::MILLIS_FROM - 1, "seconds"),
        (Ts::MILLIS_UNTIL, "microseconds or nanoseconds"),
        (1_700_000_000_000_000, "microseconds or nanoseconds"),
        (u64::MAX, "microseconds or nanoseconds"),
    ] {
        match at(bad) {
            Err(InvalidEvent::TsUnit { ts, unit: u, .. }) => assert_eq!((ts, u), (bad, unit)),
            other => panic!("{bad}: {other:?}"),
        }
    }
    let msg = at(1_700_000_000).unwrap_err().to_string();
    assert!(
        msg.contains("looks like seconds") && msg.contains("multiply seconds by 1000"),
        "{msg}"
    );
}

// Proves validation rejects exactly the records docs/events.md says are not events.
#[test]
fn validation_rules() {
    let ok = Event::Follow {
        follower: UserId(1),
        followee: UserId(2),
        ts: Ts(0),
    };
    assert_eq!(ok.validate(), Ok(()));
    let selfie = Event::Unfollow {
        follower: UserId(3),
        followee: UserId(3),
        ts: Ts(0),
    };
    assert_eq!(
        selfie.validate(),
        Err(InvalidEvent::SelfFollow { user: UserId(3) })
    );
    let zero = Event::Post {
        author: UserId(1),
        post_id: PostId(0),
        ts: Ts(5),
    };
    assert_eq!(
        zero.validate(),
        Err(InvalidEvent::ZeroId { field: "post_id" })
    );
    let nobody = Event::Seen {
        user: UserId(0),
        ts: Ts(5),
    };
    assert_eq!(
        nobody.validate(),
        Err(InvalidEvent::ZeroId { field: "user" })
    );
}
