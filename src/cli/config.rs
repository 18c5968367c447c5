//! One loader for every setting: a flag, else its `FEEDLOG_*` variable,
//! else its key in the `--config` TOML file (the flag's long name with `_`:
//! `inbox_cap` for `--inbox-cap`), else the default.
//!
//! Before the command line is parsed, each key of the file whose variable
//! is not set becomes that variable, so clap's own environment support
//! does the rest, for every command and both modes alike. A key that names
//! no flag with a variable is an error, never ignored. `kafka_options` is a
//! table (librdkafka's dotted keys), read by the Kafka settings themselves.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A key the Kafka settings read from the file as a table.
const TABLE_KEYS: [&str; 1] = ["kafka_options"];

/// The file named by `--config FILE` / `--config=FILE` in `argv`, else by
/// `FEEDLOG_CONFIG`.
fn config_path(argv: &[OsString]) -> Option<PathBuf> {
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        let a = a.to_string_lossy();
        if a == "--" {
            break;
        }
        if a == "--config" {
            return args.next().map(PathBuf::from);
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(p));
        }
    }
    std::env::var_os("FEEDLOG_CONFIG").map(PathBuf::from)
}

/// Every variable of `cmd` and its subcommands, with a flag that reads it
/// and the delimiter of its list, if it is one.
fn variables(cmd: &clap::Command, out: &mut BTreeMap<String, (String, Option<char>)>) {
    for a in cmd.get_arguments() {
        if let (Some(env), Some(long)) = (a.get_env(), a.get_long()) {
            let env = env.to_string_lossy().into_owned();
            out.entry(env)
                .or_insert_with(|| (long.to_string(), a.get_value_delimiter()));
        }
    }
    for sub in cmd.get_subcommands() {
        variables(sub, out);
    }
}

/// The file's settings as (key, variable, value), checked against `cli`:
/// every key names a flag with a variable (or is a table key), and every
/// value is a string, number, boolean or list of them.
pub fn settings_of(cli: &clap::Command, file: &Path) -> Result<Vec<(String, String, String)>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", file.display()))?;
    let mut vars = BTreeMap::new();
    variables(cli, &mut vars);
    // Every problem of the file at once, one a line.
    let one = |key: String, value: toml::Value| -> Result<(String, String, String)> {
        // By the flag's long name with `_` (`cors_origin` for
        // --cors-origin), or by its variable's name (`cors_origins`).
        let by_long = vars
            .iter()
            .find(|(_, (long, _))| long.replace('-', "_") == key)
            .map(|(var, _)| var.clone());
        let var = by_long.unwrap_or_else(|| format!("FEEDLOG_{}", key.to_ascii_uppercase()));
        let Some((long, delimiter)) = vars.get(&var).filter(|_| !key.contains('-')) else {
            bail!(
                "{}: unknown setting `{key}`: keys are the long flag names with `_` \
                 (`inbox_cap` for --inbox-cap); `feedlog help run` lists them",
                file.display()
            );
        };
        if long == "config" {
            bail!("{}: `config` cannot name another file", file.display());
        }
        let scalar = |v: &toml::Value| -> Result<String> {
            Ok(match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                _ => bail!(
                    "{}: `{key}` must be a string, number or boolean (or a list of them)",
                    file.display()
                ),
            })
        };
        let text = match &value {
            toml::Value::Array(items) => {
                let Some(d) = delimiter else {
                    bail!(
                        "{}: `{key}` (--{long}) takes one value, not a list",
                        file.display()
                    );
                };
                let items: Result<Vec<String>> = items.iter().map(scalar).collect();
                items?.join(&d.to_string())
            }
            v => scalar(v)?,
        };
        Ok((key, var, text))
    };
    let (mut out, mut problems) = (Vec::new(), Vec::new());
    for (key, value) in table {
        if TABLE_KEYS.contains(&key.as_str()) {
            continue;
        }
        match one(key, value) {
            Ok(setting) => out.push(setting),
            Err(e) => problems.push(format!("{e:#}")),
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    Ok(out)
}

/// Each setting of a file whose value `run` refuses, with clap's reason,
/// every one at once (`config check`): each is tried alone, its variable
/// set for one parse, unless the environment sets it (the environment
/// wins) or the environment alone is refused (that is said by the parse
/// of them all).
pub fn value_problems(settings: &[(String, String, String)]) -> Vec<String> {
    let parse = || {
        <super::args::Cli as clap::CommandFactory>::command()
            .try_get_matches_from(["feedlog", "run"])
            .map_err(|e| {
                let e = e.to_string();
                let line = e.lines().next().unwrap_or_default();
                line.trim_start_matches("error: ").to_string()
            })
    };
    if parse().is_err() {
        return Vec::new();
    }
    let mut problems = Vec::new();
    for (key, var, value) in settings {
        if std::env::var_os(var).is_some() {
            continue;
        }
        std::env::set_var(var, value);
        let parsed = parse();
        std::env::remove_var(var);
        if let Err(e) = parsed {
            problems.push(format!("`{key}`: {e}"));
        }
    }
    problems
}

/// Sets the variable of each setting in the `--config` file (if any) that
/// the environment does not set, before `argv` is parsed: flags, then
/// variables, then the file, then defaults.
pub fn file_into_env(cli: &clap::Command, argv: &[OsString]) -> Result<()> {
    let Some(file) = config_path(argv) else {
        return Ok(());
    };
    for (_, var, value) in settings_of(cli, &file)? {
        if std::env::var_os(&var).is_none() {
            std::env::set_var(var, value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    // Proves file keys map to their flags' variables, lists join with the flag's delimiter, and unknown keys, lists for single values and nested tables are refused with the key named.
    #[test]
    fn file_keys_become_variables() {
        let cli = super::super::args::Cli::command();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.toml");
        let write = |text: &str| std::fs::write(&file, text).unwrap();
        write(
            "inbox_cap = 7\nno_sync = true\nlisten = \"127.0.0.1:9\"\ncors_origins = [\"a\", \"b\"]\n\
             inactive_after = \"12h\"\n[kafka_options]\n\"security.protocol\" = \"SSL\"\n",
        );
        let got = settings_of(&cli, &file).unwrap();
        let get = |k: &str| {
            got.iter()
                .find(|(key, ..)| key == k)
                .map(|(_, v, x)| (v.as_str(), x.as_str()))
        };
        assert_eq!(get("inbox_cap"), Some(("FEEDLOG_INBOX_CAP", "7")));
        assert_eq!(get("no_sync"), Some(("FEEDLOG_NO_SYNC", "true")));
        assert_eq!(get("listen"), Some(("FEEDLOG_LISTEN", "127.0.0.1:9")));
        assert_eq!(get("cors_origins"), Some(("FEEDLOG_CORS_ORIGINS", "a,b")));
        assert_eq!(
            get("inactive_after"),
            Some(("FEEDLOG_INACTIVE_AFTER", "12h"))
        );
        assert_eq!(got.len(), 5, "{got:?}");
        for (text, named) in [
            ("inbox_capp = 7", "`inbox_capp`"),
            ("inbox-cap = 7", "`inbox-cap`"),
            ("inbox_cap = [1, 2]", "takes one value"),
            ("[listen]\nx = 1", "must be a string"),
            ("config = \"other.toml\"", "another file"),
            ("inbox_cap = ", "not valid TOML"),
        ] {
            write(text);
            let e = format!("{:#}", settings_of(&cli, &file).unwrap_err());
            assert!(e.contains(named), "{text}: {e}");
        }
    }

    // Proves --config FILE, --config=FILE and FEEDLOG_CONFIG are found, and an argument after -- is not a flag.
    #[test]
    fn the_config_file_is_found_where_clap_would_find_it() {
        let argv = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            config_path(&argv(&["feedlog", "--config", "a.toml", "run"])),
            Some(PathBuf::from("a.toml"))
        );
        assert_eq!(
            config_path(&argv(&["feedlog", "run", "--config=b.toml"])),
            Some(PathBuf::from("b.toml"))
        );
        if std::env::var_os("FEEDLOG_CONFIG").is_none() {
            assert_eq!(
                config_path(&argv(&["feedlog", "--", "--config", "c"])),
                None
            );
        }
    }
}
