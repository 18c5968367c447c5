//! Shared test harness: the oracle, generated logs, a minimal HTTP client,
//! and a check of every view of every user against the oracle that runs the
//! same body against the in-process reader and the HTTP API.

#![allow(dead_code)]

pub mod api;
mod catch_up;
pub mod core_views;
pub mod filters;
pub mod generated;
pub mod http;
pub mod kafka;
pub mod oracle;
mod reader_views;
pub mod scenario;
pub mod stream;

#[allow(unused_imports)]
pub use reader_views::check_kept_pages;

use catch_up::catch_up_matches;
use feedlog::api::query::Replies;
use feedlog::core::codec::{self, Format};
use oracle::{Mode, Oracle};
use serde_json::Value;

/// A source of view answers in the JSON shapes of docs/http-api.md: the in-process
/// [`Reader`], or the HTTP API ([`http::Client`]).
pub trait Views {
    /// One answer of `view` (`timeline`, `posts`, `counters`,
    /// `recent_followers`, `followers`, `followees`, `mutes`, `blocks`)
    /// for `user`; `likes/P`: the likers of `user`'s post P, `replies/P`
    /// its replies with user 1's flags, or `{"error": code}` when it is
    /// not there.
    fn get(
        &self,
        view: &str,
        user: u64,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Value, String>;

    /// The `timeline/why` answer: is `(author, post_id)` in `user`'s
    /// timeline, and why (not).
    fn why(&self, user: u64, author: u64, post_id: u64) -> Result<Value, String>;

    /// One post with its counts (and `viewer`'s flags), or `{"error":
    /// code}` when it is not there.
    fn post(&self, author: u64, post_id: u64, viewer: Option<u64>) -> Result<Value, String>;
}

fn field(v: &Value, k: &str) -> Result<u64, String> {
    v[k].as_u64()
        .ok_or_else(|| format!("{k} missing or not a number in {v}"))
}

/// The items of an answer as tuples of the named fields.
fn tuples(items: &[Value], fields: &[&str]) -> Result<Vec<Vec<u64>>, String> {
    items
        .iter()
        .map(|i| fields.iter().map(|f| field(i, f)).collect())
        .collect()
}

fn pairs(items: &[Value], a: &str, b: &str) -> Result<Vec<(u64, u64)>, String> {
    Ok(tuples(items, &[a, b])?
        .into_iter()
        .map(|t| (t[0], t[1]))
        .collect())
}

/// Every item of a paged view, following `next_cursor` to the end.
pub fn all_pages(
    views: &impl Views,
    view: &str,
    user: u64,
    limit: usize,
) -> Result<Vec<Value>, String> {
    collect_pages(
        |c| {
            let page = views.get(view, user, limit, c)?;
            let items = page["items"]
                .as_array()
                .ok_or_else(|| format!("no items in {page}"))?
                .clone();
            let next = match &page["next_cursor"] {
                Value::Null => None,
                Value::String(s) => Some(s.clone()),
                other => return Err(format!("next_cursor is {other}")),
            };
            Ok((items, next))
        },
        limit,
    )
}

/// Compares every view of users `1..=max_user` (and one unknown user), and
/// of every user the oracle's events name (ids from anywhere in the u64
/// range), with the oracle, walking every page of every paged view with
/// `page` items per page. Returns the first difference.
pub fn check_all(
    views: &impl Views,
    oracle: &Oracle,
    max_user: u64,
    page: usize,
) -> Result<(), String> {
    let users: std::collections::BTreeSet<u64> = (1..=max_user + 1).chain(oracle.users()).collect();
    let e = oracle.engagements();
    for u in users {
        let c = views.get("counters", u, 0, None)?;
        let got = (
            field(&c, "followers")?,
            field(&c, "followees")?,
            field(&c, "posts")?,
        );
        let want = oracle.counters(u);
        let more = (field(&c, "reposts")?, field(&c, "likes")?);
        let want_more = (oracle.reposts_counter(u), oracle.likes_counter(u));
        if field(&c, "user")? != u || got != want || more != want_more {
            return Err(format!(
                "counters of {u}: got {c}, want {want:?} and (reposts, likes) {want_more:?}"
            ));
        }
        for k in [1usize, 3, 100] {
            let list = views.get("recent_followers", u, k, None)?;
            let items = list["items"]
                .as_array()
                .ok_or_else(|| format!("no items in {list}"))?;
            let got = pairs(items, "user", "ts")?;
            let want = oracle.recent_followers(u, k);
            if got != want {
                return Err(format!(
                    "recent_followers({u}, {k}): got {got:?}, want {want:?}"
                ));
            }
        }
        let got = all_pages(views, "followers", u, page)?;
        let got = pairs(&got, "user", "ts")?;
        if got != oracle.followers(u) {
            return Err(format!(
                "followers of {u}: got {got:?}, want {:?}",
                oracle.followers(u)
            ));
        }
        let got = all_pages(views, "followees", u, page)?;
        let got = pairs(&got, "user", "ts")?;
        if got != oracle.followees(u) {
            return Err(format!(
                "followees of {u}: got {got:?}, want {:?}",
                oracle.followees(u)
            ));
        }
        let got = all_pages(views, "mutes", u, page)?;
        let got: Vec<(u64, Option<u64>, bool, bool)> = got
            .iter()
            .map(|i| {
                let in_force = i["in_force"].as_bool().unwrap_or(false);
                (
                    i["user"].as_u64().unwrap_or(0),
                    i["until"].as_u64(),
                    in_force,
                    i["notifications"] == serde_json::json!(false),
                )
            })
            .collect();
        if got != oracle.mutes_of(u) {
            return Err(format!(
                "mutes of {u}: got {got:?}, want {:?}",
                oracle.mutes_of(u)
            ));
        }
        let got = all_pages(views, "blocks", u, page)?;
        let got: Vec<u64> = got
            .iter()
            .map(|i| i["user"].as_u64().unwrap_or(0))
            .collect();
        if got != oracle.blocks_of(u) {
            return Err(format!(
                "blocks of {u}: got {got:?}, want {:?}",
                oracle.blocks_of(u)
            ));
        }
        let got = all_pages(views, "posts", u, page)?;
        let want = oracle.with_counts(&e, oracle.posts_view(u), None);
        if got != want {
            return Err(format!("posts of {u}: {}", first_difference(&got, &want)));
        }
        // Every placement of reposts with the default replies rule, and
        // the other two rules with two placements.
        let combos = Mode::ALL
            .map(|m| (m, Replies::Followed))
            .into_iter()
            .chain([(Mode::Newest, Replies::All), (Mode::First, Replies::None)]);
        // Each placement's timeline by the default rule, for the markers.
        let mut plain: Vec<(Mode, Vec<Value>)> = Vec::new();
        for (mode, replies) in combos {
            let rule = match replies {
                Replies::Followed => String::new(),
                other => format!("replies={}&", other.as_str()),
            };
            let view = match (mode, rule.is_empty()) {
                (Mode::Newest, true) => "timeline".to_string(),
                _ => format!("timeline?{rule}reposts={}", mode.param()),
            };
            let want = oracle.timeline_entries_in(u, mode, replies);
            if replies == Replies::Followed {
                plain.push((mode, want.clone()));
            }
            let want = oracle.with_counts(&e, want, Some(u));
            let got = all_pages(views, &view, u, page)?;
            if got != want {
                let diff = first_difference(&got, &want);
                return Err(format!("{view} of {u} (pages of {page}): {diff}"));
            }
            // Pages of 1,000: every page in the default placement and
            // rule, the first page in the others.
            let (got, top) = match (mode, replies) == (Mode::Newest, Replies::Followed) {
                true => (all_pages(views, &view, u, 1000)?, &want[..]),
                false => {
                    let first = first_items(&views.get(&view, u, 1000, None)?)?;
                    (first, &want[..want.len().min(1000)])
                }
            };
            if got != top {
                let diff = first_difference(&got, top);
                return Err(format!("{view} of {u} (pages of 1000): {diff}"));
            }
            // Explained: every page of a timeline up to 100 entries, the
            // first 100 entries of a longer one (what explains an entry
            // does not depend on where it is read from).
            let view = format!("timeline?explain=1&{rule}reposts={}", mode.param());
            let want = oracle.explained_timeline(u, mode, replies, 100);
            let want = oracle.with_counts(&e, want, Some(u));
            let got = match want.len() < 100 {
                true => all_pages(views, &view, u, page)?,
                false => first_items(&views.get(&view, u, 100, None)?)?,
            };
            if !oracle.same_positions(&got, &want) {
                let diff = first_difference(&got, &want);
                return Err(format!("{view} of {u} (pages of {page}): {diff}"));
            }
        }
        // Read markers, with unread counts in each placement of reposts,
        // bounded (a small bound caps) and not.
        for (mode, max) in [(Mode::Newest, 1000), (Mode::First, 2), (Mode::None, 1)] {
            let got = views.get(&format!("markers?reposts={}", mode.param()), u, max, None)?;
            let entries = plain.iter().find(|(m, _)| *m == mode).map(|(_, e)| e);
            let want = oracle.markers_answer(u, entries.ok_or("no timeline")?, max as u64);
            if !oracle.same_positions(std::slice::from_ref(&got), std::slice::from_ref(&want)) {
                return Err(format!("markers of {u} (max {max}): {got}, want {want}"));
            }
        }
        // Catch-up from the home and the notifications markers.
        let newest = plain.iter().find(|(m, _)| *m == Mode::Newest);
        let want = oracle.catch_up(u, newest.ok_or("no timeline")?.1.clone());
        catch_up_matches(
            views,
            ("catch-up", u, page),
            oracle.with_counts(&e, want, Some(u)),
        )?;
        let want = oracle.notifications_catch_up(u);
        catch_up_matches(views, ("notifications-catch-up", u, page), want)?;
        // Notifications: every page, grouped and one per act (each act
        // explained: the event that made it), and grouped with two kinds
        // (group boundaries move with the kinds).
        for (view, grouped, types) in [
            ("notifications", true, None),
            ("notifications?grouped=0&explain=1", false, None),
            (
                "notifications?types=like,follow",
                true,
                Some(&["like", "follow"][..]),
            ),
        ] {
            let got = all_pages(views, view, u, page)?;
            let explain = view.contains("explain=1");
            let want = oracle.notifications_explained(u, (grouped, types), explain);
            if !oracle.same_positions(&got, &want) {
                let diff = first_difference(&got, &want);
                return Err(format!("{view} of {u} (pages of {page}): {diff}"));
            }
        }
        // Post ids the log names (all of them in small logs; in large
        // ones every id whose answer is not "never followed"), and one it
        // does not.
        for (a, p) in oracle.why_ids(u, 200).into_iter().chain([(1, u64::MAX)]) {
            let got = views.why(u, a, p)?;
            let want = oracle.why(u, (a, p));
            if !oracle.same_positions(std::slice::from_ref(&got), std::slice::from_ref(&want)) {
                return Err(format!("why ({a}, {p}) for {u}: {got}, want {want}"));
            }
        }
    }
    posts_match(views, oracle)
}

/// Every post id the log names (and one it does not) against the oracle:
/// its counts, and the flags of every user who likes or reposted its
/// original and of user 1; the first difference.
fn posts_match(views: &impl Views, oracle: &Oracle) -> Result<(), String> {
    let e = oracle.engagements();
    for (a, p) in oracle.post_ids().into_iter().chain([(1, u64::MAX)]) {
        let plain = oracle.post_answer(&e, (a, p), None);
        let root = match plain["repost_of"].as_object() {
            Some(r) => (
                r["author"].as_u64().unwrap_or(0),
                r["post_id"].as_u64().unwrap_or(0),
            ),
            None => (a, p),
        };
        let (likes, replies) = (format!("likes/{p}"), format!("replies/{p}"));
        if plain.get("error").is_some() {
            for list in [&likes, &replies] {
                let got = views.get(list, a, 3, None)?;
                if got["error"] != plain["error"] {
                    return Err(format!("{list} of ({a}, {p}): {got}, want {plain}"));
                }
            }
        } else {
            let got = all_pages(views, &likes, a, 3)?;
            let got = pairs(&got, "user", "ts")?;
            if got != oracle.likers(root) {
                let want = oracle.likers(root);
                return Err(format!("likes of ({a}, {p}): {got:?}, want {want:?}"));
            }
            let got = all_pages(views, &replies, a, 2)?;
            let want: Vec<Value> = e
                .replies(root)
                .iter()
                .map(|&((ra, rp), ts)| serde_json::json!({"post_id": rp, "author": ra, "ts": ts}))
                .collect();
            let want = oracle.with_counts(&e, want, Some(1));
            if got != want {
                return Err(format!("replies of ({a}, {p}): {got:?}, want {want:?}"));
            }
        }
        let viewers = [None, Some(1)].into_iter().chain(e.engaged(root).map(Some));
        for viewer in viewers {
            let got = views.post(a, p, viewer)?;
            let want = oracle.post_answer(&e, (a, p), viewer);
            if got != want {
                return Err(format!(
                    "post ({a}, {p}) for {viewer:?}: {got}, want {want}"
                ));
            }
        }
    }
    Ok(())
}

/// The items of a page.
fn first_items(page: &Value) -> Result<Vec<Value>, String> {
    page["items"]
        .as_array()
        .cloned()
        .ok_or_else(|| format!("no items in {page}"))
}

/// Where two sequences first differ, with a little context, instead of
/// both whole.
pub fn first_difference<T: std::fmt::Debug + PartialEq>(got: &[T], want: &[T]) -> String {
    let i = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    let around = |v: &[T]| format!("{:?}", &v[i.saturating_sub(2)..(i + 3).min(v.len())]);
    format!(
        "{} items, want {}; first difference at {i}: got ..{} want ..{}",
        got.len(),
        want.len(),
        around(got),
        around(want)
    )
}

/// Follows `next_cursor` to the end; every page but the last must be full
/// and the last must not be empty unless it is the first.
pub fn collect_pages<T>(
    mut fetch: impl FnMut(Option<&str>) -> Result<(Vec<T>, Option<String>), String>,
    limit: usize,
) -> Result<Vec<T>, String> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let (items, next) = fetch(cursor.as_deref())?;
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

/// The oracle of a JSON-lines input (invalid lines are not events), and the
/// highest user id it names.
pub fn oracle_of(input: &str) -> (Oracle, u64) {
    let mut o = Oracle::default();
    for line in input.lines().filter(|l| !l.trim().is_empty()) {
        if let Ok(e) = codec::decode_event(Format::Json.as_u8(), line.as_bytes()) {
            o.apply(&e);
        }
    }
    let max_user = o.users().max().unwrap_or(0);
    (o, max_user)
}

/// A generated power-law log as JSON lines (deterministic): follows,
/// unfollows, posts, deletes (some of posts that do not exist), blocks,
/// mutes and hidden reposts with their undos, likes and unlikes, and
/// replies (a third of the posts) and mentions.
pub fn generated_log(users: u64, events: u64) -> String {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let zipf = |n: u64, r: u64| {
        (((n as f64).powf((r >> 11) as f64 / (1u64 << 53) as f64)) as u64).clamp(1, n)
    };
    let mut out = String::new();
    // The posts so far, for likes to name.
    let mut posted: Vec<(u64, u64)> = Vec::new();
    for i in 0..events {
        let (a, b, r) = (zipf(users, next()), zipf(users, next()), next() % 100);
        let ts = 1_700_000_000_000 + i * 7;
        if (53..=84).contains(&r) {
            posted.push((a, i + 1));
        }
        out += &match r {
            0..=44 if a != b => {
                format!(r#"{{"type":"follow","follower":{b},"followee":{a},"ts":{ts}}}"#)
            }
            45..=52 if a != b => {
                format!(r#"{{"type":"unfollow","follower":{b},"followee":{a},"ts":{ts}}}"#)
            }
            // Blocks, mutes (without an end: the oracle needs no
            // partition clock) and hidden reposts, and their undos.
            91..=94 if a != b => {
                let kind = [
                    "mute",
                    "unmute",
                    "block",
                    "unblock",
                    "hide_reposts",
                    "show_reposts",
                ][(next() % 6) as usize];
                format!(r#"{{"type":"{kind}","user":{b},"target":{a},"ts":{ts}}}"#)
            }
            // Likes and unlikes (one in four) of a post so far, or of
            // one never posted.
            85..=90 => {
                let (author, post) = match posted.is_empty() {
                    true => (a, u64::MAX - 1),
                    false => posted[(next() % posted.len() as u64) as usize],
                };
                let kind = ["like", "like", "like", "unlike"][(next() % 4) as usize];
                format!(
                    r#"{{"type":"{kind}","user":{b},"author":{author},"post_id":{post},"ts":{ts}}}"#
                )
            }
            53..=94 => {
                // A third reply to a post so far (not to themselves: a
                // post naming its own id is a dead letter); a fifth mention.
                let mut more = String::new();
                let n = posted.len() - usize::from(posted.last() == Some(&(a, i + 1)));
                if r % 3 == 0 && n > 0 {
                    let (pa, pp) = posted[(next() % n as u64) as usize];
                    more += &format!(r#","reply_to":{{"author":{pa},"post_id":{pp}}}"#);
                }
                if r % 5 == 0 && a != b {
                    more += &format!(r#","mentions":[{b}]"#);
                }
                format!(
                    r#"{{"type":"post","author":{a},"post_id":{}{more},"ts":{ts}}}"#,
                    i + 1
                )
            }
            _ => format!(
                r#"{{"type":"delete_post","author":{a},"post_id":{},"ts":{ts}}}"#,
                next() % (i + 1) + 1
            ),
        };
        out.push('\n');
    }
    out
}

/// Runs `feedlog --data DATA ARGS` with `stdin`; (exit code, stdout, stderr).
pub fn feedlog(
    data: &std::path::Path,
    args: &[&str],
    stdin: Option<&[u8]>,
) -> (i32, String, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_feedlog"))
        .arg("--data")
        .arg(data)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn feedlog");
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.unwrap_or_default().to_vec();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut pipe, &input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Total size of the files under `dir`, recursively (0 when it is missing).
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// Polls `cond` every few milliseconds until it holds; panics naming `what`
/// after `within`.
pub fn wait_until(what: &str, within: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < within, "waited {within:?} for {what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Starts `feedlog --data DATA run ARGS` (output discarded) and kills it
/// with SIGKILL once its effects log has grown by `grown` bytes: mid-run by
/// what it has done, not by a clock.
pub fn kill_run_once_grown(data: &std::path::Path, args: &[&str], grown: u64) {
    let effects = data.join("log/effects");
    let before = dir_bytes(&effects);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_feedlog"))
        .arg("--data")
        .arg(data)
        .arg("run")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let what = format!(
        "the effects log of {} to grow by {grown} bytes",
        data.display()
    );
    wait_until(&what, std::time::Duration::from_secs(120), || {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("`feedlog run` exited ({status}) before {what}");
        }
        dir_bytes(&effects) >= before + grown
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}
