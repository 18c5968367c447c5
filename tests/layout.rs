//! The layout's rules (ARCHITECTURE.md), checked on the source tree: which
//! part may use which, where the RocksDB and Kafka crates may appear, no
//! cycles between parts, no file over 600 lines, and no function over 100
//! lines without a `// Long:` comment above it saying why. The documents
//! against the tree are checked in `layout/docs.rs`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

// The binary's command line, compiled in from its sources for the
// documents' checks: the grammar (`cli::args::Cli`) belongs to the binary,
// not to the library. Most of it is unused here.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../src/cli/mod.rs"]
mod cli;

// The grammar of the bench crate's binary (`feedlog-bench`), for the same
// checks of the documents' `feedlog-bench` command lines.
#[allow(dead_code)]
#[path = "../benches/src/args.rs"]
mod bench_args;

#[path = "layout/docs.rs"]
mod docs;

#[path = "layout/modules.rs"]
mod modules;

#[path = "layout/graph.rs"]
mod graph;

#[path = "layout/core_modules.rs"]
mod core_modules;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The parts: one folder each under `src/`.
const PARTS: [&str; 8] = [
    "core", "state", "log", "task", "ops", "api", "ingest", "cli",
];

/// One source file: its path under `src/` (or `tests/`), its part, and its
/// text with comments and the insides of string and char literals blanked
/// (newlines kept), so only code is checked.
struct Source {
    rel: String,
    part: String,
    raw: String,
    code: String,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

fn sources(under: &str) -> Vec<Source> {
    let base = root().join(under);
    let mut files = Vec::new();
    rust_files(&base, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let rel = path
                .strip_prefix(&base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let part = rel
                .split('/')
                .next()
                .unwrap()
                .trim_end_matches(".rs")
                .to_string();
            let raw = std::fs::read_to_string(&path).unwrap();
            let code = blank_non_code(&raw);
            Source {
                rel,
                part,
                raw,
                code,
            }
        })
        .collect()
}

/// Blanks comments and the contents of string, raw string and char
/// literals; keeps every newline so line numbers stay.
fn blank_non_code(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < c.len() {
        let next = |k: usize| c.get(i + k).copied();
        if c[i] == '/' && next(1) == Some('/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && next(1) == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (next(1) == Some('"') || next(1) == Some('#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // A raw string: r"…", r#"…"#, …
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            if c.get(i + 1 + hashes) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            out.push('"');
            i += 2 + hashes;
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            while i < c.len() && c[i..].iter().take(close.len()).ne(close.iter()) {
                out.push(blank(c[i]));
                i += 1;
            }
            out.push('"');
            i += close.len();
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c[i] == '\'' && (next(1) == Some('\\') || next(2) == Some('\'')) {
            // A char literal ('x', '\n', '\u{..}'); a lone quote is a lifetime.
            out.push('\'');
            i += 1;
            while i < c.len() && c[i] != '\'' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
            }
            out.push('\'');
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Every `crate::X` / `feedlog::X` path's first segment X that names a
/// part (grouped imports included), with its line.
fn part_uses(s: &Source) -> Vec<(String, usize)> {
    let mut found: Vec<(String, usize)> = ["crate::", "feedlog::"]
        .iter()
        .flat_map(|prefix| graph::path_heads(&s.code, prefix))
        .filter(|(name, _)| PARTS.contains(&name.as_str()))
        .collect();
    found.sort_by_key(|(_, line)| *line);
    found
}

/// Lines of `s` that use the external crate `krate` (`krate::` in code).
fn crate_uses(s: &Source, krate: &str) -> Vec<usize> {
    let pat = format!("{krate}::");
    s.code
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            line.match_indices(&pat).any(|(at, _)| {
                !line[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|ch| ch.is_alphanumeric() || ch == '_' || ch == ':')
            })
        })
        .map(|(n, _)| n + 1)
        .collect()
}

fn violations(found: Vec<String>) {
    assert!(
        found.is_empty(),
        "{} violation(s):\n{}",
        found.len(),
        found.join("\n")
    );
}

// Proves the pure core is a crate of its own whose dependencies do no I/O: src/core/Cargo.toml names only serialization and the codecs' libraries (Cargo then keeps the core from the shell's parts, RocksDB, Kafka, tokio, the HTTP stack and clap).
#[test]
fn the_core_is_pure() {
    let manifest: toml::Table = std::fs::read_to_string(root().join("src/core/Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let deps: Vec<&str> = manifest["dependencies"]
        .as_table()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let pure = [
        "bincode",
        "postcard",
        "rustc-hash",
        "serde",
        "serde_json",
        "thiserror",
    ];
    assert_eq!(
        deps, pure,
        "the core's dependencies, in src/core/Cargo.toml"
    );
    let (lib, name) = (&manifest["lib"]["path"], &manifest["package"]["name"]);
    assert_eq!(
        (lib.as_str(), name.as_str()),
        (Some("mod.rs"), Some("feedlog-core"))
    );
}

// Proves rdkafka appears only under src/log/kafka/, and rocksdb only under src/state/ and in the bench crate (benches/, whose baselines are raw RocksDB; it reaches Kafka through the library).
#[test]
fn kafka_and_rocksdb_stay_in_their_parts() {
    let mut found = Vec::new();
    let rules: [(&str, &str, &[&str]); 4] = [
        ("src", "rdkafka", &["log/kafka/"]),
        ("src", "rocksdb", &["state/"]),
        ("benches", "rdkafka", &[]),
        ("benches", "rocksdb", &["src/"]),
    ];
    for (dir, krate, allowed) in rules {
        for s in sources(dir) {
            if allowed.iter().any(|a| s.rel.starts_with(a)) {
                continue;
            }
            for line in crate_uses(&s, krate) {
                found.push(format!("{dir}/{}:{line} uses {krate}", s.rel));
            }
        }
    }
    violations(found);
}

// Proves the read API uses only the core and the state: the log, the runners and the operations reach it through traits it owns.
#[test]
fn the_api_reads_through_its_own_traits() {
    let mut found = Vec::new();
    for s in sources("src").iter().filter(|s| s.part == "api") {
        for (part, line) in part_uses(s) {
            if !["api", "core", "state"].contains(&part.as_str()) {
                found.push(format!("src/{}:{line} uses crate::{part}", s.rel));
            }
        }
    }
    violations(found);
}

// Proves the parts' uses of each other form no cycle (a cycle is named with one use of each of its arrows).
#[test]
fn no_cycles_between_parts() {
    let mut arrows = graph::Arrows::new();
    for s in sources("src") {
        if !PARTS.contains(&s.part.as_str()) {
            continue; // lib.rs and main.rs: the roots
        }
        for (part, line) in part_uses(&s) {
            if part != s.part {
                arrows
                    .entry(s.part.clone())
                    .or_default()
                    .entry(part)
                    .or_insert_with(|| format!("src/{}:{line}", s.rel));
            }
        }
    }
    if let Some(cycle) = graph::first_cycle(&arrows) {
        panic!(
            "a cycle between parts:\n{}",
            graph::describe(&cycle, &arrows)
        );
    }
}

/// The table of ARCHITECTURE.md ("The parts"): part → the parts it may use.
fn architecture_table() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut table = BTreeMap::new();
    // Only the section "The parts": other sections have tables too.
    let section = text
        .lines()
        .skip_while(|l| *l != "## The parts")
        .skip(1)
        .take_while(|l| !l.starts_with("## "));
    for line in section.filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let part = cells[1].trim_matches('`').to_string();
        let uses: BTreeSet<String> = if cells[2].starts_with("all") {
            PARTS
                .iter()
                .filter(|p| **p != part)
                .map(|p| p.to_string())
                .collect()
        } else {
            cells[2]
                .split(',')
                .map(|w| w.trim().to_string())
                .filter(|w| PARTS.contains(&w.as_str()))
                .collect()
        };
        table.insert(part, uses);
    }
    table
}

// Proves every part uses only the parts ARCHITECTURE.md's table allows it, and the table names every part (the document and the tree agree).
#[test]
fn parts_use_what_the_architecture_allows() {
    let table = architecture_table();
    let named: BTreeSet<&str> = table.keys().map(String::as_str).collect();
    assert_eq!(
        named,
        PARTS.into_iter().collect(),
        "ARCHITECTURE.md's table of parts"
    );
    let mut found = Vec::new();
    for s in sources("src") {
        let Some(allowed) = table.get(&s.part) else {
            continue; // lib.rs and main.rs: the roots
        };
        for (part, line) in part_uses(&s) {
            if part != s.part && !allowed.contains(&part) {
                found.push(format!(
                    "src/{}:{line}: {} uses {part}, which ARCHITECTURE.md does not allow",
                    s.rel, s.part
                ));
            }
        }
    }
    violations(found);
}

// Proves BENCHMARKS.md stays a reference of the latest figures (at most 300 lines); the runs go to docs/benchmark-runs.md.
#[test]
fn benchmarks_is_a_reference() {
    let n = std::fs::read_to_string(root().join("BENCHMARKS.md"))
        .unwrap()
        .lines()
        .count();
    assert!(
        n <= 300,
        "BENCHMARKS.md: {n} lines; move runs to docs/benchmark-runs.md"
    );
}

// Proves no source or test file is over 600 lines.
#[test]
fn no_file_over_600_lines() {
    let mut found = Vec::new();
    for dir in ["src", "tests", "benches"] {
        if !root().join(dir).exists() {
            continue;
        }
        for s in sources(dir) {
            let n = s.raw.lines().count();
            if n > 600 {
                found.push(format!("{dir}/{}: {n} lines", s.rel));
            }
        }
    }
    violations(found);
}

/// Every function in `s` longer than `max` lines: (name, first line, lines).
fn long_functions(s: &Source, max: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = s.code.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = words.iter().position(|w| *w == "fn") else {
            continue;
        };
        let qualifiers = [
            "pub",
            "pub(crate)",
            "pub(super)",
            "async",
            "const",
            "unsafe",
            "extern",
        ];
        if !words[..at].iter().all(|w| qualifiers.contains(w)) || words.get(at + 1).is_none() {
            continue;
        }
        let name: String = words[at + 1]
            .chars()
            .take_while(|ch| ch.is_alphanumeric() || *ch == '_')
            .collect();
        // The body: from the first `{` to its match (a `;` first: no body).
        let (mut depth, mut started) = (0i32, false);
        let mut end = None;
        'scan: for (j, l) in lines.iter().enumerate().skip(i) {
            for ch in l.chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        started = true;
                    }
                    '}' => depth -= 1,
                    ';' if !started => break 'scan,
                    _ => {}
                }
                if started && depth == 0 {
                    end = Some(j);
                    break 'scan;
                }
            }
        }
        if let Some(end) = end {
            if end - i + 1 > max {
                found.push((name, i + 1, end - i + 1));
            }
        }
    }
    found
}

// Proves every function over 100 lines (in src/ and the bench crate) has a `// Long:` comment above it (among its doc comments and attributes) saying why.
#[test]
fn long_functions_say_why() {
    let mut found = Vec::new();
    for dir in ["src", "benches"] {
        for s in sources(dir) {
            let raw: Vec<&str> = s.raw.lines().collect();
            for (name, line, n) in long_functions(&s, 100) {
                let above = raw[..line - 1]
                    .iter()
                    .rev()
                    .map(|l| l.trim())
                    .take_while(|l| l.starts_with("//") || l.starts_with("#["));
                if !above.into_iter().any(|l| l.starts_with("// Long:")) {
                    found.push(format!("{dir}/{}:{line} fn {name}: {n} lines", s.rel));
                }
            }
        }
    }
    violations(found);
}

// Proves librdkafka's callbacks (client and consumer contexts) contain no unwrap, expect or panic: a panic there would cross the FFI boundary.
#[test]
fn kafka_callbacks_cannot_panic() {
    let mut found = Vec::new();
    for s in sources("src")
        .iter()
        .filter(|s| s.rel.starts_with("log/kafka/"))
    {
        let lines: Vec<&str> = s.code.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let l = lines[i].trim_start();
            let context_impl = l.starts_with("impl")
                && (l.contains("ConsumerContext for")
                    || l.contains("ClientContext for")
                    || l.contains("ProducerContext for"));
            if !context_impl {
                i += 1;
                continue;
            }
            let mut depth = 0i32;
            let start = i;
            loop {
                let line = lines[i];
                for bad in [".unwrap()", ".expect(", "panic!", "unreachable!", "[0]"] {
                    if line.contains(bad) {
                        found.push(format!("src/{}:{} `{bad}` in a callback", s.rel, i + 1));
                    }
                }
                depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
                i += 1;
                if (depth == 0 && i > start + 1 && lines[i - 1].contains('}')) || i == lines.len() {
                    break;
                }
            }
        }
    }
    violations(found);
}

// Proves the checks above see what they look for: a use, an external crate, a long function, a cycle-free graph are each found in a sample written to fail.
#[test]
fn the_checks_find_what_they_look_for() {
    let sample = Source {
        rel: "core/x.rs".into(),
        part: "core".into(),
        raw: String::new(),
        code: blank_non_code(
            "// crate::state in a comment\nuse crate::state::Store;\nlet s = \"rocksdb::DB\";\nlet x = rocksdb::DB::open();\nlet c = '{';\nlet r = r#\"crate::log\"#;\n",
        ),
    };
    assert_eq!(part_uses(&sample), vec![("state".to_string(), 2)]);
    assert_eq!(crate_uses(&sample, "rocksdb"), vec![4]);
    let body = (0..130).map(|_| "    x();\n").collect::<String>();
    let long = Source {
        rel: "core/y.rs".into(),
        part: "core".into(),
        raw: String::new(),
        code: blank_non_code(&format!("pub fn big() {{\n{body}}}\nfn small() {{}}\n")),
    };
    assert_eq!(
        long_functions(&long, 120),
        vec![("big".to_string(), 1, 132)]
    );
}
