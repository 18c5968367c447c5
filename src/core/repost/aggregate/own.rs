//! A whole reader's own sources, read once per page: every live repost
//! among their inbox entries, by original (`inbox_reposts`), and the
//! posts their pulled followees repost (the directory's `1 | reposter`).

use super::by_reposter::ByReposter;
use crate::event::{PostId, Ts, UserId};
use crate::keys::{self, PostRef, TimelineKey};
use crate::kv::{Cf, Kv, KvError};
use rustc_hash::FxHashMap as HashMap;

/// A whole reader's own sources ([`crate::keys::UserVal::whole`]), read
/// once per page: every live repost among their inbox entries, by
/// original. A page then places a post, and tells a repost from an
/// original, without the directory.
#[derive(Default)]
pub(super) struct Own {
    /// The pulled authors they follow, whose reposts are in no inbox (read
    /// from the directory), in ascending order.
    pub(super) pulled: Vec<UserId>,
    /// The posts those authors repost.
    pub(super) pulled_index: ByReposter,
    /// Their sources of each original, as appearance keys.
    pub(super) of: HashMap<PostRef, Vec<TimelineKey>>,
    /// The original each of those reposts reposts, with its time.
    pub(super) root: HashMap<TimelineKey, (PostRef, Ts)>,
}

impl Own {
    /// `user`'s rows of `inbox_reposts` (`user | root | appearance`,
    /// valued the root's time): one range, however many posts the page
    /// shows.
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
            &mut |_, k, v| {
                let row = || -> Option<(PostRef, TimelineKey, Ts)> {
                    let root = (UserId(keys::be(k, 8)?), PostId(keys::be(k, 16)?));
                    let app = TimelineKey::decode(k.get(24..).filter(|a| a.len() == 24)?)?;
                    let ts = Ts(keys::be(v, 0).filter(|_| v.len() == 8)?);
                    Some((root, app, ts))
                };
                match row() {
                    Some((root, app, ts)) => {
                        own.of.entry(root).or_default().push(app);
                        own.root.insert(app, (root, ts));
                    }
                    None => {
                        let why = "expected a key of 48 bytes valued 8";
                        bad = Some(KvError::corrupt(Cf::InboxReposts, k, why));
                    }
                }
                bad.is_none()
            },
        )?;
        if let Some(e) = bad {
            return Err(e);
        }
        own.pulled_index = ByReposter::load(kv, &own.pulled)?;
        Ok(own)
    }
}
