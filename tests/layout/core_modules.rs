//! The core's own modules use each other without a cycle: the dispatch hub
//! (`apply`) calls the rule modules, the rule modules call lower ones, and
//! nothing calls back up (ARCHITECTURE.md, "Inside the core").

use super::graph::{self, Arrows};
use super::{blank_non_code, sources, Source};
use std::collections::BTreeMap;

/// The module a file of the core belongs to: its first path segment
/// (`apply.rs` → `apply`, `repost/aggregate.rs` → `repost`).
fn module_of(rel: &str) -> String {
    rel.split('/')
        .next()
        .unwrap()
        .trim_end_matches(".rs")
        .to_string()
}

/// Whether a file is test code only (its uses are not the core's).
fn test_only(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap();
    name == "tests.rs" || name.ends_with("_tests.rs") || name == "testkit.rs"
}

/// The names the core's root re-exports, each with the module it comes
/// from (`pub use effect::{Ctx, Effect}` → `Ctx` and `Effect` from
/// `effect`).
fn reexports(root_code: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for stmt in root_code.split(';') {
        let Some(path) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let module = path.split("::").next().unwrap().trim().to_string();
        let rest = &path[module.len()..];
        let idents = rest.split(|c: char| !(c.is_alphanumeric() || c == '_'));
        for name in idents.filter(|n| !n.is_empty() && n != &"self") {
            names.insert(name.to_string(), module.clone());
        }
    }
    names
}

/// The core's modules each module uses, with one place of each use:
/// `crate::X` paths, grouped or not, and `super::` chains that reach the
/// core's root (`super::X` in `apply.rs`, `super::super::X` in
/// `repost/aggregate.rs`); a name the root re-exports counts for its
/// module. Inline `#[cfg(test)] mod tests` blocks are left out.
fn core_arrows(files: &[Source]) -> Arrows {
    let root = files.iter().find(|s| s.rel == "mod.rs").unwrap();
    let modules: Vec<String> = files
        .iter()
        .filter(|s| s.rel != "mod.rs" && !test_only(&s.rel))
        .map(|s| module_of(&s.rel))
        .collect();
    let reexported = reexports(&root.code);
    let mut arrows = Arrows::new();
    for s in files
        .iter()
        .filter(|s| s.rel != "mod.rs" && !test_only(&s.rel))
    {
        let from = module_of(&s.rel);
        let code = match s.code.find("#[cfg(test)]\nmod tests {") {
            Some(at) => &s.code[..at],
            None => &s.code[..],
        };
        let depth = s.rel.matches('/').count() + 1 - usize::from(s.rel.ends_with("mod.rs"));
        let to_root = "super::".repeat(depth);
        let mut heads = graph::path_heads(code, "crate::");
        heads.extend(
            graph::path_heads(code, &to_root)
                .into_iter()
                .filter(|(n, _)| n != "super"),
        );
        for (name, line) in heads {
            let to = reexported.get(&name).cloned().unwrap_or(name);
            if to != from && modules.contains(&to) {
                arrows
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| format!("src/core/{}:{line}", s.rel));
            }
        }
    }
    arrows
}

// Proves the core's modules use each other without a cycle (a cycle is named with one use of each of its arrows).
#[test]
fn no_cycles_between_the_cores_modules() {
    let files: Vec<Source> = sources("src/core");
    let arrows = core_arrows(&files);
    assert!(
        arrows.contains_key("apply"),
        "the hub's uses were not found"
    );
    if let Some(cycle) = graph::first_cycle(&arrows) {
        panic!(
            "a cycle between the core's modules:\n{}",
            graph::describe(&cycle, &arrows)
        );
    }
}

// Proves the core's check finds a cycle made of a grouped import, a re-exported name and a `super::super::` path, and skips test code.
#[test]
fn the_cores_check_finds_a_cycle_of_grouped_reexported_and_nested_uses() {
    let file = |rel: &str, code: &str| Source {
        rel: rel.into(),
        part: "core".into(),
        raw: String::new(),
        code: blank_non_code(code),
    };
    let files = vec![
        file(
            "mod.rs",
            "pub mod a;\npub mod b;\npub use b::{Thing, other};\n",
        ),
        file("a.rs", "use crate::{\n    c::x,\n    Thing,\n};\n"),
        file("b/mod.rs", "mod inner;\n"),
        file(
            "b/inner.rs",
            "use super::sibling;\nfn f() { super::super::c::y(); }\n",
        ),
        file(
            "c.rs",
            "// crate::b in a comment\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n",
        ),
        file("c/tests.rs", "use crate::a;\n"),
    ];
    let arrows = core_arrows(&files);
    assert_eq!(arrows["a"]["b"], "src/core/a.rs:3");
    assert_eq!(arrows["a"]["c"], "src/core/a.rs:2");
    assert_eq!(arrows["b"]["c"], "src/core/b/inner.rs:2");
    assert!(
        !arrows.contains_key("c"),
        "test code and comments are not uses: {arrows:?}"
    );
    assert!(graph::first_cycle(&arrows).is_none());
    let mut with_back = arrows.clone();
    with_back
        .entry("c".into())
        .or_default()
        .insert("a".into(), "here".into());
    assert_eq!(
        graph::first_cycle(&with_back).unwrap(),
        ["a", "b", "c", "a"]
    );
}
