//! The contract: at quiescence every view of every user equals the oracle —
//! for 1, 3 and 8 partitions, with invalid records, redundant events,
//! events written to a partition that does not own their actor (forwarded),
//! duplicate deliveries, crash-restarts at random points, and handovers as in
//! Kafka mode (a partition's state lost and rebuilt by a new owner that
//! replays quietly up to the last committed group positions and re-decides
//! the rest in its own order).

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
use feedlog::task::{BatchLimits, CrashPoint, Faults, PartitionTask, TaskError};
use proptest::prelude::*;
use std::collections::BTreeSet;

const USERS: u64 = 12;

/// User ids from the edges of the valid range, for user indices 1..=12
/// (the first ones are the most active): JavaScript's 2^53 boundary, the
/// 32-bit boundary, and u64::MAX, whose keys are all 0xff.
const EDGE_USERS: [u64; 12] = [
    u64::MAX,
    1,
    (1 << 53) + 1,
    u64::MAX - 1,
    1 << 53,
    (1 << 53) - 1,
    2,
    1 << 32,
    u64::MAX - 2,
    3,
    u32::MAX as u64,
    4,
];

/// The same event with ids and times moved to the edges of their ranges:
/// users through [`EDGE_USERS`], post ids 1..=3 to u64::MAX..=u64::MAX-2,
/// times 38 and 39 to the last two an event may carry.
fn at_edges(e: Event) -> Event {
    let u = |u: UserId| UserId(EDGE_USERS[(u.0 - 1) as usize % EDGE_USERS.len()]);
    let p = |p: PostId| PostId(if p.0 <= 3 { u64::MAX - (p.0 - 1) } else { p.0 });
    // The latest times an event may carry (Ts::check_unit).
    let t = |t: Ts| {
        Ts(if t.0 >= 38 {
            Ts::MILLIS_UNTIL - 1 - (39 - t.0.min(39))
        } else {
            t.0
        })
    };
    match e {
        Event::Follow {
            follower,
            followee,
            ts,
        } => Event::Follow {
            follower: u(follower),
            followee: u(followee),
            ts: t(ts),
        },
        Event::Unfollow {
            follower,
            followee,
            ts,
        } => Event::Unfollow {
            follower: u(follower),
            followee: u(followee),
            ts: t(ts),
        },
        Event::Post {
            author,
            post_id,
            ts,
        } => Event::Post {
            author: u(author),
            post_id: p(post_id),
            ts: t(ts),
        },
        Event::DeletePost {
            author,
            post_id,
            ts,
        } => Event::DeletePost {
            author: u(author),
            post_id: p(post_id),
            ts: t(ts),
        },
        Event::Seen { user, ts } => Event::Seen {
            user: u(user),
            ts: t(ts),
        },
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// A valid event, as JSON or bincode.
    Event(Event, bool),
    /// The previous valid event again (a redundant record).
    Repeat,
    /// A record that is not an event.
    Invalid(u8, u32),
}

#[derive(Debug, Clone)]
enum Action {
    Step(u32, u8),
    Crash(u32, u8),
    Redeliver(u32, bool, u8),
    /// The group commits a partition's positions (Kafka mode).
    Commit(u32),
    /// A partition moves to a new owner with an empty store.
    Handover(u32),
}

/// A skewed user choice: the first few users are the most active.
fn user(users: u64) -> impl Strategy<Value = u64> {
    prop_oneof![4 => 1u64..=3.min(users), 2 => 1u64..=7.min(users), 1 => 1u64..=users]
}

fn event(users: u64) -> impl Strategy<Value = Event> {
    let user = move || user(users);
    let ts = 0u64..40;
    prop_oneof![
        4 => (user(), user(), ts.clone()).prop_filter("self-follow", |(a, b, _)| a != b)
            .prop_map(|(a, b, t)| Event::Follow { follower: UserId(a), followee: UserId(b), ts: Ts(t) }),
        2 => (user(), user(), ts.clone()).prop_filter("self-follow", |(a, b, _)| a != b)
            .prop_map(|(a, b, t)| Event::Unfollow { follower: UserId(a), followee: UserId(b), ts: Ts(t) }),
        4 => (user(), 1u64..=20, ts.clone())
            .prop_map(|(a, p, t)| Event::Post { author: UserId(a), post_id: PostId(p), ts: Ts(t) }),
        1 => (user(), 1u64..=20, ts.clone())
            .prop_map(|(a, p, t)| Event::DeletePost { author: UserId(a), post_id: PostId(p), ts: Ts(t) }),
        1 => (user(), ts).prop_map(|(a, t)| Event::Seen { user: UserId(a), ts: Ts(t) }),
    ]
}

fn op(users: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (event(users), any::<bool>()).prop_map(|(e, b)| Op::Event(e, b)),
        1 => Just(Op::Repeat),
        1 => (0u8..7, any::<u32>()).prop_map(|(k, p)| Op::Invalid(k, p)),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        8 => (any::<u32>(), 1u8..6).prop_map(|(p, n)| Action::Step(p, n)),
        1 => (any::<u32>(), 0u8..3).prop_map(|(p, c)| Action::Crash(p, c)),
        1 => (any::<u32>(), any::<bool>(), 1u8..20).prop_map(|(p, e, n)| Action::Redeliver(p, e, n)),
        1 => any::<u32>().prop_map(Action::Commit),
        1 => any::<u32>().prop_map(Action::Handover),
    ]
}

/// Crashes at one point of the next step.
struct CrashOnce(CrashPoint);

impl Faults for CrashOnce {
    fn crash_at(&mut self, point: CrashPoint) -> bool {
        point == self.0
    }
}

struct Harness {
    dir: DataDir,
    cfg: ProcessorConfig,
    tasks: Vec<PartitionTask>,
    processor: Option<Processor>,
    /// Per partition, the group's committed positions (Kafka mode): where
    /// every owner's outputs are acknowledged.
    committed: Vec<Positions>,
}

impl Harness {
    /// Opens every task as its owner would on a restart: below the group's
    /// positions it replays quietly (all zeros: it resumes as after a crash).
    fn open(&mut self) {
        let p = Processor::open(&self.dir, self.cfg.clone()).expect("open processor");
        self.tasks = (0..self.dir.partitions())
            .map(|i| {
                p.task_after(i, self.committed[i as usize], true)
                    .expect("open task")
            })
            .collect();
        self.processor = Some(p);
    }

    /// Partition `p` moves to a new owner: its store is lost, and the new
    /// one rebuilds it quietly up to the group's positions, then decides
    /// the rest anew, in its own order (whatever the old owner already sent
    /// past those positions stays sent).
    fn handover(&mut self, p: u32) {
        self.tasks.clear();
        self.processor = None;
        std::fs::remove_dir_all(self.dir.state_dir(p)).unwrap();
        self.open();
        let processor = self.processor.as_ref().unwrap();
        self.tasks[p as usize] = processor
            .task_after(p, self.committed[p as usize], false)
            .expect("open the new owner's task");
    }

    /// Drops every task and store, as a killed process would, and reopens.
    fn restart(&mut self) {
        self.tasks.clear();
        self.processor = None;
        self.open();
    }

    fn step(&mut self, p: u32) -> u64 {
        self.tasks[p as usize]
            .step(&mut feedlog::task::NoFaults)
            .expect("step")
            .input()
    }

    /// Steps every partition round-robin until a full round reads nothing.
    fn quiesce(&mut self) {
        loop {
            let mut moved = 0;
            for p in 0..self.dir.partitions() {
                moved += self.step(p);
            }
            if moved == 0 {
                return;
            }
        }
    }
}

fn invalid_record(kind: u8, seed: u32, partitions: u32) -> (u32, u8, Vec<u8>) {
    let p = seed % partitions;
    let json = Format::Json.as_u8();
    match kind {
        0 => (p, json, b"{not json".to_vec()),
        1 => (
            p,
            json,
            br#"{"type":"follow","follower":3,"followee":3,"ts":1}"#.to_vec(),
        ),
        2 => (
            p,
            json,
            br#"{"type":"post","author":0,"post_id":1,"ts":1}"#.to_vec(),
        ),
        3 => {
            let binary = [Format::Bincode, Format::Postcard][(seed / 7) as usize % 2];
            (p, binary.as_u8(), vec![0xff, 0xfe, 0xfd])
        }
        4 => (
            p,
            77,
            br#"{"type":"post","author":1,"post_id":1,"ts":1}"#.to_vec(),
        ),
        5 => (
            // A time in seconds.
            p,
            json,
            br#"{"type":"post","author":1,"post_id":1,"ts":1700000000}"#.to_vec(),
        ),
        _ => (
            // A forwarded record whose wrapper does not decode.
            p,
            Format::Forwarded.as_u8(),
            vec![0xff; 3],
        ),
    }
}

/// Which binary codec an event is written in: a fixed function of its ids,
/// so a repeat of it is written the same way.
fn event_id_parity(e: &Event) -> u64 {
    (e.actor().0 ^ e.ts().0) % 2
}

/// Whether `actor`'s events are written to a partition that does not own
/// it (all of them, to the same one, so their order is still defined):
/// the processor must forward them to the owner.
fn misrouted(actor: UserId, partitions: u32) -> Option<u32> {
    (partitions > 1 && actor.0 % 4 == 3)
        .then(|| (partition_for(actor, partitions) + 1) % partitions)
}

fn run_case(
    partitions: u32,
    users: u64,
    ops: Vec<Op>,
    actions: Vec<Action>,
    (batch, pull): (usize, (u64, u64)),
) -> Result<(), TestCaseError> {
    run_case_with(partitions, users, ops, actions, (batch, pull), |e| e)
}

/// [`run_case`] with every generated event passed through `ids` first.
fn run_case_with(
    partitions: u32,
    users: u64,
    ops: Vec<Op>,
    actions: Vec<Action>,
    (batch, (pull_threshold, inactive_after)): (usize, (u64, u64)),
    ids: fn(Event) -> Event,
) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = DataDir::create_or_open(tmp.path(), Some(partitions)).unwrap();
    let cfg = ProcessorConfig {
        inbox_cap: 3,
        fanout_chunk: 2,
        pull_threshold: Some(pull_threshold),
        inactive_after: Some(inactive_after),
        limits: BatchLimits {
            max_records: batch,
            max_bytes: 1 << 20,
            // Small enough that steps often stop applying effects early.
            max_writes: 4 * batch,
            // Small enough that the read cache is often full and cleared.
            cached_reads: 16,
        },
        sync: false,
        cache_bytes: 1 << 20,
    };
    let mut h = Harness {
        dir: dir.clone(),
        cfg,
        tasks: Vec::new(),
        processor: None,
        committed: vec![Positions::START; partitions as usize],
    };
    h.open();
    let mut oracle = Oracle::default();
    let mut invalid = 0u64;
    let mut last: Option<(Event, bool)> = None;
    let chunks = 4;
    let per_chunk = ops.len().div_ceil(chunks).max(1);
    let per_actions = actions.len().div_ceil(chunks).max(1);
    for (ops, actions) in ops.chunks(per_chunk).zip(
        actions
            .chunks(per_actions)
            .chain(std::iter::repeat(&[][..])),
    ) {
        // A producer per chunk, dropped before processing: a forwarded event
        // is appended to its owner's `events` partition, whose writer a live
        // producer holds.
        let mut producer = Producer::new(&dir).unwrap();
        for op in ops {
            let (event, bin) = match op {
                Op::Event(e, b) => (ids(*e), *b),
                Op::Repeat => match last {
                    Some(x) => x,
                    None => continue,
                },
                Op::Invalid(kind, seed) => {
                    let (p, format, value) = invalid_record(*kind, *seed, partitions);
                    producer.raw(p, format, b"x".to_vec(), value).unwrap();
                    invalid += 1;
                    continue;
                }
            };
            // Binary events in postcard, or in bincode as earlier versions
            // wrote them (by the parity of actor and ts), beside JSON ones.
            let format = match (bin, event_id_parity(&event)) {
                (false, _) => Format::Json,
                (true, 0) => Format::Postcard,
                (true, _) => Format::Bincode,
            };
            match misrouted(event.actor(), partitions) {
                Some(wrong) => {
                    let value = match format {
                        Format::Postcard => codec::event_to_postcard(&event),
                        Format::Bincode => codec::event_to_bincode(&event),
                        _ => codec::event_to_json(&event).into_bytes(),
                    };
                    let key = event.actor().to_string().into_bytes();
                    producer.raw(wrong, format.as_u8(), key, value).unwrap();
                }
                None => producer.event(&event, format).unwrap(),
            }
            oracle.apply(&event);
            last = Some((event, bin));
        }
        producer.finish().unwrap();
        drop(producer);
        for a in actions {
            match *a {
                Action::Step(p, n) => {
                    for _ in 0..n {
                        h.step(p % partitions);
                    }
                    let reader = feedlog::ops::serve::reader_of(h.processor.as_ref().unwrap());
                    common::keep_first_pages(&reader, (1..=users).chain(oracle.users()), 2);
                }
                Action::Crash(p, c) => {
                    let point = [
                        CrashPoint::BeforeCommit,
                        CrashPoint::AfterCommit,
                        CrashPoint::MidShip,
                    ][c as usize];
                    match h.tasks[(p % partitions) as usize].step(&mut CrashOnce(point)) {
                        Err(TaskError::Crashed(_)) | Ok(_) => h.restart(),
                        Err(e) => panic!("step failed: {e}"),
                    }
                }
                Action::Commit(p) => {
                    let p = (p % partitions) as usize;
                    let applied = h.tasks[p].applied();
                    let c = &mut h.committed[p];
                    *c = c.max(applied);
                }
                Action::Handover(p) => {
                    // The new owner is configured with another threshold
                    // (when pulling at all): it asks for it through the log.
                    if let Some(t) = h.cfg.pull_threshold.filter(|&t| t > 0) {
                        h.cfg.pull_threshold = Some(t % 3 + 1);
                    }
                    // And with another inactivity span, which it just uses.
                    if let Some(s) = h.cfg.inactive_after.filter(|&s| s > 0) {
                        h.cfg.inactive_after = Some(s % 12 + 1);
                    }
                    h.handover(p % partitions)
                }
                Action::Redeliver(p, events, n) => {
                    let topic = if events {
                        Topic::Events
                    } else {
                        Topic::Effects
                    };
                    h.tasks[(p % partitions) as usize]
                        .redeliver(topic, n as u64)
                        .unwrap();
                }
            }
        }
    }
    h.quiesce();
    let reader = feedlog::ops::serve::reader_of(h.processor.as_ref().unwrap());
    common::check_all(&reader, &oracle, users, 2).map_err(TestCaseError::fail)?;
    // Every woken reader was refilled: reads while waiting are exact (the
    // pull path), but an answer never counted would keep them there.
    let processor = h.processor.as_ref().unwrap();
    for u in (1..=users).chain(oracle.users()) {
        let store = processor.store(partition_for(UserId(u), partitions));
        let rec = feedlog::core::views::user(&*store, UserId(u)).unwrap();
        prop_assert_eq!(rec.refills, 0, "user {} still waits for refills", u);
    }

    // Every invalid record reached the dead-letter log (at least once: a crash may repeat one).
    let mut dl = h
        .processor
        .as_ref()
        .unwrap()
        .logs()
        .reader(Topic::DeadLetter, 0, 0)
        .unwrap();
    let mut sources = BTreeSet::new();
    loop {
        let recs = dl.read(1000, 1 << 20).unwrap();
        if recs.is_empty() {
            break;
        }
        for r in recs {
            let v: serde_json::Value = serde_json::from_slice(&r.value).unwrap();
            prop_assert!(
                v["reason"].as_str().is_some_and(|s| !s.is_empty()),
                "dead letter without reason"
            );
            prop_assert_eq!(
                v["source"]["topic"].as_str(),
                Some("events"),
                "only events may be dead-lettered"
            );
            sources.insert(r.key);
        }
    }
    prop_assert_eq!(sources.len() as u64, invalid);
    Ok(())
}

/// The pull threshold and inactivity span asked for. The threshold is 0
/// (all pushed) in a third of the cases, else 1 to 3 live followers, so
/// authors are pulled, pushed again and followed while pulled in almost
/// every case (and each handover moves it). The span is 0 (never asleep)
/// in a third of the cases, else 1 to 12 of log time (0 to 39), so readers
/// fall asleep and wake in almost every case.
fn hybrid() -> impl Strategy<Value = (u64, u64)> {
    let span = prop_oneof![1 => Just(0u64), 2 => 1u64..=12];
    (prop_oneof![1 => Just(0u64), 2 => 1u64..=3], span)
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    ProptestConfig {
        cases,
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    // Proves quiescent equivalence with one partition (every message is local).
    #[test]
    fn views_equal_oracle_1_partition(
        ops in proptest::collection::vec(op(USERS), 1..150),
        actions in proptest::collection::vec(action(), 0..60),
        batch in 1usize..8,
        pull in hybrid(),
    ) {
        run_case(1, USERS, ops, actions, (batch, pull))?;
    }

    // Proves quiescent equivalence with three partitions.
    #[test]
    fn views_equal_oracle_3_partitions(
        ops in proptest::collection::vec(op(USERS), 1..150),
        actions in proptest::collection::vec(action(), 0..60),
        batch in 1usize..8,
        pull in hybrid(),
    ) {
        run_case(3, USERS, ops, actions, (batch, pull))?;
    }

    // Proves quiescent equivalence with eight partitions.
    #[test]
    fn views_equal_oracle_8_partitions(
        ops in proptest::collection::vec(op(USERS), 1..150),
        actions in proptest::collection::vec(action(), 0..80),
        batch in 1usize..8,
        pull in hybrid(),
    ) {
        run_case(8, USERS, ops, actions, (batch, pull))?;
    }

    // Proves quiescent equivalence with ids and post ids from the edges of the u64 range (u64::MAX, 2^53±1) and the latest times an event may carry.
    #[test]
    fn views_equal_oracle_edge_ids_3_partitions(
        ops in proptest::collection::vec(op(USERS), 1..150),
        actions in proptest::collection::vec(action(), 0..60),
        batch in 1usize..8,
        pull in hybrid(),
    ) {
        run_case_with(3, USERS, ops, actions, (batch, pull), at_edges)?;
    }

    // Proves quiescent equivalence when three users follow, unfollow, re-follow,
    // post and delete among themselves, so messages race each other constantly.
    #[test]
    fn views_equal_oracle_races_2_partitions(
        ops in proptest::collection::vec(op(3), 1..120),
        actions in proptest::collection::vec(action(), 0..80),
        batch in 1usize..4,
        pull in hybrid(),
    ) {
        run_case(2, 3, ops, actions, (batch, pull))?;
    }
}
