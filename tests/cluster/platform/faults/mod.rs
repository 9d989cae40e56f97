//! The fault suite: `ocifit run` serving its webhook to a real apiserver while things go wrong,
//! each scenario printing its figures (`FAULT …` lines): the registry down while 500 opted-in
//! pods are created (none denied); 200 opted-in pods created right after a new policy whose
//! registry answers only later (none refused: held, then each released with its class's image);
//! kube-apiserver killed and started again (the webhook answers
//! meanwhile, status converges after); hostile requests sent straight to the webhook from
//! loopback (every answer within the deadline, resident memory under the chart's limit, the
//! next well-formed request answered normally); the host's own denials passed on to the user;
//! two replicas behind one Service, one stopped
//! (no admission fails) and one killed (the failures bounded, the Lease taken over); 64
//! slow-body connections held open to the webhook port while 400 pods are created in two
//! namespaces (none refused); 24 connections from another loopback address sending ~2.8 MiB
//! bodies and stalling, re-opened for a minute, while 400 pods are created (none refused, every
//! plain pod planned by the gate); a flood of 1,000 pods carrying placement's tracking label with
//! 512 KiB of `args` each (every replica, watching or starting, under the chart's memory
//! limit); placement between tenants (a pod naming a foreign policy released untouched, a
//! stalling registry of one namespace not holding back another's pods) and a missing image
//! inspected only as often as docs/placement.md says; one namespace's artifact cache against
//! another's steps and pods (refused, 401); 1,000 fat ArtifactCaches and 200 fat Deployments
//! (every replica, watching or starting, under the chart's memory limit); 1,000 fat Services and
//! 1,000 fat claims with the cache's labels in ten namespaces (the same); 100 forged step pods with
//! long names (no step series added, the scrape's size unchanged); 1,000 distinct `image-ref`s from
//! one namespace (no more managed policies than its quota, another namespace's held pod still
//! released; the memory of every replica) and a silent registry behind four managed policies (an
//! admin's policy still resolves at once), and the collection of managed policies listing pods once
//! per pass (the apiserver's own request count).

mod apiserver_restart;
mod body_share;
mod cache_flood;
mod cross_namespace;
mod forged_steps;
mod held_pods;
mod host_denials;
mod hostile;
mod managed_policies;
mod memory_flood;
mod owned_flood;
mod placement_retries;
mod placement_tenants;
mod registry_down;
mod slow_bodies;
mod two_replicas;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use ocifit::api::{ArtifactCache, ImageSelectionPolicyStatus};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::support::objects::{OptIn, TestPod, linux_node};
use crate::support::webhook::{Serving, WebhookCertificate, image};
use crate::support::{Controller, Env, FLAVOR, flavor_artifact, get};

const NAMESPACE: &str = "faults";
/// Pods created at once, as a burst of ReplicaSets would.
const AT_ONCE: usize = 25;

/// Runs `create(i, flavor)` for `count` pods, the three flavors in turn, [`AT_ONCE`] in flight;
/// the results in the order they finished.
async fn create_in_bursts<T, F, Fut>(count: usize, create: F) -> Vec<T>
where
    F: Fn(usize, &'static str) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let places = Arc::new(Semaphore::new(AT_ONCE));
    let mut created = JoinSet::new();
    let flavors = ["vanilla", "chocolate", "strawberry"];
    for i in 0..count {
        let places = Arc::clone(&places);
        let creation = create(i, flavors[i % flavors.len()]);
        created.spawn(async move {
            let _place = places.acquire_owned().await.expect("a place");
            creation.await
        });
    }
    let mut results = Vec::with_capacity(count);
    while let Some(joined) = created.join_next().await {
        results.push(joined.expect("a creation"));
    }
    results
}

/// A cluster with the flavor policy Ready and `ocifit run` serving the webhook for opted-in pods
/// of [`NAMESPACE`].
pub struct Served {
    pub env: Env,
    pub controller: Controller,
    pub certificate: WebhookCertificate,
    pub webhook_address: String,
    pub by_flavor: BTreeMap<&'static str, String>,
}

impl Served {
    pub async fn start(identity: &str) -> Served {
        Served::start_with(identity, &[]).await
    }

    /// As [`Served::start`], `ocifit run` given `extra` flags.
    pub async fn start_with(identity: &str, extra: &[&str]) -> Served {
        let env = Env::start(crate::support::ocifit_binary()).await;
        let Serving {
            by_flavor,
            certificate,
            address: webhook_address,
            controller,
        } = env.serve_flavors(NAMESPACE, identity, extra).await;
        env.create_policy(&env.flavor_policy("flavors")).await;
        env.wait_ready("flavors").await;
        certificate
            .activate_mutate(
                &env,
                "ocifit-faults",
                &webhook_address,
                NAMESPACE,
                &by_flavor["vanilla"],
            )
            .await;
        Served {
            env,
            controller,
            certificate,
            webhook_address,
            by_flavor,
        }
    }

    /// Creates `pod` through the apiserver: its image, or the error.
    pub async fn create(&self, pod: &Pod) -> Result<String, kube::Error> {
        Api::<Pod>::namespaced(self.env.client.clone(), NAMESPACE)
            .create(&PostParams::default(), pod)
            .await
            .map(|stored| image(&stored).to_owned())
    }

    /// Pushes the flavor artifact again at `path`, an artifact ocifit has never read (the flavor
    /// one is cached by now).
    pub async fn push_flavor_artifact(&self, path: &str) {
        let sets = ["vanilla", "chocolate", "strawberry"]
            .map(|flavor| (self.by_flavor[flavor].as_str(), flavor));
        self.env.push_artifact(path, &flavor_artifact(sets)).await;
    }

    /// A TLS connector trusting the webhook's CA.
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        ocifit_testkit::pki::install_crypto_provider();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(
                CertificateDer::from_pem_slice(self.certificate.ca.cert_pem().as_bytes())
                    .expect("the CA"),
            )
            .expect("a root");
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }

    /// The process's (current, peak) resident memory in KiB.
    pub fn rss_kib(&self) -> (u64, u64) {
        rss_kib(self.controller.pid())
    }
}

/// The chart's memory limit (`resources.limits.memory`: 256Mi), in KiB.
pub const CHART_LIMIT_KIB: u64 = 256 * 1024;

/// Starts another replica named `identity` and waits, `within` at most, until it is ready (its
/// stores hold a first list); the replica and how long that took.
pub async fn second_replica(env: &Env, identity: &str, within: Duration) -> (Controller, Duration) {
    let starting = Controller::spawn(env, identity, &[]);
    let spawned = Instant::now();
    while get(&starting.admin, "/readyz").await.map(|(code, _)| code) != Some(200) {
        assert!(
            spawned.elapsed() < within,
            "the second replica not ready; log:\n{}",
            starting.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ready = spawned.elapsed();
    (starting, ready)
}

/// Whether `log` says the watch named `what` listed.
pub fn watch_listed(log: &str, what: &str) -> bool {
    log.lines()
        .any(|line| line.contains("watch listed") && line.contains(what))
}

/// An ArtifactCache `owner` in `namespace` deploying nothing; its uid, which a fat object names
/// as its controlling owner ([`owned_by`]).
pub async fn owner_cache(client: &Client, namespace: &str) -> String {
    let owner: ArtifactCache = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": "owner", "namespace": namespace},
        "spec": {"deploy": false, "endpoint": "registry.example.com"},
    }))
    .expect("a cache");
    Api::<ArtifactCache>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &owner)
        .await
        .expect("the owner")
        .metadata
        .uid
        .expect("a uid")
}

/// The ownerReferences naming the cache [`owner_cache`] made as controlling owner.
pub fn owned_by(owner_uid: &str) -> Value {
    json!([{"apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "name": "owner", "uid": owner_uid, "controller": true}])
}

/// Process `pid`'s (current, peak) resident memory in KiB.
pub fn rss_kib(pid: u32) -> (u64, u64) {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Adds a second strawberry node and waits (30 s at most) until the flavor policy's status
/// counts it; the status, and how long that took.
pub async fn second_strawberry_node(env: &Env) -> (ImageSelectionPolicyStatus, Duration) {
    env.add_node(linux_node("strawberry-2").label(FLAVOR, "strawberry"))
        .await;
    env.wait_status(
        "flavors",
        Duration::from_secs(30),
        "2 strawberry nodes",
        |s| {
            s.classes.iter().any(|c| {
                c.labels.get(FLAVOR).map(String::as_str) == Some("strawberry") && c.nodes == 2
            })
        },
    )
    .await
}

/// An opted-in pod for nodes of `flavor`.
pub fn flavored(name: &str, flavor: &str) -> Pod {
    TestPod::named(name)
        .opted_in()
        .node_selector(FLAVOR, flavor)
        .build()
}
