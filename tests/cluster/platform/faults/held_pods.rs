//! Pods ocifit cannot decide yet are held, never refused. A new policy whose registry answers only later (frozen while the pods come), and 200 opted-in
//! pods naming it created right after it: none is refused, each is admitted held by image
//! selection's scheduling gate with its placeholder, and once the registry answers and the
//! policy resolves every one is released with its flavor's image, the gate and the held label
//! gone, and an Event on the pod saying so. A pod naming by `image-ref` an artifact no policy uses
//! gets a managed policy and, once it resolves, its class's image.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use ocifit::api::pod::{
    HELD_ANNOTATION, HELD_LABEL, IMAGE_REF_ANNOTATION, MANAGED_LABEL, MANAGED_POLICY_LABEL, POLICY,
    SCHEDULING_GATE,
};
use ocifit::image_selection::managed_name;

use super::{AT_ONCE, NAMESPACE, Served, create_in_bursts};
use crate::support::FLAVOR;
use crate::support::objects::{OptIn, TestPod};
use crate::support::placement::gates;
use crate::support::webhook::image;

const PODS: usize = 200;
const PLACEHOLDER: &str = "placeholder:slow";
const SLOW_ARTIFACT: &str = "ocifit/slow-compat:v1";
const REF_ONLY_ARTIFACT: &str = "ocifit/ref-only-compat:v1";
const LATE_ARTIFACT: &str = "ocifit/late-compat:v1";
/// The label telling this batch apart from the suite's probe.
const BATCH: &str = "batch";
/// How long the released pods may take once the registry answers again (the policy's
/// resolution retries after its backoff first).
const RELEASED_WITHIN: Duration = Duration::from_secs(120);

fn held_pod(name: &str, flavor: &str) -> Pod {
    TestPod::named(name)
        .opted_in()
        .label(POLICY, "slow")
        .label(BATCH, "held")
        .label(FLAVOR, flavor)
        .image(PLACEHOLDER)
        .node_selector(FLAVOR, flavor)
        .build()
}

#[tokio::test]
async fn pods_created_before_their_new_policy_resolves_are_held_then_get_their_class_image() {
    let served = Arc::new(Served::start("faults-held").await);
    served.push_flavor_artifact(SLOW_ARTIFACT).await;
    served.env.registry().pause().expect("the registry frozen");
    let started = Instant::now();
    served
        .env
        .create_policy(
            &served
                .env
                .policy_on("slow", SLOW_ARTIFACT)
                .target_image(PLACEHOLDER),
        )
        .await;
    let pods = Api::<Pod>::namespaced(served.env.client.clone(), NAMESPACE);
    let results = create_in_bursts(PODS, |i, flavor| {
        let pods = pods.clone();
        async move {
            pods.create(&Default::default(), &held_pod(&format!("held-{i}"), flavor))
                .await
        }
    })
    .await;
    let (mut held, mut refused, mut other) = (0, 0, 0);
    for result in results {
        match result {
            Ok(pod)
                if gates(&pod) == [SCHEDULING_GATE]
                    && image(&pod) == PLACEHOLDER
                    && pod.metadata.labels.as_ref().and_then(|l| l.get(HELD_LABEL))
                        == Some(&"true".to_owned()) =>
            {
                held += 1
            }
            Ok(pod) => {
                eprintln!(
                    "admitted but not held: {:?} {:?}",
                    pod.metadata.annotations,
                    gates(&pod)
                );
                other += 1;
            }
            Err(error) => {
                eprintln!("refused: {error}");
                refused += 1;
            }
        }
    }
    let creations = started.elapsed();
    let resolving = served.env.status("slow").await;
    assert!(
        resolving.as_ref().is_none_or(|s| s.classes.is_empty()),
        "the policy resolved with its registry frozen: {resolving:?}"
    );
    served.env.registry().resume().expect("the registry thawed");
    let thawed = Instant::now();
    let (released, wrong) = all_released(&served).await;
    let took = thawed.elapsed();
    eprintln!(
        "FAULT held-pods: policy and {PODS} pods created in {creations:?} ({AT_ONCE} at once): \
         held {held}, refused {refused}, other {other}; registry thawed, every pod released with \
         its class image in {took:?}"
    );
    assert_eq!((held, refused, other), (PODS, 0, 0));
    assert_eq!(released.len(), PODS);
    assert!(wrong.is_empty(), "released with another image: {wrong:?}");
    let note = release_event(&served, "held-0").await;
    assert!(note.starts_with("released from scheduling gate"), "{note}");
}

/// Waits (10 s at most) for the `ImageSelected` Event on pod `name`; its note.
async fn release_event(served: &Served, name: &str) -> String {
    let events: Api<Event> = Api::namespaced(served.env.client.clone(), NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = events.list(&ListParams::default()).await.expect("events");
        let found = listed.items.into_iter().find(|event| {
            let regarding = event.regarding.as_ref();
            regarding.and_then(|r| r.name.as_deref()) == Some(name)
                && regarding.and_then(|r| r.kind.as_deref()) == Some("Pod")
                && event.reason.as_deref() == Some("ImageSelected")
        });
        if let Some(event) = found {
            return event.note.unwrap_or_default();
        }
        assert!(
            Instant::now() < deadline,
            "no ImageSelected Event on pod {name}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every pod of the batch has neither the gate nor the held label; the released
/// pods by name, and those whose image is not their flavor's (name, image).
async fn all_released(served: &Served) -> (BTreeMap<String, String>, Vec<(String, String)>) {
    let pods = Api::<Pod>::namespaced(served.env.client.clone(), NAMESPACE);
    let batch = ListParams::default().labels(&format!("{BATCH}=held"));
    let deadline = Instant::now() + RELEASED_WITHIN;
    loop {
        let listed = pods.list(&batch).await.expect("the batch");
        let released: Vec<&Pod> = listed
            .items
            .iter()
            .filter(|pod| {
                gates(pod).is_empty()
                    && !pod
                        .metadata
                        .labels
                        .as_ref()
                        .is_some_and(|l| l.contains_key(HELD_LABEL))
            })
            .collect();
        if released.len() == PODS {
            let mut wrong = Vec::new();
            let mut by_name = BTreeMap::new();
            for pod in released {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let flavor = pod.metadata.labels.as_ref().and_then(|l| l.get(FLAVOR));
                let expected = flavor.map(|f| served.by_flavor[f.as_str()].as_str());
                if expected != Some(image(pod)) {
                    wrong.push((name.clone(), image(pod).to_owned()));
                }
                by_name.insert(name, image(pod).to_owned());
            }
            return (by_name, wrong);
        }
        assert!(
            Instant::now() < deadline,
            "{} of {PODS} pods released within {RELEASED_WITHIN:?}",
            released.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The seed's way: a pod naming by `image-ref` an artifact no policy uses. The leader creates a
/// managed policy for it (the test registry is on loopback: the suite's `ocifit run` allows
/// private registries), and the pod, held meanwhile, ends with its class's image; deleted, it
/// leaves the policy unused, and the policy is deleted after the TTL.
#[tokio::test]
async fn a_pod_with_only_an_image_ref_gets_a_managed_policy_and_its_class_image() {
    let served = Served::start_with("faults-image-ref", &["--image-ref-policy-ttl", "2s"]).await;
    served.push_flavor_artifact(REF_ONLY_ARTIFACT).await;
    let reference = served.env.registry().reference(REF_ONLY_ARTIFACT);
    let mut pod = TestPod::named("ref-only")
        .opted_in()
        .label(BATCH, "ref-only")
        .image("placeholder:ref")
        .node_selector(FLAVOR, "chocolate")
        .build();
    pod.metadata.annotations = Some(BTreeMap::from([(
        IMAGE_REF_ANNOTATION.to_owned(),
        reference.clone(),
    )]));
    let pods = Api::<Pod>::namespaced(served.env.client.clone(), NAMESPACE);
    let created = Instant::now();
    let admitted = pods
        .create(&Default::default(), &pod)
        .await
        .expect("admitted, not refused");
    assert_eq!(gates(&admitted), [SCHEDULING_GATE]);
    assert_eq!(image(&admitted), "placeholder:ref");
    let deadline = created + RELEASED_WITHIN;
    let released = loop {
        let now = pods.get("ref-only").await.expect("the pod");
        if gates(&now).is_empty() {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "not released within {RELEASED_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let chosen = created.elapsed();
    eprintln!("FAULT image-ref: pod created → image chosen (released) in {chosen:?}");
    assert_eq!(image(&released), served.by_flavor["chocolate"]);
    let policy = served
        .env
        .policies()
        .get(&managed_name(&reference))
        .await
        .expect("the managed policy");
    assert_eq!(
        policy.spec.artifact.reference.as_deref(),
        Some(reference.as_str())
    );
    assert_eq!(
        policy
            .metadata
            .labels
            .unwrap_or_default()
            .get(MANAGED_LABEL)
            .map(String::as_str),
        Some("true")
    );
    let labels = released.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get(MANAGED_POLICY_LABEL),
        Some(&managed_name(&reference))
    );
    // While the pod exists the policy stays; once no pod uses it for the TTL, it goes.
    pods.delete("ref-only", &Default::default())
        .await
        .expect("the pod deleted");
    let deleted = Instant::now();
    let deadline = deleted + Duration::from_secs(30);
    while served
        .env
        .policies()
        .get_opt(&managed_name(&reference))
        .await
        .expect("a read")
        .is_some()
    {
        assert!(
            Instant::now() < deadline,
            "the unused managed policy is still there"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "FAULT image-ref: unused managed policy deleted {:?} after its last pod (TTL 2s)",
        deleted.elapsed()
    );
}

/// A held pod whose pinning Kubernetes does not allow on a gated pod (its two required terms
/// would become one): the apiserver refuses the release, and under the default failure rule
/// (`Fail`) the pod stays held, the annotation and a Warning Event saying why.
#[tokio::test]
async fn a_release_the_apiserver_refuses_keeps_the_pod_held_saying_why() {
    let served = Served::start("faults-held-refused").await;
    served.push_flavor_artifact(LATE_ARTIFACT).await;
    served.env.registry().pause().expect("the registry frozen");
    served
        .env
        .create_policy(
            &served
                .env
                .policy_on("late", LATE_ARTIFACT)
                .target_image("placeholder:late"),
        )
        .await;
    let mut pod = TestPod::named("two-terms")
        .opted_in()
        .label(POLICY, "late")
        .image("placeholder:late")
        .build();
    let term = |flavors: &[&str]| NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: FLAVOR.to_owned(),
            operator: "In".to_owned(),
            values: Some(flavors.iter().map(|f| (*f).to_owned()).collect()),
        }]),
        match_fields: None,
    };
    pod.spec.as_mut().expect("a spec").affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![term(&["vanilla", "chocolate"]), term(&["strawberry"])],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    });
    let pods = Api::<Pod>::namespaced(served.env.client.clone(), NAMESPACE);
    let admitted = pods
        .create(&Default::default(), &pod)
        .await
        .expect("admitted, not refused");
    assert_eq!(gates(&admitted), [SCHEDULING_GATE]);
    served.env.registry().resume().expect("the registry thawed");
    served.env.wait_ready("late").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let why = loop {
        let now = pods.get("two-terms").await.expect("the pod");
        if let Some(why) = now
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(HELD_ANNOTATION))
        {
            assert_eq!(gates(&now), [SCHEDULING_GATE]);
            assert_eq!(image(&now), "placeholder:late");
            break why.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no reason written on the held pod"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        why.starts_with("the apiserver refused the release"),
        "{why}"
    );
}
