//! The API description served at `/openapi.json`, generated from the code:
//! the answers' schemas are derived from the types the handlers serialize
//! (`utoipa::ToSchema`), and each route's parameters and answers are
//! declared here beside the route table, one `#[utoipa::path]` per route.
//! At start the page limits are filled in from the handlers' constants and
//! the configuration, so the document states the defaults the handlers
//! apply and the maximum this server enforces. `tests/http_hardening.rs`
//! checks every answer against the schema stated for it, and the limits.

// The functions below only carry the routes' descriptions.
#![allow(dead_code)]

use super::cut::CutAnswer;
use super::errors::ErrorBody;
use super::handlers::{Health, Ready};
use super::routing::{EngagementAnswer, OutboxesAnswer, PostsAnswer};
use super::ApiConfig;
use crate::api::query::{
    Act, Change, Changes, Counters, CountersList, Counts, EventAt, FilteredItem, Flags,
    FollowerItem, List, MarkerItem, Markers, NotificationGroup, Page, PlaceItem, PostAnswer,
    PostItem, RepostOf, RepostedBy, WhyAnswer, WhyItem,
};
use utoipa::OpenApi;

/// Where the routes processors of a Kafka group read each other under.
const INTERNAL: &str = "/v1/internal/";

/// The page size a route answers with when the request names no `limit`
/// (`None`: the route takes no `limit`).
pub fn default_limit(route: &str) -> Option<usize> {
    crate::api::reads::ALL
        .iter()
        .find(|r| r.route == route)
        .and_then(|r| r.default_limit)
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "feedlog read API",
        version = "1",
        description = "Read-only views materialized by feedlog. Every page is read from one consistent snapshot of the owning partition. Errors are {\"error\":{\"code\",\"message\"}}: 400 for a bad id, cursor, limit or parameter; 404 for an unknown route. In Kafka mode any processor answers for any user: it forwards a request to the processor that serves the user's partition (a stream is redirected, 307), and answers 503 with Retry-After while the partition moves between processors."
    ),
    paths(
        timeline, why, changes, stream, posts, post, likes, replies, markers, notifications, notifications_stream, counters, counters_many, recent_followers, followers,
        followees, mutes, blocks, openapi, healthz, readyz, metrics, internal_outboxes,
        internal_posts, internal_engagement, internal_cut_state, internal_cut_hold, internal_cut_release,
        internal_digest, internal_checkpoint, ui
    ),
    components(schemas(
        PostItem, PostAnswer, Counts, Flags, RepostedBy, RepostOf, WhyItem, WhyAnswer, EventAt, Change, Changes, FollowerItem, FilteredItem, Counters, Markers, MarkerItem, PlaceItem, Page<PostItem>,
        NotificationGroup, Act, Page<NotificationGroup>,
        Page<FollowerItem>, Page<FilteredItem>,
        List<FollowerItem>, CountersList, Ready, ErrorBody, Health, OutboxesAnswer, PostsAnswer, EngagementAnswer,
        CutAnswer
    ))
)]
struct ApiDoc;

/// The user a route reads.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
struct User {
    /// User id (a whole number from 1). An unknown user is an empty view.
    #[param(minimum = 1)]
    id: u64,
}

/// A page of a paged view.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct Paging {
    /// Page size, 1 to the server's maximum (default maximum 200; above it is a 400 naming the maximum). The default and the maximum are filled in by the server (`--max-limit`).
    #[param(minimum = 1)]
    limit: Option<u64>,
    /// The next_cursor of the previous page. Opaque, bound to its view and user.
    cursor: Option<String>,
}

/// The window of the timeline stream.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct StreamWindow {
    /// How many of the timeline's newest entries the client's copy holds, 1 to the server's maximum page size. The default and the maximum are filled in by the server (`--max-limit`).
    #[param(minimum = 1)]
    limit: Option<u64>,
    /// The most unread entries `event: unread` counts (default 100 on a stream, at most 10,000), as `max` on `markers`.
    #[param(minimum = 1, maximum = 10000)]
    max: Option<u64>,
}

/// A view as of an earlier time.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct AsOf {
    /// Log time (ms): the view as it was then, over the events with `ts` up to it; a deleted post never comes back. Cursors of such a page stay on that time. Embedded log only; built from the log on the first request for a time (seconds on a large log), then kept. Older than `--history-retention` before the newest event: 410 history_gone.
    as_of: Option<u64>,
}

/// The refusals of a view as of an earlier time.
#[derive(utoipa::IntoResponses)]
enum HistoryRefusals {
    /// `as_of` is older than the history kept (`--history-retention`); the message says from when it is kept
    #[response(status = 410)]
    Gone(ErrorBody),
}

/// Whether entries carry their counts and the reader's flags.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct Counted {
    /// `0`: entries carry no `counts` and no `viewer` flags (each is read when the page is served: the original's counts at its author's partition, the reader's flags at the reader's). Default `1`.
    #[param(pattern = "^(0|1|true|false)$")]
    counts: Option<String>,
}

/// The refusals of a route that reads one user's partition. (Doc lines
/// here are the document's descriptions: one line each.)
#[derive(utoipa::IntoResponses)]
enum Refusals {
    /// Bad id, cursor, limit or parameter
    #[response(status = 400)]
    Bad(ErrorBody),
    /// Kafka mode: the user's partition is moving between processors; retry (Retry-After)
    #[response(status = 503)]
    Moving(ErrorBody),
}

#[utoipa::path(get, path = "/v1/users/{id}/timeline", operation_id = "getTimeline",
    summary = "Home timeline: one entry per live post with an appearance — the post itself when its author is followed, each live repost by a followed user — placed at its newest appearance (or as `reposts` says), replies by the `replies` rule, newest first (ts, then post_id, then author, descending). An entry with reposts among its appearances adds post_ts, reposted_by and reposters.",
    params(
        User,
        AsOf,
        Paging,
        ("reposts" = Option<String>, Query, description = "Where a post with reposts sits: `newest` (default: at its newest appearance; a new repost moves it up), `first` (at its oldest), `none` (reposts ignored: only posts of followed authors). A cursor belongs to its mode.", pattern = "^(newest|first|none)$"),
        ("replies" = Option<String>, Query, description = "Which replies by followed users show through their authors: `followed` (default: a reply to a post of a user the reader follows, or of the reader — Mastodon's and Twitter's rule), `all`, or `none` (only replies to the reader); a followed user's repost of a reply shows as any repost. Decided when the page is read: following a user later brings the earlier replies to them in.", pattern = "^(followed|all|none)$"),
        ("newer_than" = Option<String>, Query, description = "A page's `prev_cursor`: the `limit` entries just newer than that page's first, newest first (Mastodon's `min_id`); an empty page with the same `prev_cursor` when there are none yet. Not with `cursor`. Walks at most 1,000 entries from the top (a deeper cursor is a 400 bad_cursor)."),
        ("after" = Option<String>, Query, description = "Catch-up: `marker` (the user's home read marker; the bottom of the timeline without one) or a page's cursor: the `limit` entries just above it, **oldest first**. `prev_cursor` (the newest entry's) continues up as `after=`, `next_cursor` reads down as `cursor=`. Not with `cursor` or `newer_than`. Walks at most 10,000 entries from the top (deeper is a 400 bad_cursor)."),
        ("explain" = Option<String>, Query, description = "`1`: each entry adds `why`, its appearances (the original by a followed author, each followed user's repost), newest first, each with the follow it came through and the log positions (partition, offset of `events`) of the follow and of the post or repost event. Not with `as_of` (400).", pattern = "^(0|1|true|false)$"),
        Counted,
    ),
    responses(
        (status = 200, description = "A page", body = Page<PostItem>, headers(("Link" = String, description = "RFC 8288 links: rel=\"next\" (older entries, `cursor`) and rel=\"prev\" (newer entries, `newer_than`, timeline only)."))),
        Refusals,
        HistoryRefusals,
    ))]
fn timeline() {}

#[utoipa::path(get, path = "/v1/users/{id}/timeline/why", operation_id = "whyInTimeline",
    summary = "Is a post in the user's home timeline (reposts shown), and why: `in_timeline` true with `why`, its appearances (as `explain=1`); or false with the one `reason` it is not, with the time and log position of the deciding event: not_applied_yet (its author's partition has events not applied: `partition`, `lag`), unknown_post, is_repost (ask about `original`), deleted, own_post, blocked (`via`, `by`, `since`), muted (`via`, `since`, `until`), reply_to_unfollowed (`parent`: a reply by a followed author to a post of a user the reader does not follow; the replies rule leaves it out), reposts_hidden (`via`, `since`: the followed users who reposted it are all filtered out), not_following (`follow`: never, unfollowed at `ts`, or voided by a block period that ended at `block_ended`).",
    params(
        User,
        ("author" = u64, Query, description = "The post's author."),
        ("post_id" = u64, Query, description = "The post."),
    ),
    responses(
        (status = 200, description = "The answer", body = WhyAnswer),
        Refusals,
    ))]
fn why() {}

#[utoipa::path(get, path = "/v1/users/{id}/timeline/changes", operation_id = "timelineChanges",
    summary = "What entered and what left the user's home timeline between two log times (docs/http-api.md, \"Earlier states\"): `entered`, the entries as of `to` not there as of `from`, and `left`, the other way round, newest first, at most 1,000 (`truncated` past that), each with the `timeline/why` answer as of `to` (without log positions). Embedded log only (400 no_history elsewhere).",
    params(
        User,
        ("from" = u64, Query, description = "The earlier log time (ms)."),
        ("to" = u64, Query, description = "The later log time (ms), at least `from`."),
    ),
    responses(
        (status = 200, description = "The changes", body = Changes),
        Refusals,
        HistoryRefusals,
    ))]
fn changes() {}

#[utoipa::path(get, path = "/v1/users/{id}/timeline/stream", operation_id = "streamTimeline",
    summary = "Server-sent events that keep a client's copy of the timeline's first page of `limit` equal to the timeline. Opens with a `subscribed` comment, then event `page` (data `{items, next_cursor}`, the first page as getTimeline lists it with `counts=0`: the copy starts as its items), then after each read the changes: event `delete` (data `{post_id, author, ts}`) for each entry that left the first page, then event `entry` (data a Post) for each entry new on it, moved or changed, oldest first. A client replaces the entry of the same post (post_id, author) with an `entry` or adds it, removes it on a `delete`, and keeps its `limit` newest: its copy is then the first page after every read (mutes, unmutes, timed mutes, hidden reposts, moves and entries applied late included). An entry or page newer than every one sent with an id carries id `ts:post_id:author`. After the opening page and after each read that changes it: event `unread` (data `{feed: \"home\", unread, capped}`), the home timeline's entries above the user's marker as `markers` counts them (default modes).",
    params(
        User,
        StreamWindow,
        ("Last-Event-ID" = Option<String>, Header, pattern = "^[0-9]+:[0-9]+:[0-9]+$", description = "Resume after this entry (an `id` the stream sent): every newer entry, up to the newest 10,000, oldest first, comes before the page. An id the stream cannot read is ignored: the stream starts fresh."),
    ),
    responses(
        (status = 200, description = "An event stream", content_type = "text/event-stream", body = String),
        Refusals,
    ))]
fn stream() {}

#[utoipa::path(get, path = "/v1/users/{id}/posts", operation_id = "getPosts",
    summary = "The user's own live posts, newest first: originals (with `reposts` and `likes`, as in `counts`) and live reposts (with `repost_of`). Each carries its original's `counts` and, with `viewer`, that user's flags on it, unless `counts=0`.",
    params(
        User,
        AsOf,
        Paging,
        Counted,
        ("viewer" = Option<u64>, Query, description = "A user whose flags on each original (`viewer`: `liked`, `reposted`) the entries carry."),
    ),
    responses(
        (status = 200, description = "A page", body = Page<PostItem>, headers(("Link" = String, description = "RFC 8288 links: rel=\"next\" (older entries, `cursor`) and rel=\"prev\" (newer entries, `newer_than`, timeline only)."))),
        Refusals,
        HistoryRefusals,
    ))]
fn posts() {}

#[utoipa::path(get, path = "/v1/posts/{id}/{post_id}", operation_id = "getPost",
    summary = "One post: an original (with `reply_to` and `mentions` when it has them), or a live repost with `repost_of`, with the original's `counts` (live likes, live direct replies and live reposts); with `viewer`, that user's flags on the original (`liked`, `reposted`). A post that is not there is a 404 whose code is the reason, as timeline/why gives it: unknown_post, deleted, or not_live (a repost whose original is not live).",
    params(
        ("id" = u64, Path, description = "The post's author (a whole number from 1).", minimum = 1),
        ("post_id" = u64, Path, description = "The post (an original's id, or a repost's own id)."),
        ("viewer" = Option<u64>, Query, description = "A user whose flags on the original the answer carries."),
    ),
    responses(
        (status = 200, description = "The post", body = PostAnswer),
        (status = 404, description = "The post is not there: the code says why (unknown_post, deleted, not_live)", body = ErrorBody),
        Refusals,
    ))]
fn post() {}

#[utoipa::path(get, path = "/v1/posts/{id}/{post_id}/likes", operation_id = "getLikes",
    summary = "Who likes a post (a repost's id: its original), newest first: by the time of the like that decides (each user's latest like or unlike of the original, through any id), then by user id, descending. A post that is not there is a 404 as getPost gives it; in Kafka mode, a repost whose original another processor serves is a 404 is_repost naming the original (ask about it).",
    params(
        ("id" = u64, Path, description = "The post's author (a whole number from 1).", minimum = 1),
        ("post_id" = u64, Path, description = "The post (an original's id, or a repost's own id)."),
        Paging,
    ),
    responses(
        (status = 200, description = "A page of likers: `user`, and `ts` the like's time", body = Page<FollowerItem>, headers(("Link" = String, description = "RFC 8288 link: rel=\"next\"."))),
        (status = 404, description = "The post is not there: the code says why (unknown_post, deleted, not_live, is_repost)", body = ErrorBody),
        Refusals,
    ))]
fn likes() {}

#[utoipa::path(get, path = "/v1/posts/{id}/{post_id}/replies", operation_id = "getReplies",
    summary = "A post's live direct replies (a repost's id: its original's; a reply to one of its reposts included), oldest first: by the reply's time, then author and id. Each carries its own `counts` and, with `viewer`, that user's flags on it. A post that is not there is a 404 as getLikes gives it.",
    params(
        ("id" = u64, Path, description = "The post's author (a whole number from 1).", minimum = 1),
        ("post_id" = u64, Path, description = "The post (an original's id, or a repost's own id)."),
        Paging,
        ("viewer" = Option<u64>, Query, description = "A user whose flags (`liked`, `reposted`) each reply carries."),
    ),
    responses(
        (status = 200, description = "A page of replies: `post_id`, `author`, `ts`, `counts` (and `viewer`)", body = Page<PostItem>, headers(("Link" = String, description = "RFC 8288 link: rel=\"next\"."))),
        (status = 404, description = "The post is not there: the code says why (unknown_post, deleted, not_live, is_repost)", body = ErrorBody),
        Refusals,
    ))]
fn replies() {}

#[utoipa::path(get, path = "/v1/users/{id}/markers", operation_id = "getMarkers",
    summary = "The user's read markers, one per feed (`home`, `notifications`): `read_up_to` (the greatest place the user's `seen` events of that feed named since the last `force`; null when none), `since` and `event` (the time and log position of the `seen` that set it), and `unread`: how many entries of the feed as it reads now (filters, `reposts`, `replies`) are placed above the marker — exact up to `max`, with `capped` true when more are; for notifications, the groups (as `notifications` groups them) placed above it.",
    params(
        User,
        ("max" = Option<u64>, Query, description = "The most unread entries counted (default 1,000, at most 10,000): bounds the work, never makes the count an estimate.", minimum = 1, maximum = 10000),
        ("reposts" = Option<String>, Query, description = "The home timeline's mode, as on `timeline`.", pattern = "^(newest|first|none)$"),
        ("replies" = Option<String>, Query, description = "The home timeline's replies rule, as on `timeline`.", pattern = "^(followed|all|none)$"),
    ),
    responses(
        (status = 200, description = "The markers", body = Markers),
        Refusals,
    ))]
fn markers() {}

#[utoipa::path(get, path = "/v1/users/{id}/notifications", operation_id = "getNotifications",
    summary = "The user's notifications, newest group first: follows of them, likes, reposts and replies of their live posts by others, and live posts that mention them (live acts, at their own times; a reply to their post that mentions them is a reply). Likes and reposts of one post, and all follows, group: items of one key ordered by (ts, actor) share a group while each gap is at most 12 hours and the group holds fewer than 50, counted from the oldest; a reply or a mention is a group of its own. Groups sort by (newest ts, key). The acts of users the reader blocks, is blocked by or mutes are left out before grouping. The same log gives the same groups on every page size and at any time of asking.",
    params(
        User,
        ("limit" = Option<usize>, Query, description = "Groups per page (default 20, at most 1,000).", minimum = 1, maximum = 1000),
        ("cursor" = Option<String>, Query, description = "A page's `next_cursor`: the groups after it."),
        ("after" = Option<String>, Query, description = "Catch-up: `marker` (the user's notifications marker) or a catch-up page's `prev_cursor` (or a page's `next_cursor`): the `limit` groups just above it, oldest first; `prev_cursor` continues up, `next_cursor` reads down as `cursor`. Not with `cursor`."),
        ("grouped" = Option<String>, Query, description = "`0`: one entry per act (count 1), newest first; default `1`.", pattern = "^(0|1|true|false)$"),
        ("types" = Option<String>, Query, description = "Kinds kept, comma-separated: `follow`, `like`, `repost`, `reply`, `mention` (applied before grouping)."),
        ("explain" = Option<String>, Query, description = "`1`: each group with `why`, every act of the group newest first (`actor`, `ts`) with the event that made it (`event`: partition and offset in `events`) — the follow that started the edge (absent for a follow revived after a block), the like, the repost, or the post that replies or mentions. Not with `as_of`.", pattern = "^(0|1|true|false)$"),
        AsOf,
    ),
    responses(
        (status = 200, description = "A page of groups: `kind`, `post` (the user's post; a mention: the post that mentions them), `reply` (a reply's own post), `actors` (the newest 10), `count`, `newest_ts`, `oldest_ts`", body = Page<NotificationGroup>, headers(("Link" = String, description = "RFC 8288 link: rel=\"next\"."))),
        Refusals,
    ))]
fn notifications() {}

#[utoipa::path(get, path = "/v1/users/{id}/notifications/stream", operation_id = "streamNotifications",
    summary = "Server-sent events that keep a client's copy of the notifications' first page (`limit`, `grouped`, `types` as on getNotifications) equal to it. Opens with a `subscribed` comment, then event `page` (data `{items, next_cursor}`, the page as getNotifications lists it), sent again whole after each read that finds the page changed (a group changes in place as acts join or leave it), and event `unread` (data `{feed: \"notifications\", unread, capped}`: the groups of every kind above the user's notifications marker, as `markers` counts them) when the stream opens and whenever it changes. Reads as the timeline stream does.",
    params(
        User,
        StreamWindow,
        ("grouped" = Option<String>, Query, description = "`0`: one entry per act, as on getNotifications.", pattern = "^(0|1|true|false)$"),
        ("types" = Option<String>, Query, description = "Kinds kept on the page, as on getNotifications (the unread count counts every kind)."),
    ),
    responses(
        (status = 200, description = "An event stream", content_type = "text/event-stream", body = String),
        Refusals,
    ))]
fn notifications_stream() {}

#[utoipa::path(get, path = "/v1/users/{id}/counters", operation_id = "getCounters",
    summary = "Follower, followee and post counts.",
    params(User, AsOf),
    responses(
        (status = 200, description = "The counters", body = Counters),
        Refusals,
        HistoryRefusals,
    ))]
fn counters() {}

#[utoipa::path(get, path = "/v1/counters", operation_id = "getCountersMany",
    summary = "Counters of up to 1,000 users, in the order asked.",
    params(("ids" = String, Query, description = "Comma-separated user ids (at most 1,000).")),
    responses(
        (status = 200, description = "The counters", body = CountersList),
        Refusals,
    ))]
fn counters_many() {}

#[utoipa::path(get, path = "/v1/users/{id}/followers/recent", operation_id = "getRecentFollowers",
    summary = "The most recent live followers, newest follow first.",
    params(
        User,
        AsOf,
        ("limit" = Option<u64>, Query, minimum = 1, description = "How many (K), 1 to the maximum. The default and the maximum are filled in by the server (`--max-limit`)."),
    ),
    responses(
        (status = 200, description = "The followers", body = List<FollowerItem>),
        Refusals,
        HistoryRefusals,
    ))]
fn recent_followers() {}

#[utoipa::path(get, path = "/v1/users/{id}/followers", operation_id = "getFollowers",
    summary = "Live followers, by user id ascending, with follow time.",
    params(
        User,
        AsOf,
        Paging,
    ),
    responses(
        (status = 200, description = "A page", body = Page<FollowerItem>, headers(("Link" = String, description = "RFC 8288 links: rel=\"next\" (older entries, `cursor`) and rel=\"prev\" (newer entries, `newer_than`, timeline only)."))),
        Refusals,
        HistoryRefusals,
    ))]
fn followers() {}

#[utoipa::path(get, path = "/v1/users/{id}/followees", operation_id = "getFollowees",
    summary = "Live followees, by user id ascending, with follow time.",
    params(
        User,
        AsOf,
        Paging,
    ),
    responses(
        (status = 200, description = "A page", body = Page<FollowerItem>, headers(("Link" = String, description = "RFC 8288 links: rel=\"next\" (older entries, `cursor`) and rel=\"prev\" (newer entries, `newer_than`, timeline only)."))),
        Refusals,
        HistoryRefusals,
    ))]
fn followees() {}

#[utoipa::path(get, path = "/v1/users/{id}/mutes", operation_id = "getMutes",
    summary = "The users this user mutes, by user id ascending, with the mute's time and end (docs/semantics.md, \"Blocks and mutes\"). A mute whose `until` the user's partition's log time has passed no longer filters, and is listed until an `unmute`.",
    params(
        User,
        AsOf,
        Paging,
    ),
    responses(
        (status = 200, description = "A page", body = Page<FilteredItem>, headers(("Link" = String, description = "RFC 8288 links: rel=\"next\" (older entries, `cursor`) and rel=\"prev\" (newer entries, `newer_than`, timeline only)."))),
        Refusals,
        HistoryRefusals,
    ))]
fn mutes() {}

#[utoipa::path(get, path = "/v1/users/{id}/blocks", operation_id = "getBlocks",
    summary = "The users this user blocks, by user id ascending, with the block's time (docs/semantics.md, \"Blocks and mutes\").",
    params(
        User,
        AsOf,
        Paging,
    ),
    responses(
        (status = 200, description = "A page", body = Page<FilteredItem>, headers(("Link" = String, description = "RFC 8288 links: rel=\"next\" (older entries, `cursor`) and rel=\"prev\" (newer entries, `newer_than`, timeline only)."))),
        Refusals,
        HistoryRefusals,
    ))]
fn blocks() {}

#[utoipa::path(get, path = "/openapi.json", operation_id = "getOpenApi",
    summary = "This document.",
    responses((status = 200, description = "OpenAPI 3.1", body = Object)))]
fn openapi() {}

#[utoipa::path(get, path = "/healthz", operation_id = "getHealth",
    summary = "Liveness: the process serves requests.",
    responses((status = 200, description = "Alive", body = Health)))]
fn healthz() {}

#[utoipa::path(get, path = "/readyz", operation_id = "getReady",
    summary = "Readiness: 200 while the records not yet applied (both input logs, all partitions) are at most the configured lag, else 503.",
    responses(
        (status = 200, description = "Ready", body = Ready),
        (status = 503, description = "Behind, or the state does not match its logs", body = Ready),
    ))]
fn readyz() {}

#[utoipa::path(get, path = "/metrics", operation_id = "getMetrics",
    summary = "Prometheus text: events applied by kind, deliveries, dead letters, lag per partition, batch size and commit latency histograms, RocksDB figures, request latency by route and responses by code, build and process figures.",
    responses((status = 200, description = "Prometheus exposition format 0.0.4", content_type = "text/plain", body = String)))]
fn metrics() {}

#[utoipa::path(get, path = "/v1/internal/outboxes", operation_id = "getInternalOutboxes",
    summary = "Internal, Kafka mode: the outboxes of authors whose partitions this processor serves, for another processor's timeline pull path. 503 when a partition is not served here.",
    params(
        ("authors" = String, Query, description = "Comma-separated user ids."),
        ("from_ts" = u64, Query, description = "Start at this post time (inclusive, with from_post)."),
        ("from_post" = u64, Query, description = "Start at this post id (inclusive)."),
        ("limit" = u64, Query, minimum = 1, description = "Posts per author, at most."),
    ),
    responses(
        (status = 200, description = "Per author, [ts, post_id] pairs newest first", body = OutboxesAnswer),
        (status = 400, description = "Bad parameter", body = ErrorBody),
        (status = 404, description = "Embedded mode: the route is not served (there is no other processor to answer)", body = ErrorBody),
        (status = 503, description = "A partition is not served here (moving)", body = ErrorBody),
    ))]
fn internal_outboxes() {}

#[utoipa::path(get, path = "/v1/internal/posts", operation_id = "getInternalPosts",
    summary = "Internal, Kafka mode: the records of post ids whose authors' partitions this processor serves, for another processor's explain and why answers. 503 when a partition is not served here.",
    params(
        ("ids" = String, Query, description = "Comma-separated author:post_id pairs."),
    ),
    responses(
        (status = 200, description = "Each id's record in the state's encoding (hex), or null, in the order asked", body = PostsAnswer),
        (status = 400, description = "Bad parameter", body = ErrorBody),
        (status = 404, description = "Embedded mode: the route is not served (there is no other processor to answer)", body = ErrorBody),
        (status = 503, description = "A partition is not served here (moving)", body = ErrorBody),
    ))]
fn internal_posts() {}

#[utoipa::path(get, path = "/v1/internal/engagement", operation_id = "getInternalEngagement",
    summary = "Internal, Kafka mode: originals' counts ([likes, reposts, replies]) when their authors' partitions are served here, or with `viewer` (a user of a partition served here) the viewer's flags on them ([liked, reposted, 0], 1 or 0), for another processor's post answers. 503 when a partition is not served here.",
    params(
        ("ids" = String, Query, description = "Comma-separated author:post_id pairs of originals."),
        ("viewer" = Option<u64>, Query, description = "The user whose flags are asked for."),
    ),
    responses(
        (status = 200, description = "Each id's pair, in the order asked", body = EngagementAnswer),
        (status = 400, description = "Bad parameter", body = ErrorBody),
        (status = 404, description = "Embedded mode: the route is not served (there is no other processor to answer)", body = ErrorBody),
        (status = 503, description = "A partition is not served here (moving)", body = ErrorBody),
    ))]
fn internal_engagement() {}

#[utoipa::path(get, path = "/v1/internal/cut", operation_id = "getInternalCut",
    summary = "Internal, Kafka mode: where a partition this processor serves is applied up to, and where its events are held for a consistent cut.",
    params(("partition" = u32, Query, description = "The partition.")),
    responses(
        (status = 200, description = "Its applied positions and hold", body = CutAnswer),
        (status = 400, description = "Bad parameter", body = ErrorBody),
        (status = 404, description = "Embedded mode: the route is not served", body = ErrorBody),
        (status = 503, description = "The partition is not served here", body = ErrorBody),
    ))]
fn internal_cut_state() {}

#[utoipa::path(post, path = "/v1/internal/cut", operation_id = "holdInternalCut",
    summary = "Internal, Kafka mode: hold a partition's events at an offset for a consistent cut (effects are still applied); the hold lapses after ttl_ms (at most 600,000) unless asked again.",
    params(
        ("partition" = u32, Query, description = "The partition."),
        ("events" = u64, Query, description = "No events record at or past this offset is read."),
        ("ttl_ms" = u64, Query, description = "How long the hold lasts."),
    ),
    responses(
        (status = 200, description = "Its applied positions and hold", body = CutAnswer),
        (status = 400, description = "Bad parameter", body = ErrorBody),
        (status = 404, description = "Embedded mode: the route is not served", body = ErrorBody),
        (status = 503, description = "The partition is not served here", body = ErrorBody),
    ))]
fn internal_cut_hold() {}

#[utoipa::path(delete, path = "/v1/internal/cut", operation_id = "releaseInternalCut",
    summary = "Internal, Kafka mode: let a held partition read its events on.",
    params(("partition" = u32, Query, description = "The partition.")),
    responses(
        (status = 204, description = "Released (or was not held)"),
        (status = 400, description = "Bad parameter", body = ErrorBody),
        (status = 404, description = "Embedded mode: the route is not served", body = ErrorBody),
    ))]
fn internal_cut_release() {}

#[utoipa::path(get, path = "/v1/internal/digest", operation_id = "getInternalDigest",
    summary = "Internal, Kafka mode: SHA-256 digests of every view of a partition this processor serves, as readers see them, with the state's positions (what verify compares between generations at a consistent cut).",
    params(("partition" = u32, Query, description = "The partition."),
        ("cut" = Option<u64>, Query, description = "The id of the consistent cut asking (ignored).")),
    responses(
        (status = 200, description = "partition, position [events, effects], users, views [[view, hex]]", body = Object),
        (status = 400, description = "Bad parameter", body = ErrorBody),
        (status = 404, description = "Embedded mode: the route is not served", body = ErrorBody),
        (status = 503, description = "The partition is not served here", body = ErrorBody),
    ))]
fn internal_digest() {}

#[utoipa::path(post, path = "/v1/internal/checkpoint", operation_id = "postInternalCheckpoint",
    summary = "Internal, Kafka mode: write a RocksDB checkpoint of a partition this processor serves into the group's checkpoint directory (--checkpoints), as at a consistent cut.",
    params(("partition" = u32, Query, description = "The partition."),
        ("cut" = Option<u64>, Query, description = "The id of the consistent cut it is part of, recorded in checkpoint.json (a set of one cut's checkpoints can seed a new generation).")),
    responses(
        (status = 200, description = "path (the checkpoint's directory) and checkpoint (its checkpoint.json)", body = Object),
        (status = 400, description = "Bad parameter", body = ErrorBody),
        (status = 404, description = "Embedded mode: the route is not served", body = ErrorBody),
        (status = 409, description = "The processor runs without --checkpoints", body = ErrorBody),
        (status = 503, description = "The partition is not served here", body = ErrorBody),
    ))]
fn internal_checkpoint() {}

#[utoipa::path(get, path = "/ui", operation_id = "getUi",
    summary = "A web page to look at timelines with: pick a user, page through their home timeline, watch it update over the timeline stream, click an entry for its why, ask why a post is not there. Reads this API only; needs no token itself (it asks for one and sends it).",
    responses((status = 200, description = "The page", content_type = "text/html", body = String)))]
fn ui() {}

/// The description as served with `cfg`: every public route's `limit`
/// parameter carries the handler's default and `cfg.max_limit`.
pub fn document(cfg: &ApiConfig, kafka: bool) -> String {
    let mut doc =
        serde_json::to_value(ApiDoc::openapi()).expect("an OpenAPI document serializes to JSON");
    if let (false, Some(paths)) = (kafka, doc["paths"].as_object_mut()) {
        // Processors of a Kafka group read each other there; an embedded
        // processor answers 404 (docs/http-api.md, "Exposure").
        paths.retain(|route, _| !route.starts_with(INTERNAL));
    }
    if let Some(paths) = doc["paths"].as_object_mut() {
        for (route, item) in paths.iter_mut() {
            let Some(default) = default_limit(route) else {
                continue;
            };
            let Some(params) = item["get"]["parameters"].as_array_mut() else {
                continue;
            };
            for p in params.iter_mut().filter(|p| p["name"] == "limit") {
                p["schema"]["default"] = default.min(cfg.max_limit).into();
                p["schema"]["minimum"] = 1.into();
                p["schema"]["maximum"] = cfg.max_limit.into();
            }
        }
    }
    if cfg.string_ids {
        // The answers' ids are strings (`--string-ids`), wherever a schema
        // holds one (pages hold their items' schemas inline).
        string_ids(&mut doc["components"]["schemas"]);
    }
    doc.to_string()
}

/// Every id property under `v` ([`super::ids::ID_FIELDS`]) becomes a
/// string of decimal digits.
fn string_ids(v: &mut serde_json::Value) {
    if let Some(props) = v.get_mut("properties").and_then(|p| p.as_object_mut()) {
        // A place (`read_up_to`, a notification group's `place`) may name
        // 0s: below everything, or no post.
        let place = props.len() == 3
            && ["ts", "post_id", "author"]
                .iter()
                .all(|k| props.contains_key(*k));
        let pattern = if place { "^[0-9]+$" } else { "^[1-9][0-9]*$" };
        for &field in super::ids::ID_FIELDS {
            if let Some(p) = props.get_mut(field) {
                let description = p["description"].clone();
                *p = serde_json::json!({"type": "string", "pattern": pattern});
                if !description.is_null() {
                    p["description"] = description;
                }
            }
        }
    }
    match v {
        serde_json::Value::Object(o) => o.values_mut().for_each(string_ids),
        serde_json::Value::Array(a) => a.iter_mut().for_each(string_ids),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
