use super::*;
use crate::core::codec::{self, Format};
use crate::core::event::{Event, PostId, Ts, UserId};
use crate::core::{views, Effect};
use crate::state::StoreOptions;
use crate::task::embedded::Processor;

// Proves a replay to a target where a reader it wakes still awaits a refill (the answer lies past the target) ends there without sending anything: the request is left to the owner that takes the state over.
#[test]
fn a_replay_leaves_an_awaited_refill_to_the_next_owner() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = DataDir::create_or_open(tmp.path(), Some(1)).unwrap();
    let (reader, author) = (UserId(2), UserId(1));
    let cfg = ProcessorConfig {
        inactive_after: Some(10),
        ..ProcessorConfig::default()
    };
    // Each batch of events processed to the end before the next is written.
    let process = |events: &[Event]| {
        let json: Vec<String> = events.iter().map(codec::event_to_json).collect();
        let records: Vec<NewRecord<'_>> = json
            .iter()
            .map(|value| NewRecord {
                timestamp_ms: 0,
                format: Format::Json.into(),
                key: b"",
                value: value.as_bytes(),
            })
            .collect();
        let mut sink = Arc::new(dir.logs()).sink(true).unwrap();
        sink.append(Topic::Events, Partition(0), &records).unwrap();
        sink.flush().unwrap();
        drop(sink);
        let processor = Processor::open(&dir, cfg.clone()).unwrap();
        processor.run(&Shutdown::new(), true).unwrap();
        processor
    };
    process(&[Event::Follow {
        follower: reader,
        followee: author,
        ts: Ts(0),
    }]);
    // The delivery finds the reader idle for longer than the span: asleep.
    let asleep = process(&[Event::Post {
        author,
        post_id: PostId(1),
        ts: Ts(100),
    }]);
    // The state to replay from: the reader asleep.
    let p = Partition(0);
    let replayed = tmp.path().join("replayed");
    asleep.store(p).checkpoint(&replayed).unwrap();
    drop(asleep);
    // The reader's own event wakes them: a refill is asked of the author.
    let processor = process(&[Event::Seen {
        user: reader,
        ts: Ts(200),
    }]);

    // The target ends just past the `effects` record that asks for the refill.
    let logs = processor.logs();
    let mut records = logs.reader(Topic::Effects, p, 0).unwrap();
    let mut refill = None;
    loop {
        let read = records.read(1000, 1 << 20).unwrap();
        if read.is_empty() {
            break;
        }
        for r in read {
            let envelope = codec::decode_effects(r.format, &r.value).unwrap();
            if envelope
                .effects
                .iter()
                .any(|e| matches!(e, Effect::Refill { .. }))
            {
                refill = Some(r.offset.0);
            }
        }
    }
    let refill = refill.expect("the wake asked for a refill");
    let target = Positions::new(logs.end_offset(Topic::Events, p).unwrap(), refill + 1);

    let store = Arc::new(
        Store::open(
            &replayed,
            p,
            1,
            &BlockCache::new(1 << 20),
            &StoreOptions::default(),
        )
        .unwrap(),
    );
    let log = Arc::new(ReadOnlyLog(processor.logs().clone() as Arc<dyn Log>));
    let ctx = processor.ctx(p);
    let progress = PartitionProgress::default();
    replay_to(
        ctx,
        &cfg,
        store.clone(),
        log,
        target,
        &progress,
        &Shutdown::new(),
    )
    .unwrap();
    assert_eq!(store.positions().unwrap(), target);
    let user = views::user(&*store, reader).unwrap();
    assert_eq!((user.asleep, user.refills), (false, 1), "{user:?}");
}
