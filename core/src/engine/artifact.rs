//! The compiled artifact: parsing either format into one immutable model (patterns compiled
//! once), the sets it lists, evaluating one set on one node (every rule must hold; the first
//! failing expression explains a miss; a set with no rules matches every node), and what its
//! rules read from a node (the [`Reads`] in `inputs`). Owns no choice between sets (`select`)
//! and no format details (`ocifit`, `nfd_eval`).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::doc::{CompiledSet, mismatch_hint, shape};
use super::error::{ArtifactError, Location, Problem};
use super::explain::Miss;
use super::inputs::{Features, Reads};
use super::limits::{self, LIMITS};
use super::{Format, nfd, ocifit};

/// A parsed, validated compatibility artifact. Immutable, `Send + Sync`, cheap to share in an
/// `Arc`.
#[derive(Clone, Debug)]
pub struct Artifact {
    format: Format,
    sets: Vec<CompatSet>,
}

// The controller shares artifacts between tasks in an `Arc`.
const _: fn() = || {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Artifact>();
};

/// One compatibility set: a candidate (its tag) and the rules a node must meet for it.
#[derive(Clone, Debug)]
pub struct CompatSet {
    pub(crate) index: usize,
    pub(crate) tag: String,
    pub(crate) weight: i32,
    pub(crate) description: Option<String>,
    pub(crate) rules: Rules,
}

/// A set's rules, in its artifact's format.
#[derive(Clone, Debug)]
pub(crate) enum Rules {
    Ocifit(Vec<ocifit::Rule>),
    Nfd(Vec<nfd::Rule>),
}

impl<R> CompiledSet<R> {
    /// The set, its rules wrapped as its format's.
    fn with(self, rules: impl FnOnce(Vec<R>) -> Rules) -> CompatSet {
        CompatSet {
            index: self.index,
            tag: self.tag,
            weight: self.weight,
            description: self.description,
            rules: rules(self.rules),
        }
    }
}

impl CompatSet {
    /// Position in the artifact (0-based, document order).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The tag: the image reference to use (ocifit; NFD artifacts listing candidates), or an NFD
    /// grouping name. Empty when an NFD set has none.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// Preference among matching sets; higher wins (default 0).
    pub fn weight(&self) -> i32 {
        self.weight
    }

    /// The author's description, if any.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// How many rules the set has (a set with none matches every node).
    pub fn rule_count(&self) -> usize {
        match &self.rules {
            Rules::Ocifit(rules) => rules.len(),
            Rules::Nfd(rules) => rules.len(),
        }
    }
}

/// The top level shared by both formats; each set is read separately so that errors can name it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    // Not checked by ocifit or NFD; read so that it is not an unknown field.
    #[serde(default, rename = "version")]
    _version: Option<String>,
    compatibilities: Vec<serde_json::Value>,
}

impl Artifact {
    /// Parses and validates an artifact in the given format (chosen by media type, or by
    /// [`Format::detect`] for local files). ocifit is JSON; NFD is YAML (JSON also parses). An
    /// artifact beyond [`LIMITS`] is refused before anything in it is compiled.
    pub fn parse(format: Format, bytes: &[u8]) -> Result<Artifact, ArtifactError> {
        let doc: serde_json::Value = match format {
            Format::Ocifit => {
                serde_json::from_slice(bytes).map_err(|source| ArtifactError::Json { source })?
            }
            Format::Nfd => {
                serde_saphyr::from_slice(bytes).map_err(|source| ArtifactError::Yaml {
                    format,
                    source: Box::new(source),
                })?
            }
        };
        limits::check(format, &doc, &LIMITS)?;
        Artifact::from_value(format, &doc).map_err(|err| match err {
            ArtifactError::Shape {
                format,
                at,
                message,
                hint: None,
            } => ArtifactError::Shape {
                format,
                at,
                message,
                hint: mismatch_hint(format, &doc),
            },
            other => other,
        })
    }

    fn from_value(format: Format, doc: &serde_json::Value) -> Result<Artifact, ArtifactError> {
        let document: Document =
            serde_path_to_error::deserialize(doc).map_err(|e| shape(format, "document", e))?;
        let sets = document
            .compatibilities
            .iter()
            .enumerate()
            .map(|(index, set)| match format {
                Format::Ocifit => ocifit::compile_set(index, set).map(|c| c.with(Rules::Ocifit)),
                Format::Nfd => nfd::compile_set(index, set).map(|c| c.with(Rules::Nfd)),
            })
            .collect::<Result<_, _>>()?;
        Ok(Artifact { format, sets })
    }

    /// For `artifact.ref` mode, where each set's `tag` is the image to use: errors on the first set
    /// whose tag is empty. NFD allows an empty tag (there it only groups sets), so parsing alone
    /// cannot refuse it, but an empty image must never reach a pod.
    pub fn require_image_tags(&self) -> Result<(), ArtifactError> {
        match self.sets.iter().find(|set| set.tag.trim().is_empty()) {
            Some(set) => Err(ArtifactError::Invalid {
                at: Box::new(Location::set(set.index, &set.tag)),
                problem: Problem::Empty { field: "tag" },
            }),
            None => Ok(()),
        }
    }

    /// The format the artifact was parsed as.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The compatibility sets, in document order.
    pub fn sets(&self) -> &[CompatSet] {
        &self.sets
    }

    /// What the rules read from a node (label keys for ocifit; features and elements for NFD).
    pub fn reads(&self) -> Reads {
        let mut reads = Reads::default();
        for set in &self.sets {
            match &set.rules {
                Rules::Ocifit(rules) => rules.iter().for_each(|r| r.add_reads(&mut reads)),
                Rules::Nfd(rules) => rules.iter().for_each(|r| r.add_reads(&mut reads)),
            }
        }
        reads
    }
}

impl CompatSet {
    /// Checks every rule. `features` are the node's NFD features (needed for NFD rules only).
    pub(crate) fn evaluate(
        &self,
        labels: &BTreeMap<String, String>,
        features: &Features,
    ) -> Result<(), Miss> {
        let base = Location::set(self.index, &self.tag);
        match &self.rules {
            Rules::Ocifit(rules) => rules
                .iter()
                .enumerate()
                .try_for_each(|(r, rule)| rule.evaluate(&base, r, labels)),
            Rules::Nfd(rules) => rules
                .iter()
                .enumerate()
                .try_for_each(|(r, rule)| rule.evaluate(&base, r, features)),
        }
    }
}
