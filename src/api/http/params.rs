//! A route's query parameters and user id, parsed strictly by the table
//! of reads ([`crate::api::reads`]): an unknown parameter, a malformed
//! number or a limit out of range is a 400 naming what was wrong.

use super::errors::ApiError;
use super::Api;
use crate::api::reads::{self, BadParam, Read};
use crate::core::event::UserId;
use axum::extract::rejection::QueryRejection;
use axum::extract::Query;

pub(super) type Params = Result<Query<Vec<(String, String)>>, QueryRejection>;

use reads::Params as PageParams;

impl From<BadParam> for ApiError {
    fn from(e: BadParam) -> ApiError {
        ApiError::bad(e.code, e.message)
    }
}

/// The parameters of a request for `read`, parsed strictly.
pub(super) fn params(p: Params, read: &Read) -> Result<PageParams, ApiError> {
    let Query(pairs) = p?;
    Ok(reads::parse(read, pairs)?)
}

/// The page size asked for, at most the API's largest.
pub(super) fn limit(api: &Api, p: &PageParams, default: usize) -> Result<usize, ApiError> {
    Ok(p.limit(default, api.cfg.max_limit)?)
}

pub(super) fn user_id(s: &str) -> Result<UserId, ApiError> {
    Ok(reads::user_id(s)?)
}

/// A paged route's user, page size, cursor and time (`as_of`), checked.
pub(super) type PageRequest = (UserId, usize, Option<String>, Option<u64>);

pub(super) fn page_request(
    api: &Api,
    id: &str,
    q: Params,
    read: &Read,
) -> Result<PageRequest, ApiError> {
    let (user, p) = (user_id(id)?, params(q, read)?);
    let l = limit(api, &p, crate::api::query::DEFAULT_LIMIT)?;
    Ok((user, l, p.cursor, p.as_of))
}
