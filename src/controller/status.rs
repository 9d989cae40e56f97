//! The policy status as a pure function: artifact (or why there is none) + node inventory +
//! platform lookups already done + previous status + now → new status and the Events its
//! transitions deserve. No client, no registry, no clock: the reconciler gathers the inputs and
//! applies the result. Nothing here may depend on when it runs except through `now`, and `now` is
//! only written where something changed, so a pass with nothing new yields the previous status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

mod conditions;
mod events;

use super::platform::{Platforms, runs_on};
use crate::api::{
    ArtifactStatus, ClassMatch, ClassStatus, ImageSelectionPolicySpec, ImageSelectionPolicyStatus,
    Reason,
};
use crate::classes::grouping::NodeClass;
use crate::engine::{Artifact, Candidate, Explanation, Format, Mode, NodeInputs, Reads, SetStatus};
use crate::registry::sha256_digest;
use crate::resolution::{Choice, ResolvedClass, resolve};

/// What a policy's compatibility information resolved to, and where it came from.
#[derive(Debug)]
pub struct Resolved {
    /// `ref` mode: the artifact manifest's digest. Candidates mode: [`candidates_digest`] of the
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
    pub artifact: Result<AttachedArtifact, String>,
}

/// An NFD artifact found among an image's referrers.
#[derive(Debug)]
pub struct AttachedArtifact {
    /// The artifact manifest's digest.
    pub digest: String,
    /// The parsed artifact.
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
pub fn candidates_digest(candidates: &[CandidateArtifact]) -> String {
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

/// Why the current artifact cannot be had: the condition reason and the registry's or engine's
/// message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The condition reason.
    pub reason: Reason,
    /// What went wrong, as the registry or engine said it.
    pub message: String,
}

/// The artifact side of the inputs.
#[derive(Clone, Copy, Debug)]
pub enum ArtifactState<'a> {
    /// The current artifact was fetched and parsed.
    Current(&'a Resolved),
    /// It could not be; `last_good` is the last artifact that could (in this process), if any.
    Failed {
        failure: &'a Failure,
        last_good: Option<&'a Resolved>,
    },
}

/// Everything the status is computed from.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// The policy's `metadata.generation`.
    pub generation: Option<i64>,
    /// The policy's spec.
    pub spec: &'a ImageSelectionPolicySpec,
    /// The artifact, or why there is none.
    pub artifact: ArtifactState<'a>,
    /// Every node (name, labels and NFD features); the policy's nodeSelector is applied here.
    pub nodes: &'a [(String, NodeInputs)],
    /// The platforms of every candidate image (see [`images_to_check`]).
    pub platforms: &'a Platforms,
    /// The status as stored now.
    pub previous: Option<&'a ImageSelectionPolicyStatus>,
    /// The time written where something changes.
    pub now: &'a Time,
}

/// Whether an Event reports something normal or something to look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Resolved, recovered, updated.
    Normal,
    /// Failed, stale, no match.
    Warning,
}

/// An Event to publish on the policy, for one transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Normal or Warning.
    pub kind: EventKind,
    /// The condition reason that changed.
    pub reason: Reason,
    /// What changed, for people.
    pub note: String,
}

/// The new status and the Events its transitions deserve (none when nothing changed).
#[derive(Clone, Debug, PartialEq)]
pub struct Computed {
    /// The status to apply.
    pub status: ImageSelectionPolicyStatus,
    /// Events for the transitions from the previous status.
    pub events: Vec<Event>,
}

/// Computes the status for `inputs`.
pub fn compute(inputs: &Inputs<'_>) -> Computed {
    let previous = inputs.previous;
    let serving = match inputs.artifact {
        ArtifactState::Current(resolved) => Some(resolved),
        ArtifactState::Failed { last_good, .. } => last_good,
    };
    let mut status = ImageSelectionPolicyStatus {
        observed_generation: inputs.generation,
        ..ImageSelectionPolicyStatus::default()
    };
    let classes = match serving {
        Some(resolved) => {
            status.artifact = Some(artifact_status(resolved, previous, inputs.now));
            status.class_keys = Some(resolved.reads());
            Some(class_rows(resolved, inputs))
        }
        // Nothing to evaluate in this process: keep what the stored status serves (last known
        // good after a restart during an outage), or nothing.
        None => previous.map(|p| {
            status.artifact.clone_from(&p.artifact);
            status.class_keys.clone_from(&p.class_keys);
            p.classes.clone()
        }),
    };
    status.classes = classes.unwrap_or_default();
    status.class_count = i32::try_from(status.classes.len()).unwrap_or(i32::MAX);
    status.conditions = conditions::conditions(inputs, &status);
    let events = events::events(previous, &status);
    Computed { status, events }
}

fn artifact_status(
    resolved: &Resolved,
    previous: Option<&ImageSelectionPolicyStatus>,
    now: &Time,
) -> ArtifactStatus {
    let earlier = previous
        .and_then(|p| p.artifact.as_ref())
        .filter(|a| a.digest == resolved.digest);
    ArtifactStatus {
        digest: resolved.digest.clone(),
        format: resolved.format,
        candidates: i32::try_from(resolved.candidate_count()).unwrap_or(i32::MAX),
        fetched_at: match earlier {
            Some(a) => a.fetched_at.clone(),
            None => Some(now.clone()),
        },
    }
}

/// One row per class of the nodes that count, for either kind of content.
fn class_rows(resolved: &Resolved, inputs: &Inputs<'_>) -> Vec<ClassStatus> {
    let nodes = inputs
        .nodes
        .iter()
        .map(|(name, node)| (name.as_str(), node));
    let platform = |class: &NodeClass, image: &str| runs_on(class, image, inputs.platforms);
    match &resolved.content {
        Content::Sets(artifact) => resolve(
            Choice::Sets(artifact),
            &inputs.spec.node_selector,
            nodes,
            platform,
        )
        .iter()
        .map(|class| class_row(class, &[]))
        .collect(),
        Content::Candidates(all) => {
            // The engine sees only candidates with an artifact; `positions` maps its indexes
            // back to the spec's, and every row names the candidates left out.
            let mut positions = Vec::new();
            let mut candidates = Vec::new();
            let mut left_out = Vec::new();
            for (position, candidate) in all.iter().enumerate() {
                match &candidate.artifact {
                    Ok(attached) => {
                        positions.push(position);
                        candidates.push(Candidate {
                            image: &candidate.image,
                            weight: candidate.weight,
                            artifact: &attached.artifact,
                        });
                    }
                    Err(why) => left_out.push(format!(
                        "skipped candidate {position} ({:?}): {why}",
                        candidate.image
                    )),
                }
            }
            resolve(
                Choice::Candidates(&candidates),
                &inputs.spec.node_selector,
                nodes,
                platform,
            )
            .into_iter()
            .map(|mut class| {
                renumber(&mut class.explanation, &positions);
                class_row(&class, &left_out)
            })
            .collect()
        }
    }
}

/// Gives an explanation's candidates their positions in the spec.
fn renumber(explanation: &mut Explanation, positions: &[usize]) {
    let at = |index: usize| positions.get(index).copied().unwrap_or(index);
    if let Some(chosen) = &mut explanation.chosen {
        chosen.index = at(chosen.index);
    }
    for outcome in &mut explanation.sets {
        outcome.index = at(outcome.index);
    }
}

/// A class's row; `left_out` names candidates the engine never saw (no artifact).
fn class_row(resolved: &ResolvedClass, left_out: &[String]) -> ClassStatus {
    let explanation = &resolved.explanation;
    let mut reason = explanation.summary();
    if explanation.chosen.is_some() {
        let what = match explanation.mode {
            Mode::Sets => "set",
            Mode::Candidates => "candidate",
        };
        let skipped: Vec<String> = explanation
            .sets
            .iter()
            .filter(|s| s.status == SetStatus::Skipped)
            .map(|s| {
                format!(
                    "skipped {what} {} ({:?}): {}",
                    s.index,
                    s.tag,
                    s.reason
                        .as_deref()
                        .unwrap_or("refused by the platform check")
                )
            })
            .collect();
        if !skipped.is_empty() {
            reason = format!("{reason}; {}", skipped.join("; "));
        }
    }
    if !left_out.is_empty() {
        reason = format!("{reason}; {}", left_out.join("; "));
    }
    ClassStatus {
        name: resolved.class.name.clone(),
        labels: resolved.class.labels.clone(),
        nodes: i32::try_from(resolved.class.nodes.len()).unwrap_or(i32::MAX),
        image: resolved.image().map(str::to_owned),
        matched: explanation.chosen.as_ref().map(|c| ClassMatch {
            index: i32::try_from(c.index).unwrap_or(i32::MAX),
            tag: c.tag.clone(),
            weight: c.weight,
            // Candidates mode: the description of the candidate's set that matched.
            description: c
                .description
                .clone()
                .or_else(|| c.set.as_ref().and_then(|s| s.description.clone())),
        }),
        reason: Some(reason),
    }
}

#[cfg(test)]
mod tests;
