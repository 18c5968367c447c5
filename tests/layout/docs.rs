//! The documents against the tree: in README.md, ARCHITECTURE.md,
//! BENCHMARKS.md, state/README.md and every page under docs/, every relative
//! link reaches a file (and, when it names an anchor, a heading of that
//! file), every `feedlog` command line of a shell block parses with the
//! binary's own grammar (and every `feedlog-bench` one with the bench
//! crate's), every script and source path they name exists, and
//! every page and section of docs/ that the code cites is there.

use crate::{bench_args, cli};

// The command lines of the shell blocks (a file of its own, for length).
#[path = "commands.rs"]
mod commands;

use commands::{
    bench_kinds, command_lines, feedlog_args, grammar, parse, parsed_commands, shell_words,
};
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One markdown document: its path from the root and its lines.
struct Doc {
    rel: String,
    lines: Vec<String>,
}

impl Doc {
    /// Where the document's line `n` (from 0) is, for a failure message.
    fn at(&self, n: usize) -> String {
        format!("{}:{}", self.rel, n + 1)
    }
}

/// The documents checked: the three at the root, the state layout, and
/// every `docs/*.md`.
fn documents() -> Vec<Doc> {
    let root_docs = [
        "README.md",
        "ARCHITECTURE.md",
        "BENCHMARKS.md",
        "state/README.md",
    ];
    let mut rels: Vec<String> = root_docs.map(String::from).to_vec();
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    pages.sort();
    rels.extend(pages);
    rels.into_iter()
        .map(|rel| {
            let text =
                std::fs::read_to_string(root().join(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let lines = text.lines().map(String::from).collect();
            Doc { rel, lines }
        })
        .collect()
}

/// Each line of `doc` with its number and the language of the fenced code
/// block it is in (`None`: prose; `Some("")`: a block without one). The
/// fence lines themselves are left out.
fn with_blocks(doc: &Doc) -> Vec<(usize, &str, Option<String>)> {
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for (n, line) in doc.lines.iter().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            block = match block {
                Some(_) => None,
                None => Some(info.split_whitespace().next().unwrap_or("").to_string()),
            };
            continue;
        }
        out.push((n, line.as_str(), block.clone()));
    }
    out
}

/// A line of prose without its inline code spans (`…`).
fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// The inline code spans of a line of prose.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// GitHub's anchor for a heading: lowercase, spaces to `-`, punctuation
/// other than `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of every heading of `doc` (a repeated heading's later ones
/// get `-1`, `-2`, … as GitHub gives them).
fn anchors(doc: &Doc) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (_, line, block) in with_blocks(doc) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if block.is_some() || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim_end_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while !found.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    found
}

/// The targets of the markdown links on a line of prose: inline
/// `[text](target "title")` and reference definitions `[name]: target`.
fn link_targets(line: &str) -> Vec<String> {
    let prose = without_code_spans(line);
    let mut targets = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.trim_matches(['<', '>']).to_string());
        rest = &after[end..];
    }
    let trimmed = prose.trim_start();
    if let (true, Some(close)) = (trimmed.starts_with('['), trimmed.find("]:")) {
        if let Some(target) = trimmed[close + 2..].split_whitespace().next() {
            targets.push(target.to_string());
        }
    }
    targets
}

/// `rel` (a path from the root) joined to the relative `path` and
/// normalised; `None` when it climbs out of the repository.
fn resolve(rel: &str, path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    let base = Path::new(rel).parent().unwrap_or(Path::new(""));
    for part in base.join(path).components() {
        match part {
            Component::ParentDir if !out.pop() => return None,
            Component::Normal(p) => out.push(p),
            _ => {}
        }
    }
    Some(out)
}

/// Every failure of the links of `doc`: a target that does not exist, an
/// anchor that names no heading of its markdown target.
fn link_failures(doc: &Doc, all: &[Doc]) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line, block) in with_blocks(doc) {
        if block.is_some() {
            continue;
        }
        for target in link_targets(line) {
            if ["http://", "https://", "mailto:"]
                .iter()
                .any(|s| target.starts_with(s))
            {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                Some(PathBuf::from(&doc.rel))
            } else {
                resolve(&doc.rel, path)
            };
            let Some(file) = file.filter(|f| root().join(f).exists()) else {
                found.push(format!("{}: link to {target}: no such file", doc.at(n)));
                continue;
            };
            let Some(anchor) = anchor else { continue };
            let name = file.to_string_lossy().into_owned();
            let Some(target_doc) = all.iter().find(|d| d.rel == name) else {
                found.push(format!(
                    "{}: link to {target}: {name} is not a checked markdown document",
                    doc.at(n)
                ));
                continue;
            };
            if !anchors(target_doc).contains(anchor) {
                found.push(format!(
                    "{}: link to {target}: {name} has no heading with the anchor #{anchor}",
                    doc.at(n)
                ));
            }
        }
    }
    found
}

fn assert_none(what: &str, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} {what}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Proves every relative link of the documents reaches a file, and every anchor a heading of its markdown target.
#[test]
fn every_link_reaches_its_file_and_heading() {
    let all = documents();
    let failures = all.iter().flat_map(|d| link_failures(d, &all)).collect();
    assert_none("broken link(s)", failures);
}

/// Proves every `feedlog` command line in the documents' shell blocks parses with the binary's grammar, and every `feedlog-bench` one with the bench crate's.
#[test]
fn every_documented_command_parses() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        for (at, line, result) in parsed_commands(&doc) {
            checked += 1;
            if let Err(e) = result {
                failures.push(format!("{at}: `{line}` does not parse: {e}"));
            }
        }
    }
    assert!(checked > 40, "only {checked} feedlog command lines found");
    assert_none("command line(s) that do not parse", failures);
}

/// Proves docs/cli.md shows a parsed example of every command of the binary (every subcommand path, `help` aside) and of every bench of `feedlog-bench`.
#[test]
fn the_cli_page_shows_every_command() {
    fn leaves(cmd: &clap::Command, path: Vec<String>, out: &mut BTreeSet<Vec<String>>) {
        let subs: Vec<&clap::Command> = cmd
            .get_subcommands()
            .filter(|s| s.get_name() != "help")
            .collect();
        if subs.is_empty() {
            out.insert(path);
            return;
        }
        for s in subs {
            let mut p = path.clone();
            p.push(s.get_name().to_string());
            leaves(s, p, out);
        }
    }
    let mut commands = BTreeSet::new();
    leaves(&grammar(), Vec::new(), &mut commands);
    let page = documents()
        .into_iter()
        .find(|d| d.rel == "docs/cli.md")
        .expect("docs/cli.md exists");
    let shown: BTreeSet<Vec<String>> = parsed_commands(&page)
        .into_iter()
        .filter_map(|(_, _, r)| r.ok())
        .collect();
    let mut missing: Vec<String> = commands
        .iter()
        .filter(|c| !shown.contains(*c))
        .map(|c| format!("docs/cli.md: no example of `feedlog {}`", c.join(" ")))
        .collect();
    for kind in bench_kinds() {
        if !shown.contains(&vec!["feedlog-bench".to_string(), kind.clone()]) {
            missing.push(format!("docs/cli.md: no example of `feedlog-bench {kind}`"));
        }
    }
    assert_none("command(s) without an example", missing);
}

/// The repository paths a line of prose or of a code block names: scripts
/// (`scripts/x.sh`, `./test.sh`) anywhere, and files and folders under
/// `src/`, `tests/`, `topics/`, `scripts/` and `.ci/` in code spans.
fn named_paths(line: &str, block: bool) -> Vec<String> {
    let mut found = Vec::new();
    let clean = |w: &str| {
        w.trim_matches(|c: char| !(c.is_alphanumeric() || "._/-".contains(c)))
            .to_string()
    };
    for word in line.split(|c: char| c.is_whitespace() || "`()[],;:\"'".contains(c)) {
        let w = clean(word);
        let script = w.ends_with(".sh")
            && (w.starts_with("scripts/") || (w.starts_with("./") && !w[2..].contains('/')));
        if script {
            found.push(w.trim_start_matches("./").to_string());
        }
    }
    if !block {
        for span in code_spans(line) {
            let path = span.split("::").next().unwrap_or("");
            let under = ["src/", "tests/", "topics/", "scripts/", ".ci/"];
            let plain = path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c));
            if plain && under.iter().any(|u| path.starts_with(u)) {
                found.push(path.to_string());
            }
        }
    }
    found
}

/// Proves every script and source path the documents name (`scripts/x.sh`, `./test.sh`, `src/…`, `tests/…` in code spans) exists.
#[test]
fn every_named_script_and_path_exists() {
    let mut failures = Vec::new();
    for doc in documents() {
        for (n, line, block) in with_blocks(&doc) {
            let mut seen = BTreeSet::new();
            for path in named_paths(line, block.is_some()) {
                if seen.insert(path.clone()) && !root().join(&path).exists() {
                    failures.push(format!("{}: names {path}, which does not exist", doc.at(n)));
                }
            }
        }
    }
    assert_none("missing path(s)", failures);
}

/// The pages under `docs/` that a text cites, each with the section named
/// after it in quotes, if any (`docs/design.md, "Message kinds"`, also
/// across a line break of a comment): (line from 0, page, section).
fn citations(text: &str) -> Vec<(usize, String, Option<String>)> {
    let strip = |l: &str| {
        let t = l.trim_start();
        let t = ["//!", "///", "//", "#"]
            .iter()
            .find_map(|m| t.strip_prefix(m))
            .unwrap_or(t);
        t.trim().to_string()
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let next = lines.get(n + 1).map(|l| strip(l)).unwrap_or_default();
        for (at, _) in line.match_indices("docs/") {
            let rest = format!("{} {next}", &line[at + 5..]);
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "_-".contains(*c))
                .collect();
            let Some(after) = rest[name.len()..].strip_prefix(".md") else {
                continue;
            };
            // A section follows the page after `, ` or ` (`.
            let named = after.starts_with(',') || after.starts_with(" (");
            let after = after.trim_start_matches([',', '(', ' ']);
            let after = after.strip_prefix('\\').unwrap_or(after);
            let section = (after.strip_prefix('"'))
                .filter(|_| named)
                .and_then(|s| s.split(['"', '\\']).next())
                .map(String::from);
            found.push((n, format!("docs/{name}.md"), section));
        }
    }
    found
}

/// Proves every page under `docs/` that the code, the tests and the other repository files cite exists, with the section they name.
#[test]
fn every_cited_page_and_section_exists() {
    let all = documents();
    let mut files = Vec::new();
    let mut dirs = vec![root().join("src"), root().join("tests")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                files.push(path);
            }
        }
    }
    // This file names pages by construction.
    files.retain(|f| !f.ends_with("tests/layout/docs.rs"));
    for other in [
        "docker-compose.yml",
        "Dockerfile",
        "topics/events.schema.json",
    ] {
        files.push(root().join(other));
    }
    files.sort();
    let mut failures = Vec::new();
    for file in files {
        let rel = file.strip_prefix(root()).unwrap().to_string_lossy();
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, page, section) in citations(&text) {
            let Some(doc) = all.iter().find(|d| d.rel == page) else {
                failures.push(format!(
                    "{rel}:{}: cites {page}, which does not exist",
                    n + 1
                ));
                continue;
            };
            if let Some(s) = section.filter(|s| !anchors(doc).contains(&slug(s))) {
                failures.push(format!(
                    "{rel}:{}: cites {page}, \"{s}\", which has no such heading",
                    n + 1
                ));
            }
        }
    }
    assert_none("citation(s) of missing pages or sections", failures);
}

/// Proves the helpers above find what they look for: slugs, link targets, shell words, invocations and a parse failure.
#[test]
fn the_checks_find_what_they_look_for() {
    assert_eq!(
        slug("Explain: why is this here, and why `that` is not"),
        "explain-why-is-this-here-and-why-that-is-not"
    );
    assert_eq!(slug("Kafka mode (the group)"), "kafka-mode-the-group");
    assert_eq!(
        link_targets("see [a](x.md#b \"t\") and `[c](no.md)`, [d](https://e)"),
        vec!["x.md#b", "https://e"]
    );
    let words = shell_words(r#"FOO=1 feedlog --data 'a b' query "x \"y\"" -  # note"#).unwrap();
    assert_eq!(
        words,
        ["FOO=1", "feedlog", "--data", "a b", "query", "x \"y\"", "-"]
    );
    assert_eq!(
        shell_words("feedlog log dump 2>/dev/null").unwrap().len(),
        3
    );
    assert!(shell_words("feedlog 'open").is_err());
    let args = feedlog_args(&shell_words("cargo run --release -- states").unwrap());
    assert_eq!(
        args,
        Some(vec!["feedlog".to_string(), "states".to_string()])
    );
    assert_eq!(feedlog_args(&shell_words("curl -s x").unwrap()), None);
    let bench = feedlog_args(&shell_words("target/release/feedlog-bench --data d redis").unwrap());
    let bench = bench.unwrap();
    assert_eq!(bench[0], "feedlog-bench");
    assert_eq!(
        parse(&bench),
        Ok(vec!["feedlog-bench".into(), "redis".into()])
    );
    assert!(parse(&["feedlog".into(), "bench".into(), "redis".into()]).is_err());
    assert!(parse(&["feedlog-bench".into(), "no-such-bench".into()]).is_err());
    assert!(parse(&["feedlog".into(), "no-such-command".into()]).is_err());
    assert!(parse(&["feedlog".into(), "run".into(), "--help".into()]).is_ok());
    let run = ["feedlog", "--data", "d", "run", "--until-idle"].map(String::from);
    assert_eq!(parse(&run), Ok(vec!["run".to_string()]));
    let doc = Doc {
        rel: "docs/x.md".into(),
        lines: [
            "# Top",
            "```sh",
            "feedlog \\",
            "  states | wc -l",
            "```",
            "[up](../README.md#feedlog)",
        ]
        .map(String::from)
        .to_vec(),
    };
    assert_eq!(
        command_lines(&doc),
        vec![(2, "feedlog states | wc -l".to_string())]
    );
    assert!(anchors(&doc).contains("top"));
    assert_eq!(
        resolve("docs/x.md", "../README.md"),
        Some(PathBuf::from("README.md"))
    );
    let cited = citations("// see (docs/design.md,\n// \"Message kinds\") and docs/cli.md");
    let design = (
        "docs/design.md".to_string(),
        Some("Message kinds".to_string()),
    );
    assert_eq!(cited[0], (0, design.0, design.1));
    assert_eq!(cited[1], (1, "docs/cli.md".to_string(), None));
}
