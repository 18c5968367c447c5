//! The API description served at `/openapi.json`: `openapi.json` (paths,
//! schemas, operation ids) with the page limits filled in from the code
//! and the configuration, so the document states the defaults the handlers
//! apply and the maximum this server enforces. `tests/http.rs` checks the
//! served document against the handlers' answers.

use super::ApiConfig;
use crate::api::query::{DEFAULT_LIMIT, DEFAULT_RECENT};

/// The hand-written part of the description.
const TEMPLATE: &str = include_str!("openapi.json");

/// The page size a route answers with when the request names no `limit`
/// (`None`: the route takes no `limit`).
pub fn default_limit(route: &str) -> Option<usize> {
    match route {
        "/v1/users/{id}/followers/recent" => Some(DEFAULT_RECENT),
        "/v1/users/{id}/timeline"
        | "/v1/users/{id}/posts"
        | "/v1/users/{id}/followers"
        | "/v1/users/{id}/followees" => Some(DEFAULT_LIMIT),
        _ => None,
    }
}

/// The description as served with `cfg`: every public route's `limit`
/// parameter carries the handler's default and `cfg.max_limit`.
pub fn document(cfg: &ApiConfig) -> String {
    let mut doc: serde_json::Value =
        serde_json::from_str(TEMPLATE).expect("openapi.json is valid JSON (a unit test reads it)");
    if let Some(paths) = doc["paths"].as_object_mut() {
        for (route, item) in paths.iter_mut() {
            let Some(default) = default_limit(route) else {
                continue;
            };
            let Some(params) = item["get"]["parameters"].as_array_mut() else {
                continue;
            };
            for p in params.iter_mut().filter(|p| p["name"] == "limit") {
                p["schema"]["default"] = default.min(cfg.max_limit).into();
                p["schema"]["minimum"] = 1.into();
                p["schema"]["maximum"] = cfg.max_limit.into();
            }
        }
    }
    if cfg.string_ids {
        // The answers' ids are strings (`--string-ids`).
        if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
            for schema in schemas.values_mut() {
                let Some(props) = schema["properties"].as_object_mut() else {
                    continue;
                };
                for field in ["post_id", "author", "user"] {
                    if let Some(p) = props.get_mut(field) {
                        *p = serde_json::json!({"type": "string", "pattern": "^[1-9][0-9]*$"});
                    }
                }
            }
        }
    }
    doc.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every operation of the template has a unique operationId and every paged route's limit is filled in from the code.
    #[test]
    fn operations_are_named_and_limits_filled_in() {
        let cfg = ApiConfig {
            max_limit: 123,
            ..ApiConfig::default()
        };
        let doc: serde_json::Value = serde_json::from_str(&document(&cfg)).unwrap();
        let mut ids = std::collections::BTreeSet::new();
        for route in super::super::ROUTES {
            let op = &doc["paths"][*route]["get"];
            let id = op["operationId"].as_str();
            assert!(
                id.is_some_and(|i| ids.insert(i.to_string())),
                "{route}: {id:?}"
            );
            let limit = op["parameters"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["name"] == "limit"));
            let id_type = &doc["components"]["schemas"]["Post"]["properties"]["post_id"]["type"];
            assert_eq!(id_type, "integer");
            match (default_limit(route), limit) {
                (Some(d), Some(l)) => {
                    assert_eq!(l["schema"]["default"], d.min(123), "{route}");
                    assert_eq!(l["schema"]["maximum"], 123, "{route}");
                }
                (None, None) => {}
                // The internal route's limit is required and has no default.
                (None, Some(_)) if *route == "/v1/internal/outboxes" => {}
                (d, l) => panic!("{route}: default {d:?}, parameter {l:?}"),
            }
        }
    }

    // Proves --string-ids is stated in the document: the answers' id fields are strings there.
    #[test]
    fn string_ids_are_documented() {
        let cfg = ApiConfig {
            string_ids: true,
            ..ApiConfig::default()
        };
        let doc: serde_json::Value = serde_json::from_str(&document(&cfg)).unwrap();
        let s = &doc["components"]["schemas"];
        for (schema, field) in [
            ("Post", "post_id"),
            ("Post", "author"),
            ("UserItem", "user"),
            ("Counters", "user"),
        ] {
            assert_eq!(
                s[schema]["properties"][field]["type"], "string",
                "{schema}.{field}"
            );
        }
    }
}
