//! Internal routes of a consistent cut (Kafka mode; docs/kafka.md,
//! "Consistent cuts"): a coordinator (`verify`, `checkpoint` in Kafka mode)
//! holds every partition's `events` at one offset, waits until the group
//! has applied everything up to there, reads each partition's digests, and
//! lets them go on. Served by the processor that serves the partition.

use super::errors::ApiError;
use super::params::Params;
use super::{Api, NodeError};
use crate::api::query::Reader;
use crate::core::position::Positions;
use crate::core::Partition;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// One partition at a cut: where it is applied up to, and where its
/// `events` are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CutAnswer {
    /// The partition.
    #[schema(value_type = u32)]
    pub partition: Partition,
    /// Applied (durable, outputs acknowledged) up to these `[events,
    /// effects]` offsets.
    #[schema(value_type = [u64; 2])]
    pub applied: Positions,
    /// Where its task holds its `events`, as the task last acknowledged
    /// (it reads nothing past it from then on).
    pub held_at: Option<u64>,
}

/// What a processor does for a cut, for the partitions it serves.
pub trait Cuts: Send + Sync {
    /// Holds partition `p`'s `events` at offset `at` for up to `ttl`
    /// (asking again renews it); `None` when `p` is not served here.
    fn hold(&self, p: Partition, at: u64, ttl: Duration) -> Option<CutAnswer>;
    /// Where partition `p` is; `None` when it is not served here.
    fn state(&self, p: Partition) -> Option<CutAnswer>;
    /// Lets partition `p` read on.
    fn release(&self, p: Partition);
    /// The digests of every view of partition `p`, read through `reader`
    /// (`ops::digest`'s `PartitionDigest`, as JSON); `None` when it is not
    /// served here.
    fn digest(&self, reader: &Reader, p: Partition)
        -> Result<Option<serde_json::Value>, NodeError>;
    /// Writes a checkpoint of partition `p` into the group's checkpoint
    /// directory: `{"path", "checkpoint"}` (`checkpoint.json`'s contents);
    /// `None` when it is not served here.
    fn checkpoint(
        &self,
        p: Partition,
        cut: Option<u64>,
    ) -> Result<Option<serde_json::Value>, NodeError>;
}

/// The longest hold a request may ask for.
const MAX_HOLD: Duration = Duration::from_secs(600);

/// `partition`, and the hold's `events` and `ttl_ms` when `hold` is set;
/// a checkpoint's optional `cut` (the id of the cut it is part of).
fn parse(q: Params, hold: bool) -> Result<(Partition, u64, Duration), ApiError> {
    parse_cut(q, hold).map(|(p, e, t, _)| (p, e, t))
}

fn parse_cut(q: Params, hold: bool) -> Result<(Partition, u64, Duration, Option<u64>), ApiError> {
    let Query(pairs) = q?;
    let (mut partition, mut events, mut ttl, mut cut) = (None, None, None, None);
    for (k, v) in pairs {
        let n = v.parse::<u64>().map_err(|_| {
            ApiError::bad(
                "bad_query",
                format!("{k} must be a whole number, got {v:?}"),
            )
        })?;
        match k.as_str() {
            "partition" => partition = Some(Partition(n as u32)),
            "events" if hold => events = Some(n),
            "ttl_ms" if hold => ttl = Some(Duration::from_millis(n).min(MAX_HOLD)),
            "cut" if !hold => cut = Some(n),
            _ => {
                return Err(ApiError::bad(
                    "bad_query",
                    format!("unknown parameter {k:?}"),
                ))
            }
        }
    }
    match (partition, hold, events, ttl) {
        (Some(p), false, _, _) => Ok((p, 0, Duration::ZERO, cut)),
        (Some(p), true, Some(e), Some(t)) => Ok((p, e, t, None)),
        _ => Err(ApiError::bad(
            "bad_query",
            match hold {
                true => "partition, events and ttl_ms are required",
                false => "partition is required",
            },
        )),
    }
}

fn cuts(api: &Api) -> Result<Arc<dyn Cuts>, ApiError> {
    api.node.cuts().ok_or_else(|| ApiError {
        status: axum::http::StatusCode::NOT_FOUND,
        code: "not_found",
        message: "this processor takes no part in cuts".into(),
    })
}

fn not_here(p: Partition) -> ApiError {
    ApiError::unavailable(format!("partition {p} is not served here"))
}

/// `GET`: where the partition is.
pub(super) async fn cut_state(
    State(api): State<Arc<Api>>,
    q: Params,
) -> Result<Response, ApiError> {
    let (p, _, _) = parse(q, false)?;
    let c = cuts(&api)?;
    Ok(Json(c.state(p).ok_or_else(|| not_here(p))?).into_response())
}

/// `POST`: hold the partition's `events`.
pub(super) async fn cut_hold(State(api): State<Arc<Api>>, q: Params) -> Result<Response, ApiError> {
    let (p, at, ttl) = parse(q, true)?;
    let c = cuts(&api)?;
    Ok(Json(c.hold(p, at, ttl).ok_or_else(|| not_here(p))?).into_response())
}

/// `DELETE`: let the partition read on.
pub(super) async fn cut_release(
    State(api): State<Arc<Api>>,
    q: Params,
) -> Result<Response, ApiError> {
    let (p, _, _) = parse(q, false)?;
    cuts(&api)?.release(p);
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

/// `POST`: a checkpoint of the partition, written now.
pub(super) async fn cut_checkpoint(
    State(api): State<Arc<Api>>,
    q: Params,
) -> Result<Response, ApiError> {
    let (p, _, _, cut) = parse_cut(q, false)?;
    let c = cuts(&api)?;
    let d = tokio::task::spawn_blocking(move || c.checkpoint(p, cut))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| match e.disposition {
            crate::core::Disposition::Stop => ApiError {
                status: axum::http::StatusCode::CONFLICT,
                code: "no_checkpoints",
                message: e.to_string(),
            },
            _ => ApiError::internal(e),
        })?;
    Ok(Json(d.ok_or_else(|| not_here(p))?).into_response())
}

/// `GET`: the partition's digests, read now.
pub(super) async fn cut_digest(
    State(api): State<Arc<Api>>,
    q: Params,
) -> Result<Response, ApiError> {
    let (p, _, _) = parse(q, false)?;
    let c = cuts(&api)?;
    let d = tokio::task::spawn_blocking(move || c.digest(&api.reader.current(), p))
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::internal)?;
    Ok(Json(d.ok_or_else(|| not_here(p))?).into_response())
}
