//! `requireNodeLabels`: each architecture's required node labels in the pinning.

use std::collections::BTreeSet;

use serde_json::json;

use super::*;

const POOL: &str = "node.example.com/pool";

/// arm64 nodes must be in the graviton pool; amd64 nodes as `amd64_labels` says.
fn labelled_policy(amd64_labels: serde_json::Value) -> Policy {
    policy(
        "default",
        json!({"architectures": [
            {"name": "arm64", "requireNodeLabels": {POOL: "graviton"}},
            {"name": "amd64", "requireNodeLabels": amd64_labels}
        ]}),
    )
}

fn arch(values: &[&str]) -> k8s_openapi::api::core::v1::NodeSelectorRequirement {
    req("kubernetes.io/arch", "In", values)
}

fn linux() -> k8s_openapi::api::core::v1::NodeSelectorRequirement {
    req("kubernetes.io/os", "In", &["linux"])
}

#[test]
fn labels_every_architecture_shares_are_anded_into_every_term() {
    let policy = labelled_policy(json!({POOL: "graviton"}));
    let none = BTreeSet::new();
    let mut pod = gated(&[("web", "w")]);
    pod.spec.as_mut().unwrap().affinity = Some(required(vec![
        exprs(vec![req("zone", "In", &["a"])]),
        exprs(vec![req("zone", "In", &["b"])]),
    ]));
    let plan = plan_release(
        &pod,
        &[inspected("web", &["linux/amd64", "linux/arm64"])],
        context(&policy, &none, 3),
    );
    assert_eq!(plan.outcome, Some(Outcome::Constrained));
    let pinned = |zone: &str| {
        exprs(vec![
            req("zone", "In", &[zone]),
            arch(&["amd64", "arm64"]),
            linux(),
            req(POOL, "In", &["graviton"]),
        ])
    };
    assert_eq!(required_terms(&plan.pod), [pinned("a"), pinned("b")]);
    assert_eq!(plan.events.len(), 1, "{:?}", plan.events);
}

#[test]
fn a_pod_without_terms_of_its_own_gets_one_term_per_set_of_labels() {
    let policy = labelled_policy(json!({}));
    let none = BTreeSet::new();
    let plan = plan_release(
        &gated(&[("web", "w")]),
        &[inspected("web", &["linux/amd64", "linux/arm64"])],
        context(&policy, &none, 3),
    );
    assert_eq!(plan.outcome, Some(Outcome::Constrained));
    // amd64 with no label, or arm64 in the graviton pool: exactly what the policy says.
    assert_eq!(
        required_terms(&plan.pod),
        [
            exprs(vec![arch(&["amd64"]), linux()]),
            exprs(vec![
                arch(&["arm64"]),
                linux(),
                req(POOL, "In", &["graviton"])
            ]),
        ]
    );
    assert_eq!(
        annotation(&plan.pod, PLATFORMS_ANNOTATION),
        Some("linux/amd64,linux/arm64")
    );
    assert!(plan.events.iter().all(|e| !e.warning), "{:?}", plan.events);
}

#[test]
fn a_pod_with_its_own_terms_is_narrowed_to_one_set_of_labels_with_a_warning() {
    let policy = labelled_policy(json!({}));
    let none = BTreeSet::new();
    let mut pod = gated(&[("web", "w")]);
    pod.spec.as_mut().unwrap().affinity =
        Some(required(vec![exprs(vec![req("zone", "In", &["a"])])]));
    let plan = plan_release(
        &pod,
        &[inspected("web", &["linux/amd64", "linux/arm64"])],
        context(&policy, &none, 3),
    );
    assert_eq!(plan.outcome, Some(Outcome::Constrained));
    // Equal groups: the first architecture by name wins; its term is narrowed, none is added.
    assert_eq!(
        required_terms(&plan.pod),
        [exprs(vec![
            req("zone", "In", &["a"]),
            arch(&["amd64"]),
            linux()
        ])]
    );
    assert_eq!(
        annotation(&plan.pod, PLATFORMS_ANNOTATION),
        Some("linux/amd64")
    );
    let warning = plan
        .events
        .iter()
        .find(|e| e.warning)
        .expect("a warning Event");
    assert_eq!(warning.reason, "ArchitecturesNarrowed");
    assert!(
        warning.message.contains("could also run on arm64"),
        "{}",
        warning.message
    );
}

#[test]
fn the_set_of_labels_the_pods_own_terms_allow_is_the_one_kept() {
    let policy = labelled_policy(json!({}));
    let none = BTreeSet::new();
    let mut pod = gated(&[("web", "w")]);
    pod.spec.as_mut().unwrap().affinity =
        Some(required(vec![exprs(vec![arch(&["arm64", "s390x"])])]));
    let plan = plan_release(
        &pod,
        &[inspected("web", &["linux/amd64", "linux/arm64"])],
        context(&policy, &none, 3),
    );
    assert_eq!(
        required_terms(&plan.pod),
        [exprs(vec![
            arch(&["arm64", "s390x"]),
            arch(&["arm64"]),
            linux(),
            req(POOL, "In", &["graviton"]),
        ])]
    );
}

#[test]
fn a_label_no_node_can_carry_makes_the_policy_unusable() {
    let stored: crate::api::PlacementPolicy = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "PlacementPolicy",
        "metadata": {"name": "bad"},
        "spec": {"architectures": [{"name": "arm64", "requireNodeLabels": {"pool": "not a value"}}]}
    }))
    .unwrap();
    let err = Policy::compile(&stored).unwrap_err().to_string();
    assert!(err.contains("requireNodeLabels"), "{err}");
    assert!(err.contains("\"not a value\""), "{err}");
}
