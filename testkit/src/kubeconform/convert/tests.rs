use super::*;

fn document() -> Value {
    json!({"components": {"schemas": {
        "io.k8s.api.apps.v1.Deployment": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
            "properties": {
                "spec": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}], "default": {}},
            },
        },
        "io.k8s.api.apps.v1.DeploymentSpec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer", "format": "int32"},
                "strategy": {"type": "string", "nullable": true},
                "maxSurge": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
            },
        },
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
        "io.k8s.api.core.v1.Unrelated": {"type": "object"},
        "io.k8s.api.core.v1.Service": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Service"}],
        },
    }}})
}

#[test]
fn each_kind_gets_a_standalone_schema_with_only_the_definitions_it_reaches() {
    let kinds = kinds_from_openapi(&document());
    let deployment = kinds.iter().find(|k| k.kind == "Deployment").unwrap();

    assert_eq!(deployment.relative_path(), "apps/deployment_v1.json");
    let definitions = deployment.schema["definitions"].as_object().unwrap();
    let names: Vec<&str> = definitions.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "io.k8s.api.apps.v1.DeploymentSpec",
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
        ]
    );
    assert_eq!(
        deployment.schema["properties"]["spec"]["allOf"][0]["$ref"],
        "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    );
    let service = kinds.iter().find(|k| k.kind == "Service").unwrap();
    assert_eq!(service.relative_path(), "v1/service_v1.json");
}

#[test]
fn nullable_accepts_null_and_int_or_string_accepts_numbers() {
    let kinds = kinds_from_openapi(&document());
    let deployment = kinds.iter().find(|k| k.kind == "Deployment").unwrap();
    let spec = &deployment.schema["definitions"]["io.k8s.api.apps.v1.DeploymentSpec"];

    assert_eq!(
        spec["properties"]["strategy"],
        json!({"anyOf": [{"type": "string"}, {"type": "null"}]})
    );
    assert_eq!(
        deployment.schema["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"],
        json!({"oneOf": [{"type": "string"}, {"type": "integer"}]})
    );
}

#[test]
fn objects_listing_properties_refuse_others_unless_they_preserve_unknown_fields() {
    let crd = json!({
        "spec": {
            "group": "ocifit.io",
            "names": {"kind": "ImageSelectionPolicy"},
            "versions": [
                {"name": "v1alpha1", "served": true, "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {"type": "string"}}},
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                            "port": {"x-kubernetes-int-or-string": true},
                            "enum": {"type": "array", "items": {"type": "string"}},
                        }, "required": ["free"]},
                    },
                }}},
                {"name": "v0", "served": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
            ],
        },
    });

    let kinds = kinds_from_crd(&crd);

    assert_eq!(kinds.len(), 1, "only served versions");
    assert_eq!(
        kinds[0].relative_path(),
        "ocifit.io/imageselectionpolicy_v1alpha1.json"
    );
    let root = &kinds[0].schema;
    assert_eq!(root["additionalProperties"], false);
    assert_eq!(root["properties"]["apiVersion"], json!({"type": "string"}));
    let spec = &root["properties"]["spec"];
    assert_eq!(spec["additionalProperties"], false);
    assert_eq!(spec["required"], json!(["free"]));
    assert!(
        spec["properties"]["free"]
            .get("additionalProperties")
            .is_none()
    );
    assert_eq!(
        spec["properties"]["labels"]["additionalProperties"],
        json!({"type": "string"})
    );
    assert_eq!(
        spec["properties"]["port"]["oneOf"],
        json!([{"type": "string"}, {"type": "integer"}])
    );
    assert_eq!(
        spec["properties"]["enum"],
        json!({"type": "array", "items": {"type": "string"}}),
        "a property named like a keyword is still a schema"
    );
}
