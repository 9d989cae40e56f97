//! The command line: `ocifit run`, `ocifit resolve`, `ocifit crd`, `ocifit artifact` and
//! `ocifit placement`, `ocifit migrate`, `ocifit release-gates`, `ocifit selftest`, `ocifit
//! explain` and `ocifit completion`, by kubectl's habits: the cluster flags (`--kubeconfig`,
//! `--context`, `-n`) anywhere on the line, `-o table|json|yaml` where there is an answer, one
//! table of exit codes ([`Exit`]), and the same binary as a kubectl plugin (`kubectl-ocifit`).
//! The output format ([`Output`]) and the exit codes are here, at the edge every subcommand
//! shares, so the same failure exits the same way and prints alike whichever subcommand met it.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use serde::Serialize;

mod artifact;
mod cache_access;
mod crd;
mod explain;
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
pub use placement::{PlacementArgs, PlacementCommand, RELEASE_ALL_DEPRECATED};
pub use resolve::ResolveArgs;
pub use selftest::{PLACEMENT_PROBE, PROBE_LABEL};

#[derive(Debug, Parser)]
#[command(
    name = "ocifit",
    version,
    about = "Gives every Kubernetes node the container image built for it"
)]
pub struct Cli {
    /// Which cluster and namespace, for every subcommand, anywhere on the line.
    #[command(flatten)]
    pub kube: crate::startup::KubeArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// The name kubectl runs a plugin by: `kubectl ocifit …` runs the executable `kubectl-ocifit`.
pub const PLUGIN_EXECUTABLE: &str = "kubectl-ocifit";

/// How usage and help name the command: `kubectl ocifit` when run as the kubectl plugin,
/// `ocifit` otherwise.
pub fn invoked_as(argv0: Option<&OsStr>) -> &'static str {
    let file = argv0.and_then(|a| Path::new(a).file_name());
    // Windows plugins end in `.exe`; kubectl runs them by the same rule.
    let stem = file.map(|f| f.to_string_lossy().trim_end_matches(".exe").to_owned());
    match stem.as_deref() {
        Some(PLUGIN_EXECUTABLE) => "kubectl ocifit",
        _ => "ocifit",
    }
}

impl Cli {
    /// The command line as clap describes it, named as it was invoked.
    pub fn command_named(name: &'static str) -> clap::Command {
        Cli::command().bin_name(name).display_name(name)
    }

    /// Parses the process's arguments, usage and help naming the command as it was invoked
    /// (errors print and exit 2, as clap does).
    pub fn parse_invoked() -> Cli {
        let name = invoked_as(std::env::args_os().next().as_deref());
        let matches = Cli::command_named(name).get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit())
    }
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
    /// image (the answer is still printed), 2 when the input cannot be used, 4 when a registry
    /// cannot give the artifact (docs/cli.md: exit codes).
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
    /// Platform placement by hand: `untaint` removes ocifit's taint from every node;
    /// `release-all` is the deprecated spelling of `release-gates --gate placement`.
    Placement(PlacementArgs),
    /// Translate what the seeds' users wrote (an oras-operator OrasCache, kube-arch-webhook's Helm
    /// values, archaware-controller's install manifests) into ocifit objects (printed, for
    /// `kubectl apply -f -`) and chart values (`--values FILE`). Each setting that cannot be
    /// carried over is a `#` comment saying why (docs/migrating.md).
    ///
    /// Exit status: 0 when printed, 2 when an input cannot be read.
    Migrate(MigrateArgs),
    /// Remove every scheduling gate ocifit adds (placement's `placement.ocifit.io/platforms`,
    /// image selection's `selection.ocifit.io/image`) from every pod holding one, other gates kept:
    /// the way out after an uninstall (the chart's hook runs it) or while ocifit is down.
    ///
    /// `--gate` picks gates, `--dry-run` lists what it would release, `-n` keeps to one namespace.
    /// Exit status: 0 when every held pod was released, 1 otherwise (the others still are).
    ReleaseGates(gates::ReleaseGatesArgs),
    /// Check an install from inside the cluster (the chart's `helm test` runs it): the CRDs are
    /// served, and an object dry-run through each `--webhook` is denied or changed by it.
    ///
    /// Exit status: 0 when every check passed, 1 otherwise (each failed check says why).
    Selftest(selftest::SelftestArgs),
    /// Tell, from the live cluster, what ocifit did to a pod and why: image selection (policy,
    /// node class, image per container), placement (gate, policy, platforms, the node's
    /// platform, exec format errors) and the artifact cache (cache, steps, helpers).
    Explain(explain::ExplainArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell), e.g.
    /// `source <(ocifit completion bash)`.
    Completion(CompletionArgs),
}

/// Makes this process non-dumpable: its `/proc/<pid>/environ`, `mem` and the like become root's
/// and no process of its user may trace it. Every ocifit process holds a credential, so `main`
/// calls it on every start, before anything is read or a thread started.
pub fn make_non_dumpable() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(std::io::Error::from)
}

/// A client for the cluster the global flags name (kube and the registry client share ring,
/// installed first so that nothing picks one at runtime).
pub(crate) async fn client(kube: &crate::startup::KubeArgs) -> anyhow::Result<kube::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    crate::startup::kube_client(kube).await
}

/// [`client`] for a subcommand: when none can be built, the error is printed and the status to
/// exit with, [`Exit::Cluster`], returned.
pub(crate) async fn connect(kube: &crate::startup::KubeArgs) -> Result<kube::Client, ExitCode> {
    client(kube).await.map_err(|err| {
        eprintln!("error: {err:#}");
        Exit::Cluster.into()
    })
}

pub async fn run(cli: Cli) -> ExitCode {
    let Cli { kube, command } = cli;
    match command {
        Command::Run(mut args) => {
            args.kube = kube;
            crate::startup::run(*args).await
        }
        Command::Resolve(args) => resolve::run(&args).await,
        Command::Artifact(mut args) => {
            artifact::with_cluster(&mut args, &kube);
            artifact::run(args).await
        }
        Command::Crd { name } => match crd_yaml(name.as_deref()) {
            Ok(yaml) => {
                // A closed stdout (e.g. `| head`) is not worth a panic.
                let _ = std::io::stdout().write_all(yaml.as_bytes());
                Exit::Ok.into()
            }
            Err(err) => {
                eprintln!("error: {}", crate::telemetry::error_chain(&err));
                Exit::Usage.into()
            }
        },
        Command::Placement(mut args) => {
            args.kube = kube;
            placement::run(&args).await
        }
        Command::Migrate(args) => migrate::run(&args),
        Command::ReleaseGates(mut args) => {
            args.kube = kube;
            gates::run(&args).await
        }
        Command::Selftest(mut args) => {
            args.kube = kube;
            selftest::run(&args).await
        }
        Command::Explain(args) => explain::run(&args, &kube).await,
        Command::Completion(args) => print_completion(&args),
    }
}

/// `ocifit completion`'s argument.
#[derive(Debug, clap::Args)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The completion script for `shell`, completing the command named `name`.
fn completion_script(shell: clap_complete::Shell, name: &'static str) -> Vec<u8> {
    let mut command = Cli::command_named(name);
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, name, &mut out);
    out
}

/// `ocifit completion SHELL`: prints the script for `ocifit` on stdout, generated from the same
/// command definition the binary parses with (so it never lags a flag).
fn print_completion(args: &CompletionArgs) -> ExitCode {
    // A closed stdout (e.g. `| head`) is not worth a panic.
    let _ = std::io::stdout().write_all(&completion_script(args.shell, "ocifit"));
    Exit::Ok.into()
}

/// How a subcommand ended, as its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Done: everything asked for was done (or, with `--dry-run`, would be).
    Ok,
    /// The command ran and its answer is a failure: a node class without an image, a pod or
    /// node left unreleased, a failed selftest check, a task that failed in `ocifit run`.
    Failed,
    /// Unusable input: flags, arguments or files (clap's own usage errors exit 2 too), or an
    /// object named on the command line that does not exist.
    Usage,
    /// The cluster cannot be used: no kubeconfig and no in-cluster account, an unknown
    /// context, the apiserver unreachable, or the credentials refused (401/403).
    Cluster,
    /// A registry cannot be used: unreachable, refused the credentials, or has not the artifact.
    Registry,
}

impl Exit {
    /// Every exit status, in the order docs/cli.md lists them.
    pub const ALL: [Exit; 5] = [
        Exit::Ok,
        Exit::Failed,
        Exit::Usage,
        Exit::Cluster,
        Exit::Registry,
    ];

    /// The process's exit status.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::Cluster => 3,
            Exit::Registry => 4,
        }
    }

    /// The name docs/cli.md gives it.
    pub const fn name(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Failed => "failed",
            Exit::Usage => "usage",
            Exit::Cluster => "cluster",
            Exit::Registry => "registry",
        }
    }

    /// The exit status of a failed Kubernetes API call: the apiserver unreachable or refusing
    /// who we are is the cluster's; an object named that is not there
    /// is the input's; anything else it answered is a failure.
    pub fn of_kube(err: &kube::Error) -> Exit {
        match err {
            kube::Error::Api(status) => match status.code {
                401 | 403 => Exit::Cluster,
                404 => Exit::Usage,
                _ => Exit::Failed,
            },
            kube::Error::Auth(_)
            | kube::Error::HyperError(_)
            | kube::Error::Service(_)
            | kube::Error::HttpError(_)
            | kube::Error::RustlsTls(_)
            | kube::Error::InferConfig(_) => Exit::Cluster,
            _ => Exit::Failed,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// How a subcommand prints its answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Lines for people.
    #[default]
    Table,
    /// One JSON document (a stable contract for scripts).
    Json,
    /// The same document as YAML.
    Yaml,
}

/// The `-o` flag.
#[derive(Clone, Copy, Debug, Default, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// Why a report could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("failed to render the report as JSON")]
    Json(#[from] serde_json::Error),
    #[error("failed to render the report as YAML")]
    Yaml(#[from] serde_saphyr::SerializeError),
}

impl Output {
    /// `report` as this format; `table` draws it for people.
    pub fn render<T: Serialize>(
        self,
        report: &T,
        table: impl FnOnce(&T) -> String,
    ) -> Result<String, RenderError> {
        Ok(match self {
            Output::Table => table(report),
            Output::Json => {
                let mut json = serde_json::to_string_pretty(report)?;
                json.push('\n');
                json
            }
            Output::Yaml => serde_saphyr::to_string(report)?,
        })
    }

    /// Prints `report` on stdout; an error rendering it on stderr.
    pub fn print<T: Serialize>(self, report: &T, table: impl FnOnce(&T) -> String) {
        match self.render(report, table) {
            // A closed stdout (e.g. `| head`) is not worth a panic.
            Ok(text) => {
                let _ = std::io::stdout().write_all(text.as_bytes());
            }
            Err(err) => eprintln!("error: {}", crate::telemetry::error_chain(&err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(args).unwrap()
    }

    #[test]
    fn the_cluster_flags_are_read_before_or_after_the_subcommand() {
        for line in [
            &["ocifit", "--context", "c", "-n", "ns", "release-gates"][..],
            &["ocifit", "release-gates", "--context", "c", "-n", "ns"],
            &[
                "ocifit",
                "placement",
                "--context",
                "c",
                "release-all",
                "-n",
                "ns",
            ],
            &[
                "ocifit",
                "--namespace",
                "ns",
                "explain",
                "pod",
                "web",
                "--context",
                "c",
            ],
        ] {
            let cli = parse(line);
            assert_eq!(cli.kube.context.as_deref(), Some("c"), "{line:?}");
            assert_eq!(cli.kube.namespace.as_deref(), Some("ns"), "{line:?}");
        }
    }

    #[test]
    fn run_as_the_kubectl_plugin_usage_says_kubectl_ocifit() {
        assert_eq!(
            invoked_as(Some(OsStr::new("/usr/local/bin/kubectl-ocifit"))),
            "kubectl ocifit"
        );
        assert_eq!(
            invoked_as(Some(OsStr::new("kubectl-ocifit.exe"))),
            "kubectl ocifit"
        );
        assert_eq!(invoked_as(Some(OsStr::new("/bin/ocifit"))), "ocifit");
        assert_eq!(invoked_as(None), "ocifit");
        let help = Cli::command_named("kubectl ocifit")
            .render_usage()
            .to_string();
        assert!(help.contains("kubectl ocifit"), "{help}");
    }

    #[test]
    fn each_shell_s_script_completes_the_subcommands_and_the_global_flags() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let text = String::from_utf8(completion_script(shell, "ocifit")).unwrap();
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

    mod exit {
        use super::*;

        fn api(code: u16) -> kube::Error {
            kube::Error::Api(
                kube::core::Status::failure("refused", "Refused")
                    .with_code(code)
                    .boxed(),
            )
        }

        #[test]
        fn every_code_is_distinct_and_ok_is_zero() {
            let codes: std::collections::BTreeSet<u8> =
                Exit::ALL.iter().map(|e| e.code()).collect();
            assert_eq!(codes.len(), Exit::ALL.len());
            assert_eq!(Exit::Ok.code(), 0);
        }

        #[test]
        fn refused_credentials_are_the_cluster_s_and_a_missing_object_the_input_s() {
            assert_eq!(Exit::of_kube(&api(401)), Exit::Cluster);
            assert_eq!(Exit::of_kube(&api(403)), Exit::Cluster);
            assert_eq!(Exit::of_kube(&api(404)), Exit::Usage);
            assert_eq!(Exit::of_kube(&api(500)), Exit::Failed);
        }
    }

    mod output {
        use super::*;

        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Report {
            dry_run: bool,
            pods: Vec<&'static str>,
        }

        #[test]
        fn json_and_yaml_carry_the_same_fields_and_the_table_is_the_caller_s() {
            let report = Report {
                dry_run: true,
                pods: vec!["shop/web"],
            };
            let json = Output::Json.render(&report, |_| String::new()).unwrap();
            let yaml = Output::Yaml.render(&report, |_| String::new()).unwrap();
            let from_json: serde_json::Value = serde_json::from_str(&json).unwrap();
            let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
            assert_eq!(from_json, from_yaml);
            assert_eq!(from_json["dryRun"], true);
            assert_eq!(from_json["pods"][0], "shop/web");
            let table = Output::Table.render(&report, |r| format!("{} pod(s)\n", r.pods.len()));
            assert_eq!(table.unwrap(), "1 pod(s)\n");
        }
    }
}
