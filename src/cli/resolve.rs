//! `ocifit resolve`: which image each kind of node would get from an artifact, and why. Reads the
//! artifact from a file or an OCI registry and the nodes from files, calls the shared decision in
//! [`crate::resolution`], and prints a table or a stable JSON document. Exit status: 0 when every
//! class has an image, [`EXIT_NO_MATCH`] when some class has none, [`EXIT_INVALID_INPUT`] for
//! unusable input (including an artifact the registry cannot give).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::Node;
use serde::Serialize;

use super::input::{self, InputError};
use crate::engine::{
    Artifact, ArtifactError, Explanation, Format, NodeFeature, NodeInputs, features_by_node,
};
use crate::registry::{self, Registry, RegistryFlags};
use crate::resolution::{self, Choice, ResolvedClass};

/// Exit status when some node class has no compatible image (the output is still printed).
pub const EXIT_NO_MATCH: u8 = 1;
/// Exit status for input that cannot be used (a file missing, malformed or of the wrong kind).
pub const EXIT_INVALID_INPUT: u8 = 2;

/// The namespace nfd-master runs in by default; its NodeFeature objects are merged first.
const NFD_NAMESPACE: &str = "node-feature-discovery";

#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// The compatibility artifact: a file in the ocifit JSON or NFD image-compatibility format,
    /// or an OCI reference (`registry.example.com/acme/app-compat:v1`, by tag or digest) whose
    /// layer media type says the format. An existing file, or anything that looks like a path
    /// (starting with `/` or `.`, ending in `.json`, `.yaml` or `.yml`), is read as a file.
    #[arg(long, value_name = "FILE|REF")]
    pub artifact: String,

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

    /// Reach the artifact's registry over plain HTTP instead of HTTPS (as ORAS spells it).
    #[arg(long)]
    pub plain_http: bool,

    /// A docker config file (`~/.docker/config.json`, or a Kubernetes dockerconfigjson) with
    /// credentials for the artifact's registry. Anonymous access without it.
    #[arg(long, value_name = "FILE")]
    pub docker_config: Option<PathBuf>,

    /// A PEM file of CA certificates to trust, besides the system's, for the artifact's registry.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,

    /// Registries that may be reached (HOST[:PORT] or *.DOMAIN[:PORT], repeatable or
    /// comma-separated), as the operator's flag of the same name. Default: any.
    #[arg(long, value_name = "PATTERN", value_delimiter = ',')]
    pub allowed_registries: Vec<String>,

    /// Which nodes count, like a policy's spec.nodeSelector (repeatable). Default: every node
    /// except control-plane nodes.
    #[arg(long = "node-selector", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub node_selector: Vec<(String, String)>,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// One row per node class.
    Table,
    /// A JSON document (a stable contract for scripts).
    Json,
}

/// Why `ocifit resolve` could not answer.
#[derive(Debug, thiserror::Error)]
enum ResolveError {
    /// A nodes or node-features file is unusable.
    #[error(transparent)]
    Input(#[from] InputError),
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
    /// The registry options (docker config, CA file) are unusable.
    #[error(transparent)]
    RegistryOptions(Box<registry::Error>),
    /// The registry could not give the artifact, or gave an invalid one.
    #[error(transparent)]
    Registry(Box<registry::ResolveError>),
    /// `--format` was given with a registry reference.
    #[error("--format applies to artifact files only; registry content is read by its media type")]
    FormatWithReference,
    /// A node in the nodes file has no name.
    #[error("{path}: item {index} has no metadata.name")]
    UnnamedNode { path: PathBuf, index: usize },
}

/// The JSON document `-o json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    format: Format,
    /// The artifact manifest's digest, when the artifact came from a registry.
    #[serde(skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
    /// How the format was chosen, when it was detected rather than given.
    #[serde(skip_serializing_if = "Option::is_none")]
    format_detected: Option<&'static str>,
    classes: Vec<ClassReport>,
}

#[derive(Debug, Serialize)]
struct ClassReport {
    name: String,
    nodes: Vec<String>,
    labels: BTreeMap<String, String>,
    image: Option<String>,
    #[serde(rename = "match")]
    matched: Option<MatchReport>,
    explanation: Explanation,
}

#[derive(Debug, Serialize)]
struct MatchReport {
    index: usize,
    tag: String,
    weight: i32,
    description: String,
}

impl From<ResolvedClass> for ClassReport {
    fn from(resolved: ResolvedClass) -> Self {
        let matched = resolved.explanation.chosen.as_ref().map(|c| MatchReport {
            index: c.index,
            tag: c.tag.clone(),
            weight: c.weight,
            description: c.description.clone().unwrap_or_default(),
        });
        ClassReport {
            image: resolved.image().map(str::to_owned),
            name: resolved.class.name,
            nodes: resolved.class.nodes,
            labels: resolved.class.labels,
            matched,
            explanation: resolved.explanation,
        }
    }
}

pub async fn run(args: &ResolveArgs) -> ExitCode {
    match report(args).await {
        Ok(report) => {
            let all_resolved = report.classes.iter().all(|c| c.image.is_some());
            if report.classes.is_empty() {
                eprintln!(
                    "note: no node counts (every node is a control-plane node or the node \
                     selector matches none)"
                );
            }
            let rendered = match args.output {
                Output::Table => render_table(&report, args),
                Output::Json => render_json(&report),
            };
            // A closed stdout (e.g. `| head`) is not worth a panic.
            let _ = std::io::stdout().write_all(rendered.as_bytes());
            if all_resolved {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_NO_MATCH)
            }
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(EXIT_INVALID_INPUT)
        }
    }
}

async fn report(args: &ResolveArgs) -> Result<Report, ResolveError> {
    let loaded = load_artifact(args).await?;
    let nodes = read_nodes(args)?;
    let selector: BTreeMap<String, String> = args.node_selector.iter().cloned().collect();
    let classes = resolution::resolve(
        Choice::Sets(&loaded.artifact),
        &selector,
        nodes.iter().map(|(name, inputs)| (name.as_str(), inputs)),
        |_, _| Ok(()),
    );
    Ok(Report {
        format: loaded.artifact.format(),
        digest: loaded.digest,
        format_detected: loaded.format_detected,
        classes: classes.into_iter().map(ClassReport::from).collect(),
    })
}

/// An artifact ready to evaluate, and where it came from.
struct LoadedArtifact {
    artifact: Artifact,
    digest: Option<String>,
    format_detected: Option<&'static str>,
}

/// Reads `--artifact` as a file when it is or looks like one, else fetches it from its registry.
async fn load_artifact(args: &ResolveArgs) -> Result<LoadedArtifact, ResolveError> {
    let path = Path::new(&args.artifact);
    let loaded = if path.is_file() || looks_like_a_path(&args.artifact) {
        load_file(path, args.format)?
    } else {
        let reference = registry::parse_reference(&args.artifact).map_err(|source| {
            ResolveError::NotFileNorReference {
                given: args.artifact.clone(),
                source: Box::new(source),
            }
        })?;
        if args.format.is_some() {
            return Err(ResolveError::FormatWithReference);
        }
        let flags = RegistryFlags {
            plain_http: args.plain_http,
            docker_config: args.docker_config.clone(),
            ca_file: args.ca_file.clone(),
            allowed_registries: args.allowed_registries.clone(),
        };
        let registry = flags
            .options_for(&reference)
            .and_then(Registry::new)
            .map_err(|e| ResolveError::RegistryOptions(Box::new(e)))?;
        let resolved = registry
            .resolve_artifact(&reference)
            .await
            .map_err(|e| ResolveError::Registry(Box::new(e)))?;
        LoadedArtifact {
            artifact: resolved.artifact,
            digest: Some(resolved.digest),
            format_detected: None,
        }
    };
    // Each set's tag is the image to use here (not in candidates mode).
    loaded
        .artifact
        .require_image_tags()
        .map_err(|source| ResolveError::Artifact {
            path: PathBuf::from(&args.artifact),
            source,
        })?;
    Ok(loaded)
}

/// A mistyped file name must say "no such file", not send a registry a request for it.
fn looks_like_a_path(artifact: &str) -> bool {
    artifact.starts_with('/')
        || artifact.starts_with('.')
        || [".json", ".yaml", ".yml"]
            .iter()
            .any(|ext| artifact.ends_with(ext))
}

fn load_file(path: &Path, format: Option<Format>) -> Result<LoadedArtifact, ResolveError> {
    let bytes = input::read_file(path)?;
    let artifact_error = |source| ResolveError::Artifact {
        path: path.to_owned(),
        source,
    };
    let (format, format_detected) = match format {
        Some(format) => (format, None),
        None => {
            let (format, why) = Format::detect(&bytes).map_err(artifact_error)?;
            (format, Some(why))
        }
    };
    let artifact = Artifact::parse(format, &bytes).map_err(artifact_error)?;
    Ok(LoadedArtifact {
        artifact,
        digest: None,
        format_detected,
    })
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

fn render_json(report: &Report) -> String {
    // Serializing plain strings, maps and numbers cannot fail.
    let mut json = serde_json::to_string_pretty(report).unwrap_or_default();
    json.push('\n');
    json
}

fn render_table(report: &Report, args: &ResolveArgs) -> String {
    let mut out = format!("artifact {}", args.artifact);
    if let Some(digest) = &report.digest {
        out.push_str(&format!(" ({digest})"));
    }
    out.push_str(&format!(" (format {}", report.format));
    if let Some(why) = report.format_detected {
        out.push_str(&format!(", detected: {why}"));
    }
    out.push_str(")\n\n");
    let mut table = tabwriter::TabWriter::new(Vec::new()).padding(2);
    let _ = writeln!(table, "CLASS\tNODES\tIMAGE\tWHY\tLABELS");
    for class in &report.classes {
        let labels: Vec<String> = class
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(
            table,
            "{}\t{}\t{}\t{}\t{}",
            class.name,
            class.nodes.len(),
            class.image.as_deref().unwrap_or("no match"),
            class.explanation.summary(),
            labels.join(","),
        );
    }
    let rows = table.into_inner().unwrap_or_default();
    out.push_str(&String::from_utf8_lossy(&rows));
    out
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
        .map_err(|e: crate::engine::UnknownFormat| e.to_string())
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}
