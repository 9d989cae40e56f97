//! `ocifit-dev`: a local cluster and registry for working on ocifit by hand (`up`), the README's
//! one-command demo (`demo`, run by `tools/demo`), and images assembled without a container engine
//! (`image`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use ocifit_testkit::demo::{self, DemoOptions};
use ocifit_testkit::image::{self, ImageBuilder};
use ocifit_testkit::{RealNode, dev};

/// Local development environment for ocifit (tools from tools/install).
#[derive(Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and a registry;
    /// print KUBECONFIG and the registry address; run until Ctrl-C.
    Up {
        /// Require basic auth on the registry, as USER:PASSWORD.
        #[arg(long, value_name = "USER:PASSWORD")]
        registry_auth: Option<String>,
        /// Add a real node (containerd, kubelet, kube-proxy) named NAME; may be repeated. Needs
        /// root; the apiserver and the registry then listen on this machine's own address.
        #[arg(long, value_name = "NAME")]
        real_node: Vec<String>,
    },
    /// The flavor demo: cluster, registry, artifact, three nodes, ocifit installed by its chart,
    /// the policy and three pods; prints where each pod landed with which image, then keeps
    /// everything up until Ctrl-C or SIGTERM (or, with --check, tears down and exits 0 only if
    /// every pod landed on a node of its flavor with the matching image).
    Demo {
        /// The ocifit binary its image (installed by the chart) is assembled from.
        #[arg(long, value_name = "PATH")]
        ocifit: PathBuf,
        /// The repository checkout (its crds/ and example/ are used).
        #[arg(long, value_name = "DIR", default_value = ".")]
        repo: PathBuf,
        /// Where the chart's values file and the summary are written.
        #[arg(long, value_name = "DIR")]
        state_dir: PathBuf,
        /// Check the outcome, tear down and exit instead of staying up.
        #[arg(long)]
        check: bool,
        /// How long each wait may take, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 60)]
        timeout: u64,
    },
    /// Assemble an OCI image without a container engine and push it with crane.
    #[command(subcommand)]
    Image(ImageCommand),
}

#[derive(Subcommand)]
enum ImageCommand {
    /// ocifit's image from a built binary: the binary, the shared libraries it links and the loader,
    /// CA certificates, the nonroot user; user, entrypoint, command, ports and labels as the
    /// Dockerfile's release image has them.
    Ocifit {
        /// The ocifit binary.
        #[arg(long, value_name = "PATH", default_value = "target/release/ocifit")]
        binary: PathBuf,
        /// The `org.opencontainers.image.revision` label (default: `git rev-parse HEAD`).
        #[arg(long)]
        revision: Option<String>,
        #[command(flatten)]
        target: ImageTarget,
    },
    /// A tiny image that prints LINE (e.g. "flavor vanilla") and waits until it is stopped.
    Flavor {
        /// What it prints.
        #[arg(long)]
        line: String,
        #[command(flatten)]
        target: ImageTarget,
    },
}

#[derive(Args)]
struct ImageTarget {
    /// Where to push it, e.g. 127.0.0.1:5000/ocifit:dev.
    #[arg(long, value_name = "REFERENCE")]
    tag: String,
    /// The registry is plain HTTP.
    #[arg(long)]
    insecure: bool,
    /// Where to write the OCI image layout (default: a temporary directory, removed after).
    #[arg(long, value_name = "DIR")]
    layout: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Up {
            registry_auth,
            real_node,
        } => up(registry_auth.as_deref(), &real_node).await,
        Command::Demo {
            ocifit,
            repo,
            state_dir,
            check,
            timeout,
        } => {
            let options = DemoOptions {
                repo,
                ocifit,
                state_dir,
                timeout: Duration::from_secs(timeout),
                stays_up: !check,
            };
            run_demo(&options, check).await
        }
        Command::Image(command) => match build_image(command).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ocifit-dev image: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

async fn build_image(command: ImageCommand) -> Result<(), String> {
    let (image, target) = match command {
        ImageCommand::Ocifit {
            binary,
            revision,
            target,
        } => {
            let version = output(&binary, &["--version"])?;
            let version = version
                .split_whitespace()
                .last()
                .unwrap_or_default()
                .to_owned();
            let revision = match revision {
                Some(revision) => revision,
                None => output(std::path::Path::new("git"), &["rev-parse", "HEAD"])
                    .map_err(|e| format!("{e} (or give --revision)"))?,
            };
            let image =
                image::ocifit_image(&binary, &version, &revision).map_err(|e| e.to_string())?;
            (image, target)
        }
        ImageCommand::Flavor { line, target } => (
            image::flavor_image(&line).map_err(|e| e.to_string())?,
            target,
        ),
    };
    push(&image, &target).await
}

async fn push(image: &ImageBuilder, target: &ImageTarget) -> Result<(), String> {
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = target
        .layout
        .clone()
        .unwrap_or_else(|| scratch.path().join("layout"));
    let layout = image::push(image, &dir, &target.tag, target.insecure)
        .await
        .map_err(|e| e.to_string())?;
    println!("{}@{}", target.tag, layout.digest);
    Ok(())
}

/// The trimmed stdout of a command that must succeed.
fn output(program: &std::path::Path, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`{} {}` failed: {}",
            program.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

async fn up(registry_auth: Option<&str>, real_nodes: &[String]) -> ExitCode {
    let auth = match registry_auth.map(|a| a.split_once(':')) {
        None => None,
        Some(Some(pair)) => Some(pair),
        Some(None) => {
            eprintln!("ocifit-dev: --registry-auth must be USER:PASSWORD");
            return ExitCode::from(2);
        }
    };
    let builder = real_nodes
        .iter()
        .fold(dev::full_cluster(auth), |builder, name| {
            builder.real_node(RealNode::new(name))
        });
    match dev::run_until_interrupted(builder).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ocifit-dev: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run_demo(options: &DemoOptions, check: bool) -> ExitCode {
    let demo = match demo::start(options).await {
        Ok(demo) => demo,
        Err(e) => {
            eprintln!("ocifit-dev demo: {e:?}");
            return ExitCode::FAILURE;
        }
    };
    println!("\n{}", demo.summary);
    if check {
        let passed = demo.succeeded();
        drop(demo);
        if passed {
            println!(
                "demo check passed: every flavor pod has its flavor's image on a node of its flavor, and the real node ran its pod's"
            );
            return ExitCode::SUCCESS;
        }
        eprintln!("demo check FAILED: see the table above");
        return ExitCode::FAILURE;
    }
    let stopped = dev::stop_requested().await;
    let still_running = demo.check_running().await;
    drop(demo);
    println!("demo stopped and removed");
    match (stopped, still_running) {
        (Ok(()), Ok(())) => ExitCode::SUCCESS,
        (Err(e), _) => {
            eprintln!("ocifit-dev demo: failed to wait for Ctrl-C or SIGTERM: {e}");
            ExitCode::FAILURE
        }
        (_, Err(e)) => {
            eprintln!("ocifit-dev demo: {e:?}");
            ExitCode::FAILURE
        }
    }
}
