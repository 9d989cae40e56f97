//! What a policy's compatibility information resolved to: the parsed artifact (`ref` mode) or
//! each candidate image with its attached NFD artifact (candidates mode), with its digest and
//! format. The decision's input; the registry side of the controller and `ocifit resolve` build
//! it, the decision reads it.

use crate::engine::{Artifact, Format, Reads};
use crate::registry::{ResolveError, sha256_digest};

/// What a policy's compatibility information resolved to, and where it came from.
#[derive(Debug)]
pub struct Resolved {
    /// `ref` mode: the artifact manifest's digest. Candidates mode: `candidates_digest` of the
    /// candidates' artifacts, so it changes whenever any candidate's artifact does.
    pub digest: String,
    /// Its format (from the layer's media type); `nfd` in candidates mode.
    pub format: Format,
    /// The parsed artifact, or the candidates with theirs.
    pub content: Content,
}

/// The parsed compatibility information of a policy.
#[derive(Debug)]
pub enum Content {
    /// `spec.artifact.ref`: the sets of one artifact.
    Sets(Artifact),
    /// `spec.artifact.candidates`, in the order the spec lists them.
    Candidates(Vec<CandidateArtifact>),
}

/// One candidate image of `spec.artifact.candidates` and its NFD artifact.
#[derive(Debug)]
pub struct CandidateArtifact {
    /// The image reference, as the spec spells it.
    pub image: String,
    /// Its weight from the spec.
    pub weight: i32,
    /// The NFD artifact attached to it, or why it has none (the candidate is then skipped for
    /// every class, and each class row says so).
    pub artifact: Result<AttachedArtifact, ResolveError>,
}

/// An NFD artifact found among an image's referrers.
#[derive(Debug)]
pub struct AttachedArtifact {
    /// The artifact manifest's digest.
    pub digest: String,
    pub artifact: Artifact,
}

impl Resolved {
    /// What the rules read from a node (the union over candidates in candidates mode).
    pub fn reads(&self) -> Reads {
        match &self.content {
            Content::Sets(artifact) => artifact.reads(),
            Content::Candidates(candidates) => {
                let mut reads = Reads::default();
                for attached in candidates.iter().filter_map(|c| c.artifact.as_ref().ok()) {
                    reads.extend(&attached.artifact.reads());
                }
                reads
            }
        }
    }

    /// The candidate images whose platforms the status needs, each once, sorted: every
    /// non-empty set tag, or every candidate with an artifact.
    pub fn images(&self) -> Vec<String> {
        let mut images: Vec<String> = match &self.content {
            Content::Sets(artifact) => artifact
                .sets()
                .iter()
                .map(|set| set.tag().to_owned())
                .filter(|tag| !tag.is_empty())
                .collect(),
            Content::Candidates(candidates) => candidates
                .iter()
                .filter(|c| c.artifact.is_ok())
                .map(|c| c.image.clone())
                .collect(),
        };
        images.sort();
        images.dedup();
        images
    }

    /// How many candidates there are: sets of the artifact, or candidate images with an
    /// artifact.
    pub fn candidate_count(&self) -> usize {
        match &self.content {
            Content::Sets(artifact) => artifact.sets().len(),
            Content::Candidates(candidates) => {
                candidates.iter().filter(|c| c.artifact.is_ok()).count()
            }
        }
    }
}

/// The digest of candidates mode: `sha256` over one `image weight artifact-digest` line per
/// candidate with an artifact, in spec order. It names the exact set of artifacts the status was
/// computed from, as the manifest digest does in `ref` mode.
pub(crate) fn candidates_digest(candidates: &[CandidateArtifact]) -> String {
    let mut text = String::new();
    for candidate in candidates {
        if let Ok(attached) = &candidate.artifact {
            text.push_str(&format!(
                "{} {} {}\n",
                candidate.image, candidate.weight, attached.digest
            ));
        }
    }
    sha256_digest(text.as_bytes())
}
