//! `/placement` through the admission host's decoding and encoding: a selected pod is gated and
//! labelled by one patch, the patched pod sent again is left alone, and namespace selectors read
//! the namespace's labels from the store.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::core::v1::Namespace as NamespaceObject;
use k8s_openapi::api::core::v1::Pod;
use kube::core::{ObjectMeta, PartialObjectMeta};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::*;
use kube::ResourceExt;

use crate::admission::Route;
use crate::admission::review_fixtures::apiserver_review;
use crate::api::placement_pod::{POLICY_LABEL, SCHEDULING_GATE};
use crate::placement::ReadNamespace;
use crate::placement::fixtures::{labelled, map, pod, policy, without_the_gate};
use crate::placement::planner::Policy;
use crate::placement::planner::PolicySet;

fn namespaces(labelled: &[(&str, &[(&str, &str)])]) -> Store<PartialObjectMeta<NamespaceObject>> {
    let mut writer = Writer::<PartialObjectMeta<NamespaceObject>>::default();
    for (name, labels) in labelled {
        let object = PartialObjectMeta::<NamespaceObject> {
            metadata: ObjectMeta {
                name: Some((*name).to_owned()),
                labels: Some(map(labels)),
                ..ObjectMeta::default()
            },
            ..PartialObjectMeta::default()
        };
        writer.apply_watcher_event(&watcher::Event::Apply(object));
    }
    writer.as_reader()
}

fn route(policies: Vec<Policy>, store: Store<PartialObjectMeta<NamespaceObject>>) -> Route {
    let usable = UsablePolicies::default();
    usable.store(PolicySet::usable_only(policies));
    Route::new(
        PATH,
        GatePods {
            policies: usable,
            namespaces: store,
            read_namespace: None,
            own_namespace: "ocifit-system".to_owned(),
        },
    )
}

/// (outcome, reason, the pod after the patch, if any).
fn admit(route: &Route, pod: &Pod) -> (&'static str, &'static str, Pod) {
    let answer = route.answer(&serde_json::to_vec(&apiserver_review(pod, false)).unwrap());
    let review: Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(review["response"]["allowed"], json!(true));
    let mut object = serde_json::to_value(pod).unwrap();
    if let Some(patch) = review["response"]["patch"].as_str() {
        let patch: json_patch::Patch =
            serde_json::from_slice(&BASE64.decode(patch).unwrap()).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
    }
    (
        answer.outcome,
        answer.reason,
        serde_json::from_value(object).unwrap(),
    )
}

#[test]
fn a_selected_pod_is_gated_and_labelled_once_and_its_reinvocation_changes_nothing() {
    let route = route(vec![policy("default", json!({}))], namespaces(&[]));
    let (outcome, reason, gated) = admit(&route, &pod(&[("web", "nginx:1.27")]));
    assert_eq!((outcome, reason), ("patched", "Gated"));
    let gates = gated
        .spec
        .as_ref()
        .unwrap()
        .scheduling_gates
        .clone()
        .unwrap();
    assert_eq!(gates.len(), 1);
    assert_eq!(gates[0].name, SCHEDULING_GATE);
    assert_eq!(
        gated.metadata.labels.as_ref().unwrap()[POLICY_LABEL],
        "default"
    );
    // Nothing else changed but the container's termination message policy.
    assert_eq!(without_the_gate(&gated), pod(&[("web", "nginx:1.27")]));

    let (outcome, reason, again) = admit(&route, &gated);
    assert_eq!((outcome, reason), ("skipped", "AlreadyGated"));
    assert_eq!(again, gated);
}

#[test]
fn the_namespace_selector_reads_the_namespaces_labels_and_unselected_pods_pass_untouched() {
    let store = namespaces(&[("default", &[("placement", "enabled")])]);
    let chosen = policy(
        "arm",
        json!({"namespaceSelector": {"matchLabels": {"placement": "enabled"}}}),
    );
    let elsewhere = policy(
        "other",
        json!({"namespaceSelector": {"matchLabels": {"team": "x"}}}),
    );
    let (_, reason, gated) = admit(
        &route(vec![chosen, elsewhere.clone()], store.clone()),
        &pod(&[("web", "nginx")]),
    );
    assert_eq!(reason, "Gated");
    assert_eq!(gated.metadata.labels.unwrap()[POLICY_LABEL], "arm");

    let web = pod(&[("web", "nginx")]);
    let (outcome, reason, same) = admit(&route(vec![elsewhere], store), &web);
    assert_eq!((outcome, reason), ("skipped", "NoPlacementPolicy"));
    assert_eq!(same, web);
}

#[test]
fn an_opted_out_pod_and_a_namespace_missing_from_the_store_are_judged_without_error() {
    let route = route(
        vec![policy(
            "by-name",
            json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}}}),
        )],
        namespaces(&[]),
    );
    // The store has not seen `default` yet: its name label still selects it.
    let (_, reason, _) = admit(&route, &pod(&[("web", "nginx")]));
    assert_eq!(reason, "Gated");
    let opted_out = labelled(
        pod(&[("web", "nginx")]),
        &[("placement.ocifit.io/enabled", "false")],
    );
    let (outcome, reason, same) = admit(&route, &opted_out);
    assert_eq!((outcome, reason), ("skipped", "Excluded"));
    assert_eq!(same, opted_out);
}

#[test]
fn the_gate_counts_as_loaded_only_once_the_policies_were_stored_even_when_there_are_none() {
    let usable = UsablePolicies::default();
    assert!(!usable.stored(), "no list read yet is not an empty list");
    usable.store(PolicySet::default());
    assert!(usable.stored());
    assert!(usable.load().is_empty());
}

/// The gate over `store` reading a namespace it does not hold with `read`.
fn gate(store: Store<PartialObjectMeta<NamespaceObject>>, read: ReadNamespace) -> GatePods {
    let usable = UsablePolicies::default();
    usable.store(PolicySet::usable_only(vec![policy(
        "shop",
        json!({"namespaceSelector": {"matchLabels": {"placement": "enabled"}}}),
    )]));
    GatePods {
        policies: usable,
        namespaces: store,
        read_namespace: Some(read),
        own_namespace: "ocifit-system".to_owned(),
    }
}

/// The request the apiserver sends for `pod`.
fn request(pod: &Pod) -> Request<GatePod> {
    serde_json::from_value(apiserver_review(pod, false)["request"].take()).unwrap()
}

#[test]
fn a_namespace_created_with_its_first_pod_is_read_so_its_labels_select_the_pod() {
    // `kubectl apply` of a labelled Namespace and a Deployment: the Deployment's pods reach
    // admission before the namespace reaches the watch.
    let labels = map(&[
        ("placement", "enabled"),
        ("kubernetes.io/metadata.name", "default"),
    ]);
    let gate = gate(
        namespaces(&[]),
        ReadNamespace::new(move |_: &str| Some(labels.clone())),
    );
    let pod = pod(&[("web", "nginx:1.27")]);
    assert_eq!(
        gate.plan_now(&request(&pod)),
        None,
        "declined on the worker"
    );
    let route = Route::new(PATH, gate);
    let (outcome, reason, gated) = admit(&route, &pod);
    assert_eq!((outcome, reason), ("patched", "Gated"));
    assert_eq!(
        gated.labels().get(POLICY_LABEL).map(String::as_str),
        Some("shop")
    );
}

#[test]
fn a_namespace_that_cannot_be_read_in_time_counts_with_its_name_label_alone() {
    let route = Route::new(
        PATH,
        gate(namespaces(&[]), ReadNamespace::new(|_: &str| None)),
    );
    let (outcome, reason, _) = admit(&route, &pod(&[("web", "nginx:1.27")]));
    assert_eq!((outcome, reason), ("skipped", "NoPlacementPolicy"));
}

#[test]
fn a_namespace_in_the_store_is_never_read() {
    let gate = gate(
        namespaces(&[("default", &[("placement", "enabled")])]),
        ReadNamespace::new(|namespace: &str| panic!("namespace {namespace} read although stored")),
    );
    let pod = pod(&[("web", "nginx:1.27")]);
    assert!(matches!(
        gate.plan_now(&request(&pod)),
        Some(GatePlan::Gate { .. })
    ));
}

#[test]
fn the_gate_refuses_a_field_it_reads_of_the_wrong_type_by_its_path_and_leaves_the_rest_to_the_apiserver()
 {
    let route = route(vec![policy("default", json!({}))], namespaces(&[]));
    let body = |mutate: &dyn Fn(&mut Value)| {
        let mut review = apiserver_review(&pod(&[("web", "app:v1")]), false);
        mutate(&mut review["request"]["object"]);
        serde_json::to_vec(&review).unwrap()
    };
    let wrong = route.answer(&body(&|pod| pod["spec"]["nodeName"] = json!(5)));
    assert_eq!(
        (wrong.outcome, wrong.reason),
        ("denied", "UnreadableObject")
    );
    let review: Value = serde_json::from_slice(&wrong.body).unwrap();
    let message = review["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("spec.nodeName"), "{message}");
    // A container's image is not the gate's to read: the pod is gated, and the apiserver's own
    // validation answers for the image.
    let unread = route.answer(&body(&|pod| {
        pod["spec"]["containers"][0]["image"] = json!(5);
    }));
    assert_eq!((unread.outcome, unread.reason), ("patched", "Gated"));
}
