//! `ocifit resolve`: which image each kind of node would get, and why, from an artifact or a whole
//! ImageSelectionPolicy. Reads the artifacts from files or registries, the nodes from files, looks
//! up the candidate images' platforms (unless `--offline`, which it then says) and calls image
//! selection's decision ([`crate::image_selection::resolution`]), so it answers as the controller
//! does. Prints a table or a stable JSON (or YAML) document. Exit status: 0 when every class has
//! an image, [`Exit::Failed`] when some has none, [`Exit::Usage`] for unusable input,
//! [`Exit::Registry`] for an artifact the registry cannot give.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use k8s_openapi::api::core::v1::Node;

mod args;
mod error;
mod inputs;
mod report;

use super::exit::Exit;
use super::input;
use crate::api::ImageSelectionPolicy;
use crate::engine::{NodeFeature, NodeInputs, features_by_node};
use crate::image_selection::{PlatformLookup, Platforms};
use crate::registry::{self, ErrorKind, Registry, RegistryFlags, RegistryOptions};
pub use args::ResolveArgs;
pub(super) use error::ResolveError;
use inputs::Loaded;
pub(super) use report::Report;

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
