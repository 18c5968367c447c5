//! `--string-ids`: answers carry ids as strings of their decimal digits
//! (`"post_id":"77"`), as Mastodon and Twitter send them, for clients that
//! hold numbers as doubles (JavaScript loses ids above 2^53). Timestamps
//! stay numbers. Off by default: API v1 answers carry numbers.

use serde_json::Value;

/// The fields of an answer that hold ids (`via` and `by`: the users an
/// explain answer names).
pub const ID_FIELDS: &[&str] = &["post_id", "author", "user", "via", "by"];

/// Whether a route's answers are rewritten: the public views, not the
/// stream (which writes its own events), the internal routes (between
/// processors, numbers), or the operational ones.
pub fn applies_to(route: &str) -> bool {
    route.starts_with("/v1/") && !route.starts_with("/v1/internal/") && !route.ends_with("/stream")
}

/// `body` (a JSON answer) with every id field's number written as a
/// string; a body that is not JSON is returned unchanged.
pub fn stringify(body: &[u8]) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    walk(&mut v);
    serde_json::to_vec(&v).ok()
}

fn walk(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, field) in map.iter_mut() {
                match field {
                    Value::Number(n) if ID_FIELDS.contains(&k.as_str()) => {
                        *field = Value::String(n.to_string());
                    }
                    other => walk(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(walk),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves ids become strings wherever they are nested, and timestamps, cursors and counts stay as they are.
    #[test]
    fn ids_become_strings_and_nothing_else_changes() {
        let body = br#"{"items":[{"post_id":18446744073709551615,"author":2,"ts":3}],"next_cursor":"x","user":9,"followers":4}"#;
        let out: Value = serde_json::from_slice(&stringify(body).unwrap()).unwrap();
        assert_eq!(
            out,
            serde_json::json!({"items":[{"post_id":"18446744073709551615","author":"2","ts":3}],"next_cursor":"x","user":"9","followers":4})
        );
        assert!(applies_to("/v1/users/{id}/timeline") && applies_to("/v1/counters"));
        assert!(!applies_to("/v1/users/{id}/timeline/stream"));
        assert!(!applies_to("/v1/internal/outboxes") && !applies_to("/metrics"));
    }
}
