//! `docs/flags.md` documents `ocifit run` as the binary defines it: the same flags, each with its
//! environment variable and, where the binary has one, its default. Read from `ocifit run --help`,
//! so a flag added, renamed or re-defaulted without its row fails here.

use std::collections::BTreeMap;
use std::process::Command;

/// A flag's environment variable and default.
#[derive(Debug, Default, PartialEq)]
struct Flag {
    env: Option<String>,
    default: Option<String>,
}

/// Every long flag of `ocifit run --help` but `--help`.
fn flags_in_help() -> BTreeMap<String, Flag> {
    let output = Command::new(env!("CARGO_BIN_EXE_ocifit"))
        .args(["run", "--help"])
        .output()
        .expect("ocifit run --help");
    assert!(output.status.success(), "{output:?}");
    let help = String::from_utf8(output.stdout).expect("UTF-8 help");
    let mut flags: BTreeMap<String, Flag> = BTreeMap::new();
    let mut current = None;
    for line in help.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("--") {
            let name = format!("--{}", rest.split([' ', '[']).next().unwrap_or_default());
            flags.insert(name.clone(), Flag::default());
            current = Some(name);
        } else if let Some(flag) = current.as_ref().and_then(|name| flags.get_mut(name)) {
            if let Some(env) = line
                .strip_prefix("[env: ")
                .and_then(|r| r.strip_suffix("=]"))
            {
                flag.env = Some(env.to_owned());
            } else if let Some(default) = line
                .strip_prefix("[default: ")
                .and_then(|r| r.strip_suffix(']'))
            {
                flag.default = Some(default.to_owned());
            }
        }
    }
    flags.remove("--help");
    flags
}

/// The rows of the table in `docs/flags.md`: `` | `--flag VALUE` | `ENV` … | default | meaning | ``,
/// flag → (the environment cell's first code span, the default cell).
fn rows_in_docs() -> BTreeMap<String, (Option<String>, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/flags.md");
    let docs = std::fs::read_to_string(path).expect("docs/flags.md");
    docs.lines()
        .filter(|line| line.starts_with("| `--"))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let flag = cells[0]
                .trim_start_matches("| `")
                .split([' ', '`'])
                .next()
                .unwrap_or_default()
                .to_owned();
            let env = cells[1].split('`').nth(1).map(str::to_owned);
            (flag, (env, cells[2].to_owned()))
        })
        .collect()
}

#[test]
fn docs_flags_lists_every_flag_of_ocifit_run_with_its_environment_and_default() {
    let help = flags_in_help();
    let docs = rows_in_docs();
    assert!(help.len() > 20, "too few flags read from --help: {help:?}");
    assert_eq!(
        help.keys().collect::<Vec<_>>(),
        docs.keys().collect::<Vec<_>>(),
        "the flags of `ocifit run --help` and of docs/flags.md differ"
    );
    for (name, flag) in &help {
        let (env, default) = &docs[name];
        assert_eq!(env, &flag.env, "{name}: environment variable");
        if let Some(value) = &flag.default {
            assert!(
                default.contains(&format!("`{value}`")),
                "{name}: the binary's default is {value}, docs/flags.md says {default}"
            );
        }
    }
}
