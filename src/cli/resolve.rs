//! `ocifit resolve`: which image each kind of node would get, and why, from an artifact or a whole
//! ImageSelectionPolicy. Reads the artifacts from files or registries, the nodes from files, looks
//! up the candidate images' platforms (unless `--offline`, which it then says) and calls image
//! selection's decision ([`crate::image_selection::resolution`]), so it answers as the controller
//! does. Prints a table or a stable JSON (or YAML) document. Exit status: 0 when every class has
//! an image, [`Exit::Failed`] when some has none, [`Exit::Usage`] for unusable input,
//! [`Exit::Registry`] for an artifact the registry cannot give.
//! Its registry flags ([`RegistryAccessArgs`]) are `ocifit placement audit`'s too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgGroup, Args};
use k8s_openapi::api::core::v1::Node;

mod inputs;
mod report;

use super::Exit;
use super::input::{self, InputError};
use crate::api::ImageSelectionPolicy;
use crate::engine::{ArtifactError, Format, NodeFeature, NodeInputs, features_by_node};
use crate::image_selection::{PlatformLookup, Platforms};
use crate::registry::{self, ErrorKind, Registry, RegistryFlags, RegistryOptions};
use inputs::Loaded;
pub(super) use report::Report;

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

/// Why `ocifit resolve` could not answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResolveError {
    /// A nodes, node-features or policy file is unusable.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The policy file holds no policy, or several.
    #[error("{path} holds {found} ImageSelectionPolicies, expected one")]
    NotOnePolicy { path: PathBuf, found: usize },
    /// The policy names neither an artifact nor candidates.
    #[error("{path}: the policy names neither spec.artifact.ref nor spec.artifact.candidates")]
    PolicyWithoutArtifact { path: PathBuf },
    /// The artifact file does not parse or is invalid.
    #[error("{path}: {source}")]
    Artifact {
        path: PathBuf,
        #[source]
        source: ArtifactError,
    },
    /// The artifact is neither an existing file nor a valid OCI reference.
    #[error("--artifact {given:?} is not an existing file, nor an OCI reference: {source}")]
    NotFileNorReference {
        given: String,
        #[source]
        source: Box<registry::Error>,
    },
    /// A reference the policy names is not a valid OCI reference.
    #[error("{given:?} is not a valid OCI reference: {source}")]
    BadReference {
        given: String,
        #[source]
        source: Box<registry::Error>,
    },
    /// The registry options (docker config, CA file) are unusable.
    #[error(transparent)]
    RegistryOptions(Box<registry::Error>),
    /// The registry could not give the artifact, or gave an invalid one.
    #[error(transparent)]
    Registry(Box<registry::ResolveError>),
    /// No candidate's artifact could be had (candidates mode).
    #[error("{0}")]
    Candidates(String),
    /// `--format` was given with a registry reference.
    #[error("--format applies to artifact files only; registry content is read by its media type")]
    FormatWithReference,
    /// `--offline` was given, but the answer needs a registry.
    #[error(
        "--offline asks no registry, but {needs}: give the artifact as a file, or drop --offline"
    )]
    OfflineNeedsRegistry { needs: &'static str },
    /// Neither an artifact nor a policy was given.
    #[error("give --artifact or --policy")]
    NoSource,
    /// A node in the nodes file has no name.
    #[error("{path}: item {index} has no metadata.name")]
    UnnamedNode { path: PathBuf, index: usize },
}

impl ResolveError {
    /// Its exit status by the one table: a registry that could not give what was asked is the
    /// registry's; everything else is unusable input.
    pub(crate) fn exit(&self) -> crate::cli::Exit {
        match self {
            ResolveError::Registry(_) | ResolveError::Candidates(_) => crate::cli::Exit::Registry,
            _ => crate::cli::Exit::Usage,
        }
    }
}

/// The namespace nfd-master runs in by default; its NodeFeature objects are merged first.
const NFD_NAMESPACE: &str = "node-feature-discovery";

pub(super) async fn run(args: &ResolveArgs) -> ExitCode {
    match answer(args).await {
        Ok(report) => {
            if report.classes.is_empty() {
                eprintln!(
                    "note: no node counts (every node is a control-plane node or the node \
                     selector matches none)"
                );
            }
            args.output.print(&report, Report::table);
            if report.classes.iter().all(|c| c.image.is_some()) {
                Exit::Ok.into()
            } else {
                Exit::Failed.into()
            }
        }
        Err(err) => {
            eprintln!("error: {err}");
            err.exit().into()
        }
    }
}

async fn answer(args: &ResolveArgs) -> Result<Report, ResolveError> {
    let policy = args.policy.as_deref().map(read_policy).transpose()?;
    let flags = RegistryFlags {
        plain_http: args.registry.plain_http,
        docker_config: args.registry.docker_config.clone(),
        ca_file: args.registry.ca_file.clone(),
        allowed_registries: args.allowed_registries.clone(),
    };
    let loaded = inputs::load(args, policy.as_ref(), &flags).await?;
    let nodes = read_nodes(args)?;
    let selector: BTreeMap<String, String> = match &policy {
        Some(policy) => policy.spec.node_selector.clone(),
        None => args.node_selector.iter().cloned().collect(),
    };
    let platforms = platforms(&loaded, &flags, args.offline).await?;
    Ok(Report::new(
        &loaded,
        policy.as_ref().and_then(|p| p.metadata.name.clone()),
        &selector,
        &nodes,
        &platforms,
    ))
}

/// The one policy in `path`.
fn read_policy(path: &Path) -> Result<ImageSelectionPolicy, ResolveError> {
    let mut policies: Vec<ImageSelectionPolicy> =
        input::read_objects(path, "ImageSelectionPolicy")?;
    match policies.len() {
        1 => Ok(policies.remove(0)),
        found => Err(ResolveError::NotOnePolicy {
            path: path.to_owned(),
            found,
        }),
    }
}

/// The platforms of every candidate image: read from their registries (with the client that
/// read the artifact, else one from the flags), or not checked with `--offline`.
async fn platforms(
    loaded: &Loaded,
    flags: &RegistryFlags,
    offline: bool,
) -> Result<Platforms, ResolveError> {
    let images = loaded.resolved.images();
    if offline {
        return Ok(images
            .into_iter()
            .map(|image| (image, PlatformLookup::NotChecked("--offline".to_owned())))
            .collect());
    }
    let registry = match &loaded.registry {
        Some(registry) => registry.clone(),
        // An artifact file names no registry of its own: the images' registries are HTTPS.
        None => {
            let https = RegistryFlags {
                plain_http: false,
                ..flags.clone()
            };
            let options = match images
                .iter()
                .find_map(|i| registry::parse_reference(i).ok())
            {
                Some(reference) => https.options_for(&reference),
                None => Ok(RegistryOptions::default()),
            };
            options
                .and_then(Registry::new)
                .map_err(|e| ResolveError::RegistryOptions(Box::new(e)))?
        }
    };
    let lookups =
        futures_util::future::join_all(images.iter().map(|image| lookup(&registry, image)));
    Ok(images.iter().cloned().zip(lookups.await).collect())
}

/// One image's platforms. A registry that cannot be reached leaves them unchecked (the output
/// says so); any other answer is what the controller would get too.
async fn lookup(registry: &Registry, image: &str) -> PlatformLookup {
    let reference = match registry::parse_reference(image) {
        Ok(reference) => reference,
        Err(err) => return PlatformLookup::Failed(crate::telemetry::error_chain(&err)),
    };
    match registry.image_platforms(&reference).await {
        Ok(found) => PlatformLookup::Known(found.platforms),
        Err(err) => {
            let why = crate::telemetry::error_chain(&err);
            match err.kind() {
                ErrorKind::Transport | ErrorKind::RateLimited | ErrorKind::Config => {
                    PlatformLookup::NotChecked(why)
                }
                ErrorKind::NotFound
                | ErrorKind::Unauthorized
                | ErrorKind::InvalidContent
                | ErrorKind::InvalidReference
                | ErrorKind::NotAllowed => PlatformLookup::Failed(why),
            }
        }
    }
}

fn read_nodes(args: &ResolveArgs) -> Result<Vec<(String, NodeInputs)>, ResolveError> {
    let features = match &args.node_features {
        Some(path) => {
            let objects: Vec<NodeFeature> = input::read_objects(path, "NodeFeature")?;
            features_by_node(&objects, NFD_NAMESPACE)
        }
        None => BTreeMap::new(),
    };
    let nodes: Vec<Node> = input::read_objects(&args.nodes, "Node")?;
    nodes
        .into_iter()
        .enumerate()
        .map(|(index, node)| {
            let name = node
                .metadata
                .name
                .ok_or_else(|| ResolveError::UnnamedNode {
                    path: args.nodes.clone(),
                    index,
                })?;
            let labels = node.metadata.labels.unwrap_or_default();
            let inputs = NodeInputs::new(labels).with_features(features.get(&name).cloned());
            Ok((name, inputs))
        })
        .collect()
}

#[cfg(test)]
mod tests;
