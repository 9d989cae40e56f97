//! What `ocifit resolve` evaluates: the artifact from a file or a registry, or a policy's own
//! artifact (its `ref`, or each candidate's attached artifact, read as the controller reads
//! them), and the registry client that read it, for the platform lookups that follow.

use std::path::{Path, PathBuf};

use super::ResolveArgs;
use super::ResolveError;
use crate::api::ImageSelectionPolicy;
use crate::cli::input;
use crate::engine::{Artifact, Format};
use crate::image_selection::{Content, Resolved};
use crate::image_selection::{RegistrySource, Request, Wanted};
use crate::registry::{
    self, PrivateRegistries, Reference, Registry, RegistryFlags, RegistryOptions, sha256_digest,
};

/// What was read, ready to evaluate.
pub(crate) struct Loaded {
    /// The artifact, or the candidates with theirs.
    pub resolved: Resolved,
    /// The registry client that read it (none for a file), which also looks up platforms.
    pub registry: Option<Registry>,
    /// What was read, for people: the file, the reference, or the policy's candidates.
    pub source: String,
    /// The artifact manifest's digest (candidates mode: the digest of the candidates'
    /// artifacts, as the status shows it), when a registry gave it.
    pub digest: Option<String>,
    /// How the format of a file was chosen, when it was detected rather than given.
    pub format_detected: Option<&'static str>,
}

/// Reads `--artifact` (a file, or a reference) or, without it, the policy's own artifact.
pub(super) async fn load(
    args: &ResolveArgs,
    policy: Option<&ImageSelectionPolicy>,
    flags: &RegistryFlags,
) -> Result<Loaded, ResolveError> {
    let loaded = match (&args.artifact, policy) {
        (Some(artifact), _) if is_file(artifact) => load_file(Path::new(artifact), args.format)?,
        (Some(artifact), _) => {
            let reference = registry::parse_reference(artifact).map_err(|source| {
                ResolveError::NotFileNorReference {
                    given: artifact.clone(),
                    source: Box::new(source),
                }
            })?;
            from_reference(args, &reference, flags).await?
        }
        (None, Some(policy)) => from_policy(args, policy, flags).await?,
        (None, None) => return Err(ResolveError::NoSource),
    };
    if let Content::Sets(artifact) = &loaded.resolved.content {
        // Each set's tag is the image to use here (not in candidates mode).
        artifact
            .require_image_tags()
            .map_err(|source| ResolveError::Artifact {
                path: PathBuf::from(&loaded.source),
                source,
            })?;
    }
    Ok(loaded)
}

/// A mistyped file name must say "no such file", not send a registry a request for it.
fn is_file(artifact: &str) -> bool {
    Path::new(artifact).is_file()
        || artifact.starts_with('/')
        || artifact.starts_with('.')
        || [".json", ".yaml", ".yml"]
            .iter()
            .any(|ext| artifact.ends_with(ext))
}

fn load_file(path: &Path, format: Option<Format>) -> Result<Loaded, ResolveError> {
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
    Ok(Loaded {
        resolved: Resolved {
            digest: sha256_digest(&bytes),
            format,
            content: Content::Sets(artifact),
        },
        registry: None,
        source: path.display().to_string(),
        digest: None,
        format_detected,
    })
}

async fn from_reference(
    args: &ResolveArgs,
    reference: &Reference,
    flags: &RegistryFlags,
) -> Result<Loaded, ResolveError> {
    if args.format.is_some() {
        return Err(ResolveError::FormatWithReference);
    }
    if args.offline {
        return Err(ResolveError::OfflineNeedsRegistry {
            needs: "the artifact is a registry reference",
        });
    }
    let registry = options(flags, reference, &[]).and_then(Registry::new);
    let registry = registry.map_err(|e| ResolveError::RegistryOptions(Box::new(e)))?;
    let resolved = registry
        .resolve_artifact(reference)
        .await
        .map_err(|e| ResolveError::Registry(Box::new(e)))?;
    Ok(Loaded {
        resolved: Resolved {
            digest: resolved.digest.clone(),
            format: resolved.format,
            content: Content::Sets(resolved.artifact),
        },
        registry: Some(registry),
        source: reference.to_string(),
        digest: Some(resolved.digest),
        format_detected: None,
    })
}

async fn from_policy(
    args: &ResolveArgs,
    policy: &ImageSelectionPolicy,
    flags: &RegistryFlags,
) -> Result<Loaded, ResolveError> {
    let source = &policy.spec.artifact;
    let path = || args.policy.clone().unwrap_or_default();
    if let Some(reference) = &source.reference {
        let reference = parse(reference)?;
        return from_reference(args, &reference, flags).await;
    }
    let Some(candidates) = &source.candidates else {
        return Err(ResolveError::PolicyWithoutArtifact { path: path() });
    };
    if args.offline {
        return Err(ResolveError::OfflineNeedsRegistry {
            needs: "a policy with candidates reads each candidate's artifact from its registry",
        });
    }
    let references = candidates
        .iter()
        .map(|c| parse(&c.image))
        .collect::<Result<Vec<_>, _>>()?;
    let Some((first, others)) = references.split_first() else {
        return Err(ResolveError::PolicyWithoutArtifact { path: path() });
    };
    let options =
        options(flags, first, others).map_err(|e| ResolveError::RegistryOptions(Box::new(e)))?;
    let reader =
        RegistrySource::new(options).map_err(|e| ResolveError::RegistryOptions(Box::new(e)))?;
    let request = Request {
        wanted: Wanted::Candidates(candidates.clone()),
        pull_secret: None,
        managed: false,
    };
    let (registry, resolved) = reader
        .resolved(&request)
        .await
        .map_err(|failure| ResolveError::Candidates(failure.message))?;
    let names: Vec<&str> = candidates.iter().map(|c| c.image.as_str()).collect();
    Ok(Loaded {
        digest: Some(resolved.digest.clone()),
        resolved,
        registry: Some(registry),
        source: format!("candidates {}", names.join(", ")),
        format_detected: None,
    })
}

fn parse(reference: &str) -> Result<Reference, ResolveError> {
    registry::parse_reference(reference).map_err(|source| ResolveError::BadReference {
        given: reference.to_owned(),
        source: Box::new(source),
    })
}

/// The client options the flags give for `first`'s registry; `others`' registries are reached
/// as the command line's too (over plain HTTP with `--plain-http`).
fn options(
    flags: &RegistryFlags,
    first: &Reference,
    others: &[Reference],
) -> Result<RegistryOptions, registry::Error> {
    let mut options = flags.options_for(first)?;
    let others_private = PrivateRegistries::registries_of(&others.iter().collect::<Vec<_>>());
    options.private = options.private.and(&others_private);
    if flags.plain_http {
        for other in others {
            let host = other.registry().to_string();
            if !options.plain_http.contains(&host) {
                options.plain_http.push(host);
            }
        }
    }
    Ok(options)
}
