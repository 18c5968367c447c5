//! One partition owning every user, driven message by message: the
//! harness of the core's transition tests.

pub(super) use crate::event::{Event, PostId, Ts, UserId};
use crate::kv::{MemKv, Txn};
use crate::timeline::held_timeline;
use crate::{apply_effect, apply_event, pulled, views, Ctx, Effect, Out, Version};

pub(super) const A: UserId = UserId(1);
pub(super) const B: UserId = UserId(2);
pub(super) const C: UserId = UserId(3);
pub(super) const D: UserId = UserId(4);

/// One partition of one, every author pulled from the start (threshold
/// 0: no fan-out), an inbox cap of 10: the setting of the engagement
/// tests (likes, replies), where only the messages between posts count.
pub(super) fn engagement_ctx() -> Ctx {
    Ctx {
        partition: crate::partition::Partition(0),
        partitions: 1,
        inbox_cap: 10,
        fanout_chunk: 2,
        pull_threshold: Some(0),
        inactive_after: None,
    }
}

/// A partition and the messages it sent that are not applied yet.
pub(super) struct Part {
    pub(super) kv: MemKv,
    pub(super) ctx: Ctx,
    pub(super) queue: Vec<Out>,
    version: u64,
}

impl Part {
    /// An empty partition deciding with `ctx`, its pull threshold in force.
    pub(super) fn with(ctx: Ctx) -> Part {
        let mut part = Part {
            kv: MemKv::default(),
            ctx,
            queue: Vec::new(),
            version: 0,
        };
        let ask = pulled::threshold_request(&part.kv, &ctx).unwrap();
        part.queue.extend(ask);
        part.settle();
        part
    }

    /// Applies an event; its messages wait in the queue.
    pub(super) fn event(&mut self, ev: Event) {
        self.version += 1;
        let mut t = Txn::new(&self.kv);
        let mut out = Vec::new();
        apply_event(&mut t, &self.ctx, &ev, Version(self.version), &mut out).unwrap();
        let w = t.into_writes();
        self.kv.apply(w);
        self.queue.extend(out);
    }

    pub(super) fn effect(&mut self, e: &Effect) {
        let mut t = Txn::new(&self.kv);
        let mut out = Vec::new();
        apply_effect(&mut t, &self.ctx, e, &mut out).unwrap();
        let w = t.into_writes();
        self.kv.apply(w);
        self.queue.extend(out);
    }

    /// Applies queued messages, in order, until none is left.
    pub(super) fn settle(&mut self) {
        while !self.queue.is_empty() {
            let next = self.queue.remove(0);
            self.effect(&next.effect);
        }
    }

    pub(super) fn then(&mut self, ev: Event) -> &mut Self {
        self.event(ev);
        self.settle();
        self
    }

    /// The names of the queued messages.
    pub(super) fn queued(&self) -> Vec<&'static str> {
        self.queue.iter().map(|o| o.effect.name()).collect()
    }

    /// `u`'s timeline as held here (post ids), and whether the pull path
    /// must complete it.
    pub(super) fn held(&self, u: UserId) -> (Vec<u64>, bool) {
        let (keys, more) = held_timeline(&self.kv, u, None, usize::MAX).unwrap();
        (keys.iter().map(|k| k.post_id.0).collect(), more.is_some())
    }

    pub(super) fn inbox(&self, u: UserId) -> Vec<u64> {
        views::inbox(&self.kv, u, None)
            .map(|k| k.unwrap().post_id.0)
            .collect()
    }

    pub(super) fn copy(&self, author: UserId) -> Option<Vec<u64>> {
        views::copy_of(&self.kv, author).unwrap()?;
        Some(
            views::copy_entries(&self.kv, author, None)
                .map(|k| k.unwrap().post_id.0)
                .collect(),
        )
    }

    pub(super) fn pulls(&self, u: UserId) -> Vec<UserId> {
        views::pulls(&self.kv, u).map(|r| r.unwrap()).collect()
    }
}

pub(super) fn follow(a: UserId, b: UserId) -> Event {
    Event::Follow {
        follower: a,
        followee: b,
        ts: Ts(1),
    }
}

pub(super) fn unfollow(a: UserId, b: UserId) -> Event {
    Event::Unfollow {
        follower: a,
        followee: b,
        ts: Ts(1),
    }
}

/// Post `p` of `a`, at log time `p`.
pub(super) fn post(a: UserId, p: u64) -> Event {
    Event::Post {
        author: a,
        post_id: PostId(p),
        ts: Ts(p),
    }
}

pub(super) fn delete(a: UserId, p: u64) -> Event {
    Event::DeletePost {
        author: a,
        post_id: PostId(p),
        ts: Ts(p),
    }
}
