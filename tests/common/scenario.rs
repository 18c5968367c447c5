//! Named scenarios: a processor over two partitions that applies batches of
//! events in turn, checked against the oracle, and the events they are made
//! of.

use super::oracle::Oracle;
use feedlog::api::query::{Reader, RepostMode};
use feedlog::core::codec::Format;
use feedlog::core::event::{Event, PostId, Ts, UserId};
use feedlog::ingest::produce::Producer;
use feedlog::state::datadir::DataDir;
use feedlog::task::embedded::{Processor, ProcessorConfig};
use serde_json::Value;

pub fn follow(a: u64, b: u64, ts: u64) -> Event {
    Event::Follow {
        follower: UserId(a),
        followee: UserId(b),
        ts: Ts(ts),
    }
}

pub fn unfollow(a: u64, b: u64, ts: u64) -> Event {
    Event::Unfollow {
        follower: UserId(a),
        followee: UserId(b),
        ts: Ts(ts),
    }
}

pub fn post(a: u64, p: u64, ts: u64) -> Event {
    Event::Post {
        author: UserId(a),
        post_id: PostId(p),
        ts: Ts(ts),
    }
}

pub fn delete(a: u64, p: u64, ts: u64) -> Event {
    Event::DeletePost {
        author: UserId(a),
        post_id: PostId(p),
        ts: Ts(ts),
    }
}

pub fn repost(a: u64, r: u64, (of_a, of_p): (u64, u64), ts: u64) -> Event {
    Event::Repost {
        author: UserId(a),
        post_id: PostId(r),
        of_author: UserId(of_a),
        of_post_id: PostId(of_p),
        ts: Ts(ts),
    }
}

/// A processor over two partitions that applied `batches` in turn (each
/// batch produced, then processed until idle: later batches arrive after
/// the earlier ones were applied), with `inbox_cap`.
pub struct Run {
    _tmp: tempfile::TempDir,
    /// The processor, idle.
    pub processor: Processor,
    /// The oracle of every batch.
    pub oracle: Oracle,
}

impl Run {
    /// [`Run::with_cap`] with the default inbox.
    pub fn new(users: u64, batches: &[&[Event]]) -> Run {
        Run::with_cap(users, batches, 800)
    }

    /// The run of `batches`, checked against the oracle for users
    /// `1..=users` and every user the events name.
    pub fn with_cap(users: u64, batches: &[&[Event]], inbox_cap: u64) -> Run {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::create_or_open(tmp.path(), Some(2)).unwrap();
        let cfg = ProcessorConfig {
            inbox_cap,
            sync: false,
            cache_bytes: 1 << 20,
            kept: feedlog::state::Kept::DEFAULT,
            ..ProcessorConfig::default()
        };
        let mut oracle = Oracle::with_partitions(2);
        for batch in batches {
            let mut producer = Producer::new(&dir).unwrap();
            for e in *batch {
                producer.event(e, Format::Json).unwrap();
                oracle.apply(e);
            }
            producer.finish().unwrap();
            drop(producer);
            let processor = Processor::open(&dir, cfg.clone()).unwrap();
            processor
                .run(&feedlog::task::Shutdown::new(), true)
                .unwrap();
        }
        let processor = Processor::open(&dir, cfg).unwrap();
        let run = Run {
            _tmp: tmp,
            processor,
            oracle,
        };
        super::check_all(&run.reader(), &run.oracle, users + 1, 2).unwrap();
        run
    }

    /// A reader of the run's state.
    pub fn reader(&self) -> Reader {
        feedlog::ops::serve::reader_of(&self.processor)
    }

    /// `user`'s whole timeline in `mode`, as the API answers it.
    pub fn timeline(&self, user: u64, mode: RepostMode) -> Vec<Value> {
        let page = self
            .reader()
            .timeline_in(UserId(user), mode, 1000, None)
            .unwrap();
        serde_json::to_value(page.items)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    /// `user`'s posts view, as the API answers it.
    pub fn posts(&self, user: u64) -> Vec<Value> {
        let page = self.reader().posts(UserId(user), 1000, None).unwrap();
        serde_json::to_value(page.items)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }
}

/// `user` filters `target`: `kind` is the event's JSON type (`block`,
/// `unblock`, `unmute`, `hide_reposts`, `show_reposts`).
pub fn filter(kind: &str, user: u64, target: u64, ts: u64) -> Event {
    use feedlog::core::event::FilterChange;
    let change = match kind {
        "block" => FilterChange::Block,
        "unblock" => FilterChange::Unblock,
        "unmute" => FilterChange::Unmute,
        "hide_reposts" => FilterChange::HideReposts,
        "show_reposts" => FilterChange::ShowReposts,
        other => panic!("no filter event {other}"),
    };
    Event::Filter {
        user: UserId(user),
        target: UserId(target),
        change,
        ts: Ts(ts),
    }
}

/// `user` mutes `target` at `ts`, until `until` (log time) if given.
pub fn mute(user: u64, target: u64, ts: u64, until: Option<u64>) -> Event {
    Event::Filter {
        user: UserId(user),
        target: UserId(target),
        change: feedlog::core::event::FilterChange::Mute {
            until: until.map(Ts),
        },
        ts: Ts(ts),
    }
}
