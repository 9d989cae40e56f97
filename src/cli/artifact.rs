//! `ocifit artifact …`: the step helper. `pull` and `push` move artifacts in the ORAS layout
//! between a directory and a registry; `prepare`, `launch` and `deliver` are what the step
//! planner puts in a step's pod (init container, the step's own command, the pushing sidecar).
//! Credentials come from `ORAS_USER`, `ORAS_PULL_PASS` and `ORAS_PUSH_PASS`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::cache_access::{self, CacheArgs, Reached};
use crate::artifact_cache::{self, PushRequest, credentials::Direction};
use crate::registry::{self, Reference, Registry, RegistryOptions};
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
    Prepare(PrepareArgs),
    /// A step's command, run by the launcher: the command, then its outputs handed to the pusher.
    Launch(LaunchArgs),
    /// A step's pushing sidecar: push the outputs the launcher hands over, until SIGTERM.
    Deliver(DeliverArgs),
}

/// Where to reach the registry, shared by the commands.
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// Reach the registry over plain HTTP (e.g. an ArtifactCache inside the cluster).
    #[arg(long)]
    pub plain_http: bool,
    /// Keep directories as .tar.gz files instead of unpacking them (the `unpack: "false"`
    /// annotation).
    #[arg(long)]
    pub no_unpack: bool,
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
    pub registry: RegistryArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// Where to push (`registry/repository:tag`).
    pub reference: String,
    /// Files and directories, one layer each, titled with their names. A symbolic link is
    /// refused, never followed; links inside a directory are pushed as links.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The manifest's artifactType.
    #[arg(long, default_value = artifact_cache::DEFAULT_ARTIFACT_TYPE)]
    pub artifact_type: String,
    /// gzip level of directory layers (0 stores, 9 compresses most).
    #[arg(long, default_value_t = artifact_cache::DEFAULT_COMPRESSION, value_parser = clap::value_parser!(u32).range(0..=9))]
    pub compression_level: u32,
    #[command(flatten)]
    pub registry: RegistryArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
}

#[derive(Debug, Args)]
pub struct PrepareArgs {
    /// Artifacts to pull before the step, in order.
    #[arg(long = "input")]
    pub inputs: Vec<String>,
    /// The directory the inputs are pulled into (the volume the step sees at input-path).
    #[arg(long = "into", default_value = "/ocifit/inputs")]
    pub inputs_dir: PathBuf,
    /// Install the launcher (ocifit, its loader and libraries) into this directory.
    #[arg(long)]
    pub launcher: Option<PathBuf>,
    /// Where a failure is written for `kubectl describe pod`.
    #[arg(long)]
    pub termination_log: Option<PathBuf>,
    /// Log the settings.
    #[arg(long)]
    pub debug: bool,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// The run volume shared with the pusher.
    #[arg(long)]
    pub run: PathBuf,
    /// The inputs the init container pulled: copied into --input-path before the command runs.
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// Where the inputs are copied (relative to the working directory); the working directory
    /// when unset.
    #[arg(long, requires = "inputs")]
    pub input_path: Option<PathBuf>,
    /// The file or directory to push when the step succeeds (relative to the working directory);
    /// `.` pushes each entry of the working directory.
    #[arg(long)]
    pub push: Option<PathBuf>,
    /// Write the command's standard output to this file.
    #[arg(long)]
    pub pipe: Option<PathBuf>,
    /// Where a failure is written for `kubectl describe pod`.
    #[arg(long)]
    pub termination_log: Option<PathBuf>,
    /// The longest wait for the pusher, in seconds.
    #[arg(long, default_value_t = artifact_cache::PUSH_TIMEOUT.as_secs())]
    pub push_timeout: u64,
    /// Log the settings.
    #[arg(long)]
    pub debug: bool,
    /// The step's command and arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct DeliverArgs {
    /// The run volume shared with the launcher.
    #[arg(long)]
    pub run: PathBuf,
    /// Where the outputs go (`registry/repository:tag`).
    #[arg(long)]
    pub to: String,
    /// gzip level of directory layers (0 stores, 9 compresses most).
    #[arg(long, default_value_t = artifact_cache::DEFAULT_COMPRESSION, value_parser = clap::value_parser!(u32).range(0..=9))]
    pub compression_level: u32,
    /// Log the settings.
    #[arg(long)]
    pub debug: bool,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs an `ocifit artifact` command: 0 when it did what it was asked, 1 otherwise (the reason on
/// stderr).
pub async fn run(args: ArtifactArgs) -> ExitCode {
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
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn parse(references: &[String]) -> Result<Vec<Reference>, String> {
    references
        .iter()
        .map(|r| registry::parse_reference(r).map_err(|err| error_chain(&err)))
        .collect()
}

/// Opens the way to `--cache` when it is given; the references are then inside it.
async fn reach(args: &CacheArgs, direction: Direction) -> Result<Option<Reached>, String> {
    match &args.cache {
        Some(name) => cache_access::reach(args, name, direction)
            .await
            .map(Some)
            .map_err(|err| error_chain(&err)),
        None => Ok(None),
    }
}

/// The references (prefixed with the cache's registry when there is one) and a client for them.
fn client_for(
    references: &[String],
    reached: Option<&Reached>,
    plain_http: bool,
    direction: Direction,
) -> Result<(Vec<Reference>, Registry), String> {
    let Some(reached) = reached else {
        let references = parse(references)?;
        let registry = artifact_cache::client(
            &references.iter().collect::<Vec<_>>(),
            plain_http,
            direction,
        )
        .map_err(|err| error_chain(&err))?;
        return Ok((references, registry));
    };
    let prefixed: Vec<String> = references
        .iter()
        .map(|r| format!("{}/{r}", reached.host))
        .collect();
    let options = RegistryOptions {
        plain_http: if reached.plain_http || plain_http {
            vec![reached.host.clone()]
        } else {
            Vec::new()
        },
        credentials: reached.credentials.clone(),
        ..RegistryOptions::default()
    };
    let registry = Registry::new(options).map_err(|err| error_chain(&err))?;
    Ok((parse(&prefixed)?, registry))
}

async fn pull(args: PullArgs) -> Result<(), String> {
    let reached = reach(&args.cache, Direction::Pull).await?;
    let (references, registry) = client_for(
        &args.references,
        reached.as_ref(),
        args.registry.plain_http,
        Direction::Pull,
    )?;
    for reference in &references {
        let pulled =
            artifact_cache::pull(&registry, reference, &args.output, !args.registry.no_unpack)
                .await
                .map_err(|err| format!("pulling {reference}: {}", error_chain(&err)))?;
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
    Ok(())
}

async fn push(args: PushArgs) -> Result<(), String> {
    let reached = reach(&args.cache, Direction::Push).await?;
    let (references, registry) = client_for(
        std::slice::from_ref(&args.reference),
        reached.as_ref(),
        args.registry.plain_http,
        Direction::Push,
    )?;
    let reference = &references[0];
    let request = PushRequest {
        paths: args.paths,
        unpack: !args.registry.no_unpack,
        artifact_type: args.artifact_type,
        compression: args.compression_level,
    };
    let pushed = artifact_cache::push(&registry, reference, &request)
        .await
        .map_err(|err| format!("pushing to {reference}: {}", error_chain(&err)))?;
    println!("pushed {} ({})", pushed.reference, pushed.digest);
    Ok(())
}

async fn prepare(args: PrepareArgs) -> Result<(), String> {
    if args.debug {
        tracing::info!(?args, "prepare");
    }
    let result = async {
        let references = parse(&args.inputs)?;
        let registry = artifact_cache::client(
            &references.iter().collect::<Vec<_>>(),
            args.registry.plain_http,
            Direction::Pull,
        )
        .map_err(|err| error_chain(&err))?;
        artifact_cache::prepare(
            &registry,
            &references,
            &args.inputs_dir,
            !args.registry.no_unpack,
            args.launcher.as_deref(),
        )
        .await
        .map_err(|err| error_chain(&err))
    }
    .await;
    if let (Err(message), Some(path)) = (&result, &args.termination_log) {
        // Shown by `kubectl describe pod` as the init container's reason; the log has it too.
        let _ = std::fs::write(path, message);
    }
    result
}

async fn launch(args: LaunchArgs) -> u8 {
    if args.debug {
        tracing::info!(?args, "launch");
    }
    let working_dir = match std::env::current_dir() {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("ocifit: cannot read the working directory: {err}");
            return artifact_cache::EXIT_CANNOT_RUN;
        }
    };
    let launch = artifact_cache::Launch {
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
    artifact_cache::launch(&launch).await
}

async fn deliver(args: DeliverArgs) -> Result<(), String> {
    if args.debug {
        tracing::info!(?args, "deliver");
    }
    let references = parse(std::slice::from_ref(&args.to))?;
    let to = &references[0];
    let registry = artifact_cache::client(&[to], args.registry.plain_http, Direction::Push)
        .map_err(|err| error_chain(&err))?;
    artifact_cache::deliver(
        &registry,
        &args.run,
        to,
        !args.registry.no_unpack,
        args.compression_level,
    )
    .await
    .map_err(|err| {
        format!(
            "serving the step's outputs from {}: {err}",
            args.run.display()
        )
    })
}
