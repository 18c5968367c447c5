//! Likes: a like counts for the original the post it names resolves to,
//! while that original is live.
//!
//! A like of a repost's id follows the repost's links, as a repost of a
//! repost does.
//!
//! Who decides what:
//! - The **liker's partition** sends each `like` and `unlike` to the
//!   partition of the post named ([`Effect::LikeOf`]), with its version.
//! - The **partition of the post named** passes it on when that post is a
//!   repost (at most [`MAX_REPOST_HOPS`] links), and otherwise registers it
//!   (`engagement`: [`keys::like_of`]): per liker, the registration of the
//!   greatest version decides, so the latest like or unlike of the user
//!   for that original counts whichever way it came and in whatever order
//!   the messages arrived. An original counts its liked registrations
//!   ([`keys::like_count`]) and tells each liker whether their like is live
//!   ([`Effect::LikeLive`]) — on each like that reaches it, when it is
//!   posted late, when it is deleted. A like of a post not known yet waits registered
//!   there; if that id turns out to be a repost, it is passed on then.
//! - The **liker's partition** keeps the live likes by original
//!   ([`keys::liked`]) and their number, the user's `likes` counter.
//!
//! Every state change is idempotent and each decision is made from the
//! messages in one partition's own log, so redelivery, replays and
//! handovers decide the same.

use super::effect::{Ctx, Effect, Out, Step};
use crate::event::{Ts, UserId, MAX_REPOST_HOPS};
use crate::keys::{self, PostRef, PostVal};
use crate::kv::{u64_at, Cf, Kv, KvError, Txn};
use crate::position::Version;
use crate::views;

/// A like or unlike as it travels: who, which way, its event's version
/// and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Like {
    liker: UserId,
    liked: bool,
    version: Version,
    ts: Ts,
}

/// `user` (owned here) likes or unlikes `named`, by the event of
/// `version` at `ts`: the partition of the post named decides. Whether
/// anything changed here (nothing does: the like changes state where it
/// is registered).
pub(super) fn event(
    s: &mut Step<'_, '_, impl Kv + ?Sized>,
    user: UserId,
    named: PostRef,
    liked: bool,
    (version, ts): (Version, Ts),
) -> bool {
    let like = Like {
        liker: user,
        liked,
        version,
        ts,
    };
    ask(s.ctx, named, &like, 0, s.out);
    false
}

/// Sends `like` on to the partition of `target`; past the last link
/// allowed it resolves to nothing and never counts.
fn ask(ctx: &Ctx, target: PostRef, like: &Like, hops: u32, out: &mut Vec<Out>) {
    if hops > MAX_REPOST_HOPS {
        return;
    }
    let effect = Effect::LikeOf {
        of_author: target.0,
        of_post_id: target.1,
        liker: like.liker,
        liked: like.liked,
        hops,
        version: like.version,
        ts: like.ts,
    };
    ctx.send(out, target.0, effect);
}

/// Tells `liker` whether their like of the original `root` counts now.
fn tell(ctx: &Ctx, root: PostRef, liker: UserId, live: bool, out: &mut Vec<Out>) {
    let effect = Effect::LikeLive {
        liker,
        root_author: root.0,
        root_post_id: root.1,
        live,
    };
    ctx.send(out, liker, effect);
}

/// The registrations with `target`: (like, hops).
fn registered<K: Kv + ?Sized>(
    t: &Txn<'_, K>,
    target: PostRef,
) -> Result<Vec<(Like, u32)>, KvError> {
    t.scan_prefix(Cf::Engagement, &keys::like_of_prefix(target))
        .map(|r| {
            let (k, v) = r?;
            let like = decode(&k, &v)?;
            Ok((like, u32::from_be_bytes([v[1], v[2], v[3], v[4]])))
        })
        .collect()
}

/// A registration's liker (from its key), direction, version and time.
fn decode(k: &[u8], v: &[u8]) -> Result<Like, KvError> {
    if k.len() != 25 || v.len() != 21 || v[0] > 1 {
        return Err(KvError::corrupt(Cf::Engagement, k, "bad like registration"));
    }
    Ok(Like {
        liker: UserId(u64_at(Cf::Engagement, k, k, 17)?),
        liked: v[0] == 1,
        version: Version(u64_at(Cf::Engagement, k, v, 5)?),
        ts: Ts(u64_at(Cf::Engagement, k, v, 13)?),
    })
}

/// Removes `like`'s registration with `target` (and its place among the
/// likers).
fn unregister<K: Kv + ?Sized>(t: &mut Txn<'_, K>, target: PostRef, like: &Like) {
    t.delete(Cf::Engagement, keys::like_of(target, like.liker));
    if like.liked {
        t.delete(Cf::Engagement, keys::liker(target, like.ts, like.liker));
    }
}

/// `target`'s likers (the liked registrations), newest first from
/// `from` (exclusive: the last of a page): (liker, the like's time).
pub fn likers<'a, K: Kv + ?Sized>(
    kv: &'a K,
    target: PostRef,
    from: Option<(Ts, UserId)>,
) -> impl Iterator<Item = Result<(UserId, Ts), KvError>> + 'a {
    let from = from.map(|(ts, u)| (keys::liker(target, ts, u), (u, ts)));
    index_from(kv, keys::likers_prefix(target), from, |k| {
        let ts = Ts(!u64_at(Cf::Engagement, k, k, 17)?);
        Ok((UserId(!u64_at(Cf::Engagement, k, k, 25)?), ts))
    })
}

/// An `engagement` index under `prefix` in key order, each key decoded by
/// `decode`, from `from` (its key and item: the last of a page, left out).
pub(super) fn index_from<'a, K: Kv + ?Sized, T: PartialEq + Copy + 'a>(
    kv: &'a K,
    prefix: Vec<u8>,
    from: Option<(Vec<u8>, T)>,
    decode: impl Fn(&[u8]) -> Result<T, KvError> + 'a,
) -> impl Iterator<Item = Result<T, KvError>> + 'a {
    let (lo, last) = match from {
        Some((k, t)) => (k, Some(t)),
        None => (prefix.clone(), None),
    };
    kv.scan_prefix_from(Cf::Engagement, &lo, &prefix)
        .map(move |r| decode(&r?.0))
        .filter(move |r| !matches!((r, last), (Ok(t), Some(l)) if *t == l))
}

/// How many liked registrations `target` has (its live likes, when it is
/// a live original).
pub fn count<K: Kv + ?Sized>(kv: &K, target: PostRef) -> Result<u64, KvError> {
    read_u64(kv, &keys::like_count(target))
}

/// The counts at keys `ks` of `engagement` (absent: 0), read in one batch.
pub(super) fn counts_at<K: Kv + ?Sized>(kv: &K, ks: Vec<Vec<u8>>) -> Result<Vec<u64>, KvError> {
    let got = kv.get_many(Cf::Engagement, &ks)?;
    ks.iter().zip(got).map(|(k, v)| parse_u64(k, v)).collect()
}

/// A count's value (absent: 0).
fn parse_u64(k: &[u8], v: Option<Vec<u8>>) -> Result<u64, KvError> {
    Ok(match v {
        None => 0,
        Some(v) if v.len() == 8 => u64_at(Cf::Engagement, k, &v, 0)?,
        Some(_) => return Err(KvError::corrupt(Cf::Engagement, k, "expected 8 bytes")),
    })
}

/// The user's live likes (their `likes` counter).
pub fn given<K: Kv + ?Sized>(kv: &K, user: UserId) -> Result<u64, KvError> {
    read_u64(kv, &keys::likes_given(user))
}

/// Whether `user` (owned here) likes the live original `root`.
pub fn likes<K: Kv + ?Sized>(kv: &K, user: UserId, root: PostRef) -> Result<bool, KvError> {
    Ok(kv.get(Cf::Engagement, &keys::liked(user, root))?.is_some())
}

/// `user`'s (owned here) flags on each of `roots`: (liked, reposted),
/// read in two batches.
pub fn flags<K: Kv + ?Sized>(
    kv: &K,
    user: UserId,
    roots: &[PostRef],
) -> Result<Vec<(bool, bool)>, KvError> {
    let liked: Vec<Vec<u8>> = roots.iter().map(|&r| keys::liked(user, r)).collect();
    let reposted: Vec<Vec<u8>> = roots.iter().map(|&r| keys::reposted(user, r)).collect();
    let (l, r) = (
        kv.get_many(Cf::Engagement, &liked)?,
        kv.get_many(Cf::Engagement, &reposted)?,
    );
    let mut out = Vec::with_capacity(roots.len());
    for ((l, r), k) in l.into_iter().zip(r).zip(&reposted) {
        out.push((l.is_some(), parse_u64(k, r)? > 0));
    }
    Ok(out)
}

/// Whether `user` (owned here) has a live repost of the original `root`.
pub fn reposted<K: Kv + ?Sized>(kv: &K, user: UserId, root: PostRef) -> Result<bool, KvError> {
    Ok(read_u64(kv, &keys::reposted(user, root))? > 0)
}

/// The count at `k` (absent: 0).
pub(super) fn read_u64<K: Kv + ?Sized>(kv: &K, k: &[u8]) -> Result<u64, KvError> {
    parse_u64(k, kv.get(Cf::Engagement, k)?)
}

/// Adds `by` (±1) to the u64 at `k`, deleting it at 0.
pub(super) fn add<K: Kv + ?Sized>(t: &mut Txn<'_, K>, k: Vec<u8>, by: i64) -> Result<(), KvError> {
    let n = read_u64(t, &k)?.saturating_add_signed(by);
    match n {
        0 => t.delete(Cf::Engagement, k),
        n => t.put(Cf::Engagement, k, n.to_be_bytes().to_vec()),
    }
    Ok(())
}

/// Registers `like` with `target` unless a registration of a later (or
/// the same) version is there: whether anything changed, and whether the
/// liker's registration with `target` is now a like.
fn register<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    target: PostRef,
    like: &Like,
    hops: u32,
) -> Result<(bool, bool), KvError> {
    let k = keys::like_of(target, like.liker);
    let before = match t.get(Cf::Engagement, &k)? {
        Some(v) => Some(decode(&k, &v)?),
        None => None,
    };
    if let Some(b) = before.filter(|b| b.version >= like.version) {
        return Ok((false, b.liked));
    }
    let mut v = vec![u8::from(like.liked)];
    v.extend_from_slice(&hops.to_be_bytes());
    v.extend_from_slice(&like.version.0.to_be_bytes());
    v.extend_from_slice(&like.ts.0.to_be_bytes());
    t.put(Cf::Engagement, k, v);
    if let Some(b) = before.filter(|b| b.liked) {
        t.delete(Cf::Engagement, keys::liker(target, b.ts, b.liker));
    }
    if like.liked {
        t.put(
            Cf::Engagement,
            keys::liker(target, like.ts, like.liker),
            Vec::new(),
        );
    }
    // The count is kept (at 0 too) while any registration is: it tells a
    // post going live whether it has registrations to answer.
    let ck = keys::like_count(target);
    let n = read_u64(t, &ck)?;
    let n = match (before.is_some_and(|b| b.liked), like.liked) {
        (false, true) => n.saturating_add(1),
        (true, false) => n.saturating_sub(1),
        _ => n,
    };
    t.put(Cf::Engagement, ck, n.to_be_bytes().to_vec());
    Ok((true, like.liked))
}

/// At the partition of `target` (owned here): `like`, `hops` links from
/// the post its liker named, reaches it. Whether anything changed.
///
/// An original answers every like that reaches it with the pair's state
/// (not only a change): a successor that applies its inputs in another
/// order than an earlier owner of this partition, whose answers the liker
/// may have applied, settles them ([`crate::fence`]).
fn resolve<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    target: PostRef,
    like: &Like,
    hops: u32,
) -> Result<bool, KvError> {
    match views::post(s.t, target.0, target.1)? {
        // A repost (live or not): on to the post it names.
        Some(PostVal::Repost(rv)) => {
            ask(s.ctx, rv.of, like, hops + 1, s.out);
            Ok(false)
        }
        Some(PostVal::Live(..)) => {
            let (changed, liked) = register(s.t, target, like, hops)?;
            tell(s.ctx, target, like.liker, liked, s.out);
            Ok(changed)
        }
        // An original deleted for good: no like of it ever counts.
        Some(PostVal::Deleted(Some(_), _)) => {
            tell(s.ctx, target, like.liker, false, s.out);
            Ok(false)
        }
        // Not known yet (an original to come, or a repost), or deleted
        // before its kind was known: it waits here.
        Some(PostVal::Deleted(None, _)) | None => Ok(register(s.t, target, like, hops)?.0),
    }
}

/// `target` (owned here) was just posted as an original: the likes that
/// waited for it count, and every liker that waited is answered with the
/// pair's state — an unlike too, which settles a like an earlier owner of
/// this partition, applying its inputs in another order, answered as live.
/// Most posts have none waiting: the count's key (a point read the bloom
/// filter answers, kept while any registration is) spares them the scan.
pub(super) fn original_posted<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    target: PostRef,
) -> Result<(), KvError> {
    if !s.t.contains(Cf::Engagement, &keys::like_count(target))? {
        return Ok(());
    }
    for (like, _) in registered(s.t, target)? {
        tell(s.ctx, target, like.liker, like.liked, s.out);
    }
    Ok(())
}

/// `target` (owned here) is an original that will never be live: its
/// registrations go, and no like of it counts (every liker is told, for
/// the reason [`original_posted`] gives).
pub(super) fn original_dead<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    target: PostRef,
) -> Result<(), KvError> {
    for (like, _) in registered(s.t, target)? {
        unregister(s.t, target, &like);
        tell(s.ctx, target, like.liker, false, s.out);
    }
    s.t.delete(Cf::Engagement, keys::like_count(target));
    Ok(())
}

/// `id` (owned here) turned out to be a repost of `of`: the likes that
/// waited there, taking it for an original not posted yet, follow its link.
pub(super) fn became_repost<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    id: PostRef,
    of: PostRef,
) -> Result<(), KvError> {
    for (like, hops) in registered(s.t, id)? {
        unregister(s.t, id, &like);
        ask(s.ctx, of, &like, hops + 1, s.out);
    }
    s.t.delete(Cf::Engagement, keys::like_count(id));
    Ok(())
}

/// At the liker's partition: whether `liker`'s like of `root` counts.
/// Whether anything changed (a repeat: no).
fn live<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    liker: UserId,
    root: PostRef,
    live: bool,
) -> Result<bool, KvError> {
    let k = keys::liked(liker, root);
    if t.contains(Cf::Engagement, &k)? == live {
        return Ok(false);
    }
    match live {
        true => t.put(Cf::Engagement, k, Vec::new()),
        false => t.delete(Cf::Engagement, k),
    }
    add(t, keys::likes_given(liker), if live { 1 } else { -1 })?;
    Ok(true)
}

/// At the reposter's partition: a repost by `user` of the original `root`
/// went live (`live`) or stopped being (the `reposted` flag).
pub(super) fn reposted_change<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    user: UserId,
    root: PostRef,
    live: bool,
) -> Result<(), KvError> {
    add(t, keys::reposted(user, root), if live { 1 } else { -1 })
}

/// Applies a like message ([`Effect::LikeOf`], [`Effect::LikeLive`]); any
/// other changes nothing.
pub(super) fn apply_effect<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    effect: &Effect,
) -> Result<(), KvError> {
    match *effect {
        Effect::LikeOf {
            of_author,
            of_post_id,
            liker,
            liked,
            hops,
            version,
            ts,
        } => {
            let like = Like {
                liker,
                liked,
                version,
                ts,
            };
            s.applied.changed |= resolve(s, (of_author, of_post_id), &like, hops)?;
        }
        Effect::LikeLive {
            liker,
            root_author,
            root_post_id,
            live: on,
        } => {
            s.applied.changed |= live(s.t, liker, (root_author, root_post_id), on)?;
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests;
