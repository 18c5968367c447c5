//! Keys of the `engagement` column family: likes, replies, their counts,
//! and the reader's flags.
//!
//! Likes are registered with the post they name and counted there (at
//! that post's partition); each user's live likes and live reposts by
//! original are kept at the user's partition, for the `liked` and
//! `reposted` flags.

use super::{key, PostRef};
use crate::event::{Feed, Ts, UserId};

/// `engagement` (at the partition of the post a like names): `0 | a | p |
/// liker`, valued `liked u8 | hops u32 | version u64 | ts u64`: the latest like or
/// unlike of `liker` that reached post `(a, p)` — its original, or a post
/// whose kind is not known yet (the like waits there).
pub fn like_of(target: PostRef, liker: UserId) -> Vec<u8> {
    tagged(0, &[target.0 .0, target.1 .0, liker.0])
}

/// `engagement`: `0 | a | p`, the prefix of [`like_of`].
pub fn like_of_prefix(target: PostRef) -> Vec<u8> {
    tagged(0, &[target.0 .0, target.1 .0])
}

/// `engagement`: `1 | a | p`, valued u64: how many registrations with
/// `(a, p)` are likes (its live likes, once it is a live original); there
/// (at 0 too) while `(a, p)` has any registration.
pub fn like_count(target: PostRef) -> Vec<u8> {
    tagged(1, &[target.0 .0, target.1 .0])
}

/// `engagement` (at the liker's partition): `2 | user | a | p`, empty:
/// `user` likes the live original `(a, p)`.
pub fn liked(user: UserId, root: PostRef) -> Vec<u8> {
    tagged(2, &[user.0, root.0 .0, root.1 .0])
}

/// `engagement`: `3 | user`, valued u64: how many [`liked`] keys `user`
/// has (the user's `likes` counter).
pub fn likes_given(user: UserId) -> Vec<u8> {
    tagged(3, &[user.0])
}

/// `engagement` (at the reposter's partition): `4 | user | a | p`, valued
/// u64: how many live reposts `user` has of the original `(a, p)`.
pub fn reposted(user: UserId, root: PostRef) -> Vec<u8> {
    tagged(4, &[user.0, root.0 .0, root.1 .0])
}

/// `engagement` (beside [`like_of`]): `5 | a | p | !ts | !liker`, empty:
/// `liker`'s registration with `(a, p)` is a like, made at `ts` — the
/// likers of a live original, newest first.
pub fn liker(target: PostRef, ts: Ts, liker: UserId) -> Vec<u8> {
    tagged(5, &[target.0 .0, target.1 .0, !ts.0, !liker.0])
}

/// `engagement`: `5 | a | p`, the prefix of [`liker`].
pub fn likers_prefix(target: PostRef) -> Vec<u8> {
    tagged(5, &[target.0 .0, target.1 .0])
}

/// `engagement`: `5 | a`, the prefix of every [`liker`] of `a`'s posts.
pub fn likers_of_author(author: UserId) -> Vec<u8> {
    tagged(5, &[author.0])
}

/// `engagement` (at the partition of the post a reply names): `6 | a | p
/// | replier | reply`, valued `live u8 | hops u32 | version u64 | ts u64`:
/// the latest word on reply `(replier, reply)` that reached post `(a, p)`
/// (posted: live; deleted: not), with the reply's time.
pub fn reply_of(target: PostRef, reply: PostRef) -> Vec<u8> {
    tagged(6, &[target.0 .0, target.1 .0, reply.0 .0, reply.1 .0])
}

/// `engagement`: `6 | a | p`, the prefix of [`reply_of`].
pub fn reply_of_prefix(target: PostRef) -> Vec<u8> {
    tagged(6, &[target.0 .0, target.1 .0])
}

/// `engagement`: `7 | a | p`, valued u64: how many registrations with
/// `(a, p)` are live replies (its live replies, once it is a live
/// original); absent at 0.
pub fn reply_count(target: PostRef) -> Vec<u8> {
    tagged(7, &[target.0 .0, target.1 .0])
}

/// `engagement` (beside [`reply_of`]): `8 | a | p | ts | replier |
/// reply`, empty: a live reply to `(a, p)` posted at `ts` — its replies,
/// oldest first.
pub fn replier(target: PostRef, ts: Ts, reply: PostRef) -> Vec<u8> {
    tagged(8, &[target.0 .0, target.1 .0, ts.0, reply.0 .0, reply.1 .0])
}

/// `engagement`: `8 | a | p`, the prefix of [`replier`].
pub fn repliers_prefix(target: PostRef) -> Vec<u8> {
    tagged(8, &[target.0 .0, target.1 .0])
}

/// `engagement`: `8 | a`, the prefix of every [`replier`] of `a`'s posts.
pub fn repliers_of_author(author: UserId) -> Vec<u8> {
    tagged(8, &[author.0])
}

/// `engagement` (at the author's partition): `9 | author | post`, valued
/// `has parent u8 [| parent author u64 | parent post u64] | mentioned
/// u64…`: a live post's `reply_to` and `mentions` (posts with either
/// only).
pub fn addressed(post: PostRef) -> Vec<u8> {
    tagged(9, &[post.0 .0, post.1 .0])
}

/// `engagement` (at the user's partition): `10 | user | feed`, valued
/// `version u64 | moved u64 | since u64 | ts u64 | post u64 | author u64`:
/// the user's read marker of `feed` (`src/core/marker.rs`).
pub fn marker(user: UserId, feed: Feed) -> Vec<u8> {
    let mut k = tagged(10, &[user.0]);
    k.push(feed.as_u8());
    k
}

/// `engagement` (at the mentioned user's partition): `11 | user | ts |
/// author | post`, valued `live u8 | version u64`: the latest word
/// (posted: live; deleted: not) that reached `user` on post `(author,
/// post)`, which mentions them, posted at `ts` — oldest first.
pub fn mention(user: UserId, ts: Ts, post: PostRef) -> Vec<u8> {
    tagged(11, &[user.0, ts.0, post.0 .0, post.1 .0])
}

/// `engagement`: `11 | user`, the prefix of every [`mention`] of `user`.
pub fn mentions_prefix(user: UserId) -> Vec<u8> {
    tagged(11, &[user.0])
}

/// `reply_dir` (every partition's copy): `author | post`, valued the
/// author of the post it replies to (u64): the replies rule's directory.
pub fn reply_dir(post: PostRef) -> Vec<u8> {
    super::key([post.0 .0, post.1 .0])
}

fn tagged(tag: u8, parts: &[u64]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + 8 * parts.len());
    k.push(tag);
    for p in parts {
        k.extend_from_slice(&key([*p]));
    }
    k
}
