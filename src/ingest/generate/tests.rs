use super::*;
use std::collections::BTreeSet;

/// The generated graph is power-law: the top account has far more
/// followers than the median one, and nobody follows themselves.
#[test]
fn follows_are_power_law_and_valid() {
    let ev = follows(5000, 10, 0, &mut Rng(1));
    let mut n = vec![0u64; 5001];
    for e in &ev {
        assert!(e.validate().is_ok());
        if let Event::Follow { followee, .. } = e {
            n[followee.0 as usize] += 1;
        }
    }
    let mut sorted = n[1..].to_vec();
    sorted.sort_unstable();
    assert!(
        n[1] > 100 * sorted[2500].max(1),
        "top {} median {}",
        n[1],
        sorted[2500]
    );
}

/// The follow-heavy shape: valid events, each pair followed once, about
/// the asked share of follows, most accounts small and a few big, and
/// most active users posting.
#[test]
fn follow_heavy_has_its_shape() {
    let (users, n) = (20_000, 100_000);
    let ev = follow_heavy(users, n, 0.45, 0, &mut Rng(7));
    assert_eq!(ev.len(), n as usize);
    let mut pairs = std::collections::HashSet::new();
    let mut followers = vec![0u64; users as usize + 1];
    let (mut actors, mut posters) = (
        std::collections::HashSet::new(),
        std::collections::HashSet::new(),
    );
    for e in &ev {
        assert!(e.validate().is_ok());
        actors.insert(e.actor());
        match e {
            Event::Follow {
                follower, followee, ..
            } => {
                assert!(
                    pairs.insert((follower.0, followee.0)),
                    "one follow per pair"
                );
                followers[followee.0 as usize] += 1;
            }
            Event::Post { author, .. } => {
                posters.insert(*author);
            }
            _ => unreachable!("only follows and posts"),
        }
    }
    let share = pairs.len() as f64 / n as f64;
    assert!((0.35..=0.45).contains(&share), "follow share {share}");
    let mut sorted = followers[1..].to_vec();
    sorted.sort_unstable();
    let (median, top) = (sorted[sorted.len() / 2], sorted[sorted.len() - 1]);
    assert!(median <= 2 && top >= 1_000, "median {median}, top {top}");
    assert!(
        posters.len() * 2 > actors.len(),
        "{} of {} post",
        posters.len(),
        actors.len()
    );
}

/// Activity writes exactly the posts asked for, only valid events,
/// unfollows only edges that exist, filters and likes at about the rates
/// asked for, each undo of a filter that is on and each unlike of a like
/// given.
#[test]
fn activity_is_valid() {
    let ev = follows(300, 5, 0, &mut Rng(2));
    let mut edges: std::collections::HashSet<(u64, u64)> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Follow {
                follower, followee, ..
            } => Some((follower.0, followee.0)),
            _ => None,
        })
        .collect();
    let mut g = Graph::from_edges(edges.iter().copied());
    let act = activity(
        &mut g,
        Activity {
            posts: 2000,
            filter_rate: 0.2,
            like_rate: 2.0,
            ..Activity::default()
        },
        10,
        1,
        &mut Rng(3),
    );
    let mut on: Vec<(u64, u64)> = Vec::new();
    let mut filters = 0;
    let (mut likes, mut unlikes) = (0, 0);
    let mut liked: BTreeSet<(u64, u64, u64)> = BTreeSet::new();
    let posts = act
        .iter()
        .filter(|e| matches!(e, Event::Post { .. }))
        .count();
    assert_eq!(posts, 2000);
    for e in &act {
        assert!(e.validate().is_ok());
        match e {
            Event::Follow {
                follower, followee, ..
            } => {
                assert!(edges.insert((follower.0, followee.0)))
            }
            Event::Unfollow {
                follower, followee, ..
            } => {
                assert!(edges.remove(&(follower.0, followee.0)))
            }
            Event::Filter {
                user,
                target,
                change,
                ..
            } => {
                filters += 1;
                let undo = matches!(
                    change,
                    FilterChange::Unblock | FilterChange::Unmute | FilterChange::ShowReposts
                );
                let pair = (user.0, target.0);
                if undo {
                    let at = on.iter().position(|p| *p == pair);
                    on.swap_remove(at.expect("an undo of a filter on"));
                } else {
                    on.push(pair);
                }
            }
            Event::Like {
                user,
                author,
                post_id,
                liked: on,
                ..
            } => {
                let like = (user.0, author.0, post_id.0);
                if *on {
                    likes += 1;
                    liked.insert(like);
                } else {
                    unlikes += 1;
                    assert!(liked.contains(&like), "an unlike of a like given: {like:?}");
                }
            }
            _ => {}
        }
    }
    // About 0.2 a post, times the mean burst of 3, on a chance per burst.
    assert!((150..=450).contains(&filters), "{filters} filter events");
    // Two a post, a tenth of them unlikes.
    assert!(
        (3000..=5000).contains(&(likes + unlikes)),
        "{likes} likes, {unlikes} unlikes"
    );
    assert!((200..=600).contains(&unlikes), "{unlikes} unlikes");
}

/// With dormant users, none of them acts after the graph is built
/// (but for the rare post as a most-followed account), `seen` events
/// come at the rate asked for, and about the share asked for is dormant.
#[test]
fn dormant_users_never_act() {
    let ev = follows(1000, 5, 0, &mut Rng(2));
    let edges = ev.iter().filter_map(|e| match e {
        Event::Follow {
            follower, followee, ..
        } => Some((follower.0, followee.0)),
        _ => None,
    });
    let mut g = Graph::from_edges(edges);
    let a = Activity {
        posts: 5000,
        dormant_share: 0.5,
        seen_rate: 1.0,
        ..Activity::default()
    };
    let act = activity(&mut g, a, 10, 1, &mut Rng(3));
    let quiet = (1..=1000).filter(|&u| dormant(u, 0.5)).count();
    assert!((400..600).contains(&quiet), "{quiet} of 1000 dormant");
    let (mut seen, mut dormant_posts) = (0, 0);
    for e in &act {
        let quiet = dormant(e.actor().0, 0.5);
        match e {
            Event::Post { .. } => dormant_posts += usize::from(quiet),
            _ => assert!(!quiet, "{e:?}"),
        }
        seen += usize::from(matches!(e, Event::Seen { .. } | Event::Mark { .. }));
    }
    // Only the most-followed accounts' share (0.2%) may be dormant.
    assert!(
        dormant_posts <= 30,
        "{dormant_posts} posts by dormant users"
    );
    assert!((4500..5500).contains(&seen), "{seen} seen for 5000 posts");
}
