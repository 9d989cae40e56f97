//! Long-running components (etcd, kube-apiserver, the registry, …): started with their output in a
//! log file, watched while the kit waits for readiness, and killed with SIGKILL on Drop (their state
//! is thrown away, and kube-apiserver's graceful shutdown takes far too long).
//!
//! Each runs under `setpriv --pdeathsig KILL`, so the kernel kills it when the thread that started it
//! ends. All components are started from one thread that lives as long as the process, so they die
//! with the test process however it ends: a panic, a timeout's SIGKILL, or the exit of a test binary
//! whose shared cluster (a static) is never dropped. This module does not know what the components are.

use std::ffi::OsString;
use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result, io};

/// How often readiness is probed.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// The longest a single readiness probe may take before it counts as "not ready yet".
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How many log lines an error or a failed test shows per component.
pub(crate) const LOG_TAIL_LINES: usize = 25;

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// The thread that starts every component; see the module documentation for why there is one.
fn spawner() -> Result<&'static mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<std::result::Result<mpsc::Sender<SpawnRequest>, String>> =
        OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (requests, incoming) = mpsc::channel::<SpawnRequest>();
            std::thread::Builder::new()
                .name("ocifit-testkit-spawner".into())
                .spawn(move || {
                    for (mut command, reply) in incoming {
                        // The requester may have given up; then the child is dropped and its
                        // parent-death signal still applies.
                        let _ = reply.send(command.spawn());
                    }
                })
                .map(|_| requests)
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|message| Error::Spawn {
            program: "the test kit's process-spawning thread".into(),
            source: std::io::Error::other(message.clone()),
        })
}

/// A running component and its log.
#[derive(Debug)]
pub(crate) struct Process {
    name: String,
    child: Child,
    log: PathBuf,
    /// How it was started, to start it again.
    program: PathBuf,
    args: Vec<OsString>,
}

impl Process {
    /// Starts `program` with `args`, output to `<log_dir>/<name>.log`.
    pub(crate) fn spawn(
        name: &str,
        program: &Path,
        args: Vec<OsString>,
        log_dir: &Path,
    ) -> Result<Self> {
        let log = log_dir.join(format!("{name}.log"));
        // Appended to: a component started again keeps its earlier log.
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(io("create log file", &log))?;
        let err = out.try_clone().map_err(io("open log file", &log))?;
        let mut command = Command::new("setpriv");
        command
            .args(["--pdeathsig", "KILL", "--"])
            .arg(program)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let spawn_error = |source| Error::Spawn {
            program: format!(
                "{name} ({}) under setpriv from util-linux",
                program.display()
            ),
            source,
        };
        let (reply, answer) = mpsc::channel();
        spawner()?
            .send((command, reply))
            .map_err(|_| spawn_error(std::io::Error::other("spawner thread has stopped")))?;
        let child = answer
            .recv()
            .map_err(|_| spawn_error(std::io::Error::other("spawner thread has stopped")))?
            .map_err(spawn_error)?;
        Ok(Self {
            name: name.to_owned(),
            child,
            log,
            program: program.to_owned(),
            args,
        })
    }

    /// Kills the process with SIGKILL and waits for its end (its state on disk stays).
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the process again as it was started, its output appended to the same log.
    pub(crate) fn start_again(&mut self) -> Result<()> {
        let log_dir = self.log.parent().unwrap_or(Path::new(".")).to_owned();
        let again = Process::spawn(&self.name, &self.program, self.args.clone(), &log_dir)?;
        self.kill();
        *self = again;
        Ok(())
    }

    /// The process id (that of the program itself: setpriv execs it).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The component's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// An error if the component has exited.
    pub(crate) fn check_running(&mut self, waiting_for: &str) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::Exited {
                component: self.name.clone(),
                status: status.to_string(),
                waiting_for: waiting_for.to_owned(),
                log_tail: self.log_tail(LOG_TAIL_LINES),
            }),
            Err(e) => Err(Error::Exited {
                component: self.name.clone(),
                status: format!("unknown: {e}"),
                waiting_for: waiting_for.to_owned(),
                log_tail: self.log_tail(LOG_TAIL_LINES),
            }),
        }
    }

    /// Sends `signal` (a name `kill` knows, e.g. `STOP`, `CONT`) to the process.
    pub(crate) fn signal(&self, signal: &str) -> Result<()> {
        let spawn = |source| Error::Spawn {
            program: "kill".to_owned(),
            source,
        };
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .map_err(spawn)?;
        if status.success() {
            Ok(())
        } else {
            Err(spawn(std::io::Error::other(format!(
                "kill -{signal} {} ({}): {status}",
                self.child.id(),
                self.name
            ))))
        }
    }

    /// Whether the process is stopped (state `T` in `/proc/PID/stat`): a signal is delivered
    /// after `kill` returns, so a pause is only certain once this holds.
    pub(crate) fn is_stopped(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .ok()
            .and_then(|stat| {
                // The state follows the parenthesised command name, which may hold spaces.
                let after = &stat[stat.rfind(')')? + 1..];
                after.split_whitespace().next().map(|state| state == "T")
            })
            .unwrap_or(false)
    }

    /// The last `lines` lines of the component's log.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SIGKILL; then reap it, so its files are closed before the work directory is removed.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last `lines` lines of a log file, or a note saying it cannot be read.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

/// The log tails of `processes`, each under a header with its name.
pub(crate) fn log_tails<'a>(processes: impl IntoIterator<Item = &'a Process>) -> String {
    processes
        .into_iter()
        .map(|p| format!("--- {} ---\n{}", p.name(), p.log_tail(LOG_TAIL_LINES)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Polls `ready` until it answers true, failing fast if a `watched` process exits and with a timeout
/// error (carrying their logs) after `timeout`.
pub(crate) async fn wait_until<F, Fut>(
    what: &str,
    timeout: Duration,
    watched: &mut [&mut Process],
    mut ready: F,
) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        for process in watched.iter_mut() {
            process.check_running(what)?;
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if tokio::time::timeout(remaining.min(PROBE_TIMEOUT), ready())
            .await
            .unwrap_or(false)
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_owned(),
                timeout,
                log_tails: log_tails(watched.iter().map(|p| &**p)),
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, dir: &Path) -> Process {
        Process::spawn(
            "sh",
            Path::new("/bin/sh"),
            vec!["-c".into(), script.into()],
            dir,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn a_component_that_exits_fails_the_wait_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = sh("echo starting; echo broken config >&2; exit 3", dir.path());
        let err = wait_until(
            "the moon",
            Duration::from_secs(10),
            &mut [&mut process],
            || std::future::ready(false),
        )
        .await
        .unwrap_err();
        let message = err.to_string();
        assert!(message.contains("sh exited"), "{message}");
        assert!(message.contains("the moon"), "{message}");
        assert!(message.contains("starting\nbroken config"), "{message}");
    }

    #[tokio::test]
    async fn a_wait_that_never_succeeds_times_out_with_the_logs() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = sh("echo still thinking; sleep 30", dir.path());
        let err = wait_until(
            "an answer",
            Duration::from_millis(300),
            &mut [&mut process],
            || std::future::ready(false),
        )
        .await
        .unwrap_err();
        let message = err.to_string();
        assert!(message.contains("timed out"), "{message}");
        assert!(message.contains("--- sh ---\nstill thinking"), "{message}");
    }

    #[test]
    fn drop_kills_the_component() {
        let dir = tempfile::tempdir().unwrap();
        let process = sh("sleep 30", dir.path());
        let pid = process.child.id();
        drop(process);
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }

    #[test]
    fn log_tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        std::fs::write(&log, "1\n2\n3\n4\n").unwrap();
        assert_eq!(log_tail(&log, 2), "3\n4");
        assert_eq!(log_tail(&log, 10), "1\n2\n3\n4");
    }
}
