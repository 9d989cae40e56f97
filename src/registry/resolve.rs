//! Fetch and parse in one call: what `ocifit resolve --artifact REF` and the controller use. The
//! bytes come verified from the registry; the engine parses them, once, at the very end.

use super::client::{FetchedArtifact, Registry};
use super::error::{Error, ErrorKind};
use super::reference::Reference;
use crate::engine::{Artifact, ArtifactError, Format};

/// A compatibility artifact read from a registry and parsed.
#[derive(Debug)]
pub struct ResolvedArtifact {
    /// The reference it was fetched by.
    pub reference: String,
    /// The artifact manifest's digest.
    pub digest: String,
    /// The format, from the layer's media type.
    pub format: Format,
    /// The parsed artifact.
    pub artifact: Artifact,
}

/// Why an artifact could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// It could not be fetched (see [`Error::kind`]).
    #[error(transparent)]
    Registry(#[from] Error),
    /// It was fetched but is not a valid compatibility document: where and why.
    #[error("invalid {format} compatibility artifact {reference} ({digest}): {source}")]
    Artifact {
        reference: String,
        digest: String,
        format: Format,
        #[source]
        source: ArtifactError,
    },
}

impl ResolveError {
    /// The class of this failure; an unparsable artifact is invalid content.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ResolveError::Registry(err) => err.kind(),
            ResolveError::Artifact { .. } => ErrorKind::InvalidContent,
        }
    }
}

impl Registry {
    /// Fetches the artifact `reference` names and parses it in the format its media type says.
    pub async fn resolve_artifact(
        &self,
        reference: &Reference,
    ) -> Result<ResolvedArtifact, ResolveError> {
        parse(self.fetch_artifact(reference).await?)
    }

    /// Finds an image's attached NFD artifact (newest referrer) and parses it.
    pub async fn resolve_nfd_artifact(
        &self,
        image: &Reference,
    ) -> Result<ResolvedArtifact, ResolveError> {
        parse(self.find_nfd_artifact(image).await?)
    }
}

fn parse(fetched: FetchedArtifact) -> Result<ResolvedArtifact, ResolveError> {
    match Artifact::parse(fetched.format, &fetched.content) {
        Ok(artifact) => Ok(ResolvedArtifact {
            reference: fetched.reference,
            digest: fetched.digest,
            format: fetched.format,
            artifact,
        }),
        Err(source) => Err(ResolveError::Artifact {
            reference: fetched.reference,
            digest: fetched.digest,
            format: fetched.format,
            source,
        }),
    }
}
