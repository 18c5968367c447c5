//! What the benches share: the generated workloads, a temporary directory
//! removed on drop, throughput lines, and the bytes and CPU time a run
//! takes.

use crate::args::Shape;
use anyhow::Result;
use feedlog::core::event::{Event, PostId, Ts, UserId};
use feedlog::ingest::generate::Rng;
use feedlog::task::embedded::Processor;
use feedlog::task::Shutdown;
use std::time::Instant;

/// The processed data directory at `data`, or what to do to make one.
pub(crate) fn processed_dir(
    data: &std::path::Path,
) -> anyhow::Result<feedlog::state::datadir::DataDir> {
    use anyhow::Context;
    feedlog::state::datadir::DataDir::open(data).with_context(|| {
        format!(
            "no processed data directory at {} (make one: feedlog --data {} demo --exit)",
            data.display(),
            data.display()
        )
    })
}

/// Bytes on disk under `path` (files, recursively; 0 where unreadable).
pub(crate) fn dir_bytes(path: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// The bytes of a processed data directory against the input: its logs
/// against `events` written as the JSON lines `produce` accepts, and its
/// state (flushed by the caller) per inbox entry it holds.
pub(crate) fn bytes_line(
    dir: &feedlog::state::datadir::DataDir,
    events: &[&Event],
    inbox_entries: u64,
) -> String {
    let json: u64 = events
        .iter()
        .map(|e| feedlog::core::codec::event_to_json(e).len() as u64 + 1)
        .sum();
    let log = dir.root().join("log");
    let (ev, fx) = (
        dir_bytes(&log.join("events")),
        dir_bytes(&log.join("effects")),
    );
    let state = dir_bytes(&dir.state_root());
    format!(
        "bytes: log {} (events {ev}, effects {fx}) = {:.2}x the {json} bytes of the events as JSON lines, {:.1} per event; \
         state {state} after a flush = {:.1} per inbox entry ({inbox_entries} entries)",
        ev + fx,
        (ev + fx) as f64 / json as f64,
        (ev + fx) as f64 / events.len() as f64,
        state as f64 / inbox_entries as f64
    )
}

/// Processes until idle: inbox deliveries and seconds.
pub(crate) fn run_until_idle(p: &Processor) -> Result<(u64, f64)> {
    let start = Instant::now();
    let totals = p.run(&Shutdown::new(), true)?;
    Ok((totals.delivered, start.elapsed().as_secs_f64()))
}

/// The generated workload of `fanout`, `redis` and `kafka`.
#[derive(Debug, Clone, Copy)]
pub struct Generated {
    /// Its shape.
    pub shape: Shape,
    /// Users.
    pub users: u64,
    /// post-heavy: follows per user.
    pub follows: u64,
    /// post-heavy: posts.
    pub posts: u64,
    /// follow-heavy: events in all.
    pub events: u64,
}

/// Share of attempted first-contact follows in the follow-heavy shape
/// (about 45 % of its events end up follows; repeated pairs are posts).
const FOLLOW_SHARE: f64 = 0.55;

impl Generated {
    /// The workload (deterministic): a setup part (`fanout` processes it
    /// before measuring) and the measured part.
    pub(crate) fn events(&self) -> (Vec<Event>, Vec<Event>) {
        let mut rng = Rng(42);
        match self.shape {
            Shape::PostHeavy => post_heavy(self.users, self.follows, self.posts, &mut rng),
            Shape::FollowHeavy => (
                Vec::new(),
                feedlog::ingest::generate::follow_heavy(
                    self.users,
                    self.events,
                    FOLLOW_SHARE,
                    1_700_000_000_000,
                    &mut rng,
                ),
            ),
        }
    }
}

impl std::fmt::Display for Generated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.shape {
            Shape::PostHeavy => write!(
                f,
                "post-heavy: {} users, {} follows each, {} posts",
                self.users, self.follows, self.posts
            ),
            Shape::FollowHeavy => write!(
                f,
                "follow-heavy: {} events among {} users, about 45 % first-contact follows",
                self.events, self.users
            ),
        }
    }
}

/// The post-heavy workload: every user follows `follows` power-law-chosen
/// users (user 1 by nearly everyone), then `posts` posts by power-law-chosen
/// authors.
fn post_heavy(users: u64, follows: u64, posts: u64, rng: &mut Rng) -> (Vec<Event>, Vec<Event>) {
    let mut ts = 1_700_000_000_000u64;
    let mut setup = Vec::new();
    for follower in 1..=users {
        for _ in 0..follows {
            let followee = rng.zipf(users);
            if followee != follower {
                ts += 1;
                setup.push(Event::Follow {
                    follower: UserId(follower),
                    followee: UserId(followee),
                    ts: Ts(ts),
                });
            }
        }
    }
    let posts = (1..=posts)
        .map(|post| {
            ts += 1;
            Event::Post {
                author: UserId(rng.zipf(users)),
                post_id: PostId(post),
                ts: Ts(ts),
            }
        })
        .collect();
    (setup, posts)
}

/// A directory removed on drop.
pub(crate) struct Cleanup(pub(crate) std::path::PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One run's figures: input events and inbox deliveries per second.
pub(crate) struct Throughput {
    pub(crate) events: u64,
    pub(crate) delivered: u64,
    pub(crate) secs: f64,
    /// Processor time (user + system, every thread of the process) spent
    /// in the timed span: with the cores shared, how much of the run was
    /// CPU.
    pub(crate) cpu_secs: f64,
}

impl Throughput {
    pub(crate) fn line(&self, what: &str) -> String {
        format!(
            "{what}: {} events, {} deliveries in {:.2}s ({:.2}s of CPU) = {:.0} events/s, {:.0} deliveries/s",
            self.events,
            self.delivered,
            self.secs,
            self.cpu_secs,
            self.events as f64 / self.secs,
            self.delivered as f64 / self.secs
        )
    }
}

/// This process's CPU time so far (user + system, all threads), in
/// seconds; 0 where `/proc/self/stat` cannot be read.
pub(crate) fn process_cpu_secs() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // Clock ticks in /proc are USER_HZ, 100 on Linux.
    (ticks(11) + ticks(12)) as f64 / 100.0
}
