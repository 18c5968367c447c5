//! Views as of an earlier log time (`as_of`, docs/http-api.md, "Earlier states"):
//! the read of a state the node's [`crate::api::query::Rewind`] builds,
//! and pages that link pages of the same time.

use super::errors::ApiError;
use super::handlers::read;
use super::params::{params, user_id, Params};
use super::Api;
use crate::api::query::{self, QueryError, Reader, Rewind};
use crate::core::event::Ts;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;

/// [`read`], or with `as_of`, the same read of the state as of that log
/// time (built from the log on the first request for it).
pub(super) async fn read_at<T: Send + 'static>(
    api: &Arc<Api>,
    as_of: Option<u64>,
    f: impl FnOnce(&Reader) -> Result<T, QueryError> + Send + 'static,
) -> Result<T, ApiError> {
    let Some(t) = as_of else {
        return read(api, f).await;
    };
    let rewind = rewind_of(api)?;
    tokio::task::spawn_blocking(move || f(&rewind.at(Ts(t))?))
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::from)
}

/// The node's rewind, or the refusal of a node that has none.
fn rewind_of(api: &Api) -> Result<Arc<dyn Rewind>, ApiError> {
    api.node.rewind().ok_or_else(|| {
        ApiError::bad(
            "no_history",
            "this processor answers no view as of an earlier time (as_of needs the embedded log)",
        )
    })
}

/// `GET /v1/users/{id}/timeline/changes?from=T1&to=T2`: what entered and
/// left the timeline between two log times.
pub(super) async fn changes(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    q: Params,
) -> Result<Response, ApiError> {
    let (user, p) = (user_id(&id)?, params(q, &crate::api::reads::CHANGES)?);
    let (from, to) = p.span()?;
    let rewind = rewind_of(&api)?;
    let answer = tokio::task::spawn_blocking(move || {
        let (before, after) = (rewind.at(Ts(from))?, rewind.at(Ts(to))?);
        query::changes((&before, &after), user, (from, to))
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(ApiError::from)?;
    Ok(Json(answer).into_response())
}

/// Makes the `Link` header of a page as of `as_of` link pages as of it.
pub(super) fn link_as_of(resp: &mut Response, as_of: Option<u64>) {
    let Some(t) = as_of else { return };
    let header = resp
        .headers()
        .get(header::LINK)
        .and_then(|v| v.to_str().ok());
    if let Some(v) = header.map(|v| v.replace("?limit=", &format!("?as_of={t}&limit="))) {
        if let Ok(v) = HeaderValue::from_str(&v) {
            resp.headers_mut().insert(header::LINK, v);
        }
    }
}
