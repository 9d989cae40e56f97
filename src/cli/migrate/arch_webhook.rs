//! kube-arch-webhook's Helm values → a PlacementPolicy (what it adds per architecture, its cache
//! times, its registry credentials) and the chart's placement webhook values (failure policy,
//! selectors, reinvocation).

use serde_json::{Map, Value, json};

use super::oras::compact;
use super::{Migration, Output};
use crate::api::parse_duration;

/// The PlacementPolicy's name.
const POLICY: &str = "kube-arch-webhook";
/// Keys only kube-arch-webhook's values have (`cacheTime`: its README's first spelling of
/// `ifNotPresentCacheTime`).
const OWN_KEYS: [&str; 5] = [
    "architectures",
    "ifNotPresentCacheTime",
    "cacheTime",
    "pullAlwaysCacheTime",
    "dockerConfigSecretName",
];
/// The values this module translates; any other is named as not carried over.
const CARRIED: [&str; 9] = [
    "architectures",
    "ifNotPresentCacheTime",
    "cacheTime",
    "pullAlwaysCacheTime",
    "dockerConfigSecretName",
    "failurePolicy",
    "reinvocationPolicy",
    "objectSelector",
    "namespaceSelector",
];
/// The seed's chart defaults (its README's "Core Values") that differ from what ocifit does when
/// the value is absent: carried when the input lacks them, as `helm get values` does.
const SEED_DEFAULTS: [(&str, &str); 1] = [("ifNotPresentCacheTime", "7d")];
const ARCH_LABEL: &str = "kubernetes.io/arch";
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Whether a document without a kind is kube-arch-webhook's values.
pub(super) fn is_values(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|map| OWN_KEYS.iter().any(|key| map.contains_key(*key)))
}

pub(super) fn translate(source: &str, values: &Value, migration: &mut Migration) {
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
            "ifNotPresentCacheTime" | "cacheTime" => {
                duration(value, key, "ifNotPresent", &mut tag_cache, &mut notes)
            }
            // null (or the README's first spelling, `nil`): not cached, which is ocifit's default
            // for Always (re-resolved for every pod).
            "pullAlwaysCacheTime" if value.is_null() || value.as_str() == Some("nil") => {}
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
    let carried: Vec<&str> = values
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, _)| key.as_str())
        .filter(|key| CARRIED.contains(key))
        .collect();
    notes[0].push_str(&format!(
        " Carried over: {} (each below where part of it could not be).",
        if carried.is_empty() {
            "nothing".to_owned()
        } else {
            carried.join(", ")
        }
    ));
    notes.push(seed_defaults(values, &mut tag_cache));
    if !tag_cache.is_empty() {
        spec.insert("tagCache".into(), Value::Object(tag_cache));
    }
    migration
        .objects
        .push(Output::placement_policy(POLICY, Value::Object(spec), notes));
}

/// Fills in the seed's chart defaults the input lacks, and says which: `helm get values` prints
/// only what was set at install, so a value left at its default is absent there.
fn seed_defaults(values: &Value, tag_cache: &mut Map<String, Value>) -> String {
    let has = |key: &str| values.get(key).is_some();
    let mut carried = Vec::new();
    for (key, default) in SEED_DEFAULTS {
        // `cacheTime` is the first spelling of `ifNotPresentCacheTime`.
        let given = has(key) || (key == "ifNotPresentCacheTime" && has("cacheTime"));
        if !given {
            tag_cache.insert("ifNotPresent".into(), Value::from(default));
            carried.push(format!("{key}: {default} (as spec.tagCache.ifNotPresent)"));
        }
    }
    let lead = "`helm get values` prints only the values set at install and omits the chart's \
                defaults (`helm get values --all` prints them too)";
    if carried.is_empty() {
        format!(
            "{lead}; this input sets every value whose default ocifit does not share, so it is \
             read as written"
        )
    } else {
        format!(
            "{lead}; not in this input, so kube-arch-webhook's chart default is carried: {}. Its \
             other defaults (failurePolicy Ignore, reinvocationPolicy IfNeeded, kube-system left \
             out, pullAlwaysCacheTime null) are ocifit's own.",
            carried.join(", ")
        )
    }
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

/// `architectures: {arm64: {taintsToTolerate, requireNodeLabels}}` (the seed's README; its
/// first spelling `tolerations` and `nodeAffinitySelectorTerms`, and `requireNodeLabels` as one
/// map, read too) → the policy's list.
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
                "taintsToTolerate" => {
                    let tolerations = taints_to_tolerations(arch, setting, notes);
                    extend_tolerations(&mut entry, tolerations);
                }
                "tolerations" => {
                    extend_tolerations(&mut entry, setting.as_array().cloned().unwrap_or_default())
                }
                "nodeAffinitySelectorTerms" => {
                    let labels = affinity_terms(arch, setting, notes);
                    merge_labels(&mut entry, labels);
                }
                "requireNodeLabels" => {
                    let labels = required_labels(arch, setting, notes);
                    merge_labels(&mut entry, labels);
                }
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

/// The taints a pod of this architecture must tolerate, as tolerations: `Equal` to the taint's
/// value, or `Exists` for a taint without one.
fn taints_to_tolerations(arch: &str, taints: &Value, notes: &mut Vec<String>) -> Vec<Value> {
    let mut out = Vec::new();
    for taint in taints.as_array().into_iter().flatten() {
        let text = |field: &str| taint.get(field).and_then(Value::as_str);
        let Some(key) = text("key").filter(|key| !key.is_empty()) else {
            notes.push(format!(
                "architectures.{arch}.taintsToTolerate: {}: not carried over: a taint needs a key",
                compact(taint)
            ));
            continue;
        };
        let mut toleration = json!({"key": key});
        match text("value").filter(|value| !value.is_empty()) {
            Some(value) => {
                toleration["operator"] = Value::from("Equal");
                toleration["value"] = Value::from(value);
            }
            None => toleration["operator"] = Value::from("Exists"),
        }
        if let Some(effect) = text("effect").filter(|effect| !effect.is_empty()) {
            toleration["effect"] = Value::from(effect);
        }
        out.push(toleration);
    }
    if !taints.is_array() {
        notes.push(format!(
            "architectures.{arch}.taintsToTolerate: {}: not carried over: not a list of taints",
            compact(taints)
        ));
    }
    out
}

fn extend_tolerations(entry: &mut Map<String, Value>, tolerations: Vec<Value>) {
    if tolerations.is_empty() {
        return;
    }
    let slot = entry
        .entry("tolerations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(existing) = slot {
        existing.extend(tolerations);
    }
}

/// `requireNodeLabels`: the seed's label maps (or one map), each an ORed node selector term. One
/// set (less this architecture's own label, which ocifit ANDs in itself) is carried; several are
/// an alternative a gated pod's node affinity cannot be given, named in a note.
fn required_labels(arch: &str, value: &Value, notes: &mut Vec<String>) -> Map<String, Value> {
    let terms: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        Value::Object(_) => vec![value],
        _ => Vec::new(),
    };
    let mut sets: Vec<Map<String, Value>> = Vec::new();
    let mut well_formed = !terms.is_empty();
    for term in terms {
        let Some(labels) = string_map(term) else {
            well_formed = false;
            break;
        };
        let own = labels.get(ARCH_LABEL).and_then(Value::as_str);
        if own.is_some_and(|own| own != arch) {
            // A term for another architecture never matches this one's nodes.
            continue;
        }
        let rest: Map<String, Value> = labels
            .into_iter()
            .filter(|(key, _)| key != ARCH_LABEL)
            .collect();
        if !sets.contains(&rest) {
            sets.push(rest);
        }
    }
    if !well_formed {
        notes.push(format!(
            "architectures.{arch}.requireNodeLabels: {}: not carried over: not a list of maps of \
             label to value",
            compact(value)
        ));
        return Map::new();
    }
    match sets.as_slice() {
        [] => Map::new(),
        [one] => one.clone(),
        _ => {
            notes.push(format!(
                "architectures.{arch}.requireNodeLabels: {}: not carried over: kube-arch-webhook \
                 ORs these label sets into the pod's node selector terms; ocifit takes one set \
                 (ANDed with {ARCH_LABEL}: {arch}) per architecture, and an alternative cannot \
                 be added to a gated pod's node affinity (Kubernetes only accepts narrowing it)",
                compact(value)
            ));
            Map::new()
        }
    }
}

/// kube-arch-webhook's ORed affinity terms: one term of `key In [value]` is required labels (one
/// for this architecture needs nothing: ocifit ANDs it in itself); anything else is an
/// alternative a gated pod cannot be given, named in a note.
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
