//! The command line: `ocifit run`, `ocifit resolve`, `ocifit crd`, `ocifit artifact` and
//! `ocifit placement`, `ocifit migrate`, `ocifit release-gates` and `ocifit selftest`.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod artifact;
mod cache_access;
mod crd;
mod gates;
mod input;
mod migrate;
mod placement;
mod resolve;
mod selftest;

pub use crate::startup::RunArgs;
pub use artifact::ArtifactArgs;
pub use crd::{CrdError, crd_documents, crd_yaml};
pub use migrate::MigrateArgs;
pub use placement::{PlacementArgs, PlacementCommand};
pub use resolve::{EXIT_INVALID_INPUT, EXIT_NO_MATCH, ResolveArgs};
pub use selftest::{PLACEMENT_PROBE, PROBE_LABEL};

#[derive(Debug, Parser)]
#[command(
    name = "ocifit",
    version,
    about = "Gives every Kubernetes node the container image built for it"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controller and the admin HTTP server (/livez, /readyz, /metrics) until SIGTERM or
    /// SIGINT.
    Run(Box<RunArgs>),
    /// Show which image each kind of node would get from a compatibility artifact, and why
    /// (offline: files in, a table or JSON out).
    ///
    /// Exit status: 0 when every node class has an image, 1 when some class has no compatible
    /// image (the answer is still printed), 2 when the input cannot be used.
    Resolve(ResolveArgs),
    /// Print the CustomResourceDefinitions (ImageSelectionPolicy, PlacementPolicy, ArtifactCache)
    /// as one YAML stream, or only the one named (e.g. `artifactcaches.ocifit.io`).
    Crd {
        /// The CRD's name; every CRD when absent.
        name: Option<String>,
    },
    /// Move workflow artifacts between a directory and a registry in the ORAS layout; run a
    /// workflow step's command (what a step's pod runs).
    Artifact(ArtifactArgs),
    /// Platform placement by hand: `release-all` removes ocifit's scheduling gate from every
    /// pod still holding it (the way out after an uninstall or while ocifit is down).
    Placement(PlacementArgs),
    /// Translate what the seeds' users wrote (an oras-operator OrasCache, kube-arch-webhook's Helm
    /// values, archaware-controller's install manifests) into ocifit objects (printed, for
    /// `kubectl apply -f -`) and chart values (`--values FILE`). Each setting that cannot be
    /// carried over is a `#` comment saying why (docs/migrating.md).
    ///
    /// Exit status: 0 when printed, 2 when an input cannot be read.
    Migrate(MigrateArgs),
    /// Remove every scheduling gate ocifit adds (placement's `placement.ocifit.io/platforms`,
    /// image selection's `selection.ocifit.io/image`) from every pod still holding one, any
    /// other gate kept: the way out after an uninstall (the chart's uninstall hook runs it) or
    /// while ocifit is down. Held pods then run as admitted, unchanged.
    ///
    /// Exit status: 0 when every held pod was released, 1 otherwise (the others still are).
    ReleaseGates(gates::ReleaseGatesArgs),
    /// Check an install from inside the cluster (the chart's `helm test` runs it): the CRDs are
    /// served, and an object dry-run through each `--webhook` is denied or changed by it.
    ///
    /// Exit status: 0 when every check passed, 1 otherwise (each failed check says why).
    Selftest(selftest::SelftestArgs),
}

/// Makes this process non-dumpable: its `/proc/<pid>/environ`, `mem` and the like become
/// root's, and no process of its user may trace it. `main` calls it before anything is read or a
/// thread started: every ocifit process holds a credential (the operator its token, a step's
/// helpers the registry's passwords in their environment), and a restarted helper is a new
/// process, so this runs on every start.
pub fn make_non_dumpable() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(std::io::Error::from)
}

pub async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Run(args) => crate::startup::run(*args).await,
        Command::Resolve(args) => resolve::run(&args).await,
        Command::Artifact(args) => artifact::run(args).await,
        Command::Crd { name } => match crd_yaml(name.as_deref()) {
            Ok(yaml) => {
                // A closed stdout (e.g. `| head`) is not worth a panic.
                let _ = std::io::stdout().write_all(yaml.as_bytes());
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("error: {}", crate::telemetry::error_chain(&err));
                ExitCode::from(2)
            }
        },
        Command::Placement(args) => placement::run(&args).await,
        Command::Migrate(args) => migrate::run(&args),
        Command::ReleaseGates(args) => gates::run(&args).await,
        Command::Selftest(args) => selftest::run(&args).await,
    }
}
