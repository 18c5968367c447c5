//! The posts a few users repost, loaded once per page from the directory's
//! `1 | reposter | repost` entries: a page then reads the directory only
//! for the posts they repost, not a count and a seek for every post.
//!
//! A user whose entries the page's view holds in memory
//! ([`Kv::held_reposts`]) and who reposts much is not loaded: a lookup
//! per post the page shows costs no seek there, and less than entering
//! hundreds of reposts in the page's map.

use crate::event::{PostId, UserId};
use crate::keys::{self, PostRef, TimelineKey};
use crate::kv::{Cf, Kv, KvError};
use rustc_hash::FxHashMap as HashMap;

/// Live reposts of one user a page loads at most; a user with more is
/// looked up per post the page shows (a seek, or a pass over the post's
/// reposts).
pub(super) const LOADED_MOST: usize = 512;

/// Users a page loads the reposts of at most: a seek each, against a
/// count read and a seek or two per post the page shows; past that, every
/// one is looked up per post.
pub(super) const USERS_LOADED_MOST: usize = 64;

/// The originals some users repost, each with those of them who repost it.
#[derive(Default)]
pub(super) struct ByReposter {
    /// Each original with its reposting users (ascending): every live
    /// repost of the users loaded but `unloaded`.
    pub(super) of: HashMap<PostRef, Vec<UserId>>,
    /// Users with more live reposts than a page loads ([`LOADED_MOST`]):
    /// looked up per post instead.
    pub(super) unloaded: Vec<UserId>,
    /// Users whose entries the view holds in memory, with more reposts
    /// than [`LOOKUPS_PER_LOAD`]: looked up per post, with no seek.
    pub(super) held: Vec<UserId>,
}

/// About how many of a user's reposts loading walks (and enters in the
/// page's map) in the time a page looks their reposts of each post it
/// shows up in memory: a user held in memory with more is looked up per
/// post instead.
const LOOKUPS_PER_LOAD: usize = 32;

impl ByReposter {
    /// The live reposts of `users` (ascending ids), from the directory's
    /// entries of each (one iterator for them all); none when there are
    /// more than [`USERS_LOADED_MOST`] users, each then looked up per post,
    /// and none of those held in memory with more than
    /// [`LOOKUPS_PER_LOAD`] (also looked up per post).
    pub(super) fn load(kv: &(impl Kv + ?Sized), users: &[UserId]) -> Result<Self, KvError> {
        let mut index = ByReposter::default();
        if users.len() > USERS_LOADED_MOST {
            index.unloaded = users.to_vec();
            return Ok(index);
        }
        if users.is_empty() {
            return Ok(index);
        }
        debug_assert!(users.is_sorted(), "users in ascending order");
        // Those held in memory with many reposts: looked up per post.
        let (held, users): (Vec<UserId>, Vec<UserId>) = (users.iter())
            .partition(|u| kv.held_reposts(**u).is_some_and(|n| n > LOOKUPS_PER_LOAD));
        index.held = held;
        let users = users.as_slice();
        if users.is_empty() {
            return Ok(index);
        }
        let ranges: Vec<(Vec<u8>, Vec<u8>)> = (users.iter())
            .map(|a| {
                let prefix = keys::dir_by_repost_prefix(*a);
                (prefix.clone(), prefix)
            })
            .collect();
        // The current user's originals, until their range ends.
        let mut of: Vec<PostRef> = Vec::new();
        let (mut at, mut bad) = (None, None);
        let mut flush = |i: usize, of: &mut Vec<PostRef>| {
            match (of.len() > LOADED_MOST, users.get(i)) {
                (true, Some(u)) => index.unloaded.push(*u),
                (false, Some(u)) => {
                    for root in of.iter() {
                        index.of.entry(*root).or_default().push(*u);
                    }
                }
                (_, None) => {}
            }
            of.clear();
        };
        kv.for_each_in_ranges(Cf::RepostDir, &ranges, &mut |i, k, v| {
            if let Some(prev) = at.filter(|a| *a != i) {
                flush(prev, &mut of);
            }
            at = Some(i);
            match (k.len(), keys::be(v, 0), keys::be(v, 8)) {
                (17, Some(a), Some(p)) if v.len() == keys::DIR_REPOST_LEN => {
                    of.push((UserId(a), PostId(p)))
                }
                _ => bad = Some(KvError::corrupt(Cf::RepostDir, k, "bad repost entry")),
            }
            bad.is_none() && of.len() <= LOADED_MOST
        })?;
        if let Some(i) = at {
            flush(i, &mut of);
        }
        if let Some(e) = bad {
            return Err(e);
        }
        for users in index.of.values_mut() {
            users.dedup();
        }
        Ok(index)
    }

    /// The live reposts of `original` by the users loaded, as appearance
    /// keys: a seek per loaded user who reposts it, and the unloaded and
    /// held ones' per post.
    pub(super) fn reposts(
        &self,
        kv: &(impl Kv + ?Sized),
        original: PostRef,
    ) -> Result<Vec<TimelineKey>, KvError> {
        let mut out = Vec::new();
        if !self.held.is_empty() {
            super::dir::reposts_by(kv, original, &self.held, &mut out)?;
        }
        if let Some(users) = self.of.get(&original) {
            super::dir::reposts_by(kv, original, users, &mut out)?;
        }
        if !self.unloaded.is_empty() {
            out.extend(super::dir::reposts_among(kv, original, &self.unloaded)?);
        }
        Ok(out)
    }
}
