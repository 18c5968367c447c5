//! The live timeline stream (server-sent events), and what every stream shares: when it reads, its unread count.

use super::errors::ApiError;
use super::handlers::read;
use super::params::{limit, params, user_id, Params};
use super::Api;
use crate::api::query::{Page, PostItem, QueryError, Reader};
use crate::core::event::{Feed, PostId, Ts, UserId};
use crate::core::keys::TimelineKey;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An entry's event id: `ts:post_id:author`, its place in timeline order.
fn event_id(k: &TimelineKey) -> String {
    format!("{}:{}:{}", k.ts, k.post_id, k.author)
}

/// The timeline key a `Last-Event-ID` names.
fn parse_event_id(id: &str) -> Option<TimelineKey> {
    let mut parts = id.trim().split(':').map(|p| p.parse::<u64>().ok());
    let key = TimelineKey {
        ts: Ts(parts.next()??),
        post_id: PostId(parts.next()??),
        author: UserId(parts.next()??),
    };
    parts.next().is_none().then_some(key)
}

/// The shortest time between two reads of one stream while commits come
/// faster: a stream reads at most this often, however busy the processor.
/// It is the old poll interval: a busy processor costs as many reads as
/// polling did (each one first page), a quiet one none, and a commit after
/// a pause is read at once.
const MIN_GAP: Duration = Duration::from_millis(100);

/// The longest a stream waits for a commit signal before it reads anyway.
const MAX_WAIT: Duration = Duration::from_secs(5);

/// When a stream reads next: on the processor's commits, or by polling.
pub(super) struct Wake {
    /// Commits of the processor in this process, if it runs here.
    commits: Option<tokio::sync::watch::Receiver<u64>>,
    last_read: Option<Instant>,
    poll: Duration,
}

impl Wake {
    /// Subscribed now: a stream makes it before its first read, so no
    /// commit after that read is missed.
    pub(super) fn new(api: &Api) -> Wake {
        Wake {
            commits: api.node.commits(),
            last_read: None,
            poll: api.cfg.stream_poll,
        }
    }

    /// Waits until there may be something new: a commit (at most
    /// [`MIN_GAP`] after the last read), or the poll interval when the
    /// processor runs elsewhere.
    async fn wait(&mut self) {
        let since = self.last_read.map(|t| t.elapsed());
        match &mut self.commits {
            Some(rx) => {
                if let Ok(Err(_)) = tokio::time::timeout(MAX_WAIT, rx.changed()).await {
                    // The processor is gone (shutting down): poll.
                    self.commits = None;
                }
                if let Some(gap) = since.and_then(|s| MIN_GAP.checked_sub(s)) {
                    tokio::time::sleep(gap).await;
                }
            }
            None => tokio::time::sleep(self.poll).await,
        }
    }
}

/// A feed's unread count as its stream last sent it (`event: unread`).
pub(super) struct Unread {
    feed: Feed,
    /// The count's bound (`max`).
    max: u64,
    sent: Option<(u64, bool)>,
}

impl Unread {
    /// Nothing sent yet: the first count goes out.
    pub(super) fn new(feed: Feed, max: u64) -> Unread {
        Unread {
            feed,
            max,
            sent: None,
        }
    }

    /// What to read the count with, in a stream's read.
    pub(super) fn asks(&self) -> (Feed, u64) {
        (self.feed, self.max)
    }

    /// `event: unread` (data `{"feed","unread","capped"}`) when `now`
    /// differs from the count sent last.
    pub(super) fn event(&mut self, now: (u64, bool)) -> Option<SseEvent> {
        if self.sent == Some(now) {
            return None;
        }
        self.sent = Some(now);
        let (feed, (unread, capped)) = (self.feed.as_str(), now);
        let data = format!(r#"{{"feed":"{feed}","unread":{unread},"capped":{capped}}}"#);
        Some(SseEvent::default().event("unread").data(data))
    }
}

/// What a stream does at its first read and at each later one: both
/// queue the events that follow from what they read.
pub(super) trait Feeder: Send + 'static {
    /// The first read.
    fn open(&mut self) -> impl std::future::Future<Output = Result<(), ApiError>> + Send;
    /// A read after a wake.
    fn read(&mut self) -> impl std::future::Future<Output = Result<(), ApiError>> + Send;
    /// Events ready to go, in order.
    fn queue(&mut self) -> &mut VecDeque<SseEvent>;
    /// When it reads next.
    fn wake(&mut self) -> &mut Wake;
}

/// The server-sent events of `s`: a `subscribed` comment, what its first
/// read queues, then what each read after a wake queues; a failed read
/// sends `event: error` with the reason, and the stream goes on.
pub(super) fn respond<S: Feeder>(mut s: S) -> Response {
    s.queue()
        .push_back(SseEvent::default().comment("subscribed"));
    let stream = futures_util::stream::unfold((s, true), |(mut s, mut opening)| async move {
        loop {
            if let Some(ev) = s.queue().pop_front() {
                return Some((Ok::<_, std::convert::Infallible>(ev), (s, opening)));
            }
            let first = std::mem::take(&mut opening);
            if !first {
                s.wake().wait().await;
            }
            s.wake().last_read = Some(Instant::now());
            let read = match first {
                true => s.open().await,
                false => s.read().await,
            };
            if let Err(e) = read {
                let ev = SseEvent::default().event("error").data(e.message);
                return Some((Ok(ev), (s, opening)));
            }
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// What one timeline stream holds between wakes.
struct Stream {
    api: Arc<Api>,
    user: UserId,
    /// The window: how many of the timeline's newest entries the client's
    /// copy holds.
    limit: usize,
    /// Where a reconnecting client resumes (its `Last-Event-ID`), until
    /// the first read.
    resume: Option<TimelineKey>,
    /// The newest entry sent with an `id` (else [`BOTTOM`]): only a newer
    /// one carries an id, so a reconnect resumes after the newest.
    newest: TimelineKey,
    /// The client's copy as of the last read: the timeline's first page of
    /// `limit`, newest first.
    window: Vec<PostItem>,
    /// Events ready to go, in order.
    queue: VecDeque<SseEvent>,
    wake: Wake,
    /// The home timeline's unread count.
    unread: Unread,
}

impl Feeder for Stream {
    async fn open(&mut self) -> Result<(), ApiError> {
        let resume = self.resume.take();
        self.open_at(resume).await
    }

    async fn read(&mut self) -> Result<(), ApiError> {
        self.read_changes().await
    }

    fn queue(&mut self) -> &mut VecDeque<SseEvent> {
        &mut self.queue
    }

    fn wake(&mut self) -> &mut Wake {
        &mut self.wake
    }
}

impl Stream {
    /// The first read: the entries newer than `resume`, oldest first, when
    /// the client resumes, then the window as a page.
    async fn open_at(&mut self, resume: Option<TimelineKey>) -> Result<(), ApiError> {
        let (user, limit) = (self.user, self.limit);
        let json = self.api.cfg.string_ids;
        if let Some(k) = resume {
            let (missed, _) = read(&self.api, move |r| {
                let (mut missed, more) = r.timeline_above(user, k, MOST)?;
                r.decorate(&mut missed, Some(user))?;
                Ok((missed, more))
            })
            .await?;
            for i in missed.iter().rev() {
                let event = self.entry(i, json);
                self.queue.push_back(event);
            }
        }
        let unread = self.unread.asks();
        let (page, now) = read(&self.api, move |r| first_page(r, user, limit, unread)).await?;
        self.window = page.items;
        let event = self.page(page.next_cursor, json);
        self.queue.push_back(event);
        self.queue.extend(self.unread.event(now));
        Ok(())
    }

    /// Reads the timeline's first page of the window's size and queues
    /// what turns the client's copy into it, then the unread count if it
    /// changed.
    async fn read_changes(&mut self) -> Result<(), ApiError> {
        let (user, limit, unread) = (self.user, self.limit, self.unread.asks());
        let (page, now) = read(&self.api, move |r| first_page(r, user, limit, unread)).await?;
        let json = self.api.cfg.string_ids;
        for change in changes(&self.window, &page.items, limit) {
            let event = match change {
                Change::Delete(k) => SseEvent::default()
                    .event("delete")
                    .data(entry_json(&k, json)),
                Change::Entry(i) => self.entry(i, json),
            };
            self.queue.push_back(event);
        }
        self.window = page.items;
        self.queue.extend(self.unread.event(now));
        Ok(())
    }

    /// `event: entry` for `i`, with its id when it is newer than every
    /// entry sent with one.
    fn entry(&mut self, i: &PostItem, string_ids: bool) -> SseEvent {
        let k = key_of(i);
        let mut event = SseEvent::default().event("entry");
        if k < self.newest {
            self.newest = k;
            event = event.id(event_id(&k));
        }
        event.data(item_json(i, string_ids))
    }

    /// `event: page` with the window as a timeline page lists it (items and
    /// `next_cursor`, where older pages go on), the copy a client starts
    /// from: its id is its newest entry's when that is newer than every
    /// entry sent with one.
    fn page(&mut self, next_cursor: Option<String>, string_ids: bool) -> SseEvent {
        let body = serde_json::json!({ "items": self.window, "next_cursor": next_cursor });
        let mut event = SseEvent::default().event("page");
        if let Some(k) = self.window.first().map(key_of).filter(|k| *k < self.newest) {
            self.newest = k;
            event = event.id(event_id(&k));
        }
        event.data(data_json(&body, string_ids))
    }
}

/// The timeline's first page of `limit` with each entry's counts and the
/// reader's flags, as `GET .../timeline` gives it, and the unread count
/// `unread` asks for.
fn first_page(
    r: &Reader,
    user: UserId,
    limit: usize,
    (feed, max): (Feed, u64),
) -> Result<(Page<PostItem>, (u64, bool)), QueryError> {
    let mut page = r.timeline(user, limit, None)?;
    r.decorate(&mut page.items, Some(user))?;
    Ok((page, r.unread(user, feed, max)?))
}

/// One step of a client's copy towards the timeline's first page.
#[derive(Debug, Clone, PartialEq)]
enum Change<'a> {
    /// The entry of this post is this one now: replaces the copy's entry of
    /// the same post (`post_id`, `author`), wherever it was, or joins it.
    Entry(&'a PostItem),
    /// The entry of this post leaves the copy.
    Delete(TimelineKey),
}

/// What turns `old` into `new`, both the timeline's first page of `limit`
/// (newest first) at two reads, for a client that applies each change and
/// then keeps its `limit` newest entries: the entries of `old` that are
/// not in `new` and would not fall below `new`'s last by themselves leave
/// (deletes first), then every entry of `new` that `old` does not hold as
/// it is, oldest first.
fn changes<'a>(old: &[PostItem], new: &'a [PostItem], limit: usize) -> Vec<Change<'a>> {
    let post = |i: &PostItem| (PostId(i.post_id), UserId(i.author));
    let now: HashMap<_, _> = new.iter().map(|i| (post(i), i)).collect();
    // Below the new window's last entry when it is full, the client's
    // trim takes an entry out.
    let floor = (new.len() >= limit)
        .then(|| new.last().map(key_of))
        .flatten();
    let mut out: Vec<Change<'a>> = old
        .iter()
        .filter(|i| !now.contains_key(&post(i)))
        .map(key_of)
        .filter(|k| floor.is_none_or(|f| *k < f))
        .map(Change::Delete)
        .collect();
    let was: HashMap<_, _> = old.iter().map(|i| (post(i), i)).collect();
    out.extend(
        new.iter()
            .rev()
            .filter(|i| was.get(&post(i)).is_none_or(|o| *o != *i))
            .map(Change::Entry),
    );
    out
}

/// The most entries a resumed stream sends before its page
/// ([`crate::api::query::Reader::timeline_above`]).
const MOST: usize = 10_000;

/// Below every entry (ids start at 1): the newest entry a fresh stream
/// has sent.
const BOTTOM: TimelineKey = TimelineKey {
    ts: Ts(0),
    post_id: PostId(0),
    author: UserId(0),
};

/// An entry's key.
fn key_of(i: &PostItem) -> TimelineKey {
    TimelineKey {
        ts: Ts(i.ts),
        post_id: PostId(i.post_id),
        author: UserId(i.author),
    }
}

/// An entry as the stream's data: the entry as a timeline page lists it
/// (`{"post_id","author","ts"}`, and with reposts `post_ts`, `reposted_by`,
/// `reposters`).
fn item_json(i: &PostItem, string_ids: bool) -> String {
    data_json(i, string_ids)
}

/// `value` as an event's data, its ids strings with `string_ids`.
pub(super) fn data_json(value: &impl serde::Serialize, string_ids: bool) -> String {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let body = match string_ids {
        true => super::ids::stringify(&body).unwrap_or(body),
        false => body,
    };
    String::from_utf8(body).unwrap_or_default()
}

/// A retracted entry as the stream's data: `{"post_id","author","ts"}`.
fn entry_json(k: &TimelineKey, string_ids: bool) -> String {
    let (post_id, author, ts) = (k.post_id, k.author, k.ts);
    if string_ids {
        format!(r#"{{"post_id":"{post_id}","author":"{author}","ts":{ts}}}"#)
    } else {
        format!(r#"{{"post_id":{post_id},"author":{author},"ts":{ts}}}"#)
    }
}

/// Server-sent events that keep a client's copy of the timeline's first
/// page of `limit` (default 20) equal to the timeline: `event: page` first
/// (the page, as `GET .../timeline?limit=` gives its items), then after
/// each read the changes, deletes first (`event: delete`, data
/// `{"post_id","author","ts"}`), then entries oldest first (`event: entry`,
/// data the entry as a timeline page lists it). A client replaces the entry
/// of the same post (`post_id`, `author`) with an `entry` or adds it,
/// removes it on a `delete`, and keeps its `limit` newest entries: its copy
/// is then the timeline's first page after every read — each entry with its
/// counts and the reader's flags, so an entry whose counts or flags changed
/// comes again (without an id: it is not newer). An entry or page
/// newer than every one sent with an id carries `id: ts:post_id:author`; a
/// client that reconnects with `Last-Event-ID` (browsers do it themselves)
/// first gets every entry newer than that one, up to the newest 10,000,
/// oldest first, then a page again; an id it cannot read is ignored. The
/// stream opens with a `subscribed` comment. It reads when the processor in
/// this process commits (at most every [`MIN_GAP`]), or every
/// `stream_poll` when the processor runs elsewhere.
pub(super) async fn timeline_stream(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    q: Params,
) -> Result<Response, ApiError> {
    let user = user_id(&id)?;
    let p = params(q, &crate::api::reads::STREAM)?;
    let limit = limit(&api, &p, crate::api::query::DEFAULT_LIMIT)?;
    // An id it cannot read starts the stream fresh: an error status would
    // make a browser's EventSource stop reconnecting for good.
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_event_id);
    let max = p.stream_max_unread()?;
    let s = Stream {
        wake: Wake::new(&api),
        api,
        user,
        limit,
        resume,
        newest: resume.unwrap_or(BOTTOM),
        window: Vec::new(),
        queue: VecDeque::new(),
        unread: Unread::new(Feed::Home, max),
    };
    Ok(respond(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A client's copy after `changes`: each entry replaces its post's
    /// entry or joins, each delete removes it, then the `limit` newest stay.
    fn apply(copy: &[PostItem], changes: &[Change<'_>], limit: usize) -> Vec<PostItem> {
        let mut copy = copy.to_vec();
        let same = |a: &PostItem, b: &PostItem| (a.post_id, a.author) == (b.post_id, b.author);
        for c in changes {
            match c {
                Change::Entry(i) => {
                    copy.retain(|x| !same(x, i));
                    copy.push((*i).clone());
                }
                Change::Delete(k) => {
                    copy.retain(|x| (x.post_id, x.author) != (k.post_id.0, k.author.0))
                }
            }
            copy.sort_by_key(key_of);
            copy.truncate(limit);
        }
        copy
    }

    /// A timeline's first page of `limit`: one entry per post (the pairs
    /// are `(post, ts)`; a post's reposter list stands for content that
    /// changes in place), newest first.
    fn page(posts: &[(u8, u8, bool)], limit: usize) -> Vec<PostItem> {
        let mut items: Vec<PostItem> = posts
            .iter()
            .map(|&(post, ts, reposted)| PostItem {
                reposters: reposted.then_some(7),
                ..PostItem::plain(
                    u64::from(post % 12) + 1,
                    u64::from(post % 3) + 1,
                    u64::from(ts),
                )
            })
            .collect();
        items.sort_by_key(key_of);
        let mut seen = std::collections::HashSet::new();
        items.retain(|i| seen.insert((i.post_id, i.author)));
        items.truncate(limit);
        items
    }

    proptest! {
        // Proves a client that holds one read's first page and applies the stream's changes (then keeps its limit newest) holds the next read's first page: posts appear, leave, move up or down, change in place, come back below the newest, and fall off the bottom.
        #[test]
        fn the_changes_turn_one_first_page_into_the_next(
            before in proptest::collection::vec((any::<u8>(), 0u8..30, any::<bool>()), 0..20),
            after in proptest::collection::vec((any::<u8>(), 0u8..30, any::<bool>()), 0..20),
            limit in 1usize..8,
        ) {
            let (old, new) = (page(&before, limit), page(&after, limit));
            let changes = changes(&old, &new, limit);
            prop_assert_eq!(apply(&old, &changes, limit), new);
        }
    }

    // Proves an entry that only falls below a full window is not deleted (the client's own trim takes it out), and one that leaves the timeline is.
    #[test]
    fn only_entries_that_leave_are_deleted() {
        let item = |post, ts| PostItem::plain(post, 1, ts);
        let old = vec![item(2, 20), item(1, 10)];
        let pushed = vec![item(3, 30), item(2, 20)];
        assert_eq!(changes(&old, &pushed, 2), vec![Change::Entry(&pushed[0])]);
        let left = vec![item(1, 10)];
        let k = key_of(&old[0]);
        assert_eq!(changes(&old, &left, 2), vec![Change::Delete(k)]);
    }
}
