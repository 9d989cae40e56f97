//! The explanation of a choice: which set (or candidate) was chosen, and for every set whether
//! it matched, was skipped by the platform filter (with the reason), or did not match (with the
//! first failing expression and why). Serialized with stable camelCase names for `ocifit
//! resolve`'s JSON, the policy status and pod denials; [`Explanation::summary`] is the one-line
//! form for tables and denial messages. Owns no evaluation.

use serde::{Deserialize, Serialize};

use super::error::Location;

/// Why a set did not match: a sentence, and where in the artifact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Miss {
    pub(crate) reason: String,
    pub(crate) at: Box<Location>,
}

/// Whether an explanation covers the sets of one artifact or a list of candidate images.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// The sets of one artifact (`spec.artifact.ref`).
    Sets,
    /// Candidate images, each with its own NFD artifact (`spec.candidates`).
    Candidates,
}

/// The answer for one node (or node class), and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// Sets of one artifact, or candidates.
    pub mode: Mode,
    /// The winner, or `None` when nothing fits.
    pub chosen: Option<Chosen>,
    /// Every set (or candidate), in document (or listed) order.
    pub sets: Vec<SetOutcome>,
}

/// The chosen set (or candidate).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Chosen {
    /// Index of the set (or candidate).
    pub index: usize,
    /// The set's tag (the image to use), or the candidate's image.
    pub tag: String,
    /// Its weight.
    pub weight: i32,
    /// The set's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Candidates mode: the set of the candidate's own artifact that matched (the best of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<SetRef>,
}

/// A compatibility set, by index, tag, weight and description.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetRef {
    /// Index of the set in its artifact.
    pub index: usize,
    /// Its tag.
    pub tag: String,
    /// Its weight.
    pub weight: i32,
    /// Its description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// What happened to one set (or candidate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SetStatus {
    /// Every rule holds (and the platform filter accepted its image).
    Matched,
    /// Its rules hold but the platform filter refused its image (`reason` says why).
    Skipped,
    /// A rule does not hold (`reason` and `failure` say which and why).
    NotMatched,
}

/// One set's (or candidate's) outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetOutcome {
    /// Index of the set (or candidate).
    pub index: usize,
    /// The set's tag, or the candidate's image.
    pub tag: String,
    /// Its weight.
    pub weight: i32,
    /// Matched, skipped or not matched.
    pub status: SetStatus,
    /// Why it was skipped or did not match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where the first failing expression is (not matched only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Location>,
    /// Candidates mode: the outcome of every set of the candidate's own artifact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<SetOutcome>,
}

/// How many per-set reasons a summary lists before "and N more".
const SUMMARY_REASONS: usize = 3;

impl Explanation {
    /// The chosen image (the chosen set's tag, or candidate's image), if any.
    pub fn image(&self) -> Option<&str> {
        self.chosen.as_ref().map(|c| c.tag.as_str())
    }

    /// One line for tables and denial messages: the choice, or why nothing fits.
    pub fn summary(&self) -> String {
        let what = match self.mode {
            Mode::Sets => "set",
            Mode::Candidates => "candidate",
        };
        if let Some(c) = &self.chosen {
            let mut line = format!("{} ({what} {}, weight {}", c.tag, c.index, c.weight);
            if let Some(set) = &c.set {
                line.push_str(&format!(", its set {} ({:?})", set.index, set.tag));
            }
            line.push(')');
            return line;
        }
        if self.sets.is_empty() {
            return format!("no compatible image: the artifact lists no {what}");
        }
        let reasons: Vec<String> = self
            .sets
            .iter()
            .take(SUMMARY_REASONS)
            .map(|s| {
                let why = s.reason.as_deref().unwrap_or("matched");
                format!("{what} {} ({:?}): {why}", s.index, s.tag)
            })
            .collect();
        let mut line = format!("no compatible image: {}", reasons.join("; "));
        if self.sets.len() > SUMMARY_REASONS {
            line.push_str(&format!("; and {} more", self.sets.len() - SUMMARY_REASONS));
        }
        line
    }
}
