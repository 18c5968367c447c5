//! Uses between modules, read from code with comments and literals
//! blanked: the first segment of every path under a prefix (`crate::X`,
//! grouped imports `crate::{X, Y::Z}` included, over any number of lines),
//! and the first cycle of a graph of such uses.

use std::collections::{BTreeMap, BTreeSet};

/// The arrows of a graph: from → (to → where the first such use is).
pub type Arrows = BTreeMap<String, BTreeMap<String, String>>;

/// The first segment of each path that starts with `prefix` at a word
/// boundary in `code`, with its 1-based line: `crate::a::b` gives `a`, and
/// `crate::{a::b, c, d::{e, f}}` gives `a`, `c` and `d`.
pub fn path_heads(code: &str, prefix: &str) -> Vec<(String, usize)> {
    let is_ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let line_at = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|ch| is_ident(ch) || ch == ':') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The group's items at its own depth: each one's first segment.
            let (mut depth, mut item_start) = (0usize, true);
            for (i, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && is_ident(c) && depth == 0 => {
                        let name: String =
                            group[i..].chars().take_while(|&c| is_ident(c)).collect();
                        found.push((name, line_at(at + prefix.len() + 1 + i)));
                        item_start = false;
                    }
                    c if !c.is_whitespace() => item_start = false,
                    _ => {}
                }
            }
        } else {
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                found.push((name, line_at(at)));
            }
        }
    }
    found
}

/// The first cycle found by a depth-first search from each node in turn
/// (the nodes of the cycle, the first repeated at the end), if any.
pub fn first_cycle(arrows: &Arrows) -> Option<Vec<String>> {
    fn visit(
        at: &str,
        arrows: &Arrows,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == at) {
            let mut cycle = path[i..].to_vec();
            cycle.push(at.to_string());
            return Some(cycle);
        }
        if !done.insert(at.to_string()) {
            return None;
        }
        path.push(at.to_string());
        for next in arrows.get(at).into_iter().flat_map(|m| m.keys()) {
            if let Some(c) = visit(next, arrows, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    arrows
        .keys()
        .find_map(|start| visit(start, arrows, &mut Vec::new(), &mut done))
}

/// A cycle as one line per arrow, each with the use that makes it.
pub fn describe(cycle: &[String], arrows: &Arrows) -> String {
    cycle
        .windows(2)
        .map(|w| format!("{} -> {} ({})", w[0], w[1], arrows[&w[0]][&w[1]]))
        .collect::<Vec<_>>()
        .join("\n")
}
