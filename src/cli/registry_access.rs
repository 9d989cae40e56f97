//! The registry flags `ocifit resolve` and `ocifit placement audit` share, spelled as ORAS spells
//! them. Their help is resolve's; the audit words its own for the images' registries it reaches.

use std::path::PathBuf;

/// `--plain-http`, `--docker-config FILE`, `--ca-file FILE`.
#[derive(Debug, clap::Args)]
pub struct RegistryAccessArgs {
    /// Reach the artifact's registry (and, for a policy with candidates, theirs) over plain
    /// HTTP instead of HTTPS (as ORAS spells it).
    #[arg(long)]
    pub plain_http: bool,

    /// A docker config file (`~/.docker/config.json`, or a Kubernetes dockerconfigjson) with
    /// registry credentials. Anonymous access without it.
    #[arg(long, value_name = "FILE")]
    pub docker_config: Option<PathBuf>,

    /// A PEM file of CA certificates to trust, besides the system's, for registries.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
}
