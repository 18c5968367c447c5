//! The contract on the pure core alone: partitions simulated on the
//! in-memory `MemKv` (no RocksDB, no log), thousands of cases per run. Any
//! partition count, inbox size and fan-out chunk; any interleaving of each
//! partition's two inputs that respects causality; effects re-shipped
//! (duplicated suffixes of a partition's outbox, as after a crash). At
//! quiescence every view of every user equals the oracle.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::oracle::Oracle;
use feedlog::core::event::{Event, PostId, Ts, UserId};
use feedlog::core::keys::TimelineKey;
use feedlog::core::kv::{Cf, Kv, MemKv, Txn};
use feedlog::core::partition::partition_for;
use feedlog::core::pulled;
use feedlog::core::timeline::held_timeline;
use feedlog::core::{apply_effect, apply_event, views, Ctx, Effect, Offset, Out, Version};
use proptest::prelude::*;
use std::collections::BTreeSet;

const USERS: u64 = 8;

/// Applies a step's writes, checking that no horizon of a user without
/// marks is removed or raised by them (the API's inline timeline read
/// relies on it; a mark, as a fall asleep, turns that read off for good).
fn apply_lowering_horizons_only(kv: &mut MemKv, w: feedlog::core::kv::Writes) {
    let horizons = |kv: &MemKv| -> Vec<(UserId, (Option<TimelineKey>, u64))> {
        views::users(kv)
            .map(|r| r.map(|(u, v)| (u, (v.horizon, v.marks))).unwrap())
            .collect()
    };
    let before = horizons(kv);
    kv.apply(w);
    let after: std::collections::BTreeMap<_, _> = horizons(kv).into_iter().collect();
    for (u, (h, _)) in before {
        let (now, marks) = after.get(&u).copied().unwrap_or_default();
        if let (Some(h), 0) = (h, marks) {
            assert!(
                now.is_some_and(|n| n <= h),
                "user {u:?}: horizon {h:?} became {now:?}"
            );
        }
    }
}

fn event() -> impl Strategy<Value = Event> {
    let user = || (1..=USERS).prop_map(UserId);
    let ts = || (0u64..30).prop_map(Ts);
    let post = || (1u64..=12).prop_map(PostId);
    prop_oneof![
        4 => (user(), user(), ts()).prop_filter_map("no self-follow", |(a, b, ts)| {
            (a != b).then_some(Event::Follow { follower: a, followee: b, ts })
        }),
        1 => (user(), user(), ts()).prop_filter_map("no self-unfollow", |(a, b, ts)| {
            (a != b).then_some(Event::Unfollow { follower: a, followee: b, ts })
        }),
        4 => (user(), post(), ts()).prop_map(|(author, post_id, ts)| Event::Post { author, post_id, ts }),
        1 => (user(), post(), ts()).prop_map(|(author, post_id, ts)| Event::DeletePost { author, post_id, ts }),
        1 => (user(), ts()).prop_map(|(user, ts)| Event::Seen { user, ts }),
    ]
}

/// What the scheduler does next: step partition `p`'s events (kind 0) or
/// effects (kind 1), re-ship the last `n` messages partition `p` sent
/// (kind 2), or have partition `p` ask for pull threshold `n % 4` and put
/// readers asleep after `n % 5` of log time (kind 3, as a processor
/// restarted with other settings does).
#[derive(Debug, Clone, Copy)]
struct Choice {
    p: u32,
    kind: u8,
    n: usize,
}

fn choice() -> impl Strategy<Value = Choice> {
    (
        0u32..8,
        prop_oneof![4 => Just(0u8), 4 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
        1usize..6,
    )
        .prop_map(|(p, kind, n)| Choice { p, kind, n })
}

/// One simulated partition: its state and its two input logs.
struct Partition {
    kv: MemKv,
    ctx: Ctx,
    events: Vec<Event>,
    events_at: usize,
    effects: Vec<Effect>,
    effects_at: usize,
    /// Every message this partition sent, in order (its outbox's history).
    sent: Vec<Out>,
}

struct Sim {
    parts: Vec<Partition>,
}

impl Sim {
    fn new(
        events: &[Event],
        partitions: u32,
        inbox_cap: u64,
        fanout_chunk: usize,
        (pull_threshold, inactive_after): (u64, u64),
    ) -> Sim {
        let mut parts: Vec<Partition> = (0..partitions)
            .map(|p| Partition {
                kv: MemKv::default(),
                ctx: Ctx {
                    partition: p,
                    partitions,
                    inbox_cap,
                    fanout_chunk,
                    pull_threshold: Some(pull_threshold),
                    inactive_after: Some(inactive_after),
                },
                events: Vec::new(),
                events_at: 0,
                effects: Vec::new(),
                effects_at: 0,
                sent: Vec::new(),
            })
            .collect();
        for e in events {
            parts[partition_for(e.actor(), partitions) as usize]
                .events
                .push(*e);
        }
        let mut sim = Sim { parts };
        for p in 0..partitions as usize {
            sim.ask_threshold(p);
        }
        sim
    }

    /// Partition `p` asks for its configured pull threshold, as a
    /// processor does once it has caught up.
    fn ask_threshold(&mut self, p: usize) {
        let part = &self.parts[p];
        let ask: Vec<Out> = pulled::threshold_request(&part.kv, &part.ctx)
            .unwrap()
            .into_iter()
            .collect();
        self.parts[p].sent.extend(ask.iter().cloned());
        self.deliver(&ask);
    }

    fn deliver(&mut self, outs: &[Out]) {
        for o in outs {
            self.parts[o.partition as usize]
                .effects
                .push(o.effect.clone());
        }
    }

    /// Applies partition `p`'s next event; false when it has none.
    fn step_event(&mut self, p: usize) -> bool {
        let part = &mut self.parts[p];
        let Some(e) = part.events.get(part.events_at).cloned() else {
            return false;
        };
        let version = Version::of(Offset(part.events_at as u64));
        let mut out = Vec::new();
        let mut t = Txn::new(&part.kv);
        apply_event(&mut t, &part.ctx, &e, version, &mut out).unwrap();
        let w = t.into_writes();
        apply_lowering_horizons_only(&mut part.kv, w);
        part.events_at += 1;
        part.sent.extend(out.iter().cloned());
        self.deliver(&out);
        true
    }

    /// Applies partition `p`'s next message; false when it has none.
    fn step_effect(&mut self, p: usize) -> bool {
        let part = &mut self.parts[p];
        let Some(e) = part.effects.get(part.effects_at).cloned() else {
            return false;
        };
        // Causality: a message never names an event its receiver has not
        // applied (the follow it was sent for caused it).
        assert!(
            e.requires_events().0 <= part.events_at as u64,
            "partition {p} got {e:?} before applying events up to {}",
            e.requires_events()
        );
        let mut out = Vec::new();
        let mut t = Txn::new(&part.kv);
        apply_effect(&mut t, &part.ctx, &e, &mut out).unwrap();
        let w = t.into_writes();
        apply_lowering_horizons_only(&mut part.kv, w);
        part.effects_at += 1;
        part.sent.extend(out.iter().cloned());
        self.deliver(&out);
        true
    }

    /// Re-sends the last `n` messages partition `p` sent, in order.
    fn reship(&mut self, p: usize, n: usize) {
        let sent = &self.parts[p].sent;
        let again = sent[sent.len().saturating_sub(n)..].to_vec();
        self.deliver(&again);
    }

    fn run(&mut self, choices: &[Choice]) {
        let n = self.parts.len() as u32;
        for c in choices {
            let p = (c.p % n) as usize;
            match c.kind {
                0 => self.step_event(p),
                1 => self.step_effect(p),
                2 => {
                    self.reship(p, c.n);
                    true
                }
                _ => {
                    self.parts[p].ctx.pull_threshold = Some(c.n as u64 % 4);
                    self.parts[p].ctx.inactive_after = Some(c.n as u64 % 5);
                    self.ask_threshold(p);
                    true
                }
            };
        }
        // Quiescence: drain everything, effects first, then events.
        loop {
            let mut moved = false;
            for p in 0..self.parts.len() {
                while self.step_effect(p) {
                    moved = true;
                }
                moved |= self.step_event(p);
            }
            if !moved {
                break;
            }
        }
    }

    fn kv_of(&self, u: u64) -> &MemKv {
        let n = self.parts.len() as u32;
        &self.parts[partition_for(UserId(u), n) as usize].kv
    }

    /// Every view of every user against the oracle; the first difference.
    /// Also that no woken reader still waits for a refill (reads would be
    /// exact, on the pull path, but the inbox would never serve them).
    fn check(&self, oracle: &Oracle) -> Result<(), String> {
        for u in 1..=USERS {
            let kv = self.kv_of(u);
            let user = views::user(kv, UserId(u)).unwrap();
            let awaited = kv
                .scan_prefix(Cf::Refills, &feedlog::core::keys::key([u]))
                .count();
            if user.refills > 0 || awaited > 0 {
                return Err(format!(
                    "user {u} still waits for {} refills ({awaited} listed)",
                    user.refills
                ));
            }
            let (followers, followees, posts) = oracle.counters(u);
            let got = (user.followers, user.followees, user.posts);
            if got != (followers, followees, posts) {
                return Err(format!(
                    "counters of {u}: {got:?}, want {:?}",
                    (followers, followees, posts)
                ));
            }
            for (cf, want) in [
                (Cf::Followers, oracle.followers(u)),
                (Cf::Followees, oracle.followees(u)),
            ] {
                let got: Vec<(u64, u64)> = views::live_edges(kv, cf, UserId(u), None)
                    .map(|r| r.map(|(o, e)| (o.0, e.ts.0)).unwrap())
                    .collect();
                if got != want {
                    return Err(format!("{cf:?} of {u}: {got:?}, want {want:?}"));
                }
            }
            let got: Vec<(u64, u64)> = views::recent_followers(kv, UserId(u))
                .map(|r| r.map(|(f, ts)| (f.0, ts.0)).unwrap())
                .take(100)
                .collect();
            let want = oracle.recent_followers(u, 100);
            if got != want {
                return Err(format!("recent followers of {u}: {got:?}, want {want:?}"));
            }
            let got: Vec<(u64, u64)> = views::outbox(kv, UserId(u), None)
                .map(|r| r.map(|(ts, p)| (p.0, ts.0)).unwrap())
                .collect();
            let want = oracle.outbox(u);
            if got != want {
                return Err(format!("outbox of {u}: {got:?}, want {want:?}"));
            }
            let got = self.timeline(u);
            let want = oracle.timeline(u);
            if got != want {
                return Err(format!("timeline of {u}: {got:?}, want {want:?}"));
            }
        }
        Ok(())
    }

    /// The timeline as the reader serves it: what the user's partition
    /// holds (the inbox and its copies of pulled followees), and past their
    /// bound the current followees' outboxes; (post_id, author, ts).
    fn timeline(&self, u: u64) -> Vec<(u64, u64, u64)> {
        let kv = self.kv_of(u);
        let (held, bound) = held_timeline(kv, UserId(u), None, usize::MAX).unwrap();
        let mut keys: BTreeSet<TimelineKey> = held.into_iter().collect();
        if let Some(h) = bound {
            for r in views::live_edges(kv, Cf::Followees, UserId(u), None) {
                let (author, _) = r.unwrap();
                for r in views::outbox(self.kv_of(author.0), author, Some((h.ts, h.post_id))) {
                    let (ts, post_id) = r.unwrap();
                    let k = TimelineKey {
                        ts,
                        post_id,
                        author,
                    };
                    if k >= h {
                        keys.insert(k);
                    }
                }
            }
        }
        keys.into_iter()
            .map(|k| (k.post_id.0, k.author.0, k.ts.0))
            .collect()
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 10_000,
        max_shrink_iters: 20_000,
        ..ProptestConfig::default()
    })]

    // Proves every view of every user equals the oracle on the pure core, and every woken reader is refilled, for any partition count, inbox size, fan-out chunk, pull threshold (0: all pushed; 1-3: authors pulled, promoted and demoted constantly), inactivity span (0: never asleep; 1-12 of log time 0-29: readers asleep and woken constantly) and change of both at any point, causal interleaving and re-shipped effects.
    #[test]
    fn the_core_equals_the_oracle(
        events in prop::collection::vec(event(), 0..70),
        choices in prop::collection::vec(choice(), 0..200),
        partitions in 1u32..=4,
        inbox_cap in 1u64..=5,
        fanout_chunk in 1usize..=3,
        pull_threshold in prop_oneof![Just(0u64), 1u64..=3],
        inactive_after in prop_oneof![Just(0u64), 1u64..=12],
    ) {
        let mut oracle = Oracle::default();
        for e in &events {
            oracle.apply(e);
        }
        let settings = (pull_threshold, inactive_after);
        let mut sim = Sim::new(&events, partitions, inbox_cap, fanout_chunk, settings);
        sim.run(&choices);
        if let Err(diff) = sim.check(&oracle) {
            return Err(TestCaseError::fail(diff));
        }
    }
}
