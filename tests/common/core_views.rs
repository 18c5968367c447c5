//! The API's answers computed from a partition's key-value state directly
//! (for the core's property tests, which run without the HTTP layer).

use feedlog::core::event::UserId;
use feedlog::core::filter::ReadFilter;
use feedlog::core::keys::TimelineKey;
use feedlog::core::kv::MemKv;
use feedlog::core::{repost, views};
use serde_json::json;

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
                }
            }
            item
        })
        .collect()
}

/// `u`'s timeline in `mode` from its appearances `apps` (read at its
/// partition `kv`), each entry as the API answers it.
pub fn timeline(
    kv: &MemKv,
    u: u64,
    mode: repost::Mode,
    apps: &[TimelineKey],
) -> Vec<serde_json::Value> {
    let now = views::clock(kv).unwrap();
    let filter = ReadFilter::of(kv, UserId(u), now).unwrap();
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
