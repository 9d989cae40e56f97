//! The document shape both formats share: each set as written, located deserializer errors,
//! and a set as a format compiled it, before the artifact wraps its rules. Knows no format.

use serde::Deserialize;
use serde::de::DeserializeOwned;

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
