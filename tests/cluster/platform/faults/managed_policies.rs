//! What a pod author can make ocifit do by naming artifacts no policy uses (the `image-ref`
//! annotation alone): many distinct references from one namespace create no more managed
//! policies than its quota, and another namespace's held pod is still released within its
//! bound; a registry that accepts connections and never answers, behind four managed policies,
//! does not hold back an admin's policy; the collection of unused ones lists pods once per pass
//! (in pages), however many managed policies there are. Each prints its figures (`FAULT
//! managed-…` lines), the resident memory of every replica among them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, PodSchedulingGate};
use kube::Api;
use kube::api::ListParams;
use ocifit::api::pod::{
    HELD_ANNOTATION, HELD_LABEL, IMAGE_REF_ANNOTATION, MANAGED_LABEL, MANAGED_NAMESPACE_LABEL,
    MANAGED_POLICY_LABEL, SCHEDULING_GATE,
};
use ocifit::image_selection::managed_name;
use ocifit_testkit::{create_namespace, silent_server};

use super::{NAMESPACE, Served, create_in_bursts, rss_kib};
use crate::support::objects::{OptIn, TestPod};
use crate::support::placement::gates;
use crate::support::webhook::image;
use crate::support::{Controller, FLAVOR};

/// Distinct `image-ref`s from one namespace.
const FLOOD: usize = 1_000;
/// The default per-namespace quota (`--image-ref-policies-per-namespace`).
const PER_NAMESPACE: usize = 10;
/// The hold bound the scenario runs with.
const BOUND: Duration = Duration::from_secs(120);

/// An opted-in pod in `namespace` naming `reference` by `image-ref` alone (the webhook holds
/// it in [`NAMESPACE`]).
fn by_ref(name: &str, namespace: &str, reference: &str, flavor: &str) -> Pod {
    let mut pod = TestPod::named(name)
        .in_namespace(namespace)
        .opted_in()
        .image("placeholder:ref")
        .node_selector(FLAVOR, flavor)
        .build();
    pod.metadata.annotations = Some(BTreeMap::from([(
        IMAGE_REF_ANNOTATION.to_owned(),
        reference.to_owned(),
    )]));
    pod
}

/// As [`by_ref`], held as admission holds it, the gate and label written by hand: the suite's
/// webhook covers [`NAMESPACE`] only, and ocifit's release every namespace but kube-system and
/// its own when no `--webhook-configuration` names the suite's.
fn held_by_hand(name: &str, namespace: &str, reference: &str, flavor: &str) -> Pod {
    let mut pod = by_ref(name, namespace, reference, flavor);
    pod.metadata
        .labels
        .get_or_insert_default()
        .insert(HELD_LABEL.to_owned(), "true".to_owned());
    if let Some(spec) = pod.spec.as_mut() {
        spec.scheduling_gates = Some(vec![PodSchedulingGate {
            name: SCHEDULING_GATE.to_owned(),
        }]);
    }
    pod
}

async fn managed_policies(served: &Served) -> Vec<(String, String)> {
    served
        .env
        .policies()
        .list(&ListParams::default().labels(&format!("{MANAGED_LABEL}=true")))
        .await
        .expect("the policies")
        .items
        .into_iter()
        .map(|p| {
            let against = p
                .metadata
                .labels
                .unwrap_or_default()
                .remove(MANAGED_NAMESPACE_LABEL)
                .unwrap_or_default();
            (p.metadata.name.unwrap_or_default(), against)
        })
        .collect()
}

/// Waits for `name` in `namespace` to lose its gate (within `within`); the pod and how long.
async fn released(
    served: &Served,
    namespace: &str,
    name: &str,
    within: Duration,
) -> (Pod, Duration) {
    let pods = Api::<Pod>::namespaced(served.env.client.clone(), namespace);
    let start = Instant::now();
    loop {
        let now = pods.get(name).await.expect("the pod");
        if gates(&now).is_empty() {
            return (now, start.elapsed());
        }
        assert!(
            start.elapsed() < within,
            "{namespace}/{name} not released within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn many_image_refs_from_one_namespace_stop_at_its_quota_and_others_are_still_served() {
    let bound = format!("{}s", BOUND.as_secs());
    let flags = ["--image-hold-timeout", &bound];
    let served = Served::start_with("faults-managed-quota", &flags).await;
    // A second replica, following: it holds every policy too.
    let follower = Controller::start(&served.env, "faults-managed-quota-b", &flags).await;
    let registry = served.env.registry();
    let started = Instant::now();
    let created = create_in_bursts(FLOOD, |i, _| {
        let pod = by_ref(
            &format!("flood-{i}"),
            NAMESPACE,
            &registry.reference(&format!("ocifit/flood-compat:x{i}")),
            "vanilla",
        );
        let client = served.env.client.clone();
        async move {
            Api::<Pod>::namespaced(client, NAMESPACE)
                .create(&Default::default(), &pod)
                .await
                .is_ok()
        }
    })
    .await;
    assert!(created.iter().all(|ok| *ok), "every flood pod created");
    // Another namespace's pod names a real artifact.
    let other = "faults-other";
    create_namespace(&served.env.client, other)
        .await
        .expect("the namespace");
    served.push_flavor_artifact("ocifit/other-compat:v1").await;
    let reference = registry.reference("ocifit/other-compat:v1");
    Api::<Pod>::namespaced(served.env.client.clone(), other)
        .create(
            &Default::default(),
            &held_by_hand("other", other, &reference, "chocolate"),
        )
        .await
        .expect("the other namespace's pod");
    let (pod, took) = released(&served, other, "other", BOUND).await;
    assert_eq!(image(&pod), served.by_flavor["chocolate"]);
    let policies = managed_policies(&served).await;
    let flooding = policies.iter().filter(|(_, ns)| ns == NAMESPACE).count();
    let (rss, peak) = served.rss_kib();
    let (follower_rss, follower_peak) = rss_kib(follower.pid());
    println!(
        "FAULT managed-quota: {FLOOD} distinct image-refs from {NAMESPACE} in {:?}: {flooding} \
         managed policies for it (quota {PER_NAMESPACE}), {} in all; {other}'s held pod released \
         with its class image in {took:?} (bound {BOUND:?}); RSS of the leading replica {} MiB \
         (peak {} MiB), of the following one {} MiB (peak {} MiB)",
        started.elapsed(),
        policies.len(),
        rss / 1024,
        peak / 1024,
        follower_rss / 1024,
        follower_peak / 1024
    );
    assert_eq!(flooding, PER_NAMESPACE, "{policies:?}");
    assert!(policies.iter().any(|(_, ns)| ns == other));
    // The pods beyond the quota say why they wait.
    let pods = Api::<Pod>::namespaced(served.env.client.clone(), NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(60);
    let told = loop {
        let listed = pods
            .list(&ListParams::default().labels(&format!("{HELD_LABEL}=true")))
            .await
            .expect("the held pods");
        let told = listed
            .items
            .iter()
            .filter(|p| {
                p.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(HELD_ANNOTATION))
                    .is_some_and(|why| why.contains("its quota"))
            })
            .count();
        if told >= FLOOD - PER_NAMESPACE || Instant::now() > deadline {
            break told;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!("FAULT managed-quota: {told} pods held saying the quota is reached");
    assert_eq!(told, FLOOD - PER_NAMESPACE);
}

#[tokio::test]
async fn a_silent_registry_behind_four_managed_policies_does_not_hold_back_an_admins_policy() {
    let served = Served::start("faults-managed-silent").await;
    let (silent, open) = silent_server().await.expect("a silent registry");
    let pods = Api::<Pod>::namespaced(served.env.client.clone(), NAMESPACE);
    for i in 0..4 {
        let pod = by_ref(
            &format!("silent-{i}"),
            NAMESPACE,
            &format!("{silent}/silent-compat:v{i}"),
            "vanilla",
        );
        pods.create(&Default::default(), &pod)
            .await
            .expect("a pod naming the silent registry");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while managed_policies(&served).await.len() < 4 || *open.borrow() < 2 {
        assert!(
            Instant::now() < deadline,
            "the managed policies never reached the registry"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reaching = *open.borrow();
    served.push_flavor_artifact("ocifit/admin-compat:v1").await;
    let start = Instant::now();
    served
        .env
        .create_policy(&served.env.policy_on("admin", "ocifit/admin-compat:v1"))
        .await;
    // A policy's resolution against a registry that answers takes well under a second; one
    // held behind the four silent ones waits for their requests' timeouts (some 20 s).
    served
        .env
        .wait_status("admin", Duration::from_secs(10), "Ready", |s| {
            crate::support::is(s, "Ready", "True", "Resolved")
        })
        .await;
    println!(
        "FAULT managed-silent: 4 managed policies on a registry that never answers ({reaching} \
         connections open to it); an admin's policy Ready in {:?}",
        start.elapsed()
    );
}

/// A pod that sets ocifit's gate and held label itself, in a namespace the webhook does not
/// cover, is left alone: no policy is created for it and it is not released; a pod the webhook
/// held after it, in the namespace it covers, is.
#[tokio::test]
async fn a_pod_held_by_hand_where_the_webhook_does_not_look_is_left_alone() {
    let served = Served::start_with(
        "faults-managed-excluded",
        &["--webhook-configuration", "ocifit-faults"],
    )
    .await;
    let registry = served.env.registry();
    let excluded = "faults-excluded";
    create_namespace(&served.env.client, excluded)
        .await
        .expect("the namespace");
    let mine = registry.reference("ocifit/excluded-compat:v1");
    Api::<Pod>::namespaced(served.env.client.clone(), excluded)
        .create(
            &Default::default(),
            &held_by_hand("mine", excluded, &mine, "vanilla"),
        )
        .await
        .expect("a pod held by hand");
    let covered = registry.reference("ocifit/covered-compat:v1");
    Api::<Pod>::namespaced(served.env.client.clone(), NAMESPACE)
        .create(
            &Default::default(),
            &by_ref("covered", NAMESPACE, &covered, "vanilla"),
        )
        .await
        .expect("a pod the webhook holds");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !managed_policies(&served)
        .await
        .iter()
        .any(|(_, ns)| ns == NAMESPACE)
    {
        assert!(
            Instant::now() < deadline,
            "no managed policy for the covered pod"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let policies = managed_policies(&served).await;
    let still = Api::<Pod>::namespaced(served.env.client.clone(), excluded)
        .get("mine")
        .await
        .expect("the pod");
    println!(
        "FAULT managed-excluded: managed policies {policies:?}; the pod held by hand in \
         {excluded} keeps gates {:?}",
        gates(&still)
    );
    assert!(
        policies.iter().all(|(_, ns)| ns != excluded),
        "{policies:?}"
    );
    assert_eq!(gates(&still), [SCHEDULING_GATE]);
}

/// Pod lists (`LIST` of pods across the cluster) the apiserver has served so far, as its own
/// `apiserver_request_total` counts them.
async fn pod_lists(client: &kube::Client) -> u64 {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let text = client
        .request_text(request)
        .await
        .expect("the apiserver's metrics");
    let total: f64 = text
        .lines()
        .filter(|line| {
            line.starts_with("apiserver_request_total{")
                && line.contains("resource=\"pods\"")
                && line.contains("verb=\"LIST\"")
                && line.contains("scope=\"cluster\"")
        })
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    total as u64
}

/// Managed policies in use, and one collection pass a second: the apiserver serves one pod list
/// per pass (its pages), not one per policy.
#[tokio::test]
async fn the_collection_lists_pods_once_per_pass_however_many_managed_policies() {
    const POLICIES: usize = 30;
    const PAGE: usize = 20;
    let served = Served::start_with(
        "faults-managed-lists",
        &[
            "--image-ref-policy-ttl",
            "4s",
            "--image-ref-policies-per-namespace",
            &POLICIES.to_string(),
        ],
    )
    .await;
    let registry = served.env.registry();
    let references: Vec<String> = (0..POLICIES)
        .map(|i| registry.reference(&format!("ocifit/lists-compat:x{i}")))
        .collect();
    // Each policy in use from the start (a pod carries its name), so none is collected.
    let users = "faults-users";
    create_namespace(&served.env.client, users)
        .await
        .expect("the namespace");
    for (i, reference) in references.iter().enumerate() {
        let mut pod = TestPod::named(&format!("user-{i}"))
            .in_namespace(users)
            .build();
        pod.metadata
            .labels
            .get_or_insert_default()
            .insert(MANAGED_POLICY_LABEL.to_owned(), managed_name(reference));
        Api::<Pod>::namespaced(served.env.client.clone(), users)
            .create(&Default::default(), &pod)
            .await
            .expect("a pod using a managed policy");
    }
    for (i, reference) in references.iter().enumerate() {
        Api::<Pod>::namespaced(served.env.client.clone(), NAMESPACE)
            .create(
                &Default::default(),
                &by_ref(&format!("lists-{i}"), NAMESPACE, reference, "vanilla"),
            )
            .await
            .expect("a pod naming an artifact");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while managed_policies(&served).await.len() < POLICIES {
        assert!(
            Instant::now() < deadline,
            "{POLICIES} managed policies not created"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A pass a second (a quarter of the TTL, at least 1 s); nothing else lists pods meanwhile.
    let window = Duration::from_secs(20);
    let before = pod_lists(&served.env.client).await;
    tokio::time::sleep(window).await;
    let lists = pod_lists(&served.env.client).await - before;
    let passes = window.as_secs();
    let pages = POLICIES.div_ceil(PAGE) as u64;
    let (rss, peak) = served.rss_kib();
    println!(
        "FAULT managed-lists: {POLICIES} managed policies in use: {lists} pod LISTs in {window:?} \
         (a collection pass a second: {:.1} per pass, {pages} pages of the one list of {POLICIES} \
         pods using them); still {} managed policies; RSS {} MiB (peak {} MiB)",
        lists as f64 / passes as f64,
        managed_policies(&served).await.len(),
        rss / 1024,
        peak / 1024
    );
    assert!(
        lists <= (passes + 1) * pages,
        "{lists} pod lists in {passes} passes: more than one list per pass"
    );
    assert_eq!(managed_policies(&served).await.len(), POLICIES);
}
