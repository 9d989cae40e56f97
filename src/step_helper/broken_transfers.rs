//! Pushes and pulls whose connection is cut mid-body (the registry replica serving them died):
//! the real registry behind a test kit proxy that cuts a connection once it has carried a MiB.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ocifit_testkit::{Proxy, Registry as TestRegistry};

use super::{Budget, Limits};
use super::{PushRequest, pull, push};
use crate::registry::{
    PrivateRegistries, Reference, Registry, RegistryOptions, Restarts, RetryPolicy, parse_reference,
};

const MIB: u64 = 1024 * 1024;

/// A client of the registry behind `proxy`, trying a broken transfer three times with short waits.
fn client(proxy: &Proxy) -> Registry {
    Registry::new(RegistryOptions {
        plain_http: vec![proxy.addr.clone()],
        private: PrivateRegistries::parse(&[proxy.addr.as_str()]).expect("a host"),
        retry: RetryPolicy {
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(10),
            ..RetryPolicy::default()
        },
        restarts: Restarts {
            attempts: 3,
            first: Duration::from_millis(10),
            longest: Duration::from_millis(10),
        },
        ..RegistryOptions::default()
    })
    .expect("a client")
}

async fn behind_proxy() -> (TestRegistry, Proxy) {
    let registry = TestRegistry::builder().start().await.expect("the registry");
    let proxy = Proxy::start(registry.addr()).await.expect("a proxy");
    (registry, proxy)
}

fn reference(proxy: &Proxy, name: &str) -> Reference {
    parse_reference(&format!("{}/{name}", proxy.addr)).expect("a reference")
}

fn random(bytes: u64) -> Vec<u8> {
    let mut content = vec![0u8; usize::try_from(bytes).expect("a size")];
    getrandom::fill(&mut content).expect("random bytes");
    content
}

fn request(paths: Vec<std::path::PathBuf>) -> PushRequest {
    PushRequest {
        paths: paths
            .into_iter()
            .map(super::command::PushPath::plain)
            .collect(),
        unpack: true,
        artifact_type: "application/vnd.test".into(),
        compression: 1,
    }
}

async fn pull_into(registry: &Registry, reference: &Reference, out: &Path) -> super::Pulled {
    let budget = Arc::new(Budget::new(Limits::default()));
    pull(registry, reference, out, true, &budget)
        .await
        .expect("the pull")
}

#[tokio::test]
async fn a_push_cut_mid_body_starts_each_layer_again_and_every_byte_lands() {
    let (_registry, proxy) = behind_proxy().await;
    let client = client(&proxy);
    let dir = tempfile::tempdir().expect("a dir");
    let file = random(4 * MIB);
    std::fs::write(dir.path().join("big.bin"), &file).expect("a file");
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).expect("a dir");
    let inner = random(3 * MIB);
    std::fs::write(tree.join("inner.bin"), &inner).expect("a file");
    let to = reference(&proxy, "w/run:out");

    // Both layers' uploads, each on its own connection, are cut once past a MiB.
    proxy.cut_after(MIB, 2);
    push(
        &client,
        &to,
        &request(vec![dir.path().join("big.bin"), tree]),
    )
    .await
    .expect("the push, started again after the cuts");
    assert_eq!(proxy.cuts(), 2, "both uploads were cut");

    let out = tempfile::tempdir().expect("a dir");
    pull_into(&client, &to, out.path()).await;
    assert!(std::fs::read(out.path().join("big.bin")).expect("pulled") == file);
    assert!(std::fs::read(out.path().join("tree/inner.bin")).expect("pulled") == inner);
}

#[tokio::test]
async fn a_pull_cut_mid_body_asks_for_the_rest_and_checks_the_whole_digest() {
    let (_registry, proxy) = behind_proxy().await;
    let client = client(&proxy);
    let dir = tempfile::tempdir().expect("a dir");
    let file = random(4 * MIB);
    std::fs::write(dir.path().join("big.bin"), &file).expect("a file");
    let at = reference(&proxy, "w/run:in");
    push(&client, &at, &request(vec![dir.path().join("big.bin")]))
        .await
        .expect("the push");

    // A new client: no connection of the push is reused (and cut before the download).
    let client = self::client(&proxy);
    proxy.cut_after(MIB, 1);
    let out = tempfile::tempdir().expect("a dir");
    let pulled = pull_into(&client, &at, out.path()).await;
    assert_eq!(proxy.cuts(), 1, "the download was cut");
    assert_eq!(pulled.layers[0].size, 4 * MIB);
    assert!(std::fs::read(out.path().join("big.bin")).expect("pulled") == file);
}

#[tokio::test]
async fn a_transfer_cut_on_every_try_gives_up_saying_how_often_and_leaves_nothing() {
    let (_registry, proxy) = behind_proxy().await;
    let client = client(&proxy);
    let dir = tempfile::tempdir().expect("a dir");
    std::fs::write(dir.path().join("big.bin"), random(4 * MIB)).expect("a file");
    let at = reference(&proxy, "w/run:cut");
    push(&client, &at, &request(vec![dir.path().join("big.bin")]))
        .await
        .expect("the push");

    let client = self::client(&proxy);
    proxy.cut_after(MIB, u64::MAX);
    let refused = push(&client, &at, &request(vec![dir.path().join("big.bin")]))
        .await
        .expect_err("every upload is cut");
    let text = crate::telemetry::error_chain(&refused);
    assert!(text.contains("broke off 3 times"), "{text}");

    let out = tempfile::tempdir().expect("a dir");
    let budget = Arc::new(Budget::new(Limits::default()));
    let client = self::client(&proxy);
    let refused = pull(&client, &at, out.path(), true, &budget)
        .await
        .expect_err("every download is cut");
    let text = crate::telemetry::error_chain(&refused);
    assert!(text.contains("the download broke off 3 times"), "{text}");
    let left: Vec<_> = std::fs::read_dir(out.path()).expect("the dir").collect();
    assert!(left.is_empty(), "nothing is left behind: {left:?}");
}
