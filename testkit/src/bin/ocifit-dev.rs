//! `ocifit-dev up`: a local cluster and registry for working on ocifit by hand.

use clap::{Parser, Subcommand};

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
    },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let Command::Up { registry_auth } = Cli::parse().command;
    let auth = match registry_auth.as_deref().map(|a| a.split_once(':')) {
        None => None,
        Some(Some(pair)) => Some(pair),
        Some(None) => {
            eprintln!("ocifit-dev: --registry-auth must be USER:PASSWORD");
            return std::process::ExitCode::from(2);
        }
    };
    match ocifit_testkit::dev::run_until_interrupted(ocifit_testkit::dev::full_cluster(auth)).await
    {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ocifit-dev: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
