//! Replies and mentions: a reply counts for the original its `reply_to`
//! resolves to, while both are live.
//!
//! A reply to a repost's id follows the repost's links, as a like of one
//! does ([`super::like`]), and the same hands decide:
//! - The **replier's partition** keeps a live post's `reply_to` and
//!   `mentions` ([`keys::addressed`]) and tells the partition of the post
//!   named when the reply is posted and when it is deleted
//!   ([`Effect::ReplyOf`]), with the event's version.
//! - The **partition of the post named** passes it on when that post is a
//!   repost (at most [`MAX_REPOST_HOPS`] links), and otherwise registers
//!   it ([`keys::reply_of`]): per reply, the registration of the greatest
//!   version decides (a deletion comes after its post in the replier's
//!   log), so any arrival order and any repeat decide the same. An
//!   original counts its live registrations ([`keys::reply_count`]) and
//!   lists them oldest first ([`keys::replier`]); when it is deleted, its
//!   registrations go. A reply to a post not known yet waits registered
//!   there; if that id turns out to be a repost, it is passed on then.
//! - Each **mentioned user's partition** is told the same way
//!   ([`mention`]).

use super::effect::{Ctx, Effect, Out, Step};
use super::like::{add, counts_at, index_from, read_u64};
use crate::event::{PostId, Ts, UserId, MAX_REPOST_HOPS};
use crate::keys::{self, PostRef, PostVal};
use crate::kv::{u64_at, Cf, Kv, KvError, Txn};
use crate::position::Version;
use crate::views;

/// A reply as it travels: which, whether posted or deleted, its event's
/// version, and the reply's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reply {
    reply: PostRef,
    live: bool,
    version: Version,
    ts: Ts,
}

impl Reply {
    /// `reply` posted (`live`) or deleted by the event `version`; `ts` the
    /// reply's own time.
    fn of(reply: PostRef, live: bool, (version, ts): (Version, Ts)) -> Reply {
        Reply {
            reply,
            live,
            version,
            ts,
        }
    }
}

/// What a post names besides itself: the post it replies to, and the
/// users it mentions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Addressed {
    /// The post named in `reply_to`.
    pub reply_to: Option<PostRef>,
    /// The users mentioned, in the order written.
    pub mentions: Vec<UserId>,
}

impl Addressed {
    /// `has parent u8 [| parent author u64 | parent post u64] | mentioned u64…`.
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(17 + 8 * self.mentions.len());
        v.push(u8::from(self.reply_to.is_some()));
        if let Some((a, p)) = self.reply_to {
            v.extend_from_slice(&keys::key([a.0, p.0]));
        }
        for m in &self.mentions {
            v.extend_from_slice(&m.0.to_be_bytes());
        }
        v
    }

    /// Inverse of [`Addressed::encode`].
    fn decode(k: &[u8], v: &[u8]) -> Result<Addressed, KvError> {
        let corrupt = || KvError::corrupt(Cf::Engagement, k, "bad reply_to and mentions record");
        let (reply_to, rest) = match v.first() {
            Some(0) => (None, 1),
            Some(1) if v.len() >= 17 => {
                let at = |i| u64_at(Cf::Engagement, k, v, i);
                (Some((UserId(at(1)?), PostId(at(9)?))), 17)
            }
            _ => return Err(corrupt()),
        };
        if !(v.len() - rest).is_multiple_of(8) {
            return Err(corrupt());
        }
        let mentions = (rest..v.len())
            .step_by(8)
            .map(|i| u64_at(Cf::Engagement, k, v, i).map(UserId))
            .collect::<Result<_, _>>()?;
        Ok(Addressed { reply_to, mentions })
    }
}

/// A live post's `reply_to` and `mentions` (read at its author's
/// partition; `None` for a post with neither, or not live).
pub fn addressed<K: Kv + ?Sized>(kv: &K, post: PostRef) -> Result<Option<Addressed>, KvError> {
    let k = keys::addressed(post);
    kv.get(Cf::Engagement, &k)?
        .map(|v| Addressed::decode(&k, &v))
        .transpose()
}

/// `post` (owned here) just went live naming `reply_to` and `mentions`
/// (event `version`, the post's time `ts`): they are kept with it, and
/// the post it replies to is told.
pub(super) fn posted<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    post: PostRef,
    (reply_to, mentions): (Option<PostRef>, &[UserId]),
    (version, ts): (Version, Ts),
) {
    let addressed = Addressed {
        reply_to,
        mentions: mentions.to_vec(),
    };
    s.t.put(Cf::Engagement, keys::addressed(post), addressed.encode());
    tell_parent(s, reply_to, Reply::of(post, true, (version, ts)));
    mention::tell(s, post, mentions, true, (version, ts));
}

/// Tells the post `parent` names (if any) of `reply`.
fn tell_parent<K: Kv + ?Sized>(s: &mut Step<'_, '_, K>, parent: Option<PostRef>, reply: Reply) {
    if let Some(parent) = parent {
        ask(s.ctx, parent, &reply, 0, s.out);
    }
}

/// The live post `post` (owned here, posted at `ts`) was deleted by the
/// event `version`: the post it replied to is told.
pub(super) fn deleted<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    post: PostRef,
    ts: Ts,
    version: Version,
) -> Result<(), KvError> {
    let Some(addressed) = addressed(s.t, post)? else {
        return Ok(());
    };
    s.t.delete(Cf::Engagement, keys::addressed(post));
    tell_parent(s, addressed.reply_to, Reply::of(post, false, (version, ts)));
    mention::tell(s, post, &addressed.mentions, false, (version, ts));
    Ok(())
}

/// Sends `reply` on to the partition of `target`; past the last link
/// allowed it resolves to nothing and never counts.
fn ask(ctx: &Ctx, target: PostRef, reply: &Reply, hops: u32, out: &mut Vec<Out>) {
    if hops > MAX_REPOST_HOPS {
        return;
    }
    let effect = Effect::ReplyOf {
        of_author: target.0,
        of_post_id: target.1,
        replier: reply.reply.0,
        reply_post_id: reply.reply.1,
        live: reply.live,
        hops,
        version: reply.version,
        ts: reply.ts,
    };
    ctx.send(out, target.0, effect);
}

/// A registration's reply (from its key), state, version and time, and
/// the links followed to reach it.
fn decode(k: &[u8], v: &[u8]) -> Result<(Reply, u32), KvError> {
    if k.len() != 33 || v.len() != 21 || v[0] > 1 {
        return Err(KvError::corrupt(
            Cf::Engagement,
            k,
            "bad reply registration",
        ));
    }
    let at = |b, i| u64_at(Cf::Engagement, k, b, i);
    let reply = Reply {
        reply: (UserId(at(k, 17)?), PostId(at(k, 25)?)),
        live: v[0] == 1,
        version: Version(at(v, 5)?),
        ts: Ts(at(v, 13)?),
    };
    Ok((reply, u32::from_be_bytes([v[1], v[2], v[3], v[4]])))
}

/// The registrations with `target`: (reply, hops).
fn registered<K: Kv + ?Sized>(
    t: &Txn<'_, K>,
    target: PostRef,
) -> Result<Vec<(Reply, u32)>, KvError> {
    t.scan_prefix(Cf::Engagement, &keys::reply_of_prefix(target))
        .map(|r| {
            let (k, v) = r?;
            decode(&k, &v)
        })
        .collect()
}

/// Adds `by` (±1) to `target`'s count of live replies, deleting it at 0.
fn count_by<K: Kv + ?Sized>(t: &mut Txn<'_, K>, target: PostRef, by: i64) -> Result<(), KvError> {
    add(t, keys::reply_count(target), by)
}

/// Removes `reply`'s registration with `target` (and its place in the
/// list and the count).
fn unregister<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    target: PostRef,
    reply: &Reply,
) -> Result<(), KvError> {
    t.delete(Cf::Engagement, keys::reply_of(target, reply.reply));
    if reply.live {
        t.delete(Cf::Engagement, keys::replier(target, reply.ts, reply.reply));
        count_by(t, target, -1)?;
    }
    Ok(())
}

/// Registers `reply` with `target` unless a registration of a later (or
/// the same) version is there. Whether anything changed.
fn register<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    target: PostRef,
    reply: &Reply,
    hops: u32,
) -> Result<bool, KvError> {
    let k = keys::reply_of(target, reply.reply);
    let before = match t.get(Cf::Engagement, &k)? {
        Some(v) => Some(decode(&k, &v)?.0),
        None => None,
    };
    if before.is_some_and(|b| b.version >= reply.version) {
        return Ok(false);
    }
    if let Some(b) = before {
        unregister(t, target, &b)?;
    }
    let mut v = vec![u8::from(reply.live)];
    v.extend_from_slice(&hops.to_be_bytes());
    v.extend_from_slice(&reply.version.0.to_be_bytes());
    v.extend_from_slice(&reply.ts.0.to_be_bytes());
    t.put(Cf::Engagement, k, v);
    if reply.live {
        let at = keys::replier(target, reply.ts, reply.reply);
        t.put(Cf::Engagement, at, Vec::new());
        count_by(t, target, 1)?;
    }
    Ok(true)
}

/// At the partition of `target` (owned here): `reply`, `hops` links from
/// the post its replier named, reaches it. Whether anything changed.
fn resolve<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    target: PostRef,
    reply: &Reply,
    hops: u32,
) -> Result<bool, KvError> {
    match views::post(s.t, target.0, target.1)? {
        // A repost (live or not): on to the post it names.
        Some(PostVal::Repost(rv)) => {
            ask(s.ctx, rv.of, reply, hops + 1, s.out);
            Ok(false)
        }
        // An original deleted for good: no reply to it ever counts.
        Some(PostVal::Deleted(Some(_), _)) => Ok(false),
        // Live, or not known yet (an original to come, or a repost), or
        // deleted before its kind was known: registered (it waits).
        Some(PostVal::Live(..) | PostVal::Deleted(None, _)) | None => {
            register(s.t, target, reply, hops)
        }
    }
}

/// `target` (owned here) is an original that will never be live: its
/// registrations go.
pub(super) fn original_dead<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    target: PostRef,
) -> Result<(), KvError> {
    for (reply, _) in registered(s.t, target)? {
        unregister(s.t, target, &reply)?;
    }
    Ok(())
}

/// `id` (owned here) turned out to be a repost of `of`: the replies that
/// waited there, taking it for an original not posted yet, follow its link.
pub(super) fn became_repost<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    id: PostRef,
    of: PostRef,
) -> Result<(), KvError> {
    for (reply, hops) in registered(s.t, id)? {
        unregister(s.t, id, &reply)?;
        ask(s.ctx, of, &reply, hops + 1, s.out);
    }
    Ok(())
}

/// `target`'s live replies (when it is a live original), oldest first
/// from `from` (exclusive: the last of a page): (reply, its time).
pub fn replies<'a, K: Kv + ?Sized>(
    kv: &'a K,
    target: PostRef,
    from: Option<(Ts, PostRef)>,
) -> impl Iterator<Item = Result<(PostRef, Ts), KvError>> + 'a {
    let from = from.map(|(ts, r)| (keys::replier(target, ts, r), (r, ts)));
    index_from(kv, keys::repliers_prefix(target), from, |k| {
        let at = |i| u64_at(Cf::Engagement, k, k, i);
        Ok(((UserId(at(25)?), PostId(at(33)?)), Ts(at(17)?)))
    })
}

/// How many live registrations `target` has (its live replies, when it
/// is a live original).
pub fn count<K: Kv + ?Sized>(kv: &K, target: PostRef) -> Result<u64, KvError> {
    read_u64(kv, &keys::reply_count(target))
}

/// The like count ([`super::like::count`]) and the reply count of each of
/// `targets`, read in one batch (both are in `engagement`).
pub fn likes_and_replies<K: Kv + ?Sized>(
    kv: &K,
    targets: &[PostRef],
) -> Result<(Vec<u64>, Vec<u64>), KvError> {
    let likes = targets.iter().map(|&t| keys::like_count(t));
    let replies = targets.iter().map(|&t| keys::reply_count(t));
    let mut both = counts_at(kv, likes.chain(replies).collect())?;
    let replies = both.split_off(targets.len());
    Ok((both, replies))
}

/// Applies a reply or mention message ([`Effect::ReplyOf`],
/// [`Effect::ReplyDir`], [`Effect::MentionOf`]); any other changes
/// nothing.
pub(super) fn apply_effect<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    effect: &Effect,
) -> Result<(), KvError> {
    if let Effect::ReplyOf {
        of_author,
        of_post_id,
        replier,
        reply_post_id,
        live,
        hops,
        version,
        ts,
    } = *effect
    {
        let reply = Reply::of((replier, reply_post_id), live, (version, ts));
        s.applied.changed |= resolve(s, (of_author, of_post_id), &reply, hops)?;
    }
    if let Effect::ReplyDir {
        author,
        post_id,
        parent,
    } = *effect
    {
        rule::apply_dir(s, (author, post_id), parent)?;
    }
    if let Effect::MentionOf {
        user,
        author,
        post_id,
        live,
        version,
        ts,
    } = *effect
    {
        let word = mention::Word { live, version };
        s.applied.changed |= mention::register(s.t, user, (ts, (author, post_id)), word)?;
    }
    Ok(())
}

pub mod mention;
pub mod rule;
#[cfg(test)]
mod tests;
