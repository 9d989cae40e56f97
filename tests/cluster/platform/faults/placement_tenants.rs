//! Placement between tenants, through the controller on a real apiserver: a pod that names, by
//! its tracking label, a policy that does not select it is released untouched (no registry
//! request, no toleration, no affinity, no image annotation); a registry that accepts
//! connections and never answers, named by one namespace's pods, does not hold back another
//! namespace's pods, which are released constrained while every stalled lookup still waits, and
//! the stalled pods' lookups end by the lookup deadline as failed attempts.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use ocifit::api::placement_pod::{
    ATTEMPTS_ANNOTATION, DIGESTS_ANNOTATION, OUTCOME_ANNOTATION, PLATFORMS_ANNOTATION,
    POLICY_LABEL, SCHEDULING_GATE,
};
use serde_json::json;

use crate::support::Env;
use crate::support::placement::{
    self, annotation, create_policy, events, gates, wait_event, wait_pod,
};

/// The registry's access log's length now.
fn log_len(env: &Env) -> usize {
    std::fs::read_to_string(env.registry().dir().join("registry.log"))
        .unwrap()
        .len()
}

/// Requests for `repository` in the registry's access log after `offset`.
fn registry_requests(env: &Env, offset: usize, repository: &str) -> usize {
    std::fs::read_to_string(env.registry().dir().join("registry.log")).unwrap()[offset..]
        .matches(&format!(" /v2/{repository}/"))
        .count()
}

#[tokio::test]
async fn a_pod_naming_a_policy_that_does_not_select_it_is_released_untouched() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    for namespace in ["team-a", "team-b"] {
        ocifit_testkit::create_namespace(&client, namespace)
            .await
            .unwrap();
    }
    Api::<Namespace>::all(client.clone())
        .patch(
            "team-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .unwrap();
    let web = env
        .registry()
        .push_multi_platform("team-a/web", "v1", &["linux/arm64"])
        .await
        .unwrap();
    let _served = placement::serve(&env, "placement-foreign", &[]).await;
    create_policy(
        &client,
        "team-a",
        json!({
            "namespaceSelector": {"matchLabels": {"team": "a"}},
            "architectures": [{"name": "arm64", "tolerations": [
                {"key": "pool", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}
            ]}],
        }),
    )
    .await;

    // A pod author of team-b writes team-a's policy label and ocifit's gate into their pod.
    let mut pod = placement::pod(
        "borrower",
        "team-b",
        json!({POLICY_LABEL: "team-a"}),
        &[("web", &web.reference)],
    );
    pod.spec.as_mut().unwrap().scheduling_gates =
        Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
            name: SCHEDULING_GATE.into(),
        }]);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team-b");
    let offset = log_len(&env);
    let started = Instant::now();
    // As stored: with the apiserver's own defaults (e.g. its not-ready tolerations).
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let released = wait_pod(&pods, "borrower", "released", |p| gates(p).is_empty()).await;
    let took = started.elapsed();
    let note = wait_event(
        &client,
        "team-b",
        "Pod",
        "borrower",
        "ReleasedUnconstrained",
    )
    .await;

    let spec = released.spec.clone().unwrap();
    let before = created.spec.clone().unwrap();
    let added =
        spec.tolerations.iter().flatten().count() - before.tolerations.iter().flatten().count();
    let requests = registry_requests(&env, offset, "team-a/web");
    eprintln!(
        "FAULT foreign-policy: a team-b pod naming team-a's policy released in {took:?}: \
         tolerations added {added}, affinity {}, registry requests {requests}, annotations {:?}",
        spec.affinity.is_some(),
        released.metadata.annotations
    );
    assert!(note.contains("does not select this pod"), "{note}");
    assert!(note.contains("namespaceSelector"), "{note}");
    assert_eq!(spec.tolerations, before.tolerations, "tolerations added");
    assert!(spec.affinity.is_none(), "{:?}", spec.affinity);
    assert_eq!(requests, 0, "the registry was asked about the pod's image");
    assert_eq!(annotation(&released, OUTCOME_ANNOTATION), "Unconstrained");
    for key in [PLATFORMS_ANNOTATION, DIGESTS_ANNOTATION] {
        assert_eq!(annotation(&released, key), "", "{key}");
    }
}

const STALLED_PODS: usize = 20;
const HEALTHY_PODS: usize = 10;

#[tokio::test]
async fn a_stalling_registry_of_one_namespace_does_not_hold_back_another_namespaces_pods() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    for namespace in ["stalled", "healthy"] {
        ocifit_testkit::create_namespace(&client, namespace)
            .await
            .unwrap();
    }
    let (silent, mut held) = ocifit_testkit::silent_server()
        .await
        .expect("a silent server");
    let healthy_images: Vec<String> = {
        let mut images = Vec::new();
        for i in 0..HEALTHY_PODS {
            let image = env
                .registry()
                .push_multi_platform(&format!("healthy/app-{i}"), "v1", &["linux/amd64"])
                .await
                .unwrap();
            images.push(image.reference);
        }
        images
    };
    let _served = placement::serve(
        &env,
        "placement-stalled",
        &["--plain-http-registry", &silent],
    )
    .await;
    create_policy(
        &client,
        "default",
        json!({"onInspectionFailure": {"attempts": 1, "timeout": "2m"}}),
    )
    .await;
    let gated = |name: &str, namespace: &str, image: &str| {
        let mut pod = placement::pod(
            name,
            namespace,
            json!({POLICY_LABEL: "default"}),
            &[("app", image)],
        );
        pod.spec.as_mut().unwrap().scheduling_gates =
            Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                name: SCHEDULING_GATE.into(),
            }]);
        pod
    };

    // Namespace "stalled": more pods, each on its own image of the silent registry, than
    // ocifit has inspection slots.
    let stalled: Api<Pod> = Api::namespaced(client.clone(), "stalled");
    for i in 0..STALLED_PODS {
        let image = format!("{silent}/tenant/app-{i}:v1");
        stalled
            .create(
                &PostParams::default(),
                &gated(&format!("stalled-{i}"), "stalled", &image),
            )
            .await
            .unwrap();
    }
    held.wait_for(|held| *held >= 1).await.unwrap();

    // Namespace "healthy": every pod released constrained while the stalled lookups still wait.
    let healthy: Api<Pod> = Api::namespaced(client.clone(), "healthy");
    let started = Instant::now();
    for (i, image) in healthy_images.iter().enumerate() {
        healthy
            .create(
                &PostParams::default(),
                &gated(&format!("healthy-{i}"), "healthy", image),
            )
            .await
            .unwrap();
    }
    let mut slowest = Duration::ZERO;
    for i in 0..HEALTHY_PODS {
        let pod = wait_pod(&healthy, &format!("healthy-{i}"), "released", |p| {
            gates(p).is_empty()
        })
        .await;
        assert_eq!(annotation(&pod, OUTCOME_ANNOTATION), "Constrained");
        slowest = slowest.max(started.elapsed());
    }
    let connections = *held.borrow();
    let mut failed_yet = 0;
    for i in 0..STALLED_PODS {
        let pod = stalled.get(&format!("stalled-{i}")).await.unwrap();
        if !annotation(&pod, ATTEMPTS_ANNOTATION).is_empty() {
            failed_yet += 1;
        }
    }

    // Each stalled lookup ends by the lookup deadline, as a failed attempt its pod counts (the
    // pods reconciled after the first failure find the registry left alone for a while).
    wait_event(&client, "stalled", "Pod", "stalled-0", "InspectionFailed").await;
    let stalled_for = started.elapsed();
    let mut notes = Vec::new();
    for i in 0..STALLED_PODS {
        notes.extend(
            events(&client, "stalled", "Pod", &format!("stalled-{i}"))
                .await
                .into_iter()
                .filter(|(reason, _)| reason == "InspectionFailed")
                .map(|(_, note)| note),
        );
    }
    let reported = notes.len();
    eprintln!(
        "FAULT stalling-registry: {STALLED_PODS} pods of one namespace on a registry that never \
         answers ({connections} connections held); {HEALTHY_PODS} pods of another namespace all \
         released constrained within {slowest:?}, while {failed_yet} stalled pod(s) had a failed \
         attempt; the first stalled pod's failure after {stalled_for:?}; {reported} \
         InspectionFailed Event(s) on stalled pods by then"
    );
    assert_eq!(
        failed_yet, 0,
        "the healthy pods waited for a stalled lookup to end"
    );
    assert!(
        connections <= 4,
        "one namespace held {connections} of the inspection slots"
    );
    assert!(
        notes
            .iter()
            .any(|note| note.contains("no answer within the lookup deadline of 30s")),
        "{notes:?}"
    );
}
