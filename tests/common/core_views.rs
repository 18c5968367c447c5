//! The API's answers computed from a partition's key-value state directly
//! (for the core's property tests, which run without the HTTP layer).

use super::oracle::{Mode, Oracle};
use feedlog::api::query::{Replies, WhyAnswer, WhyItem};
use feedlog::core::event::{PostId, UserId};
use feedlog::core::explain::{self, Sources};
use feedlog::core::filter::ReadFilter;
use feedlog::core::keys::{self, PostRef, PostVal, TimelineKey};
use feedlog::core::kv::{Cf, Kv, MemKv};
use feedlog::core::{like, reply, repost, views};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The posts view of `u` at its partition, as the API answers it.
pub fn posts_view(kv: &MemKv, u: u64) -> Vec<serde_json::Value> {
    views::outbox_items(kv, UserId(u), None)
        .map(|r| {
            let x = r.unwrap();
            let mut item = json!({"post_id": x.post_id.0, "author": u, "ts": x.ts.0});
            match x.repost_of {
                Some(((a, p), _)) => {
                    item["repost_of"] = json!({"author": a.0, "post_id": p.0});
                }
                None => {
                    item["reposts"] = repost::count(kv, (UserId(u), x.post_id)).unwrap().into();
                    item["likes"] = like::count(kv, (UserId(u), x.post_id)).unwrap().into();
                }
            }
            item
        })
        .collect()
}

/// `u`'s timeline in `mode` with the replies rule `replies` from its
/// appearances `apps` (read at its
/// partition `kv`), each entry as the API answers it.
pub fn timeline(
    kv: &MemKv,
    u: u64,
    (mode, replies): (repost::Mode, Replies),
    apps: &[TimelineKey],
) -> Vec<serde_json::Value> {
    let now = views::clock(kv).unwrap();
    let mut filter = ReadFilter::of(kv, UserId(u), now).unwrap();
    filter.replies = replies;
    let mut entries = repost::Entries::new(UserId(u), mode, None, filter);
    let mut out = Vec::new();
    for k in apps {
        entries.push(kv, *k, &mut out).unwrap();
    }
    entries.flush(&mut out);
    out.into_iter()
        .map(|e| {
            let mut item =
                json!({"post_id": e.key.post_id.0, "author": e.key.author.0, "ts": e.key.ts.0});
            if let Some(post_ts) = e.post_ts {
                item["post_ts"] = post_ts.0.into();
                item["reposters"] = e.reposters.into();
                item["reposted_by"] = e
                    .reposted_by
                    .iter()
                    .map(|r| json!({"user": r.user.0, "post_id": r.post_id.0, "ts": r.ts.0}))
                    .collect::<Vec<_>>()
                    .into();
            }
            item
        })
        .collect()
}

/// `u`'s timeline in every mode, each entry explained, and the `why`
/// answer for every post id the log names (and one it does not), read
/// from the partitions (`kv_of` a user's; `apps` the timeline's
/// appearances) as the API reads them, against the oracle; the first
/// difference.
pub fn timelines_match<'a>(
    kv_of: &dyn Fn(u64) -> &'a MemKv,
    partitions: u32,
    oracle: &Oracle,
    u: u64,
    apps: &[TimelineKey],
) -> Result<(), String> {
    let kv = kv_of(u);
    let mut post = |(a, p): PostRef| views::post(kv_of(a.0), a, p);
    let mut s = Sources {
        kv,
        user: UserId(u),
        partitions,
        post: &mut post,
    };
    let now = views::clock(kv).unwrap();
    let mut filter = ReadFilter::of(kv, UserId(u), now).unwrap();
    for (mode, oracle_mode, replies) in [
        (repost::Mode::Newest, Mode::Newest, Replies::Followed),
        (repost::Mode::First, Mode::First, Replies::Followed),
        (repost::Mode::None, Mode::None, Replies::Followed),
        (repost::Mode::Newest, Mode::Newest, Replies::All),
        (repost::Mode::First, Mode::First, Replies::None),
    ] {
        let entries = timeline(kv, u, (mode, replies), apps);
        let want = oracle.timeline_entries_in(u, oracle_mode, replies);
        if entries != want {
            return Err(format!(
                "timeline of {u} ({mode:?}, replies {replies:?}): {entries:?}, want {want:?}"
            ));
        }
        filter.replies = replies;
        for e in entries {
            let root = (
                e["author"].as_u64().unwrap(),
                e["post_id"].as_u64().unwrap(),
            );
            let posted = match (s.post)((UserId(root.0), PostId(root.1))).unwrap() {
                Some(PostVal::Live(ts, p)) => (ts, p.post),
                other => return Err(format!("entry {e} of {u}: its post is {other:?}")),
            };
            let only = mode == repost::Mode::None;
            let root_ref = (UserId(root.0), PostId(root.1));
            let apps = explain::appearances(&mut s, root_ref, posted, &filter, only).unwrap();
            let got: Vec<Value> = apps.iter().map(|a| json!(WhyItem::from(a))).collect();
            let want = oracle.why_items(u, root, oracle_mode, replies);
            if got != want {
                return Err(format!(
                    "why of {e} for {u} ({mode:?}): {got:?}, want {want:?}"
                ));
            }
        }
    }
    for (a, p) in oracle.post_ids().into_iter().chain([(1, 1000)]) {
        let post = (UserId(a), PostId(p));
        let verdict = explain::why(&mut s, post).unwrap();
        let got = json!(WhyAnswer::of(UserId(u), post, &verdict));
        let want = oracle.why(u, (a, p));
        if got != want {
            return Err(format!("why ({a}, {p}) for {u}: {got}, want {want}"));
        }
    }
    Ok(())
}

/// `kv`'s copy of the live reposts (partition `p`'s directory) against the
/// oracle's live reposts; the first difference.
pub fn directory_matches(kv: &MemKv, p: usize, oracle: &Oracle) -> Result<(), String> {
    let got: BTreeMap<(u64, u64), ((u64, u64), u64)> = repost::live_reposts(kv)
        .unwrap()
        .into_iter()
        .map(|((b, r), (a, q), ts)| ((b.0, r.0), ((a.0, q.0), ts.0)))
        .collect();
    let want = oracle.repost_directory();
    if got != want {
        return Err(format!(
            "repost directory of partition {p}: {got:?}, want {want:?}"
        ));
    }
    for ((a, q), _) in want.values() {
        let listed = want.values().filter(|(root, _)| root == &(*a, *q)).count() as u64;
        let counted = repost::dir_count(kv, (UserId(*a), PostId(*q))).unwrap();
        if counted != listed {
            return Err(format!(
                "partition {p} counts {counted} live reposts of ({a}, {q}), lists {listed}"
            ));
        }
    }
    Ok(())
}

/// The sources (`inbox_reposts`) of each reader whose inbox is their
/// whole timeline are exactly the live reposts among its inbox entries,
/// under the originals the directory names and valued their times, and
/// other readers have none: the first row missing or left over.
pub fn sources_match(kv: &MemKv, p: usize) -> Result<(), String> {
    let got: BTreeSet<(Vec<u8>, Vec<u8>)> = kv
        .scan(Cf::InboxReposts, &[], None)
        .map(|r| r.unwrap())
        .collect();
    let mut want = BTreeSet::new();
    for r in kv.scan(Cf::Inbox, &[], None) {
        let k = r.unwrap().0;
        let user = UserId(keys::be(&k, 0).unwrap());
        let app = TimelineKey::decode(&k[8..]).unwrap();
        if !views::user(kv, user).unwrap().whole() {
            continue;
        }
        if let Some((root, ts)) = repost::original_of(kv, (app.author, app.post_id)).unwrap() {
            want.insert((keys::inbox_repost(user, root, &app), keys::key([ts.0])));
        }
    }
    if let Some(k) = want.difference(&got).next() {
        return Err(format!("partition {p}: sources lack {k:?}"));
    }
    if let Some(k) = got.difference(&want).next() {
        return Err(format!(
            "partition {p}: sources hold {k:?}, no inbox repost of it"
        ));
    }
    Ok(())
}

/// Every post's likes and reposts counts (at its author's partition), and
/// every user's `likes` counter and flags (liked, reposted) on every live
/// original (at the user's), against the oracle; the first difference.
pub fn engagement_matches<'a>(
    kv_of: &dyn Fn(u64) -> &'a MemKv,
    oracle: &Oracle,
    users: impl Iterator<Item = u64>,
) -> Result<(), String> {
    let live = oracle.live_originals();
    for &(a, p) in &live {
        let post = (UserId(a), PostId(p));
        let got = (
            like::count(kv_of(a), post).unwrap(),
            repost::count(kv_of(a), post).unwrap(),
        );
        let want = (
            oracle.likes_of((a, p)).unwrap_or(0),
            oracle.reposts_of((a, p)),
        );
        if got != want {
            return Err(format!(
                "(likes, reposts) of ({a}, {p}): {got:?}, want {want:?}"
            ));
        }
        let got: Vec<((u64, u64), u64)> = reply::replies(kv_of(a), post, None)
            .map(|r| r.map(|((ra, rp), ts)| ((ra.0, rp.0), ts.0)).unwrap())
            .collect();
        let e = oracle.engagements();
        let count = reply::count(kv_of(a), post).unwrap();
        if got != e.replies((a, p)) || count != e.replies_count((a, p)) {
            let want = (e.replies_count((a, p)), e.replies((a, p)));
            return Err(format!(
                "replies of ({a}, {p}): {count} {got:?}, want {want:?}"
            ));
        }
        let likers: Vec<(u64, u64)> = like::likers(kv_of(a), post, None)
            .map(|r| r.map(|(u, ts)| (u.0, ts.0)).unwrap())
            .collect();
        if likers != oracle.likers((a, p)) {
            let want = oracle.likers((a, p));
            return Err(format!("likers of ({a}, {p}): {likers:?}, want {want:?}"));
        }
    }
    for u in users {
        let kv = kv_of(u);
        let (got, want) = (like::given(kv, UserId(u)).unwrap(), oracle.likes_counter(u));
        if got != want {
            return Err(format!("likes given by {u}: {got}, want {want}"));
        }
        for &(a, p) in &live {
            let post = (UserId(a), PostId(p));
            let got = (
                like::likes(kv, UserId(u), post).unwrap(),
                like::reposted(kv, UserId(u), post).unwrap(),
            );
            let want = (oracle.liked(u, (a, p)), oracle.reposted(u, (a, p)));
            if got != want {
                return Err(format!(
                    "(liked, reposted) of ({a}, {p}) by {u}: {got:?}, want {want:?}"
                ));
            }
        }
    }
    Ok(())
}
