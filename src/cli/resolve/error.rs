//! Why `ocifit resolve` could not answer: every unusable input, named.

use std::path::PathBuf;

use crate::cli::input::InputError;
use crate::engine::ArtifactError;
use crate::registry;

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
