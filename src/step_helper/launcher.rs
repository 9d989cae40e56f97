//! `ocifit artifact launch`: runs a step's command in its own container (through the loader the
//! init container installed), first copying the step's inputs where the oras-operator's `cp -R`
//! puts them (`inputs/` in its working directory by default, which only the running container
//! knows: the pod's `workingDir` or the image's WORKDIR; see [`inputs::destination`]), writes its standard output to `output-pipe` when asked, forwards
//! SIGTERM and SIGINT to it, and when it succeeds hands its outputs to the pusher and waits for the
//! push. The container's exit status is the step's: the command's own when it fails (nothing is
//! pushed), 0 when it succeeded and its outputs were pushed, [`EXIT_PUSH_FAILED`] when they could
//! not be (with the reason as the container's termination message).

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use rustix::process::{Pid, Signal, kill_process};
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};

use super::inputs;
use super::push::handoff::{self, Outcome, Request};
use crate::telemetry::error_chain;

/// The step succeeded but its outputs were not pushed (EX_TEMPFAIL: another try may succeed).
pub const EXIT_PUSH_FAILED: u8 = 75;
/// The step's command cannot be run (as a shell says for a file it cannot execute).
pub const EXIT_CANNOT_RUN: u8 = 126;
/// The step's command does not exist (as a shell says).
pub const EXIT_NOT_FOUND: u8 = 127;

/// What to run and what to do after.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The run volume shared with the pusher.
    pub run: PathBuf,
    /// The working directory: the command runs there, relative paths are read from there.
    pub working_dir: PathBuf,
    /// The inputs the init container pulled, to copy into place before the command runs.
    pub inputs: Option<PathBuf>,
    /// Where the inputs are copied to as by `cp -R` (relative to the working directory); the
    /// working directory itself when unset.
    pub input_path: Option<PathBuf>,
    /// The file or directory to push when the step succeeds (relative to the working directory);
    /// `.` pushes each entry of the working directory.
    pub push: Option<PathBuf>,
    /// The file the command's standard output goes to.
    pub pipe: Option<PathBuf>,
    /// Where the container's termination message is read from.
    pub termination_log: Option<PathBuf>,
    /// The longest wait for the pusher's answer.
    pub push_timeout: Duration,
    /// The step's command and its arguments.
    pub command: Vec<OsString>,
}

/// Runs the step; the container's exit status.
pub async fn launch(launch: &LaunchSpec) -> u8 {
    let Some((program, args)) = launch.command.split_first() else {
        return fail(launch, EXIT_CANNOT_RUN, "no command to run".to_string());
    };
    if let Some(from) = &launch.inputs
        && let Err(message) = place_inputs(launch, from)
    {
        return fail(launch, EXIT_CANNOT_RUN, message);
    }
    let mut command = Command::new(program);
    command.args(args).current_dir(&launch.working_dir);
    if let Some(pipe) = &launch.pipe {
        match open_pipe(&launch.working_dir.join(pipe)) {
            Ok(file) => {
                command.stdout(Stdio::from(file));
            }
            Err(err) => {
                return fail(
                    launch,
                    EXIT_CANNOT_RUN,
                    format!("failed to write output-pipe {}: {err}", pipe.display()),
                );
            }
        }
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            let code = if err.kind() == io::ErrorKind::NotFound {
                EXIT_NOT_FOUND
            } else {
                EXIT_CANNOT_RUN
            };
            return fail(
                launch,
                code,
                format!("failed to run {}: {err}", program.to_string_lossy()),
            );
        }
    };
    let status = match wait_forwarding_signals(&mut child).await {
        Ok(status) => status,
        Err(err) => {
            return fail(
                launch,
                EXIT_CANNOT_RUN,
                format!("lost the step's command: {err}"),
            );
        }
    };
    if !status.success() {
        let code = exit_code(status);
        // The step's own termination message, if it wrote one, is left as it is.
        eprintln!("ocifit: the step ended with status {code}; its outputs are not pushed");
        return code;
    }
    let Some(output) = &launch.push else {
        return 0;
    };
    match push(launch, output).await {
        Ok(Outcome::Pushed { reference, digest }) => {
            eprintln!("ocifit: pushed the step's outputs to {reference} ({digest})");
            0
        }
        Ok(Outcome::Failed { message }) => fail(
            launch,
            EXIT_PUSH_FAILED,
            format!("the step succeeded but its outputs were not pushed: {message}"),
        ),
        Err(message) => fail(
            launch,
            EXIT_PUSH_FAILED,
            format!("the step succeeded but its outputs were not pushed: {message}"),
        ),
    }
}

/// The run volume's record of where the pod's inputs went: a restarted step finds them where its
/// first run put them, though that run created `input-path` (on a volume that outlives it).
const INPUTS_PLACED: &str = "inputs-placed";

/// Copies the inputs where `cp -R <inputs>/ <input-path>` puts them, or where a first run of
/// this pod put them.
fn place_inputs(launch: &LaunchSpec, from: &Path) -> Result<(), String> {
    let dest = match &launch.input_path {
        Some(path) => launch.working_dir.join(path),
        None => launch.working_dir.clone(),
    };
    let cannot = |to: &Path, why: String| {
        format!(
            "failed to put the inputs in {}: {why} (input-path must be a directory the step's user can write: its working directory, or a volume it mounts)",
            to.display()
        )
    };
    let placed = handoff::read::<PathBuf>(&launch.run, INPUTS_PLACED)
        .map_err(|err| cannot(&dest, format!("failed to read {INPUTS_PLACED}: {err}")))?;
    let to = match placed {
        Some(to) => to,
        None => {
            let to = inputs::destination(&dest).map_err(|err| cannot(&dest, error_chain(&err)))?;
            handoff::write(&launch.run, INPUTS_PLACED, &to)
                .map_err(|err| cannot(&to, format!("failed to write {INPUTS_PLACED}: {err}")))?;
            to
        }
    };
    inputs::copy_into(from, &to).map_err(|err| cannot(&to, error_chain(&err)))
}

fn open_pipe(pipe: &Path) -> io::Result<fs::File> {
    if let Some(parent) = pipe.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    fs::File::create(pipe)
}

/// Waits for the command, passing SIGTERM and SIGINT on to it (the kubelet stops a pod with
/// SIGTERM to the container's first process, which is this one).
async fn wait_forwarding_signals(child: &mut tokio::process::Child) -> io::Result<ExitStatus> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    loop {
        let forward = tokio::select! {
            status = child.wait() => return status,
            _ = terminate.recv() => Signal::TERM,
            _ = interrupt.recv() => Signal::INT,
        };
        if let Some(pid) = pid {
            // The command may have ended meanwhile; its status comes next.
            let _ = kill_process(pid, forward);
        }
    }
}

/// A shell's exit status for a command: its code, or 128 + the signal that ended it.
fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(1),
        (None, None) => 1,
    }
}

/// Why the launcher has no answer from the pusher.
#[derive(Debug, thiserror::Error)]
enum Unasked {
    #[error("failed to stage the outputs: {0}")]
    Stopped(#[source] tokio::task::JoinError),
    #[error("failed to read the output {}: {source}", output.display())]
    Output {
        output: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to ask the pusher: {0}")]
    Ask(#[source] io::Error),
    #[error("failed to read the pusher's answer: {0}")]
    Answer(#[source] io::Error),
    #[error("the pusher did not answer within {} s", .0.as_secs())]
    Timeout(Duration),
}

/// Stages the outputs, asks the pusher, waits for its answer.
async fn push(launch: &LaunchSpec, output: &Path) -> Result<Outcome, Unasked> {
    let request = Request::new(run_id());
    let into = launch.run.join(request.outputs());
    let whole_dir = is_working_directory(output);
    let output = launch.working_dir.join(output);
    let staged = tokio::task::spawn_blocking({
        let output = output.clone();
        move || {
            if whole_dir {
                handoff::stage_entries(&output, &into)
            } else {
                handoff::stage(&output, &into).map(|_| Vec::new())
            }
        }
    })
    .await
    .map_err(Unasked::Stopped)?
    .map_err(|source| Unasked::Output { output, source })?;
    for link in staged {
        eprintln!("ocifit: {link} in the working directory is a symbolic link; it is not pushed");
    }
    handoff::write(&launch.run, handoff::REQUEST, &request).map_err(Unasked::Ask)?;
    let started = Instant::now();
    loop {
        match handoff::read::<Outcome>(&launch.run, &request.result_file()) {
            Ok(Some(outcome)) => return Ok(outcome),
            Ok(None) => {}
            Err(err) => return Err(Unasked::Answer(err)),
        }
        if started.elapsed() > launch.push_timeout {
            return Err(Unasked::Timeout(launch.push_timeout));
        }
        tokio::time::sleep(handoff::POLL).await;
    }
}

/// Whether `output-path` names the working directory itself (`.`, `./`), whose entries the
/// oras-operator pushes as the artifact's top level.
fn is_working_directory(output: &Path) -> bool {
    output
        .components()
        .all(|c| matches!(c, std::path::Component::CurDir))
}

fn run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}", std::process::id())
}

/// Says why on stderr and in the termination message; the exit status.
fn fail(launch: &LaunchSpec, code: u8, message: String) -> u8 {
    eprintln!("ocifit: {message}");
    if let Some(path) = &launch.termination_log {
        // Without a termination log the message is still in the container's log.
        let _ = fs::write(path, format!("ocifit: {message}"));
    }
    code
}

#[cfg(test)]
mod tests;
