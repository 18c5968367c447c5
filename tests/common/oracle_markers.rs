//! The oracle's read markers and unread counts (docs/semantics.md, "Read
//! markers"), by their definition.

use super::{At, Mode, Oracle};
use feedlog::api::query::Replies;
use feedlog::core::event::{Event, Feed, Place};
use serde_json::{json, Value};

/// One `seen` of a feed: the place it names, `force`, its time and
/// where it sits in the log.
pub type Mark = (Place, bool, u64, At);

impl Oracle {
    /// Notes a `seen` of a feed (an [`Event::Mark`]) at `at`, in its
    /// user's log order.
    pub(super) fn mark(&mut self, event: &Event, at: At) {
        if let Event::Mark {
            user,
            ts,
            feed,
            read_up_to,
            force,
        } = *event
        {
            let mark = (read_up_to, force, ts.0, at);
            self.marks.entry((user.0, feed)).or_default().push(mark);
        }
    }

    /// The `seen` that set the marker of (`user`, `feed`): of the user's
    /// events of the feed from the last `force` on (all without one), the
    /// first that names their greatest place.
    pub fn marker(&self, user: u64, feed: Feed) -> Option<Mark> {
        let marks = self.marks.get(&(user, feed))?;
        let from = marks.iter().rposition(|m| m.1).unwrap_or(0);
        let best = marks[from..].iter().map(|m| m.0).max()?;
        marks[from..].iter().find(|m| m.0 == best).copied()
    }

    /// `GET /v1/users/{user}/markers?max=&reposts=&replies=` as the API
    /// must answer it: each feed's marker, and of `entries` (the home
    /// timeline in the mode and rule asked, as `timeline_entries_in` gives
    /// it) those placed above it, at most `max`.
    pub fn markers_answer(&self, user: u64, entries: &[Value], max: u64) -> Value {
        let feeds: Vec<Value> = Feed::ALL
            .into_iter()
            .map(|feed| {
                let m = self.marker(user, feed);
                let (unread, capped) = match feed {
                    Feed::Home => {
                        let n = unread_in(entries, m.map(|m| m.0));
                        (json!(n.min(max)), n > max)
                    }
                    Feed::Notifications => {
                        let groups = self.notifications(user, true, None);
                        let places: Vec<Value> =
                            groups.iter().map(|g| g["place"].clone()).collect();
                        let n = unread_in(&places, m.map(|m| m.0));
                        (json!(n.min(max)), n > max)
                    }
                };
                json!({
                    "feed": feed.as_str(),
                    "read_up_to": m.map(|(p, ..)| json!({
                        "ts": p.ts.0, "post_id": p.post_id.0, "author": p.author.0,
                    })),
                    "since": m.map(|m| m.2),
                    "event": m.map(|m| json!({"partition": m.3.partition, "offset": m.3.offset})),
                    "unread": unread,
                    "capped": capped,
                })
            })
            .collect();
        json!({"user": user, "feeds": feeds})
    }

    /// `timeline?after=marker` paged up to the top: of `entries` (`user`'s
    /// home timeline in the default modes), those above the home marker,
    /// oldest first.
    pub fn catch_up(&self, user: u64, mut entries: Vec<Value>) -> Vec<Value> {
        let m = self.marker(user, Feed::Home).map(|m| m.0);
        let m = m.map_or((0, 0, 0), |p| (p.ts.0, p.post_id.0, p.author.0));
        entries.retain(|e| {
            let f = |k: &str| e[k].as_u64().unwrap_or(0);
            (f("ts"), f("post_id"), f("author")) > m
        });
        entries.reverse();
        entries
    }

    /// `notifications?after=marker` paged up to the top: `user`'s groups
    /// placed above the notifications marker, oldest first.
    pub fn notifications_catch_up(&self, user: u64) -> Vec<Value> {
        let m = self.marker(user, Feed::Notifications).map(|m| m.0);
        let m = m.map_or((0, 0, 0), |p| (p.ts.0, p.post_id.0, p.author.0));
        let mut groups = self.notifications_explained(user, (true, None), false);
        groups.retain(|g| {
            let f = |k: &str| g["place"][k].as_u64().unwrap_or(0);
            (f("ts"), f("post_id"), f("author")) > m
        });
        groups.reverse();
        groups
    }

    /// The places a check asks markers at for `user`: below everything,
    /// at and around each entry of the home timeline.
    pub fn marker_places(&self, user: u64) -> Vec<Place> {
        let mut out = vec![Place::default()];
        for e in self.timeline_entries_in(user, Mode::Newest, Replies::Followed) {
            let f = |k: &str| e[k].as_u64().unwrap_or(0);
            let p = Place {
                ts: feedlog::core::event::Ts(f("ts")),
                post_id: feedlog::core::event::PostId(f("post_id")),
                author: feedlog::UserId(f("author")),
            };
            out.push(p);
        }
        out
    }
}

/// How many of `entries` (a home timeline) are placed above `marker` (all
/// of them without one).
pub fn unread_in(entries: &[Value], marker: Option<Place>) -> u64 {
    let place = |e: &Value| {
        let f = |k: &str| e[k].as_u64().unwrap_or(0);
        (f("ts"), f("post_id"), f("author"))
    };
    let m = marker.map_or((0, 0, 0), |p| (p.ts.0, p.post_id.0, p.author.0));
    entries.iter().filter(|e| place(e) > m).count() as u64
}
