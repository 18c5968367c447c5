//! Views as of an earlier log time (`as_of`, README "Earlier states"):
//! the read of a state the node's [`crate::api::query::Rewind`] builds,
//! and pages that link pages of the same time.

use super::errors::ApiError;
use super::handlers::read;
use super::Api;
use crate::api::query::{QueryError, Reader};
use axum::http::{header, HeaderValue};
use axum::response::Response;
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
    let rewind = api.node.rewind().ok_or_else(|| {
        ApiError::bad(
            "no_history",
            "this processor answers no view as of an earlier time (as_of needs the embedded log)",
        )
    })?;
    tokio::task::spawn_blocking(move || f(&rewind.at(crate::core::event::Ts(t))?))
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::from)
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
