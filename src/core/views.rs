//! Typed access to the views, over a batch ([`Txn`]) or a read view ([`Kv`]).
//!
//! This is the schema in code: the core calls these and never touches bytes.

use super::keys::{self, CopyVal, EdgeVal, PostRef, PostVal, TimelineKey, UserVal};
use super::kv::KvError;
use super::kv::{timeline_key_at, u64_at, Cf, Kv, Txn};
use crate::event::{PostId, Ts, UserId};

fn decode<T>(
    cf: Cf,
    key: &[u8],
    v: Option<Vec<u8>>,
    f: impl Fn(&[u8]) -> Option<T>,
) -> Result<Option<T>, KvError> {
    match v {
        None => Ok(None),
        Some(v) => f(&v)
            .map(Some)
            .ok_or_else(|| KvError::corrupt(cf, key, format!("{} bytes do not decode", v.len()))),
    }
}

/// A user's record (zeroes when the user is unknown).
pub fn user(kv: &(impl Kv + ?Sized), u: UserId) -> Result<UserVal, KvError> {
    crate::kv::user_record(kv, u)
}

/// Every user record, by user id.
pub fn users<'a>(
    kv: &'a (impl Kv + ?Sized),
) -> impl Iterator<Item = Result<(UserId, UserVal), KvError>> + 'a {
    kv.scan(Cf::Users, &[], None).map(|r| {
        let (k, v) = r?;
        let u = UserId(u64_at(Cf::Users, &k, &k, 0)?);
        UserVal::decode(&v)
            .map(|val| (u, val))
            .ok_or_else(|| KvError::corrupt(Cf::Users, &k, "user record does not decode"))
    })
}

/// An edge record from one side: `Followees` (a→b) or `Followers` (b←a).
pub fn edge(
    kv: &(impl Kv + ?Sized),
    cf: Cf,
    owner: UserId,
    other: UserId,
) -> Result<Option<EdgeVal>, KvError> {
    let k = keys::key([owner.0, other.0]);
    decode(cf, &k, kv.get(cf, &k)?, EdgeVal::decode)
}

/// Whether `user`'s follow of `other` counts: from the followees `kv`
/// holds in memory when it does, else from the edge.
pub fn follows(kv: &(impl Kv + ?Sized), user: UserId, other: UserId) -> Result<bool, KvError> {
    match kv.held_followees(user) {
        Some(list) => Ok(list.binary_search(&other).is_ok()),
        None => Ok(edge(kv, Cf::Followees, user, other)?.is_some_and(|e| e.live)),
    }
}

/// What the author's partition knows of a post id.
pub fn post(
    kv: &(impl Kv + ?Sized),
    author: UserId,
    post_id: PostId,
) -> Result<Option<PostVal>, KvError> {
    let k = keys::key([author.0, post_id.0]);
    decode(Cf::Posts, &k, kv.get(Cf::Posts, &k)?, PostVal::decode)
}

/// Whether `author` has any post record, live or deleted.
pub fn has_posts(kv: &(impl Kv + ?Sized), author: UserId) -> Result<bool, KvError> {
    let prefix = keys::key([author.0]);
    Ok(kv
        .scan_prefix(Cf::Posts, &prefix)
        .next()
        .transpose()?
        .is_some())
}

/// Live edges of `owner` in `Followees` or `Followers`, by other-user id, from
/// `after` (exclusive).
pub fn live_edges<'a>(
    kv: &'a (impl Kv + ?Sized),
    cf: Cf,
    owner: UserId,
    after: Option<UserId>,
) -> impl Iterator<Item = Result<(UserId, EdgeVal), KvError>> + 'a {
    let prefix = keys::key([owner.0]);
    // Past the last possible other-user id: nothing (an empty scan).
    let lo = match after.map(|a| a.0.checked_add(1)) {
        Some(Some(next)) => Some(keys::key([owner.0, next])),
        Some(None) => None,
        None => Some(prefix.clone()),
    };
    let scan = match lo {
        Some(lo) => kv.scan_prefix_from(cf, &lo, &prefix),
        None => Box::new(std::iter::empty()),
    };
    scan.filter_map(move |r| match r {
        Err(e) => Some(Err(e)),
        Ok((k, v)) => match EdgeVal::decode(&v) {
            None => Some(Err(KvError::corrupt(cf, &k, "bad edge value"))),
            Some(e) if e.live => Some(u64_at(cf, &k, &k, 8).map(|u| (UserId(u), e))),
            Some(_) => None,
        },
    })
}

/// `author`'s live posts, newest first, starting at `from` (inclusive) if given.
pub fn outbox<'a>(
    kv: &'a (impl Kv + ?Sized),
    author: UserId,
    from: Option<(Ts, PostId)>,
) -> impl Iterator<Item = Result<(Ts, PostId), KvError>> + 'a {
    let lo = match from {
        Some((ts, p)) => keys::outbox(author, ts, p),
        None => keys::key([author.0]),
    };
    kv.scan_prefix_from(Cf::Outbox, &lo, &keys::key([author.0]))
        .map(|r| r.and_then(|(k, _)| outbox_entry(&k)))
}

/// The time and id of an `outbox` key (`author | !ts | !post_id`).
pub fn outbox_entry(k: &[u8]) -> Result<(Ts, PostId), KvError> {
    let at = |i| u64_at(Cf::Outbox, k, k, i);
    Ok((Ts(!at(8)?), PostId(!at(16)?)))
}

/// One entry of an author's outbox: an original post, or a live repost
/// with the original it reposts and that original's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxItem {
    /// Its time.
    pub ts: Ts,
    /// Its id.
    pub post_id: PostId,
    /// A repost's original and the original's time.
    pub repost_of: Option<(keys::PostRef, Ts)>,
}

/// [`outbox`] with what each entry is.
pub fn outbox_items<'a>(
    kv: &'a (impl Kv + ?Sized),
    author: UserId,
    from: Option<(Ts, PostId)>,
) -> impl Iterator<Item = Result<OutboxItem, KvError>> + 'a {
    let lo = match from {
        Some((ts, p)) => keys::outbox(author, ts, p),
        None => keys::key([author.0]),
    };
    kv.scan_prefix_from(Cf::Outbox, &lo, &keys::key([author.0]))
        .map(|r| {
            let (k, v) = r?;
            let (ts, post_id) = outbox_entry(&k)?;
            Ok(OutboxItem {
                ts,
                post_id,
                repost_of: keys::decode_outbox_repost(&v),
            })
        })
}

/// `user`'s inbox entries from `from` (inclusive) if given, newest first.
pub fn inbox<'a>(
    kv: &'a (impl Kv + ?Sized),
    user: UserId,
    from: Option<&TimelineKey>,
) -> impl Iterator<Item = Result<TimelineKey, KvError>> + 'a {
    inbox_before(kv, user, from, None)
}

/// `user`'s inbox entries from `from` (inclusive) up to `until`
/// (exclusive), newest first. With `until` at the horizon, a scan stops
/// before the deletes of earlier trims, which all lie at or past it.
pub fn inbox_before<'a>(
    kv: &'a (impl Kv + ?Sized),
    user: UserId,
    from: Option<&TimelineKey>,
    until: Option<&TimelineKey>,
) -> impl Iterator<Item = Result<TimelineKey, KvError>> + 'a {
    let (lo, end) = inbox_range(user, from);
    let hi = until.map_or(end, |k| Some(keys::inbox(user, k)));
    kv.scan(Cf::Inbox, &lo, hi.as_deref())
        .map(|r| r.and_then(|(k, _)| timeline_key_at(Cf::Inbox, &k, 8)))
}

/// Calls `f` with `user`'s inbox entries up to `until` (exclusive), newest
/// first, until it returns `false`; the keys are decoded in place, not
/// copied (a trim walks a whole inbox).
pub fn for_each_inbox(
    kv: &(impl Kv + ?Sized),
    user: UserId,
    until: Option<&TimelineKey>,
    mut f: impl FnMut(TimelineKey) -> bool,
) -> Result<(), KvError> {
    let (lo, end) = inbox_range(user, None);
    let hi = until.map_or(end, |k| Some(keys::inbox(user, k)));
    let mut bad = None;
    kv.for_each_key(
        Cf::Inbox,
        &lo,
        hi.as_deref(),
        &mut |k| match timeline_key_at(Cf::Inbox, k, 8) {
            Ok(entry) => f(entry),
            Err(e) => {
                bad = Some(e);
                false
            }
        },
    )?;
    bad.map_or(Ok(()), Err)
}

/// The original a repost reposts, with the original's time, when `(author,
/// post_id)` is a live repost this partition knows of.
pub fn original_of(
    kv: &(impl Kv + ?Sized),
    (author, post_id): PostRef,
) -> Result<Option<(PostRef, Ts)>, KvError> {
    let k = keys::dir_by_repost(author, post_id);
    match kv.get(Cf::RepostDir, &k)? {
        None => Ok(None),
        Some(v) if v.len() == keys::DIR_REPOST_LEN => {
            let at = |i| u64_at(Cf::RepostDir, &k, &v, i);
            Ok(Some(((UserId(at(0)?), PostId(at(8)?)), Ts(at(16)?))))
        }
        Some(_) => Err(KvError::corrupt(Cf::RepostDir, &k, "expected 32 bytes")),
    }
}

/// The keys of `user`'s inbox from `from` (inclusive) if given, as
/// `[lo, hi)` (`hi = None`: to the end of the column family).
pub fn inbox_range(user: UserId, from: Option<&TimelineKey>) -> (Vec<u8>, Option<Vec<u8>>) {
    let prefix = keys::key([user.0]);
    let lo = from.map_or_else(|| prefix.clone(), |k| keys::inbox(user, k));
    (lo, keys::prefix_end(&prefix))
}

/// The header of this partition's copy of `author`'s posts; `None` when
/// the partition holds no copy (the author is not pulled here).
pub fn copy_of(kv: &(impl Kv + ?Sized), author: UserId) -> Result<Option<CopyVal>, KvError> {
    let k = keys::key([author.0]);
    decode(Cf::Copies, &k, kv.get(Cf::Copies, &k)?, CopyVal::decode)
}

/// The entries of this partition's copy of `author`'s posts, newest
/// first, from `from` (inclusive) if given.
pub fn copy_entries<'a>(
    kv: &'a (impl Kv + ?Sized),
    author: UserId,
    from: Option<&TimelineKey>,
) -> impl Iterator<Item = Result<TimelineKey, KvError>> + 'a {
    let prefix = keys::key([author.0]);
    // The header (the bare prefix) sorts before every entry: start past it.
    let lo = match from {
        Some(k) => keys::copy(author, k.ts, k.post_id),
        None => keys::key([author.0, 0, 0]),
    };
    kv.scan_prefix_from(Cf::Copies, &lo, &prefix).map(move |r| {
        let (k, _) = r?;
        let at = |i| u64_at(Cf::Copies, &k, &k, i);
        Ok(TimelineKey {
            ts: Ts(!at(8)?),
            post_id: PostId(!at(16)?),
            author,
        })
    })
}

/// This partition's clock: the newest event time it has applied (0 before
/// any).
pub fn clock(kv: &(impl Kv + ?Sized)) -> Result<Ts, KvError> {
    let k = keys::CLOCK;
    let v = kv.get(Cf::Meta, k)?;
    Ok(Ts(decode(Cf::Meta, k, v, |b| {
        keys::be(b, 0).filter(|_| b.len() == 8)
    })?
    .unwrap_or(0)))
}

/// The pull threshold in force in this partition (0 until a
/// [`crate::Effect::PullThreshold`] sets one).
pub fn pull_threshold(kv: &(impl Kv + ?Sized)) -> Result<u64, KvError> {
    let k = keys::PULL_THRESHOLD;
    let v = kv.get(Cf::Meta, k)?;
    Ok(decode(Cf::Meta, k, v, |b| keys::be(b, 0).filter(|_| b.len() == 8))?.unwrap_or(0))
}

/// The pulled authors `user` follows (as marked in `pulls`), ascending.
pub fn pulls<'a>(
    kv: &'a (impl Kv + ?Sized),
    user: UserId,
) -> impl Iterator<Item = Result<UserId, KvError>> + 'a {
    kv.scan_prefix(Cf::Pulls, &keys::key([user.0]))
        .map(|r| r.and_then(|(k, _)| Ok(UserId(u64_at(Cf::Pulls, &k, &k, 8)?))))
}

/// `author`'s live followers by follow time, newest first, from `from` (inclusive).
pub fn recent_followers<'a>(
    kv: &'a (impl Kv + ?Sized),
    author: UserId,
) -> impl Iterator<Item = Result<(UserId, Ts), KvError>> + 'a {
    kv.scan_prefix(Cf::RecentFollowers, &keys::key([author.0]))
        .map(|r| {
            let (k, _) = r?;
            let at = |i| u64_at(Cf::RecentFollowers, &k, &k, i);
            Ok((UserId(!at(16)?), Ts(!at(8)?)))
        })
}

impl<K: Kv + ?Sized> Txn<'_, K> {
    /// Stages a user record. The core is the only writer of user records,
    /// and it only ever lowers a horizon: the API's inline timeline read
    /// relies on that (`api::query::Reader::timeline_if_materialized`), so
    /// a tool that edits user records in a live store must keep it.
    pub fn set_user(&mut self, u: UserId, val: &UserVal) {
        self.put_user(u, *val);
    }

    /// Stages an edge record on one side.
    pub fn set_edge(&mut self, cf: Cf, owner: UserId, other: UserId, val: &EdgeVal) {
        self.put(cf, keys::key([owner.0, other.0]), val.encode());
    }

    /// Stages a post record.
    pub fn set_post(&mut self, author: UserId, post_id: PostId, val: &PostVal) {
        self.put(Cf::Posts, keys::key([author.0, post_id.0]), val.encode());
    }

    /// Adds or removes an original post's outbox entry.
    pub fn set_outbox(&mut self, author: UserId, ts: Ts, post_id: PostId, present: bool) {
        self.set_outbox_entry(author, ts, post_id, present.then(Vec::new));
    }

    /// Adds an outbox entry with `value` (empty: an original; a repost:
    /// [`keys::outbox_repost`]), or removes it (`None`).
    pub fn set_outbox_entry(
        &mut self,
        author: UserId,
        ts: Ts,
        post_id: PostId,
        value: Option<Vec<u8>>,
    ) {
        let k = keys::outbox(author, ts, post_id);
        match value {
            Some(v) => self.put(Cf::Outbox, k, v),
            None => self.delete(Cf::Outbox, k),
        }
    }

    /// Adds or removes a recent-follower entry.
    pub fn set_recent(&mut self, author: UserId, ts: Ts, follower: UserId, present: bool) {
        let k = keys::recent_follower(author, ts, follower);
        if present {
            self.put(Cf::RecentFollowers, k, Vec::new());
        } else {
            self.delete(Cf::RecentFollowers, k);
        }
    }

    /// Whether `user`'s inbox holds `k`.
    pub fn inbox_has(&self, user: UserId, k: &TimelineKey) -> Result<bool, KvError> {
        self.contains(Cf::Inbox, &keys::inbox(user, k))
    }

    /// Adds an inbox entry, and the marker of its author if it is not set
    /// (see [`Txn::inbox_of_author`]); with `root` (the original it
    /// reposts and the original's time, for a reader who keeps sources:
    /// [`UserVal::whole`]) it enters the reader's sources of that post,
    /// valued the original's time. The row's value is `parent`: the author
    /// of the post the entry replies to ([`keys::inbox_value`]).
    pub fn add_inbox(
        &mut self,
        user: UserId,
        k: &TimelineKey,
        root: Option<(PostRef, Ts)>,
        parent: Option<UserId>,
    ) -> Result<(), KvError> {
        self.put(Cf::Inbox, keys::inbox(user, k), keys::inbox_value(parent));
        let marker = keys::inbox_author(user, k.author);
        if !self.contains(Cf::InboxAuthors, &marker)? {
            self.put(Cf::InboxAuthors, marker, Vec::new());
        }
        if let Some((root, post_ts)) = root {
            self.put(
                Cf::InboxReposts,
                keys::inbox_repost(user, root, k),
                keys::key([post_ts.0]),
            );
        }
        Ok(())
    }

    /// Removes an inbox entry (its author's marker stays); with `root`,
    /// from the reader's sources of that post too.
    pub fn remove_inbox(&mut self, user: UserId, k: &TimelineKey, root: Option<(PostRef, Ts)>) {
        self.delete(Cf::Inbox, keys::inbox(user, k));
        if let Some((root, _)) = root {
            self.delete(Cf::InboxReposts, keys::inbox_repost(user, root, k));
        }
    }

    /// The original `k` reposts, when it is a live repost: what a reader's
    /// sources file it under. The directory knows a repost before any
    /// inbox holds it and forgets it only after every inbox let it go (the
    /// reposter's partition sends its directory change before its
    /// deliveries and after its retractions), so a source is there exactly
    /// while its repost is in the inbox.
    pub fn root_of(&self, k: &TimelineKey) -> Result<Option<(PostRef, Ts)>, KvError> {
        original_of(self, (k.author, k.post_id))
    }

    /// Drops `user`'s sources: their inbox stopped being their whole
    /// timeline ([`UserVal::whole`]), and reads never use them again.
    pub fn drop_sources(&mut self, user: UserId) -> Result<(), KvError> {
        let rows: Vec<Vec<u8>> = self
            .scan_prefix(Cf::InboxReposts, &keys::key([user.0]))
            .map(|r| r.map(|(k, _)| k))
            .collect::<Result<_, _>>()?;
        for k in rows {
            self.delete(Cf::InboxReposts, k);
        }
        Ok(())
    }

    /// `user`'s inbox entries by `author`, newest first; `None` when its
    /// author marker is not set. Every entry added sets it, so without one
    /// there are none and the inbox is not read; with one, the inbox is
    /// scanned up to `until` (the user's horizon: no entry lies at or past
    /// it), at most the inbox cap and its slack.
    pub fn inbox_of_author(
        &self,
        user: UserId,
        author: UserId,
        until: Option<&TimelineKey>,
    ) -> Result<Option<Vec<TimelineKey>>, KvError> {
        if !self.contains(Cf::InboxAuthors, &keys::inbox_author(user, author))? {
            return Ok(None);
        }
        let mut found = Vec::new();
        for_each_inbox(self, user, until, |k| {
            if k.author == author {
                found.push(k);
            }
            true
        })?;
        Ok(Some(found))
    }

    /// Forgets that `user`'s inbox may hold entries by `author` (all of
    /// them were just removed).
    pub fn clear_inbox_author(&mut self, user: UserId, author: UserId) {
        self.delete(Cf::InboxAuthors, keys::inbox_author(user, author));
    }

    /// Marks or unmarks `author` as a pulled followee of `user` (owned
    /// here), keeping the user's count and change counter; whether it changed.
    pub fn set_pull(&mut self, user: UserId, author: UserId, on: bool) -> Result<bool, KvError> {
        let k = keys::key([user.0, author.0]);
        if self.contains(Cf::Pulls, &k)? == on {
            return Ok(false);
        }
        let mut u = self.user(user)?;
        if on {
            self.put(Cf::Pulls, k, Vec::new());
            u.pulls += 1;
        } else {
            self.delete(Cf::Pulls, k);
            u.pulls = u.pulls.saturating_sub(1);
        }
        u.marks += 1;
        self.set_user(user, &u);
        Ok(true)
    }

    /// Advances this partition's clock to `ts` (it never goes back).
    pub fn advance_clock(&mut self, ts: Ts) -> Result<(), KvError> {
        if ts > clock(self)? {
            self.put(Cf::Meta, keys::CLOCK.to_vec(), ts.0.to_be_bytes().to_vec());
        }
        Ok(())
    }

    /// Stages the pull threshold in force in this partition.
    pub fn set_pull_threshold(&mut self, threshold: u64) {
        let v = threshold.to_be_bytes().to_vec();
        self.put(Cf::Meta, keys::PULL_THRESHOLD.to_vec(), v);
    }

    /// Stages the header of this partition's copy of `author` (`None`: no copy).
    pub fn set_copy_header(&mut self, author: UserId, val: Option<&CopyVal>) {
        let k = keys::key([author.0]);
        match val {
            Some(v) => self.put(Cf::Copies, k, v.encode()),
            None => self.delete(Cf::Copies, k),
        }
    }

    /// Stages an entry of this partition's copy of `author`'s posts.
    pub fn set_copy_entry(&mut self, k: &TimelineKey, present: bool) {
        let key = keys::copy(k.author, k.ts, k.post_id);
        if present {
            self.put(Cf::Copies, key, Vec::new());
        } else {
            self.delete(Cf::Copies, key);
        }
    }
}
