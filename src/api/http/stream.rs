//! The live timeline stream (server-sent events).

use super::errors::ApiError;
use super::handlers::read;
use super::params::{params, user_id, Params};
use super::Api;
use crate::api::query::PostItem;
use crate::core::event::{PostId, Ts, UserId};
use crate::core::keys::TimelineKey;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::collections::{HashMap, HashSet, VecDeque};
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

/// Entries a stream remembers having sent, newest last: a retraction of
/// one of them is announced (`event: delete`). About a page: each wake
/// reads the timeline down to the oldest of them.
const TRACKED: usize = 200;

/// The shortest time between two reads of one stream while commits come
/// faster: a stream reads at most this often, however busy the processor.
/// It is the old poll interval: a busy processor costs as many reads as
/// polling did (each walking down to the oldest tracked entry, up to one
/// page more), a quiet one none, and a commit after a pause is read at once.
const MIN_GAP: Duration = Duration::from_millis(100);

/// The longest a stream waits for a commit signal before it reads anyway.
const MAX_WAIT: Duration = Duration::from_secs(5);

/// What one stream holds between wakes.
struct Stream {
    api: Arc<Api>,
    user: UserId,
    /// The newest entry sent (or on the timeline when it opened; else
    /// [`BOTTOM`]).
    newest: TimelineKey,
    /// The newest entry on the timeline when the stream opened (or the one
    /// it resumed after): only entries above it are sent.
    opened: TimelineKey,
    /// Entries sent, oldest first, at most [`TRACKED`].
    sent: VecDeque<Tracked>,
    /// Entries announced as deleted, oldest first, at most [`TRACKED`]: one
    /// may come back (an unmute, an unblock) below the entries still sent,
    /// so reads go down to them too.
    gone: VecDeque<TimelineKey>,
    /// Events ready to go, in order.
    queue: VecDeque<SseEvent>,
    /// Commits of the processor in this process, if it runs here.
    commits: Option<tokio::sync::watch::Receiver<u64>>,
    last_read: Option<Instant>,
}

impl Stream {
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
            None => tokio::time::sleep(self.api.cfg.stream_poll).await,
        }
    }

    /// Reads the timeline above the oldest entry sent (or the newest known)
    /// and queues what is new, what moved and what was retracted.
    async fn read(&mut self) -> Result<(), ApiError> {
        self.last_read = Some(Instant::now());
        let newest = self.newest;
        // The oldest place sent: a moved entry can sit below the first sent,
        // and an entry announced as deleted may come back.
        let floor = self
            .sent
            .iter()
            .map(|s| s.0)
            .chain(self.gone.iter().copied())
            .max();
        let (mut items, complete) = self.walk(floor).await?;
        let json = self.api.cfg.string_ids;
        // Retractions and moves first: a tracked entry the walk did not meet
        // where it was sent. Only when the walk reached its floor, so a cut
        // walk announces nothing.
        if complete && floor.is_some() {
            let (_, missing) = placed(&self.sent, &items);
            // An entry that moved down sits at or above its post's own
            // time (the original is an appearance of it), unless its
            // author is no longer followed: walk down to the oldest such
            // time once, only when something is missing.
            let deep = missing.iter().map(|&(_, post_ts)| TimelineKey {
                ts: post_ts,
                post_id: PostId(0),
                author: UserId(0),
            });
            if let Some(deep) = deep.max().filter(|d| Some(*d) > floor) {
                if let (more, true) = self.walk(Some(deep)).await? {
                    items = more;
                }
            }
            let (at, _) = placed(&self.sent, &items);
            let present: HashSet<TimelineKey> = items.iter().map(key_of).collect();
            let mut moved = Vec::new();
            let gone = &mut self.gone;
            self.sent.retain(|&(k, _)| {
                if present.contains(&k) {
                    return true;
                }
                match at.get(&(k.post_id, k.author)) {
                    // Moved up (a new repost): sent below as a new entry.
                    Some(i) if key_of(i) < newest => {}
                    // Moved down (a repost taken back, a reposter
                    // unfollowed): sent now at its new place, without an id
                    // (resuming goes by the newest entry sent).
                    Some(i) => moved.push((*i).clone()),
                    None => {
                        self.queue.push_back(
                            SseEvent::default()
                                .event("delete")
                                .data(entry_json(&k, json)),
                        );
                        gone.push_back(k);
                    }
                }
                false
            });
            for i in moved {
                self.queue
                    .push_back(SseEvent::default().event("entry").data(item_json(&i, json)));
                self.sent.push_back(tracked(&i));
            }
        }
        // New entries: above where the stream opened and not sent yet,
        // oldest first. One newer than every entry sent carries its id; one
        // that became visible after a newer one was sent (its partition
        // applied it later) is sent without (resuming goes by the newest).
        let sent: HashSet<(PostId, UserId)> = self
            .sent
            .iter()
            .map(|(k, _)| (k.post_id, k.author))
            .collect();
        let opened = self.opened;
        let fresh = items.iter().rev().filter(|i| {
            key_of(i) < opened && !sent.contains(&(PostId(i.post_id), UserId(i.author)))
        });
        for i in fresh {
            let k = key_of(i);
            self.gone.retain(|g| *g != k);
            let mut event = SseEvent::default().event("entry");
            if k < self.newest {
                self.newest = k;
                event = event.id(event_id(&k));
            }
            self.queue.push_back(event.data(item_json(i, json)));
            self.sent.push_back(tracked(i));
        }
        while self.sent.len() > TRACKED {
            self.sent.pop_front();
        }
        while self.gone.len() > TRACKED {
            self.gone.pop_front();
        }
        Ok(())
    }

    /// The timeline down to `floor` (with it) or above the newest known,
    /// and whether the walk got there.
    async fn walk(&self, floor: Option<TimelineKey>) -> Result<(Vec<PostItem>, bool), ApiError> {
        let (user, newest) = (self.user, self.newest);
        read(&self.api, move |r| match floor {
            Some(f) => r.timeline_down_to(user, f, MOST),
            None => r.timeline_above(user, newest, MOST),
        })
        .await
    }
}

/// A sent entry as the stream tracks it: its place and its post's own time.
type Tracked = (TimelineKey, Ts);

/// Walked entries by their post.
type ByPost<'a> = HashMap<(PostId, UserId), &'a PostItem>;

/// A sent entry as the stream tracks it.
fn tracked(i: &PostItem) -> Tracked {
    (key_of(i), Ts(i.post_ts.unwrap_or(i.ts)))
}

/// The walked entries by post, and the tracked entries found neither at
/// their place nor elsewhere in `items`.
fn placed<'a>(sent: &VecDeque<Tracked>, items: &'a [PostItem]) -> (ByPost<'a>, Vec<Tracked>) {
    let at: ByPost<'_> = items
        .iter()
        .map(|i| ((PostId(i.post_id), UserId(i.author)), i))
        .collect();
    let missing = sent
        .iter()
        .filter(|(k, _)| !at.contains_key(&(k.post_id, k.author)))
        .copied()
        .collect();
    (at, missing)
}

/// The most entries one read of the stream walks
/// ([`crate::api::query::Reader::timeline_above`]).
const MOST: usize = 10_000;

/// Below every entry (ids start at 1): what a stream opened on an empty
/// timeline has seen.
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
    let body = serde_json::to_vec(i).unwrap_or_default();
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

/// Server-sent events: each timeline entry newer than every entry already
/// on the timeline when the stream opened, oldest first, as it becomes
/// visible (`event: entry`, `id: ts:post_id:author`, data the entry as a
/// timeline page lists it), and `event: delete` (data
/// `{"post_id","author","ts"}`, no id) when one of the last [`TRACKED`]
/// entries it sent leaves the timeline (a deleted post, an unfollow). An
/// entry that moves (a new repost moves it up, a repost taken back down) is
/// sent again at its new place, without a `delete`: a move down carries no
/// id. A client that reconnects with
/// `Last-Event-ID` (browsers do it themselves) first gets every entry newer
/// than that one, up to the newest 10,000, then the live ones; an id it
/// cannot read is ignored. The stream opens with a `subscribed` comment.
/// It reads when the processor in this process commits (at most every
/// [`MIN_GAP`]), or every `stream_poll` when the processor runs elsewhere.
pub(super) async fn timeline_stream(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    q: Params,
) -> Result<Response, ApiError> {
    let user = user_id(&id)?;
    params(q, &[])?;
    // An id it cannot read starts the stream fresh: an error status would
    // make a browser's EventSource stop reconnecting for good.
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_event_id);
    // Subscribed before the first read, so no commit after it is missed.
    let commits = api.node.commits();
    // A fresh stream starts above the newest entry; a resumed one catches
    // up at its first read.
    let newest = match resume {
        Some(k) => k,
        None => {
            let top = read(&api, move |r| r.timeline(user, 1, None)).await?;
            top.items.first().map(key_of).unwrap_or(BOTTOM)
        }
    };
    let mut s = Stream {
        api,
        user,
        newest,
        opened: newest,
        sent: VecDeque::new(),
        gone: VecDeque::new(),
        queue: VecDeque::new(),
        commits,
        last_read: None,
    };
    let opened = SseEvent::default().comment("subscribed");
    s.queue.push_back(opened);
    let mut catch_up = resume.is_some();
    let stream = futures_util::stream::unfold(s, move |mut s| async move {
        loop {
            if let Some(ev) = s.queue.pop_front() {
                return Some((Ok::<_, std::convert::Infallible>(ev), s));
            }
            if !std::mem::take(&mut catch_up) {
                s.wait().await;
            }
            if let Err(e) = s.read().await {
                let ev = SseEvent::default().event("error").data(e.message);
                return Some((Ok(ev), s));
            }
        }
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}
