//! The grouping rule against its definition: every input order, repeats,
//! and the boundaries at exactly 12 hours and 50 items.

use super::*;
use crate::event::PostId;
use proptest::prelude::*;

const HOUR: u64 = 60 * 60 * 1000;

fn key(kind: u8, post: u64) -> GroupKey {
    let p = (UserId(1), PostId(post));
    match kind % 5 {
        0 => GroupKey::Follows,
        1 => GroupKey::Likes(p),
        2 => GroupKey::Reposts(p),
        3 => GroupKey::Reply(p),
        _ => GroupKey::Mention(p),
    }
}

fn items() -> impl Strategy<Value = Vec<Item>> {
    // Few keys and actors, times a few hours apart at most, so groups
    // meet both limits and items repeat.
    proptest::collection::vec((0u8..5, 1u64..3, 0u64..40, 1u64..60), 0..160).prop_map(|v| {
        v.into_iter()
            .map(|(kind, post, t, actor)| Item {
                key: key(kind, post),
                ts: Ts(t * HOUR / 4 + actor % 3),
                actor: UserId(actor),
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    // Proves the groups are a function of the set of items (any order, any repeats), partition them, keep each group within one key, 12 hours between neighbours and 50 items, start a new group only where a limit says so, and come newest first with no two places equal.
    #[test]
    fn groups_follow_the_rule_whatever_the_order(items in items(), seed in any::<u64>()) {
        let groups = group(items.clone());
        // Any order and repeats: the same groups.
        let mut shuffled = items.clone();
        shuffled.extend(items.iter().take(seed as usize % 7));
        let n = shuffled.len().max(1);
        shuffled.rotate_left(seed as usize % n);
        shuffled.reverse();
        prop_assert_eq!(&group(shuffled), &groups);
        // A partition of the distinct items.
        let mut want: Vec<Item> = items.clone();
        want.sort_unstable();
        want.dedup();
        let mut got: Vec<Item> = groups
            .iter()
            .flat_map(|g| g.items.iter().map(|&(ts, actor)| Item { key: g.key, ts, actor }))
            .collect();
        got.sort_unstable();
        prop_assert_eq!(got, want);
        for g in &groups {
            prop_assert!(!g.items.is_empty());
            prop_assert!(g.items.windows(2).all(|w| w[0] < w[1]), "oldest first");
            prop_assert!(g.items.windows(2).all(|w| w[1].0 .0 - w[0].0 .0 <= GROUP_GAP_MS));
            prop_assert!(g.items.len() <= GROUP_MOST);
            prop_assert!(g.key.gathers() || g.items.len() == 1, "replies and mentions alone");
        }
        // Newest first, places all different.
        prop_assert!(groups.windows(2).all(|w| w[0].place() > w[1].place()));
        // Maximal: of one gathering key in time order, a group ends only
        // where the next item is more than 12 hours later or it is full.
        let mut by_key = groups.clone();
        by_key.sort_by_key(|g| (g.key, g.items[0]));
        for w in by_key.windows(2) {
            if w[0].key == w[1].key && w[0].key.gathers() {
                let gap = w[1].items[0].0 .0 - w[0].newest().0;
                prop_assert!(gap > GROUP_GAP_MS || w[0].items.len() == GROUP_MOST);
            }
        }
    }
}

fn likes_at(times: &[u64]) -> Vec<Item> {
    let post = (UserId(1), PostId(7));
    times
        .iter()
        .enumerate()
        .map(|(i, &ts)| Item {
            key: GroupKey::Likes(post),
            ts: Ts(ts),
            actor: UserId(i as u64 + 1),
        })
        .collect()
}

// Proves a gap of exactly 12 hours keeps two likes in one group and a millisecond more splits them.
#[test]
fn twelve_hours_apart_is_one_group_and_a_millisecond_more_is_two() {
    assert_eq!(group(likes_at(&[0, GROUP_GAP_MS])).len(), 1);
    let two = group(likes_at(&[0, GROUP_GAP_MS + 1]));
    assert_eq!(two.len(), 2);
    assert_eq!(
        two[0].newest(),
        Ts(GROUP_GAP_MS + 1),
        "the newer group first"
    );
}

// Proves 50 likes at one time are one group and the 51st (by actor) starts the next, placed first.
#[test]
fn the_fifty_first_item_starts_a_group() {
    let fifty = group(likes_at(&[5; GROUP_MOST]));
    assert_eq!(fifty.len(), 1);
    assert_eq!(fifty[0].items.len(), GROUP_MOST);
    let more = group(likes_at(&[5; GROUP_MOST + 1]));
    assert_eq!(more.len(), 2);
    assert_eq!(more[0].items, vec![(Ts(5), UserId(GROUP_MOST as u64 + 1))]);
    assert_eq!(more[1].items.len(), GROUP_MOST);
}

// Proves replies and mentions never gather, and follows gather across posts while likes gather per post.
#[test]
fn what_gathers() {
    let at = |key, ts, actor| Item {
        key,
        ts: Ts(ts),
        actor: UserId(actor),
    };
    let p = |id| (UserId(1), PostId(id));
    let groups = group([
        at(GroupKey::Reply(p(1)), 1, 2),
        at(GroupKey::Mention(p(2)), 2, 2),
        at(GroupKey::Follows, 3, 2),
        at(GroupKey::Follows, 4, 3),
        at(GroupKey::Likes(p(8)), 5, 2),
        at(GroupKey::Likes(p(9)), 6, 2),
    ]);
    let keys: Vec<_> = groups.iter().map(|g| (g.key, g.items.len())).collect();
    assert_eq!(
        keys,
        vec![
            (GroupKey::Likes(p(9)), 1),
            (GroupKey::Likes(p(8)), 1),
            (GroupKey::Follows, 2),
            (GroupKey::Mention(p(2)), 1),
            (GroupKey::Reply(p(1)), 1),
        ]
    );
}
