//! `ocifit completion SHELL`: the shell's completion script, generated from the same command
//! definition the binary parses with (so it never lags a flag), by clap_complete.

use std::process::ExitCode;

use super::exit::Exit;

/// `ocifit completion`'s argument.
#[derive(Debug, clap::Args)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The completion script for `shell`, completing the command named `name`.
pub(super) fn script(shell: clap_complete::Shell, name: &'static str) -> Vec<u8> {
    let mut command = super::Cli::command_named(name);
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, name, &mut out);
    out
}

/// Prints the script for `ocifit` on stdout.
pub(super) fn run(args: &CompletionArgs) -> ExitCode {
    use std::io::Write;
    // A closed stdout (e.g. `| head`) is not worth a panic.
    let _ = std::io::stdout().write_all(&script(args.shell, "ocifit"));
    Exit::Ok.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap_complete::Shell;

    #[test]
    fn each_shell_s_script_completes_the_subcommands_and_the_global_flags() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let text = String::from_utf8(script(shell, "ocifit")).unwrap();
            for word in [
                "release-gates",
                "explain",
                "context",
                "namespace",
                "dry-run",
            ] {
                assert!(text.contains(word), "{shell}: no {word}");
            }
        }
    }
}
