//! Runs short-lived client commands (kubectl, crane, regctl, the ORAS SDK's Python) with a timeout,
//! capturing their output; a failure becomes an error carrying the command line and its stderr.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::error::{Error, Result};

/// The longest any client command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// One command to run.
pub(crate) struct Invocation<'a> {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
    input: Option<&'a [u8]>,
}

impl<'a> Invocation<'a> {
    pub(crate) fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            input: None,
        }
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub(crate) fn env(mut self, key: &'static str, value: impl Into<OsString>) -> Self {
        self.env.push((key, value.into()));
        self
    }

    pub(crate) fn input(mut self, input: &'a [u8]) -> Self {
        self.input = Some(input);
        self
    }

    /// Runs the command; its stdout if it succeeded.
    pub(crate) async fn run(self) -> Result<String> {
        let command_line = self.command_line();
        let failed = |status: String, output: String| Error::Command {
            command: command_line.clone(),
            status,
            output,
        };
        let mut child = tokio::process::Command::new(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(if self.input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| Error::Spawn {
                program: self.program.display().to_string(),
                source,
            })?;
        if let (Some(input), Some(mut stdin)) = (self.input, child.stdin.take()) {
            stdin
                .write_all(input)
                .await
                .map_err(|e| failed("stdin closed".into(), e.to_string()))?;
        }
        let output = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| {
                failed(
                    format!("no answer after {COMMAND_TIMEOUT:?}"),
                    String::new(),
                )
            })?
            .map_err(|e| failed("not awaited".into(), e.to_string()))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            return Ok(stdout);
        }
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        Err(failed(
            output.status.to_string(),
            if stderr.is_empty() { stdout } else { stderr },
        ))
    }

    fn command_line(&self) -> String {
        let name = self
            .program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        std::iter::once(name)
            .chain(self.args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `--name=value` without assuming the value is UTF-8.
pub(crate) fn flag(name: &str, value: impl AsRef<OsStr>) -> OsString {
    let mut flag = OsString::from(name);
    flag.push(value);
    flag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn output_of_a_successful_command_with_input_and_env() {
        let out = Invocation::new("/bin/sh")
            .args(["-c", "cat; echo \"$GREETING\""])
            .env("GREETING", "hello")
            .input(b"piped ")
            .run()
            .await
            .unwrap();
        assert_eq!(out, "piped hello\n");
    }

    #[tokio::test]
    async fn a_failed_command_names_itself_and_shows_stderr() {
        let err = Invocation::new("/bin/sh")
            .args(["-c", "echo no such thing >&2; exit 2"])
            .run()
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "`sh -c echo no such thing >&2; exit 2` failed (exit status: 2): no such thing"
        );
    }
}
