//! The replies rule of home timelines (docs/semantics.md, "Replies in
//! home timelines"): a reply by X to a post of Y shows through X's own
//! post only when the reader follows Y too, or Y is the reader — unless
//! the reader asks for every reply or for none.
//!
//! It is decided when a page is read, from which posts are replies — the
//! inbox rows' values ([`keys::inbox_value`], copied when a row is
//! written from every partition's copy, `reply_dir`, written by
//! [`Effect::ReplyDir`]), or that copy itself for posts read elsewhere —
//! and the reader's follow edges, so following Y later brings X's earlier
//! replies in and unfollowing takes them out. Only a post's own
//! appearance is judged: a followed user's repost of a reply shows as any
//! repost does.

use crate::effect::{Effect, Out, Step};
use crate::event::UserId;
use crate::keys::{self, EdgeVal, PostRef, TimelineKey};
use crate::kv::{u64_at, Cf, Kv, KvError};
use crate::partition::Partition;
use crate::views;
use rustc_hash::FxHashMap as HashMap;

/// Which replies a home timeline shows (`?replies=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Replies {
    /// A reply to a post of a user the reader follows, or of the reader
    /// (Mastodon's and Twitter's rule).
    #[default]
    Followed,
    /// Every reply by a followed user.
    All,
    /// No reply through its author but replies to the reader (Mastodon's
    /// lists' "no replies"); a followed user's repost of one still shows.
    None,
}

impl Replies {
    /// The name a request uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Replies::Followed => "followed",
            Replies::All => "all",
            Replies::None => "none",
        }
    }

    /// The rule a request names.
    pub fn parse(s: &str) -> Option<Replies> {
        match s {
            "followed" => Some(Replies::Followed),
            "all" => Some(Replies::All),
            "none" => Some(Replies::None),
            _ => None,
        }
    }

    /// Whether a post whose parent author is `parent` (`None`: not a
    /// reply) shows through its own author in `reader`'s timeline, where
    /// `follows_parent` says whether the reader follows that parent.
    pub fn decide(self, reader: UserId, parent: Option<UserId>, follows_parent: bool) -> bool {
        match (self, parent) {
            (_, None) | (Replies::All, _) => true,
            (Replies::None, Some(y)) => y == reader,
            (Replies::Followed, Some(y)) => y == reader || follows_parent,
        }
    }
}

/// `post` (owned here) is a reply to a post of `parent`: every partition's
/// directory is told, before the post's deliveries (sent after this).
pub(crate) fn announce<K: Kv + ?Sized>(s: &mut Step<'_, '_, K>, post: PostRef, parent: UserId) {
    s.out.extend(Partition::all(s.ctx.partitions).map(|p| Out {
        partition: p,
        effect: Effect::ReplyDir {
            author: post.0,
            post_id: post.1,
            parent,
        },
    }));
}

/// Applies [`Effect::ReplyDir`]: the partition's directory records the
/// reply (a repeat changes nothing). An entry stays after its post is
/// deleted: the post is gone from every page, and its id is never live
/// again.
pub(crate) fn apply_dir<K: Kv + ?Sized>(
    s: &mut Step<'_, '_, K>,
    post: PostRef,
    parent: UserId,
) -> Result<(), KvError> {
    let k = keys::reply_dir(post);
    if s.t.get(Cf::ReplyDir, &k)?.is_none() {
        s.t.put(Cf::ReplyDir, k, parent.0.to_be_bytes().to_vec());
        s.applied.changed = true;
    }
    Ok(())
}

/// The author of the post each of `posts` replies to (`None`: not a
/// reply), from this partition's directory, in one batched read.
pub fn parents_of(
    kv: &(impl Kv + ?Sized),
    posts: &[PostRef],
) -> Result<Vec<Option<UserId>>, KvError> {
    let ks: Vec<Vec<u8>> = posts.iter().map(|&p| keys::reply_dir(p)).collect();
    let vs = kv.get_many(Cf::ReplyDir, &ks)?;
    ks.iter().zip(vs).map(|(k, v)| dir_parent(k, v)).collect()
}

/// What the directory's value `v` at `k` says: the parent author, or none.
fn dir_parent(k: &[u8], v: Option<Vec<u8>>) -> Result<Option<UserId>, KvError> {
    match v {
        None => Ok(None),
        Some(v) if v.len() == 8 => u64_at(Cf::ReplyDir, k, &v, 0).map(|y| Some(UserId(y))),
        Some(_) => Err(KvError::corrupt(Cf::ReplyDir, k, "expected 8 bytes")),
    }
}

/// The author of the post `post` replies to, from this partition's
/// directory (a point read; `None`: not a reply).
pub fn parent_in(kv: &(impl Kv + ?Sized), post: PostRef) -> Result<Option<UserId>, KvError> {
    let k = keys::reply_dir(post);
    dir_parent(&k, kv.get(Cf::ReplyDir, &k)?)
}

fn bad_edge(k: &[u8]) -> KvError {
    KvError::corrupt(Cf::Followees, k, "bad edge value")
}

/// The rule for one read of one reader's timeline, remembering what it
/// looked up (pages keep meeting the same posts and parent authors). The
/// default is [`Replies::Followed`], looked up.
#[derive(Debug)]
pub struct Rule {
    replies: Replies,
    /// `false`: the partition holds no reply at all, nothing is looked up.
    any: bool,
    parents: HashMap<PostRef, Option<UserId>>,
    follows: HashMap<UserId, bool>,
}

impl Default for Rule {
    fn default() -> Rule {
        Rule::new(Replies::Followed, true)
    }
}

impl Rule {
    /// The rule `replies`; `any`: whether the partition may hold a reply
    /// (`false` skips every lookup).
    pub fn new(replies: Replies, any: bool) -> Rule {
        Rule {
            replies,
            any: any && replies != Replies::All,
            parents: HashMap::default(),
            follows: HashMap::default(),
        }
    }

    /// Takes what an inbox row's value says of `post` (`parent`: the
    /// author it replies to, or none): no lookup for it.
    pub fn know(&mut self, post: PostRef, parent: Option<UserId>) {
        if self.any {
            self.parents.insert(post, parent);
        }
    }

    /// Whether anything is looked up: the partition may hold a reply and
    /// the rule leaves some out.
    pub fn any(&self) -> bool {
        self.any
    }

    /// Looks up, in one batch, the parents of `posts` not known yet, and
    /// in one more whether `user` follows those parents (the rule's
    /// questions about a page's worth of posts in two reads).
    pub fn prefetch(
        &mut self,
        kv: &(impl Kv + ?Sized),
        user: UserId,
        posts: impl IntoIterator<Item = PostRef>,
    ) -> Result<(), KvError> {
        if !self.any {
            return Ok(());
        }
        // The parents known (from the rows' values or earlier reads) and
        // the posts to ask about.
        let (mut parents, mut ask) = (Vec::new(), Vec::new());
        for p in posts {
            match self.parents.get(&p) {
                Some(y) => parents.extend(*y),
                None => ask.push(p),
            }
        }
        ask.sort_unstable();
        ask.dedup();
        // What the view holds in memory, then one read of the rest.
        let mut read = Vec::new();
        let held = if ask.is_empty() {
            Vec::new()
        } else {
            kv.held_parents(&ask)
        };
        for (p, held) in ask.iter().zip(held) {
            match held {
                Some(y) => {
                    self.parents.insert(*p, y);
                    parents.extend(y);
                }
                None => read.push(*p),
            }
        }
        if !read.is_empty() {
            let answers: Vec<(PostRef, Option<UserId>)> =
                read.iter().copied().zip(parents_of(kv, &read)?).collect();
            kv.keep_parents(&answers);
            for (p, y) in answers {
                self.parents.insert(p, y);
                parents.extend(y);
            }
        }
        if self.replies != Replies::Followed {
            return Ok(());
        }
        parents.sort_unstable();
        parents.dedup();
        parents.retain(|y| *y != user && !self.follows.contains_key(y));
        if parents.is_empty() {
            return Ok(());
        }
        if let Some(list) = kv.held_followees(user) {
            for y in parents {
                self.follows.insert(y, list.binary_search(&y).is_ok());
            }
            return Ok(());
        }
        let ks: Vec<Vec<u8>> = parents.iter().map(|y| keys::key([user.0, y.0])).collect();
        for ((y, k), v) in parents
            .iter()
            .zip(&ks)
            .zip(kv.get_many(Cf::Followees, &ks)?)
        {
            let edge = v
                .map(|v| EdgeVal::decode(&v).ok_or_else(|| bad_edge(k)))
                .transpose()?;
            self.follows.insert(*y, edge.is_some_and(|e| e.live));
        }
        Ok(())
    }

    /// The author `post` replies to, if it is a reply.
    pub fn parent(
        &mut self,
        kv: &(impl Kv + ?Sized),
        post: PostRef,
    ) -> Result<Option<UserId>, KvError> {
        if !self.any {
            return Ok(None);
        }
        if let Some(&y) = self.parents.get(&post) {
            return Ok(y);
        }
        let y = match kv.held_parents(&[post])[0] {
            Some(y) => y,
            None => {
                let y = parents_of(kv, &[post])?[0];
                kv.keep_parents(&[(post, y)]);
                y
            }
        };
        self.parents.insert(post, y);
        Ok(y)
    }

    /// Whether `post`'s own appearance (by its author) shows in `user`'s
    /// timeline by the rule.
    pub fn shows(
        &mut self,
        kv: &(impl Kv + ?Sized),
        user: UserId,
        post: PostRef,
    ) -> Result<bool, KvError> {
        let parent = self.parent(kv, post)?;
        let follows = match parent {
            Some(y) if self.replies == Replies::Followed && y != user => {
                self.follows(kv, user, y)?
            }
            _ => false,
        };
        Ok(self.replies.decide(user, parent, follows))
    }

    /// Keeps the appearances of `keys` that show by the rule (a repost's
    /// own id is never a reply: only posts' own appearances are judged).
    pub fn keep(
        &mut self,
        kv: &(impl Kv + ?Sized),
        user: UserId,
        keys: &mut Vec<TimelineKey>,
    ) -> Result<(), KvError> {
        if !self.any {
            return Ok(());
        }
        self.prefetch(kv, user, keys.iter().map(|k| (k.author, k.post_id)))?;
        let mut err = None;
        keys.retain(|k| match self.shows(kv, user, (k.author, k.post_id)) {
            Ok(shows) => shows,
            Err(e) => {
                err = Some(e);
                true
            }
        });
        err.map_or(Ok(()), Err)
    }

    /// Whether `user` follows `other` (a counted follow).
    fn follows(
        &mut self,
        kv: &(impl Kv + ?Sized),
        user: UserId,
        other: UserId,
    ) -> Result<bool, KvError> {
        match self.follows.get(&other) {
            Some(&f) => Ok(f),
            None => {
                let f = views::follows(kv, user, other)?;
                self.follows.insert(other, f);
                Ok(f)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_shows_a_reply_to_a_followed_user_or_the_reader_unless_asked_otherwise() {
        let (u, y) = (UserId(1), UserId(2));
        for replies in [Replies::Followed, Replies::All, Replies::None] {
            assert!(replies.decide(u, None, false), "a post that is no reply");
            assert_eq!(Replies::parse(replies.as_str()), Some(replies));
        }
        assert!(Replies::Followed.decide(u, Some(y), true));
        assert!(!Replies::Followed.decide(u, Some(y), false));
        assert!(
            Replies::Followed.decide(u, Some(u), false),
            "a reply to the reader"
        );
        assert!(Replies::All.decide(u, Some(y), false));
        assert!(!Replies::None.decide(u, Some(y), true));
        assert!(
            Replies::None.decide(u, Some(u), false),
            "a reply to the reader"
        );
        assert_eq!(Replies::parse("some"), None);
    }
}
