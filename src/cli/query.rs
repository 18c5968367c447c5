//! `query`: one read of one user, or a stream of JSON queries on stdin.
//! Both take what the HTTP API takes, parsed by the one table of reads
//! (`feedlog::api::reads`): a flag `--p V` and a line's field `"p":V` are
//! the route's `?p=V`.

use crate::cli::say::say;
use anyhow::{Context, Result};
use feedlog::api::query::{self, QueryError, Reader, MAX_LIMIT};
use feedlog::api::reads::{self, BadParam};
use feedlog::core::event::{PostId, Ts};
use feedlog::ops::asof::{LogRewind, Retention};
use feedlog::state::datadir::DataDir;
use feedlog::Rewind;
use feedlog::UserId;
use std::io::{BufRead, Write};
use std::path::Path;

/// `query VIEW USER [--p V]...`, or `query -`: answers on stdout; a
/// query that cannot be answered is exit code 2 with the error on stderr.
pub fn query(
    data: &Path,
    (view, user): (&str, Option<&str>),
    pairs: Vec<(String, String)>,
    retention: Retention,
) -> Result<i32> {
    let dir = DataDir::open(data)?;
    let as_of = pairs.iter().any(|(k, _)| k == "as_of");
    let answerer = Answerer {
        // A read of an earlier state needs no current one.
        now: if as_of {
            None
        } else {
            Some(Reader::open(&dir)?)
        },
        rewind: LogRewind::of(&dir, retention),
        dir,
    };
    if view == "-" {
        if !pairs.is_empty() || user.is_some() {
            crate::cli::usage!("query - reads each query, with its parameters, from a stdin line");
        }
        return answerer.stdin();
    }
    let Some(user) = user else {
        crate::cli::usage!("query needs a USER (or `-` to read queries from stdin)");
    };
    match answerer.answer(view, user, pairs) {
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

/// Answers reads of one data directory: now, or as of a log time.
struct Answerer {
    dir: DataDir,
    now: Option<Reader>,
    rewind: LogRewind,
}

impl Answerer {
    /// The state now, or as of `as_of`.
    fn reader(&self, as_of: Option<u64>) -> Result<Reader, QueryError> {
        match (as_of, &self.now) {
            (Some(t), _) => self.rewind.at(Ts(t)),
            (None, Some(now)) => Ok(now.clone()),
            (None, None) => Ok(Reader::open(&self.dir)?),
        }
    }

    /// Answers `view` of `user` given `pairs`, as JSON: what the read's
    /// HTTP route answers, with pages of up to [`MAX_LIMIT`].
    fn answer(
        &self,
        view: &str,
        user: &str,
        pairs: Vec<(String, String)>,
    ) -> Result<String, QueryError> {
        let read = reads::by_name(view).ok_or_else(|| QueryError::BadView(view.to_string()))?;
        let user = reads::user_id(user)?;
        let p = reads::parse(read, pairs)?;
        let limit = || {
            p.limit(
                read.default_limit.unwrap_or(query::DEFAULT_LIMIT),
                MAX_LIMIT,
            )
        };
        let cursor = p.cursor.as_deref();
        let r = self.reader(p.as_of)?;
        match read.name {
            "timeline" => {
                let (l, modes) = (limit()?, p.modes());
                let mut page = match p.timeline_from()? {
                    reads::PageStart::Newer(n) => r.timeline_newer(user, modes, l, &n)?,
                    reads::PageStart::After(a) => r.timeline_catch_up(user, modes, l, &a)?,
                    reads::PageStart::Older(c) => r.timeline_with(user, modes, l, Some(&c))?,
                    reads::PageStart::Top => r.timeline_with(user, modes, l, None)?,
                };
                if p.explain {
                    r.explain_page(user, modes, &mut page)?;
                }
                if p.counts() {
                    r.decorate(&mut page.items, Some(user))?;
                }
                encoded(&page)
            }
            "why" => self.why(&r, user, p.post()?),
            "changes" => {
                let (from, to) = p.span()?;
                let (before, after) = (self.rewind.at(Ts(from))?, self.rewind.at(Ts(to))?);
                encoded(&query::changes((&before, &after), user, (from, to))?)
            }
            "posts" => {
                let mut page = r.posts(user, limit()?, cursor)?;
                if p.counts() {
                    r.decorate(&mut page.items, p.viewer)?;
                }
                encoded(&page)
            }
            "post" => encoded(&r.post((user, p.post_id()?), p.viewer)?),
            "likes" => encoded(&r.likers((user, p.post_id()?), limit()?, cursor)?),
            "replies" => {
                let post = (user, p.post_id()?);
                encoded(&r.replies(post, limit()?, cursor, p.viewer)?)
            }
            "markers" => encoded(&r.markers(user, p.modes(), p.max_unread()?)?),
            "notifications" => {
                let (grouped, types) = (p.grouped.unwrap_or(true), p.types.as_deref());
                let (kinds, explain) = ((grouped, types), p.explain_now()?);
                match p.notifications_after()? {
                    Some(a) => {
                        encoded(&r.notifications_catch_up(user, (limit()?, a), kinds, explain)?)
                    }
                    None => {
                        encoded(&r.notifications_with(user, (limit()?, cursor), kinds, explain)?)
                    }
                }
            }
            "counters" => encoded(&r.counters(user)?),
            "recent-followers" => encoded(&r.recent_followers(user, limit()?)?),
            "followers" => encoded(&r.followers(user, limit()?, cursor)?),
            "followees" => encoded(&r.followees(user, limit()?, cursor)?),
            "mutes" => encoded(&r.mutes(user, limit()?, cursor)?),
            "blocks" => encoded(&r.blocks(user, limit()?, cursor)?),
            _ => Err(QueryError::BadView(view.to_string())),
        }
    }

    /// Is the post in the user's timeline, and why (not); an unknown post
    /// whose partition has events not applied yet is `not_applied_yet`.
    fn why(
        &self,
        reader: &Reader,
        user: UserId,
        post: (UserId, PostId),
    ) -> Result<String, QueryError> {
        let mut w = reader.why(user, post)?;
        if w.reason == Some("unknown_post") {
            let p = reader.partition_of(post.0);
            let store = reader.store_of(post.0)?;
            let lag = feedlog::task::lag(&self.dir.logs(), &[(p, store)])
                .map_err(|e| QueryError::Internal(format!("reading the log's end: {e}")))?;
            if let Some(l) = lag.first() {
                w.not_applied_yet(p, l.at.events.records_to(l.end.events));
            }
        }
        encoded(&w)
    }

    /// `query -`: one JSON query per line, one answer line each, in order;
    /// a query that cannot be answered answers `{"error":{..}}`.
    fn stdin(&self) -> Result<i32> {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        for line in std::io::stdin().lock().lines() {
            let line = line.context("reading queries from stdin")?;
            if line.trim().is_empty() {
                continue;
            }
            let answered = line_query(&line)
                .map_err(QueryError::from)
                .and_then(|q| self.answer(&q.view, &q.user, q.pairs));
            match answered {
                Ok(json) => writeln!(out, "{json}")?,
                Err(e) => writeln!(
                    out,
                    "{}",
                    serde_json::json!({"error": {"code": e.code(), "message": e.to_string()}})
                )?,
            }
        }
        out.flush()?;
        Ok(0)
    }
}

/// A `query -` line.
struct LineQuery {
    view: String,
    user: String,
    pairs: Vec<(String, String)>,
}

/// A `query -` line's view, user and parameters: each field but `view`
/// and `user` is the route's parameter of that name, its value the text a
/// query string would carry (`"7"` or `7`, `true` or `"1"`); `null` is
/// absent.
fn line_query(line: &str) -> Result<LineQuery, BadParam> {
    let bad = |message: String| BadParam {
        code: "bad_query",
        message,
    };
    let fields: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(line).map_err(|e| bad(format!("invalid query: {e}")))?;
    let (mut view, mut user, mut pairs) = (None, None, Vec::new());
    for (k, v) in fields {
        let text = match v {
            serde_json::Value::Null => continue,
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            other => {
                return Err(bad(format!(
                    "{k} must be a string, number or boolean, got {other}"
                )))
            }
        };
        match k.as_str() {
            "view" => view = Some(text),
            "user" => user = Some(text),
            _ => pairs.push((k, text)),
        }
    }
    match (view, user) {
        (Some(view), Some(user)) => Ok(LineQuery { view, user, pairs }),
        _ => Err(bad("a query names its \"view\" and its \"user\"".into())),
    }
}

/// An answer as JSON.
fn encoded<T: serde::Serialize>(answer: &T) -> Result<String, QueryError> {
    serde_json::to_string(answer).map_err(|e| QueryError::Internal(format!("unencodable: {e}")))
}
