//! `GET /ui`: a page to look at timelines with — pick a user, page through
//! their home timeline, watch it update over the timeline stream, click an
//! entry for its `why`, ask why a post is not there. One static file built
//! into the binary (no build step, nothing fetched from elsewhere); it
//! reads the public API only, with the token the user types when the API
//! has one.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The page.
const PAGE: &str = include_str!("ui.html");

pub(super) async fn ui() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        PAGE,
    )
        .into_response()
}
