//! Pure conversion of OpenAPI v3 schemas (the apiserver's `/openapi/v3` documents and CRDs'
//! `openAPIV3Schema`) into the standalone, strict JSON schemas kubeconform reads: one schema per
//! kind, references rewritten to `#/definitions/…` with only the definitions the kind reaches,
//! `additionalProperties: false` wherever the API itself would drop or reject unknown fields, and the
//! OpenAPI-only spellings (`nullable`, int-or-string, quantities) turned into JSON Schema. No I/O.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// Where OpenAPI v3 documents keep their named schemas.
const COMPONENTS_PREFIX: &str = "#/components/schemas/";
/// Where the converted schemas keep them.
const DEFINITIONS_PREFIX: &str = "#/definitions/";
/// Schemas whose OpenAPI form is a string but whose values may also be numbers.
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// One kind's schema, and where kubeconform looks for it.
#[derive(Clone, Debug, PartialEq)]
pub struct KindSchema {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// The standalone JSON schema.
    pub schema: Value,
}

impl KindSchema {
    /// The file's path under the schema directory for the location
    /// `{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json` (kubeconform names the
    /// core group by its version, `v1`).
    pub fn relative_path(&self) -> String {
        let group = if self.group.is_empty() {
            &self.version
        } else {
            &self.group
        };
        format!("{group}/{}_{}.json", self.kind.to_lowercase(), self.version)
    }
}

/// Every kind in one OpenAPI v3 document (one group-version of the apiserver): each schema carrying
/// `x-kubernetes-group-version-kind`, with the definitions it reaches.
pub fn kinds_from_openapi(document: &Value) -> Vec<KindSchema> {
    let Some(components) = document
        .pointer("/components/schemas")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let mut kinds = Vec::new();
    for (name, schema) in components {
        let Some(gvks) = schema
            .get("x-kubernetes-group-version-kind")
            .and_then(Value::as_array)
        else {
            continue;
        };
        let definitions = reachable(name, components);
        let mut root = strict(&convert(schema));
        let definitions: Map<String, Value> = definitions
            .into_iter()
            .filter_map(|d| components.get(&d).map(|s| (d.clone(), definition(&d, s))))
            .collect();
        if let Some(object) = root.as_object_mut() {
            object.insert("definitions".into(), Value::Object(definitions));
        }
        for gvk in gvks {
            let field = |key: &str| gvk.get(key).and_then(Value::as_str).unwrap_or_default();
            kinds.push(KindSchema {
                group: field("group").to_owned(),
                version: field("version").to_owned(),
                kind: field("kind").to_owned(),
                schema: root.clone(),
            });
        }
    }
    kinds
}

/// Every served version of a CustomResourceDefinition (as JSON), from its `openAPIV3Schema`.
pub fn kinds_from_crd(crd: &Value) -> Vec<KindSchema> {
    let group = crd.pointer("/spec/group").and_then(Value::as_str);
    let kind = crd.pointer("/spec/names/kind").and_then(Value::as_str);
    let (Some(group), Some(kind)) = (group, kind) else {
        return Vec::new();
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .filter_map(|v| {
            let version = v.get("name").and_then(Value::as_str)?;
            let mut schema = v.pointer("/schema/openAPIV3Schema")?.clone();
            // The apiserver always accepts these, whether or not the CRD's schema lists them.
            if let Some(properties) = schema
                .as_object_mut()
                .map(|o| o.entry("properties").or_insert_with(|| json!({})))
                .and_then(Value::as_object_mut)
            {
                for (key, value) in [
                    ("apiVersion", json!({"type": "string"})),
                    ("kind", json!({"type": "string"})),
                    ("metadata", json!({"type": "object"})),
                ] {
                    properties.entry(key).or_insert(value);
                }
            }
            Some(KindSchema {
                group: group.to_owned(),
                version: version.to_owned(),
                kind: kind.to_owned(),
                schema: strict(&convert(&schema)),
            })
        })
        .collect()
}

/// A named definition, converted; the two string-or-number types get their JSON Schema form.
fn definition(name: &str, schema: &Value) -> Value {
    match name {
        INT_OR_STRING => json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}),
        QUANTITY => json!({"oneOf": [{"type": "string"}, {"type": "number"}]}),
        _ => strict(&convert(schema)),
    }
}

/// The names of the component schemas `root` reaches through references (itself excluded unless
/// it refers to itself).
fn reachable(root: &str, components: &Map<String, Value>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut queue = vec![root.to_owned()];
    while let Some(name) = queue.pop() {
        let mut refs = BTreeSet::new();
        if let Some(schema) = components.get(&name) {
            collect_refs(schema, &mut refs);
        }
        for r in refs {
            if seen.insert(r.clone()) {
                queue.push(r);
            }
        }
    }
    seen
}

fn collect_refs(value: &Value, refs: &mut BTreeSet<String>) {
    match value {
        Value::Object(object) => {
            if let Some(name) = object
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(COMPONENTS_PREFIX))
            {
                refs.insert(name.to_owned());
            }
            object.values().for_each(|v| collect_refs(v, refs));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, refs)),
        _ => {}
    }
}

/// References rewritten, `nullable` turned into a `null` alternative, int-or-string markers into
/// `oneOf`, recursively.
fn convert(value: &Value) -> Value {
    match value {
        Value::Object(object) => {
            let mut out: Map<String, Value> = object
                .iter()
                .map(|(key, v)| match (key.as_str(), v) {
                    ("$ref", Value::String(r)) => (
                        key.clone(),
                        Value::String(match r.strip_prefix(COMPONENTS_PREFIX) {
                            Some(name) => format!("{DEFINITIONS_PREFIX}{name}"),
                            None => r.clone(),
                        }),
                    ),
                    _ => (key.clone(), children(key, v, convert)),
                })
                .collect();
            if out.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
                && !out.contains_key("anyOf")
                && !out.contains_key("oneOf")
            {
                out.remove("type");
                out.insert(
                    "oneOf".into(),
                    json!([{"type": "string"}, {"type": "integer"}]),
                );
            }
            if out.remove("nullable") == Some(Value::Bool(true)) {
                return json!({"anyOf": [Value::Object(out), {"type": "null"}]});
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(convert).collect()),
        other => other.clone(),
    }
}

/// `additionalProperties: false` on every object schema that lists its properties, says nothing
/// about others and does not preserve unknown fields: what the apiserver prunes or rejects.
fn strict(value: &Value) -> Value {
    match value {
        Value::Object(object) => {
            let mut out: Map<String, Value> = object
                .iter()
                .map(|(key, v)| (key.clone(), children(key, v, strict)))
                .collect();
            let preserves =
                out.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            if out.contains_key("properties")
                && !out.contains_key("additionalProperties")
                && !preserves
            {
                out.insert("additionalProperties".into(), Value::Bool(false));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(strict).collect()),
        other => other.clone(),
    }
}

/// `f` applied to the schemas under keyword `key`: each value of a name → schema map, nothing
/// inside data keywords (whose objects are values or names, not schemas), else the value itself.
fn children(key: &str, value: &Value, f: fn(&Value) -> Value) -> Value {
    match (key, value) {
        ("enum" | "default" | "example" | "required", _) => value.clone(),
        ("properties" | "patternProperties" | "definitions", Value::Object(map)) => Value::Object(
            map.iter()
                .map(|(name, schema)| (name.clone(), f(schema)))
                .collect(),
        ),
        _ => f(value),
    }
}

#[cfg(test)]
mod tests;
