//! The map names every module: ARCHITECTURE.md's "Every module" tables
//! (`src/`, and the bench crate's `benches/src/`) are rendered here from
//! the tree, each module with the first sentence of its own `//!` comment,
//! so a module added, moved or described anew shows in the map or fails
//! this test.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every module file under `dir`, sorted: test modules (`tests.rs`,
/// `*_tests.rs`) and the crate roots left out.
fn modules(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    // A folder's own module first, then its files and folders by name.
    entries.sort_by_key(|p| (!p.ends_with("mod.rs"), p.clone()));
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            modules(&path, out);
        } else if name.ends_with(".rs")
            && name != "tests.rs"
            && !name.ends_with("_tests.rs")
            && !["lib.rs", "main.rs"].contains(&name.as_str())
        {
            out.push(path);
        }
    }
}

/// The first sentence of a file's `//!` comment, on one line.
fn first_sentence(text: &str) -> String {
    let mut joined = String::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("//!") else {
            break;
        };
        let rest = rest.trim();
        if rest.is_empty() {
            break;
        }
        if !joined.is_empty() {
            joined.push(' ');
        }
        joined.push_str(rest);
    }
    let end = joined
        .match_indices(". ")
        .map(|(i, _)| i + 1)
        .next()
        .unwrap_or(joined.len());
    // An intra-doc link's target is rustdoc's, not a page's: its text stays.
    let mut s = joined[..end].to_string();
    while let Some(at) = s.find("](") {
        match s[at..].find(')') {
            Some(close) => s.replace_range(at + 1..at + close + 1, ""),
            None => break,
        }
    }
    s.replace('|', "\\|")
}

/// A table ARCHITECTURE.md shows: a row per module under `under` (`src`
/// or `benches/src`), by path from there (a folder module as `folder/`),
/// with its first sentence.
fn rendered(under: &str) -> String {
    let src = root().join(under);
    let mut files = Vec::new();
    modules(&src, &mut files);
    let mut t = String::from("| Module | What it is |\n|---|---|\n");
    for path in files {
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let rel = match rel.strip_suffix("/mod.rs") {
            Some(folder) => format!("{folder}/"),
            None => rel,
        };
        let text = std::fs::read_to_string(&path).unwrap();
        t += &format!("| `{rel}` | {} |\n", first_sentence(&text));
    }
    t
}

/// Proves ARCHITECTURE.md's tables of modules name every module of `src/` and of the bench crate (`benches/src/`) with the first sentence its file says of itself.
#[test]
fn the_map_names_every_module() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    for under in ["src", "benches/src"] {
        let table = rendered(under);
        assert!(
            map.contains(&table),
            "ARCHITECTURE.md should hold, for {under}/:\n{table}"
        );
    }
}

/// Proves the first sentence is cut at its end and pipes are escaped for the table.
#[test]
fn first_sentences_are_cut_at_their_end() {
    let text =
        "//! One `a | b` [`c`](x::c) thing,\n//! on two lines. More.\n//!\n//! Later.\nuse x;";
    assert_eq!(
        first_sentence(text),
        "One `a \\| b` [`c`] thing, on two lines."
    );
    assert_eq!(first_sentence("use x;"), "");
}
