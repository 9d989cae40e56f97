//! An oras-operator `OrasCache` → an `ArtifactCache` of the same name and namespace (and a
//! Secret for `secrets.registryHttp`).

use serde_json::{Map, Value, json};

use super::{Migration, Output, describe};
use crate::api::{DEFAULT_REGISTRY_IMAGE, step};

/// The oras-operator's API group, as `apiVersion` starts.
pub const GROUP_PREFIX: &str = "cache.converged-computing.github.io/";
/// The oras-operator's default registry image.
const SEED_IMAGE: &str = "ghcr.io/oras-project/registry:latest";

pub fn translate(source: &str, cache: &Value, migration: &mut Migration) {
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
    notes.extend(dropped_fields(seed_spec, name));
    let deploy = seed_spec.get("deploy").and_then(Value::as_bool) != Some(false);
    if !deploy {
        migration.objects.push(Output {
            notes: vec![format!(
                "{source}: {what} has deploy: false: no ArtifactCache is needed. Its steps name \
                 their registry in the `{prefix}registry` annotation, which ocifit honours for \
                 registries on the chart's registry.allowed list: add that host there (ocifit \
                 cannot know it from the OrasCache).",
                prefix = step::PREFIX
            )],
            object: None,
        });
        migration.values.notes.push(format!(
            "registry.allowed: add the registry your steps' `registry` annotation names ({what} \
             deploys nothing)"
        ));
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
    let secrets = seed_spec.get("secrets").and_then(Value::as_object);
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
    let opt_in = format!(
        "{NS_OPT_IN}={NS_OPT_IN_VALUE}",
        NS_OPT_IN = step::NAMESPACE_OPT_IN,
        NS_OPT_IN_VALUE = step::NAMESPACE_OPT_IN_VALUE
    );
    let mut all_notes = vec![format!(
        "{source}: {what} → ArtifactCache. Opt its namespace in: kubectl label namespace {} {opt_in}",
        namespace.unwrap_or("NAMESPACE")
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

/// Notes for the OrasCache's `spec` fields ocifit does not carry over.
fn dropped_fields(seed_spec: &Map<String, Value>, name: &str) -> Vec<String> {
    let mut notes = Vec::new();
    for (key, value) in seed_spec {
        match key.as_str() {
            "image" | "deploy" | "secrets" => {}
            "service" => notes.push(format!(
                "spec.service: {}: not carried over: ocifit names the registry's Service itself \
                 (`{name}-registry`) and steps reach it by its ClusterIP, with no cluster DNS or \
                 pod subdomain",
                compact(value)
            )),
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
pub fn compact(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
