//! Mentions: a live post's `mentions`, registered at each mentioned user's partition, where their notifications are read.
//!
//! The author's partition tells the partition of each user a post
//! mentions when the post goes live and when it is deleted
//! ([`Effect::MentionOf`]), with the event's version and the post's time.
//! There, per post, the word of the greatest version decides
//! ([`keys::mention`]; a deletion comes after its post in the author's
//! log), so any arrival order and any repeat decide the same. A deleted
//! post's registration stays, not live, so that a late copy of its
//! posting changes nothing.

use crate::effect::{Effect, Step};
use crate::event::{PostId, Ts, UserId};
use crate::keys::{self, PostRef};
use crate::kv::{u64_at, Cf, Kv, KvError, Txn};
use crate::position::Version;

/// What a message says of a mentioning post: live or deleted, by the
/// event `version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word {
    /// Posted (true) or deleted.
    pub live: bool,
    /// The post or delete event's version.
    pub version: Version,
}

/// Tells each of `mentions` that `post` (posted at `ts`) went live or
/// was deleted (`live`) by the event `version`.
pub(crate) fn tell<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    post: PostRef,
    mentions: &[UserId],
    live: bool,
    (version, ts): (Version, Ts),
) {
    for &user in mentions {
        let effect = Effect::MentionOf {
            user,
            author: post.0,
            post_id: post.1,
            live,
            version,
            ts,
        };
        s.send(user, effect);
    }
}

/// At `user`'s partition: registers `word` on `post` (posted at `ts`)
/// unless a word of a later (or the same) version is there. Whether
/// anything changed.
pub(crate) fn register<K: Kv + ?Sized>(
    t: &mut Txn<'_, K>,
    user: UserId,
    (ts, post): (Ts, PostRef),
    word: Word,
) -> Result<bool, KvError> {
    let k = keys::mention(user, ts, post);
    if let Some(v) = t.get(Cf::Engagement, &k)? {
        if decode(&k, &v)?.version >= word.version {
            return Ok(false);
        }
    }
    let mut v = vec![u8::from(word.live)];
    v.extend_from_slice(&word.version.0.to_be_bytes());
    t.put(Cf::Engagement, k, v);
    Ok(true)
}

fn decode(k: &[u8], v: &[u8]) -> Result<Word, KvError> {
    if v.len() != 9 || v[0] > 1 {
        return Err(KvError::corrupt(
            Cf::Engagement,
            k,
            "bad mention registration",
        ));
    }
    Ok(Word {
        live: v[0] == 1,
        version: Version(u64_at(Cf::Engagement, k, v, 1)?),
    })
}

/// The live posts that mention `user` (owned by this partition), oldest
/// first: (the post's time, the post).
pub fn mentions_of<'a, K: Kv + ?Sized>(
    kv: &'a K,
    user: UserId,
) -> impl Iterator<Item = Result<(Ts, PostRef), KvError>> + 'a {
    kv.scan_prefix(Cf::Engagement, &keys::mentions_prefix(user))
        .filter_map(|r| {
            let live = |k: &[u8], v: &[u8]| -> Result<Option<(Ts, PostRef)>, KvError> {
                if k.len() != 33 {
                    return Err(KvError::corrupt(Cf::Engagement, k, "bad mention key"));
                }
                if !decode(k, v)?.live {
                    return Ok(None);
                }
                let at = |i| u64_at(Cf::Engagement, k, k, i);
                let post = (UserId(at(17)?), PostId(at(25)?));
                Ok(Some((Ts(at(9)?), post)))
            };
            match r {
                Ok((k, v)) => live(&k, &v).transpose(),
                Err(e) => Some(Err(e)),
            }
        })
}
