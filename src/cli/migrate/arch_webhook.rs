//! kube-arch-webhook's Helm values → a PlacementPolicy (what it adds per architecture, its cache
//! times, its registry credentials) and the chart's placement webhook values (failure policy,
//! selectors, reinvocation).

use serde_json::{Map, Value, json};

use super::oras::compact;
use super::{Migration, Output};
use crate::api::parse_duration;

/// The PlacementPolicy's name.
const POLICY: &str = "kube-arch-webhook";
/// Keys only kube-arch-webhook's values have.
const OWN_KEYS: [&str; 4] = [
    "architectures",
    "ifNotPresentCacheTime",
    "pullAlwaysCacheTime",
    "dockerConfigSecretName",
];
const ARCH_LABEL: &str = "kubernetes.io/arch";
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Whether a document without a kind is kube-arch-webhook's values.
pub fn is_values(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|map| OWN_KEYS.iter().any(|key| map.contains_key(*key)))
}

pub fn translate(source: &str, values: &Value, migration: &mut Migration) {
    let mut notes = vec![format!(
        "{source}: kube-arch-webhook's values → PlacementPolicy {POLICY} (every pod the chart's \
         placement webhook selects). Unlike kube-arch-webhook, pods that already carry a \
         configured toleration or affinity are placed too (their own node affinity is kept and \
         narrowed); label a pod placement.ocifit.io/enabled: \"false\" to leave it alone."
    )];
    let mut spec = Map::new();
    let mut tag_cache = Map::new();
    let empty = Map::new();
    for (key, value) in values.as_object().unwrap_or(&empty) {
        match key.as_str() {
            "architectures" => {
                let architectures = architectures(value, &mut notes);
                if !architectures.is_empty() {
                    spec.insert("architectures".into(), Value::from(architectures));
                }
            }
            "ifNotPresentCacheTime" => {
                duration(value, key, "ifNotPresent", &mut tag_cache, &mut notes)
            }
            // null: not cached, which is ocifit's default for Always (re-resolved for every pod).
            "pullAlwaysCacheTime" if value.is_null() => {}
            "pullAlwaysCacheTime" => duration(value, key, "always", &mut tag_cache, &mut notes),
            "dockerConfigSecretName" => match value.as_str() {
                None | Some("") => {}
                Some(secret) => {
                    migration.set_value("placement.dockerConfigSecret", Value::from(secret));
                    spec.insert("operatorCredentials".into(), Value::Bool(true));
                    migration.values.notes.push(format!(
                        "placement.dockerConfigSecret: {secret} must be a \
                         kubernetes.io/dockerconfigjson Secret in ocifit's release namespace \
                         (copy it there from kube-arch-webhook's)"
                    ));
                }
            },
            "failurePolicy" | "reinvocationPolicy" => {
                migration.set_value(&format!("placement.webhook.{key}"), value.clone());
            }
            "objectSelector" => {
                if let Some(selector) = selector(value, key, migration) {
                    migration.set_value("placement.webhook.objectSelector", selector);
                }
            }
            "namespaceSelector" => {
                if let Some(selector) = selector(value, key, migration) {
                    migration.set_value("placement.webhook.namespaceSelector", selector);
                }
            }
            other => migration.values.notes.push(format!(
                "{other}: {}: not carried over: a setting of kube-arch-webhook's own deployment; \
                 ocifit's chart has its own (charts/ocifit/README.md)",
                compact(value)
            )),
        }
    }
    if !tag_cache.is_empty() {
        spec.insert("tagCache".into(), Value::Object(tag_cache));
    }
    migration.objects.push(Output {
        notes,
        object: Some(json!({
            "apiVersion": "ocifit.io/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": POLICY},
            "spec": spec,
        })),
    });
}

fn duration(
    value: &Value,
    key: &str,
    field: &str,
    tag_cache: &mut Map<String, Value>,
    notes: &mut Vec<String>,
) {
    match value.as_str().map(|text| (text, parse_duration(text))) {
        Some((text, Some(_))) => {
            tag_cache.insert(field.into(), Value::from(text));
        }
        Some((text, None)) => notes.push(format!(
            "{key}: {text}: not carried over: ocifit reads durations as a number and a unit \
             (ms, s, m, h or d), e.g. 7d or 36h; set spec.tagCache.{field} by hand"
        )),
        None => notes.push(format!(
            "{key}: {}: not carried over: not a duration",
            compact(value)
        )),
    }
}

/// `architectures: {arm64: {tolerations, nodeAffinitySelectorTerms}}` → the policy's list.
fn architectures(value: &Value, notes: &mut Vec<String>) -> Vec<Value> {
    let Some(map) = value.as_object() else {
        notes.push(format!(
            "architectures: {}: not carried over: not a map of architecture to settings",
            compact(value)
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (arch, settings) in map {
        let mut entry = Map::from_iter([("name".to_owned(), Value::from(arch.as_str()))]);
        for (key, setting) in settings.as_object().unwrap_or(&Map::new()) {
            match key.as_str() {
                "tolerations" => {
                    entry.insert("tolerations".into(), setting.clone());
                }
                "nodeAffinitySelectorTerms" => {
                    let labels = affinity_terms(arch, setting, notes);
                    merge_labels(&mut entry, labels);
                }
                "requireNodeLabels" => match string_map(setting) {
                    Some(labels) => merge_labels(&mut entry, labels),
                    None => notes.push(format!(
                        "architectures.{arch}.requireNodeLabels: {}: not carried over: not a \
                         map of label to value",
                        compact(setting)
                    )),
                },
                other => notes.push(format!(
                    "architectures.{arch}.{other}: {}: not carried over: ocifit has no \
                     equivalent per architecture",
                    compact(setting)
                )),
            }
        }
        out.push(Value::Object(entry));
    }
    out
}

/// kube-arch-webhook ORs these terms into the pod's required node affinity. One term of
/// `key In [value]` expressions is required labels; ocifit ANDs the architecture in itself, so
/// an expression asking for this architecture needs nothing. Anything else (several terms, other
/// operators) is an alternative a gated pod cannot be given: named in a note.
fn affinity_terms(arch: &str, terms: &Value, notes: &mut Vec<String>) -> Map<String, Value> {
    let mut labels = Map::new();
    let single = match terms.as_array().map(Vec::as_slice) {
        Some([term])
            if term
                .as_object()
                .is_some_and(|t| t.keys().all(|k| k == "matchExpressions")) =>
        {
            term.get("matchExpressions").and_then(Value::as_array)
        }
        _ => None,
    };
    let carried = single.is_some_and(|expressions| {
        expressions.iter().all(|e| {
            let key = e.get("key").and_then(Value::as_str);
            let values = e.get("values").and_then(Value::as_array).map(Vec::as_slice);
            match (key, e.get("operator").and_then(Value::as_str), values) {
                (Some(ARCH_LABEL), Some("In"), Some([value])) => value.as_str() == Some(arch),
                (Some(key), Some("In"), Some([value])) if value.is_string() => {
                    labels.insert(key.to_owned(), value.clone());
                    true
                }
                _ => false,
            }
        })
    });
    if !carried {
        notes.push(format!(
            "architectures.{arch}.nodeAffinitySelectorTerms: {}: not carried over: ocifit ANDs \
             {ARCH_LABEL} In [{arch}] into the pod's own node affinity itself and takes other \
             requirements as requireNodeLabels (one term of `key In [value]`); several terms or \
             other operators would be an alternative, which a gated pod's node affinity cannot \
             be given",
            compact(terms)
        ));
        labels.clear();
    }
    labels
}

/// A map of strings, as `requireNodeLabels` holds.
fn string_map(value: &Value) -> Option<Map<String, Value>> {
    let map = value.as_object()?;
    map.values().all(Value::is_string).then(|| map.clone())
}

fn merge_labels(entry: &mut Map<String, Value>, labels: Map<String, Value>) {
    if labels.is_empty() {
        return;
    }
    let slot = entry
        .entry("requireNodeLabels")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(existing) = slot {
        existing.extend(labels);
    }
}

/// A selector for the chart: kept, minus the kube-system exclusion the chart always makes.
fn selector(value: &Value, key: &str, migration: &mut Migration) -> Option<Value> {
    let map = value.as_object()?;
    let mut out = Map::new();
    for (field, setting) in map {
        match field.as_str() {
            "matchLabels" => {
                out.insert(field.clone(), setting.clone());
            }
            "matchExpressions" => {
                let kept: Vec<Value> = setting
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|e| !excludes_kube_system(e))
                    .cloned()
                    .collect();
                out.insert(field.clone(), Value::from(kept));
            }
            other => migration.values.notes.push(format!(
                "{key}.{other}: {}: not carried over: not a field of a label selector",
                compact(setting)
            )),
        }
    }
    Some(Value::Object(out))
}

/// `kubernetes.io/metadata.name NotIn [kube-system]`: the chart excludes kube-system always.
fn excludes_kube_system(expression: &Value) -> bool {
    expression.get("key").and_then(Value::as_str) == Some(NAME_LABEL)
        && expression.get("operator").and_then(Value::as_str) == Some("NotIn")
        && expression.get("values") == Some(&json!(["kube-system"]))
}
