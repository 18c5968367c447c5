//! The marker rule against its definition, with every redelivery pattern.

use super::*;
use proptest::prelude::*;

fn place(ts: u64, post: u64) -> Place {
    Place {
        ts: Ts(ts),
        post_id: PostId(post),
        author: UserId(post % 3 + 1),
    }
}

/// The definition: the greatest place since the last `force` (that
/// force's own place included), over the events in version order.
fn defined(seens: &[Seen]) -> Option<Place> {
    let from = seens.iter().rposition(|s| s.force).unwrap_or(0);
    seens[from..].iter().map(|s| s.place).max()
}

fn seens() -> impl Strategy<Value = Vec<Seen>> {
    proptest::collection::vec((0u64..6, 1u64..4, proptest::bool::weighted(0.2)), 0..20).prop_map(
        |v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (ts, post, force))| Seen {
                    place: place(ts, post),
                    force,
                    version: Version(i as u64 + 1),
                    ts: Ts(100 + i as u64),
                })
                .collect()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    // Proves the marker is the greatest place since the last force, whatever earlier events are delivered again in between, and names the event that set it.
    #[test]
    fn the_marker_is_the_greatest_place_since_the_last_force(
        seens in seens(),
        repeats in proptest::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 0..8),
    ) {
        let mut m: Option<Marker> = None;
        for (i, s) in seens.iter().enumerate() {
            if let Some(after) = next(m, *s) {
                m = Some(after);
            }
            // Redeliveries of any events applied so far change nothing.
            for (from, to) in &repeats {
                let (a, b) = (from.index(i + 1), to.index(i + 1));
                for r in &seens[a.min(b)..=a.max(b)] {
                    prop_assert_eq!(next(m, *r), None);
                }
            }
        }
        prop_assert_eq!(m.map(|m| m.read_up_to), defined(&seens));
        if let Some(m) = m {
            let setter = seens.iter().find(|s| s.version == m.moved).unwrap();
            prop_assert_eq!((setter.place, setter.ts), (m.read_up_to, m.since));
            prop_assert_eq!(m.version, seens.last().unwrap().version);
        }
    }
}

#[test]
// Proves a lower place from another device leaves the marker where it is, and a forced one moves it back.
fn a_lower_place_stays_below_unless_forced() {
    let at = |ts, force, v| Seen {
        place: place(ts, 1),
        force,
        version: Version(v),
        ts: Ts(v),
    };
    let m = next(None, at(50, false, 1)).unwrap();
    let m2 = next(Some(m), at(20, false, 2)).unwrap();
    assert_eq!((m2.read_up_to, m2.moved), (m.read_up_to, Version(1)));
    let m3 = next(Some(m2), at(20, true, 3)).unwrap();
    assert_eq!((m3.read_up_to, m3.moved), (place(20, 1), Version(3)));
}
