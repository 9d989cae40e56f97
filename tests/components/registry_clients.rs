//! The registry side with real clients on a real registry (distribution): artifacts pushed with the
//! ORAS Python SDK, NFD artifacts attached with regctl, single- and multi-platform images and an
//! index with an attestation entry pushed with crane, all read back with crane and regctl; and a
//! registry behind basic auth.

use std::io::{Read, Write};
use std::net::TcpStream;

use ocifit_testkit::{OrasArtifact, Registry};
use serde_json::Value;

const COMPAT_LAYER: &str = "application/vnd.oci.image.compatibilities.v1+json";
const NFD_ARTIFACT: &str = "application/vnd.nfd.image-compatibility.v1alpha1";
const NFD_SPEC: &str = "application/vnd.nfd.image-compatibility.spec.v1alpha1+yaml";

async fn manifest(registry: &Registry, reference: &str) -> Value {
    let manifest = registry.crane(["manifest", reference]).await;
    serde_json::from_str(&manifest.expect("crane manifest")).expect("a JSON manifest")
}

fn write_file(registry: &Registry, name: &str, content: &str) -> std::path::PathBuf {
    let path = registry.dir().join(name);
    std::fs::write(&path, content).expect("a file in the registry's directory");
    path
}

#[tokio::test]
async fn oras_sdk_artifact_is_stored_with_the_compatibility_layer_and_its_content() {
    let registry = Registry::builder().start().await.unwrap();
    let content = r#"{"compatibilities":[{"tag":"vanilla"}]}"#;
    let file = write_file(&registry, "compat.json", content);
    let reference = registry.reference("ocifit/compat:v1");

    let digest = registry
        .push_artifact(&OrasArtifact::new(&reference, &file, COMPAT_LAYER))
        .await
        .unwrap();

    assert_eq!(
        registry.crane(["digest", &reference]).await.unwrap().trim(),
        digest
    );
    let manifest = manifest(&registry, &reference).await;
    let layer = &manifest["layers"][0];
    assert_eq!(layer["mediaType"], COMPAT_LAYER);
    let layer_digest = layer["digest"].as_str().unwrap();
    let blob = registry
        .crane([
            "blob",
            &registry.reference(&format!("ocifit/compat@{layer_digest}")),
        ])
        .await
        .unwrap();
    assert_eq!(blob, content);
}

#[tokio::test]
async fn oras_sdk_attach_sets_the_artifact_type_and_the_images_descriptor_as_subject() {
    let registry = Registry::builder().start().await.unwrap();
    let image = registry
        .push_image("app", "v1", "linux/amd64")
        .await
        .unwrap();
    let file = write_file(&registry, "compat.json", "{}");
    let reference = registry.reference("app:compat");

    registry
        .push_artifact(
            &OrasArtifact::new(&reference, &file, COMPAT_LAYER)
                .artifact_type(COMPAT_LAYER)
                .subject(&image.reference),
        )
        .await
        .unwrap();

    let manifest = manifest(&registry, &reference).await;
    assert_eq!(manifest["artifactType"], COMPAT_LAYER);
    assert_eq!(manifest["subject"]["digest"], image.digest.as_str());
    let image_manifest = registry
        .crane(["manifest", &image.reference])
        .await
        .unwrap();
    assert_eq!(manifest["subject"]["size"], image_manifest.len());
}

#[tokio::test]
async fn nfd_artifact_attached_with_regctl_is_found_from_its_image() {
    let registry = Registry::builder().start().await.unwrap();
    let image = registry
        .push_image("app", "v1", "linux/amd64")
        .await
        .unwrap();
    let spec = "version: v1alpha1\ncompatibilities: []\n";
    let file = write_file(&registry, "nfd.yaml", spec);

    let artifact = registry
        .attach_artifact(&image.reference, NFD_ARTIFACT, &file, NFD_SPEC)
        .await
        .unwrap();

    let listed = registry
        .regctl([
            "artifact",
            "list",
            &image.reference,
            "--format",
            "{{json .Manifest}}",
        ])
        .await
        .unwrap();
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let referrer = &listed["manifests"][0];
    assert_eq!(referrer["digest"], artifact.as_str());
    assert_eq!(referrer["artifactType"], NFD_ARTIFACT);
    let fetched = registry
        .regctl([
            "artifact",
            "get",
            "--subject",
            &image.reference,
            "--filter-artifact-type",
            NFD_ARTIFACT,
        ])
        .await
        .unwrap();
    assert_eq!(fetched, spec);
    // distribution has no referrers API: regctl falls back to the digest tag.
    let fallback_tag = image.digest.replace(':', "-");
    let tags = registry
        .crane(["ls", &registry.reference("app")])
        .await
        .unwrap();
    assert!(tags.lines().any(|t| t == fallback_tag), "{tags}");
}

#[tokio::test]
async fn multi_platform_index_lists_each_platforms_image() {
    let registry = Registry::builder().start().await.unwrap();

    let index = registry
        .push_multi_platform("app", "v1", &["linux/amd64", "linux/arm64"])
        .await
        .unwrap();

    let manifest = manifest(&registry, &index.by_digest()).await;
    let entries = manifest["manifests"].as_array().unwrap();
    let platforms: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| {
            let p = &e["platform"];
            (
                p["os"].as_str().unwrap(),
                p["architecture"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(platforms, [("linux", "amd64"), ("linux", "arm64")]);
    let arm = format!("app@{}", entries[1]["digest"].as_str().unwrap());
    let config: Value = serde_json::from_str(
        &registry
            .crane(["config", &registry.reference(&arm)])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(config["architecture"], "arm64");
}

#[tokio::test]
async fn index_with_attestation_has_an_unknown_platform_entry_pointing_at_an_image() {
    let registry = Registry::builder().start().await.unwrap();

    let index = registry
        .push_index_with_attestation("app", "v1", &["linux/amd64", "linux/arm64"])
        .await
        .unwrap();

    let manifest = manifest(&registry, &index.reference).await;
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let entries = manifest["manifests"].as_array().unwrap();
    assert_eq!(entries.len(), 3);
    let attestation = &entries[2];
    assert_eq!(attestation["platform"]["os"], "unknown");
    assert_eq!(attestation["platform"]["architecture"], "unknown");
    assert_eq!(
        attestation["annotations"]["vnd.docker.reference.type"],
        "attestation-manifest"
    );
    assert_eq!(
        attestation["annotations"]["vnd.docker.reference.digest"],
        entries[0]["digest"]
    );
}

#[tokio::test]
async fn registry_with_basic_auth_refuses_anonymous_requests_and_serves_the_kits_clients() {
    let registry = Registry::builder()
        .with_basic_auth("ocifit", "s3cret")
        .start()
        .await
        .unwrap();
    let mut anonymous = TcpStream::connect(registry.addr()).unwrap();
    write!(
        anonymous,
        "GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n",
        registry.addr()
    )
    .unwrap();
    let mut answer = String::new();
    anonymous.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.0 401"), "{answer}");

    let image = registry
        .push_image("private/app", "v1", "linux/amd64")
        .await
        .unwrap();
    let file = write_file(&registry, "compat.json", "{}");
    let reference = registry.reference("private/compat:v1");
    registry
        .push_artifact(&OrasArtifact::new(&reference, &file, COMPAT_LAYER))
        .await
        .unwrap();

    assert_eq!(
        registry
            .crane(["digest", &image.reference])
            .await
            .unwrap()
            .trim(),
        image.digest
    );
    assert_eq!(
        manifest(&registry, &reference).await["layers"][0]["mediaType"],
        COMPAT_LAYER
    );
}
