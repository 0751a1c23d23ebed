//! A TOML settings file for Headroom's binaries, beneath their flags and environment
//! variables, and `--print-config`, which shows every effective setting and where it came from.
//!
//! The file's top-level keys are the global options, and a table per subcommand holds that
//! subcommand's options, each named as its long flag (`data-dir`, or `data_dir`):
//!
//! ```toml
//! log-format = "json"
//! [serve]
//! listen = "0.0.0.0:3000"
//! ```
//!
//! A flag on the command line wins over its environment variable, which wins over the file,
//! which wins over the default. The file's settings are handed to clap as flags, so they are
//! checked exactly as typed ones are; a key that names no option is an error that names it.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, Command};

/// The argument id of `--config FILE` in every binary that uses this crate.
pub const CONFIG: &str = "config";
/// The argument id of `--print-config`.
pub const PRINT_CONFIG: &str = "print_config";

/// The command line with the settings file's values added, and which options they set.
pub struct Loaded {
    pub argv: Vec<OsString>,
    pub file: Option<PathBuf>,
    from_file: BTreeSet<String>,
}

/// Reads the file `--config` (or its environment variable) names, if any, and returns `argv`
/// with a `--name=value` added for each setting the command line and environment leave unset.
pub fn load(command: &Command, argv: Vec<OsString>) -> Result<Loaded, String> {
    // `--help`, `--version` and plain mistakes are left to the real parse.
    let Ok(lenient) = command.clone().ignore_errors(true).try_get_matches_from(&argv) else {
        return Ok(Loaded { argv, file: None, from_file: BTreeSet::new() });
    };
    let Some(path) = lenient.get_one::<PathBuf>(CONFIG).cloned() else {
        return Ok(Loaded { argv, file: None, from_file: BTreeSet::new() });
    };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read --config {}: {e}", path.display()))?;
    let table: toml::Table = text.parse().map_err(|e| format!("--config {}: {e}", path.display()))?;
    let active = lenient.subcommand();
    let mut added = Vec::new();
    let mut from_file = BTreeSet::new();
    for (key, value) in &table {
        if let (toml::Value::Table(options), Some(sub)) =
            (value, command.get_subcommands().find(|s| s.get_name() == key.as_str()))
        {
            // Every subcommand's table is checked; only the running one's is used.
            let running = active.filter(|(name, _)| *name == key.as_str()).map(|(_, m)| m);
            for (key, value) in options {
                let arg =
                    option(sub, key).ok_or_else(|| unknown(&path, &format!("[{}] {key}", sub.get_name()), sub))?;
                if let Some(matches) = running
                    && !set_outside_the_file(matches, arg)
                {
                    added.extend(flags(&path, arg, value)?);
                    from_file.insert(arg.get_id().to_string());
                }
            }
            continue;
        }
        let arg = option(command, key).ok_or_else(|| unknown(&path, key, command))?;
        let given = set_outside_the_file(&lenient, arg) || active.is_some_and(|(_, m)| set_outside_the_file(m, arg));
        if !given {
            added.extend(flags(&path, arg, value)?);
            from_file.insert(arg.get_id().to_string());
        }
    }
    // Before a `--`, past which everything is a positional value.
    let mut argv = argv;
    let at = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
    argv.splice(at..at, added.into_iter().map(OsString::from));
    Ok(Loaded { argv, file: Some(path), from_file })
}

/// The option of `command` a file key names; `config` and `print-config` are not settable.
fn option<'a>(command: &'a Command, key: &str) -> Option<&'a Arg> {
    let key = key.replace('_', "-");
    command.get_arguments().find(|a| {
        a.get_long() == Some(key.as_str())
            && a.get_id() != CONFIG
            && a.get_id() != PRINT_CONFIG
            && !matches!(a.get_action(), clap::ArgAction::Help | clap::ArgAction::Version)
    })
}

fn unknown(path: &Path, key: &str, command: &Command) -> String {
    let mut known: Vec<String> = command
        .get_arguments()
        .filter(|a| a.get_id() != CONFIG && a.get_id() != PRINT_CONFIG)
        .filter(|a| !matches!(a.get_action(), clap::ArgAction::Help | clap::ArgAction::Version))
        .filter_map(|a| a.get_long().map(String::from))
        .collect();
    known.extend(
        command
            .get_subcommands()
            .filter(|s| s.get_arguments().any(|a| a.get_long().is_some()))
            .map(|s| format!("[{}]", s.get_name())),
    );
    format!("--config {}: '{key}' is not a setting here; known: {}", path.display(), known.join(", "))
}

fn set_outside_the_file(matches: &ArgMatches, arg: &Arg) -> bool {
    matches!(
        matches.try_contains_id(arg.get_id().as_str()).ok().and_then(|_| matches.value_source(arg.get_id().as_str())),
        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
    )
}

/// The flags that set `arg` to the file's `value`.
fn flags(path: &Path, arg: &Arg, value: &toml::Value) -> Result<Vec<String>, String> {
    let long = arg.get_long().expect("options have a long name");
    let bad = |what: &str| format!("--config {}: '{long}' {what}", path.display());
    if !arg.get_action().takes_values() {
        return match value {
            toml::Value::Boolean(true) => Ok(vec![format!("--{long}")]),
            toml::Value::Boolean(false) => Ok(Vec::new()),
            _ => Err(bad("is a switch: give true or false")),
        };
    }
    let scalar = |value: &toml::Value| match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(n) => Ok(n.to_string()),
        toml::Value::Float(x) => Ok(x.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        _ => Err(bad("takes a string, number or boolean")),
    };
    match value {
        toml::Value::Array(items) => {
            let items = items.iter().map(scalar).collect::<Result<Vec<_>, _>>()?;
            match arg.get_value_delimiter() {
                Some(delimiter) => Ok(vec![format!("--{long}={}", items.join(&delimiter.to_string()))]),
                None if arg.get_num_args().is_some_and(|n| n.max_values() > 1)
                    || matches!(arg.get_action(), clap::ArgAction::Append) =>
                {
                    Ok(items.into_iter().map(|item| format!("--{long}={item}")).collect())
                }
                None => Err(bad("takes one value, not a list")),
            }
        }
        other => Ok(vec![format!("--{long}={}", scalar(other)?)]),
    }
}

/// Parses the command line with the settings file beneath it; `--print-config` prints the
/// effective settings and exits. Errors exit as clap's do (status 2, the problem named).
pub fn parse<T: clap::Parser>() -> T {
    let command = T::command();
    let loaded = load(&command, std::env::args_os().collect())
        .unwrap_or_else(|e| command.clone().error(clap::error::ErrorKind::InvalidValue, e).exit());
    let matches = command.clone().get_matches_from(&loaded.argv);
    if matches.get_flag(PRINT_CONFIG) {
        print!("{}", print_config(&command, &matches, &loaded));
        std::process::exit(0);
    }
    T::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// The effective settings of the running (sub)command as TOML, each with where it came from;
/// a secret (an option whose environment value clap hides) shows as `<redacted>`.
pub fn print_config(command: &Command, matches: &ArgMatches, loaded: &Loaded) -> String {
    let mut out = String::from("# Effective settings: a flag wins over its environment variable, which wins over\n");
    let _ = writeln!(
        out,
        "# the config file ({}), which wins over the default.",
        loaded.file.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "none given".into())
    );
    section(&mut out, command, matches, loaded, true);
    if let Some((name, sub_matches)) = matches.subcommand()
        && let Some(sub) = command.find_subcommand(name)
    {
        let _ = writeln!(out, "\n[{name}]");
        section(&mut out, sub, sub_matches, loaded, false);
    }
    out
}

fn section(out: &mut String, command: &Command, matches: &ArgMatches, loaded: &Loaded, top: bool) {
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(long) = arg.get_long() else { continue };
        if id == CONFIG
            || id == PRINT_CONFIG
            || matches!(arg.get_action(), clap::ArgAction::Help | clap::ArgAction::Version)
        {
            continue;
        }
        // A global option is shown once, at the top.
        if !top && arg.is_global_set() {
            continue;
        }
        let values: Vec<String> = matches
            .try_get_raw(id)
            .ok()
            .flatten()
            .map(|raw| raw.map(|v| v.to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let source = match matches.value_source(id) {
            _ if loaded.from_file.contains(id) => "config file".to_string(),
            Some(ValueSource::CommandLine) => "command line".to_string(),
            Some(ValueSource::EnvVariable) => {
                format!("environment {}", arg.get_env().map(|e| e.to_string_lossy().into_owned()).unwrap_or_default())
            }
            Some(ValueSource::DefaultValue) => "default".to_string(),
            _ => String::new(),
        };
        if !arg.get_action().takes_values() {
            let on = matches.try_get_one::<bool>(id).ok().flatten().copied().unwrap_or(false);
            let _ = writeln!(out, "{long} = {on}  # {}", if source.is_empty() { "default" } else { &source });
            continue;
        }
        if values.is_empty() {
            let _ = writeln!(out, "# {long} = (not set)");
            continue;
        }
        let shown = if arg.is_hide_env_values_set() {
            "\"<redacted>\"".to_string()
        } else if values.len() == 1 {
            toml::Value::String(values[0].clone()).to_string()
        } else {
            toml::Value::Array(values.into_iter().map(toml::Value::String).collect()).to_string()
        };
        let _ = writeln!(out, "{long} = {shown}  # {source}");
    }
}
