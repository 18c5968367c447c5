//! Shared test harness: the oracle, generated logs, and a check of every view
//! of every user against the oracle.

#![allow(dead_code)]

pub mod oracle;

use feedlog::query::Reader;
use feedlog::UserId;
use oracle::Oracle;

/// Compares every view of users `1..=max_user` (and one unknown user) with
/// the oracle, walking every page of every paged view with `page` items per
/// page. Returns the first difference.
pub fn check_all(
    reader: &Reader,
    oracle: &Oracle,
    max_user: u64,
    page: usize,
) -> Result<(), String> {
    for u in 1..=max_user + 1 {
        let user = UserId(u);
        let c = reader.counters(user).map_err(|e| e.to_string())?;
        let want = oracle.counters(u);
        if (c.followers, c.followees, c.posts) != want {
            return Err(format!("counters of {u}: got {c:?}, want {want:?}"));
        }
        for k in [1usize, 3, 100] {
            let got: Vec<(u64, u64)> = reader
                .recent_followers(user, k)
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .map(|i| (i.user, i.ts))
                .collect();
            let want = oracle.recent_followers(u, k);
            if got != want {
                return Err(format!(
                    "recent_followers({u}, {k}): got {got:?}, want {want:?}"
                ));
            }
        }
        let got = collect_pages(
            |c| {
                reader
                    .followers(user, page, c)
                    .map(|p| (p.items, p.next_cursor))
            },
            page,
        )?;
        let got: Vec<(u64, u64)> = got.iter().map(|i| (i.user, i.ts)).collect();
        if got != oracle.followers(u) {
            return Err(format!(
                "followers of {u}: got {got:?}, want {:?}",
                oracle.followers(u)
            ));
        }
        let got = collect_pages(
            |c| {
                reader
                    .followees(user, page, c)
                    .map(|p| (p.items, p.next_cursor))
            },
            page,
        )?;
        let got: Vec<(u64, u64)> = got.iter().map(|i| (i.user, i.ts)).collect();
        if got != oracle.followees(u) {
            return Err(format!(
                "followees of {u}: got {got:?}, want {:?}",
                oracle.followees(u)
            ));
        }
        let got = collect_pages(
            |c| {
                reader
                    .posts(user, page, c)
                    .map(|p| (p.items, p.next_cursor))
            },
            page,
        )?;
        let got: Vec<(u64, u64)> = got.iter().map(|i| (i.post_id, i.ts)).collect();
        if got != oracle.outbox(u) {
            return Err(format!(
                "posts of {u}: got {got:?}, want {:?}",
                oracle.outbox(u)
            ));
        }
        let want = oracle.timeline(u);
        for limit in [page, 1000] {
            let got = collect_pages(
                |c| {
                    reader
                        .timeline(user, limit, c)
                        .map(|p| (p.items, p.next_cursor))
                },
                limit,
            )?;
            let got: Vec<(u64, u64, u64)> =
                got.iter().map(|i| (i.post_id, i.author, i.ts)).collect();
            if got != want {
                return Err(format!(
                    "timeline of {u} (pages of {limit}): got {got:?}, want {want:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Follows `next_cursor` to the end; every page but the last must be full
/// and the last must not be empty unless it is the first.
pub fn collect_pages<T>(
    mut fetch: impl FnMut(Option<&str>) -> Result<(Vec<T>, Option<String>), feedlog::query::QueryError>,
    limit: usize,
) -> Result<Vec<T>, String> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let (items, next) = fetch(cursor.as_deref()).map_err(|e| e.to_string())?;
        if next.is_some() && items.len() != limit {
            return Err(format!(
                "a page with a next cursor has {} items, not {limit}",
                items.len()
            ));
        }
        if items.is_empty() && cursor.is_some() {
            return Err("a next_cursor led to an empty page".into());
        }
        all.extend(items);
        match next {
            Some(c) => cursor = Some(c),
            None => return Ok(all),
        }
        if all.len() > 1_000_000 {
            return Err("paging does not end".into());
        }
    }
}
