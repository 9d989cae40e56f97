//! The registry client against a real registry on loopback (distribution, started by the test
//! kit), with content pushed as users push it: ORAS Python SDK, regctl, crane.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use ocifit::engine::{Format, NFD_ARTIFACT_TYPE, NFD_LAYER_MEDIA_TYPE, OCIFIT_LAYER_MEDIA_TYPE};
use ocifit::registry::{
    CacheOptions, DockerConfig, ErrorKind, ImagePlatforms, Platform, PrivateRegistries, Registry,
    RegistryFlags, RegistryOptions, parse_reference,
};
use ocifit_testkit::{OrasArtifact, Registry as TestRegistry};

use super::assert_flavor_example;

const COMPAT: &str = r#"{"version":"v1alpha1","compatibilities":[{"tag":"debian:11","rules":[{"matchFeatures":[{"matchExpressions":[{"key":"feature.node.ocifit-k8s.flavor","op":"In","value":["vanilla"]}]}]}]}]}"#;
const NFD_SPEC: &str = "version: v1alpha1\ncompatibilities:\n- description: needs avx\n  rules:\n  - name: cpu\n    matchFeatures:\n    - feature: cpu.cpuid\n      matchName: {op: InRegexp, value: [\"^AVX\"]}\n";

async fn start() -> TestRegistry {
    TestRegistry::builder().start().await.unwrap()
}

fn options(registry: &TestRegistry) -> RegistryOptions {
    RegistryOptions {
        plain_http: vec![registry.addr().to_string()],
        // The test registry is on loopback.
        private: PrivateRegistries::parse(&[registry.addr()]).unwrap(),
        ..RegistryOptions::default()
    }
}

fn client(registry: &TestRegistry) -> Registry {
    Registry::new(options(registry)).unwrap()
}

fn file(registry: &TestRegistry, name: &str, content: &str) -> PathBuf {
    let path = registry.dir().join(name);
    std::fs::write(&path, content).unwrap();
    path
}

async fn push_compat(registry: &TestRegistry, reference: &str, content: &str) -> String {
    let path = file(registry, "compat.json", content);
    registry
        .push_artifact(&OrasArtifact::new(
            reference,
            &path,
            OCIFIT_LAYER_MEDIA_TYPE,
        ))
        .await
        .unwrap()
}

/// The registry's access log from `offset` on.
fn access_log(registry: &TestRegistry, offset: usize) -> String {
    let log = std::fs::read_to_string(registry.dir().join("registry.log")).unwrap();
    log.get(offset..).unwrap_or_default().to_string()
}

fn log_len(registry: &TestRegistry) -> usize {
    access_log(registry, 0).len()
}

/// How many `METHOD PATH` requests the registry logged.
fn requests(log: &str, method: &str, path: &str) -> usize {
    log.matches(&format!("\"{method} {path} HTTP/1.1\""))
        .count()
}

/// `COMPAT` pushed as `acme/compat:v1`: its reference and digest.
async fn compat_v1(registry: &TestRegistry) -> (String, String) {
    let reference = registry.reference("acme/compat:v1");
    let digest = push_compat(registry, &reference, COMPAT).await;
    (reference, digest)
}

/// An NFD artifact of `content` attached to `image` with regctl: its digest.
async fn attach_nfd(registry: &TestRegistry, image: &str, name: &str, content: &str) -> String {
    let spec = file(registry, name, content);
    registry
        .attach_artifact(image, NFD_ARTIFACT_TYPE, &spec, NFD_LAYER_MEDIA_TYPE)
        .await
        .unwrap()
}

/// The registry's access log since `offset`, once it has written what was asked.
async fn log_since(registry: &TestRegistry, offset: usize) -> String {
    tokio::time::sleep(Duration::from_millis(200)).await;
    access_log(registry, offset)
}

async fn platforms_of(registry: &TestRegistry, image: &str) -> ImagePlatforms {
    client(registry)
        .image_platforms(&parse_reference(image).unwrap())
        .await
        .unwrap()
}

/// A client with the credentials of a `.dockerconfigjson`.
fn with_credentials(registry: &TestRegistry, docker_config: &str) -> Registry {
    let mut opts = options(registry);
    opts.credentials = DockerConfig::from_json(docker_config.as_bytes()).unwrap();
    Registry::new(opts).unwrap()
}

#[tokio::test]
async fn oras_pushed_artifact_resolves_by_tag_by_digest_and_by_both() {
    let registry = start().await;
    let (reference, digest) = compat_v1(&registry).await;
    let client = client(&registry);
    let repository = registry.reference("acme/compat");
    for text in [
        reference.clone(),
        format!("{repository}@{digest}"),
        format!("{reference}@{digest}"),
    ] {
        let found = client
            .fetch_artifact(&parse_reference(&text).unwrap())
            .await
            .unwrap();
        assert_eq!(found.digest, digest, "{text}");
        assert_eq!(found.format, Format::Ocifit);
        assert_eq!(found.media_type, OCIFIT_LAYER_MEDIA_TYPE);
        assert_eq!(found.content, COMPAT.as_bytes());
    }
}

#[tokio::test]
async fn oras_pushed_example_artifact_resolves_and_parses() {
    let registry = start().await;
    let reference = registry.reference("acme/flavors:v1");
    let example = std::fs::read_to_string("example/flavor-compat.json").unwrap();
    let digest = push_compat(&registry, &reference, &example).await;
    let resolved = client(&registry)
        .resolve_artifact(&parse_reference(&reference).unwrap())
        .await
        .unwrap();
    assert_flavor_example(&resolved, &digest);
}

#[tokio::test]
async fn artifact_without_a_compatibility_layer_names_the_media_types_found() {
    let registry = start().await;
    let reference = registry.reference("acme/notes:v1");
    let path = file(&registry, "notes.txt", "hello");
    registry
        .push_artifact(&OrasArtifact::new(&reference, &path, "text/plain"))
        .await
        .unwrap();
    let err = client(&registry)
        .fetch_artifact(&parse_reference(&reference).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidContent);
    let text = err.to_string();
    assert!(
        text.contains("text/plain") && text.contains(&reference),
        "{text}"
    );
}

#[tokio::test]
async fn missing_tag_and_missing_repository_are_not_found() {
    let registry = start().await;
    compat_v1(&registry).await;
    let client = client(&registry);
    for missing in ["acme/compat:v2", "acme/nothing:v1"] {
        let reference = registry.reference(missing);
        let err = client
            .fetch_artifact(&parse_reference(&reference).unwrap())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        assert!(err.to_string().contains(&reference), "{err}");
    }
}

#[tokio::test]
async fn nfd_artifact_attached_with_regctl_is_found_through_the_referrers_tag() {
    let registry = start().await;
    let image = registry
        .push_image("acme/app", "v1", "linux/amd64")
        .await
        .unwrap();
    let attached = attach_nfd(&registry, &image.reference, "spec.yaml", NFD_SPEC).await;
    let before = log_len(&registry);
    let found = client(&registry)
        .find_nfd_artifact(&parse_reference(&image.reference).unwrap())
        .await
        .unwrap();
    assert_eq!(found.digest, attached);
    assert_eq!(found.format, Format::Nfd);
    assert_eq!(found.content, NFD_SPEC.as_bytes());
    let log = log_since(&registry, before).await;
    let referrers = format!(
        "/v2/acme/app/referrers/{}?artifactType={NFD_ARTIFACT_TYPE}",
        image.digest
    );
    assert_eq!(requests(&log, "GET", &referrers), 1, "{log}");
    let fallback = format!("/v2/acme/app/manifests/{}", image.digest.replace(':', "-"));
    assert_eq!(requests(&log, "HEAD", &fallback), 1, "{log}");
}

#[tokio::test]
async fn attached_example_nfd_artifact_resolves_and_parses() {
    let registry = start().await;
    let image = registry
        .push_multi_platform("acme/gpu", "v1", &["linux/amd64", "linux/arm64"])
        .await
        .unwrap();
    let example = std::fs::read_to_string("example/nfd-compat.yaml").unwrap();
    let attached = attach_nfd(&registry, &image.reference, "nfd.yaml", &example).await;
    let resolved = client(&registry)
        .resolve_nfd_artifact(&parse_reference(&image.by_digest()).unwrap())
        .await
        .unwrap();
    assert_eq!(
        (resolved.digest.as_str(), resolved.format),
        (attached.as_str(), Format::Nfd)
    );
    assert!(!resolved.artifact.sets().is_empty());
}

#[tokio::test]
async fn image_without_an_attached_artifact_has_none_to_find() {
    let registry = start().await;
    let image = registry
        .push_image("acme/plain", "v1", "linux/amd64")
        .await
        .unwrap();
    let err = client(&registry)
        .find_nfd_artifact(&parse_reference(&image.reference).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(
        err.to_string().contains("NFD compatibility artifact"),
        "{err}"
    );
}

fn platform(os: &str, architecture: &str, variant: Option<&str>) -> Platform {
    Platform {
        os: os.into(),
        architecture: architecture.into(),
        variant: variant.map(str::to_string),
        os_version: None,
    }
}

#[tokio::test]
async fn multi_platform_index_reports_every_platform() {
    let registry = start().await;
    let image = registry
        .push_multi_platform(
            "acme/multi",
            "v1",
            &["linux/amd64", "linux/arm64", "linux/arm/v7"],
        )
        .await
        .unwrap();
    let found = platforms_of(&registry, &image.reference).await;
    assert_eq!(found.digest, image.digest);
    assert_eq!(
        found.platforms,
        vec![
            platform("linux", "amd64", None),
            platform("linux", "arm64", None),
            platform("linux", "arm", Some("v7")),
        ]
    );
}

#[tokio::test]
async fn single_platform_image_reports_the_platform_from_its_config() {
    let registry = start().await;
    let image = registry
        .push_image("acme/single", "v1", "linux/arm64")
        .await
        .unwrap();
    let found = platforms_of(&registry, &image.reference).await;
    assert_eq!(found.platforms, vec![platform("linux", "arm64", None)]);
}

#[tokio::test]
async fn index_with_attestation_entries_leaves_them_out() {
    let registry = start().await;
    let image = registry
        .push_index_with_attestation("acme/attested", "v1", &["linux/amd64", "linux/arm64"])
        .await
        .unwrap();
    let found = platforms_of(&registry, &image.reference).await;
    assert_eq!(
        found.platforms,
        vec![
            platform("linux", "amd64", None),
            platform("linux", "arm64", None)
        ]
    );
}

#[tokio::test]
async fn repushed_tag_is_seen_after_the_tag_ttl_and_not_before() {
    let registry = start().await;
    let (reference, first) = compat_v1(&registry).await;
    let mut opts = options(&registry);
    opts.cache = CacheOptions {
        tag_ttl: Duration::from_secs(3),
        ..CacheOptions::default()
    };
    let client = Registry::new(opts).unwrap();
    let parsed = parse_reference(&reference).unwrap();
    assert_eq!(client.fetch_artifact(&parsed).await.unwrap().digest, first);

    let second = push_compat(
        &registry,
        &reference,
        &COMPAT.replace("debian:11", "debian:12"),
    )
    .await;
    assert_ne!(first, second);
    assert_eq!(
        client.fetch_artifact(&parsed).await.unwrap().digest,
        first,
        "within the TTL"
    );
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let after = client.fetch_artifact(&parsed).await.unwrap();
    assert_eq!(after.digest, second, "after the TTL");
    assert!(
        String::from_utf8(after.content)
            .unwrap()
            .contains("debian:12")
    );
}

#[tokio::test]
async fn concurrent_lookups_of_one_artifact_make_one_request_each_at_the_registry() {
    let registry = start().await;
    let (reference, digest) = compat_v1(&registry).await;
    let client = client(&registry);
    let parsed = parse_reference(&reference).unwrap();
    let before = log_len(&registry);
    let lookups: Vec<_> = (0..32)
        .map(|_| {
            let client = client.clone();
            let parsed = parsed.clone();
            tokio::spawn(async move { client.fetch_artifact(&parsed).await })
        })
        .collect();
    for lookup in lookups {
        assert_eq!(lookup.await.unwrap().unwrap().digest, digest);
    }
    let log = log_since(&registry, before).await;
    assert_eq!(
        requests(&log, "HEAD", "/v2/acme/compat/manifests/v1"),
        1,
        "{log}"
    );
    assert_eq!(
        requests(&log, "GET", &format!("/v2/acme/compat/manifests/{digest}")),
        1,
        "{log}"
    );
    let layer = format!("sha256:{}", sha256_hex(COMPAT.as_bytes()));
    assert_eq!(
        requests(&log, "GET", &format!("/v2/acme/compat/blobs/{layer}")),
        1,
        "{log}"
    );
    assert_eq!(log.matches(" HTTP/1.1\" ").count(), 3, "{log}");
    assert_eq!(client.stats().requests, 3);
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn basic_auth_registry_works_with_a_dockerconfigjson_and_fails_clearly_without() {
    let password = "s3cret-Pa55";
    let registry = TestRegistry::builder()
        .with_basic_auth("ocifit", password)
        .start()
        .await
        .unwrap();
    let reference = registry.reference("acme/private:v1");
    let digest = push_compat(&registry, &reference, COMPAT).await;
    let parsed = parse_reference(&reference).unwrap();

    let auth = base64::engine::general_purpose::STANDARD.encode(format!("ocifit:{password}"));
    let secret = format!(
        r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#,
        registry.addr()
    );
    let found = with_credentials(&registry, &secret)
        .fetch_artifact(&parsed)
        .await
        .unwrap();
    assert_eq!(found.digest, digest);

    // The same through the command line's flags.
    let config = file(&registry, "config.json", &secret);
    let flags = RegistryFlags {
        plain_http: true,
        docker_config: Some(config),
        ..RegistryFlags::default()
    };
    let via_flags = Registry::new(flags.options_for(&parsed).unwrap()).unwrap();
    assert_eq!(
        via_flags.fetch_artifact(&parsed).await.unwrap().digest,
        digest
    );

    let anonymous = client(&registry).fetch_artifact(&parsed).await.unwrap_err();
    assert_eq!(anonymous.kind(), ErrorKind::Unauthorized);
    assert!(anonymous.to_string().contains(&reference), "{anonymous}");

    let wrong = r#"{"auths":{"ADDR":{"username":"ocifit","password":"wrong-Pa55"}}}"#
        .replace("ADDR", registry.addr());
    let err = with_credentials(&registry, &wrong)
        .fetch_artifact(&parsed)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthorized);
    let text = format!("{err} {err:?}");
    assert!(
        !text.contains("wrong-Pa55") && !text.contains(password),
        "{text}"
    );
}
