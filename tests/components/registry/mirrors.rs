//! Registry mirrors (`--registry-mirrors-dir`, containerd's `hosts.toml`) against two real
//! registries: the upstream a reference names unreachable (a closed port) and a mirror serving
//! its images, read by each feature's own entry point (placement's inspector, image selection's
//! source, a managed policy's anonymous client); a mirror that is down falls back as containerd
//! does; the mirror gets its own credentials; and a pod naming a host is fenced as without
//! mirrors.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::path::Path;
use std::time::Duration;

use ocifit::image_selection::PlatformLookup;
use ocifit::image_selection::{RegistrySource, Request, Source, Wanted};
use ocifit::registry::{
    DockerConfig, ErrorKind, Inspector, InspectorOptions, Lookup, Mirrors, PrivateRegistries,
    Registry, RegistryOptions, RetryPolicy, parse_reference,
};
use ocifit_testkit::{OrasArtifact, Registry as TestRegistry};

/// A loopback port nothing listens on.
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    addr
}

/// Writes `DIR/<registry as containerd names its directory>/hosts.toml` and reads the directory
/// as `ocifit run --registry-mirrors-dir` does.
fn mirrors(dir: &Path, registry: &str, hosts_toml: &str) -> Mirrors {
    let namespace =
        dir.join(registry.replace(':', "_") + if registry.contains(':') { "_" } else { "" });
    std::fs::create_dir_all(&namespace).unwrap();
    std::fs::write(namespace.join("hosts.toml"), hosts_toml).unwrap();
    Mirrors::load(dir).unwrap()
}

/// Options with `mirrors`, plain HTTP and loopback allowed for `registries` only; few retries so
/// a down host is left quickly.
fn options(mirrors: Mirrors, registries: &[&str]) -> RegistryOptions {
    RegistryOptions {
        plain_http: registries.iter().map(ToString::to_string).collect(),
        private: PrivateRegistries::parse(registries).unwrap(),
        mirrors,
        retry: RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        },
        ..RegistryOptions::default()
    }
}

fn access_log(registry: &TestRegistry) -> String {
    std::fs::read_to_string(registry.dir().join("registry.log")).unwrap()
}

fn names(platforms: &[ocifit::registry::Platform]) -> Vec<String> {
    let mut names: Vec<String> = platforms.iter().map(ToString::to_string).collect();
    names.sort();
    names
}

const PLATFORMS: [&str; 2] = ["linux/amd64", "linux/arm64/v8"];

async fn inspect(options: RegistryOptions, image: &str) -> Vec<String> {
    let inspector = Inspector::new(InspectorOptions {
        registry: options,
        ..InspectorOptions::default()
    });
    let image = parse_reference(image).unwrap();
    let facts = inspector
        .inspect(Lookup {
            image: &image,
            max_tag_age: Duration::ZERO,
            credentials: &[],
            namespace: "default",
        })
        .await
        .unwrap();
    names(&facts.platforms)
}

/// An ocifit artifact whose one set's image is `image`.
fn artifact_naming(dir: &Path, image: &str) -> std::path::PathBuf {
    let content = format!(
        r#"{{"version":"v1alpha1","compatibilities":[{{"tag":"{image}","rules":[{{"matchFeatures":[{{"matchExpressions":[{{"key":"feature.node.ocifit-k8s.flavor","op":"In","value":["vanilla"]}}]}}]}}]}}]}}"#
    );
    let path = dir.join("compat.json");
    std::fs::write(&path, content).unwrap();
    path
}

/// What image selection read of `artifact` (a managed policy's anonymous client when
/// `managed`): the platforms of its images.
async fn selection_platforms(
    options: RegistryOptions,
    artifact: &str,
    managed: bool,
) -> Vec<(String, Vec<String>)> {
    let source = RegistrySource::new(options).unwrap();
    let fetched = source
        .fetch(&Request {
            wanted: Wanted::Reference(artifact.to_owned()),
            pull_secret: None,
            managed,
        })
        .await
        .unwrap_or_else(|failure| panic!("{artifact}: {failure:?}"));
    fetched
        .platforms
        .into_iter()
        .map(|(image, lookup)| match lookup {
            PlatformLookup::Known(platforms) => (image, names(&platforms)),
            other => panic!("{image}: {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn with_the_upstream_unreachable_every_feature_reads_the_image_through_the_mirror() {
    let upstream = closed_port();
    let mirror = TestRegistry::builder().start().await.unwrap();
    mirror
        .push_multi_platform("shop/web", "v1", &PLATFORMS)
        .await
        .unwrap();
    let image = format!("{upstream}/shop/web:v1");
    let dir = tempfile::tempdir().unwrap();
    artifact_naming(mirror.dir(), &image);
    mirror
        .push_artifact(&OrasArtifact::new(
            &mirror.reference("acme/compat:v1"),
            &mirror.dir().join("compat.json"),
            ocifit::engine::OCIFIT_LAYER_MEDIA_TYPE,
        ))
        .await
        .unwrap();
    let hosts = format!(
        "[host.\"http://{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
        mirror.addr()
    );
    let mirrors = mirrors(dir.path(), &upstream, &hosts);
    // The upstream is not even allowed: only the mirror is reached.
    let options = options(mirrors, &[]);

    assert_eq!(
        inspect(options.clone(), &image).await,
        PLATFORMS,
        "placement"
    );
    let artifact = format!("{upstream}/acme/compat:v1");
    for managed in [false, true] {
        assert_eq!(
            selection_platforms(options.clone(), &artifact, managed).await,
            [(image.clone(), PLATFORMS.map(String::from).to_vec())],
            "image selection, managed: {managed}"
        );
    }
    // As containerd does, the mirror is told which registry it stands in for.
    let ns = format!("?ns={}", upstream.replace(':', "%3A"));
    let log = access_log(&mirror);
    assert!(
        log.contains(&format!("\"HEAD /v2/shop/web/manifests/v1{ns}")),
        "{log}"
    );
}

#[tokio::test]
async fn a_mirror_that_is_down_falls_back_in_order_and_only_resolving_hosts_resolve_tags() {
    let down = closed_port();
    let upstream = TestRegistry::builder().start().await.unwrap();
    let pull_only = TestRegistry::builder().start().await.unwrap();
    for registry in [&upstream, &pull_only] {
        registry
            .push_multi_platform("shop/web", "v1", &PLATFORMS)
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let hosts = format!(
        "[host.\"http://{down}\"]\n  capabilities = [\"pull\", \"resolve\"]\n\
         [host.\"http://{}\"]\n  capabilities = [\"pull\"]\n",
        pull_only.addr()
    );
    let mirrors = mirrors(dir.path(), upstream.addr(), &hosts);
    let image = upstream.reference("shop/web:v1");
    // The pushes are in the logs: only what follows is the inspection's.
    let (upstream_from, mirror_from) = (access_log(&upstream).len(), access_log(&pull_only).len());

    assert_eq!(
        inspect(options(mirrors, &[upstream.addr()]), &image).await,
        PLATFORMS
    );
    // The tag: the down mirror, then (the pull-only mirror may not resolve) the upstream.
    let upstream_log = access_log(&upstream)[upstream_from..].to_owned();
    assert!(
        upstream_log.contains("\"HEAD /v2/shop/web/manifests/v1 HTTP/1.1\""),
        "{upstream_log}"
    );
    assert!(
        !upstream_log.contains("/manifests/sha256:") && !upstream_log.contains("/blobs/"),
        "content by digest came from the pull-only mirror: {upstream_log}"
    );
    let mirror_log = access_log(&pull_only)[mirror_from..].to_owned();
    assert!(
        !mirror_log.contains("/manifests/v1"),
        "a pull-only mirror never resolves a tag: {mirror_log}"
    );
    assert!(mirror_log.contains("/manifests/sha256:"), "{mirror_log}");
}

#[tokio::test]
async fn the_mirror_is_sent_its_own_hosts_credentials_never_the_upstreams() {
    let upstream = closed_port();
    let mirror = TestRegistry::builder()
        .with_basic_auth("mirror-user", "mirror-pass")
        .start()
        .await
        .unwrap();
    mirror
        .push_multi_platform("shop/web", "v1", &PLATFORMS)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hosts = format!("[host.\"http://{}\"]\n", mirror.addr());
    let mirrors = mirrors(dir.path(), &upstream, &hosts);
    let image = parse_reference(&format!("{upstream}/shop/web:v1")).unwrap();
    let client = |auths: String| {
        Registry::new(RegistryOptions {
            credentials: DockerConfig::from_json(format!("{{\"auths\":{{{auths}}}}}").as_bytes())
                .unwrap(),
            ..options(mirrors.clone(), &[])
        })
        .unwrap()
    };
    let upstreams =
        format!("\"{upstream}\":{{\"username\":\"mirror-user\",\"password\":\"wrong\"}}");
    let mirrors_own = format!(
        "\"{}\":{{\"username\":\"mirror-user\",\"password\":\"mirror-pass\"}}",
        mirror.addr()
    );

    let both = client(format!("{upstreams},{mirrors_own}"));
    let found = both.image_platforms(&image).await.unwrap();
    assert_eq!(names(&found.platforms), PLATFORMS);
    let only_upstreams = client(upstreams);
    let err = only_upstreams.image_platforms(&image).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthorized, "{err}");
}

#[tokio::test]
async fn a_pod_cannot_reach_an_internal_host_it_names_through_the_mirror_config() {
    let mirror = TestRegistry::builder().start().await.unwrap();
    mirror
        .push_multi_platform("shop/web", "v1", &PLATFORMS)
        .await
        .unwrap();
    let internal = TestRegistry::builder().start().await.unwrap();
    internal
        .push_multi_platform("secret/app", "v1", &PLATFORMS)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hosts = format!("[host.\"http://{}\"]\n", mirror.addr());
    let options = options(mirrors(dir.path(), "_default", &hosts), &[]);
    let client = Registry::new(options).unwrap();
    let before = access_log(&internal).len();

    // The mirror has no such image; the fallback to the registry the pod named is fenced.
    let named = parse_reference(&internal.reference("secret/app:v1")).unwrap();
    let err = client.image_platforms(&named).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotAllowed, "{err}");
    let after = access_log(&internal);
    assert!(
        !after[before..].contains("/v2/secret/app"),
        "nothing reached it: {after}"
    );
    // The mirror's own host is admitted as a mirror only, not as a registry a pod names.
    let at_mirror = parse_reference(&mirror.reference("shop/web:v1")).unwrap();
    let err = client.image_platforms(&at_mirror).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotAllowed, "{err}");
}
