//! The JSON interchange format of events (docs/events.md, "The JSON format"): one object
//! per record, parsed field by field so that each error names its field.

use super::DecodeError;
use crate::event::{
    Event, EventKind, Feed, FilterChange, Place, PostId, Ts, UserId, SCHEMA_VERSION,
};
use serde::Deserialize;

/// A JSON event as written: every field kept as JSON, so a field the kind
/// does not use is ignored whatever its type (unknown fields are ignored),
/// and only the fields the kind needs are type-checked.
#[derive(Deserialize)]
struct RawEvent {
    #[serde(rename = "type")]
    kind: Option<serde_json::Value>,
    follower: Option<serde_json::Value>,
    followee: Option<serde_json::Value>,
    author: Option<serde_json::Value>,
    post_id: Option<serde_json::Value>,
    of_author: Option<serde_json::Value>,
    of_post_id: Option<serde_json::Value>,
    user: Option<serde_json::Value>,
    target: Option<serde_json::Value>,
    until: Option<serde_json::Value>,
    notifications: Option<serde_json::Value>,
    reply_to: Option<serde_json::Value>,
    mentions: Option<serde_json::Value>,
    feed: Option<serde_json::Value>,
    read_up_to: Option<serde_json::Value>,
    force: Option<serde_json::Value>,
    ts: Option<serde_json::Value>,
    v: Option<serde_json::Value>,
}

/// Whether a field is a time (`ts`, a mute's `until`, a place's
/// `read_up_to.ts`), not an id.
fn is_time(field: &str) -> bool {
    matches!(field, "ts" | "until" | "read_up_to.ts")
}

/// A field the event kind uses: absent, or a whole number that fits u64;
/// an id (every field but the times) may also be a string of its decimal digits
/// (`"42"`, as Mastodon and Twitter send ids: JavaScript cannot hold ids
/// above 2^53 as numbers), read as the same id.
fn number(
    v: Option<serde_json::Value>,
    kind: &'static str,
    field: &'static str,
) -> Result<u64, DecodeError> {
    match v {
        None | Some(serde_json::Value::Null) => Err(DecodeError::MissingField { kind, field }),
        Some(serde_json::Value::Number(n)) if n.is_u64() => Ok(n.as_u64().unwrap_or_default()),
        Some(serde_json::Value::String(s)) if !is_time(field) && decimal_id(&s).is_some() => {
            Ok(decimal_id(&s).unwrap_or_default())
        }
        Some(other) => Err(DecodeError::BadField {
            kind,
            field,
            // Ids start at 1 (`InvalidEvent::ZeroId`); a time at 0.
            lowest: u64::from(!is_time(field)),
            got: other.to_string(),
        }),
    }
}

/// An id written as a string: decimal digits only, no sign, no leading
/// zero, at most u64::MAX (so each id has one written form).
fn decimal_id(s: &str) -> Option<u64> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

/// A post's `reply_to` (`{"author": A, "post_id": P}`, or absent or
/// null) and `mentions` (an array of ids, or absent or null).
#[allow(clippy::type_complexity)]
fn addressed(
    reply_to: Option<serde_json::Value>,
    mentions: Option<serde_json::Value>,
) -> Result<(Option<(UserId, PostId)>, Vec<UserId>), DecodeError> {
    use serde_json::Value;
    let shape = |field, expected, got: &Value| DecodeError::BadShape {
        kind: "post",
        field,
        expected,
        got: got.to_string(),
    };
    let reply_to = match reply_to {
        None | Some(Value::Null) => None,
        Some(Value::Object(mut o)) => Some((
            UserId(number(o.remove("author"), "post", "reply_to.author")?),
            PostId(number(o.remove("post_id"), "post", "reply_to.post_id")?),
        )),
        Some(other) => {
            let expected = r#"an object {"author": id, "post_id": id}"#;
            return Err(shape("reply_to", expected, &other));
        }
    };
    let mentions = match mentions {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ids)) => ids
            .into_iter()
            .map(|id| number(Some(id), "post", "mentions").map(UserId))
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(shape("mentions", "an array of user ids", &other)),
    };
    Ok((reply_to, mentions))
}

/// A `seen`'s read marker: `feed` (`"home"` or `"notifications"`),
/// `read_up_to` (`{"ts": T, "post_id": P, "author": A}`) and `force` (a
/// boolean), all absent or null for a `seen` that is activity only.
/// `read_up_to` or `force` without `feed`, or `feed` without
/// `read_up_to`, is a missing field.
fn marker(
    feed: Option<serde_json::Value>,
    read_up_to: Option<serde_json::Value>,
    force: Option<serde_json::Value>,
) -> Result<Option<(Feed, Place, bool)>, DecodeError> {
    use serde_json::Value;
    let shape = |field, expected, got: &Value| DecodeError::BadShape {
        kind: "seen",
        field,
        expected,
        got: got.to_string(),
    };
    let absent = |v: &Option<Value>| matches!(v, None | Some(Value::Null));
    let feed = match feed {
        None | Some(Value::Null) => {
            let given = !absent(&read_up_to) || !absent(&force);
            return match given {
                true => Err(DecodeError::MissingField {
                    kind: "seen",
                    field: "feed",
                }),
                false => Ok(None),
            };
        }
        Some(Value::String(s)) if Feed::parse(&s).is_some() => Feed::parse(&s),
        Some(other) => return Err(shape("feed", r#""home" or "notifications""#, &other)),
    };
    let place = match read_up_to {
        None | Some(Value::Null) => {
            return Err(DecodeError::MissingField {
                kind: "seen",
                field: "read_up_to",
            })
        }
        Some(Value::Object(mut o)) => Place {
            ts: Ts(number(o.remove("ts"), "seen", "read_up_to.ts")?),
            post_id: PostId(number(o.remove("post_id"), "seen", "read_up_to.post_id")?),
            author: UserId(number(o.remove("author"), "seen", "read_up_to.author")?),
        },
        Some(other) => {
            let expected = r#"an object {"ts": ms, "post_id": id, "author": id}"#;
            return Err(shape("read_up_to", expected, &other));
        }
    };
    let force = match force {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(other) => return Err(shape("force", "true or false", &other)),
    };
    Ok(feed.map(|f| (f, place, force)))
}

/// Parses one JSON event (without validating ids).
// Long: the version and type checks, then one arm per event kind (a new kind does not compile until it is decoded here).
pub(super) fn decode_json(value: &[u8]) -> Result<Event, DecodeError> {
    let raw: RawEvent =
        serde_json::from_slice(value).map_err(|e| DecodeError::Json(e.to_string()))?;
    match raw.v {
        None | Some(serde_json::Value::Null) => {}
        Some(v) if v.as_u64() == Some(u64::from(SCHEMA_VERSION)) => {}
        Some(v) => match v.as_u64() {
            Some(n) => return Err(DecodeError::Version(n)),
            None => {
                return Err(DecodeError::BadField {
                    kind: "event",
                    field: "v",
                    lowest: 1,
                    got: v.to_string(),
                })
            }
        },
    }
    let kind = match &raw.kind {
        Some(serde_json::Value::String(s)) => s.as_str(),
        None | Some(serde_json::Value::Null) => "",
        Some(other) => return Err(DecodeError::UnknownType(other.to_string())),
    };
    let Some(kind) = EventKind::all().find(|k| k.as_str() == kind) else {
        return Err(DecodeError::UnknownType(kind.to_string()));
    };
    let name = kind.as_str();
    let field = |v: Option<serde_json::Value>, field: &'static str| number(v, name, field);
    let ts = Ts(field(raw.ts, "ts")?);
    let (user, target) = (raw.user, raw.target);
    let filter = |change: FilterChange| -> Result<Event, DecodeError> {
        Ok(Event::Filter {
            user: UserId(field(user.clone(), "user")?),
            target: UserId(field(target.clone(), "target")?),
            change,
            ts,
        })
    };
    let edge = |follower, followee| -> Result<(UserId, UserId), DecodeError> {
        Ok((
            UserId(field(follower, "follower")?),
            UserId(field(followee, "followee")?),
        ))
    };
    let post = |author, post_id| -> Result<(UserId, PostId), DecodeError> {
        Ok((
            UserId(field(author, "author")?),
            PostId(field(post_id, "post_id")?),
        ))
    };
    // One arm per kind: a new kind does not compile until it is decoded.
    Ok(match kind {
        EventKind::Follow => {
            let (follower, followee) = edge(raw.follower, raw.followee)?;
            Event::Follow {
                follower,
                followee,
                ts,
            }
        }
        EventKind::Unfollow => {
            let (follower, followee) = edge(raw.follower, raw.followee)?;
            Event::Unfollow {
                follower,
                followee,
                ts,
            }
        }
        EventKind::Post => {
            let (author, post_id) = post(raw.author, raw.post_id)?;
            let (reply_to, mentions) = addressed(raw.reply_to, raw.mentions)?;
            Event::post(author, post_id, ts, reply_to, mentions)
        }
        EventKind::DeletePost => {
            let (author, post_id) = post(raw.author, raw.post_id)?;
            Event::DeletePost {
                author,
                post_id,
                ts,
            }
        }
        EventKind::Seen => {
            let user = UserId(field(user.clone(), "user")?);
            match marker(raw.feed, raw.read_up_to, raw.force)? {
                None => Event::Seen { user, ts },
                Some((feed, read_up_to, force)) => Event::Mark {
                    user,
                    ts,
                    feed,
                    read_up_to,
                    force,
                },
            }
        }
        EventKind::Repost => {
            let (author, post_id) = post(raw.author, raw.post_id)?;
            Event::Repost {
                author,
                post_id,
                of_author: UserId(field(raw.of_author, "of_author")?),
                of_post_id: PostId(field(raw.of_post_id, "of_post_id")?),
                ts,
            }
        }
        EventKind::Block => filter(FilterChange::Block)?,
        EventKind::Unblock => filter(FilterChange::Unblock)?,
        EventKind::Mute => {
            let until = match raw.until {
                None | Some(serde_json::Value::Null) => None,
                v => Some(Ts(number(v, name, "until")?)),
            };
            match raw.notifications {
                None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(true)) => {
                    filter(FilterChange::Mute { until })?
                }
                Some(serde_json::Value::Bool(false)) => {
                    filter(FilterChange::MuteKeepingNotifications { until })?
                }
                Some(other) => {
                    return Err(DecodeError::BadShape {
                        kind: "mute",
                        field: "notifications",
                        expected: "true or false",
                        got: other.to_string(),
                    })
                }
            }
        }
        EventKind::Unmute => filter(FilterChange::Unmute)?,
        EventKind::HideReposts => filter(FilterChange::HideReposts)?,
        EventKind::ShowReposts => filter(FilterChange::ShowReposts)?,
        EventKind::Like | EventKind::Unlike => {
            let (author, post_id) = post(raw.author, raw.post_id)?;
            Event::Like {
                user: UserId(field(user, "user")?),
                author,
                post_id,
                liked: kind == EventKind::Like,
                ts,
            }
        }
    })
}

/// The JSON interchange form of an event (`"v"` omitted: it is optional).
// Long: one arm per event kind, each its JSON line.
pub fn event_to_json(event: &Event) -> String {
    match *event {
        Event::Follow {
            follower,
            followee,
            ts,
        } => {
            format!(r#"{{"type":"follow","follower":{follower},"followee":{followee},"ts":{ts}}}"#)
        }
        Event::Unfollow {
            follower,
            followee,
            ts,
        } => format!(
            r#"{{"type":"unfollow","follower":{follower},"followee":{followee},"ts":{ts}}}"#
        ),
        Event::Post {
            author,
            post_id,
            ts,
        } => {
            format!(r#"{{"type":"post","author":{author},"post_id":{post_id},"ts":{ts}}}"#)
        }
        Event::PostTo {
            author,
            post_id,
            ts,
            reply_to,
            ref mentions,
        } => {
            let mut more = String::new();
            if let Some((a, p)) = reply_to {
                more += &format!(r#","reply_to":{{"author":{a},"post_id":{p}}}"#);
            }
            if !mentions.is_empty() {
                let ids: Vec<String> = mentions.iter().map(|m| m.to_string()).collect();
                more += &format!(r#","mentions":[{}]"#, ids.join(","));
            }
            format!(r#"{{"type":"post","author":{author},"post_id":{post_id}{more},"ts":{ts}}}"#)
        }
        Event::DeletePost {
            author,
            post_id,
            ts,
        } => format!(r#"{{"type":"delete_post","author":{author},"post_id":{post_id},"ts":{ts}}}"#),
        Event::Seen { user, ts } => format!(r#"{{"type":"seen","user":{user},"ts":{ts}}}"#),
        Event::Mark {
            user,
            ts,
            feed,
            read_up_to: r,
            force,
        } => {
            let feed = feed.as_str();
            let force = if force { r#","force":true"# } else { "" };
            format!(
                r#"{{"type":"seen","user":{user},"feed":"{feed}","read_up_to":{{"ts":{},"post_id":{},"author":{}}}{force},"ts":{ts}}}"#,
                r.ts, r.post_id, r.author
            )
        }
        Event::Repost {
            author,
            post_id,
            of_author,
            of_post_id,
            ts,
        } => format!(
            r#"{{"type":"repost","author":{author},"post_id":{post_id},"of_author":{of_author},"of_post_id":{of_post_id},"ts":{ts}}}"#
        ),
        Event::Filter {
            user,
            target,
            change,
            ts,
        } => {
            let kind = change.kind().as_str();
            let until = match change {
                FilterChange::Mute { until: Some(u) } => format!(r#","until":{u}"#),
                FilterChange::MuteKeepingNotifications { until } => {
                    let until = until.map_or(String::new(), |u| format!(r#","until":{u}"#));
                    format!(r#"{until},"notifications":false"#)
                }
                FilterChange::Mute { until: None }
                | FilterChange::Block
                | FilterChange::Unblock
                | FilterChange::Unmute
                | FilterChange::HideReposts
                | FilterChange::ShowReposts => String::new(),
            };
            format!(r#"{{"type":"{kind}","user":{user},"target":{target}{until},"ts":{ts}}}"#)
        }
        Event::Like {
            user,
            author,
            post_id,
            liked,
            ts,
        } => {
            let kind = if liked { "like" } else { "unlike" };
            format!(
                r#"{{"type":"{kind}","user":{user},"author":{author},"post_id":{post_id},"ts":{ts}}}"#
            )
        }
    }
}
