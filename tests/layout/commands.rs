//! The command lines of the documents' shell blocks, and the grammars
//! they are parsed with: the `feedlog` binary's, and the bench crate's
//! (`feedlog-bench`).

use super::{bench_args, cli, with_blocks, Doc};
use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches, ValueEnum};

/// The words of a shell command line up to its first operator (a pipe, a
/// redirection, `;`, `&`) or comment, with quotes and backslashes resolved;
/// an error when a quote is left open.
pub(super) fn shell_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '#' if word.is_none() => break,
            '|' | ';' | '&' | '<' | '>' => {
                // `2>file`: the descriptor is not a word of the command.
                let fd = matches!(c, '<' | '>')
                    && word
                        .as_ref()
                        .is_some_and(|w| w.chars().all(|d| d.is_ascii_digit()));
                if !fd {
                    words.extend(word.take());
                }
                return Ok(words);
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(q) => w.push(q),
                        None => return Err("a single quote is not closed".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                            w.push(chars.next().unwrap())
                        }
                        Some(q) => w.push(q),
                        None => return Err("a double quote is not closed".into()),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// The shell command lines of `doc`'s `sh`, `bash`, `shell` and `console`
/// blocks, each with the number of its first line: continuation lines
/// (`\` at the end) joined, a `console` block's `$ ` prompt stripped (its
/// other lines are output), here-documents left out.
pub(super) fn command_lines(doc: &Doc) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    let mut heredoc: Option<String> = None;
    for (n, line, block) in with_blocks(doc) {
        let Some(lang) = block else {
            found.extend(pending.take());
            continue;
        };
        if !["sh", "bash", "shell", "console"].contains(&lang.as_str()) {
            continue;
        }
        if let Some(end) = &heredoc {
            if line.trim() == end {
                heredoc = None;
            }
            continue;
        }
        let text = match pending.take() {
            Some((first, before)) => (first, format!("{before} {}", line.trim())),
            None if lang == "console" => match line.trim_start().strip_prefix("$ ") {
                Some(command) => (n, command.trim().to_string()),
                None => continue,
            },
            None => (n, line.trim().to_string()),
        };
        if let Some(at) = text.1.find("<<") {
            let tag = text.1[at + 2..].trim_start_matches('-');
            let tag = tag.split_whitespace().next().unwrap_or("");
            heredoc = Some(tag.trim_matches(['\'', '"']).to_string());
        }
        match text.1.strip_suffix('\\') {
            Some(head) => pending = Some((text.0, head.trim_end().to_string())),
            None => found.push(text),
        }
    }
    found.extend(pending);
    found
}

/// The arguments of a `feedlog` or `feedlog-bench` invocation (the
/// program's name first), or `None` when the command line runs something
/// else. Leading `NAME=value` assignments and `time` are skipped; the
/// binary is `feedlog` or `feedlog-bench`, a path ending in
/// `/release/feedlog` or `/release/feedlog-bench`, or `cargo run … -- ARGS`
/// (`feedlog-bench` when the words before `--` name it).
pub(super) fn feedlog_args(words: &[String]) -> Option<Vec<String>> {
    let is_assignment = |w: &String| {
        w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        })
    };
    let words: Vec<&String> = words
        .iter()
        .skip_while(|w| is_assignment(w) || *w == "time")
        .collect();
    let first = words.first()?;
    let program = |w: &str| {
        ["feedlog", "feedlog-bench"]
            .into_iter()
            .find(|p| w == *p || w.ends_with(&format!("/release/{p}")))
    };
    let (program, rest): (&str, Vec<String>) = if let Some(p) = program(first) {
        (p, words[1..].iter().map(|w| w.to_string()).collect())
    } else if *first == "cargo" && words.get(1).is_some_and(|w| *w == "run") {
        let dashes = words.iter().position(|w| *w == "--")?;
        let bench = words[..dashes]
            .iter()
            .any(|w| w.as_str() == "feedlog-bench");
        let p = if bench { "feedlog-bench" } else { "feedlog" };
        (
            p,
            words[dashes + 1..].iter().map(|w| w.to_string()).collect(),
        )
    } else {
        return None;
    };
    Some(std::iter::once(program.to_string()).chain(rest).collect())
}

/// `cmd` without its environment variables: the documents must parse as
/// written, whatever `FEEDLOG_*` the test runs under.
fn without_env(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| a.env(None::<&'static str>))
        .mut_subcommands(without_env)
}

/// The binary's grammar, without its environment variables.
pub(super) fn grammar() -> clap::Command {
    without_env(cli::args::Cli::command())
}

/// The bench crate's grammar (`feedlog-bench`), without its environment
/// variables.
pub(super) fn bench_grammar() -> clap::Command {
    without_env(bench_args::Cli::command())
}

/// Every bench `feedlog-bench` runs, by the name its command line gives it.
pub(super) fn bench_kinds() -> Vec<String> {
    bench_args::BenchKind::value_variants()
        .iter()
        .filter_map(|k| Some(k.to_possible_value()?.get_name().to_string()))
        .collect()
}

/// Parses `args` with the grammar of the binary `args[0]` names: the
/// chain of subcommands it names (for `feedlog-bench`, that name and the
/// bench), or clap's error (help and version requests count as parsed).
pub(super) fn parse(args: &[String]) -> Result<Vec<String>, String> {
    let bench = args.first().is_some_and(|p| p == "feedlog-bench");
    let matched = match bench {
        true => bench_grammar().try_get_matches_from(args),
        false => grammar().try_get_matches_from(args),
    };
    match matched {
        Ok(matches) if bench => {
            let cli = bench_args::Cli::from_arg_matches(&matches).map_err(|e| e.to_string())?;
            let kind = cli.kind.to_possible_value().ok_or("a hidden bench")?;
            Ok(vec![
                "feedlog-bench".to_string(),
                kind.get_name().to_string(),
            ])
        }
        Ok(matches) => {
            cli::args::Cli::from_arg_matches(&matches).map_err(|e| e.to_string())?;
            let mut chain = Vec::new();
            let mut at = &matches;
            while let Some((name, sub)) = at.subcommand() {
                chain.push(name.to_string());
                at = sub;
            }
            Ok(chain)
        }
        // A help or version request names no command it runs.
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            Ok(Vec::new())
        }
        Err(e) => Err(e.to_string().lines().next().unwrap_or("").to_string()),
    }
}

/// A command line, parsed: where it is, the line, and the subcommands it
/// names or why it does not parse.
pub(super) type Parsed = (String, String, Result<Vec<String>, String>);

/// Every `feedlog` and `feedlog-bench` command line of `doc`'s shell
/// blocks, parsed.
pub(super) fn parsed_commands(doc: &Doc) -> Vec<Parsed> {
    let mut out = Vec::new();
    for (n, line) in command_lines(doc) {
        let result = shell_words(&line).and_then(|words| match feedlog_args(&words) {
            Some(args) => parse(&args).map(Some),
            None => Ok(None),
        });
        match result {
            Ok(None) => {}
            Ok(Some(chain)) => out.push((doc.at(n), line, Ok(chain))),
            Err(e) => out.push((doc.at(n), line, Err(e))),
        }
    }
    out
}
