//! Kafka mode: any processor's API answers for any user.
//!
//! A request for a user whose partition this processor serves is answered
//! here. One whose partition another processor serves is forwarded to it
//! (its address comes from the `members` topic) and its answer returned
//! as is; a timeline stream is redirected instead (307). A partition that
//! is moving — revoked, not yet assigned, or replaying before it serves —
//! answers 503 with `Retry-After`, never a wrong or empty view. A forwarded
//! request is never forwarded again: if ownership moved on meanwhile, the
//! caller gets 503 and retries.
//!
//! Timeline pages that pull from followees' outboxes read the outboxes of
//! other processors' partitions through [`RemoteOutboxes`]: one internal
//! request per processor per page (`GET /v1/internal/outboxes`).

use super::client;
use super::Owners;
use crate::api::query::{Outboxes, QueryError, Remote};
use crate::core::event::{PostId, Ts, UserId};
use crate::core::partition::partition_for;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Header marking a request one processor forwarded to another.
pub const FORWARDED: &str = "x-feedlog-forwarded";

/// How long a forwarded request may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Who serves which partition (in Kafka mode, from the `members` topic).
pub struct Routing {
    owners: Arc<dyn Owners>,
    partitions: u32,
    /// `Bearer <token>` for the other processors' APIs, when they need one.
    authorization: Option<String>,
}

impl Routing {
    /// Routing over `owners`; `token` is the group's API
    /// token, sent with every forwarded request.
    pub fn new(owners: Arc<dyn Owners>, partitions: u32, token: Option<&str>) -> Routing {
        Routing {
            owners,
            partitions,
            authorization: token.map(|t| format!("Bearer {t}")),
        }
    }

    /// The API address of the processor serving partition `p`;
    /// [`QueryError::Moving`] while nobody serves it.
    pub fn owner(&self, p: u32) -> Result<String, QueryError> {
        self.owners
            .serving(p)
            .ok_or(QueryError::Moving { partition: p })
    }

    /// `GET` at the owner of partition `p`, marked as forwarded.
    pub fn get(&self, p: u32, path_and_query: &str) -> Result<client::Response, QueryError> {
        let api = self.owner(p)?;
        let mut headers = vec![(FORWARDED, "1")];
        if let Some(auth) = &self.authorization {
            headers.push(("Authorization", auth.as_str()));
        }
        client::get(&api, path_and_query, &headers, TIMEOUT).map_err(|e| QueryError::Remote {
            partition: p,
            reason: e.to_string(),
        })
    }

    /// The partition of `user`.
    pub fn partition(&self, user: UserId) -> u32 {
        partition_for(user, self.partitions)
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
        let mut by_partition: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for a in authors {
            by_partition
                .entry(routing.partition(*a))
                .or_default()
                .push(a.0);
        }
        // One request per processor: group the partitions by owner.
        let mut by_owner: BTreeMap<String, (u32, Vec<u64>)> = BTreeMap::new();
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
            let r = routing.get(p, &path)?;
            let bad = |reason: String| QueryError::Remote {
                partition: p,
                reason,
            };
            match r.status {
                200 => {}
                503 => return Err(QueryError::Moving { partition: p }),
                s => {
                    return Err(bad(format!(
                        "status {s}: {}",
                        String::from_utf8_lossy(&r.body)
                    )))
                }
            }
            let answer: OutboxesAnswer =
                serde_json::from_slice(&r.body).map_err(|e| bad(e.to_string()))?;
            out.extend(answer.outboxes.into_iter().map(|(a, posts)| {
                (
                    UserId(a),
                    posts.into_iter().map(|(t, p)| (Ts(t), PostId(p))).collect(),
                )
            }));
        }
        Ok(out)
    }
}
