//! The contract on the pure core alone: partitions simulated on the
//! in-memory `MemKv` (no RocksDB, no log), thousands of cases per run. Any
//! partition count, inbox size and fan-out chunk; any interleaving of each
//! partition's two inputs that respects causality; effects re-shipped
//! (duplicated suffixes of a partition's outbox, as after a crash); and
//! partitions handed to a new owner (from the state at the group's last
//! commit, with a newer epoch) while the old owner keeps stepping on its own
//! state and ships what it decides at arbitrary later points — every message
//! stamped with its sender's epoch and fenced by receivers as the processor
//! does. At quiescence every view of every user equals the oracle.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::core_views::{
    directory_matches, engagement_matches, posts_view, sources_match, timelines_match,
};
use common::generated::core_event as event;
use common::oracle::Oracle;
use feedlog::core::event::{Event, Feed, UserId};
use feedlog::core::fence::{self, Admission};
use feedlog::core::gauges::{self, Gauges};
use feedlog::core::keys::TimelineKey;
use feedlog::core::kv::{Cf, Kv, MemKv, Txn};
use feedlog::core::partition::partition_for;
use feedlog::core::pulled;
use feedlog::core::timeline::held_timeline;
use feedlog::core::{
    apply_effect, apply_event, views, Ctx, Effect, Epoch, Offset, Out, Stamp, Version,
};
use proptest::prelude::*;
use std::collections::BTreeSet;

use common::generated::USERS;

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

// Proves the event generator makes every event kind: a kind added to the core fails here until it is generated.
#[test]
fn the_generator_makes_every_event_kind() {
    common::generated::assert_every_kind(event());
}

/// What the scheduler does next: step partition `p`'s events (kind 0) or
/// effects (kind 1), re-ship the last `n` messages partition `p` sent
/// (kind 2), or have partition `p` ask for pull threshold `n % 4` and put
/// readers asleep after `n % 5` of log time (kind 3, as a processor
/// restarted with other settings does). With expired owners: the group
/// commits `p`'s state (kind 4), `p` moves to a new owner that starts from
/// the last commit while its old owner keeps running (kind 5), old owner
/// `p` steps its events or effects by the parity of `n` (kind 6), or ships
/// the first `n` messages it holds for partition `p / 2` (kind 7: each
/// destination gets a prefix of what it was sent, in order, independently
/// of the others, as an idempotent producer delivers per partition).
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

/// [`choice`] with expired owners (kinds 4 to 7).
fn choice_with_expired_owners() -> impl Strategy<Value = Choice> {
    (
        0u32..8,
        prop_oneof![
            4 => Just(0u8), 4 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8),
            1 => Just(4u8), 1 => Just(5u8), 3 => Just(6u8), 2 => Just(7u8),
        ],
        1usize..6,
    )
        .prop_map(|(p, kind, n)| Choice { p, kind, n })
}

/// A message in an `effects` log, with its sender's stamp.
type Stamped = (Stamp, Effect);

/// What an owner has: its state and how far it applied each input.
#[derive(Clone)]
struct Owner {
    kv: MemKv,
    events_at: usize,
    effects_at: usize,
}

/// One simulated partition: its current owner and its two input logs.
struct SimPartition {
    owner: Owner,
    ctx: Ctx,
    epoch: Epoch,
    events: Vec<Event>,
    effects: Vec<Stamped>,
    /// Every message this partition's owners sent, in order (the outbox's
    /// history).
    sent: Vec<(Stamp, Out)>,
    /// The owner as of the group's last commit (what a successor starts from).
    committed: Owner,
    /// Whether an owner started from a commit since: messages may then
    /// name events it has not applied again yet, and wait for them.
    restored: bool,
}

/// An old owner that keeps running after its partition moved on: it
/// steps on its own state and holds what it sends until it ships it.
struct Expired {
    p: usize,
    owner: Owner,
    epoch: Epoch,
    held: Vec<Out>,
}

struct Sim {
    parts: Vec<SimPartition>,
    expired: Vec<Expired>,
}

/// Applies `e`, stamped `stamp`, to `owner` of a partition with `ctx`:
/// fenced or applied; returns what it sends, or `None` when it must wait
/// for events the owner has not applied (after a restore from a commit).
fn apply_stamped(owner: &mut Owner, ctx: &Ctx, stamp: Stamp, e: &Effect) -> Option<Vec<Out>> {
    if e.requires_events().0 > owner.events_at as u64 {
        return None;
    }
    let mut out = Vec::new();
    let mut t = Txn::new(&owner.kv);
    if fence::admit(&mut t, Some(stamp)).unwrap() == Admission::Admitted {
        apply_effect(&mut t, ctx, e, &mut out).unwrap();
    }
    let w = t.into_writes();
    apply_lowering_horizons_only(&mut owner.kv, w);
    owner.effects_at += 1;
    Some(out)
}

/// Applies `e`, the event at `owner.events_at`, to `owner`; what it sends.
fn apply_next_event(owner: &mut Owner, ctx: &Ctx, e: &Event) -> Vec<Out> {
    let version = Version::of(Offset(owner.events_at as u64));
    let mut out = Vec::new();
    let mut t = Txn::new(&owner.kv);
    apply_event(&mut t, ctx, e, version, &mut out).unwrap();
    let w = t.into_writes();
    apply_lowering_horizons_only(&mut owner.kv, w);
    owner.events_at += 1;
    out
}

impl Sim {
    fn new(
        events: &[Event],
        partitions: u32,
        inbox_cap: u64,
        fanout_chunk: usize,
        (pull_threshold, inactive_after): (u64, u64),
    ) -> Sim {
        let start = Owner {
            kv: MemKv::default(),
            events_at: 0,
            effects_at: 0,
        };
        let mut parts: Vec<SimPartition> = feedlog::core::Partition::all(partitions)
            .map(|p| SimPartition {
                owner: start.clone(),
                committed: start.clone(),
                epoch: Epoch(1),
                restored: false,
                ctx: Ctx {
                    partition: p,
                    partitions,
                    inbox_cap,
                    fanout_chunk,
                    pull_threshold: Some(pull_threshold),
                    inactive_after: Some(inactive_after),
                },
                events: Vec::new(),
                effects: Vec::new(),
                sent: Vec::new(),
            })
            .collect();
        for e in events {
            parts[partition_for(e.actor(), partitions).index()]
                .events
                .push(e.clone());
        }
        let mut sim = Sim {
            parts,
            expired: Vec::new(),
        };
        for p in 0..partitions as usize {
            sim.ask_threshold(p);
        }
        sim
    }

    /// Partition `p` asks for its configured pull threshold, as a
    /// processor does once it has caught up.
    fn ask_threshold(&mut self, p: usize) {
        let part = &self.parts[p];
        let ask: Vec<Out> = pulled::threshold_request(&part.owner.kv, &part.ctx)
            .unwrap()
            .into_iter()
            .collect();
        self.send(p, ask);
    }

    /// What partition `p`'s current owner sends: stamped, recorded, delivered.
    fn send(&mut self, p: usize, outs: Vec<Out>) {
        let stamp = Stamp {
            from: feedlog::core::Partition(p as u32),
            epoch: self.parts[p].epoch,
        };
        let outs: Vec<(Stamp, Out)> = outs.into_iter().map(|o| (stamp, o)).collect();
        self.parts[p].sent.extend(outs.iter().cloned());
        self.deliver(&outs);
    }

    fn deliver(&mut self, outs: &[(Stamp, Out)]) {
        for (stamp, o) in outs {
            self.parts[o.partition.index()]
                .effects
                .push((*stamp, o.effect.clone()));
        }
    }

    /// Applies partition `p`'s next event; false when it has none.
    fn step_event(&mut self, p: usize) -> bool {
        let part = &mut self.parts[p];
        let Some(e) = part.events.get(part.owner.events_at).cloned() else {
            return false;
        };
        let out = apply_next_event(&mut part.owner, &part.ctx, &e);
        self.send(p, out);
        true
    }

    /// Applies partition `p`'s next message; false when it has none (or
    /// it waits for events).
    fn step_effect(&mut self, p: usize) -> bool {
        let part = &mut self.parts[p];
        let Some((stamp, e)) = part.effects.get(part.owner.effects_at).cloned() else {
            return false;
        };
        // Causality: a message never names an event its receiver has not
        // applied (the follow it was sent for caused it) — unless the
        // owner started again from a commit, and waits for it.
        assert!(
            part.restored || e.requires_events().0 <= part.owner.events_at as u64,
            "partition {p} got {e:?} before applying events up to {}",
            e.requires_events()
        );
        let Some(out) = apply_stamped(&mut part.owner, &part.ctx, stamp, &e) else {
            return false;
        };
        self.send(p, out);
        true
    }

    /// Re-sends the last `n` messages partition `p` sent, in order, with
    /// the stamps they were sent with.
    fn reship(&mut self, p: usize, n: usize) {
        let sent = &self.parts[p].sent;
        let again = sent[sent.len().saturating_sub(n)..].to_vec();
        self.deliver(&again);
    }

    /// The group commits partition `p`'s current state: every message its
    /// owner sent so far is delivered (acknowledged).
    fn commit(&mut self, p: usize) {
        let part = &mut self.parts[p];
        part.committed = part.owner.clone();
    }

    /// Partition `p` moves to a new owner, which starts from the last
    /// commit with a newer epoch and decides what follows anew; the old
    /// owner keeps running on its own state.
    fn expire(&mut self, p: usize) {
        let part = &mut self.parts[p];
        let old = std::mem::replace(&mut part.owner, part.committed.clone());
        self.expired.push(Expired {
            p,
            owner: old,
            epoch: part.epoch,
            held: Vec::new(),
        });
        part.epoch = Epoch(part.epoch.0 + 1);
        part.restored = true;
        self.ask_threshold(p);
    }

    /// Old owner `i` applies its next event (`events`) or message; what it
    /// sends, it holds.
    fn step_expired(&mut self, i: usize, events: bool) {
        let Some(x) = self.expired.get_mut(i) else {
            return;
        };
        let part = &self.parts[x.p];
        let out = if events {
            match part.events.get(x.owner.events_at) {
                Some(e) => apply_next_event(&mut x.owner, &part.ctx, e),
                None => return,
            }
        } else {
            let Some((stamp, e)) = part.effects.get(x.owner.effects_at) else {
                return;
            };
            match apply_stamped(&mut x.owner, &part.ctx, *stamp, e) {
                Some(out) => out,
                None => return,
            }
        };
        x.held.extend(out);
    }

    /// Old owner `i` ships the first `n` messages it holds for partition
    /// `to` (`None`: for every partition), late, stamped with its own epoch.
    fn ship_expired(&mut self, i: usize, to: Option<u32>, n: usize) {
        let Some(x) = self.expired.get_mut(i) else {
            return;
        };
        let stamp = Stamp {
            from: feedlog::core::Partition(x.p as u32),
            epoch: x.epoch,
        };
        let mut ship = Vec::new();
        let mut kept = Vec::new();
        for o in x.held.drain(..) {
            if ship.len() < n && to.is_none_or(|to| to == o.partition.0) {
                ship.push((stamp, o));
            } else {
                kept.push(o);
            }
        }
        x.held = kept;
        self.deliver(&ship);
    }

    fn run(&mut self, choices: &[Choice]) {
        let n = self.parts.len() as u32;
        for c in choices {
            let p = (c.p % n) as usize;
            let x = c.p as usize % self.expired.len().max(1);
            match c.kind {
                0 => {
                    self.step_event(p);
                }
                1 => {
                    self.step_effect(p);
                }
                2 => self.reship(p, c.n),
                3 => {
                    self.parts[p].ctx.pull_threshold = Some(c.n as u64 % 4);
                    self.parts[p].ctx.inactive_after = Some(c.n as u64 % 5);
                    self.ask_threshold(p);
                }
                4 => self.commit(p),
                5 => self.expire(p),
                6 => self.step_expired(x, c.n % 2 == 0),
                _ => self.ship_expired(x, Some(c.p / 2 % n), c.n),
            };
        }
        // Old owners ship what they hold, and stop.
        for i in 0..self.expired.len() {
            self.ship_expired(i, None, usize::MAX);
        }
        self.expired.clear();
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
        &self.parts[partition_for(UserId(u), n).index()].owner.kv
    }

    /// Every view of every user against the oracle; the first difference.
    /// Also that no woken reader still waits for a refill (reads would be
    /// exact, on the pull path, but the inbox would never serve them).
    fn check(&self, oracle: &Oracle) -> Result<(), String> {
        for (i, p) in self.parts.iter().enumerate() {
            let kept = Gauges::of(&p.owner.kv).unwrap().unwrap_or_default();
            let counted = gauges::recount(&p.owner.kv).unwrap();
            if kept != counted {
                return Err(format!(
                    "gauges of partition {i}: kept {kept:?}, counted {counted:?}"
                ));
            }
            directory_matches(&p.owner.kv, i, oracle)?;
            sources_match(&p.owner.kv, i)?;
        }
        engagement_matches(&|u| self.kv_of(u), oracle, 1..=USERS)?;
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
            let got = (user.followers, user.followees, user.posts, user.reposts);
            let want = (followers, followees, posts, oracle.reposts_counter(u));
            if got != want {
                return Err(format!("counters of {u}: {got:?}, want {want:?}"));
            }
            for feed in Feed::ALL {
                let got = feedlog::core::marker::get(kv, UserId(u), feed).unwrap();
                let got = got.map(|m| (m.read_up_to, m.since.0));
                let want = oracle.marker(u, feed).map(|m| (m.0, m.2));
                if got != want {
                    return Err(format!("marker of {u} ({feed:?}): {got:?}, want {want:?}"));
                }
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
            let got = posts_view(kv, u);
            let want = oracle.posts_view(u);
            if got != want {
                return Err(format!("posts of {u}: {got:?}, want {want:?}"));
            }
            let apps = self.appearances(u);
            let n = self.parts.len() as u32;
            timelines_match(&|x| self.kv_of(x), n, oracle, u, &apps)?;
        }
        Ok(())
    }

    /// The timeline's appearances as the reader walks them: what the user's
    /// partition holds (the inbox and its copies of pulled followees), and
    /// past their bound the current followees' outboxes, in order.
    fn appearances(&self, u: u64) -> Vec<TimelineKey> {
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
        keys.into_iter().collect()
    }
}

/// Simulates `events` under `choices` on `partitions` partitions with
/// (inbox cap, fan-out chunk, pull threshold, inactivity span), then checks
/// every view against the oracle.
fn run_sim(
    events: &[Event],
    choices: &[Choice],
    partitions: u32,
    (inbox_cap, fanout_chunk, pull_threshold, inactive_after): (u64, usize, u64, u64),
) -> Result<(), TestCaseError> {
    let mut oracle = Oracle::with_partitions(partitions);
    for e in events {
        oracle.apply(e);
    }
    let settings = (pull_threshold, inactive_after);
    let mut sim = Sim::new(events, partitions, inbox_cap, fanout_chunk, settings);
    sim.run(choices);
    sim.check(&oracle).map_err(TestCaseError::fail)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 10_000,
        max_shrink_iters: 20_000,
        // Shrinking stops after five minutes, so a failure is reported within
        // the test command's time budget.
        max_shrink_time: 300_000,
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
        let settings = (inbox_cap, fanout_chunk, pull_threshold, inactive_after);
        run_sim(&events, &choices, partitions, settings)?;
    }

    // Proves the same when partitions move to new owners (starting from the group's last commit, with a newer epoch) while their old owners keep stepping on their own state and ship what they decided at arbitrary later points: receivers fence what an old owner sends once its successor's messages are applied, and every view still equals the oracle.
    #[test]
    fn the_core_equals_the_oracle_with_expired_owners(
        events in prop::collection::vec(event(), 0..70),
        choices in prop::collection::vec(choice_with_expired_owners(), 0..240),
        partitions in 1u32..=4,
        inbox_cap in 1u64..=5,
        fanout_chunk in 1usize..=3,
        pull_threshold in prop_oneof![Just(0u64), 1u64..=3],
        inactive_after in prop_oneof![Just(0u64), 1u64..=12],
    ) {
        let settings = (inbox_cap, fanout_chunk, pull_threshold, inactive_after);
        run_sim(&events, &choices, partitions, settings)?;
    }
}
