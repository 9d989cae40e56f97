//! Registry client behaviour that the real registry here cannot produce: the native referrers
//! API, the bearer-token flow, 429 and 5xx answers, a registry that never answers, and content
//! that does not match its digest. Served by a small in-process fake.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::assert_flavor_example;
use super::fake_server::*;
use ocifit::engine::Format;
use ocifit::registry::{
    CacheOptions, ContentProblem, DockerConfig, Error, ErrorKind, PrivateRegistries, Reference,
    Registry, RegistryOptions, ResolveError, RetryPolicy, parse_reference,
};

fn options(host: &str) -> RegistryOptions {
    RegistryOptions {
        plain_http: vec![host.to_string()],
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(5),
        },
        request_timeout: Duration::from_secs(5),
        // The fake is on loopback.
        private: PrivateRegistries::parse(&[host]).unwrap(),
        ..RegistryOptions::default()
    }
}

fn client(host: &str) -> Registry {
    Registry::new(options(host)).unwrap()
}

fn store_with_artifact(content: &[u8]) -> (Store, String) {
    let mut store = Store::default();
    let d = store.artifact(
        Some("v1"),
        None,
        OCIFIT_LAYER,
        content,
        serde_json::json!({}),
    );
    (store, d)
}

#[tokio::test]
async fn native_referrers_api_finds_the_newest_nfd_artifact() {
    let mut store = Store::default();
    let image = store.image("app");
    let old = store.nfd(b"version: v1alpha1 # old");
    let new = store.nfd(b"version: v1alpha1 # new");
    let entry = |d: &str, t: &str, created: &str| {
        serde_json::json!({
        "mediaType": OCI_MANIFEST, "digest": d, "size": 1, "artifactType": t,
        "annotations": {"org.opencontainers.image.created": created}})
    };
    let index = serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        entry(&old, NFD_ARTIFACT, "2026-01-01T00:00:00Z"),
        entry(&new, NFD_ARTIFACT, "2026-06-01T00:00:00Z"),
        entry(&old, "application/vnd.dev.cosign.artifact.sig.v1+json", "2027-01-01T00:00:00Z"),
    ]});
    let referrers_path = format!("/v2/acme/app/referrers/{image}?artifactType={NFD_ARTIFACT}");
    let path = referrers_path.clone();
    let fake = FakeRegistry::start(move |r| {
        if r.path == path {
            FakeResponse::ok(OCI_INDEX, serde_json::to_vec(&index).unwrap())
        } else {
            store.serve(r)
        }
    })
    .await;
    let registry = client(&fake.host);
    let found = registry
        .find_nfd_artifact(&parse_reference(&format!("{}/acme/app:app", fake.host)).unwrap())
        .await
        .unwrap();
    assert_eq!(found.digest, new);
    assert_eq!(found.format, Format::Nfd);
    assert_eq!(found.content, b"version: v1alpha1 # new");
    assert_eq!(fake.count("GET", &referrers_path), 1);
    let fallback_tag = format!("/v2/acme/app/manifests/{}", image.replace(':', "-"));
    assert_eq!(
        fake.count("HEAD", &fallback_tag) + fake.count("GET", &fallback_tag),
        0
    );
}

#[tokio::test]
async fn image_without_nfd_referrers_is_not_found_naming_the_image() {
    let mut store = Store::default();
    let image = store.image("app");
    let fake = FakeRegistry::start(move |r| {
        if r.path.contains("/referrers/") {
            FakeResponse::ok(OCI_INDEX, br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#.to_vec())
        } else {
            store.serve(r)
        }
    })
    .await;
    let err = client(&fake.host)
        .find_nfd_artifact(&parse_reference(&format!("{}/acme/app:app", fake.host)).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(
        err.to_string()
            .contains(&format!("{}/acme/app@{image}", fake.host)),
        "{err}"
    );
}

/// A registry that serves `store` to requests bearing `Bearer {token}`, answers its token
/// endpoint (`/token`, any query) with `grant`, and challenges every other request with a realm on
/// itself (`params` following the realm in the challenge).
async fn bearer_registry(
    store: Store,
    token: &'static str,
    params: &'static str,
    grant: impl Fn(&FakeRequest) -> FakeResponse + Send + Sync + 'static,
) -> FakeRegistry {
    let realm_host: Arc<Mutex<String>> = Arc::default();
    let realm = Arc::clone(&realm_host);
    let fake = FakeRegistry::start(move |r| {
        if r.path.split('?').next() == Some("/token") {
            return grant(r);
        }
        if r.header("authorization") == Some(&format!("Bearer {token}")) {
            return store.serve(r);
        }
        let challenge = format!(
            r#"Bearer realm="http://{}/token",{params}"#,
            realm.lock().unwrap()
        );
        FakeResponse::status(401).header("WWW-Authenticate", &challenge)
    })
    .await;
    *realm_host.lock().unwrap() = fake.host.clone();
    fake
}

/// A token endpoint's answer: `body` when the request is `granted`, else 401.
fn grant(granted: bool, body: &[u8]) -> FakeResponse {
    if granted {
        FakeResponse::ok("application/json", body.to_vec())
    } else {
        FakeResponse::status(401)
    }
}

/// A client of `fake` with `credentials`, tags never cached (each fetch asks the registry), and
/// the reference of the artifact `store_with_artifact` tags.
fn signed_in(fake: &FakeRegistry, credentials: DockerConfig) -> (Registry, Reference) {
    let mut opts = options(&fake.host);
    opts.credentials = credentials;
    opts.cache.tag_ttl = Duration::ZERO;
    let reference = parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap();
    (Registry::new(opts).unwrap(), reference)
}

/// A registry that wants a bearer token from its token endpoint, which wants Basic credentials.
async fn token_registry(store: Store, token_requests: Arc<AtomicUsize>) -> FakeRegistry {
    let params = r#"service="fake-registry",scope="repository:acme/compat:pull""#;
    bearer_registry(store, "good-token", params, move |r| {
        token_requests.fetch_add(1, Ordering::SeqCst);
        // base64("alice:wonderland")
        let granted = r.header("authorization") == Some("Basic YWxpY2U6d29uZGVybGFuZA==")
            && r.path.contains("scope=repository%3Aacme%2Fcompat%3Apull");
        grant(granted, br#"{"token":"good-token","expires_in":300}"#)
    })
    .await
}

#[tokio::test]
async fn bearer_token_flow_fetches_with_credentials_and_reuses_the_token() {
    let (store, digest) = store_with_artifact(br#"{"version":"v1alpha1","compatibilities":[]}"#);
    let tokens = Arc::new(AtomicUsize::new(0));
    let fake = token_registry(store, Arc::clone(&tokens)).await;
    let (registry, reference) = signed_in(&fake, docker_config(&fake.host, "alice", "wonderland"));
    let first = registry.fetch_artifact(&reference).await.unwrap();
    assert_eq!(
        (first.digest.as_str(), first.format),
        (digest.as_str(), Format::Ocifit)
    );
    let second = registry.fetch_artifact(&reference).await.unwrap();
    assert_eq!(second.digest, digest);
    assert_eq!(
        tokens.load(Ordering::SeqCst),
        1,
        "the token is fetched once and reused"
    );
}

/// A registry whose token endpoint takes only the OAuth2 refresh-token grant (`POST`), as a
/// registry that handed out a docker `identitytoken` does.
async fn oauth_registry(store: Store, grants: Arc<Mutex<Vec<String>>>) -> FakeRegistry {
    bearer_registry(
        store,
        "oauth-token",
        r#"service="fake-registry""#,
        move |r| {
            let form = String::from_utf8_lossy(&r.body).into_owned();
            grants.lock().unwrap().push(format!("{} {form}", r.method));
            let wanted = [
                "grant_type=refresh_token",
                "refresh_token=refresh-me",
                "client_id=ocifit",
            ];
            let granted =
                r.method == "POST" && wanted.iter().all(|w| form.split('&').any(|p| p == *w));
            grant(
                granted,
                br#"{"access_token":"oauth-token","expires_in":300}"#,
            )
        },
    )
    .await
}

#[tokio::test]
async fn a_docker_config_identity_token_is_exchanged_with_the_refresh_token_grant() {
    let (store, digest) = store_with_artifact(br#"{"version":"v1alpha1","compatibilities":[]}"#);
    let grants: Arc<Mutex<Vec<String>>> = Arc::default();
    let fake = oauth_registry(store, Arc::clone(&grants)).await;
    // As `docker login` writes it into config.json and a pull secret carries it.
    let config = format!(
        r#"{{"auths":{{"{}":{{"auth":"PHRva2VuPjo=","identitytoken":"refresh-me"}}}}}}"#,
        fake.host
    );
    let (registry, reference) =
        signed_in(&fake, DockerConfig::from_json(config.as_bytes()).unwrap());
    let fetched = registry.fetch_artifact(&reference).await.unwrap();
    assert_eq!(fetched.digest, digest);
    let grants = grants.lock().unwrap().clone();
    assert_eq!(grants.len(), 1, "{grants:?}");
    assert!(grants[0].starts_with("POST "), "{grants:?}");
    assert!(
        grants[0].contains("scope=repository%3Aacme%2Fcompat%3Apull")
            && grants[0].contains("service=fake-registry"),
        "{grants:?}"
    );
}

#[tokio::test]
async fn bearer_registry_without_or_with_wrong_credentials_is_unauthorized_without_leaking() {
    let (store, _) = store_with_artifact(b"{}");
    let fake = token_registry(store, Arc::default()).await;
    let reference = parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap();
    let anonymous = client(&fake.host)
        .fetch_artifact(&reference)
        .await
        .unwrap_err();
    assert_eq!(anonymous.kind(), ErrorKind::Unauthorized);
    assert!(
        anonymous
            .to_string()
            .contains(&format!("{}/acme/compat:v1", fake.host)),
        "{anonymous}"
    );

    let mut opts = options(&fake.host);
    opts.credentials = docker_config(&fake.host, "alice", "not-the-password");
    let wrong = Registry::new(opts)
        .unwrap()
        .fetch_artifact(&reference)
        .await
        .unwrap_err();
    assert_eq!(wrong.kind(), ErrorKind::Unauthorized);
    let text = format!("{wrong} {wrong:?}");
    assert!(!text.contains("not-the-password"), "{text}");
}

/// A registry that answers its first `failures` requests with `failure`, then serves `store`.
async fn recovering(store: Store, failures: usize, failure: fn() -> FakeResponse) -> FakeRegistry {
    let seen = AtomicUsize::new(0);
    FakeRegistry::start(move |r| {
        if seen.fetch_add(1, Ordering::SeqCst) < failures {
            return failure();
        }
        store.serve(r)
    })
    .await
}

#[tokio::test]
async fn rate_limit_is_retried_after_the_retry_after_delay() {
    let (store, digest) = store_with_artifact(b"{}");
    let fake = recovering(store, 1, || {
        FakeResponse::status(429).header("Retry-After", "1")
    })
    .await;
    let started = Instant::now();
    let found = client(&fake.host)
        .fetch_artifact(&parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap())
        .await
        .unwrap();
    assert_eq!(found.digest, digest);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn long_retry_after_fails_at_once_as_rate_limited_with_the_delay() {
    let fake =
        FakeRegistry::start(|_| FakeResponse::status(429).header("Retry-After", "3600")).await;
    let started = Instant::now();
    let err = client(&fake.host)
        .resolve_digest(&parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap())
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        matches!(err, Error::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(3600)),
        "{err}"
    );
    assert_eq!(fake.total(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_until_the_registry_recovers() {
    let (store, digest) = store_with_artifact(b"{}");
    let fake = recovering(store, 2, || FakeResponse::status(503)).await;
    let reference = parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap();
    assert_eq!(
        client(&fake.host).resolve_digest(&reference).await.unwrap(),
        digest
    );
    assert_eq!(fake.total(), 3);
}

#[tokio::test]
async fn persistent_server_errors_give_up_after_the_attempt_limit_and_are_not_cached() {
    let (store, digest) = store_with_artifact(b"{}");
    let healthy = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&healthy);
    let fake = FakeRegistry::start(move |r| {
        if flag.load(Ordering::SeqCst) {
            store.serve(r)
        } else {
            FakeResponse::status(500)
        }
    })
    .await;
    let registry = client(&fake.host);
    let reference = parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap();
    let err = registry.resolve_digest(&reference).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transport);
    assert!(err.to_string().contains("HTTP 500"), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("{}/acme/compat:v1", fake.host)),
        "{err}"
    );
    assert_eq!(fake.total(), 3);
    healthy.store(true, Ordering::SeqCst);
    assert_eq!(registry.resolve_digest(&reference).await.unwrap(), digest);
}

#[tokio::test]
async fn missing_tag_is_not_retried_and_is_remembered_briefly() {
    let fake = FakeRegistry::start(|_| not_found("MANIFEST_UNKNOWN")).await;
    let mut opts = options(&fake.host);
    opts.cache = CacheOptions {
        not_found_ttl: Duration::from_millis(300),
        ..CacheOptions::default()
    };
    let registry = Registry::new(opts).unwrap();
    let reference = parse_reference(&format!("{}/acme/compat:nope", fake.host)).unwrap();
    for _ in 0..3 {
        let err = registry.resolve_digest(&reference).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
    }
    assert_eq!(fake.total(), 1);
    tokio::time::sleep(Duration::from_millis(400)).await;
    registry.resolve_digest(&reference).await.unwrap_err();
    assert_eq!(fake.total(), 2);
}

#[tokio::test]
async fn registry_that_never_answers_times_out_on_every_attempt() {
    let fake = FakeRegistry::silent().await;
    let mut opts = options(&fake.host);
    opts.request_timeout = Duration::from_millis(200);
    opts.retry.max_attempts = 2;
    let started = Instant::now();
    let err = Registry::new(opts)
        .unwrap()
        .resolve_digest(&parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap())
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::Transport);
    assert!(err.to_string().contains("timed out"), "{err}");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[tokio::test]
async fn blob_that_does_not_match_its_digest_is_rejected() {
    let (mut store, _) = store_with_artifact(b"the real content");
    for body in store.blobs.values_mut() {
        if body.as_slice() == b"the real content" {
            *body = b"tampered content".to_vec();
        }
    }
    let fake = FakeRegistry::start(move |r| store.serve(r)).await;
    let err = client(&fake.host)
        .fetch_artifact(&parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidContent { problem, .. } if matches!(**problem, ContentProblem::DigestMismatch { .. })),
        "{err}"
    );
}

#[tokio::test]
async fn layer_larger_than_the_cap_is_refused_even_when_its_descriptor_lies() {
    let big = vec![b'x'; 4096];
    let mut store = Store::default();
    store.artifact(
        Some("honest"),
        None,
        OCIFIT_LAYER,
        &big,
        serde_json::json!({}),
    );
    // The same blob, declared as 10 bytes.
    let lying = serde_json::json!({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest(b"{}"), "size": 2},
        "layers": [{"mediaType": OCIFIT_LAYER, "digest": digest(&big), "size": 10}]});
    store.manifest(
        Some("lying"),
        OCI_MANIFEST,
        serde_json::to_vec(&lying).unwrap(),
    );
    let fake = FakeRegistry::start(move |r| store.serve(r)).await;
    let mut opts = options(&fake.host);
    opts.max_artifact_bytes = 1024;
    let registry = Registry::new(opts).unwrap();
    let blob_path = format!("/v2/acme/compat/blobs/{}", digest(&big));
    for tag in ["honest", "lying"] {
        let err = registry
            .fetch_artifact(&parse_reference(&format!("{}/acme/compat:{tag}", fake.host)).unwrap())
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("larger than the 1024-byte limit"),
            "{tag}: {err}"
        );
    }
    assert_eq!(
        fake.count("GET", &blob_path),
        1,
        "the honest descriptor is refused before download"
    );
}

#[tokio::test]
async fn concurrent_lookups_share_one_request_and_a_caller_giving_up_stalls_no_one() {
    let (store, digest) = store_with_artifact(b"{}");
    let fake = FakeRegistry::start(move |r| {
        let mut response = store.serve(r);
        response.delay = Duration::from_millis(300);
        response
    })
    .await;
    let registry = client(&fake.host);
    let reference = parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap();
    let impatient = tokio::time::timeout(
        Duration::from_millis(50),
        registry.fetch_artifact(&reference),
    )
    .await;
    assert!(impatient.is_err(), "the impatient caller gives up");
    let lookups = (0..16).map(|_| {
        let registry = registry.clone();
        let reference = reference.clone();
        tokio::spawn(async move { registry.fetch_artifact(&reference).await })
    });
    for lookup in lookups.collect::<Vec<_>>() {
        assert_eq!(lookup.await.unwrap().unwrap().digest, digest);
    }
    assert_eq!(fake.count("HEAD", "/v2/acme/compat/manifests/v1"), 1);
    assert_eq!(
        fake.count("GET", &format!("/v2/acme/compat/manifests/{digest}")),
        1
    );
    assert_eq!(fake.total(), 3, "tag, manifest and layer: one request each");
    let stats = registry.stats();
    assert_eq!(stats.requests, 3);
    assert_eq!(stats.tags.misses, 1);
    assert!(stats.tags.hits >= 15, "{stats:?}");
}

#[tokio::test]
async fn registry_not_named_for_plain_http_is_never_reached_over_http() {
    let (store, _) = store_with_artifact(b"{}");
    let fake = FakeRegistry::start(move |r| store.serve(r)).await;
    let mut opts = options(&fake.host);
    opts.plain_http = vec!["127.0.0.1:1".into(), format!("{}.example", fake.host)];
    opts.request_timeout = Duration::from_millis(500);
    opts.retry.max_attempts = 1;
    let err = Registry::new(opts)
        .unwrap()
        .resolve_digest(&parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transport, "{err}");
    let plain = fake
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.method == "HEAD" || r.method == "GET")
        .count();
    assert_eq!(plain, 0, "no plain-HTTP request reached the registry");
}

#[tokio::test]
async fn resolved_artifact_is_parsed_in_the_format_its_media_type_names() {
    let example = std::fs::read("example/flavor-compat.json").unwrap();
    let (store, digest) = store_with_artifact(&example);
    let fake = FakeRegistry::start(move |r| store.serve(r)).await;
    let resolved = client(&fake.host)
        .resolve_artifact(&parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap())
        .await
        .unwrap();
    assert_flavor_example(&resolved, &digest);
}

#[tokio::test]
async fn artifact_that_fails_to_parse_is_invalid_content_naming_reference_and_digest() {
    // NFD YAML under the ocifit media type: dispatch is by media type, so this is an ocifit
    // artifact that is not JSON.
    let example = std::fs::read("example/nfd-compat.yaml").unwrap();
    let (store, digest) = store_with_artifact(&example);
    let fake = FakeRegistry::start(move |r| store.serve(r)).await;
    let reference = format!("{}/acme/compat:v1", fake.host);
    let err = client(&fake.host)
        .resolve_artifact(&parse_reference(&reference).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidContent);
    assert!(
        matches!(
            &err,
            ResolveError::Artifact {
                format: Format::Ocifit,
                ..
            }
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&reference) && text.contains(&digest),
        "{text}"
    );
    assert!(std::error::Error::source(&err).is_some());
}

#[tokio::test]
async fn unreachable_registry_is_a_transport_error_saying_why() {
    let host = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let mut opts = options(&host);
    opts.retry.max_attempts = 2;
    let err = Registry::new(opts)
        .unwrap()
        .resolve_digest(&parse_reference(&format!("{host}/acme/compat:v1")).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transport);
    let text = err.to_string();
    assert!(
        text.contains("failed to connect") && text.contains("refused"),
        "{text}"
    );
    assert!(text.contains(&format!("{host}/acme/compat:v1")), "{text}");
}

#[tokio::test]
async fn index_entry_with_a_malformed_digest_is_refused_without_a_request_for_it() {
    let mut store = Store::default();
    let index = serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": "sha256:../../../v2/_catalog", "size": 1}]});
    store.manifest(Some("v1"), OCI_INDEX, serde_json::to_vec(&index).unwrap());
    let fake = FakeRegistry::start(move |r| store.serve(r)).await;
    let err = client(&fake.host)
        .image_platforms(&parse_reference(&format!("{}/acme/app:v1", fake.host)).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidContent { problem, .. } if matches!(**problem, ContentProblem::UnsupportedDigest(_))),
        "{err}"
    );
    assert!(
        fake.requests
            .lock()
            .unwrap()
            .iter()
            .all(|r| !r.path.contains(".."))
    );
}
