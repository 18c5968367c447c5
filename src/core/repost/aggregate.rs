//! A reader's timeline entries from the appearances its partition serves
//! (the inbox, the copies of pulled authors, the followees' outboxes past
//! the horizon — every live post and live repost of every followee, in
//! timeline order): one entry per original post, placed at its newest
//! appearance ([`Mode::Newest`], the default), its oldest
//! ([`Mode::First`]), or with reposts ignored ([`Mode::None`]).
//!
//! A post's appearances for a reader are known at the reader's partition
//! alone: its copy of the live reposts (`repost_dir`) lists every live
//! repost of the post, and the reader's followee edges say which of them
//! count. So an appearance yields the entry exactly when it is the one the
//! mode places the post at, and a walk of the appearances in order yields
//! each entry once, in order — pages and cursors stay exact. A reader
//! whose inbox is their whole timeline has the followees' reposts of each
//! post listed under it already (`inbox_reposts`, their sources): a page
//! reads them all in one range, and a post reposted by thousands costs
//! them only their own few.

use crate::event::{PostId, Ts, UserId};
use crate::filter::ReadFilter;
use crate::keys::{self, PostRef, TimelineKey};
use crate::kv::{Cf, Kv, KvError};
use crate::reply::rule::Rule;
use crate::views;
use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

mod by_reposter;
mod dir;
mod own;
use by_reposter::ByReposter;
use dir::scan_reposts;
pub use dir::{live_reposts, reposts_of};
use own::Own;

/// Reposting users an entry lists at most.
pub const REPOSTED_BY_MOST: usize = 10;

/// How a timeline places a post that has reposts (`?reposts=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// At its newest appearance (a new repost moves it up).
    #[default]
    Newest,
    /// At its oldest appearance.
    First,
    /// Reposts ignored: only originals of followed authors.
    None,
}

impl Mode {
    /// The query parameter's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Newest => "newest",
            Mode::First => "first",
            Mode::None => "none",
        }
    }

    /// Inverse of [`Mode::as_str`].
    pub fn parse(s: &str) -> Option<Mode> {
        [Mode::Newest, Mode::First, Mode::None]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// A followed user who reposted an entry's post, at their newest repost of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reposter {
    /// The reposting user.
    pub user: UserId,
    /// Their repost's id.
    pub post_id: PostId,
    /// Their repost's time.
    pub ts: Ts,
}

/// One timeline entry: a post, placed at one of its appearances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its place: the placing appearance's time, the post's id and author.
    pub key: TimelineKey,
    /// Set when followed users reposted it: the post's own time.
    pub post_ts: Option<Ts>,
    /// The followed users who reposted it, newest first, at most
    /// [`REPOSTED_BY_MOST`].
    pub reposted_by: Vec<Reposter>,
    /// How many followed users reposted it.
    pub reposters: u64,
}

impl Entry {
    /// An entry with no repost among its appearances: the post at its time.
    pub fn plain(key: TimelineKey) -> Entry {
        Entry {
            key,
            post_ts: None,
            reposted_by: Vec::new(),
            reposters: 0,
        }
    }
}

/// Whether this partition knows of any live repost: without one, every
/// appearance is an original with no other appearance, and entries are
/// the appearances themselves.
pub fn any_repost(kv: &(impl Kv + ?Sized)) -> Result<bool, KvError> {
    Ok(kv
        .scan(Cf::RepostDir, &[], None)
        .next()
        .transpose()?
        .is_some())
}

pub use crate::views::original_of;

/// Followees a read loads whole, so that "does the reader follow them" is
/// answered from memory and a popular post's reposts are looked up per
/// followee; a reader who follows more is asked per reposting user.
const FOLLOWEES_LOADED_MOST: u64 = 1024;

/// What one read has looked up already: a timeline's appearances keep
/// meeting the same posts and the same reposting users.
#[derive(Default)]
pub struct Memo {
    /// Whether the reader follows a user.
    follows: HashMap<UserId, bool>,
    /// Whether the reader's followees were looked at (then `followees`
    /// holds them all, unless there were too many to load).
    loaded: bool,
    /// The reader's live followees, when loaded whole: `follows` then
    /// holds every one of them, and a user missing from it is not followed.
    followees: Option<Vec<UserId>>,
    /// Each original's appearances for the reader, in timeline order
    /// (`true`: a repost).
    apps: HashMap<PostRef, Rc<Vec<(TimelineKey, bool)>>>,
    /// What the reader's blocks and mutes leave out.
    filter: ReadFilter,
    /// Which replies show through their authors (the filter's rule).
    rule: Rule,
    /// `None` until looked at; then, for a reader who keeps sources, their
    /// own.
    own: Option<Option<Own>>,
    /// `None` until looked at; then, for a reader who keeps no sources and
    /// whose followees were loaded, the posts those users repost
    /// ([`ByReposter`]; each looked up per post past
    /// [`by_reposter::USERS_LOADED_MOST`]).
    by_followees: Option<Option<ByReposter>>,
}

impl Memo {
    fn follows(
        &mut self,
        kv: &(impl Kv + ?Sized),
        user: UserId,
        other: UserId,
    ) -> Result<bool, KvError> {
        if let Some(&f) = self.follows.get(&other) {
            return Ok(f);
        }
        // Held in memory: no point read at all.
        if let Some(list) = (!self.loaded).then(|| kv.held_followees(user)).flatten() {
            self.load(list);
        }
        if self.followees.is_some() {
            return Ok(self.follows.get(&other) == Some(&true));
        }
        let f = views::edge(kv, Cf::Followees, user, other)?.is_some_and(|e| e.live);
        self.follows.insert(other, f);
        Ok(f)
    }

    /// `user`'s live followees, loaded once per read when there are not
    /// too many ([`FOLLOWEES_LOADED_MOST`]).
    fn followees(
        &mut self,
        kv: &(impl Kv + ?Sized),
        user: UserId,
    ) -> Result<Option<&[UserId]>, KvError> {
        if !self.loaded {
            self.loaded = true;
            if let Some(list) = kv.held_followees(user) {
                self.load(list);
            } else if views::user(kv, user)?.followees <= FOLLOWEES_LOADED_MOST {
                let list: Vec<UserId> = views::live_edges(kv, Cf::Followees, user, None)
                    .map(|r| r.map(|(f, _)| f))
                    .collect::<Result<_, _>>()?;
                self.load(list);
            }
        }
        Ok(self.followees.as_deref())
    }

    /// Takes `list` as the reader's live followees, loaded whole.
    fn load(&mut self, list: Vec<UserId>) {
        self.loaded = true;
        for f in &list {
            self.follows.insert(*f, true);
        }
        self.followees = Some(list);
    }

    /// The live reposts of `original` that count for `user`'s timeline
    /// (and maybe others, which [`Memo::apps`] leaves out): a whole
    /// reader's own ([`Memo::own_reposts`]); else their loaded followees'
    /// ([`ByReposter`]: from the posts a few of them repost, loaded once,
    /// or per post — a merge of the followees with the post's reposters,
    /// or one pass over them, whichever [`STEPS_PER_SEEK`] says is
    /// cheaper); else, for a reader who follows too many to load, every
    /// repost of the post, in one pass.
    fn reposts(
        &mut self,
        kv: &(impl Kv + ?Sized),
        user: UserId,
        original: PostRef,
    ) -> Result<Vec<TimelineKey>, KvError> {
        if let Some(own) = self.own(kv, user)? {
            let mine = own.of.get(&original).cloned().unwrap_or_default();
            let theirs = own.pulled_index.reposts(kv, original)?;
            return self.own_reposts(kv, user, mine, theirs);
        }
        if self.by_followees.is_none() {
            let loaded = self.followees(kv, user)?.map(<[UserId]>::to_vec);
            let index = loaded.map(|f| ByReposter::load(kv, &f)).transpose()?;
            self.by_followees = Some(index);
        }
        if let Some(Some(index)) = &self.by_followees {
            return index.reposts(kv, original);
        }
        // Too many followees to load: every repost of the post, in one pass.
        let mut out = Vec::new();
        if super::dir_count(kv, original)? > 0 {
            scan_reposts(kv, &keys::dir_original_prefix(original), &mut out)?;
        }
        Ok(out)
    }

    /// A whole reader's reposts of a post by followees: `mine`, their own
    /// sources of it, and those of `theirs` (the reposts of it by the
    /// pulled authors they follow, [`ByReposter::reposts`]) by users they
    /// still follow.
    fn own_reposts(
        &mut self,
        kv: &(impl Kv + ?Sized),
        user: UserId,
        mut out: Vec<TimelineKey>,
        theirs: Vec<TimelineKey>,
    ) -> Result<Vec<TimelineKey>, KvError> {
        for r in theirs {
            if self.follows(kv, user, r.author)? {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// For a reader who keeps sources ([`crate::keys::UserVal::whole`]):
    /// their own, read once per page; `None` for every other reader.
    fn own(&mut self, kv: &(impl Kv + ?Sized), user: UserId) -> Result<Option<&Own>, KvError> {
        if self.own.is_none() {
            let u = views::user(kv, user)?;
            let own = match (u.whole(), u.pulls) {
                (false, _) => None,
                (true, 0) => Some(Own::read(kv, user, Vec::new())?),
                (true, _) => {
                    let pulled = views::pulls(kv, user).collect::<Result<_, _>>()?;
                    Some(Own::read(kv, user, pulled)?)
                }
            };
            self.own = Some(own);
        }
        Ok(self.own.as_ref().and_then(|o| o.as_ref()))
    }

    /// The original `app` reposts, with its time (`None`: `app` is an
    /// original). A whole reader's appearance from their inbox is a repost
    /// exactly when they have a source row for it, which holds the
    /// original and its time; the directory is asked only for pulled
    /// authors' copies and for other readers.
    fn original_of(
        &mut self,
        kv: &(impl Kv + ?Sized),
        user: UserId,
        app: TimelineKey,
    ) -> Result<Option<(PostRef, Ts)>, KvError> {
        if let Some(own) = self.own(kv, user)? {
            if let Some(&root) = own.root.get(&app) {
                return Ok(Some(root));
            }
            if !own.pulled.contains(&app.author) {
                return Ok(None);
            }
        }
        original_of(kv, (app.author, app.post_id))
    }

    /// Every appearance of `original` (posted at `post_ts`) for `user`, in
    /// timeline order.
    fn apps(
        &mut self,
        kv: &(impl Kv + ?Sized),
        user: UserId,
        (original, post_ts): (PostRef, Ts),
        reposts: Vec<TimelineKey>,
    ) -> Result<Rc<Vec<(TimelineKey, bool)>>, KvError> {
        if let Some(a) = self.apps.get(&original) {
            return Ok(a.clone());
        }
        let mut apps: Vec<(TimelineKey, bool)> = Vec::new();
        let original_app = TimelineKey {
            ts: post_ts,
            post_id: original.1,
            author: original.0,
        };
        if self.follows(kv, user, original.0)? && self.rule.shows(kv, user, original)? {
            apps.push((original_app, false));
        }
        // Sources of the reader's own are followees' reposts already.
        let followed = matches!(self.own, Some(Some(_)));
        for r in reposts {
            if self.filter.shows(original.0, r.author, true)
                && (followed || self.follows(kv, user, r.author)?)
            {
                apps.push((r, true));
            }
        }
        apps.sort();
        let apps = Rc::new(apps);
        self.apps.insert(original, apps.clone());
        Ok(apps)
    }
}

/// The entry `app`, an appearance in `user`'s timeline (read at the
/// user's partition `kv`), places in `mode`; `None` when it places none (an
/// appearance of a post placed at another one, a repost in
/// [`Mode::None`], a post of the user's own).
pub fn aggregate(
    kv: &(impl Kv + ?Sized),
    user: UserId,
    mode: Mode,
    app: TimelineKey,
    memo: &mut Memo,
) -> Result<Option<Entry>, KvError> {
    let (original, post_ts, is_repost) = match memo.original_of(kv, user, app)? {
        Some((original, post_ts)) => (original, post_ts, true),
        None => ((app.author, app.post_id), app.ts, false),
    };
    if original.0 == user || (is_repost && mode == Mode::None) {
        return Ok(None);
    }
    if !memo.filter.shows(original.0, app.author, is_repost) {
        return Ok(None);
    }
    if !is_repost && !memo.rule.shows(kv, user, original)? {
        return Ok(None);
    }
    let place = TimelineKey {
        ts: app.ts,
        post_id: original.1,
        author: original.0,
    };
    if mode == Mode::None {
        return Ok(Some(Entry::plain(place)));
    }
    let reposts = match memo.apps.contains_key(&original) {
        true => Vec::new(),
        false => memo.reposts(kv, user, original)?,
    };
    if reposts.is_empty() && !is_repost && !memo.apps.contains_key(&original) {
        return Ok(Some(Entry::plain(place)));
    }
    // Every appearance of the post for this user, in timeline order.
    let apps = memo.apps(kv, user, (original, post_ts), reposts)?;
    let at = match mode {
        Mode::First => apps.last(),
        Mode::Newest | Mode::None => apps.first(),
    };
    if at.map(|(k, _)| *k) != Some(app) {
        return Ok(None);
    }
    // Each reposting user once, at their newest repost of it.
    let mut by: Vec<Reposter> = Vec::new();
    for (k, _) in apps.iter().filter(|(_, repost)| *repost) {
        if !by.iter().any(|r| r.user == k.author) {
            by.push(Reposter {
                user: k.author,
                post_id: k.post_id,
                ts: k.ts,
            });
        }
    }
    if by.is_empty() {
        return Ok(Some(Entry::plain(place)));
    }
    let reposters = by.len() as u64;
    by.truncate(REPOSTED_BY_MOST);
    Ok(Some(Entry {
        key: place,
        post_ts: Some(post_ts),
        reposted_by: by,
        reposters,
    }))
}

/// Entries from appearances fed in timeline order: those of equal time are
/// gathered and released in entry order (the post's id, then its author,
/// break ties as in every timeline), only past `after` (a cursor's entry).
pub struct Entries {
    mode: Mode,
    user: UserId,
    after: Option<TimelineKey>,
    group: Vec<Entry>,
    group_ts: Option<Ts>,
    memo: Memo,
}

impl Entries {
    /// Entries of `user`'s timeline in `mode`, past `after` (exclusive),
    /// without what `filter` leaves out.
    pub fn new(
        user: UserId,
        mode: Mode,
        after: Option<TimelineKey>,
        filter: ReadFilter,
    ) -> Entries {
        Entries {
            mode,
            user,
            after,
            group: Vec::new(),
            group_ts: None,
            memo: Memo {
                rule: Rule::new(filter.replies, !filter.no_reply_here),
                filter,
                ..Memo::default()
            },
        }
    }

    /// Where the appearances to feed start: just before every appearance
    /// of the cursor's time (an entry there may come from an appearance
    /// that sorts before the cursor's own key); `None`: from the top.
    pub fn start(&self) -> Option<TimelineKey> {
        let after = self.after?;
        let ts = after.ts.0.checked_add(1)?;
        Some(TimelineKey {
            ts: Ts(ts),
            post_id: PostId(0),
            author: UserId(0),
        })
    }

    /// Feeds the next appearance; entries of the times completed so far go
    /// to `out`.
    pub fn push(
        &mut self,
        kv: &(impl Kv + ?Sized),
        app: TimelineKey,
        out: &mut Vec<Entry>,
    ) -> Result<(), KvError> {
        if self.group_ts != Some(app.ts) {
            self.flush(out);
            self.group_ts = Some(app.ts);
        }
        if let Some(e) = aggregate(kv, self.user, self.mode, app, &mut self.memo)? {
            if self.after.is_none_or(|a| e.key > a) {
                self.group.push(e);
            }
        }
        Ok(())
    }

    /// Looks up at once which of `apps` (the next appearances to feed)
    /// are replies: one batched read for a chunk instead of one per post.
    pub fn prefetch(
        &mut self,
        kv: &(impl Kv + ?Sized),
        apps: &[TimelineKey],
    ) -> Result<(), KvError> {
        let posts = apps.iter().map(|k| (k.author, k.post_id));
        self.memo.rule.prefetch(kv, self.user, posts)
    }

    /// No more appearances: the last time's entries go to `out`.
    pub fn flush(&mut self, out: &mut Vec<Entry>) {
        self.group.sort_by_key(|e| e.key);
        out.append(&mut self.group);
    }
}

#[cfg(test)]
mod tests;
