//! `ocifit artifact …`: the step helper. `pull` and `push` move artifacts in the ORAS layout
//! between a directory and a registry, with progress on stderr only when it is a terminal and
//! the transfer is past [`SHOWN_FROM`] bytes (CI logs get none); `prepare`, `launch` and
//! `deliver` are what the step planner puts in a step's pod (init container, the step's own
//! command, the pushing sidecar). `pull` and `push` log in as `oras` does (`login`); the step's
//! commands read `ORAS_USER`, `ORAS_PULL_PASS` and `ORAS_PUSH_PASS` only.

mod login;

use std::io;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;

use super::cache_access::{self, AccessError, CacheArgs, Reached};
use crate::registry::{self, PrivateRegistries, Reference, Registry, RegistryOptions};
use crate::step_helper::Report;
use crate::step_helper::{self, Direction, PrepareError, PullError, PushError, PushRequest};
use crate::step_helper::{Budget, Limits};
use crate::step_helper::{Deliver, Launch, Prepare, Transfer};
use crate::telemetry::{LogFormat, error_chain, init_logs};

#[derive(Debug, Args)]
pub struct ArtifactArgs {
    #[command(subcommand)]
    pub command: ArtifactCommand,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

#[derive(Debug, Subcommand)]
pub enum ArtifactCommand {
    /// Pull artifacts into a directory: files under their titles, directories unpacked.
    Pull(PullArgs),
    /// Push files and directories as one artifact (directories as .tar.gz layers to unpack).
    Push(PushArgs),
    /// A step's init container: install the launcher, pull the inputs.
    Prepare(Prepare),
    /// A step's command, run by the launcher: the command, then its outputs handed to the pusher.
    Launch(Launch),
    /// A step's pushing sidecar: push the outputs the launcher hands over, until SIGTERM.
    Deliver(Deliver),
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// Artifacts to pull (`registry/repository:tag` or `@digest`), in order.
    #[arg(required = true)]
    pub references: Vec<String>,
    /// The directory to write into (created if missing); nothing in it is ever replaced.
    #[arg(long, short, default_value = ".")]
    pub output: PathBuf,
    #[command(flatten)]
    pub transfer: Transfer,
    #[command(flatten)]
    pub limits: Limits,
    #[command(flatten)]
    pub login: login::Login,
    #[command(flatten)]
    pub cache: CacheArgs,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// Where to push (`registry/repository:tag`).
    pub reference: String,
    /// Files and directories, one layer each, titled with their names, as `PATH` or
    /// `PATH:MEDIA_TYPE` (split at the last ':'; a path holding ':' ends with one: `a:b.txt:`).
    /// A symbolic link is refused, never followed; links inside a directory are pushed as links.
    #[arg(required = true)]
    pub paths: Vec<String>,
    /// The manifest's artifactType.
    #[arg(long, default_value = step_helper::DEFAULT_ARTIFACT_TYPE)]
    pub artifact_type: String,
    /// gzip level of directory layers (0 stores, 9 compresses most).
    #[arg(long, default_value_t = step_helper::DEFAULT_COMPRESSION, value_parser = clap::value_parser!(u32).range(0..=9))]
    pub compression_level: u32,
    #[command(flatten)]
    pub transfer: Transfer,
    #[command(flatten)]
    pub login: login::Login,
    #[command(flatten)]
    pub cache: CacheArgs,
}

/// Why an `ocifit artifact` command failed; shown with every cause.
#[derive(Debug, thiserror::Error)]
enum ArtifactError {
    /// A reference that does not parse, or a registry client that cannot be made.
    #[error(transparent)]
    Registry(#[from] registry::Error),
    #[error(transparent)]
    Cache(#[from] AccessError),
    #[error(transparent)]
    Login(#[from] login::LoginError),
    #[error(transparent)]
    FileRef(#[from] step_helper::FileRefError),
    #[error("failed to pull {reference}")]
    Pull {
        reference: String,
        #[source]
        source: Box<PullError>,
    },
    #[error("failed to push to {reference}")]
    Push {
        reference: String,
        #[source]
        source: Box<PushError>,
    },
    #[error(transparent)]
    Prepare(Box<PrepareError>),
    #[error("failed to serve the step's outputs from {}: {source}", run.display())]
    Deliver {
        run: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Runs an `ocifit artifact` command: 0 when it did what it was asked, 1 otherwise (the reason on
/// stderr).
pub(super) async fn run(args: ArtifactArgs) -> ExitCode {
    if let Err(err) = init_logs(args.log_format) {
        eprintln!("error: {}", error_chain(&err));
        return ExitCode::FAILURE;
    }
    let result = match args.command {
        ArtifactCommand::Pull(args) => pull(args).await,
        ArtifactCommand::Push(args) => push(args).await,
        ArtifactCommand::Prepare(args) => prepare(args).await,
        ArtifactCommand::Deliver(args) => deliver(args).await,
        ArtifactCommand::Launch(args) => return ExitCode::from(launch(args).await),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            exit_of(&err).into()
        }
    }
}

fn parse(references: &[String]) -> Result<Vec<Reference>, ArtifactError> {
    references
        .iter()
        .map(|r| Ok(registry::parse_reference(r)?))
        .collect()
}

/// Opens the way to `--cache` when it is given; the references are then inside it.
async fn reach(args: &CacheArgs, direction: Direction) -> Result<Option<Reached>, AccessError> {
    match &args.cache {
        Some(name) => cache_access::reach(args, name, direction).await.map(Some),
        None => Ok(None),
    }
}

/// The references (prefixed with the cache's registry when there is one) and a client for them.
async fn client_for(
    references: &[String],
    reached: Option<&Reached>,
    (plain_http, login): (bool, &login::Login),
    direction: Direction,
) -> Result<(Vec<Reference>, Registry), ArtifactError> {
    let Some(reached) = reached else {
        let references = parse(references)?;
        let all: Vec<&Reference> = references.iter().collect();
        let registry = login::client(&all, plain_http, direction, login).await?;
        return Ok((references, registry));
    };
    let prefixed: Vec<String> = references
        .iter()
        .map(|r| format!("{}/{r}", reached.host))
        .collect();
    let references = parse(&prefixed)?;
    let options = RegistryOptions {
        plain_http: if reached.plain_http || plain_http {
            vec![reached.host.clone()]
        } else {
            Vec::new()
        },
        credentials: reached.credentials.clone(),
        // The cache reached (through a port-forward, on loopback) is this command's to reach.
        private: PrivateRegistries::registries_of(&references.iter().collect::<Vec<_>>()),
        ..RegistryOptions::default()
    };
    let registry = Registry::new(options)?;
    Ok((references, registry))
}

async fn pull(args: PullArgs) -> Result<(), ArtifactError> {
    let reached = reach(&args.cache, Direction::Pull).await?;
    let (references, registry) = client_for(
        &args.references,
        reached.as_ref(),
        (args.transfer.plain_http, &args.login),
        Direction::Pull,
    )
    .await?;
    let budget = std::sync::Arc::new(Budget::new(args.limits));
    let progress = Progress::start(&registry, "pulling");
    for reference in &references {
        let unpack = !args.transfer.no_unpack;
        let pulled = step_helper::pull(&registry, reference, &args.output, unpack, &budget)
            .await
            .map_err(|source| ArtifactError::Pull {
                reference: reference.to_string(),
                source: Box::new(source),
            })?;
        let layers: Vec<String> = pulled
            .layers
            .iter()
            .map(|l| {
                let slash = if l.unpacked { "/" } else { "" };
                format!("{}{slash}", l.path.display())
            })
            .collect();
        println!(
            "pulled {} ({}): {}",
            pulled.reference,
            pulled.digest,
            layers.join(", ")
        );
    }
    progress.finish();
    Ok(())
}

async fn push(args: PushArgs) -> Result<(), ArtifactError> {
    let reached = reach(&args.cache, Direction::Push).await?;
    let (references, registry) = client_for(
        std::slice::from_ref(&args.reference),
        reached.as_ref(),
        (args.transfer.plain_http, &args.login),
        Direction::Push,
    )
    .await?;
    let reference = &references[0];
    let paths = args
        .paths
        .iter()
        .map(|arg| step_helper::parse_file_ref(arg));
    let request = PushRequest {
        paths: paths.collect::<Result<_, _>>()?,
        unpack: !args.transfer.no_unpack,
        artifact_type: args.artifact_type,
        compression: args.compression_level,
    };
    let progress = Progress::start(&registry, "pushing");
    let pushed = step_helper::push(&registry, reference, &request)
        .await
        .map_err(|source| ArtifactError::Push {
            reference: reference.to_string(),
            source: Box::new(source),
        })?;
    progress.finish();
    println!("pushed {} ({})", pushed.reference, pushed.digest);
    Ok(())
}

async fn prepare(args: Prepare) -> Result<(), ArtifactError> {
    if args.debug {
        tracing::info!(?args, "prepare");
    }
    let mut report = Report::new(Direction::Pull);
    let result = async {
        let references = parse(&args.inputs)?;
        let registry = step_helper::client(
            &references.iter().collect::<Vec<_>>(),
            args.transfer.plain_http,
            Direction::Pull,
        )?;
        step_helper::prepare(
            &registry,
            &references,
            &args.inputs_dir,
            (!args.transfer.no_unpack, args.limits),
            args.launcher.as_deref(),
            &mut report,
        )
        .await
        .map_err(|err| ArtifactError::Prepare(Box::new(err)))
    }
    .await;
    if let Some(path) = &args.termination_log {
        // Shown by `kubectl describe pod` (the reason when it failed; the log has it too) and
        // counted by the artifact cache: a report when there were inputs to pull.
        match (&result, args.inputs.is_empty()) {
            (Err(err), true) => {
                let _ = std::fs::write(path, error_chain(err));
            }
            (Err(err), false) => {
                report.failed(error_chain(err));
                report.write(path);
            }
            (Ok(()), false) => report.write(path),
            (Ok(()), true) => {}
        }
    }
    result
}

async fn launch(args: Launch) -> u8 {
    if args.debug {
        tracing::info!(?args, "launch");
    }
    let working_dir = match std::env::current_dir() {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("ocifit: cannot read the working directory: {err}");
            return step_helper::EXIT_CANNOT_RUN;
        }
    };
    let launch = step_helper::LaunchSpec {
        run: args.run,
        working_dir,
        inputs: args.inputs,
        input_path: args.input_path,
        push: args.push,
        pipe: args.pipe,
        termination_log: args.termination_log,
        push_timeout: std::time::Duration::from_secs(args.push_timeout),
        command: args.command,
    };
    step_helper::launch(&launch).await
}

async fn deliver(args: Deliver) -> Result<(), ArtifactError> {
    if args.debug {
        tracing::info!(?args, "deliver");
    }
    let references = parse(std::slice::from_ref(&args.to))?;
    let to = &references[0];
    let registry = step_helper::client(&[to], args.transfer.plain_http, Direction::Push)?;
    let mut report = Report::new(Direction::Push);
    let result = step_helper::deliver(
        &registry,
        &args.run,
        to,
        !args.transfer.no_unpack,
        args.compression_level,
        &mut report,
    )
    .await
    .map_err(|source| ArtifactError::Deliver {
        run: args.run.clone(),
        source,
    });
    // Counted by the artifact cache when the sidecar stops after the step: only when the step
    // asked for a push (a failed step asks none).
    if let Some(path) = &args.termination_log
        && (report.files > 0 || !report.ok)
    {
        report.write(path);
    }
    result
}

/// The exit status of a failed command, by the one table (`cli::Exit`): a cache that cannot be
/// found or reached is the cluster's, a transfer the registry's.
fn exit_of(err: &ArtifactError) -> super::Exit {
    match err {
        ArtifactError::Cache(AccessError::Client(_)) => super::Exit::Cluster,
        ArtifactError::Cache(AccessError::Cache { source, .. }) => super::Exit::of_kube(source),
        ArtifactError::Registry(_) | ArtifactError::Pull { .. } | ArtifactError::Push { .. } => {
            super::Exit::Registry
        }
        _ => super::Exit::Failed,
    }
}

/// Fills the `--cache` flags of `pull` and `push` from the global cluster flags.
pub(super) fn with_cluster(args: &mut ArtifactArgs, kube: &crate::startup::KubeArgs) {
    let cache = match &mut args.command {
        ArtifactCommand::Pull(pull) => &mut pull.cache,
        ArtifactCommand::Push(push) => &mut push.cache,
        _ => return,
    };
    cache.kube = kube.clone();
    cache.namespace = kube.namespace.clone();
}

/// Transfers below this show no progress.
const SHOWN_FROM: u64 = 4 * 1024 * 1024;
const TICK: Duration = Duration::from_millis(200);

/// A transfer's progress line, updated from the client's streamed bytes.
pub(super) struct Progress {
    bar: ProgressBar,
    registry: Registry,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts following `registry`'s transfers, labelled `verb` ("pushing", "pulling").
    pub(super) fn start(registry: &Registry, verb: &'static str) -> Progress {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        if let Ok(style) =
            ProgressStyle::with_template("{prefix} {bytes} ({binary_bytes_per_sec}) {elapsed}")
        {
            bar.set_style(style);
        }
        bar.set_prefix(verb);
        let ticker = std::io::stderr().is_terminal().then(|| {
            let (bar, registry) = (bar.clone(), registry.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(TICK).await;
                    show(&bar, registry.streamed_bytes());
                }
            })
        });
        Progress {
            bar,
            registry: registry.clone(),
            ticker,
        }
    }

    /// Stops following, leaving the last line on a terminal when it was shown.
    pub(super) fn finish(mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
            show(&self.bar, self.registry.streamed_bytes());
            self.bar.finish();
        }
    }
}

impl Drop for Progress {
    /// A failed transfer stops the line where it was; the error follows on its own line.
    fn drop(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
            self.bar.abandon();
        }
    }
}

fn show(bar: &ProgressBar, moved: u64) {
    if moved >= SHOWN_FROM && bar.is_hidden() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    }
    bar.set_position(moved);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Target;

    #[test]
    fn a_failed_pull_reads_the_reference_then_every_cause() {
        let err = ArtifactError::Pull {
            reference: "registry.example.com/app:v1".into(),
            source: Box::new(PullError::Registry(registry::Error::NotFound {
                target: Target {
                    registry: "registry.example.com".into(),
                    repository: "app".into(),
                    reference: "v1".into(),
                },
                what: "manifest",
            })),
        };
        assert_eq!(
            error_chain(&err),
            "failed to pull registry.example.com/app:v1: manifest not found: registry.example.com/app:v1"
        );
    }

    #[test]
    fn a_sidecar_that_cannot_serve_names_the_run_volume() {
        let err = ArtifactError::Deliver {
            run: PathBuf::from("/ocifit/run"),
            source: io::Error::other("signal handler refused"),
        };
        assert_eq!(
            error_chain(&err),
            "failed to serve the step's outputs from /ocifit/run: signal handler refused"
        );
    }
}
