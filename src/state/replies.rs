//! Which posts are replies, and to whom, kept in memory beside a store:
//! the replies rule's questions (`reply_dir`, `src/core/reply/rule.rs`)
//! answered without a read for the posts pages keep meeting.
//!
//! An entry of `reply_dir` is written once and never changes, so a known
//! reply stays one; what can change is a post not known as a reply
//! becoming one when its entry arrives. Every commit that writes entries
//! puts them here after its write, and moves the epoch; an answer read
//! from the store is kept only when no such commit landed since the view
//! it was read from was taken (the epoch, read before the view) — so a
//! "not a reply" kept here is never older than the store's. Full, the map
//! is emptied and fills again.

use crate::core::event::UserId;
use crate::core::keys::PostRef;
use crate::core::kv::{u64_at, Cf, Writes};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Answers kept per store at most (about 40 B each).
pub const REPLIES_KEPT: usize = 1 << 16;

/// The answers kept beside one store.
#[derive(Debug, Default)]
pub struct ReplyCache {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Moved by every commit that writes `reply_dir`.
    epoch: u64,
    /// Commits writing `reply_dir` between their write's start and end.
    landing: u32,
    /// Post → its parent author (`None`: not a reply).
    map: HashMap<PostRef, Option<UserId>>,
}

impl ReplyCache {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The epoch to read answers at for [`ReplyCache::keep`] (take it
    /// before the view); `None` while a commit writing `reply_dir` lands.
    pub fn epoch(&self) -> Option<u64> {
        let inner = self.lock();
        (inner.landing == 0).then_some(inner.epoch)
    }

    /// What is kept of each of `posts` (`None`: nothing).
    pub fn get(&self, posts: &[PostRef]) -> Vec<Option<Option<UserId>>> {
        let inner = self.lock();
        posts.iter().map(|p| inner.map.get(p).copied()).collect()
    }

    /// Keeps `answers`, read from a view taken after [`ReplyCache::epoch`]
    /// returned `epoch`; nothing when a commit writing `reply_dir` landed
    /// since or is landing.
    pub fn keep(&self, epoch: u64, answers: &[(PostRef, Option<UserId>)]) {
        let mut inner = self.lock();
        if inner.landing != 0 || inner.epoch != epoch {
            return;
        }
        for &(post, parent) in answers {
            room(&mut inner);
            inner.map.insert(post, parent);
        }
    }

    /// Marks a commit of `writes` landing when it writes `reply_dir`;
    /// [`ReplyLanding::close`] after its write.
    pub fn landing<'a>(&'a self, writes: &'a Writes) -> ReplyLanding<'a> {
        if writes.cf(Cf::ReplyDir).is_empty() {
            return ReplyLanding(None);
        }
        self.lock().landing += 1;
        ReplyLanding(Some((self, writes)))
    }
}

/// Makes room for one more answer: a full map is emptied.
fn room(inner: &mut Inner) {
    if inner.map.len() >= REPLIES_KEPT {
        inner.map.clear();
    }
}

/// A commit writing `reply_dir` in flight ([`ReplyCache::landing`]).
pub struct ReplyLanding<'a>(Option<(&'a ReplyCache, &'a Writes)>);

impl ReplyLanding<'_> {
    /// After the write: the entries written are kept (when it succeeded)
    /// and the epoch moves.
    pub fn close(mut self, written: bool) {
        let Some((cache, writes)) = self.0.take() else {
            return;
        };
        let mut inner = cache.lock();
        if written {
            for (k, v) in writes.cf(Cf::ReplyDir) {
                let at = |b: &[u8], i| u64_at(Cf::ReplyDir, k, b, i).ok();
                let post = at(k, 0).zip(at(k, 8));
                let parent = v.as_deref().and_then(|v| at(v, 0));
                if let (Some((a, p)), Some(y)) = (post, parent) {
                    room(&mut inner);
                    inner
                        .map
                        .insert((UserId(a), crate::core::event::PostId(p)), Some(UserId(y)));
                }
            }
        }
        inner.epoch += 1;
        inner.landing -= 1;
    }
}

impl Drop for ReplyLanding<'_> {
    /// A landing dropped unclosed (a panic mid-commit) ends all the same,
    /// keeping nothing of what was read before it.
    fn drop(&mut self) {
        if let Some((cache, _)) = self.0.take() {
            let mut inner = cache.lock();
            inner.map.clear();
            inner.epoch += 1;
            inner.landing -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::PostId;

    fn post(p: u64) -> PostRef {
        (UserId(1), PostId(p))
    }

    fn dir_write(p: u64, parent: u64) -> Writes {
        let mut w = Writes::default();
        let k = crate::core::keys::reply_dir(post(p));
        w.0[Cf::ALL.iter().position(|&c| c == Cf::ReplyDir).unwrap_or(0)].insert(
            crate::core::kv::Key::from(&k[..]),
            Some(parent.to_be_bytes().to_vec()),
        );
        w
    }

    // Proves an answer read before a commit that writes `reply_dir` is not kept after it (nor while it lands), and the commit's own entries are.
    #[test]
    fn answers_from_before_a_commit_of_the_directory_are_not_kept() {
        let c = ReplyCache::default();
        let e = c.epoch().unwrap();
        let w = dir_write(7, 9);
        let landing = c.landing(&w);
        assert_eq!(c.epoch(), None, "landing");
        c.keep(e, &[(post(7), None)]);
        landing.close(true);
        c.keep(e, &[(post(7), None), (post(8), None)]);
        assert_eq!(
            c.get(&[post(7), post(8)]),
            vec![Some(Some(UserId(9))), None]
        );
        let e = c.epoch().unwrap();
        c.keep(e, &[(post(8), None)]);
        assert_eq!(c.get(&[post(8)]), vec![Some(None)]);
    }
}
