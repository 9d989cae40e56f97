//! The document shape both formats share: each set as written, located deserializer errors,
//! and a set as a format compiled it, before the artifact wraps its rules. Knows no format.

use serde::Deserialize;

use super::Format;
use super::error::ArtifactError;

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
