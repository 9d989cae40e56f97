//! The flags of `ocifit resolve`.

use std::path::PathBuf;

use clap::{ArgGroup, Args};

use crate::cli::registry_access::RegistryAccessArgs;
use crate::engine::Format;

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).multiple(true).args(["artifact", "policy"])))]
pub struct ResolveArgs {
    /// The compatibility artifact: a file in the ocifit JSON or NFD image-compatibility format,
    /// or an OCI reference (`registry.example.com/acme/app-compat:v1`, by tag or digest) whose
    /// layer media type says the format. An existing file, or anything that looks like a path
    /// (starting with `/` or `.`, ending in `.json`, `.yaml` or `.yml`), is read as a file.
    /// With `--policy`, it stands in for the policy's `spec.artifact.ref`.
    #[arg(long, value_name = "FILE|REF")]
    pub artifact: Option<String>,

    /// An ImageSelectionPolicy (YAML or JSON, as `kubectl get isp NAME -o yaml` prints it):
    /// its artifact (`ref`, or each candidate's artifact from the registry) and its
    /// nodeSelector.
    #[arg(long, value_name = "FILE", conflicts_with = "node_selector")]
    pub policy: Option<PathBuf>,

    /// The nodes, as `kubectl get nodes -o json` (or `-o yaml`) prints them: a List, a NodeList or
    /// one Node.
    #[arg(long, value_name = "FILE")]
    pub nodes: PathBuf,

    /// NFD NodeFeature objects, as `kubectl get nodefeatures -A -o json` prints them. Without it,
    /// NFD rules read the features NFD publishes as node labels.
    #[arg(long, value_name = "FILE")]
    pub node_features: Option<PathBuf>,

    /// The format of an artifact file. Detected from the document's shape when omitted (the
    /// output says how). Registry content is read by its media type instead.
    #[arg(long, value_parser = parse_format)]
    pub format: Option<Format>,

    /// Ask no registry: the artifact must be a file, and the candidate images' platforms are
    /// not checked (the output says so).
    #[arg(long)]
    pub offline: bool,

    #[command(flatten)]
    pub registry: RegistryAccessArgs,

    /// Registries that may be reached (`HOST[:PORT]` or `*.DOMAIN[:PORT]`, repeatable or
    /// comma-separated), as the operator's flag of the same name. Default: any.
    #[arg(long, value_name = "PATTERN", value_delimiter = ',')]
    pub allowed_registries: Vec<String>,

    /// Which nodes count, like a policy's spec.nodeSelector (repeatable). Default: every node
    /// except control-plane nodes.
    #[arg(long = "node-selector", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub node_selector: Vec<(String, String)>,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = crate::cli::Output::Table)]
    pub output: crate::cli::Output,
}

fn parse_format(s: &str) -> Result<Format, crate::engine::UnknownFormat> {
    s.parse()
}

/// A `--label` value that is not `KEY=VALUE`.
#[derive(Debug, thiserror::Error)]
#[error("expected KEY=VALUE, got {0:?}")]
pub(super) struct NotALabel(String);

fn parse_label(s: &str) -> Result<(String, String), NotALabel> {
    match s.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(NotALabel(s.to_owned())),
    }
}
