//! The contract on named scenarios the property tests reach only by chance:
//! a stale forwarded copy, a delivery replayed before the follow it was sent
//! for, an owner whose first step applies nothing, and an old owner whose
//! late records (a backfill, a delivery, a copy) arrive after its
//! successor's newer ones and are fenced.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::oracle::Oracle;
use feedlog::core::codec::{self, Format};
use feedlog::core::event::{Event, EventKind, PostId, Ts, UserId};
use feedlog::core::partition::partition_for;
use feedlog::core::position::Positions;
use feedlog::core::Epoch;
use feedlog::core::Partition;
use feedlog::ingest::produce::Producer;
use feedlog::log::Topic;
use feedlog::state::datadir::DataDir;
use feedlog::task::embedded::{Processor, ProcessorConfig};
use feedlog::task::{BatchLimits, CrashPoint, PartitionTask, Takeover, TaskError};

// Proves a stale copy of a forwarded event (same source position, arriving after a later event of that actor) is skipped, not re-applied.
#[test]
fn stale_forwarded_copy_is_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = DataDir::create_or_open(tmp.path(), Some(2)).unwrap();
    let (a, b) = (UserId(3), UserId(4));
    let owner = partition_for(a, 2);
    let forwarded = |from_offset: u64, e: &Event| codec::Forwarded {
        from_partition: Partition(1 - owner.0),
        from_offset,
        format: Format::Postcard.as_u8(),
        payload: codec::event_to_postcard(e),
    };
    let follow = Event::Follow {
        follower: a,
        followee: b,
        ts: Ts(10),
    };
    let unfollow = Event::Unfollow {
        follower: a,
        followee: b,
        ts: Ts(11),
    };
    let mut producer = Producer::new(&dir).unwrap();
    for (offset, e) in [(0, &follow), (1, &unfollow), (0, &follow)] {
        let (format, value) = codec::encode_forwarded(&forwarded(offset, e));
        producer
            .raw(owner, format.as_u8(), a.to_string().into_bytes(), value)
            .unwrap();
    }
    producer.finish().unwrap();
    drop(producer);
    let processor = Processor::open(
        &dir,
        ProcessorConfig {
            sync: false,
            ..ProcessorConfig::default()
        },
    )
    .unwrap();
    let stats = processor
        .run(&feedlog::task::Shutdown::new(), true)
        .unwrap();
    assert_eq!(
        (
            stats.events.get(EventKind::Follow),
            stats.events.get(EventKind::Unfollow),
            stats.duplicates
        ),
        (1, 1, 1)
    );
    let reader = feedlog::ops::serve::reader_of(&processor);
    assert_eq!(
        reader.counters(a).unwrap().followees,
        0,
        "the unfollow stands"
    );
    assert!(reader.followers(b, 10, None).unwrap().items.is_empty());
}

// Proves a rebuild from the log (state dropped, both inputs replayed from offset 0) equals the oracle when a delivery comes up before the follow it was sent for: it waits for it.
#[test]
fn rebuild_applies_a_delivery_after_its_follow() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = DataDir::create_or_open(tmp.path(), Some(2)).unwrap();
    let a = UserId(1);
    let b = (2..)
        .map(UserId)
        .find(|u| partition_for(*u, 2) != partition_for(a, 2))
        .unwrap();
    let cfg = ProcessorConfig {
        limits: BatchLimits {
            max_records: 4,
            max_bytes: 1 << 20,
            ..BatchLimits::default()
        },
        sync: false,
        cache_bytes: 1 << 20,
        kept: feedlog::state::Kept::DEFAULT,
        ..ProcessorConfig::default()
    };
    let run = |events: &[Event]| {
        let mut producer = Producer::new(&dir).unwrap();
        for e in events {
            producer.event(e, Format::Json).unwrap();
        }
        producer.finish().unwrap();
        drop(producer);
        Processor::open(&dir, cfg.clone())
            .unwrap()
            .run(&feedlog::task::Shutdown::new(), true)
            .unwrap();
    };
    // A's own events fill more than one batch before its follow of B, and
    // B posts only once the follow is known: the effects log holds
    // deliveries to A that a replay meets before A's follow.
    let mut first: Vec<Event> = (1..=10)
        .map(|i| Event::Post {
            author: a,
            post_id: PostId(i),
            ts: Ts(i),
        })
        .collect();
    first.push(Event::Follow {
        follower: a,
        followee: b,
        ts: Ts(20),
    });
    run(&first);
    let second: Vec<Event> = (100..110)
        .map(|i| Event::Post {
            author: b,
            post_id: PostId(i),
            ts: Ts(i),
        })
        .collect();
    run(&second);
    // Rebuild quietly: everything in the log was answered already, so
    // nothing may be emitted, and nothing can heal a dropped delivery.
    std::fs::remove_dir_all(tmp.path().join("state")).unwrap();
    let processor = Processor::open(&dir, cfg.clone()).unwrap();
    let logs = processor.logs();
    let ends: Vec<Positions> = Partition::all(2)
        .map(|p| {
            Positions::new(
                logs.end_offset(Topic::Events, p).unwrap(),
                logs.end_offset(Topic::Effects, p).unwrap(),
            )
        })
        .collect();
    let mut tasks: Vec<PartitionTask> = Partition::all(2)
        .map(|p| {
            let takeover = Takeover {
                epoch: Epoch(1),
                emitted: Some(ends[p.index()]),
                reship: true,
            };
            processor.task_after(p, takeover).unwrap()
        })
        .collect();
    while tasks
        .iter_mut()
        .map(|t| t.step(&mut feedlog::task::NoFaults).unwrap().input())
        .sum::<u64>()
        > 0
    {}
    for (p, t) in tasks.iter().enumerate() {
        assert!(t.caught_up());
        assert_eq!(t.positions(), ends[p], "everything applied");
        assert_eq!(
            logs.end_offset(Topic::Effects, Partition(p as u32))
                .unwrap(),
            ends[p].effects.0,
            "nothing emitted"
        );
    }
    let mut oracle = Oracle::default();
    for e in first.iter().chain(&second) {
        oracle.apply(e);
    }
    common::check_all(
        &feedlog::ops::serve::reader_of(&processor),
        &oracle,
        b.0.max(a.0),
        3,
    )
    .unwrap();
}

// Proves a processor asks again for its pull threshold when another one comes into force after it caught up (a previous owner's request, applied late), so the configured one ends in force.
#[test]
fn a_late_threshold_request_is_asked_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = DataDir::create_or_open(tmp.path(), Some(1)).unwrap();
    let seen = |ts| Event::Seen {
        user: UserId(1),
        ts: Ts(ts),
    };
    // One write per step: an event that writes ends the step before the
    // effects waiting behind it.
    let open = |threshold| {
        let cfg = ProcessorConfig {
            pull_threshold: Some(threshold),
            sync: false,
            limits: BatchLimits {
                max_records: 1,
                max_writes: 1,
                ..BatchLimits::default()
            },
            ..ProcessorConfig::default()
        };
        Processor::open(&dir, cfg).unwrap()
    };
    let produce = |e: Event| {
        let mut producer = Producer::new(&dir).unwrap();
        producer.event(&e, Format::Json).unwrap();
        producer.finish().unwrap();
    };
    let in_force =
        |p: &Processor| feedlog::core::views::pull_threshold(&*p.store(Partition(0))).unwrap();
    produce(seen(1));
    let five = open(5);
    five.run(&feedlog::task::Shutdown::new(), true).unwrap();
    assert_eq!(in_force(&five), 5);
    drop(five);
    // An owner configured with 7 catches up, asks for it, and stops
    // before its request is applied.
    produce(seen(2));
    let seven = open(7);
    let mut task = seven.task(Partition(0)).unwrap();
    task.step(&mut feedlog::task::NoFaults).unwrap();
    assert_eq!(in_force(&seven), 5, "the request is not applied yet");
    drop(task);
    drop(seven);
    // The next owner's first step applies this follow alone and finds 5 in
    // force; the request for 7 is applied after it.
    produce(Event::Follow {
        follower: UserId(1),
        followee: UserId(2),
        ts: Ts(3),
    });
    let five = open(5);
    five.run(&feedlog::task::Shutdown::new(), true).unwrap();
    assert_eq!(in_force(&five), 5);
}

// Proves a processor that starts on a backlog decides under its threshold from the first event: the same log does the same inbox work in one big batch as in one-record steps (an author pulled from their third follower gets no inbox deliveries), where a threshold asked for once caught up came after the backlog's follows in one big batch.
#[test]
fn a_backlog_is_processed_under_the_starting_threshold_from_its_first_event() {
    let run = |max_records: usize| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::create_or_open(tmp.path(), Some(1)).unwrap();
        let cfg = ProcessorConfig {
            pull_threshold: Some(3),
            sync: false,
            cache_bytes: 1 << 20,
            kept: feedlog::state::Kept::DEFAULT,
            limits: BatchLimits {
                max_records,
                ..BatchLimits::default()
            },
            ..ProcessorConfig::default()
        };
        // Five follows of user 1, processed; then three posts of theirs.
        let mut delivered = 0;
        for phase in [
            (2..=6)
                .map(|f| Event::Follow {
                    follower: UserId(f),
                    followee: UserId(1),
                    ts: Ts(f),
                })
                .collect::<Vec<_>>(),
            (1..=3)
                .map(|p| Event::Post {
                    author: UserId(1),
                    post_id: PostId(p),
                    ts: Ts(10 + p),
                })
                .collect(),
        ] {
            let mut producer = Producer::new(&dir).unwrap();
            for e in &phase {
                producer.event(e, Format::Json).unwrap();
            }
            producer.finish().unwrap();
            drop(producer);
            let processor = Processor::open(&dir, cfg.clone()).unwrap();
            let totals = processor
                .run(&feedlog::task::Shutdown::new(), true)
                .unwrap();
            delivered += totals.delivered;
            let reader = feedlog::ops::serve::reader_of(&processor);
            let page = reader.timeline(UserId(6), 10, None).unwrap();
            assert_eq!(
                page.items.len(),
                phase.len() % 5,
                "the author's posts are read"
            );
        }
        delivered
    };
    let (one_batch, one_by_one) = (run(10_000), run(1));
    assert_eq!(one_batch, one_by_one, "the same inbox work");
    assert_eq!(one_batch, 0, "author 1 was pulled before their first post");
}

// Regression: an owner's first step that applied nothing (a delivery waiting for a follow not yet in the log) marked its pull-threshold request as sent and dropped it with the step's uncommitted records, so the configured threshold never came into force. It is now asked with the first batch that commits.
#[test]
fn a_first_step_that_applies_nothing_keeps_the_owners_requests() {
    use feedlog::core::effect::Effect;
    use feedlog::core::position::Version;
    use feedlog::log::{Log, NewRecord};
    let tmp = tempfile::tempdir().unwrap();
    let mut dir = DataDir::create_or_open(tmp.path(), Some(1)).unwrap();
    // The directory's states start with another threshold than the
    // owner's, which the owner then asks for.
    dir.starting_threshold(Some(feedlog::core::DEFAULT_PULL_THRESHOLD))
        .unwrap();
    let (author, follower) = (UserId(1), UserId(2));
    // effects[0]: a delivery for the follow that will be events[0] offset 0.
    let stamp = feedlog::core::Stamp {
        from: Partition(0),
        epoch: Epoch::ZERO,
    };
    let (format, value) = codec::encode_effects(
        stamp,
        &[Effect::Deliver {
            author,
            post_id: PostId(9),
            ts: Ts(5),
            targets: vec![(follower, Version(1))],
        }],
    );
    let logs: std::sync::Arc<dyn Log> = std::sync::Arc::new(dir.logs());
    let mut sink = logs.sink(false).unwrap();
    let rec = NewRecord {
        timestamp_ms: 0,
        format: format.into(),
        key: b"2",
        value: &value,
    };
    sink.append(Topic::Effects, Partition(0), &[rec]).unwrap();
    sink.flush().unwrap();
    drop(sink);
    let cfg = ProcessorConfig {
        pull_threshold: Some(3),
        sync: false,
        cache_bytes: 1 << 20,
        kept: feedlog::state::Kept::DEFAULT,
        ..ProcessorConfig::default()
    };
    let processor = Processor::open(&dir, cfg).unwrap();
    let threshold = || {
        processor
            .store(Partition(0))
            .meta_u64(feedlog::core::keys::PULL_THRESHOLD)
            .unwrap()
    };
    // One owner for the whole scenario, as a long `run` or a Kafka
    // processor keeps it. Its first step applies nothing: the delivery
    // waits for its follow.
    let takeover = Takeover {
        epoch: Epoch(1),
        emitted: Some(Positions::START),
        reship: false,
    };
    let mut task = processor.task_after(Partition(0), takeover).unwrap();
    let step = |task: &mut PartitionTask| task.step(&mut feedlog::task::NoFaults).unwrap();
    assert_eq!(step(&mut task).input(), 0);
    let mut producer = Producer::new(&dir).unwrap();
    let follow = Event::Follow {
        follower,
        followee: author,
        ts: Ts(4),
    };
    producer.event(&follow, Format::Json).unwrap();
    producer.finish().unwrap();
    drop(producer);
    // The follow and the delivery, then the request's own record.
    while step(&mut task).input() > 0 {}
    assert_eq!(threshold(), 3, "the configured threshold is in force");
    let reader = feedlog::ops::serve::reader_of(&processor);
    let page = reader.timeline(follower, 10, None).unwrap();
    assert_eq!(page.items.len(), 1, "the delivery waited for its follow");
}

/// How an old owner's late record can do damage without the fence.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stale {
    /// Its backfill, replacing the follower's entries of the author, drops
    /// a newer post its successor delivered.
    Backfill,
    /// Its delivery brings back a post its successor delivered and retracted.
    Delivery,
    /// Its copy of a pulled author drops a newer post from the partition's copy.
    Copy,
}

/// A's partition has an owner (epoch 1) that commits its answer to an
/// input and stalls before shipping it; its successor (epoch `successor`)
/// takes the partition over from the group's positions, decides that
/// input anew and answers newer events; then the old owner ships, late.
/// Returns the difference from the oracle (if any) after everything is
/// applied, and the records the fence skipped in F's partition.
fn stale_owner(stale: Stale, successor: u64) -> (Result<(), String>, u64) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = DataDir::create_or_open(tmp.path(), Some(2)).unwrap();
    let a = UserId(1);
    let f = (2..)
        .map(UserId)
        .find(|u| partition_for(*u, 2) != partition_for(a, 2))
        .unwrap();
    let (pa, pf) = (partition_for(a, 2), partition_for(f, 2));
    let cfg = ProcessorConfig {
        // One record per step, so the stall lands on the input named.
        limits: BatchLimits {
            max_records: 1,
            ..BatchLimits::default()
        },
        // Copy: authors with a follower are pulled.
        pull_threshold: (stale == Stale::Copy).then_some(1),
        inactive_after: None,
        sync: false,
        cache_bytes: 1 << 20,
        kept: feedlog::state::Kept::DEFAULT,
        ..ProcessorConfig::default()
    };
    let mut oracle = Oracle::default();
    let produce = |events: &[Event], oracle: &mut Oracle| {
        let mut producer = Producer::new(&dir).unwrap();
        for e in events {
            producer.event(e, Format::Json).unwrap();
            oracle.apply(e);
        }
        producer.finish().unwrap();
    };
    let post = |id, ts| Event::Post {
        author: a,
        post_id: PostId(id),
        ts: Ts(ts),
    };
    let follow = Event::Follow {
        follower: f,
        followee: a,
        ts: Ts(3),
    };
    let open = |p: Partition, processor: &Processor, epoch, emitted| {
        let takeover = Takeover {
            epoch: Epoch(epoch),
            emitted: Some(emitted),
            reship: false,
        };
        processor.task_after(p, takeover).unwrap()
    };
    let drain =
        |t: &mut PartitionTask| while t.step(&mut feedlog::task::NoFaults).unwrap().input() > 0 {};
    // The old owner of A's partition, and F's partition's owner.
    let processor = Processor::open(&dir, cfg.clone()).unwrap();
    let mut old = open(pa, &processor, 1, Positions::START);
    let mut tf = open(pf, &processor, 1, Positions::START);
    drain(&mut old);
    match stale {
        // The old owner's stalled answer is the backfill of F's follow.
        Stale::Backfill | Stale::Copy => {
            produce(&[post(1, 1), post(2, 2)], &mut oracle);
            drain(&mut old);
            produce(&[follow], &mut oracle);
            drain(&mut tf);
        }
        // It is the delivery of a new post to F.
        Stale::Delivery => {
            produce(&[follow], &mut oracle);
            drain(&mut tf);
            drain(&mut old);
            drain(&mut tf);
            produce(&[post(1, 4)], &mut oracle);
        }
    }
    // Everything so far is acknowledged: the group commits it. The next
    // step commits the answer and stalls before shipping it.
    let committed = old.applied();
    let crashed = old.step(&mut CrashOnce(CrashPoint::AfterCommit));
    assert!(matches!(crashed, Err(TaskError::Crashed(_))), "{crashed:?}");
    assert!(
        old.applied() != committed,
        "the stalled step applied its input"
    );
    drop((old, tf, processor));
    // Its session expires: its store stays with it, A's partition moves.
    let aside = tmp.path().join("old-owner");
    std::fs::rename(dir.state_dir(pa), &aside).unwrap();
    let processor = Processor::open(&dir, cfg.clone()).unwrap();
    let mut new = open(pa, &processor, successor, committed);
    let mut tf = open(pf, &processor, 1, Positions::START);
    produce(
        &match stale {
            Stale::Backfill | Stale::Copy => vec![post(3, 5)],
            Stale::Delivery => vec![Event::DeletePost {
                author: a,
                post_id: PostId(1),
                ts: Ts(6),
            }],
        },
        &mut oracle,
    );
    for _ in 0..3 {
        drain(&mut new);
        drain(&mut tf);
    }
    // The old owner comes back and ships what it committed, late.
    let store = feedlog::state::Store::open(
        &aside,
        pa,
        2,
        processor.cache(),
        &feedlog::state::StoreOptions {
            sync: false,
            ..Default::default()
        },
    )
    .unwrap();
    let takeover = Takeover {
        epoch: Epoch(1),
        emitted: None,
        reship: true,
    };
    let late = PartitionTask::open_after(
        processor.ctx(pa),
        cfg.limits,
        false,
        std::sync::Arc::new(store),
        processor.logs().clone(),
        takeover,
    )
    .unwrap();
    drop(late);
    drain(&mut tf);
    drain(&mut new);
    let fenced = feedlog::core::fence::fence_of(&*processor.store(pf), pa)
        .unwrap()
        .fenced;
    let reader = feedlog::ops::serve::reader_of(&processor);
    (common::check_all(&reader, &oracle, f.0.max(a.0), 2), fenced)
}

/// Crashes at one point of the next step.
struct CrashOnce(CrashPoint);

impl feedlog::task::Faults for CrashOnce {
    fn crash_at(&mut self, point: CrashPoint) -> bool {
        point == self.0
    }
}

// Proves the fence keeps an old owner's late backfill from dropping a newer post its successor delivered (and that without a newer epoch the same interleaving loses it for good).
#[test]
fn a_late_backfill_of_an_old_owner_is_fenced() {
    let (without, _) = stale_owner(Stale::Backfill, 1);
    let lost = without.expect_err("same epochs: the late backfill drops p3");
    assert!(lost.starts_with("timeline of "), "{lost}");
    let (with, fenced) = stale_owner(Stale::Backfill, 2);
    with.unwrap();
    assert!(fenced > 0, "the late backfill was fenced");
}

// Proves the fence keeps an old owner's late delivery from bringing back a post its successor delivered and retracted (and that without a newer epoch it comes back for good).
#[test]
fn a_late_delivery_of_an_old_owner_does_not_resurrect_a_deleted_post() {
    let (without, _) = stale_owner(Stale::Delivery, 1);
    let lost = without.expect_err("same epochs: the deleted post comes back");
    assert!(lost.starts_with("timeline of "), "{lost}");
    let (with, fenced) = stale_owner(Stale::Delivery, 2);
    with.unwrap();
    assert!(fenced > 0, "the late delivery was fenced");
}

// Proves the fence keeps an old owner's late copy of a pulled author from erasing the author's newer posts from a partition's copy (and that without a newer epoch they are erased for good).
#[test]
fn a_late_copy_of_an_old_owner_is_fenced() {
    let (without, _) = stale_owner(Stale::Copy, 1);
    let lost = without.expect_err("same epochs: the late copy erases p3");
    assert!(lost.starts_with("timeline of "), "{lost}");
    let (with, fenced) = stale_owner(Stale::Copy, 2);
    with.unwrap();
    assert!(fenced > 0, "the late copy was fenced");
}
