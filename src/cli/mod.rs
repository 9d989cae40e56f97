//! The command line: `ocifit resolve` and `ocifit crd` (and later `ocifit run`).

use std::process::ExitCode;

use std::io::Write;

use clap::{Parser, Subcommand};

mod crd;

pub use crd::crd_yaml;

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
    /// Print the ImageSelectionPolicy CustomResourceDefinition as YAML.
    Crd,
}

pub async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Crd => match crd_yaml() {
            Ok(yaml) => {
                // A closed stdout (e.g. `| head`) is not worth a panic.
                let _ = std::io::stdout().write_all(yaml.as_bytes());
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("error: failed to render the CRD as YAML: {err}");
                ExitCode::from(2)
            }
        },
    }
}
