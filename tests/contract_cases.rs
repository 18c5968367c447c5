//! The contract on named scenarios the property tests reach only by chance:
//! a stale forwarded copy, a delivery replayed before the follow it was sent
//! for, an owner whose first step applies nothing.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::oracle::Oracle;
use feedlog::core::codec::{self, Format};
use feedlog::core::event::{Event, PostId, Ts, UserId};
use feedlog::core::partition::partition_for;
use feedlog::core::position::Positions;
use feedlog::ingest::produce::Producer;
use feedlog::log::Topic;
use feedlog::state::datadir::DataDir;
use feedlog::task::embedded::{Processor, ProcessorConfig};
use feedlog::task::{BatchLimits, PartitionTask};

// Proves a stale copy of a forwarded event (same source position, arriving after a later event of that actor) is skipped, not re-applied.
#[test]
fn stale_forwarded_copy_is_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = DataDir::create_or_open(tmp.path(), Some(2)).unwrap();
    let (a, b) = (UserId(3), UserId(4));
    let owner = partition_for(a, 2);
    let forwarded = |from_offset: u64, e: &Event| codec::Forwarded {
        from_partition: 1 - owner,
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
        (stats.events[0], stats.events[1], stats.duplicates),
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
    let ends: Vec<Positions> = (0..2)
        .map(|p| {
            Positions::new(
                logs.end_offset(Topic::Events, p).unwrap(),
                logs.end_offset(Topic::Effects, p).unwrap(),
            )
        })
        .collect();
    let mut tasks: Vec<PartitionTask> = (0..2)
        .map(|p| {
            PartitionTask::open_after(
                processor.ctx(p),
                cfg.limits,
                false,
                processor.store(p).clone(),
                logs.clone(),
                Some(ends[p as usize]),
                true,
            )
            .unwrap()
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
            logs.end_offset(Topic::Effects, p as u32).unwrap(),
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
    let in_force = |p: &Processor| feedlog::core::views::pull_threshold(&*p.store(0)).unwrap();
    produce(seen(1));
    let five = open(5);
    five.run(&feedlog::task::Shutdown::new(), true).unwrap();
    assert_eq!(in_force(&five), 5);
    drop(five);
    // An owner configured with 7 catches up, asks for it, and stops
    // before its request is applied.
    produce(seen(2));
    let seven = open(7);
    let mut task = seven.task(0).unwrap();
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

// Regression: an owner's first step that applied nothing (a delivery waiting for a follow not yet in the log) marked its pull-threshold request as sent and dropped it with the step's uncommitted records, so the configured threshold never came into force. It is now asked with the first batch that commits.
#[test]
fn a_first_step_that_applies_nothing_keeps_the_owners_requests() {
    use feedlog::core::effect::Effect;
    use feedlog::core::position::Version;
    use feedlog::log::{Log, NewRecord};
    let tmp = tempfile::tempdir().unwrap();
    let dir = DataDir::create_or_open(tmp.path(), Some(1)).unwrap();
    let (author, follower) = (UserId(1), UserId(2));
    // effects[0]: a delivery for the follow that will be events[0] offset 0.
    let (format, value) = codec::encode_effects(&[Effect::Deliver {
        author,
        post_id: PostId(9),
        ts: Ts(5),
        targets: vec![(follower, Version(1))],
    }]);
    let logs: std::sync::Arc<dyn Log> = std::sync::Arc::new(dir.logs());
    let mut sink = logs.sink(false).unwrap();
    let rec = NewRecord {
        timestamp_ms: 0,
        format: format.as_u8(),
        key: b"2",
        value: &value,
    };
    sink.append(Topic::Effects, 0, &[rec]).unwrap();
    sink.flush().unwrap();
    drop(sink);
    let cfg = ProcessorConfig {
        pull_threshold: Some(3),
        sync: false,
        cache_bytes: 1 << 20,
        ..ProcessorConfig::default()
    };
    let processor = Processor::open(&dir, cfg).unwrap();
    let threshold = || {
        processor
            .store(0)
            .meta_u64(feedlog::core::keys::PULL_THRESHOLD)
            .unwrap()
    };
    // One owner for the whole scenario, as a long `run` or a Kafka
    // processor keeps it. Its first step applies nothing: the delivery
    // waits for its follow.
    let mut task = processor.task_after(0, Positions::START, false).unwrap();
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
