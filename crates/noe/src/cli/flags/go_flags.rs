//! Go `flag` syntax, normalised before clap sees it.
//!
//! noe parses its command line with Go's `flag` package, which accepts `-flag v`, `-flag=v`,
//! `--flag v` and `--flag=v`, and booleans as `-flag` or `-flag=true|false`. clap only knows the
//! double-dash spelling, so a single-dash long flag is rewritten to its double-dash form. Only
//! names clap knows are rewritten: anything else (short flags such as `-f`, values such as `-`)
//! reaches clap untouched. Boolean flags are declared as plain `bool` fields and made Go
//! booleans by [`booleans`] (an optional value after `=`), so `--leader-elect=true` needs no
//! rewriting.

use std::collections::HashSet;
use std::ffi::OsString;

use clap::builder::BoolishValueParser;
use clap::{Arg, ArgAction, Command};

/// Every boolean flag of `command` and its subcommands (a `bool` field: clap's `SetTrue`) made a
/// Go boolean: `--flag` or `-flag` is true, `--flag=true|false` (and `yes|no|on|off|1|0`) says
/// which, it is false when absent, and its environment variable is read the same way.
pub fn booleans(command: Command) -> Command {
    let subcommands: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    let mut command = command.mut_args(|arg| match arg.get_action() {
        ArgAction::SetTrue => go_boolean(arg),
        _ => arg,
    });
    for name in subcommands {
        command = command.mut_subcommand(name, booleans);
    }
    command
}

fn go_boolean(arg: Arg) -> Arg {
    arg.action(ArgAction::Set)
        .num_args(0..=1)
        .require_equals(true)
        .default_value("false")
        .default_missing_value("true")
        .value_parser(BoolishValueParser::new())
}

/// Rewrites `-name` and `-name=value` to `--name` / `--name=value` for every `name` in `long_names`.
/// Arguments after a bare `--` are left alone.
pub fn normalize<I>(argv: I, long_names: &HashSet<String>) -> Vec<OsString>
where
    I: IntoIterator<Item = OsString>,
{
    let mut out = Vec::new();
    let mut rest_is_positional = false;
    for arg in argv {
        if rest_is_positional {
            out.push(arg);
            continue;
        }
        let Some(text) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if text == "--" {
            rest_is_positional = true;
            out.push(arg);
            continue;
        }
        match single_dash_long(text, long_names) {
            Some(rewritten) => out.push(OsString::from(rewritten)),
            None => out.push(arg),
        }
    }
    out
}

fn single_dash_long(text: &str, long_names: &HashSet<String>) -> Option<String> {
    let body = text.strip_prefix('-')?;
    if body.starts_with('-') {
        return None;
    }
    let name = body.split_once('=').map_or(body, |(name, _)| name);
    // A one-letter name is a short flag (`-f`), which clap understands as it is.
    (name.len() > 1 && long_names.contains(name)).then(|| format!("-{text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> HashSet<String> {
        [
            "preferred-arch",
            "leader-elect",
            "dev-self-signed-cert",
            "help",
            "file",
        ]
        .into_iter()
        .map(String::from)
        .collect()
    }

    fn run(args: &[&str]) -> Vec<String> {
        normalize(args.iter().map(OsString::from), &names())
            .into_iter()
            .map(|a| a.into_string().unwrap_or_default())
            .collect()
    }

    #[test]
    fn table() {
        let cases: &[(&[&str], &[&str])] = &[
            (
                &["noe", "-preferred-arch", "arm64"],
                &["noe", "--preferred-arch", "arm64"],
            ),
            (
                &["noe", "-preferred-arch=arm64"],
                &["noe", "--preferred-arch=arm64"],
            ),
            (
                &["noe", "--preferred-arch", "arm64"],
                &["noe", "--preferred-arch", "arm64"],
            ),
            (
                &["noe", "--preferred-arch=arm64"],
                &["noe", "--preferred-arch=arm64"],
            ),
            (&["noe", "-preferred-arch="], &["noe", "--preferred-arch="]),
            (
                &["noe", "-leader-elect=true"],
                &["noe", "--leader-elect=true"],
            ),
            (
                &["noe", "-leader-elect=false"],
                &["noe", "--leader-elect=false"],
            ),
            (
                &["noe", "-dev-self-signed-cert"],
                &["noe", "--dev-self-signed-cert"],
            ),
            (&["noe", "-help"], &["noe", "--help"]),
            // short flags and unknown names reach clap as they are
            (
                &["noe", "explain", "-f", "pod.yaml"],
                &["noe", "explain", "-f", "pod.yaml"],
            ),
            (
                &["noe", "explain", "-f", "-"],
                &["noe", "explain", "-f", "-"],
            ),
            (&["noe", "-unknown-flag"], &["noe", "-unknown-flag"]),
            // a value that looks like a flag name is still rewritten only when it is one
            (
                &["noe", "-preferred-arch", "-x"],
                &["noe", "--preferred-arch", "-x"],
            ),
            // after `--` everything is positional
            (
                &["noe", "--", "-preferred-arch"],
                &["noe", "--", "-preferred-arch"],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(run(input), *want, "input {input:?}");
        }
    }
}
