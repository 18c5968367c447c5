//! A whole reader's own sources, read once per page: every live repost
//! among their inbox entries, by original (`inbox_reposts`), and the
//! posts their pulled followees repost (the directory's `1 | reposter`).

use crate::event::{PostId, UserId};
use crate::keys::{self, PostRef, TimelineKey};
use crate::kv::{Cf, Kv, KvError};
use std::collections::HashMap;

/// Live reposts of one pulled author a page loads at most; an author with
/// more is looked up per post the page shows (a seek, or a pass over the
/// post's reposts).
pub(super) const PULLED_REPOSTS_LOADED_MOST: usize = 512;

/// A whole reader's own sources ([`crate::keys::UserVal::whole`]), read
/// once per page: every live repost among their inbox entries, by
/// original. A page then places a post, and tells a repost from an
/// original, without the directory.
#[derive(Default)]
pub(super) struct Own {
    /// The pulled authors they follow, whose reposts are in no inbox (read
    /// from the directory), in ascending order.
    pub(super) pulled: Vec<UserId>,
    /// The originals those authors repost, each with its reposting authors
    /// (ascending): every live repost of the authors in `pulled` but
    /// `unloaded`.
    pulled_of: HashMap<PostRef, Vec<UserId>>,
    /// Pulled authors with more live reposts than a page loads
    /// ([`PULLED_REPOSTS_LOADED_MOST`]): looked up per post instead.
    pub(super) unloaded: Vec<UserId>,
    /// Their sources of each original, as appearance keys.
    pub(super) of: HashMap<PostRef, Vec<TimelineKey>>,
    /// The original each of those reposts reposts.
    pub(super) root: HashMap<TimelineKey, PostRef>,
}

impl Own {
    /// `user`'s rows of `inbox_reposts` (`user | root | appearance`): one
    /// range, however many posts the page shows.
    pub(super) fn read(
        kv: &(impl Kv + ?Sized),
        user: UserId,
        pulled: Vec<UserId>,
    ) -> Result<Own, KvError> {
        let mut own = Own {
            pulled,
            ..Own::default()
        };
        let prefix = keys::key([user.0]);
        let mut bad = None;
        kv.for_each_in_ranges(
            Cf::InboxReposts,
            &[(prefix.clone(), prefix)],
            &mut |_, k, _| {
                let row = || -> Option<(PostRef, TimelineKey)> {
                    let root = (UserId(keys::be(k, 8)?), PostId(keys::be(k, 16)?));
                    Some((
                        root,
                        TimelineKey::decode(k.get(24..).filter(|a| a.len() == 24)?)?,
                    ))
                };
                match row() {
                    Some((root, app)) => {
                        own.of.entry(root).or_default().push(app);
                        own.root.insert(app, root);
                    }
                    None => bad = Some(KvError::corrupt(Cf::InboxReposts, k, "expected 48 bytes")),
                }
                bad.is_none()
            },
        )?;
        if let Some(e) = bad {
            return Err(e);
        }
        own.load_pulled(kv)?;
        Ok(own)
    }

    /// Fills `pulled_of` from the directory's `1 | reposter | repost`
    /// entries of each pulled author (one iterator for them all); an author
    /// with too many goes to `unloaded`.
    fn load_pulled(&mut self, kv: &(impl Kv + ?Sized)) -> Result<(), KvError> {
        if self.pulled.is_empty() {
            return Ok(());
        }
        debug_assert!(self.pulled.is_sorted(), "pulled authors in ascending order");
        let ranges: Vec<(Vec<u8>, Vec<u8>)> = (self.pulled.iter())
            .map(|a| {
                let prefix = keys::dir_by_repost_prefix(*a);
                (prefix.clone(), prefix)
            })
            .collect();
        // The current author's originals, until their range ends.
        let mut of: Vec<PostRef> = Vec::new();
        let (mut at, mut bad) = (None, None);
        let pulled = &self.pulled;
        let (pulled_of, unloaded) = (&mut self.pulled_of, &mut self.unloaded);
        let mut flush = |i: usize, of: &mut Vec<PostRef>| {
            if of.len() > PULLED_REPOSTS_LOADED_MOST {
                unloaded.push(pulled[i]);
            } else {
                for root in of.iter() {
                    pulled_of.entry(*root).or_default().push(pulled[i]);
                }
            }
            of.clear();
        };
        kv.for_each_in_ranges(Cf::RepostDir, &ranges, &mut |i, k, v| {
            if at.is_some_and(|a| a != i) {
                flush(at.unwrap_or(i), &mut of);
            }
            at = Some(i);
            match (k.len(), keys::be(v, 0), keys::be(v, 8)) {
                (17, Some(a), Some(p)) if v.len() == 24 => of.push((UserId(a), PostId(p))),
                _ => bad = Some(KvError::corrupt(Cf::RepostDir, k, "bad repost entry")),
            }
            bad.is_none() && of.len() <= PULLED_REPOSTS_LOADED_MOST
        })?;
        if let Some(i) = at {
            flush(i, &mut of);
        }
        for authors in pulled_of.values_mut() {
            authors.dedup();
        }
        bad.map_or(Ok(()), Err)
    }

    /// The live reposts of `original` by the pulled authors they follow,
    /// as appearance keys, from the directory: a seek per loaded author
    /// who reposts it, and the unloaded ones' per post.
    pub(super) fn pulled_reposts(
        &self,
        kv: &(impl Kv + ?Sized),
        original: PostRef,
    ) -> Result<Vec<TimelineKey>, KvError> {
        let mut out = Vec::new();
        if let Some(authors) = self.pulled_of.get(&original) {
            super::reposts_by(kv, original, authors, &mut out)?;
        }
        if !self.unloaded.is_empty() {
            out.extend(super::pulled_reposts(kv, original, &self.unloaded)?);
        }
        Ok(out)
    }
}
