//! feedlog as a library: the whole loop (a data directory, events in, a
//! processor until idle, then reads in process and over HTTP) through the
//! items at the crate's root only — the API an embedding application uses.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::{check_all, generated_log, oracle_of};
use feedlog::{
    processor_api, reader_of, serve, ApiConfig, DataDir, Processor, ProcessorConfig, Producer,
    Shutdown,
};

// Proves the root API alone produces, processes and serves a network whose every view equals the oracle, and that a Shutdown stops a running processor.
#[test]
fn the_root_api_runs_the_whole_loop() {
    let tmp = tempfile::tempdir().unwrap();
    let data = DataDir::create_or_open(tmp.path(), Some(3)).unwrap();
    let log = generated_log(40, 2000);
    let mut producer = Producer::new(&data).unwrap();
    producer.json_lines(log.as_bytes(), "generated").unwrap();
    let summary = producer.finish().unwrap();
    assert_eq!(summary.dead_lettered, 0, "{summary:?}");

    let processor = Processor::open(&data, ProcessorConfig::default()).unwrap();
    processor.run(&Shutdown::new(), true).unwrap();
    let (oracle, max_user) = oracle_of(&log);
    check_all(&reader_of(&processor), &oracle, max_user, 10).unwrap();

    // Served over HTTP by the same processor.
    let cfg = ApiConfig {
        max_limit: 1000,
        ..ApiConfig::default()
    };
    let api = processor_api(&processor, feedlog::Retention::DEFAULT, cfg);
    let (rt, listener, addr) = common::http::ephemeral_listener();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        rt.block_on(serve(listener, api, async {
            let _ = rx.await;
        }))
    });
    let client = common::http::Client { addr };
    check_all(&client, &oracle, max_user, 10).unwrap();
    let _ = tx.send(());
    server.join().unwrap().unwrap();

    // Run without an end (waiting for more events), it stops when asked.
    let stop = Shutdown::new();
    std::thread::scope(|s| {
        let running = s.spawn(|| processor.run(&stop, false));
        stop.request();
        running.join().unwrap().unwrap();
    });
}

// Proves a library caller gets the command line's inbox-cap check: a state built with one cap is refused to a processor with another (an error that names both and answers "stop"), and opens again with its own cap.
#[test]
fn a_state_is_processed_only_with_the_inbox_cap_it_was_built_with() {
    let tmp = tempfile::tempdir().unwrap();
    let data = DataDir::create_or_open(tmp.path(), Some(2)).unwrap();
    let mut producer = Producer::new(&data).unwrap();
    producer
        .json_lines(generated_log(10, 200).as_bytes(), "generated")
        .unwrap();
    producer.finish().unwrap();
    let cfg = |inbox_cap| ProcessorConfig {
        inbox_cap,
        ..ProcessorConfig::default()
    };
    let processor = Processor::open(&data, cfg(50)).unwrap();
    processor.run(&Shutdown::new(), true).unwrap();
    drop(processor);
    let refused = Processor::open(&data, cfg(60))
        .err()
        .expect("another cap is refused");
    let text = refused.to_string();
    assert!(
        text.contains("built with inbox cap 50, not 60") && text.contains("backfill"),
        "{text}"
    );
    assert_eq!(refused.disposition(), feedlog::core::Disposition::Stop);
    let reopened = DataDir::open(tmp.path()).unwrap();
    assert_eq!(reopened.inbox_cap_or_built(None), 50);
    Processor::open(&reopened, cfg(50)).unwrap();
}

// Proves a paused processor applies nothing until resumed and then applies what came meanwhile, a pause taken back before it holds answers false and leaves the run going, and a pause after the run ended answers false at once.
#[test]
fn a_running_processor_pauses_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = DataDir::create_or_open(tmp.path(), Some(2)).unwrap();
    let produce = |users, events| {
        let mut producer = Producer::new(&data).unwrap();
        let log = generated_log(users, events);
        producer.json_lines(log.as_bytes(), "generated").unwrap();
        producer.finish().unwrap().accepted
    };
    let first = produce(20, 300);
    let processor = Processor::open(&data, ProcessorConfig::default()).unwrap();
    let applied = || processor.progress().totals().events.total();
    let wait_for = |n: u64| {
        let start = std::time::Instant::now();
        while applied() < n {
            assert!(
                start.elapsed().as_secs() < 60,
                "{} of {n} events applied",
                applied()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    let stop = Shutdown::new();
    std::thread::scope(|s| {
        let running = s.spawn(|| processor.run(&stop, false));
        wait_for(first);
        assert!(processor.pause(), "a running processor pauses");
        let more = produce(20, 300);
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(applied(), first, "nothing is applied while paused");
        processor.resume();
        wait_for(first + more);
        // Taken back while it waits: the pause answers false, the run goes on.
        let pausing = s.spawn(|| processor.pause());
        processor.resume();
        let paused = pausing.join().unwrap();
        if paused {
            processor.resume(); // it held before the resume came
        }
        assert!(!processor.ended(), "the run goes on");
        let last = produce(20, 300);
        wait_for(first + more + last);
        stop.request();
        running.join().unwrap().unwrap();
    });
    assert!(processor.ended());
    assert!(
        !processor.pause(),
        "a pause after the run ended answers false"
    );
}

// Proves a sleeper's pages read through the outbox heads equal those read from the stores alone and the oracle, page after page and at several limits, with followees' outboxes longer than a head (48 keys) and commits that add, push out and delete keys between reads.
#[test]
fn a_sleepers_pages_through_outbox_heads_follow_long_outboxes() {
    use feedlog::core::event::UserId;
    use feedlog::core::partition::partition_for;
    let tmp = tempfile::tempdir().unwrap();
    let data = DataDir::create_or_open(tmp.path(), Some(2)).unwrap();
    let config = ProcessorConfig {
        inactive_after: Some(1_000),
        ..ProcessorConfig::default()
    };
    let processor = Processor::open(&data, config).unwrap();
    let reader = UserId(10);
    let own = partition_for(reader, 2);
    // A user of the reader's partition moves its clock past the span.
    let mover = (11..)
        .find(|&u| partition_for(UserId(u), 2) == own)
        .unwrap();
    let post = |a: u64, id: u64, ts: u64| {
        format!(r#"{{"type":"post","author":{a},"post_id":{id},"ts":{ts}}}"#)
    };
    let mut log: Vec<String> = (1..=3)
        .map(|a| format!(r#"{{"type":"follow","follower":10,"followee":{a},"ts":{a}}}"#))
        .collect();
    log.push(post(mover, 1, 5_000));
    common::api::append_and_process(tmp.path(), &processor, &[&log.join("\n")]);
    let mut fed = log.len();
    for i in 0..70 {
        log.extend((1..=3).map(|a| post(a, a * 1000 + i, 10_000 + i * 10 + a)));
    }
    let mut step = |log: &[String]| {
        common::api::append_and_process(tmp.path(), &processor, &[&log[fed..].join("\n")]);
        fed = log.len();
        let store = processor.store(own);
        let record = feedlog::core::views::user(&*store, reader).unwrap();
        assert_eq!(
            record.read_horizon(),
            Some(feedlog::core::timeline::TOP),
            "10 sleeps: {record:?}, clock {:?}",
            feedlog::core::views::clock(&*store)
        );
        pages_through_heads_equal_the_stores(&reader_of(&processor), reader);
        let (oracle, max_user) = oracle_of(&(log.join("\n") + "\n"));
        check_all(&reader_of(&processor), &oracle, max_user, 10).unwrap();
    };
    step(&log);
    // Newer posts push keys out of author 1's head; deletes fall inside
    // the heads, at their edge and below them.
    for i in 70..80 {
        log.push(post(1, 1000 + i, 20_000 + i));
    }
    for (a, i) in [(1, 79), (1, 40), (2, 69), (2, 21), (2, 22), (3, 5)] {
        let ts = 30_000 + i;
        log.push(format!(
            r#"{{"type":"delete_post","author":{a},"post_id":{},"ts":{ts}}}"#,
            a * 1000 + i
        ));
    }
    step(&log);
}

/// Checks every page of `user`'s timeline, at limits 5, 20 and 50, read
/// twice (the first read keeps the heads, the second reads them) through
/// the heads against the same page from the stores alone.
fn pages_through_heads_equal_the_stores(
    reader: &feedlog::Reader,
    user: feedlog::core::event::UserId,
) {
    let stores = reader.past_heads();
    for _ in 0..2 {
        for limit in [5, 20, 50] {
            let mut cursor: Option<String> = None;
            loop {
                let held = reader.timeline(user, limit, cursor.as_deref()).unwrap();
                let full = stores.timeline(user, limit, cursor.as_deref()).unwrap();
                assert_eq!(held, full, "limit {limit} from {cursor:?}");
                match held.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
        }
    }
}
