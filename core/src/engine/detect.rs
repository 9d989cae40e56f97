//! Telling the formats apart by shape, for local files only (registry content is dispatched on
//! media type, never by trial parsing), and hinting when a document read as one format looks
//! like the other. Owns no parsing beyond a generic document tree.

use serde_json::Value;

use super::Format;
use super::error::ArtifactError;

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
