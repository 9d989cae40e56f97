//! Best fit: every rule of a set must hold; the highest weight wins; ties go to the first listed;
//! a set with no rules matches everything. The caller's platform filter can refuse a matching
//! set's image (it cannot run on the node's os/arch); such a set is skipped, with the reason.
//! Candidates mode: each candidate image carries its own NFD artifact and fits when ANY of its
//! sets matches; the same rule then picks among candidates.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Display;

use super::Format;
use super::artifact::{Artifact, CompatSet};
use super::explain::Miss;
use super::explain::{Chosen, Explanation, Mode, SetOutcome, SetRef, SetStatus};
use super::inputs::{Features, NodeInputs};

/// A platform filter that accepts every image.
pub fn any_platform(_image: &str) -> Result<(), Infallible> {
    Ok(())
}

/// One candidate image of `spec.candidates`, with the NFD artifact attached to it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    /// The image reference.
    pub image: &'a str,
    /// Preference among fitting candidates; higher wins.
    pub weight: i32,
    /// The image's own compatibility artifact.
    pub artifact: &'a Artifact,
}

/// What ocifit rules see of NFD features: nothing (they read labels).
static NO_FEATURES: Features = Features {
    flags: BTreeMap::new(),
    attributes: BTreeMap::new(),
    instances: BTreeMap::new(),
};

/// The node's inputs, with NFD features computed at most once per decision.
struct Node<'a> {
    inputs: &'a NodeInputs,
    features: Option<Cow<'a, Features>>,
}

impl<'a> Node<'a> {
    fn new(inputs: &'a NodeInputs) -> Node<'a> {
        Node {
            inputs,
            features: None,
        }
    }

    fn check(&mut self, artifact: &Artifact, set: &CompatSet) -> Result<(), Miss> {
        let features: &Features = match artifact.format() {
            Format::Ocifit => &NO_FEATURES,
            Format::Nfd => self
                .features
                .get_or_insert_with(|| self.inputs.nfd_features().0),
        };
        set.evaluate(&self.inputs.labels, features)
    }
}

impl Artifact {
    /// Chooses the best set for a node. `platform` is asked about every set whose rules hold
    /// (with the set's tag); `Err(reason)` skips that set for this node, the reason shown.
    pub fn best_fit<F, E>(&self, node: &NodeInputs, mut platform: F) -> Explanation
    where
        F: FnMut(&str) -> Result<(), E>,
        E: Display,
    {
        let mut node = Node::new(node);
        let sets: Vec<SetOutcome> = self
            .sets()
            .iter()
            .map(|set| {
                let why = match node.check(self, set) {
                    Err(miss) => Some(Why::Miss(miss)),
                    Ok(()) => platform(&set.tag)
                        .err()
                        .map(|why| Why::Skip(why.to_string())),
                };
                outcome(set.index, &set.tag, set.weight, why, Vec::new())
            })
            .collect();
        let chosen = best(&sets).map(|i| {
            let set = &self.sets()[i];
            Chosen {
                index: set.index,
                tag: set.tag.clone(),
                weight: set.weight,
                description: set.description.clone(),
                set: None,
            }
        });
        Explanation {
            mode: Mode::Sets,
            chosen,
            sets,
        }
    }
}

/// Chooses the best candidate for a node: a candidate fits when any set of its own artifact
/// matches; `platform` is asked about every fitting candidate's image.
pub fn best_candidate<F, E>(
    candidates: &[Candidate<'_>],
    node: &NodeInputs,
    mut platform: F,
) -> Explanation
where
    F: FnMut(&str) -> Result<(), E>,
    E: Display,
{
    let mut node = Node::new(node);
    let mut own_best = Vec::with_capacity(candidates.len());
    let sets: Vec<SetOutcome> = candidates
        .iter()
        .enumerate()
        .map(|(index, candidate)| {
            let inner: Vec<SetOutcome> = candidate
                .artifact
                .sets()
                .iter()
                .map(|set| {
                    let miss = node.check(candidate.artifact, set).err().map(Why::Miss);
                    outcome(set.index, &set.tag, set.weight, miss, Vec::new())
                })
                .collect();
            let fit = best(&inner);
            own_best.push(fit);
            let verdict = match fit {
                None => Some(Why::NoSet(inner.len())),
                Some(_) => platform(candidate.image)
                    .err()
                    .map(|why| Why::Skip(why.to_string())),
            };
            outcome(index, candidate.image, candidate.weight, verdict, inner)
        })
        .collect();
    let chosen = best(&sets).map(|i| {
        let candidate = &candidates[i];
        let set = own_best[i].map(|s| {
            let set = &candidate.artifact.sets()[s];
            SetRef {
                index: set.index,
                tag: set.tag.clone(),
                weight: set.weight,
                description: set.description.clone(),
            }
        });
        Chosen {
            index: i,
            tag: candidate.image.to_owned(),
            weight: candidate.weight,
            description: None,
            set,
        }
    });
    Explanation {
        mode: Mode::Candidates,
        chosen,
        sets,
    }
}

/// Why a set or candidate is out.
enum Why {
    Miss(Miss),
    Skip(String),
    NoSet(usize),
}

fn outcome(
    index: usize,
    tag: &str,
    weight: i32,
    why: Option<Why>,
    sets: Vec<SetOutcome>,
) -> SetOutcome {
    let (status, reason, failure) = match why {
        None => (SetStatus::Matched, None, None),
        Some(Why::Skip(reason)) => (SetStatus::Skipped, Some(reason), None),
        Some(Why::Miss(miss)) => (SetStatus::NotMatched, Some(miss.reason), Some(*miss.at)),
        Some(Why::NoSet(0)) => (
            SetStatus::NotMatched,
            Some("its artifact lists no compatibility set".to_owned()),
            None,
        ),
        Some(Why::NoSet(n)) => (
            SetStatus::NotMatched,
            Some(format!("none of its {n} compatibility sets matched")),
            None,
        ),
    };
    SetOutcome {
        index,
        tag: tag.to_owned(),
        weight,
        status,
        reason,
        failure,
        sets,
    }
}

/// The position of the matched outcome with the highest weight, the first on ties.
fn best(outcomes: &[SetOutcome]) -> Option<usize> {
    let mut best: Option<(usize, i32)> = None;
    for (i, o) in outcomes.iter().enumerate() {
        if o.status == SetStatus::Matched && best.is_none_or(|(_, w)| o.weight > w) {
            best = Some((i, o.weight));
        }
    }
    best.map(|(i, _)| i)
}
