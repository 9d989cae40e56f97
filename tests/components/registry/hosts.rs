//! Where the registry client goes and what it shares, against in-process fake registries (token
//! realms, redirects and Basic challenges are behaviour the real registry here cannot be made to
//! show): `--allowed-registries`, token realms and redirects that would leave the list or
//! downgrade to plain HTTP, credentials that never follow a redirect, a huge token lifetime, one
//! content cache scoped by credentials, the platforms last read kept for outages, and the bounds
//! on requests in flight and on index entries.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::fake_server::*;
use ocifit::registry::{
    AllowList, CacheOptions, ContentProblem, Error, ErrorKind, PrivateRegistries, Refusal,
    Registry, RegistryOptions, RetryPolicy, parse_reference,
};

fn options(plain_http: &[&str], allowed: &[&str]) -> RegistryOptions {
    RegistryOptions {
        plain_http: plain_http.iter().map(|h| h.to_string()).collect(),
        allowed: AllowList::parse(allowed).unwrap(),
        // Every fake is on loopback; these tests are about the other rules (`fence` is the
        // fence's).
        private: PrivateRegistries::parse(&["127.0.0.0/8"]).unwrap(),
        retry: RetryPolicy {
            max_attempts: 2,
            base_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(5),
        },
        request_timeout: Duration::from_secs(5),
        cache: CacheOptions {
            tag_ttl: Duration::ZERO,
            ..CacheOptions::default()
        },
        ..RegistryOptions::default()
    }
}

fn reference(host: &str, rest: &str) -> ocifit::registry::Reference {
    parse_reference(&format!("{host}/{rest}")).unwrap()
}

fn artifact_store() -> (Store, String) {
    let mut store = Store::default();
    let digest = store.artifact(Some("v1"), None, OCIFIT_LAYER, b"{}", serde_json::json!({}));
    (store, digest)
}

fn refusal(err: &Error) -> (String, Refusal) {
    match err {
        Error::NotAllowed { host, why, .. } => (host.clone(), *why),
        other => panic!("expected a refusal, got {other}"),
    }
}

#[tokio::test]
async fn a_registry_not_in_the_allowed_list_is_refused_before_any_request() {
    let (store, _) = artifact_store();
    let fake = FakeRegistry::start(move |r| store.serve(r)).await;
    let registry =
        Registry::new(options(&[&fake.host], &["127.0.0.1:1", "*.example.com"])).unwrap();
    let err = registry
        .fetch_artifact(&reference(&fake.host, "acme/compat:v1"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotAllowed);
    assert_eq!(refusal(&err), (fake.host.clone(), Refusal::Registry));
    assert!(err.to_string().contains(&fake.host), "{err}");
    assert_eq!(fake.total(), 0, "nothing was sent to the refused registry");

    let allowed = Registry::new(options(&[&fake.host], &[&fake.host])).unwrap();
    allowed
        .fetch_artifact(&reference(&fake.host, "acme/compat:v1"))
        .await
        .unwrap();
}

/// A registry that answers every request with a bearer challenge naming `realm`.
async fn challenging(realm: String) -> FakeRegistry {
    FakeRegistry::start(move |_| {
        FakeResponse::status(401).header("WWW-Authenticate", &format!(r#"Bearer realm="{realm}""#))
    })
    .await
}

#[tokio::test]
async fn a_plain_http_token_realm_on_another_host_gets_neither_request_nor_credentials() {
    let realm =
        FakeRegistry::start(|_| FakeResponse::ok("application/json", br#"{"token":"t"}"#.to_vec()))
            .await;
    let registry_fake = challenging(format!("http://{}/token", realm.host)).await;
    let mut opts = options(&[&registry_fake.host], &[]);
    opts.credentials = docker_config(&registry_fake.host, "alice", "wonderland");
    let err = Registry::new(opts)
        .unwrap()
        .resolve_digest(&reference(&registry_fake.host, "acme/compat:v1"))
        .await
        .unwrap_err();
    assert_eq!(refusal(&err), (realm.host.clone(), Refusal::RealmPlainHttp));
    assert_eq!(realm.total(), 0);
}

#[tokio::test]
async fn a_token_realm_on_a_host_not_in_the_allowed_list_is_refused() {
    let realm =
        FakeRegistry::start(|_| FakeResponse::ok("application/json", br#"{"token":"t"}"#.to_vec()))
            .await;
    let registry_fake = challenging(format!("http://{}/token", realm.host)).await;
    // Both plain HTTP, so only the list can refuse the realm.
    let opts = options(&[&registry_fake.host, &realm.host], &[&registry_fake.host]);
    let err = Registry::new(opts)
        .unwrap()
        .resolve_digest(&reference(&registry_fake.host, "acme/compat:v1"))
        .await
        .unwrap_err();
    assert_eq!(refusal(&err), (realm.host.clone(), Refusal::RealmHost));
    assert_eq!(realm.total(), 0);
}

#[tokio::test]
async fn a_huge_token_lifetime_neither_panics_nor_sticks_the_lookup() {
    let (store, digest) = artifact_store();
    let host: Arc<Mutex<String>> = Arc::default();
    let realm_host = Arc::clone(&host);
    let fake = FakeRegistry::start(move |r| {
        if r.path.starts_with("/token") {
            return FakeResponse::ok(
                "application/json",
                format!(r#"{{"token":"t","expires_in":{}}}"#, u64::MAX).into_bytes(),
            );
        }
        if r.header("authorization") == Some("Bearer t") {
            return store.serve(r);
        }
        let challenge = format!(
            r#"Bearer realm="http://{}/token""#,
            realm_host.lock().unwrap()
        );
        FakeResponse::status(401).header("WWW-Authenticate", &challenge)
    })
    .await;
    *host.lock().unwrap() = fake.host.clone();
    let registry = Registry::new(options(&[&fake.host], &[])).unwrap();
    let at = reference(&fake.host, "acme/compat:v1");
    for _ in 0..2 {
        assert_eq!(registry.resolve_digest(&at).await.unwrap(), digest);
    }
}

/// A registry whose blobs are redirected to `to` (a URL prefix), and which wants Basic.
async fn redirecting(store: Store, to: Arc<Mutex<String>>) -> FakeRegistry {
    FakeRegistry::start(move |r| {
        if r.header("authorization").is_none() {
            return FakeResponse::status(401).header("WWW-Authenticate", r#"Basic realm="r""#);
        }
        match r.path.split_once("/blobs/") {
            Some((_, digest)) => FakeResponse::status(307)
                .header("Location", &format!("{}/{digest}", to.lock().unwrap())),
            None => store.serve(r),
        }
    })
    .await
}

#[tokio::test]
async fn credentials_never_follow_a_redirect_to_another_allowed_host() {
    let (store, digest) = artifact_store();
    let blobs = store.clone();
    let cdn = FakeRegistry::start(move |r| {
        let digest = r.path.rsplit('/').next().unwrap_or_default();
        match blobs.blobs.get(digest) {
            Some(body) => FakeResponse::ok("application/octet-stream", body.clone()),
            None => not_found("BLOB_UNKNOWN"),
        }
    })
    .await;
    let to = Arc::new(Mutex::new(format!("http://{}/cdn", cdn.host)));
    let origin = redirecting(store, to).await;
    let mut opts = options(&[&origin.host, &cdn.host], &[&origin.host, &cdn.host]);
    opts.credentials = docker_config(&origin.host, "alice", "wonderland");
    let fetched = Registry::new(opts)
        .unwrap()
        .fetch_artifact(&reference(&origin.host, "acme/compat:v1"))
        .await
        .unwrap();
    assert_eq!(fetched.digest, digest);
    let at_cdn = cdn.requests.lock().unwrap().clone();
    assert!(!at_cdn.is_empty());
    assert!(
        at_cdn.iter().all(|r| r.header("authorization").is_none()),
        "{at_cdn:?}"
    );
}

#[tokio::test]
async fn a_redirect_off_the_list_or_to_a_host_not_plain_http_is_not_followed() {
    for (plain_cdn, expected) in [
        (true, Refusal::RedirectHost),
        (false, Refusal::RedirectPlainHttp),
    ] {
        let (store, _) = artifact_store();
        let cdn = FakeRegistry::start(|_| FakeResponse::status(200)).await;
        let to = Arc::new(Mutex::new(format!("http://{}/cdn", cdn.host)));
        let origin = redirecting(store, to).await;
        let plain: Vec<&str> = if plain_cdn {
            vec![&origin.host, &cdn.host]
        } else {
            vec![&origin.host]
        };
        let allowed: Vec<&str> = if plain_cdn {
            vec![&origin.host]
        } else {
            vec![]
        };
        let mut opts = options(&plain, &allowed);
        opts.credentials = docker_config(&origin.host, "alice", "wonderland");
        let err = Registry::new(opts)
            .unwrap()
            .fetch_artifact(&reference(&origin.host, "acme/compat:v1"))
            .await
            .unwrap_err();
        assert_eq!(refusal(&err), (cdn.host.clone(), expected), "{err}");
        assert_eq!(cdn.total(), 0);
    }
}

#[tokio::test]
async fn clients_with_other_credentials_share_the_cache_but_never_read_what_theirs_cannot() {
    let (store, digest) = artifact_store();
    let fake = FakeRegistry::start(move |r| {
        if r.header("authorization") == Some("Basic YWxpY2U6d29uZGVybGFuZA==") {
            store.serve(r)
        } else {
            FakeResponse::status(401).header("WWW-Authenticate", r#"Basic realm="r""#)
        }
    })
    .await;
    let anonymous = Registry::new(options(&[&fake.host], &[])).unwrap();
    let alice = anonymous.with_credentials(docker_config(&fake.host, "alice", "wonderland"));
    let pinned = reference(&fake.host, &format!("acme/compat@{digest}"));
    alice.fetch_artifact(&pinned).await.unwrap();
    let requests = fake.total();
    let err = anonymous.fetch_artifact(&pinned).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthorized, "{err}");
    let again = anonymous.with_credentials(docker_config(&fake.host, "alice", "wonderland"));
    again.fetch_artifact(&pinned).await.unwrap();
    assert_eq!(
        fake.total(),
        requests + 1,
        "only the anonymous attempt reached the registry; the same credentials read the cache"
    );
    assert_eq!(anonymous.stats().requests, alice.stats().requests);
}

fn image_store(platforms: usize) -> Store {
    let mut store = Store::default();
    let entries: Vec<serde_json::Value> = (0..platforms)
        .map(|i| {
            serde_json::json!({"mediaType": OCI_MANIFEST, "size": 1,
                "digest": format!("sha256:{:064x}", i + 1),
                "platform": {"os": "linux", "architecture": format!("arch{i}")}})
        })
        .collect();
    let index =
        serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries});
    store.manifest(Some("v1"), OCI_INDEX, serde_json::to_vec(&index).unwrap());
    store
}

#[tokio::test]
async fn during_an_outage_the_platforms_last_read_are_served_and_a_missing_image_is_not() {
    let store = image_store(2);
    let down = Arc::new(AtomicBool::new(false));
    let state = Arc::clone(&down);
    let fake = FakeRegistry::start(move |r| {
        if state.load(Ordering::SeqCst) {
            FakeResponse::status(503)
        } else {
            store.serve(r)
        }
    })
    .await;
    let registry = Registry::new(options(&[&fake.host], &[])).unwrap();
    let image = reference(&fake.host, "acme/app:v1");
    let read = registry
        .image_platforms_or_last_known(&image)
        .await
        .unwrap();
    assert_eq!(read.platforms.len(), 2);
    down.store(true, Ordering::SeqCst);
    let kept = registry
        .image_platforms_or_last_known(&image)
        .await
        .unwrap();
    assert_eq!(kept, read);
    let never_read = reference(&fake.host, "acme/other:v1");
    let err = registry
        .image_platforms_or_last_known(&never_read)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transport);
}

#[tokio::test]
async fn an_index_listing_too_many_entries_is_refused_without_reading_them() {
    let store = image_store(300);
    let fake = FakeRegistry::start(move |r| store.serve(r)).await;
    let err = Registry::new(options(&[&fake.host], &[]))
        .unwrap()
        .image_platforms(&reference(&fake.host, "acme/app:v1"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidContent { problem, .. } if **problem == ContentProblem::TooManyEntries(256)),
        "{err}"
    );
    assert!(fake.total() <= 2, "{} requests", fake.total());
}

#[tokio::test]
async fn requests_in_flight_are_bounded_across_clients() {
    let mut store = Store::default();
    let tags: Vec<String> = (0..6).map(|i| format!("v{i}")).collect();
    for tag in &tags {
        store.artifact(
            Some(tag),
            None,
            OCIFIT_LAYER,
            tag.as_bytes(),
            serde_json::json!({}),
        );
    }
    let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = Arc::clone(&arrivals);
    let fake = FakeRegistry::start(move |r| {
        seen.lock().unwrap().push(Instant::now());
        let mut response = store.serve(r);
        response.delay = Duration::from_millis(400);
        response
    })
    .await;
    let mut opts = options(&[&fake.host], &[]);
    opts.max_concurrent_requests = 2;
    let root = Registry::new(opts).unwrap();
    let started = Instant::now();
    let lookups = tags.iter().enumerate().map(|(i, tag)| {
        // Half of them through a client with other credentials, sharing the bound.
        let client = if i % 2 == 0 {
            root.clone()
        } else {
            root.with_credentials(docker_config("elsewhere.example", "u", "p"))
        };
        let at = reference(&fake.host, &format!("acme/compat:{tag}"));
        tokio::spawn(async move { client.resolve_digest(&at).await })
    });
    for lookup in lookups.collect::<Vec<_>>() {
        lookup.await.unwrap().unwrap();
    }
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 6);
    let early = arrivals
        .iter()
        .filter(|t| t.duration_since(started) < Duration::from_millis(300))
        .count();
    assert_eq!(
        early, 2,
        "only two requests were sent before the first answers"
    );
}
