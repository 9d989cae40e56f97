//! The command line: `ocifit resolve` and `ocifit crd` (and later `ocifit run`).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "ocifit", version, about = "Gives every Kubernetes node the container image built for it")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the ImageSelectionPolicy CustomResourceDefinition as YAML.
    Crd,
}

pub async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Crd => ExitCode::SUCCESS,
    }
}
