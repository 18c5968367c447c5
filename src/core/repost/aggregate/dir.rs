//! The directory of live reposts (`repost_dir`) as appearances: a post's
//! live reposts, all of them or those of chosen users, read in place.

use crate::event::{PostId, Ts, UserId};
use crate::keys::{self, PostRef, TimelineKey};
use crate::kv::{u64_at, Cf, Kv, KvError};

/// Every live repost this partition's directory lists, by repost: the
/// repost and the original it reposts, with the original's time.
pub fn live_reposts(kv: &(impl Kv + ?Sized)) -> Result<Vec<(PostRef, PostRef, Ts)>, KvError> {
    kv.scan_prefix(Cf::RepostDir, &[1])
        .map(|r| {
            let (k, v) = r?;
            if k.len() != 17 || v.len() != keys::DIR_REPOST_LEN {
                return Err(KvError::corrupt(Cf::RepostDir, &k, "bad repost entry"));
            }
            let at = |b: &[u8], i| u64_at(Cf::RepostDir, &k, b, i);
            let repost = (UserId(at(&k, 1)?), PostId(at(&k, 9)?));
            let original = (UserId(at(&v, 0)?), PostId(at(&v, 8)?));
            Ok((repost, original, Ts(at(&v, 16)?)))
        })
        .collect()
}

/// The live reposts of `original` this partition knows of, as appearance
/// keys (the repost's time and id, the reposter).
pub fn reposts_of(kv: &(impl Kv + ?Sized), original: PostRef) -> Result<Vec<TimelineKey>, KvError> {
    // Most posts have none: a point read the bloom filter answers, not a scan.
    if super::super::dir_count(kv, original)? == 0 {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    scan_reposts(kv, &keys::dir_original_prefix(original), &mut out)?;
    Ok(out)
}

/// The directory's reposts under `prefix`, as appearance keys, onto `out`.
pub(super) fn scan_reposts(
    kv: &(impl Kv + ?Sized),
    prefix: &[u8],
    out: &mut Vec<TimelineKey>,
) -> Result<(), KvError> {
    dir_entries(kv, &[(prefix.to_vec(), prefix.to_vec())], out)
}

/// The directory's reposts in `ranges` (disjoint, ascending), as
/// appearance keys, onto `out`: read in place, one iterator for them all.
fn dir_entries(
    kv: &(impl Kv + ?Sized),
    ranges: &[(Vec<u8>, Vec<u8>)],
    out: &mut Vec<TimelineKey>,
) -> Result<(), KvError> {
    let mut bad = None;
    kv.for_each_in_ranges(Cf::RepostDir, ranges, &mut |_, k, v| {
        match repost_app(k, v) {
            Ok(app) => out.push(app),
            Err(e) => bad = Some(e),
        }
        bad.is_none()
    })?;
    bad.map_or(Ok(()), Err)
}

/// A `0 | root | reposter | repost` entry of the directory as the
/// appearance key of its repost.
fn repost_app(k: &[u8], v: &[u8]) -> Result<TimelineKey, KvError> {
    if k.len() != 33 || v.len() != 16 {
        return Err(KvError::corrupt(Cf::RepostDir, k, "bad repost entry"));
    }
    let at = |b: &[u8], i| u64_at(Cf::RepostDir, k, b, i);
    Ok(TimelineKey {
        ts: Ts(at(v, 0)?),
        post_id: PostId(at(k, 25)?),
        author: UserId(at(k, 17)?),
    })
}

/// The live reposts of `original` by `reposters` (ascending ids), as
/// appearance keys, onto `out`: one merge of the sorted list with the
/// directory's entries of the post, which are in reposter order too — a
/// store seeks only to a reposter it has not passed yet, so the read costs
/// about as many steps as the shorter of the two lists.
pub(super) fn reposts_by(
    kv: &(impl Kv + ?Sized),
    original: PostRef,
    reposters: &[UserId],
    out: &mut Vec<TimelineKey>,
) -> Result<(), KvError> {
    let ranges: Vec<(Vec<u8>, Vec<u8>)> = reposters
        .iter()
        .map(|&r| {
            let prefix = keys::dir_original_reposter_prefix(original, r);
            (prefix.clone(), prefix)
        })
        .collect();
    dir_entries(kv, &ranges, out)
}

/// The live reposts of `original` by `users` (ascending ids), from the
/// directory: a seek per user when the post has far more reposts than
/// there are users ([`STEPS_PER_SEEK`]), else one pass over the post's
/// reposts, keeping theirs. Both read the same entries: only the cost
/// differs.
pub(super) fn reposts_among(
    kv: &(impl Kv + ?Sized),
    original: PostRef,
    users: &[UserId],
) -> Result<Vec<TimelineKey>, KvError> {
    let mut out = Vec::new();
    if users.is_empty() {
        return Ok(out);
    }
    let n = super::super::dir_count(kv, original)?;
    if n == 0 {
        return Ok(out);
    }
    if (users.len() as u64).saturating_mul(STEPS_PER_SEEK) < n {
        reposts_by(kv, original, users, &mut out)?;
    } else {
        debug_assert!(users.is_sorted(), "users in ascending order");
        scan_reposts(kv, &keys::dir_original_prefix(original), &mut out)?;
        out.retain(|r| users.binary_search(&r.author).is_ok());
    }
    Ok(out)
}

/// About how many entries a store's iterator steps over in the time it
/// seeks once (a seek searches every level of the tree; a step reads the
/// next entry of a block in hand): a merge of a reader's followees with a
/// post's reposters, a seek per followee, pays only when the post has this
/// many times more reposters than the reader followees.
pub(super) const STEPS_PER_SEEK: u64 = 32;
