//! Each transition of an inactive reader on one partition, message by
//! message.

use super::super::testkit::*;
use crate::partition::Partition;
use crate::{views, Ctx, Effect};

/// One partition owning everyone, inbox of 3, readers asleep after 10 of
/// log time; authors pulled from 2 followers with `pull`, else never.
fn ctx(pull: bool) -> Ctx {
    Ctx {
        partition: Partition(0),
        partitions: 1,
        inbox_cap: 3,
        fanout_chunk: 2,
        pull_threshold: Some(if pull { 2 } else { 0 }),
        inactive_after: Some(10),
    }
}

fn seen(u: UserId, ts: u64) -> Event {
    Event::Seen {
        user: u,
        ts: Ts(ts),
    }
}

/// B (last active at 1) follows A and C; A posts at 5 (delivered), then
/// at 20 and on (B asleep from the first of those).
fn asleep_reader(pull: bool) -> Part {
    let mut part = Part::with(ctx(pull));
    part.then(follow(B, A)).then(follow(B, C)).then(post(A, 5));
    assert_eq!(part.held(B), (vec![5], false));
    for p in 20..25 {
        part.then(post(A, p));
    }
    part
}

// Proves a delivery more than the span after the reader's last own event puts them asleep: the inbox is emptied, later deliveries skip it, and the whole timeline is read by the pull path.
#[test]
fn an_idle_reader_falls_asleep_and_reads_by_pull() {
    let part = asleep_reader(false);
    let u = views::user(&part.kv, B).unwrap();
    assert!(u.asleep);
    assert!(u.marks > 0, "the inline read is off for good");
    assert_eq!(part.inbox(B), Vec::<u64>::new());
    assert_eq!(part.held(B), (vec![], true));
}

// Proves a returning reader with a full outbox behind them asks every followee, reads by pull until the last answer, then reads the refilled, trimmed inbox.
#[test]
fn a_returning_reader_is_refilled_before_the_inbox_serves_them() {
    let mut part = asleep_reader(false);
    part.then(post(C, 30));
    part.event(seen(B, 40));
    assert_eq!(part.queued(), vec!["refill", "refill"]);
    assert_eq!(views::user(&part.kv, B).unwrap().refills, 2);
    // A answers first: C's answer is still awaited, the pull path reads.
    let ask_a = part.queue.remove(0);
    part.effect(&ask_a.effect);
    assert_eq!(part.queued(), vec!["refill", "refilled"]);
    let answer_a = part.queue.remove(1);
    part.effect(&answer_a.effect);
    assert_eq!(part.held(B), (vec![], true));
    part.settle();
    let u = views::user(&part.kv, B).unwrap();
    assert_eq!((u.asleep, u.refills), (false, 0));
    // A's newest 3 were sent (A has older ones: the horizon is at the
    // oldest sent), with C's post; trimmed to 3.
    assert_eq!(part.held(B), (vec![30, 24, 23], true));
    // Awake again: deliveries enter the inbox.
    part.then(post(C, 41));
    assert_eq!(part.held(B), (vec![41, 30, 24], true));
}

// Proves an answer to an earlier wake (the reader fell asleep again before it came) is applied but not counted: the reader waits for the answers of the last wake.
#[test]
fn an_answer_to_an_earlier_wake_is_not_counted() {
    let mut part = asleep_reader(false);
    part.event(seen(B, 21));
    let asks: Vec<_> = part.queue.drain(..).collect();
    for a in &asks {
        part.effect(&a.effect);
    }
    assert_eq!(part.queued(), vec!["refilled", "refilled"]);
    let first_answers: Vec<_> = part.queue.drain(..).collect();
    // Asleep again (a post 10 after the wake), and awake again.
    part.then(post(A, 40)).event(seen(B, 41));
    assert_eq!(views::user(&part.kv, B).unwrap().wakes, 2);
    let second_asks: Vec<_> = part.queue.drain(..).collect();
    for a in &first_answers {
        part.effect(&a.effect);
    }
    assert_eq!(views::user(&part.kv, B).unwrap().refills, 2);
    assert_eq!(part.held(B), (vec![], true));
    for a in &second_asks {
        part.effect(&a.effect);
    }
    part.settle();
    assert_eq!(views::user(&part.kv, B).unwrap().refills, 0);
    assert_eq!(part.held(B), (vec![40, 24], true));
}

// Proves an unfollow while a refill is awaited ends the wait for it, and its late answer (the edge gone) changes nothing.
#[test]
fn an_unfollow_ends_the_wait_for_its_refill() {
    let mut part = asleep_reader(false);
    part.event(seen(B, 40));
    assert_eq!(views::user(&part.kv, B).unwrap().refills, 2);
    part.event(unfollow(B, A));
    assert_eq!(views::user(&part.kv, B).unwrap().refills, 1);
    part.settle();
    let u = views::user(&part.kv, B).unwrap();
    assert_eq!((u.refills, u.followees), (0, 1));
    assert_eq!(part.held(B), (vec![], false));
}

// Proves a pulled followee is not asked on waking (the partition's copy serves it) and its posts are on the page once the others answered.
#[test]
fn a_pulled_followee_is_not_asked_on_waking() {
    let mut part = asleep_reader(true);
    part.then(follow(D, A));
    assert!(views::user(&part.kv, A).unwrap().pulled);
    part.then(post(C, 30));
    assert!(views::user(&part.kv, B).unwrap().asleep);
    part.event(seen(B, 40));
    let asked: Vec<_> = part
        .queue
        .iter()
        .map(|o| match &o.effect {
            Effect::Refill { author, .. } => *author,
            e => panic!("unexpected {e:?}"),
        })
        .collect();
    assert_eq!(asked, vec![C]);
    part.settle();
    assert_eq!(part.held(B), (vec![30, 24, 23], true));
}

// Proves a reader asleep when the span is turned off (a processor restarted without it) still wakes at their next event, and nobody falls asleep any more.
#[test]
fn without_a_span_nobody_falls_asleep_and_sleepers_still_wake() {
    let mut part = asleep_reader(false);
    part.ctx.inactive_after = None;
    part.then(post(C, 100));
    assert!(views::user(&part.kv, B).unwrap().asleep);
    part.then(seen(B, 2)).then(post(C, 1_000));
    let u = views::user(&part.kv, B).unwrap();
    assert_eq!((u.asleep, u.refills), (false, 0));
    assert_eq!(part.held(B), (vec![1_000, 100, 24], true));
}
