//! The document shape both formats share: each set as written, located deserializer errors,
//! and a set as a format compiled it, before the artifact wraps its rules; and telling the
//! formats apart by shape, for local files only (registry content is dispatched on media type,
//! never by trial parsing), with a hint when a document read as one format looks like the other.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Format;
use super::error::{ArtifactError, Location, Problem};

/// One compatibility set as written, shared by both formats; `R` is the format's rule shape.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "R: Deserialize<'de>"))]
pub(crate) struct SetDoc<R> {
    #[serde(default)]
    pub tag: Option<String>,
    #[serde(default)]
    pub weight: Option<i32>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub rules: Option<Vec<R>>,
}

/// One set as its format compiled it; the artifact wraps `rules` as that format's.
pub(crate) struct CompiledSet<R> {
    pub(crate) index: usize,
    pub(crate) tag: String,
    pub(crate) weight: i32,
    pub(crate) description: Option<String>,
    pub(crate) rules: Vec<R>,
}

/// A deserializer error, located: `at` names the set, the path names the field.
pub(crate) fn shape(
    format: Format,
    at: &str,
    err: serde_path_to_error::Error<serde_json::Error>,
) -> ArtifactError {
    let path = err.path().to_string();
    let at = if path == "." {
        at.to_owned()
    } else {
        format!("{at}, at {path}")
    };
    ArtifactError::Shape {
        format,
        at,
        message: err.into_inner().to_string(),
        hint: None,
    }
}

/// `set 2 ("ubuntu:24.04")`, the prefix of every shape error about one set.
pub(crate) fn set_label(index: usize, set: &serde_json::Value) -> String {
    let tag = set
        .get("tag")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    format!("set {index} ({tag:?})")
}

/// Whether a format refuses a set without a tag (ocifit's: the tag is what a pod is given).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    Required,
    Optional,
}

/// Reads set `index` and compiles each of its rules with `compile_rule` (given the set's location,
/// the rule's index and the rule as written).
pub(crate) fn compile_set<R: DeserializeOwned, C>(
    format: Format,
    tag_rule: Tag,
    index: usize,
    value: &serde_json::Value,
    compile_rule: impl Fn(&Location, usize, R) -> Result<C, ArtifactError>,
) -> Result<CompiledSet<C>, ArtifactError> {
    let at = set_label(index, value);
    let doc: SetDoc<R> =
        serde_path_to_error::deserialize(value).map_err(|e| shape(format, &at, e))?;
    let tag = doc.tag.unwrap_or_default();
    let base = Location::set(index, &tag);
    if tag_rule == Tag::Required && tag.is_empty() {
        return Err(ArtifactError::Invalid {
            at: Box::new(base),
            problem: Problem::Empty { field: "tag" },
        });
    }
    let rules = doc
        .rules
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(r, rule)| compile_rule(&base, r, rule))
        .collect::<Result<_, _>>()?;
    Ok(CompiledSet {
        index,
        tag,
        weight: doc.weight.unwrap_or(0),
        description: doc.description,
        rules,
    })
}

const OCIFIT_LIST: &str = "a matchExpressions is a list of {key, op, value}, the ocifit form";
const NFD_MAP: &str = "a matchExpressions is a map from element name to expression, the NFD form";
const NFD_TERM: &str =
    "a matchFeatures term names a feature or has a matchName, as only NFD terms do";
const NFD_RULE: &str =
    "a rule has name, matchAny, vars or varsTemplate, fields of NFD's GroupRule only";
const JSON_DEFAULT: &str =
    "the JSON document has no expression to tell by, so it is read as ocifit (JSON only)";
const YAML_DEFAULT: &str =
    "the YAML document has no expression to tell by, so it is read as NFD (the YAML format)";

pub(crate) fn detect(bytes: &[u8]) -> Result<(Format, &'static str), ArtifactError> {
    let (doc, json) = match serde_json::from_slice::<Value>(bytes) {
        Ok(doc) => (doc, true),
        Err(_) => {
            let doc =
                serde_saphyr::from_slice::<Value>(bytes).map_err(|source| ArtifactError::Yaml {
                    format: Format::Nfd,
                    source: Box::new(source),
                })?;
            (doc, false)
        }
    };
    if !doc.get("compatibilities").is_some_and(Value::is_array) {
        return Err(ArtifactError::Undetectable {
            reason: "the document has no compatibilities list, which both formats require",
        });
    }
    Ok(match evidence(&doc) {
        Some(found) => found,
        None if json => (Format::Ocifit, JSON_DEFAULT),
        None => (Format::Nfd, YAML_DEFAULT),
    })
}

/// When a document that failed to parse as `format` shows the other format's shape, says so.
pub(crate) fn mismatch_hint(format: Format, doc: &Value) -> Option<&'static str> {
    match evidence(doc) {
        Some((Format::Ocifit, _)) if format == Format::Nfd => Some(
            "this looks like an ocifit artifact: its matchExpressions is a list of {key, op, value}",
        ),
        Some((Format::Nfd, _)) if format == Format::Ocifit => Some(
            "this looks like an NFD artifact: it has NFD's map-form matchExpressions, feature, matchName or matchAny",
        ),
        _ => None,
    }
}

/// The first piece of evidence, in document order, for one format or the other.
fn evidence(doc: &Value) -> Option<(Format, &'static str)> {
    let sets = doc.get("compatibilities")?.as_array()?;
    let rules = sets
        .iter()
        .filter_map(|set| set.get("rules")?.as_array())
        .flatten();
    for rule in rules {
        if ["name", "matchAny", "vars", "varsTemplate"]
            .iter()
            .any(|k| rule.get(k).is_some())
        {
            return Some((Format::Nfd, NFD_RULE));
        }
        let terms = rule.get("matchFeatures").and_then(Value::as_array);
        for term in terms.into_iter().flatten() {
            if term.get("feature").is_some() || term.get("matchName").is_some() {
                return Some((Format::Nfd, NFD_TERM));
            }
            match term.get("matchExpressions") {
                Some(Value::Array(_)) => return Some((Format::Ocifit, OCIFIT_LIST)),
                Some(Value::Object(_)) => return Some((Format::Nfd, NFD_MAP)),
                _ => {}
            }
        }
    }
    None
}
