//! The API's error answer: `{"error":{"code","message"}}` with its status.

use crate::api::query::QueryError;
use axum::extract::rejection::QueryRejection;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

/// An error answer: `{"error":{"code","message"}}` with its status.
#[derive(Debug)]
pub struct ApiError {
    pub(super) status: StatusCode,
    pub(super) code: &'static str,
    pub(super) message: String,
}

impl ApiError {
    pub(super) fn bad(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code,
            message: message.into(),
        }
    }

    pub(super) fn internal(e: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %e, "request failed");
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "internal",
            message: e.to_string(),
        }
    }

    /// 503 with `Retry-After: 1`: a partition is moving between processors.
    pub(super) fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "unavailable",
            message: message.into(),
        }
    }
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> ApiError {
        match e {
            QueryError::Store(_) | QueryError::State(_) | QueryError::Internal(_) => {
                ApiError::internal(e)
            }
            QueryError::HistoryGone { .. } => ApiError {
                status: StatusCode::GONE,
                code: e.code(),
                message: e.to_string(),
            },
            QueryError::Moving { .. }
            | QueryError::Elsewhere { .. }
            | QueryError::Remote { .. } => ApiError::unavailable(e.to_string()),
            QueryError::NoPost { .. } => ApiError {
                status: StatusCode::NOT_FOUND,
                code: e.code(),
                message: e.to_string(),
            },
            _ => ApiError::bad(e.code(), e.to_string()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> ApiError {
        ApiError::bad("bad_query", format!("invalid query string: {e}"))
    }
}

/// An error answer's body.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub(super) struct ErrorBody {
    /// What went wrong.
    error: ErrorDetail,
}

/// An error's code and message.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct ErrorDetail {
    /// `bad_user`, `bad_limit`, `bad_cursor`, `bad_query`, `not_found`,
    /// `unknown_post`, `deleted`, `not_live`, `method_not_allowed`,
    /// `unavailable` or `internal`.
    #[schema(value_type = String, pattern = "^[a-z_]+$")]
    code: &'static str,
    /// For a person to read.
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        };
        let mut r = (self.status, Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}
