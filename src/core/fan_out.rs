//! Messages to an author's followers: one per destination partition and
//! chunk of live followers, and the words for how an author's posts reach
//! them (pushed into inboxes or pulled) and whether a post appears or goes.

use super::effect::{Ctx, Effect, Out, Step};
use crate::event::{PostId, Ts, UserId};
use crate::kv::{Cf, Kv, KvError};
use crate::partition::{partition_for, Partition};
use crate::position::Version;
use crate::views::live_edges;

/// How an author's posts reach their followers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reach {
    /// Into each follower's inbox.
    Pushed,
    /// Into every partition's copy of the author, read when a timeline is.
    Pulled,
}

impl Reach {
    /// The reach of an author whose record says `pulled`.
    pub(super) fn of(pulled: bool) -> Reach {
        match pulled {
            true => Reach::Pulled,
            false => Reach::Pushed,
        }
    }
}

/// Whether a post comes into the author's followers' timelines or goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    /// It appears.
    Appears,
    /// It goes.
    Goes,
}

impl Change {
    /// `Appears` when `live`.
    pub(super) fn to(live: bool) -> Change {
        match live {
            true => Change::Appears,
            false => Change::Goes,
        }
    }
}

/// Sends one message per destination partition and chunk, covering every
/// live follower of `author`.
pub(super) fn fan_out<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    author: UserId,
    make: impl Fn(Vec<(UserId, Version)>) -> Effect,
) -> Result<(), KvError> {
    let mut by_partition: Vec<Vec<(UserId, Version)>> = vec![Vec::new(); s.ctx.partitions as usize];
    for r in live_edges(s.t, Cf::Followers, author, None) {
        let (follower, edge) = r?;
        let p = partition_for(follower, s.ctx.partitions);
        let chunk = &mut by_partition[p.index()];
        chunk.push((follower, edge.version));
        if chunk.len() >= s.ctx.fanout_chunk {
            s.out.push(Out {
                partition: p,
                effect: make(std::mem::take(chunk)),
            });
        }
    }
    for (p, chunk) in by_partition.into_iter().enumerate() {
        if !chunk.is_empty() {
            s.out.push(Out {
                partition: Partition(p as u32),
                effect: make(chunk),
            });
        }
    }
    Ok(())
}

/// `author`'s post or repost `post_id` at `ts` (owned here) appears or
/// goes for the author's followers: deliveries or retractions, or every
/// partition's copy of the author when it is pulled.
pub(super) fn announce<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    (author, post_id): (UserId, PostId),
    ts: Ts,
    (reach, change): (Reach, Change),
) -> Result<(), KvError> {
    let live = change == Change::Appears;
    if reach == Reach::Pulled {
        post_changed(s.ctx, author, post_id, ts, live, s.out);
        return Ok(());
    }
    if live {
        return fan_out(s, author, |targets| Effect::Deliver {
            author,
            post_id,
            ts,
            targets,
        });
    }
    fan_out(s, author, |targets: Vec<(UserId, Version)>| {
        Effect::Retract {
            author,
            post_id,
            ts,
            targets: targets.into_iter().map(|(u, _)| u).collect(),
        }
    })
}

/// A post of a pulled author (owned here) entered or left its outbox: it
/// enters or leaves every partition's copy.
fn post_changed(
    ctx: &Ctx,
    author: UserId,
    post_id: PostId,
    ts: Ts,
    live: bool,
    out: &mut Vec<Out>,
) {
    out.extend(Partition::all(ctx.partitions).map(|p| Out {
        partition: p,
        effect: Effect::CopyPost {
            author,
            post_id,
            ts,
            live,
        },
    }));
}
