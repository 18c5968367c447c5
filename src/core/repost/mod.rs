//! Reposts: a user's repost of a post is an entry of its own in the
//! reposter's outbox (id in the reposter's id space), live exactly while
//! the original it resolves to is live; readers aggregate a post's
//! appearances (the original, each repost by someone they follow) into one
//! timeline entry ([`aggregate`]).
//!
//! Who decides what:
//! - The **reposter's partition** owns the repost (`posts`: [`RepostVal`]).
//!   On the event it asks the partition of the post named
//!   ([`Effect::RepostOf`]); on the answer ([`Effect::Reposted`]) the repost
//!   enters or leaves the outbox, the reposter's `reposts` counter, the
//!   followers' inboxes (or the partitions' copies of a pulled reposter), as
//!   a post does, and every partition's copy of the live reposts
//!   ([`Effect::RepostDir`]).
//! - The **partition of the post named** passes a repost of a repost on
//!   to the post that one names (at most [`MAX_REPOST_HOPS`] links; a
//!   longer chain or a cycle answers "not live"); an original registers it
//!   (`reposts`: [`keys::repost_of`], with a count) and answers whether it is
//!   live — now, and again when it is posted late or deleted. A repost that
//!   names a post not known yet waits registered there; if that id turns
//!   out to be a repost, it is passed on then.
//! - **Every partition** keeps a copy of the live reposts (`repost_dir`),
//!   by original and by repost, which its readers aggregate with.
//!
//! Every state change is idempotent, and each decision is made by one
//! partition from the messages in its own log, so redelivery, replays and
//! handovers decide the same (the contract's property tests run with
//! reposts).

mod aggregate;

pub use aggregate::{
    aggregate, any_repost, live_reposts, original_of, reposts_of, Entries, Entry, Memo, Mode,
    Reposter, REPOSTED_BY_MOST,
};

use super::effect::{Ctx, Effect, Out, Step};
use super::fan_out::{announce, Change, Reach};
use super::like;
use super::partition::Partition;
use crate::event::{PostId, Ts, UserId, MAX_REPOST_HOPS};
use crate::keys::{self, PostRef, PostVal, RepostState, RepostVal};
use crate::kv::{u64_at, Cf, Kv, KvError, Txn};
use crate::position::Version;
use crate::views;

/// A repost as it travels: who reposted, its id, time and event version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Repost {
    pub(crate) reposter: UserId,
    pub(crate) repost: PostId,
    pub(crate) ts: Ts,
    pub(crate) version: Version,
}

/// A registration's value: `ts | hops u32 | version`.
fn registration(r: &Repost, hops: u32) -> Vec<u8> {
    let mut v = keys::key([r.ts.0]);
    v.extend_from_slice(&hops.to_be_bytes());
    v.extend_from_slice(&r.version.0.to_be_bytes());
    v
}

/// The reposts registered with `target`, with their hops.
fn registered<K: Kv + ?Sized>(
    t: &Txn<'_, K>,
    target: PostRef,
) -> Result<Vec<(Repost, u32)>, KvError> {
    t.scan_prefix(Cf::Reposts, &keys::repost_of_prefix(target))
        .map(|r| {
            let (k, v) = r?;
            if v.len() != 20 || k.len() != 33 {
                return Err(KvError::corrupt(Cf::Reposts, &k, "bad registration"));
            }
            let at = |b: &[u8], i| u64_at(Cf::Reposts, &k, b, i);
            let repost = Repost {
                reposter: UserId(at(&k, 17)?),
                repost: PostId(at(&k, 25)?),
                ts: Ts(at(&v, 0)?),
                version: Version(at(&v, 12)?),
            };
            let hops = u32::from_be_bytes([v[8], v[9], v[10], v[11]]);
            Ok((repost, hops))
        })
        .collect()
}

/// How many reposts are registered with `target` (its live reposts, when
/// it is a live original).
pub fn count<K: Kv + ?Sized>(kv: &K, target: PostRef) -> Result<u64, KvError> {
    let k = keys::repost_count(target);
    Ok(match kv.get(Cf::Reposts, &k)? {
        None => 0,
        Some(v) if v.len() == 8 => u64_at(Cf::Reposts, &k, &v, 0)?,
        Some(_) => return Err(KvError::corrupt(Cf::Reposts, &k, "expected 8 bytes")),
    })
}

/// [`count`] of each of `targets`, read in one batch.
pub fn counts<K: Kv + ?Sized>(kv: &K, targets: &[PostRef]) -> Result<Vec<u64>, KvError> {
    let ks: Vec<Vec<u8>> = targets.iter().map(|&t| keys::repost_count(t)).collect();
    let got = kv.get_many(Cf::Reposts, &ks)?;
    ks.iter()
        .zip(got)
        .map(|(k, v)| match v {
            None => Ok(0),
            Some(v) if v.len() == 8 => u64_at(Cf::Reposts, k, &v, 0),
            Some(_) => Err(KvError::corrupt(Cf::Reposts, k, "expected 8 bytes")),
        })
        .collect()
}

fn set_count<K: Kv + ?Sized>(t: &mut Txn<'_, K>, target: PostRef, n: u64) {
    let k = keys::repost_count(target);
    match n {
        0 => t.delete(Cf::Reposts, k),
        n => t.put(Cf::Reposts, k, n.to_be_bytes().to_vec()),
    }
}

/// Registers `r` with `target` (idempotent).
fn register<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    target: PostRef,
    r: &Repost,
    hops: u32,
) -> Result<(), KvError> {
    let k = keys::repost_of(target, r.reposter, r.repost);
    if !t.contains(Cf::Reposts, &k)? {
        let n = count(t, target)?;
        set_count(t, target, n + 1);
    }
    t.put(Cf::Reposts, k, registration(r, hops));
    Ok(())
}

/// Removes `(reposter, repost)`'s registration with `target`; whether it was there.
fn unregister<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    target: PostRef,
    reposter: UserId,
    repost: PostId,
) -> Result<bool, KvError> {
    let k = keys::repost_of(target, reposter, repost);
    if !t.contains(Cf::Reposts, &k)? {
        return Ok(false);
    }
    t.delete(Cf::Reposts, k);
    let n = count(t, target)?;
    set_count(t, target, n.saturating_sub(1));
    Ok(true)
}

/// Sends `r`'s resolution request to the partition of `target`, or, past
/// the last link allowed, answers it: not live.
fn ask(ctx: &Ctx, target: PostRef, r: &Repost, hops: u32, out: &mut Vec<Out>) {
    if hops > MAX_REPOST_HOPS {
        answer(ctx, r, None, out);
        return;
    }
    let effect = Effect::RepostOf {
        of_author: target.0,
        of_post_id: target.1,
        reposter: r.reposter,
        repost: r.repost,
        ts: r.ts,
        hops,
        version: r.version,
    };
    ctx.send(out, target.0, effect);
}

/// Tells `r`'s reposter what it resolved to: `Some` live original, or not
/// live (`None`, or an original that is not).
fn answer(ctx: &Ctx, r: &Repost, root: Option<(PostRef, Ts, bool)>, out: &mut Vec<Out>) {
    let ((a, p), post_ts, live) = root.unwrap_or(((UserId(0), PostId(0)), Ts(0), false));
    let effect = Effect::Reposted {
        reposter: r.reposter,
        repost: r.repost,
        root_author: a,
        root_post_id: p,
        post_ts,
        live,
        version: r.version,
    };
    ctx.send(out, r.reposter, effect);
}

/// `author` (owned here) reposts `of` as `post_id`, by event `version`.
/// The id's first event decides what it is: a repost of an id already
/// posted or reposted changes nothing. Whether anything changed.
pub(super) fn event<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    (author, post_id): PostRef,
    of: PostRef,
    (version, ts): (Version, Ts),
) -> Result<bool, KvError> {
    let (t, ctx, out) = (&mut *s.t, s.ctx, &mut *s.out);
    let deleted = match views::post(t, author, post_id)? {
        None => false,
        // Taken back before it came: a repost all the same (reposts of it
        // follow its links), never live.
        Some(PostVal::Deleted(None, _)) => true,
        Some(_) => return Ok(false),
    };
    let rv = RepostVal {
        ts,
        of,
        root: None,
        state: RepostState::Pending,
        deleted,
        by: Some(version),
    };
    t.set_post(author, post_id, &PostVal::Repost(rv));
    let me = Repost {
        reposter: author,
        repost: post_id,
        ts,
        version,
    };
    if !deleted {
        ask(ctx, of, &me, 1, out);
    }
    // Reposts of this id that waited here, taking it for an original not
    // posted yet: it is a repost, so they follow its link.
    for (r, hops) in registered(t, (author, post_id))? {
        unregister(t, (author, post_id), r.reposter, r.repost)?;
        ask(ctx, of, &r, hops + 1, out);
    }
    like::became_repost(s, (author, post_id), of)?;
    super::reply::became_repost(s, (author, post_id), of)?;
    Ok(true)
}

/// At the partition of `target` (owned here): `r`, `hops` links from its
/// reposter, names it.
pub(super) fn resolve<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    target: PostRef,
    r: &Repost,
    hops: u32,
) -> Result<bool, KvError> {
    match views::post(s.t, target.0, target.1)? {
        // A repost (live or not): on to the post it names.
        Some(PostVal::Repost(rv)) => ask(s.ctx, rv.of, r, hops + 1, s.out),
        Some(PostVal::Live(post_ts, _)) => {
            register(s.t, target, r, hops)?;
            answer(s.ctx, r, Some((target, post_ts, true)), s.out);
        }
        // An original deleted for good.
        Some(PostVal::Deleted(Some(_), _)) => answer(s.ctx, r, None, s.out),
        // Not known yet (an original to come, or a repost), or deleted
        // before its kind was known: it waits here.
        Some(PostVal::Deleted(None, _)) | None => register(s.t, target, r, hops)?,
    }
    Ok(true)
}

/// `target` (owned here) was just posted as an original at `post_ts`: the
/// reposts that waited for it are live.
pub(super) fn original_posted<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    target: PostRef,
    post_ts: Ts,
) -> Result<(), KvError> {
    for (r, _) in registered(s.t, target)? {
        answer(s.ctx, &r, Some((target, post_ts, true)), s.out);
    }
    Ok(())
}

/// `target` (owned here) is an original that will never be live (deleted,
/// or posted after its deletion): every repost registered with it is not
/// live, and leaves.
pub(super) fn original_dead<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    target: PostRef,
) -> Result<(), KvError> {
    for (r, _) in registered(s.t, target)? {
        unregister(s.t, target, r.reposter, r.repost)?;
        answer(s.ctx, &r, None, s.out);
    }
    Ok(())
}

/// At the reposter's partition: what repost `r` resolved to. A repost that
/// goes live enters the outbox and the followers' timelines; one that
/// stops being live leaves them; one taken back meanwhile is withdrawn
/// from its original.
pub(super) fn answered<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    r: &Repost,
    root: (PostRef, Ts),
    live: bool,
) -> Result<(), KvError> {
    let Some(PostVal::Repost(mut rv)) = views::post(s.t, r.reposter, r.repost)? else {
        // Not a repost here: an answer to an id that is something else.
        return Ok(());
    };
    if rv.deleted {
        // Taken back before it was answered: its original let it in.
        if live {
            // An earlier owner of this partition that applied the answer
            // before the deletion showed it, and may have shipped that
            // without what took it back: it goes again, from here.
            let pulled = s.t.user(r.reposter)?.pulled;
            announce(
                s,
                (r.reposter, r.repost),
                rv.ts,
                (Reach::of(pulled), Change::Goes),
            )?;
            s.out.extend(directory_change(
                s.ctx,
                (r.reposter, r.repost),
                rv.ts,
                root,
                false,
            ));
            let effect = Effect::Unrepost {
                root_author: root.0 .0,
                root_post_id: root.0 .1,
                reposter: r.reposter,
                repost: r.repost,
            };
            s.ctx.send(s.out, root.0 .0, effect);
        }
        return Ok(());
    }
    let was_live = rv.state == RepostState::Live;
    rv.state = if live {
        RepostState::Live
    } else {
        RepostState::Dead
    };
    if live {
        rv.root = Some(root);
    }
    s.t.set_post(r.reposter, r.repost, &PostVal::Repost(rv));
    if was_live == live {
        return Ok(());
    }
    let root = rv.root.unwrap_or(root);
    show(s, (r.reposter, r.repost), &rv, root, live)?;
    s.applied.changed = true;
    Ok(())
}

/// Repost `(reposter, repost)` (owned here) enters (`live`) or leaves its
/// reposter's outbox, counter and followers' timelines, and every
/// partition's copy of the live reposts.
fn show<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    (reposter, repost): PostRef,
    rv: &RepostVal,
    (root, post_ts): (PostRef, Ts),
    live: bool,
) -> Result<(), KvError> {
    let value = live.then(|| keys::outbox_repost(root, post_ts));
    s.t.set_outbox_entry(reposter, rv.ts, repost, value);
    let mut u = s.t.user(reposter)?;
    u.reposts = if live {
        u.reposts + 1
    } else {
        u.reposts.saturating_sub(1)
    };
    s.t.set_user(reposter, &u);
    like::reposted_change(s.t, reposter, root, live)?;
    // Every partition learns of it before any timeline holds it (the
    // messages from here reach each partition in order), and forgets it
    // after every timeline let it go.
    let dir = directory_change(s.ctx, (reposter, repost), rv.ts, (root, post_ts), live);
    if live {
        s.out.extend(dir.clone());
    }
    announce(
        s,
        (reposter, repost),
        rv.ts,
        (Reach::of(u.pulled), Change::to(live)),
    )?;
    if !live {
        s.out.extend(dir);
    }
    Ok(())
}

/// The messages that tell every partition's copy of the live reposts that
/// `(reposter, repost)` at `ts`, of `root`, enters (`live`) or leaves it.
fn directory_change(
    ctx: &Ctx,
    (reposter, repost): PostRef,
    ts: Ts,
    (root, post_ts): (PostRef, Ts),
    live: bool,
) -> impl Iterator<Item = Out> + Clone {
    Partition::all(ctx.partitions).map(move |p| Out {
        partition: p,
        effect: Effect::RepostDir {
            reposter,
            repost,
            ts,
            root_author: root.0,
            root_post_id: root.1,
            post_ts,
            live,
        },
    })
}

/// `author` (owned here) takes back repost `post_id` (`rv`): it leaves
/// everything, and its original forgets it. Whether anything changed.
pub(super) fn delete<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    (author, post_id): PostRef,
    mut rv: RepostVal,
) -> Result<bool, KvError> {
    if rv.deleted {
        return Ok(false);
    }
    rv.deleted = true;
    let was_live = rv.state == RepostState::Live;
    if was_live {
        rv.state = RepostState::Dead;
    }
    s.t.set_post(author, post_id, &PostVal::Repost(rv));
    if let (true, Some(root)) = (was_live, rv.root) {
        show(s, (author, post_id), &rv, root, false)?;
        let effect = Effect::Unrepost {
            root_author: root.0 .0,
            root_post_id: root.0 .1,
            reposter: author,
            repost: post_id,
        };
        s.ctx.send(s.out, root.0 .0, effect);
    }
    Ok(true)
}

/// At the original's partition: its reposter took `(reposter, repost)` back.
pub(super) fn unrepost<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    root: PostRef,
    (reposter, repost): PostRef,
) -> Result<bool, KvError> {
    unregister(t, root, reposter, repost)
}

/// This partition's copy of the live reposts: `(reposter, repost)` of
/// original `root` enters (`live`) or leaves it.
pub(super) fn directory<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    (reposter, repost): PostRef,
    ts: Ts,
    (root, post_ts): (PostRef, Ts),
    live: bool,
) -> Result<(), KvError> {
    let by_original = keys::dir_by_original(root, reposter, repost);
    let by_repost = keys::dir_by_repost(reposter, repost);
    // Present already: a redelivered message changes no count.
    let present = t.get(Cf::RepostDir, &by_repost)?.is_some();
    if live {
        t.put(Cf::RepostDir, by_original, keys::key([ts.0, post_ts.0]));
        let v = keys::key([root.0 .0, root.1 .0, post_ts.0, ts.0]);
        t.put(Cf::RepostDir, by_repost, v);
    } else {
        t.delete(Cf::RepostDir, by_original);
        t.delete(Cf::RepostDir, by_repost);
    }
    if live != present {
        let n = dir_count(t, root)?;
        let n = if live { n + 1 } else { n.saturating_sub(1) };
        let k = keys::dir_count(root);
        match n {
            0 => t.delete(Cf::RepostDir, k),
            n => t.put(Cf::RepostDir, k, n.to_be_bytes().to_vec()),
        }
    }
    Ok(())
}

/// The live reposts of `root` in this partition's directory.
pub fn dir_count<K: Kv + ?Sized>(kv: &K, root: PostRef) -> Result<u64, KvError> {
    let k = keys::dir_count(root);
    Ok(match kv.get(Cf::RepostDir, &k)? {
        None => 0,
        Some(v) if v.len() == 8 => u64_at(Cf::RepostDir, &k, &v, 0)?,
        Some(_) => return Err(KvError::corrupt(Cf::RepostDir, &k, "expected 8 bytes")),
    })
}

#[cfg(test)]
mod tests;

/// Applies a repost message ([`Effect::RepostOf`], [`Effect::Reposted`],
/// [`Effect::Unrepost`], [`Effect::RepostDir`]); any other changes nothing.
pub(super) fn apply_effect<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    effect: &Effect,
) -> Result<(), KvError> {
    match *effect {
        Effect::RepostOf {
            of_author,
            of_post_id,
            reposter,
            repost,
            ts,
            hops,
            version,
        } => {
            let r = Repost {
                reposter,
                repost,
                ts,
                version,
            };
            let target = (of_author, of_post_id);
            s.applied.changed |= resolve(s, target, &r, hops)?;
        }
        Effect::Reposted {
            reposter,
            repost,
            root_author,
            root_post_id,
            post_ts,
            live,
            version,
        } => {
            let r = Repost {
                reposter,
                repost,
                ts: Ts(0),
                version,
            };
            let root = ((root_author, root_post_id), post_ts);
            answered(s, &r, root, live)?;
        }
        Effect::Unrepost {
            root_author,
            root_post_id,
            reposter,
            repost,
        } => {
            let root = (root_author, root_post_id);
            s.applied.changed |= unrepost(s.t, root, (reposter, repost))?;
        }
        Effect::RepostDir {
            reposter,
            repost,
            ts,
            root_author,
            root_post_id,
            post_ts,
            live,
        } => {
            let root = ((root_author, root_post_id), post_ts);
            directory(s.t, (reposter, repost), ts, root, live)?;
            s.applied.changed = true;
        }
        _ => {}
    }
    Ok(())
}
