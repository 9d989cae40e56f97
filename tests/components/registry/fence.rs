//! The outbound fence against real local listeners: a token realm and a redirect on loopback are
//! refused before any connection reaches them, and reached once the admin's list names them; a
//! name resolving to loopback is refused at connect time (the resolver's answer is what the
//! client connects to), for a pod author's managed policy as for any client.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::fake_server::*;
use ocifit::api::Reason;
use ocifit::image_selection::{RegistrySource, Request, Wanted};
use ocifit::registry::{
    Error, ErrorKind, PrivateRegistries, Refusal, Registry, RegistryOptions, parse_reference,
};

fn options(plain_http: &[&str], private: &[&str]) -> RegistryOptions {
    RegistryOptions {
        plain_http: plain_http.iter().map(|h| h.to_string()).collect(),
        private: PrivateRegistries::parse(private).unwrap(),
        ..RegistryOptions::default()
    }
}

fn reference(host: &str) -> ocifit::registry::Reference {
    parse_reference(&format!("{host}/acme/compat:v1")).unwrap()
}

fn refusal(err: &Error) -> (String, Refusal) {
    match err {
        Error::NotAllowed { host, why, .. } => (host.clone(), *why),
        other => panic!("expected a refusal, got {other}"),
    }
}

fn connections(fake: &FakeRegistry) -> usize {
    fake.connections.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_token_realm_on_loopback_gets_no_connection_unless_the_list_names_it() {
    let realm =
        FakeRegistry::start(|_| FakeResponse::ok("application/json", br#"{"token":"t"}"#.to_vec()))
            .await;
    let challenge = format!(r#"Bearer realm="http://{}/token""#, realm.host);
    let registry = FakeRegistry::start(move |_| {
        FakeResponse::status(401).header("WWW-Authenticate", &challenge)
    })
    .await;
    // Both plain HTTP and no --allowed-registries: only the fence stands between them.
    let plain = [registry.host.as_str(), realm.host.as_str()];
    let err = Registry::new(options(&plain, &[&registry.host]))
        .unwrap()
        .resolve_digest(&reference(&registry.host))
        .await
        .unwrap_err();
    assert_eq!(refusal(&err), (realm.host.clone(), Refusal::PrivateAddress));
    assert!(connections(&registry) > 0, "the listed registry was asked");
    assert_eq!(connections(&realm), 0, "nothing reached the realm");

    let listed = Registry::new(options(&plain, &[&registry.host, &realm.host])).unwrap();
    let _ = listed.resolve_digest(&reference(&registry.host)).await;
    assert!(realm.total() > 0, "the listed realm was asked for a token");
}

#[tokio::test]
async fn a_redirect_to_loopback_gets_no_connection_unless_the_list_names_it() {
    let mut store = Store::default();
    let digest = store.artifact(Some("v1"), None, OCIFIT_LAYER, b"{}", serde_json::json!({}));
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
    let origin = FakeRegistry::start(move |r| match r.path.split_once("/blobs/") {
        Some((_, digest)) => FakeResponse::status(307)
            .header("Location", &format!("{}/{digest}", to.lock().unwrap())),
        None => store.serve(r),
    })
    .await;
    let plain = [origin.host.as_str(), cdn.host.as_str()];
    let err = Registry::new(options(&plain, &[&origin.host]))
        .unwrap()
        .fetch_artifact(&reference(&origin.host))
        .await
        .unwrap_err();
    assert_eq!(refusal(&err), (cdn.host.clone(), Refusal::PrivateAddress));
    assert_eq!(connections(&cdn), 0, "nothing reached the redirect target");

    let fetched = Registry::new(options(&plain, &[&origin.host, &cdn.host]))
        .unwrap()
        .fetch_artifact(&reference(&origin.host))
        .await
        .unwrap();
    assert_eq!(fetched.digest, digest);
    assert!(connections(&cdn) > 0);
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_at_connect_time_unless_listed() {
    let mut store = Store::default();
    let digest = store.artifact(Some("v1"), None, OCIFIT_LAYER, b"{}", serde_json::json!({}));
    let fake = FakeRegistry::start(move |r| store.serve(r)).await;
    let port = fake.host.rsplit_once(':').unwrap().1;
    let named = format!("localhost:{port}");
    let err = Registry::new(options(&[&named], &[]))
        .unwrap()
        .resolve_digest(&reference(&named))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotAllowed, "{err}");
    assert_eq!(
        refusal(&err),
        ("localhost".to_owned(), Refusal::PrivateAddress)
    );
    assert_eq!(connections(&fake), 0, "nothing reached the listener");

    // Listed by name, or by the network its address is in: the addresses admitted are the
    // ones connected to.
    for private in [named.as_str(), "127.0.0.0/8"] {
        let found = Registry::new(options(&[&named], &[private]))
            .unwrap()
            .resolve_digest(&reference(&named))
            .await
            .unwrap();
        assert_eq!(found, digest, "{private}");
    }
}

#[tokio::test]
async fn a_managed_policy_naming_a_host_that_resolves_to_loopback_reaches_nothing() {
    let fake = FakeRegistry::start(|_| FakeResponse::status(404)).await;
    let port = fake.host.rsplit_once(':').unwrap().1;
    let request = Request {
        wanted: Wanted::Reference(format!("localhost:{port}/acme/compat:v1")),
        pull_secret: None,
        managed: true,
    };
    let source = RegistrySource::new(options(&[&format!("localhost:{port}")], &[])).unwrap();
    let Err(refused) = source.resolved(&request).await else {
        panic!("a managed policy on loopback resolved");
    };
    assert_eq!(
        refused.reason,
        Reason::RegistryNotAllowed,
        "{}",
        refused.message
    );
    assert_eq!(connections(&fake), 0, "nothing reached the listener");
}
