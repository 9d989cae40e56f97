//! An oras-operator `OrasCache` → an `ArtifactCache` of the same name and namespace (and a
//! Secret for `secrets.registryHttp`).

use serde_json::{Map, Value, json};

use super::{Migration, Output, describe};
use crate::api::{DEFAULT_REGISTRY_IMAGE, step};

/// The oras-operator's API group, as `apiVersion` starts.
pub(super) const GROUP_PREFIX: &str = "cache.converged-computing.github.io/";
/// The oras-operator's default registry image.
const SEED_IMAGE: &str = "ghcr.io/oras-project/registry:latest";

pub(super) fn translate(source: &str, cache: &Value, migration: &mut Migration) {
    let what = describe(cache);
    let name = cache
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(step::DEFAULT_CACHE);
    let namespace = cache.pointer("/metadata/namespace").and_then(Value::as_str);
    let mut notes = Vec::new();
    let mut spec = Map::new();
    let empty = Map::new();
    let seed_spec = cache
        .get("spec")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut extra = Vec::new();
    notes.extend(dropped_fields(seed_spec));
    let deploy = seed_spec.get("deploy").and_then(Value::as_bool) != Some(false);
    let opt_in = format!(
        "kubectl label namespace {} {}={}",
        namespace.unwrap_or("NAMESPACE"),
        step::NAMESPACE_OPT_IN,
        step::NAMESPACE_OPT_IN_VALUE
    );
    if !deploy {
        remote(source, &what, &opt_in, notes, migration);
        return;
    }
    match seed_spec.get("image").and_then(Value::as_str) {
        None | Some("") => {}
        Some(SEED_IMAGE) => notes.push(format!(
            "spec.image: {SEED_IMAGE}: not carried over: the oras-operator's default; ocifit \
             deploys {DEFAULT_REGISTRY_IMAGE} (distribution, pinned) by default"
        )),
        Some(image) => {
            spec.insert("image".into(), Value::from(image));
            migration.push_value(
                "artifactCache.registryImages",
                &[DEFAULT_REGISTRY_IMAGE],
                image,
            );
            notes.push(format!(
                "spec.image: {image} is allowed through the chart's artifactCache.registryImages; \
                 it must serve the OCI distribution API on port 5000 and take distribution's \
                 REGISTRY_* environment"
            ));
        }
    }
    let mut carried = vec!["metadata.name", "metadata.namespace"];
    if cache.pointer("/metadata/labels").is_some() {
        carried.push("metadata.labels");
    }
    let merged = with_older_secret(seed_spec, &mut notes, &mut carried);
    let secrets = (!merged.is_empty()).then_some(&merged);
    let env_secrets = env_secret_refs(
        source,
        &what,
        (name, namespace),
        secrets,
        &mut notes,
        &mut extra,
    );
    if !env_secrets.is_empty() {
        spec.insert("envSecretRefs".into(), Value::from(env_secrets));
    }
    let mut metadata = json!({"name": name});
    if let Some(namespace) = namespace {
        metadata["namespace"] = Value::from(namespace);
    }
    if let Some(labels) = cache.pointer("/metadata/labels") {
        metadata["labels"] = labels.clone();
    }
    if spec.contains_key("image") {
        carried.push("spec.image");
    }
    if spec.contains_key("envSecretRefs") {
        carried.push("spec.secrets");
    }
    let mut all_notes = vec![format!(
        "{source}: {what} → ArtifactCache; carried over: {}. Opt its namespace in: {opt_in}",
        carried.join(", ")
    )];
    all_notes.extend(notes);
    migration.objects.push(Output {
        notes: all_notes,
        object: Some(json!({
            "apiVersion": "ocifit.io/v1alpha1",
            "kind": "ArtifactCache",
            "metadata": metadata,
            "spec": spec,
        })),
    });
    migration.objects.extend(extra);
}

/// An OrasCache with `deploy: false`: no ArtifactCache, only what its steps still need.
fn remote(source: &str, what: &str, opt_in: &str, notes: Vec<String>, migration: &mut Migration) {
    let mut all_notes = vec![format!(
        "{source}: {what} has deploy: false: no ArtifactCache is needed. Its steps name their \
         registry in the `{prefix}registry` annotation, which ocifit honours for registries on \
         the chart's registry.allowed list: add that host there (ocifit cannot know it from the \
         OrasCache). Opt the namespace in, or its steps are not injected and run without their \
         inputs and outputs: {opt_in}",
        prefix = step::PREFIX
    )];
    all_notes.extend(notes);
    migration.objects.push(Output {
        notes: all_notes,
        object: None,
    });
    migration.values.notes.push(format!(
        "registry.allowed: add the registry your steps' `registry` annotation names ({what} \
         deploys nothing)"
    ));
}

/// `spec.secrets`, with the oras-operator's first OrasCache's `spec.secret` as the value
/// `secrets.registryHttp` later took over.
fn with_older_secret(
    seed_spec: &Map<String, Value>,
    notes: &mut Vec<String>,
    carried: &mut Vec<&str>,
) -> Map<String, Value> {
    let mut merged = seed_spec
        .get("secrets")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Some(older) = seed_spec.get("secret") else {
        return merged;
    };
    if merged.contains_key("registryHttp") {
        notes.push(
            "spec.secret: not carried over: the oras-operator's first spelling of \
             spec.secrets.registryHttp, which this OrasCache sets too"
                .to_owned(),
        );
    } else {
        notes.push(
            "spec.secret: the oras-operator's first spelling of spec.secrets.registryHttp (the \
             registry's REGISTRY_HTTP_SECRET), carried as that"
                .to_owned(),
        );
        merged.insert("registryHttp".to_owned(), older.clone());
        carried.push("spec.secret");
    }
    merged
}

/// Notes for the OrasCache's `spec` fields ocifit does not carry over.
fn dropped_fields(seed_spec: &Map<String, Value>) -> Vec<String> {
    let mut notes = Vec::new();
    for (key, value) in seed_spec {
        match key.as_str() {
            "image" | "deploy" | "secrets" | "secret" => {}
            other => notes.push(format!(
                "spec.{other}: {}: not carried over: not a field of the oras-operator's OrasCache",
                compact(value)
            )),
        }
    }
    notes
}

/// The OrasCache's `spec.secrets` as the ArtifactCache's `envSecretRefs`: `orasEnv` named as it
/// is, `registryHttp` as a new Secret (into `extra`) holding the registry's
/// `REGISTRY_HTTP_SECRET`; any other key a note.
fn env_secret_refs(
    source: &str,
    what: &str,
    (name, namespace): (&str, Option<&str>),
    secrets: Option<&Map<String, Value>>,
    notes: &mut Vec<String>,
    extra: &mut Vec<Output>,
) -> Vec<Value> {
    let mut env_secrets = Vec::new();
    if let Some(secret) = secrets
        .and_then(|s| s.get("orasEnv"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        env_secrets.push(json!({"name": secret}));
    }
    if let Some(http_secret) = secrets
        .and_then(|s| s.get("registryHttp"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        let secret_name = format!("{name}-registry-http");
        let mut metadata = json!({"name": secret_name});
        if let Some(namespace) = namespace {
            metadata["namespace"] = Value::from(namespace);
        }
        extra.push(Output {
            notes: vec![format!(
                "{source}: {what}'s spec.secrets.registryHttp, as the registry's \
                 REGISTRY_HTTP_SECRET"
            )],
            object: Some(json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": metadata,
                "type": "Opaque",
                "stringData": {"REGISTRY_HTTP_SECRET": http_secret},
            })),
        });
        env_secrets.push(json!({"name": secret_name}));
    }
    if let Some(secrets) = secrets {
        for (key, value) in secrets {
            if key != "orasEnv" && key != "registryHttp" {
                notes.push(format!(
                    "spec.secrets.{key}: {}: not carried over: not a field of the oras-operator's \
                     OrasCache",
                    compact(value)
                ));
            }
        }
    }
    env_secrets
}

/// A value on one line, for a note.
pub(super) fn compact(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
