//! `query`: one view of one user, or a stream of JSON queries on stdin.

use crate::cli::say::say;
use anyhow::{Context, Result};
use feedlog::api::query::{self, QueryError, Reader};
use feedlog::core::event::PostId;
use feedlog::core::View;
use feedlog::ops::asof::{LogRewind, Retention};
use feedlog::Rewind;
use feedlog::UserId;
use std::io::{BufRead, Write};
use std::path::Path;

/// `query VIEW USER`, or `query -`: answers on stdout; a bad query is
/// exit code 2 with the error on stderr.
pub fn query(
    data: &Path,
    view: &str,
    user: Option<u64>,
    (limit, cursor, reposts): (Option<usize>, Option<&str>, Option<query::RepostMode>),
    (explain, as_of, retention): (bool, Option<u64>, Retention),
) -> Result<i32> {
    if explain && as_of.is_some() {
        crate::cli::usage!("--explain answers the current state; it does not go with --as-of");
    }
    let timeline = View::parse(view) == Some(View::Timeline);
    if explain && !timeline {
        crate::cli::usage!("{view}: --explain is for the timeline");
    }
    if reposts.is_some() && !timeline {
        crate::cli::usage!("{view}: --reposts is for the timeline");
    }
    let mode = reposts.unwrap_or_default();
    let dir = feedlog::state::datadir::DataDir::open(data)?;
    let reader = match as_of {
        None => Reader::open(&dir)?,
        Some(t) => {
            let rewind = LogRewind::of(&dir, retention);
            match rewind.at(feedlog::core::event::Ts(t)) {
                Ok(reader) => reader,
                Err(e) => return print_answer(Err(e)),
            }
        }
    };
    if view == "-" {
        return query_stdin(&reader);
    }
    let Some(user) = user else {
        crate::cli::usage!("query needs a USER (or `-` to read queries from stdin)");
    };
    let answered = match View::parse(view) {
        Some(View::Timeline) if explain => explained(&reader, UserId(user), mode, limit, cursor),
        Some(View::Timeline) => {
            let page = limit.unwrap_or(query::DEFAULT_LIMIT);
            reader
                .timeline_in(UserId(user), mode, page, cursor)
                .and_then(|p| encoded(&p))
        }
        Some(v) => answer(&reader, v, user, limit, cursor),
        None => Err(QueryError::BadView(view.to_string())),
    };
    print_answer(answered)
}

/// `query why USER AUTHOR POST_ID`: is the post in the user's timeline,
/// and why (not); an unknown post whose partition has events not applied
/// yet is `not_applied_yet`.
pub fn why(data: &Path, user: Option<u64>, post: &[u64]) -> Result<i32> {
    let (Some(user), &[author, post_id]) = (user, post) else {
        crate::cli::usage!("query why needs USER AUTHOR POST_ID");
    };
    let dir = feedlog::state::datadir::DataDir::open(data)?;
    let reader = Reader::open(&dir)?;
    let post = (UserId(author), PostId(post_id));
    let answered = reader.why(UserId(user), post).and_then(|mut w| {
        if w.reason == Some("unknown_post") {
            let p = reader.partition_of(post.0);
            let store = reader.store_of(post.0)?;
            let lag = feedlog::task::lag(&dir.logs(), &[(p, store)])
                .map_err(|e| QueryError::BadView(format!("reading the log's end: {e}")))?;
            if let Some(l) = lag.first() {
                w.not_applied_yet(p, l.at.events.records_to(l.end.events));
            }
        }
        encoded(&w)
    });
    print_answer(answered)
}

/// A timeline page with each entry's `why`.
fn explained(
    reader: &Reader,
    user: UserId,
    mode: query::RepostMode,
    limit: Option<usize>,
    cursor: Option<&str>,
) -> Result<String, QueryError> {
    let mut page = reader.timeline_in(user, mode, limit.unwrap_or(query::DEFAULT_LIMIT), cursor)?;
    reader.explain_page(user, mode, &mut page)?;
    encoded(&page)
}

/// A page as JSON.
fn encoded<T: serde::Serialize>(page: &T) -> Result<String, QueryError> {
    serde_json::to_string(page).map_err(|e| QueryError::BadView(format!("unencodable: {e}")))
}

/// Prints an answer on stdout (exit 0), or its error on stderr (exit 2).
fn print_answer(answered: Result<String, QueryError>) -> Result<i32> {
    match answered {
        Ok(json) => {
            println!("{json}");
            Ok(0)
        }
        Err(e) => {
            say!("error: {e}");
            Ok(2)
        }
    }
}

/// Answers one query as a JSON string.
fn answer(
    reader: &Reader,
    view: View,
    user: u64,
    limit: Option<usize>,
    cursor: Option<&str>,
) -> Result<String, QueryError> {
    let u = UserId(user);
    let page = limit.unwrap_or(query::DEFAULT_LIMIT);
    let json = match view {
        View::Timeline => serde_json::to_string(&reader.timeline(u, page, cursor)?),
        View::Posts => serde_json::to_string(&reader.posts(u, page, cursor)?),
        View::Counters => serde_json::to_string(&reader.counters(u)?),
        View::RecentFollowers => serde_json::to_string(
            &reader.recent_followers(u, limit.unwrap_or(query::DEFAULT_RECENT))?,
        ),
        View::Followers => serde_json::to_string(&reader.followers(u, page, cursor)?),
        View::Followees => serde_json::to_string(&reader.followees(u, page, cursor)?),
        View::Mutes => serde_json::to_string(&reader.mutes(u, page, cursor)?),
        View::Blocks => serde_json::to_string(&reader.blocks(u, page, cursor)?),
    };
    // The answers are plain structs of numbers and strings.
    json.map_err(|e| QueryError::BadView(format!("unencodable answer: {e}")))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonQuery {
    view: View,
    user: u64,
    limit: Option<usize>,
    cursor: Option<String>,
}

fn query_stdin(reader: &Reader) -> Result<i32> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading queries from stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let result = match serde_json::from_str::<JsonQuery>(&line) {
            Ok(q) => answer(reader, q.view, q.user, q.limit, q.cursor.as_deref())
                .map_err(|e| (e.code(), e.to_string())),
            Err(e) => Err(("bad_query", format!("invalid query: {e}"))),
        };
        match result {
            Ok(json) => writeln!(out, "{json}")?,
            Err((code, message)) => writeln!(
                out,
                "{}",
                serde_json::json!({"error": {"code": code, "message": message}})
            )?,
        }
    }
    out.flush()?;
    Ok(0)
}
