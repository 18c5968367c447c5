//! The OpenAPI document against the router, the table of reads and the
//! handlers' limits.

use super::*;

// Proves the document has exactly the router's routes (an embedded processor's, all but the internal ones it answers 404), each with a unique operationId, and every paged route's limit filled in from the code.
#[test]
fn operations_are_named_and_limits_filled_in() {
    let cfg = ApiConfig {
        max_limit: 123,
        ..ApiConfig::default()
    };
    let doc: serde_json::Value = serde_json::from_str(&document(&cfg, true)).unwrap();
    let documented: std::collections::BTreeSet<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let routed: std::collections::BTreeSet<&str> = super::super::ROUTES.iter().copied().collect();
    assert_eq!(
        documented, routed,
        "the document's paths are the router's routes"
    );
    let embedded: serde_json::Value = serde_json::from_str(&document(&cfg, false)).unwrap();
    let embedded = embedded["paths"].as_object().unwrap();
    let served: std::collections::BTreeSet<&str> = routed
        .iter()
        .copied()
        .filter(|r| !r.starts_with(INTERNAL))
        .collect();
    let embedded = embedded.keys().map(String::as_str).collect();
    assert_eq!(served, embedded, "embedded: no internal route");
    let mut ids = std::collections::BTreeSet::new();
    for route in super::super::ROUTES {
        let item = &doc["paths"][*route];
        let methods = ["get", "post", "delete"];
        for m in methods.iter().filter(|m| !item[**m].is_null()) {
            let id = item[*m]["operationId"].as_str();
            assert!(
                id.is_some_and(|i| ids.insert(i.to_string())),
                "{m} {route}: {id:?}"
            );
        }
        // A route's reads are its GET; a POST-only route has its POST.
        let op = match item["get"].is_null() {
            true => &item["post"],
            false => &item["get"],
        };
        assert!(!op.is_null(), "{route}: no GET or POST");
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

// Proves every read's route documents exactly the parameters the table of reads says it takes (the ones the handler parses with).
#[test]
fn documented_parameters_are_the_table_of_reads() {
    let doc: serde_json::Value =
        serde_json::from_str(&document(&ApiConfig::default(), false)).unwrap();
    for read in crate::api::reads::ALL {
        let params = doc["paths"][read.route]["get"]["parameters"].as_array();
        let documented: std::collections::BTreeSet<&str> = params
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "query")
            .filter_map(|p| p["name"].as_str())
            .collect();
        // A parameter the route's path holds is not a query parameter.
        let takes = read
            .takes
            .iter()
            .copied()
            .filter(|p| !read.route.contains(&format!("{{{p}}}")))
            .collect();
        assert_eq!(documented, takes, "{}", read.route);
    }
}

// Proves --string-ids is stated in the document: the answers' id fields are strings there.
#[test]
fn string_ids_are_documented() {
    let cfg = ApiConfig {
        string_ids: true,
        ..ApiConfig::default()
    };
    let doc: serde_json::Value = serde_json::from_str(&document(&cfg, true)).unwrap();
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
