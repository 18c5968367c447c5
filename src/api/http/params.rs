//! A route's query parameters and user id, parsed strictly: an unknown
//! parameter, a malformed number or a limit out of range is a 400 naming
//! what was wrong.

use super::errors::ApiError;
use super::Api;
use crate::api::query::RepostMode;
use crate::core::event::UserId;
use axum::extract::rejection::QueryRejection;
use axum::extract::Query;

pub(super) type Params = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// The query parameters a route accepts, parsed strictly.
#[derive(Default)]
pub(super) struct PageParams {
    pub(super) limit: Option<usize>,
    pub(super) cursor: Option<String>,
    pub(super) newer_than: Option<String>,
    pub(super) ids: Option<String>,
    pub(super) reposts: Option<RepostMode>,
    pub(super) explain: bool,
    pub(super) author: Option<u64>,
    pub(super) post_id: Option<u64>,
    pub(super) as_of: Option<u64>,
    pub(super) from: Option<u64>,
    pub(super) to: Option<u64>,
}

/// A whole-number query parameter `k`.
pub(super) fn number(k: &str, v: &str) -> Result<u64, ApiError> {
    v.parse().map_err(|_| {
        ApiError::bad(
            "bad_query",
            format!("{k} must be a whole number, got {v:?}"),
        )
    })
}

pub(super) fn params(p: Params, allowed: &[&str]) -> Result<PageParams, ApiError> {
    let Query(pairs) = p?;
    let mut out = PageParams::default();
    for (k, v) in pairs {
        match k.as_str() {
            _ if !allowed.contains(&k.as_str()) => {
                return Err(ApiError::bad(
                    "bad_query",
                    format!(
                        "unknown parameter {k:?} (this route takes: {})",
                        allowed.join(", ")
                    ),
                ))
            }
            "limit" => {
                out.limit = Some(v.parse().map_err(|_| {
                    ApiError::bad(
                        "bad_limit",
                        format!("limit must be a whole number, got {v:?}"),
                    )
                })?)
            }
            "cursor" => out.cursor = Some(v),
            "newer_than" => out.newer_than = Some(v),
            "reposts" => {
                out.reposts = Some(RepostMode::parse(&v).ok_or_else(|| {
                    ApiError::bad(
                        "bad_query",
                        format!("reposts must be newest, first or none, got {v:?}"),
                    )
                })?)
            }
            "ids" => out.ids = Some(v),
            "explain" => {
                out.explain = match v.as_str() {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => {
                        return Err(ApiError::bad(
                            "bad_query",
                            format!("explain must be 1 or 0, got {v:?}"),
                        ))
                    }
                }
            }
            "author" => out.author = Some(number(&k, &v)?),
            "post_id" => out.post_id = Some(number(&k, &v)?),
            "as_of" => out.as_of = Some(number(&k, &v)?),
            "from" => out.from = Some(number(&k, &v)?),
            "to" => out.to = Some(number(&k, &v)?),
            other => {
                return Err(ApiError::internal(format!(
                    "parameter {other:?} is allowed but not handled"
                )))
            }
        }
    }
    Ok(out)
}

pub(super) fn limit(api: &Api, p: &PageParams, default: usize) -> Result<usize, ApiError> {
    let l = p.limit.unwrap_or(default.min(api.cfg.max_limit));
    if l == 0 || l > api.cfg.max_limit {
        return Err(ApiError::bad(
            "bad_limit",
            format!(
                "limit must be between 1 and {} (the maximum), got {l}",
                api.cfg.max_limit
            ),
        ));
    }
    Ok(l)
}

pub(super) fn user_id(s: &str) -> Result<UserId, ApiError> {
    match s.parse::<u64>() {
        Ok(0) => Err(ApiError::bad("bad_user", "user ids start at 1, got 0")),
        Ok(id) => Ok(UserId(id)),
        Err(_) => Err(ApiError::bad(
            "bad_user",
            format!("a user id is a whole number from 1, got {s:?}"),
        )),
    }
}

/// A paged route's user, page size, cursor and time (`as_of`), checked.
pub(super) type PageRequest = (UserId, usize, Option<String>, Option<u64>);

pub(super) fn page_request(api: &Api, id: &str, q: Params) -> Result<PageRequest, ApiError> {
    let (user, p) = (user_id(id)?, params(q, &["limit", "cursor", "as_of"])?);
    let l = limit(api, &p, crate::api::query::DEFAULT_LIMIT)?;
    Ok((user, l, p.cursor, p.as_of))
}
