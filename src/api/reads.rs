//! Every read the API serves and what each takes: the one table that the
//! HTTP routes, `feedlog query` (its flags and its `query -` lines) and
//! the table in docs/cli.md, "query", are held to, and the one parser of
//! what a read is given. A parameter `p` is `?p=` over
//! HTTP, `--p` on the command line (`_` spelled `-`) and the field `"p"`
//! of a `query -` line; each is parsed here from the text HTTP would
//! carry, so the three take the same values and refuse them with the same
//! words.

use crate::api::query::{
    Modes, NotificationKind, Replies, RepostMode, DEFAULT_LIMIT, DEFAULT_RECENT,
};
use crate::core::event::{PostId, UserId};

/// One read.
#[derive(Debug, Clone, Copy)]
pub struct Read {
    /// Its name: `feedlog query NAME USER`, `"view":NAME` on a `query -` line.
    pub name: &'static str,
    /// Its HTTP route.
    pub route: &'static str,
    /// The parameters it takes, besides the user.
    pub takes: &'static [&'static str],
    /// The page size when `limit` is not given.
    pub default_limit: Option<usize>,
    /// Why `query` does not answer it, when it does not.
    pub not_in_cli: Option<&'static str>,
}

const PAGED: &[&str] = &["limit", "cursor", "as_of"];

const fn paged(name: &'static str, route: &'static str) -> Read {
    Read {
        name,
        route,
        takes: PAGED,
        default_limit: Some(DEFAULT_LIMIT),
        not_in_cli: None,
    }
}

const fn unpaged(name: &'static str, route: &'static str, takes: &'static [&'static str]) -> Read {
    Read {
        name,
        route,
        takes,
        default_limit: None,
        not_in_cli: None,
    }
}

impl Read {
    /// The read with a page size when `limit` is not given.
    const fn with_limit(mut self, limit: usize) -> Read {
        self.default_limit = Some(limit);
        self
    }
}

/// A stream's unread count's bound when `max` is not given.
pub const STREAM_MAX_UNREAD: u64 = 100;

/// A user's home timeline.
pub const TIMELINE: Read = Read {
    name: "timeline",
    route: "/v1/users/{id}/timeline",
    takes: &[
        "limit",
        "cursor",
        "newer_than",
        "after",
        "reposts",
        "replies",
        "explain",
        "counts",
        "as_of",
    ],
    default_limit: Some(DEFAULT_LIMIT),
    not_in_cli: None,
};
/// Is a post in a user's timeline, and why (not).
pub const WHY: Read = unpaged("why", "/v1/users/{id}/timeline/why", &["author", "post_id"]);
/// What entered and left a timeline between two log times.
pub const CHANGES: Read = unpaged(
    "changes",
    "/v1/users/{id}/timeline/changes",
    &["from", "to"],
);
/// A timeline's first page, then its changes as they are applied.
pub const STREAM: Read = Read {
    name: "stream",
    route: "/v1/users/{id}/timeline/stream",
    takes: &["limit", "max"],
    default_limit: Some(DEFAULT_LIMIT),
    not_in_cli: Some("a stream needs a connection; `query timeline` reads the page it opens with"),
};
/// A user's own posts, with their originals' counts (and a viewer's flags).
pub const POSTS: Read = unpaged(
    "posts",
    "/v1/users/{id}/posts",
    &["limit", "cursor", "counts", "viewer", "as_of"],
)
.with_limit(DEFAULT_LIMIT);
/// One post (`{id}` its author, `{post_id}` the post) with its counts,
/// and a viewer's flags.
pub const POST: Read = unpaged("post", "/v1/posts/{id}/{post_id}", &["post_id", "viewer"]);
/// Who likes a post (`{id}` its author, `{post_id}` the post; a repost's
/// id: its original's), newest first.
pub const LIKES: Read = unpaged(
    "likes",
    "/v1/posts/{id}/{post_id}/likes",
    &["post_id", "limit", "cursor"],
)
.with_limit(DEFAULT_LIMIT);
/// A post's direct replies (`{id}` its author, `{post_id}` the post; a
/// repost's id: its original's), oldest first, with their counts.
pub const REPLIES: Read = unpaged(
    "replies",
    "/v1/posts/{id}/{post_id}/replies",
    &["post_id", "limit", "cursor", "viewer"],
)
.with_limit(DEFAULT_LIMIT);
/// A user's read markers, with each feed's unread count.
pub const MARKERS: Read = unpaged(
    "markers",
    "/v1/users/{id}/markers",
    &["max", "reposts", "replies"],
);
/// A user's notifications, grouped (or one per act).
pub const NOTIFICATIONS: Read = Read {
    name: "notifications",
    route: "/v1/users/{id}/notifications",
    takes: &[
        "limit", "cursor", "after", "grouped", "types", "explain", "as_of",
    ],
    default_limit: Some(DEFAULT_LIMIT),
    not_in_cli: None,
};
/// A user's notifications' first page, again whenever it changes.
pub const NOTIFICATIONS_STREAM: Read = Read {
    name: "notifications-stream",
    route: "/v1/users/{id}/notifications/stream",
    takes: &["limit", "grouped", "types", "max"],
    default_limit: Some(DEFAULT_LIMIT),
    not_in_cli: Some(
        "a stream needs a connection; `query notifications` reads the page it opens with",
    ),
};
/// A user's counters.
pub const COUNTERS: Read = unpaged("counters", "/v1/users/{id}/counters", &["as_of"]);
/// Several users' counters in one answer.
pub const COUNTERS_MANY: Read = Read {
    name: "counters (many)",
    route: "/v1/counters",
    takes: &["ids"],
    default_limit: None,
    not_in_cli: Some("one `counters` line per user on `query -`"),
};
/// A user's newest followers.
pub const RECENT_FOLLOWERS: Read = Read {
    name: "recent-followers",
    route: "/v1/users/{id}/followers/recent",
    takes: &["limit", "as_of"],
    default_limit: Some(DEFAULT_RECENT),
    not_in_cli: None,
};
/// A user's followers.
pub const FOLLOWERS: Read = paged("followers", "/v1/users/{id}/followers");
/// The users a user follows.
pub const FOLLOWEES: Read = paged("followees", "/v1/users/{id}/followees");
/// The users a user mutes.
pub const MUTES: Read = paged("mutes", "/v1/users/{id}/mutes");
/// The users a user blocks.
pub const BLOCKS: Read = paged("blocks", "/v1/users/{id}/blocks");

/// Every read, in the order docs/cli.md lists them.
pub const ALL: &[Read] = &[
    TIMELINE,
    WHY,
    CHANGES,
    STREAM,
    POSTS,
    POST,
    LIKES,
    REPLIES,
    MARKERS,
    NOTIFICATIONS,
    NOTIFICATIONS_STREAM,
    COUNTERS,
    COUNTERS_MANY,
    RECENT_FOLLOWERS,
    FOLLOWERS,
    FOLLOWEES,
    MUTES,
    BLOCKS,
];

/// The read `query NAME` answers (`recent_followers` is also taken, the
/// spelling of the view in digests and older `query -` lines).
pub fn by_name(name: &str) -> Option<&'static Read> {
    let name = if name == "recent_followers" {
        "recent-followers"
    } else {
        name
    };
    ALL.iter()
        .find(|r| r.name == name && r.not_in_cli.is_none())
}

/// The names `query` answers, for its error messages and `--help`.
pub fn cli_names() -> Vec<&'static str> {
    ALL.iter()
        .filter(|r| r.not_in_cli.is_none())
        .map(|r| r.name)
        .collect()
}

/// A read given what it does not take, or a value it cannot use: the
/// error's code (`bad_query`, `bad_limit`, `bad_user`) and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadParam {
    /// A stable machine-readable code.
    pub code: &'static str,
    /// What was wrong, in the words of the parameters.
    pub message: String,
}

fn bad(message: impl Into<String>) -> BadParam {
    BadParam {
        code: "bad_query",
        message: message.into(),
    }
}

/// Where a timeline page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageStart {
    /// At the newest entry: the first page.
    Top,
    /// Past a page's `next_cursor`: older entries.
    Older(String),
    /// Before a page's `prev_cursor`: the entries newer than its first.
    Newer(String),
    /// Just above the home read marker (`marker`) or a cursor's entry,
    /// oldest first: catch-up.
    After(String),
}

/// What a read was given, each parsed.
#[derive(Debug, Default)]
pub struct Params {
    /// `limit`.
    pub limit: Option<usize>,
    /// `cursor`: the next page of a `next_cursor`.
    pub cursor: Option<String>,
    /// `newer_than`: the entries newer than a `prev_cursor`.
    pub newer_than: Option<String>,
    /// `after`: the entries just above the read marker or a cursor, oldest first.
    pub after: Option<String>,
    /// `ids`: comma-separated user ids.
    pub ids: Option<String>,
    /// `reposts`: how a timeline places reposts.
    pub reposts: Option<RepostMode>,
    /// `replies`: which replies a home timeline shows.
    pub replies: Option<Replies>,
    /// `explain`: each timeline entry with its why.
    pub explain: bool,
    /// `counts`: `false` leaves each entry's counts and flags out.
    pub counts: Option<bool>,
    /// `author` of the post `why` asks about.
    pub author: Option<u64>,
    /// `post_id` of the post `why` asks about.
    pub post_id: Option<u64>,
    /// `as_of`: the view at this log time.
    pub as_of: Option<u64>,
    /// `from`: the earlier log time of `changes`.
    pub from: Option<u64>,
    /// `to`: the later log time of `changes`.
    pub to: Option<u64>,
    /// `viewer`: whose flags a post carries.
    pub viewer: Option<UserId>,
    /// `max`: the most unread entries `markers` counts.
    pub max: Option<u64>,
    /// `grouped`: `false` answers notifications one per act.
    pub grouped: Option<bool>,
    /// `types`: the notification kinds kept.
    pub types: Option<Vec<NotificationKind>>,
}

/// A whole-number parameter `k`.
pub fn number(k: &str, v: &str) -> Result<u64, BadParam> {
    v.parse()
        .map_err(|_| bad(format!("{k} must be a whole number, got {v:?}")))
}

/// A yes-or-no parameter `k`: 1 or 0 (`true` or `false`).
fn flag(k: &str, v: &str) -> Result<bool, BadParam> {
    match v {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(bad(format!("{k} must be 1 or 0, got {v:?}"))),
    }
}

/// Notification kinds, comma-separated (`follow,like`); none, a repeat
/// or an unknown one is refused.
fn kinds(v: &str) -> Result<Vec<NotificationKind>, BadParam> {
    let names = NotificationKind::ALL
        .map(NotificationKind::as_str)
        .join(", ");
    let mut out: Vec<NotificationKind> = Vec::new();
    for s in v.split(',').map(str::trim) {
        let k = NotificationKind::parse(s).ok_or_else(|| {
            bad(format!(
                "types must be kinds of notifications ({names}), comma-separated, got {s:?}"
            ))
        })?;
        if out.contains(&k) {
            return Err(bad(format!("types names {s:?} twice")));
        }
        out.push(k);
    }
    Ok(out)
}

/// A user id.
pub fn user_id(s: &str) -> Result<UserId, BadParam> {
    let bad_user = |message: String| BadParam {
        code: "bad_user",
        message,
    };
    match s.parse::<u64>() {
        Ok(0) => Err(bad_user("user ids start at 1, got 0".into())),
        Ok(id) => Ok(UserId(id)),
        Err(_) => Err(bad_user(format!(
            "a user id is a whole number from 1, got {s:?}"
        ))),
    }
}

/// Parses `pairs` for `read`: parameters it does not take are refused,
/// all named, then a value that is not one of its parameter's. The order
/// of the pairs does not change the answer, nor which error it is (a
/// query string's order and a command line's differ); of a parameter
/// given twice, the last counts.
pub fn parse(read: &Read, mut pairs: Vec<(String, String)>) -> Result<Params, BadParam> {
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut unknown: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| !read.takes.contains(&k.as_str()))
        .map(|(k, _)| format!("{k:?}"))
        .collect();
    unknown.dedup();
    if !unknown.is_empty() {
        let s = if unknown.len() == 1 { "" } else { "s" };
        return Err(bad(format!(
            "unknown parameter{s} {} ({} takes: {})",
            unknown.join(", "),
            read.name,
            read.takes.join(", ")
        )));
    }
    let mut out = Params::default();
    for (k, v) in pairs {
        match k.as_str() {
            "limit" => {
                out.limit = Some(v.parse().map_err(|_| BadParam {
                    code: "bad_limit",
                    message: format!("limit must be a whole number, got {v:?}"),
                })?)
            }
            "cursor" => out.cursor = Some(v),
            "newer_than" => out.newer_than = Some(v),
            "after" => out.after = Some(v),
            "reposts" => {
                out.reposts = Some(RepostMode::parse(&v).ok_or_else(|| {
                    bad(format!("reposts must be newest, first or none, got {v:?}"))
                })?)
            }
            "replies" => {
                out.replies = Some(Replies::parse(&v).ok_or_else(|| {
                    bad(format!("replies must be followed, all or none, got {v:?}"))
                })?)
            }
            "ids" => out.ids = Some(v),
            "explain" => out.explain = flag(&k, &v)?,
            "counts" => out.counts = Some(flag(&k, &v)?),
            "author" => out.author = Some(number(&k, &v)?),
            "post_id" => out.post_id = Some(number(&k, &v)?),
            "as_of" => out.as_of = Some(number(&k, &v)?),
            "from" => out.from = Some(number(&k, &v)?),
            "to" => out.to = Some(number(&k, &v)?),
            "viewer" => out.viewer = Some(user_id(&v)?),
            "max" => out.max = Some(number(&k, &v)?),
            "grouped" => out.grouped = Some(flag(&k, &v)?),
            "types" => out.types = Some(kinds(&v)?),
            other => {
                return Err(bad(format!(
                    "parameter {other:?} is in the table of reads but not parsed"
                )))
            }
        }
    }
    Ok(out)
}

impl Params {
    /// A timeline's modes: `reposts` and `replies`, each its default when
    /// not given.
    pub fn modes(&self) -> Modes {
        Modes {
            reposts: self.reposts.unwrap_or_default(),
            replies: self.replies.unwrap_or_default(),
        }
    }

    /// Whether entries carry their counts and the reader's flags (unless
    /// `counts=0`).
    pub fn counts(&self) -> bool {
        self.counts.unwrap_or(true)
    }

    /// The page size: `limit`, or `default` (at most `max`); out of
    /// 1..=`max` is refused.
    pub fn limit(&self, default: usize, max: usize) -> Result<usize, BadParam> {
        let l = self.limit.unwrap_or(default.min(max));
        if l == 0 || l > max {
            return Err(BadParam {
                code: "bad_limit",
                message: format!("limit must be between 1 and {max} (the maximum), got {l}"),
            });
        }
        Ok(l)
    }

    /// What a notifications page's next link repeats besides the limit
    /// and the cursor: `&grouped=0`, `&types=…` and `&explain=1` as given.
    pub fn notifications_asked(&self) -> String {
        let mut asked = String::new();
        if self.grouped == Some(false) {
            asked += "&grouped=0";
        }
        if let Some(t) = &self.types {
            let names: Vec<&str> = t.iter().map(|k| k.as_str()).collect();
            asked += &format!("&types={}", names.join(","));
        }
        if self.explain {
            asked += "&explain=1";
        }
        asked
    }

    /// `explain`, which answers the current state only: refused with
    /// `as_of`.
    pub fn explain_now(&self) -> Result<bool, BadParam> {
        if self.explain && self.as_of.is_some() {
            // A state as of a time is replayed on one partition: it knows
            // no log positions to explain with.
            return Err(bad(
                "explain answers the current state; it does not go with as_of",
            ));
        }
        Ok(self.explain)
    }

    /// Where a notifications page starts: `after` (catch-up, oldest
    /// first) when given, else from `cursor` (older groups) or the top;
    /// not both.
    pub fn notifications_after(&self) -> Result<Option<&str>, BadParam> {
        if self.cursor.is_some() && self.after.is_some() {
            return Err(bad(
                "give one of cursor (older groups) and after (catch-up, oldest first)",
            ));
        }
        Ok(self.after.as_deref())
    }

    /// Where a timeline page starts: from a `cursor` (older entries), a
    /// `newer_than` (newer ones) or an `after` (catch-up), one at most;
    /// and `explain` only of the current state.
    pub fn timeline_from(&self) -> Result<PageStart, BadParam> {
        self.explain_now()?;
        let given = [&self.cursor, &self.newer_than, &self.after];
        if given.iter().filter(|x| x.is_some()).count() > 1 {
            return Err(bad(
                "give one of cursor (older entries), newer_than (newer entries) and after (catch-up, oldest first)",
            ));
        }
        Ok(match given.map(|x| x.clone()) {
            [Some(c), ..] => PageStart::Older(c),
            [_, Some(n), _] => PageStart::Newer(n),
            [.., Some(a)] => PageStart::After(a),
            _ => PageStart::Top,
        })
    }

    /// `why`'s post: `author` and `post_id`, both required.
    pub fn post(&self) -> Result<(UserId, PostId), BadParam> {
        match (self.author, self.post_id) {
            (Some(a), Some(p)) => Ok((UserId(a), PostId(p))),
            _ => Err(bad("give the post as author=A&post_id=P")),
        }
    }

    /// `markers`' bound on the unread counts: `max`, or 1,000; 1 to
    /// 10,000.
    pub fn max_unread(&self) -> Result<u64, BadParam> {
        self.max_unread_or(crate::api::query::DEFAULT_MAX_UNREAD)
    }

    /// A stream's bound on its unread count: `max`, or 100 (a badge shows
    /// "99+"; the count is read again at every wake of the stream, so
    /// its bound is its cost); 1 to 10,000.
    pub fn stream_max_unread(&self) -> Result<u64, BadParam> {
        self.max_unread_or(STREAM_MAX_UNREAD)
    }

    fn max_unread_or(&self, default: u64) -> Result<u64, BadParam> {
        let max = self.max.unwrap_or(default);
        match max {
            1..=crate::api::query::MAX_UNREAD => Ok(max),
            _ => Err(bad(format!(
                "max must be between 1 and {}, got {max}",
                crate::api::query::MAX_UNREAD
            ))),
        }
    }

    /// `post`'s id, required.
    pub fn post_id(&self) -> Result<PostId, BadParam> {
        self.post_id
            .map(PostId)
            .ok_or_else(|| bad("give the post's id: /v1/posts/AUTHOR/POST_ID"))
    }

    /// `changes`' two log times, `from <= to`, both required.
    pub fn span(&self) -> Result<(u64, u64), BadParam> {
        let (Some(from), Some(to)) = (self.from, self.to) else {
            return Err(bad("from and to are required: log times in ms, from <= to"));
        };
        if from > to {
            return Err(bad(format!("from ({from}) is after to ({to})")));
        }
        Ok((from, to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    // Proves a read refuses a parameter another read takes, naming what it takes.
    #[test]
    fn a_read_refuses_what_it_does_not_take() {
        let e = parse(&POSTS, pairs(&[("newer_than", "x")])).unwrap_err();
        assert_eq!(e.code, "bad_query");
        assert!(
            e.message
                .contains("posts takes: limit, cursor, counts, viewer, as_of"),
            "{e}"
        );
        assert!(parse(&TIMELINE, pairs(&[("newer_than", "x")])).is_ok());
        let e = parse(&WHY, pairs(&[("explain", "1"), ("as_of", "1")])).unwrap_err();
        let f = parse(&WHY, pairs(&[("as_of", "1"), ("explain", "1")])).unwrap_err();
        assert_eq!(e, f);
        assert!(
            e.message
                .starts_with(r#"unknown parameters "as_of", "explain""#),
            "{e}"
        );
    }

    // Proves every parameter of the table is parsed (none only listed).
    #[test]
    fn every_parameter_in_the_table_is_parsed() {
        for read in ALL {
            for &p in read.takes {
                let v = match p {
                    "reposts" => "first",
                    "replies" => "all",
                    "explain" | "counts" | "grouped" => "1",
                    "types" => "like,follow",
                    _ => "7",
                };
                assert!(parse(read, pairs(&[(p, v)])).is_ok(), "{} {p}", read.name);
            }
        }
    }
}
