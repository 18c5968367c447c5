//! Catch-up reads (`after=marker`, oldest first) checked against what the
//! oracle says is above the marker.

use super::{first_difference, first_items, Views};
use serde_json::Value;

/// A catch-up read (`view`: `catch-up` or `notifications-catch-up`) of
/// `u` from its marker, oldest first, against `want`: up to the top in
/// pages of `page` where little is unread, else its first page of 100
/// where up to 1,000 are (a deeper catch-up reads from the top for each
/// page: the cost of a check of every user of a real network).
pub(super) fn catch_up_matches(
    views: &impl Views,
    (view, u, page): (&str, u64, usize),
    want: Vec<Value>,
) -> Result<(), String> {
    let (limit, all) = match want.len() {
        n if n <= 40 => (page, true),
        n if n <= 1000 => (100, false),
        _ => (0, false),
    };
    let (mut got, mut after) = (Vec::new(), None::<String>);
    let mut more = limit > 0;
    while more {
        let p = views.get(view, u, limit, after.as_deref())?;
        let items = first_items(&p)?;
        got.extend(items.iter().cloned());
        more = all && !items.is_empty();
        after = p["prev_cursor"].as_str().map(str::to_string);
    }
    let want: Vec<Value> = want
        .into_iter()
        .take(if all { usize::MAX } else { limit })
        .collect();
    match got == want {
        true => Ok(()),
        false => Err(format!("{view} of {u}: {}", first_difference(&got, &want))),
    }
}
