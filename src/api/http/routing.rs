//! Kafka mode: any processor's API answers for any user.
//!
//! A request for a user whose partition this processor serves is answered
//! here. One whose partition another processor serves is forwarded to it
//! (its address comes from the `members` topic) and its answer returned
//! as is; a stream is redirected instead (307). A partition that
//! is moving — revoked, not yet assigned, or replaying before it serves —
//! answers 503 with `Retry-After`, never a wrong or empty view. A forwarded
//! request is never forwarded again: if ownership moved on meanwhile, the
//! caller gets 503 and retries.
//!
//! Timeline pages that pull from followees' outboxes read the outboxes of
//! other processors' partitions through [`RemoteOutboxes`]: one internal
//! request per processor per page (`GET /v1/internal/outboxes`).

use super::client;
use super::Locator;
use crate::api::query::{Engaged, Engagement, Outboxes, QueryError, Remote};
use crate::core::event::{PostId, Ts, UserId};
use crate::core::keys::{PostRef, PostVal};
use crate::core::partition::partition_for;
use crate::core::Partition;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Header marking a request one processor forwarded to another.
pub const FORWARDED: &str = "x-feedlog-forwarded";

/// Header of an answer read from this processor's warm standby of the
/// partition, its owner unreachable: the group's committed positions it
/// reflects, `events=N,effects=M`.
pub const STANDBY: &str = "x-feedlog-standby";

/// How long a forwarded request may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// How long a processor that did not answer (refused the connection,
/// timed out) is not asked again: its partitions' readers are answered
/// by standbys here meanwhile, or told the partition is moving.
pub const UNREACHABLE_FOR: Duration = Duration::from_secs(2);

/// Who serves which partition (in Kafka mode, from the `members` topic).
pub struct Routing {
    owners: Arc<dyn Locator>,
    partitions: u32,
    /// `Bearer <token>` for the other processors' APIs, when they need one.
    authorization: Option<String>,
    /// Processors (API addresses) that did not answer lately, and until
    /// when they are not asked.
    unreachable: Mutex<HashMap<String, Instant>>,
    /// The latest of those times, in ms since the Unix epoch: before it
    /// passes, no request need look at them (every read asks).
    unreachable_until_ms: AtomicU64,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Routing {
    /// Routing over `owners`; `token` is the group's API
    /// token, sent with every forwarded request.
    pub fn new(owners: Arc<dyn Locator>, partitions: u32, token: Option<&str>) -> Routing {
        Routing {
            owners,
            partitions,
            authorization: token.map(|t| format!("Bearer {t}")),
            unreachable: Mutex::default(),
            unreachable_until_ms: AtomicU64::new(0),
        }
    }

    /// The API address of the processor serving partition `p`;
    /// [`QueryError::Moving`] while nobody serves it, or while the one
    /// that does cannot be reached.
    pub fn owner(&self, p: Partition) -> Result<String, QueryError> {
        self.owners
            .serving(p)
            .filter(|api| !self.is_unreachable(api))
            .ok_or(QueryError::Moving { partition: p })
    }

    /// Whether processor `api` did not answer within the last
    /// [`UNREACHABLE_FOR`].
    pub fn is_unreachable(&self, api: &str) -> bool {
        let mut u = self.unreachable.lock().unwrap_or_else(|e| e.into_inner());
        match u.get(api) {
            Some(until) if Instant::now() < *until => true,
            Some(_) => {
                u.remove(api);
                false
            }
            None => false,
        }
    }

    /// The partitions announced as served by a processor that cannot be
    /// reached now.
    pub fn unreachable_partitions(&self) -> Vec<Partition> {
        if now_ms() >= self.unreachable_until_ms.load(Ordering::Relaxed) {
            return Vec::new();
        }
        (0..self.partitions)
            .map(Partition)
            .filter(|&p| {
                self.owners
                    .serving(p)
                    .is_some_and(|api| self.is_unreachable(&api))
            })
            .collect()
    }

    /// `GET` at the owner of partition `p`, marked as forwarded.
    pub fn get(&self, p: Partition, path_and_query: &str) -> Result<client::Response, QueryError> {
        let api = self.owner(p)?;
        self.get_at(&api, p, path_and_query)
    }

    /// `GET` at the processor `api` serving partition `p`, marked as
    /// forwarded.
    pub fn get_at(
        &self,
        api: &str,
        p: Partition,
        path_and_query: &str,
    ) -> Result<client::Response, QueryError> {
        let mut headers = vec![(FORWARDED, "1")];
        if let Some(auth) = &self.authorization {
            headers.push(("Authorization", auth.as_str()));
        }
        client::get(api, path_and_query, &headers, TIMEOUT).map_err(|e| {
            // It did not answer at all (an answer, even an error, is HTTP).
            self.unreachable
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(api.to_string(), Instant::now() + UNREACHABLE_FOR);
            self.unreachable_until_ms.fetch_max(
                now_ms() + UNREACHABLE_FOR.as_millis() as u64,
                Ordering::Relaxed,
            );
            QueryError::Remote {
                partition: p,
                reason: e.to_string(),
            }
        })
    }

    /// The partition of `user`.
    pub fn partition(&self, user: UserId) -> Partition {
        partition_for(user, self.partitions)
    }
}

/// The answer of the processor serving partition `p` to `path`: a 503 is
/// the partition moving; any other failure names the status.
fn answer_of<T: serde::de::DeserializeOwned>(
    routing: &Routing,
    p: Partition,
    path: &str,
) -> Result<T, QueryError> {
    let r = routing.get(p, path)?;
    let bad = |reason: String| QueryError::Remote {
        partition: p,
        reason,
    };
    match r.status {
        200 => serde_json::from_slice(&r.body).map_err(|e| bad(e.to_string())),
        503 => Err(QueryError::Moving { partition: p }),
        s => Err(bad(format!(
            "status {s}: {}",
            String::from_utf8_lossy(&r.body)
        ))),
    }
}

/// Reads other processors' outboxes for the timeline pull path.
pub struct RemoteOutboxes(pub Arc<Routing>);

/// The internal outbox answer.
#[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct OutboxesAnswer {
    /// Per author: `[author, [[ts, post_id], ...]]`, posts newest first.
    #[schema(schema_with = outboxes_schema)]
    pub outboxes: Vec<(u64, Vec<(u64, u64)>)>,
}

/// The internal post records answer.
#[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct PostsAnswer {
    /// Each id's record in the state's encoding, as hex, or null when the
    /// partition holds none; in the order asked.
    pub posts: Vec<Option<String>>,
}

/// The internal engagement answer.
#[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct EngagementAnswer {
    /// Per id, in the order asked: `[likes, reposts, replies]`, or with a
    /// viewer `[liked, reposted, 0]` (flags as 1 or 0).
    #[schema(schema_with = outboxes_schema)]
    pub engaged: Vec<(u64, u64, u64)>,
}

/// `bytes` as lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Inverse of [`to_hex`].
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    s.len().is_multiple_of(2).then_some(())?;
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// [`OutboxesAnswer::outboxes`]: an array of `[author, pairs]` arrays.
fn outboxes_schema() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(utoipa::openapi::schema::ArrayBuilder::new())
        .build()
}

impl Remote for RemoteOutboxes {
    fn outboxes(
        &self,
        authors: &[UserId],
        from: (Ts, PostId),
        limit: usize,
    ) -> Result<Outboxes, QueryError> {
        let routing = &self.0;
        let mut by_partition: BTreeMap<Partition, Vec<u64>> = BTreeMap::new();
        for a in authors {
            by_partition
                .entry(routing.partition(*a))
                .or_default()
                .push(a.0);
        }
        // One request per processor: group the partitions by owner.
        let mut by_owner: BTreeMap<String, (Partition, Vec<u64>)> = BTreeMap::new();
        for (p, list) in by_partition {
            let owner = routing.owner(p)?;
            let e = by_owner.entry(owner).or_insert((p, Vec::new()));
            e.1.extend(list);
        }
        let mut out = Vec::with_capacity(authors.len());
        for (_, (p, list)) in by_owner {
            let ids: Vec<String> = list.iter().map(u64::to_string).collect();
            let path = format!(
                "/v1/internal/outboxes?authors={}&from_ts={}&from_post={}&limit={limit}",
                ids.join(","),
                from.0 .0,
                from.1 .0
            );
            let answer: OutboxesAnswer = answer_of(routing, p, &path)?;
            out.extend(answer.outboxes.into_iter().map(|(a, posts)| {
                (
                    UserId(a),
                    posts.into_iter().map(|(t, p)| (Ts(t), PostId(p))).collect(),
                )
            }));
        }
        Ok(out)
    }

    fn engagement(&self, at: Partition, asked: Engagement<'_>) -> Result<Vec<Engaged>, QueryError> {
        let (ids, viewer) = match asked {
            Engagement::Counts(ids) => (ids, String::new()),
            Engagement::Flags(v, ids) => (ids, format!("&viewer={v}")),
        };
        let list: Vec<String> = ids.iter().map(|(a, p)| format!("{a}:{p}")).collect();
        let path = format!("/v1/internal/engagement?ids={}{viewer}", list.join(","));
        let answer: EngagementAnswer = answer_of(&self.0, at, &path)?;
        if answer.engaged.len() != ids.len() {
            return Err(QueryError::Remote {
                partition: at,
                reason: format!("{} answers for {} ids", answer.engaged.len(), ids.len()),
            });
        }
        Ok(answer.engaged)
    }

    fn unreachable(&self, at: Partition) -> Option<Duration> {
        let owner = self.0.owners.serving(at)?;
        self.0.is_unreachable(&owner).then_some(UNREACHABLE_FOR)
    }

    fn post(&self, (author, post_id): PostRef) -> Result<Option<PostVal>, QueryError> {
        let p = self.0.partition(author);
        let path = format!("/v1/internal/posts?ids={author}:{post_id}");
        let answer: PostsAnswer = answer_of(&self.0, p, &path)?;
        let bad = |reason: String| QueryError::Remote {
            partition: p,
            reason,
        };
        match answer.posts.as_slice() {
            [None] => Ok(None),
            [Some(hex)] => from_hex(hex)
                .and_then(|b| PostVal::decode(&b))
                .map(Some)
                .ok_or_else(|| bad(format!("a post record that does not decode: {hex}"))),
            other => Err(bad(format!("{} records for one id", other.len()))),
        }
    }
}
