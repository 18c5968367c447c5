//! The in-process [`Reader`] as a source of view answers (the JSON the
//! HTTP API gives), and the check of what the page cache keeps.

use super::Views;
use feedlog::api::http::{kept_timeline_page, split_kept_page};
use feedlog::api::query::{Modes, NotificationKind, Reader, Replies, RepostMode};
use feedlog::UserId;
use serde_json::Value;

impl Views for Reader {
    fn get(
        &self,
        view: &str,
        user: u64,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Value, String> {
        fn json<T: serde::Serialize>(
            r: Result<T, feedlog::api::query::QueryError>,
        ) -> Result<Value, String> {
            serde_json::to_value(r.map_err(|e| e.to_string())?).map_err(|e| e.to_string())
        }
        let u = UserId(user);
        match view {
            "counters" => json(self.counters(u)),
            "recent_followers" => json(self.recent_followers(u, limit)),
            "followers" => json(self.followers(u, limit, cursor)),
            "followees" => json(self.followees(u, limit, cursor)),
            "mutes" => json(self.mutes(u, limit, cursor)),
            "blocks" => json(self.blocks(u, limit, cursor)),
            other if other.starts_with("likes/") => {
                let p = other
                    .trim_start_matches("likes/")
                    .parse()
                    .map_err(|_| "post id")?;
                match self.likers((u, feedlog::core::event::PostId(p)), limit, cursor) {
                    Err(feedlog::api::query::QueryError::NoPost { reason, .. }) => {
                        Ok(serde_json::json!({ "error": reason }))
                    }
                    page => json(page),
                }
            }
            other if other.starts_with("replies/") => {
                let p = other
                    .trim_start_matches("replies/")
                    .parse()
                    .map_err(|_| "post id")?;
                let post = (u, feedlog::core::event::PostId(p));
                match self.replies(post, limit, cursor, Some(UserId(1))) {
                    Err(feedlog::api::query::QueryError::NoPost { reason, .. }) => {
                        Ok(serde_json::json!({ "error": reason }))
                    }
                    page => json(page),
                }
            }
            "posts" => json(self.posts(u, limit, cursor).and_then(|mut page| {
                self.decorate(&mut page.items, None)?;
                Ok(page)
            })),
            "timeline" => {
                // The HTTP API answers from the inbox alone when it holds
                // the page: that shortcut must give the same page, so every
                // timeline the tests check, checks it too.
                let mut page = self.timeline(u, limit, cursor).map_err(|e| e.to_string())?;
                let full = serde_json::to_value(&page).map_err(|e| e.to_string())?;
                // So must a page kept by the page cache (first or not).
                if let Some(kept) = self
                    .page_encoded(u, limit, cursor, |p| kept_timeline_page(u, limit, p))
                    .map_err(|e| e.to_string())?
                {
                    let (_, body) = split_kept_page(&kept);
                    let kept: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
                    if kept != full {
                        return Err(format!(
                            "timeline of {user} from {cursor:?}: the kept page {kept} differs from {full}"
                        ));
                    }
                }
                match self.timeline_if_materialized(u, limit, cursor) {
                    Ok(Some(page)) if json(Ok(page.clone()))? != full => {
                        return Err(format!(
                            "timeline of {user}: the inbox-only page {page:?} differs from {full}"
                        ))
                    }
                    Err(e) => return Err(format!("timeline of {user}, inbox only: {e}")),
                    _ => {}
                }
                // The API puts each entry's counts and flags on any page.
                json(self.decorate(&mut page.items, Some(u)).map(|()| page))
            }
            other if other.starts_with("timeline?") => {
                // `timeline?explain=1&replies=R&reposts=M`, each optional.
                let (mut modes, mut explain) = (Modes::default(), false);
                for pair in other.trim_start_matches("timeline?").split('&') {
                    match pair.split_once('=') {
                        Some(("reposts", m)) => {
                            modes.reposts =
                                RepostMode::parse(m).ok_or_else(|| format!("no mode {m}"))?
                        }
                        Some(("replies", r)) => {
                            modes.replies =
                                Replies::parse(r).ok_or_else(|| format!("no rule {r}"))?
                        }
                        Some(("explain", "1")) => explain = true,
                        _ => return Err(format!("no view {other}")),
                    }
                }
                let mut page = self
                    .timeline_with(u, modes, limit, cursor)
                    .map_err(|e| e.to_string())?;
                if explain {
                    self.explain_page(u, modes, &mut page)
                        .map_err(|e| e.to_string())?;
                }
                json(self.decorate(&mut page.items, Some(u)).map(|()| page))
            }
            // Catch-up: `after` the cursor, or the home marker.
            "catch-up" => {
                let after = cursor.unwrap_or("marker");
                let page = self.timeline_catch_up(u, Modes::default(), limit, after);
                json(page.and_then(|mut page| {
                    self.decorate(&mut page.items, Some(u))?;
                    Ok(page)
                }))
            }
            // Catch-up of the grouped notifications from the marker.
            "notifications-catch-up" => {
                let after = (limit, cursor.unwrap_or("marker"));
                json(self.notifications_catch_up(u, after, (true, None), false))
            }
            // `markers?reposts=M`: `limit` is the unread bound.
            other if other.starts_with("markers") => {
                let mut modes = Modes::default();
                let query = other.trim_start_matches("markers").trim_start_matches('?');
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    match pair.split_once('=') {
                        Some(("reposts", m)) => {
                            modes.reposts =
                                RepostMode::parse(m).ok_or_else(|| format!("no mode {m}"))?
                        }
                        _ => return Err(format!("no view {other}")),
                    }
                }
                json(self.markers(u, modes, limit as u64))
            }
            // `notifications?grouped=G&types=T`, each optional.
            other if other.starts_with("notifications") => {
                let (mut grouped, mut types, mut explain) = (true, None, false);
                let query = other
                    .trim_start_matches("notifications")
                    .trim_start_matches('?');
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    match pair.split_once('=') {
                        Some(("grouped", g)) => grouped = g == "1",
                        Some(("explain", e)) => explain = e == "1",
                        Some(("types", t)) => {
                            let kinds = t.split(',').map(NotificationKind::parse);
                            let kinds: Option<Vec<_>> = kinds.collect();
                            types = Some(kinds.ok_or_else(|| format!("no kinds {t}"))?);
                        }
                        _ => return Err(format!("no view {other}")),
                    }
                }
                let kinds = (grouped, types.as_deref());
                json(self.notifications_with(u, (limit, cursor), kinds, explain))
            }
            other => Err(format!("no view {other}")),
        }
    }

    fn post(&self, author: u64, post_id: u64, viewer: Option<u64>) -> Result<Value, String> {
        let post = (UserId(author), feedlog::core::event::PostId(post_id));
        match self.post(post, viewer.map(UserId)) {
            Ok(answer) => serde_json::to_value(answer).map_err(|e| e.to_string()),
            Err(feedlog::api::query::QueryError::NoPost { reason, .. }) => {
                Ok(serde_json::json!({ "error": reason }))
            }
            Err(e) => Err(e.to_string()),
        }
    }

    fn why(&self, user: u64, author: u64, post_id: u64) -> Result<Value, String> {
        let post = (UserId(author), feedlog::core::event::PostId(post_id));
        let answer = self.why(UserId(user), post).map_err(|e| e.to_string())?;
        serde_json::to_value(answer).map_err(|e| e.to_string())
    }
}

/// Reads the first and second pages of `limit` entries of each of `users`
/// through the page cache and the heads, so that they keep them, and
/// checks that what they answer (kept now or at an earlier step) is the
/// page read in full from the stores now: a commit that should have
/// dropped a kept page or changed a head and did not is found at the next
/// step.
pub fn check_kept_pages(
    reader: &Reader,
    users: impl IntoIterator<Item = u64>,
    limit: usize,
) -> Result<(), String> {
    let store_only = reader.past_heads();
    for u in users {
        let u = UserId(u);
        // A partition that is moving answers an error: nothing is kept.
        let Ok(first) = reader.timeline(u, limit, None) else {
            continue;
        };
        let second = first.next_cursor.clone();
        for cursor in std::iter::once(None).chain(second.as_deref().map(Some)) {
            let Ok(full) = store_only.timeline(u, limit, cursor) else {
                continue;
            };
            // The pull path reads outboxes from their heads: the same page.
            if let Ok(held) = reader.timeline(u, limit, cursor) {
                if held != full {
                    return Err(format!(
                        "timeline of {} from {cursor:?}: read through the heads {held:?}, from the stores {full:?}",
                        u.0
                    ));
                }
            }
            let Ok(Some(kept)) =
                reader.page_encoded(u, limit, cursor, |p| kept_timeline_page(u, limit, p))
            else {
                continue;
            };
            let (_, body) = split_kept_page(&kept);
            let kept: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
            let full = serde_json::to_value(&full).map_err(|e| e.to_string())?;
            if kept != full {
                return Err(format!(
                    "timeline of {} from {cursor:?}: the page cache answers {kept}, the full read {full}",
                    u.0
                ));
            }
        }
    }
    Ok(())
}
