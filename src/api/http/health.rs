//! The operational routes: liveness, readiness and metrics.

use super::errors::ApiError;
use super::{render_metrics, Api};
use crate::core::metrics::PartitionLag;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::sync::Arc;

/// The liveness answer.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Health {
    /// Always `ok`.
    #[schema(value_type = String, pattern = "^ok$")]
    status: &'static str,
}

pub(super) async fn healthz() -> Response {
    Json(Health { status: "ok" }).into_response()
}

/// The readiness answer.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Ready {
    /// Whether the processor is ready.
    ready: bool,
    /// Records not yet applied, both input logs, all partitions.
    lag: u64,
    /// The most records not yet applied for ready (`--ready-lag`).
    max_lag: u64,
    /// Why not ready, when it is not the lag: the log does not hold what the
    /// state has applied, or cannot be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    problems: Vec<String>,
}

/// What keeps the state from matching its logs: a position past a log's end
/// (a log truncated or replaced under the state).
fn log_problems(lags: &[PartitionLag]) -> Vec<String> {
    let mut out = Vec::new();
    for l in lags {
        for (topic, pos, end) in [
            ("events", l.at.events, l.end.events),
            ("effects", l.at.effects, l.end.effects),
        ] {
            if pos > end {
                out.push(format!(
                    "partition {}: the state has applied {topic} up to offset {pos} but the log ends at {end}",
                    l.partition
                ));
            }
        }
    }
    out
}

pub(super) async fn readyz(State(api): State<Arc<Api>>) -> Result<Response, ApiError> {
    let a = api.clone();
    let lags = tokio::task::spawn_blocking(move || a.lag())
        .await
        .map_err(ApiError::internal)?;
    let (lag, problems) = match lags {
        Ok(lags) => (
            lags.iter().map(PartitionLag::total).sum(),
            log_problems(&lags),
        ),
        // An unreadable (corrupt) log: not ready, and say why.
        Err(e) => (0, vec![e.message]),
    };
    let ready = lag <= api.cfg.ready_lag && problems.is_empty();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = Ready {
        ready,
        lag,
        max_lag: api.cfg.ready_lag,
        problems,
    };
    Ok((status, Json(body)).into_response())
}

pub(super) async fn metrics_route(State(api): State<Arc<Api>>) -> Result<Response, ApiError> {
    let a = api.clone();
    let text = tokio::task::spawn_blocking(move || render_metrics(&a))
        .await
        .map_err(ApiError::internal)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        text,
    )
        .into_response())
}
