//! Two replicas behind one Service, as the chart runs them, under a steady stream of opted-in pod
//! creations through the apiserver. The apiserver dials the Service's endpoints
//! (`--enable-aggregator-routing`, there is no kube-proxy here), listed by hand in one
//! EndpointSlice per replica (no kubelet either, so the test does what the endpoints controller
//! would). Both replicas serve on this host's address, each on its own port: EndpointSlice
//! validation refuses loopback addresses.
//!
//! - SIGTERM to one replica: its readiness fails at once, the test marks its endpoint not ready
//!   (as the endpoints controller does for a terminating pod), it keeps serving for its shutdown
//!   delay meanwhile, then drains and exits 0: no admission fails.
//! - SIGKILL to the leader: the admissions the apiserver sends it fail until its endpoint goes
//!   (the test removes it after [`NOTICED_AFTER`], standing for the readiness probe); none fails
//!   once it is gone; the survivor takes the Lease once it expires and status keeps following
//!   the nodes.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ServiceReference;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use ocifit::api::pod::ENABLED_LABEL;
use ocifit_testkit::{Cluster, PodWebhook, host_ipv4};
use serde_json::json;
use tokio::task::JoinSet;

use super::{NAMESPACE, flavored, second_strawberry_node};
use crate::support::webhook::{WebhookCertificate, activate, admissions, image};
use crate::support::{Controller, Env};

const SERVICE: &str = "ocifit-webhook";
const PORT_NAME: &str = "https";
/// A short lease, so the SIGKILL take-over is seconds.
const LEASE: [&str; 4] = ["--lease-duration", "4s", "--lease-grace", "1s"];
/// Workers creating pods, each one after the other.
const WORKERS: usize = 4;
/// How long a killed replica stays in the EndpointSlice: the chart's readiness probe notices in
/// 5 to 10 s; shorter here to keep the test short (the failures scale with it).
const NOTICED_AFTER: Duration = Duration::from_secs(2);
/// How long the apiserver may take to see an EndpointSlice change.
const SEEN_WITHIN: Duration = Duration::from_secs(1);

/// A replica: `ocifit run` on this host's address, with its own EndpointSlice.
struct Replica {
    controller: Controller,
    identity: &'static str,
    host: Ipv4Addr,
}

impl Replica {
    async fn start(
        env: &Env,
        certificate: &WebhookCertificate,
        host: Ipv4Addr,
        identity: &'static str,
    ) -> Replica {
        let port = std::net::TcpListener::bind((host, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port on the host's address")
            .port();
        let controller = certificate
            .serve(env, identity, &format!("{host}:{port}"), &LEASE)
            .await;
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {
                "name": format!("{SERVICE}-{identity}"),
                "labels": {"kubernetes.io/service-name": SERVICE},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [host.to_string()], "conditions": {"ready": true}}],
            "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
        }))
        .expect("an EndpointSlice");
        slices(env)
            .create(&PostParams::default(), &slice)
            .await
            .expect("the replica's EndpointSlice");
        Replica {
            controller,
            identity,
            host,
        }
    }

    /// Marks the endpoint not ready and terminating, as the endpoints controller does.
    async fn leave(&self, env: &Env) {
        let patch = json!({"endpoints": [{"addresses": [self.host.to_string()], "conditions":
            {"ready": false, "serving": false, "terminating": true}}]});
        slices(env)
            .patch(
                &format!("{SERVICE}-{}", self.identity),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
            .expect("the endpoint marked not ready");
    }

    async fn admissions(&self) -> f64 {
        admissions(&self.controller).await
    }

    async fn leading(&self) -> bool {
        self.controller.metric("ocifit_leader").await == 1.0
    }
}

fn slices(env: &Env) -> Api<EndpointSlice> {
    Api::namespaced(env.client.clone(), NAMESPACE)
}

/// When a creation began, and its error if it failed.
type Outcomes = Arc<Mutex<Vec<(Instant, Option<String>)>>>;

/// Opted-in pods created one after the other by [`WORKERS`] tasks.
struct Stream {
    outcomes: Outcomes,
    _workers: JoinSet<()>,
}

impl Stream {
    fn start(env: &Env, by_flavor: &BTreeMap<&'static str, String>) -> Stream {
        let outcomes: Outcomes = Arc::default();
        let mut workers = JoinSet::new();
        for worker in 0..WORKERS {
            let pods = Api::namespaced(env.client.clone(), NAMESPACE);
            let (outcomes, by_flavor) = (Arc::clone(&outcomes), by_flavor.clone());
            workers.spawn(async move {
                let flavors: Vec<_> = by_flavor.keys().copied().collect();
                for n in 0.. {
                    let flavor = flavors[n % flavors.len()];
                    let pod = flavored(&format!("stream-{worker}-{n}"), flavor);
                    let began = Instant::now();
                    let failure = match pods.create(&PostParams::default(), &pod).await {
                        Ok(stored) if image(&stored) == by_flavor[flavor] => None,
                        Ok(stored) => Some(format!("wrong image {}", image(&stored))),
                        Err(error) => Some(error.to_string()),
                    };
                    outcomes
                        .lock()
                        .expect("the outcomes")
                        .push((began, failure));
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            });
        }
        Stream {
            outcomes,
            _workers: workers,
        }
    }

    /// (creations, failures) begun in `from..to`, and the failures' messages.
    fn between(&self, from: Instant, to: Instant) -> (usize, Vec<String>) {
        let outcomes = self.outcomes.lock().expect("the outcomes");
        let window: Vec<_> = outcomes
            .iter()
            .filter(|(began, _)| (from..to).contains(began))
            .collect();
        let failures = window.iter().filter_map(|(_, f)| f.clone()).collect();
        (window.len(), failures)
    }

    fn total(&self) -> usize {
        self.outcomes.lock().expect("the outcomes").len()
    }
}

#[tokio::test]
async fn behind_one_service_a_stopped_replica_fails_no_admission_and_a_killed_leader_hands_over() {
    let env = Env::start_with(
        crate::support::ocifit_binary(),
        Cluster::builder().apiserver_arg("--enable-aggregator-routing=true"),
    )
    .await;
    let by_flavor = env.flavors_with_nodes(NAMESPACE).await;
    let host = host_ipv4().expect("this host's address");
    // The apiserver checks the certificate against the Service's DNS name.
    let certificate = WebhookCertificate::issue(&env, &[&format!("{SERVICE}.{NAMESPACE}.svc")]);
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": SERVICE},
        "spec": {"ports": [{"name": PORT_NAME, "port": 443, "protocol": "TCP"}]},
    }))
    .expect("a Service");
    Api::<Service>::namespaced(env.client.clone(), NAMESPACE)
        .create(&PostParams::default(), &service)
        .await
        .expect("the Service");
    let a = Replica::start(&env, &certificate, host, "replica-a").await;
    let b = Replica::start(&env, &certificate, host, "replica-b").await;
    env.create_policy(&env.flavor_policy("flavors")).await;
    env.wait_ready("flavors").await;
    let mut configuration = PodWebhook::new("ocifit-two-replicas", "", certificate.ca.cert_pem())
        .match_label(ENABLED_LABEL, "true")
        .in_namespace(NAMESPACE)
        .to_configuration();
    for webhook in configuration.webhooks.iter_mut().flatten() {
        webhook.client_config.url = None;
        webhook.client_config.service = Some(ServiceReference {
            namespace: NAMESPACE.into(),
            name: SERVICE.into(),
            port: Some(443),
            path: Some("/mutate".into()),
        });
    }
    activate(
        &env,
        &configuration,
        NAMESPACE,
        &flavored("probe", "vanilla"),
        &by_flavor["vanilla"],
    )
    .await;

    let stream = Stream::start(&env, &by_flavor);
    // The apiserver keeps its connections to a replica as long as they live: the replica
    // stopped is the one it is sending to.
    let (carrier, other) = carrier_first(a, b).await;
    let (stopped, survivor) = sigterm_fails_no_admission(&env, &stream, carrier, other).await;
    let c = Replica::start(&env, &certificate, host, "replica-c").await;
    let killed =
        sigkill_bounds_the_failures_and_the_survivor_leads(&env, &stream, survivor, &c).await;
    eprintln!(
        "FAULT two-replicas: {} pods created; SIGTERM: {stopped}; SIGKILL: {killed}",
        stream.total()
    );
    drop(stream);
    assert!(c.controller.stop().await.success());
}

/// The two replicas, the one the apiserver is sending admissions to first.
async fn carrier_first(a: Replica, b: Replica) -> (Replica, Replica) {
    let started = Instant::now();
    loop {
        let before = (a.admissions().await, b.admissions().await);
        tokio::time::sleep(Duration::from_millis(500)).await;
        if a.admissions().await > before.0 {
            return (a, b);
        }
        if b.admissions().await > before.1 {
            return (b, a);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no replica gets the stream's admissions"
        );
    }
}

/// What the SIGTERM phase saw, for the summary line; the replica left.
async fn sigterm_fails_no_admission(
    env: &Env,
    stream: &Stream,
    stopping: Replica,
    other: Replica,
) -> (String, Replica) {
    let at_signal = stopping.admissions().await;
    let signalled = Instant::now();
    stopping.controller.begin_stop();
    // The kubelet would see /readyz fail; the endpoints controller marks a terminating pod's
    // endpoint not ready at once.
    while crate::support::get(&stopping.controller.admin, "/readyz")
        .await
        .map(|(code, _)| code)
        == Some(200)
    {
        assert!(signalled.elapsed() < Duration::from_secs(5), "still ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stopping.leave(env).await;
    let left = signalled.elapsed();
    // What it answered after the signal, read until its admin server goes.
    let mut answered = 0.0;
    while let Some((200, _)) = crate::support::get(&stopping.controller.admin, "/livez").await {
        answered = stopping.admissions().await - at_signal;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = stopping.controller.exited(Duration::from_secs(40)).await;
    let exited = signalled.elapsed();
    assert!(status.success(), "{status}");
    // Past the exit, for the requests the apiserver would have sent it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (created, failures) = stream.between(signalled, Instant::now());
    eprintln!(
        "FAULT two-replicas SIGTERM: endpoint not ready after {left:?}, {answered} admissions \
         answered by the stopping replica after the signal, exited 0 after {exited:?}; \
         {created} pods created meanwhile, {} failed: {failures:?}",
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert!(answered > 0.0, "the stopping replica was not sent anything");
    assert!(exited < Duration::from_secs(15), "{exited:?}");
    (
        format!("{created} created, {} failed", failures.len()),
        other,
    )
}

async fn sigkill_bounds_the_failures_and_the_survivor_leads(
    env: &Env,
    stream: &Stream,
    b: Replica,
    c: &Replica,
) -> String {
    // The replica left leads (it did, or took over the released Lease at once).
    let waited = Instant::now();
    while !b.leading().await {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "the replica that stayed does not lead"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!c.leading().await, "two leaders");
    let identity = b.identity;
    let slice_of_b = format!("{SERVICE}-{identity}");
    let killed_at = Instant::now();
    b.controller.kill().await;
    tokio::time::sleep(NOTICED_AFTER).await;
    slices(env)
        .delete(&slice_of_b, &Default::default())
        .await
        .expect("the killed replica's EndpointSlice removed");
    let gone_at = Instant::now();
    while !c.leading().await {
        assert!(
            killed_at.elapsed() < Duration::from_secs(15),
            "the survivor never took the Lease"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let takeover = killed_at.elapsed();
    let (_, converged) = second_strawberry_node(env).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = Instant::now();
    let (while_listed, failed) = stream.between(killed_at, gone_at + SEEN_WITHIN);
    let (after, failed_after) = stream.between(gone_at + SEEN_WITHIN, now);
    eprintln!(
        "FAULT two-replicas SIGKILL: {} of {while_listed} admissions failed while the killed \
         replica was listed ({NOTICED_AFTER:?}, and {SEEN_WITHIN:?} for the apiserver to see it \
         go), {} of {after} after; the survivor led {takeover:?} after the kill (4 s lease); \
         status followed a new node in {converged:?}; {} pods created in all",
        failed.len(),
        failed_after.len(),
        stream.total()
    );
    for failure in &failed {
        assert!(
            failure.contains("failed calling webhook"),
            "only calls to the killed replica fail: {failure}"
        );
    }
    // The apiserver picks a replica at random per new connection, so about half the admissions
    // while the killed one is listed can fail, never more than were sent then.
    assert!(failed.len() <= while_listed, "{failed:?}");
    assert!(failed_after.is_empty(), "{failed_after:?}");
    assert!(after > 0);
    format!(
        "{} of {while_listed} failed while listed, 0 of {after} after, Lease taken \
         {takeover:?} after the kill, status converged {converged:?} after a node change",
        failed.len()
    )
}
