//! Which image, which classes, and every denial that comes from nodes and status.

use serde_json::json;

use super::fixtures::*;
use crate::api::pod::{DECISION_ARTIFACT_DIGEST, DECISION_CLASSES, DECISION_POLICY};
use crate::image_selection::planner::{Decision, ImagePlan};
use ocifit_testkit::affinity::required_terms;

fn flavors(spec: serde_json::Value) -> crate::api::ImageSelectionPolicy {
    resolved(policy("flavors", spec))
}

fn decision(plan: &ImagePlan) -> Decision {
    match plan {
        ImagePlan::Patch { decision, .. } => *decision,
        other => panic!("expected a patch, got {other:?}"),
    }
}

#[test]
fn nodes_of_one_class_get_its_image_with_the_decision_recorded() {
    let index = index(&[flavors(json!({}))]);
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"zone": "a"}}));
    let plan = plan(&index, &pod);
    assert_eq!(decision(&plan), Decision::Selected);
    assert!(plan.warnings().is_empty());
    let after = patched(&pod, &plan);
    assert_eq!(image_of(&after, "app"), "debian:11");
    assert_eq!(
        annotation(&after, DECISION_POLICY).as_deref(),
        Some("flavors")
    );
    assert_eq!(
        annotation(&after, DECISION_ARTIFACT_DIGEST).as_deref(),
        Some(DIGEST)
    );
    let classes = annotation(&after, DECISION_CLASSES).unwrap();
    assert!(
        classes.starts_with("c-") && !classes.contains(','),
        "{classes}"
    );
    assert_eq!(
        after.spec.as_ref().unwrap().affinity,
        None,
        "no pinning needed"
    );
}

#[test]
fn nodes_of_different_classes_with_one_image_need_no_pin() {
    let mut policy = policy("flavors", json!({}));
    let images = [
        ("vanilla", Some("debian:11"), 0),
        ("chocolate", Some("debian:11"), 0),
    ];
    policy.status = Some(status_over(&policy, &inventory(), &images));
    let index = index(&[policy]);
    let pod = simple_pod(
        json!({}),
        json!({"nodeSelector": {"kubernetes.io/arch": "amd64"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "flavor", "operator": "In", "values": ["vanilla", "chocolate"]}]}]}}}}),
    );
    let plan = plan(&index, &pod);
    assert_eq!(decision(&plan), Decision::Selected);
    let after = patched(&pod, &plan);
    assert_eq!(image_of(&after, "app"), "debian:11");
    assert_eq!(
        annotation(&after, DECISION_CLASSES)
            .unwrap()
            .split(',')
            .count(),
        2
    );
    assert_eq!(placed_on(&after), ["n1", "n2", "n3"], "affinity untouched");
}

#[test]
fn disagreeing_nodes_pin_the_pod_to_the_image_covering_most_nodes() {
    let index = index(&[flavors(json!({}))]);
    let pod = simple_pod(json!({}), json!({}));
    let plan = plan(&index, &pod);
    assert_eq!(decision(&plan), Decision::Pinned);
    let warnings = plan.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("image debian:11"), "{warnings:?}");
    let after = patched(&pod, &plan);
    assert_eq!(image_of(&after, "app"), "debian:11");
    assert_eq!(placed_on(&after), ["n1", "n2"]);
}

#[test]
fn a_tie_in_nodes_goes_to_the_class_with_the_higher_match_weight() {
    // One vanilla node (weight 0) and one chocolate node (weight 5), chosen by name in two
    // terms: chocolate wins, and the pin is ANDed into both terms.
    let index = index(&[flavors(json!({}))]);
    let pod = simple_pod(
        json!({}),
        json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}]}},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
            "podAffinityTerm": {"topologyKey": "zone"}}]}}}),
    );
    let plan = plan(&index, &pod);
    assert_eq!(decision(&plan), Decision::Pinned);
    let after = patched(&pod, &plan);
    assert_eq!(image_of(&after, "app"), "ubuntu:24.04");
    assert_eq!(placed_on(&after), ["n3"]);
    let affinity = after.spec.as_ref().unwrap().affinity.as_ref().unwrap();
    assert!(affinity.pod_anti_affinity.is_some(), "other affinity kept");
    let terms = required_terms(affinity);
    assert_eq!(
        terms.len(),
        2,
        "the class is ANDed into every term: {terms:?}"
    );
    assert!(
        terms
            .iter()
            .all(|t| t.match_fields.is_some() && t.match_expressions.is_some())
    );
}

#[test]
fn equal_nodes_and_weights_go_to_the_class_whose_name_sorts_first() {
    let mut policy = policy("flavors", json!({}));
    let images = [
        ("vanilla", Some("debian:11"), 3),
        ("chocolate", Some("ubuntu:24.04"), 3),
    ];
    policy.status = Some(status_over(&policy, &inventory(), &images));
    let status = policy.status.clone().unwrap();
    let first = status
        .classes
        .iter()
        .filter(|c| c.image.is_some())
        .min_by_key(|c| &c.name);
    let expected = first.unwrap().image.clone().unwrap();
    let index = index(&[policy]);
    let pod = simple_pod(
        json!({}),
        json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}]}]}}}}),
    );
    let after = patched(&pod, &plan(&index, &pod));
    assert_eq!(image_of(&after, "app"), expected);
}

#[test]
fn on_unpinned_deny_names_every_class_and_its_image() {
    let index = index(&[flavors(json!({"onUnpinned": "Deny"}))]);
    let pod = simple_pod(json!({}), json!({}));
    let plan = plan(&index, &pod);
    let (reason, message) = denied(&plan);
    assert_eq!(reason, "Unpinned");
    for part in [
        "→ debian:11 (2 nodes)",
        "→ ubuntu:24.04 (1 node)",
        "→ no compatible image (1 node)",
        "onUnpinned: Deny",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message}");
    }
}

#[test]
fn no_candidate_node_names_the_pod_selector_and_the_policy_selector() {
    let index = index(&[flavors(json!({}))]);
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"zone": "z"}}));
    let (reason, message) = denied(&plan(&index, &pod));
    assert_eq!(reason, "NoCandidateNode");
    assert!(message.contains("nodeSelector {zone=z}"), "{message}");
    assert!(
        message.contains("every node but control-plane nodes"),
        "{message}"
    );

    let mut zoned = policy("zoned", json!({"nodeSelector": {"zone": "b"}}));
    zoned.status = Some(status_over(&zoned, &inventory(), &flavor_images()));
    let index = super::fixtures::index(&[zoned]);
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"zone": "a"}}));
    let (reason, message) = denied(&plan(&index, &pod));
    assert_eq!(reason, "NoCandidateNode");
    assert!(
        message.contains("counts (nodeSelector {zone=b})"),
        "{message}"
    );
}

#[test]
fn a_policy_without_status_is_not_ready_and_the_pod_is_held() {
    let index = index(&[policy("flavors", json!({}))]);
    let pod = simple_pod(json!({}), json!({}));
    let (reason, message) = held_for(&plan(&index, &pod));
    assert_eq!(reason, "PolicyNotReady");
    assert!(
        message.contains("ImageSelectionPolicy flavors is not ready"),
        "{message}"
    );
}

#[test]
fn a_class_missing_from_status_is_not_ready_rather_than_guessed() {
    // Status drawn before the strawberry node joined.
    let mut policy = policy("flavors", json!({}));
    let before: Vec<_> = inventory().into_iter().filter(|(n, _)| n != "n4").collect();
    policy.status = Some(status_over(&policy, &before, &flavor_images()));
    let index = index(&[policy]);
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"zone": "b"}}));
    let (reason, message) = held_for(&plan(&index, &pod));
    assert_eq!(reason, "PolicyNotReady");
    assert!(
        message.contains("(nodes n4) is not in its status yet"),
        "{message}"
    );
    // Pods that avoid the new node are served as before.
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"zone": "a"}}));
    assert!(matches!(plan(&index, &pod), ImagePlan::Patch { .. }));
}

#[test]
fn no_compatible_image_denies_with_the_class_reason() {
    let index = index(&[flavors(json!({}))]);
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"flavor": "strawberry"}}));
    let (reason, message) = denied(&plan(&index, &pod));
    assert_eq!(reason, "NoMatch");
    assert!(
        message.contains("no set matches flavor strawberry"),
        "{message}"
    );
}

#[test]
fn no_compatible_image_uses_the_fallback_image() {
    let index = index(&[flavors(json!({"fallbackImage": "busybox:1"}))]);
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"flavor": "strawberry"}}));
    let plan = plan(&index, &pod);
    assert_eq!(decision(&plan), Decision::Fallback);
    assert!(plan.warnings()[0].contains("fallback image busybox:1"));
    assert_eq!(image_of(&patched(&pod, &plan), "app"), "busybox:1");
}

#[test]
fn a_matched_image_beats_the_fallback_when_some_nodes_have_none() {
    let index = index(&[flavors(json!({"fallbackImage": "busybox:1"}))]);
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"zone": "b"}}));
    let plan = plan(&index, &pod);
    assert_eq!(decision(&plan), Decision::Pinned);
    let after = patched(&pod, &plan);
    assert_eq!(image_of(&after, "app"), "ubuntu:24.04");
    assert_eq!(placed_on(&after), ["n3"]);
}

#[test]
fn on_no_match_allow_admits_the_pod_unchanged_with_a_warning() {
    let index = index(&[flavors(json!({"onNoMatch": "Allow"}))]);
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"flavor": "strawberry"}}));
    let plan = plan(&index, &pod);
    let (reason, message) = skipped(&plan);
    assert_eq!(reason, "NoMatchAllowed");
    assert!(
        message.contains("no set matches flavor strawberry"),
        "{message}"
    );
    assert!(message.contains("onNoMatch: Allow"), "{message}");
    assert_eq!(plan.warnings(), [message.to_owned()]);
}

#[test]
fn a_malformed_required_affinity_is_denied_with_the_requirement() {
    let index = index(&[flavors(json!({}))]);
    let pod = simple_pod(
        json!({}),
        json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In"}]}]}}}}),
    );
    let (reason, message) = denied(&plan(&index, &pod));
    assert_eq!(reason, "InvalidAffinity");
    assert!(
        message.contains("nodeSelectorTerms[0].matchExpressions[0]"),
        "{message}"
    );
}

#[test]
fn metric_labels_name_outcome_and_reason() {
    let index = index(&[flavors(json!({}))]);
    let selected = plan(
        &index,
        &simple_pod(json!({}), json!({"nodeSelector": {"zone": "a"}})),
    );
    assert_eq!(
        (selected.outcome(), selected.reason()),
        ("patched", "ImageSelected")
    );
    let none = plan(
        &index,
        &simple_pod(json!({}), json!({"nodeSelector": {"zone": "z"}})),
    );
    assert_eq!(
        (none.outcome(), none.reason()),
        ("denied", "NoCandidateNode")
    );
}

#[test]
fn a_remembered_placement_is_kept_apart_per_policy_node_set() {
    // The same pod placement (none) under two policies counting different nodes, planned in
    // turn against one index: each answer comes from its own policy's nodes.
    let mut zone_a = policy(
        "zone-a",
        json!({"nodeSelector": {"zone": "a"}, "targetImage": "a:0"}),
    );
    zone_a.status = Some(status_over(&zone_a, &inventory(), &flavor_images()));
    let mut zone_b = policy(
        "zone-b",
        json!({"nodeSelector": {"zone": "b"}, "targetImage": "b:0",
        "onUnpinned": "Deny"}),
    );
    zone_b.status = Some(status_over(&zone_b, &inventory(), &flavor_images()));
    let index = index(&[zone_a, zone_b]);
    for _ in 0..2 {
        let pod = simple_pod(
            json!({}),
            json!({"containers": [{"name": "app", "image": "a:0"}]}),
        );
        let after = patched(&pod, &plan(&index, &pod));
        assert_eq!(image_of(&after, "app"), "debian:11");
        let pod = simple_pod(
            json!({}),
            json!({"containers": [{"name": "app", "image": "b:0"}]}),
        );
        let (reason, message) = denied(&plan(&index, &pod));
        assert_eq!(reason, "Unpinned");
        assert!(!message.contains("debian:11"), "{message}");
    }
}

#[test]
fn classes_drawn_on_nfd_features_are_pinned_by_node_name() {
    use std::collections::{BTreeMap, BTreeSet};

    use crate::classes::Placement;
    use crate::classes::group;
    use crate::engine::{FeatureReads, Features, NodeInputs, Reads};

    let node = |name: &str, flag: &str| {
        let features = Features {
            flags: BTreeMap::from([("cpu.cpuid".to_owned(), BTreeSet::from([flag.to_owned()]))]),
            ..Features::default()
        };
        let labels = labels(&[
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/os", "linux"),
        ]);
        (
            name.to_owned(),
            NodeInputs::new(labels).with_features(Some(features)),
        )
    };
    let nodes = [
        node("a1", "AVX512F"),
        node("a2", "AVX512F"),
        node("b1", "SSE4"),
    ];
    let reads = Reads {
        labels: BTreeSet::new(),
        features: BTreeMap::from([(
            "cpu.cpuid".to_owned(),
            FeatureReads {
                elements: BTreeSet::from(["AVX512F".to_owned()]),
                names: false,
            },
        )]),
    };
    let mut policy = policy("cpu", json!({}));
    let mut status = status_over(&policy, &[], &[]);
    status.classes = group(&reads, nodes.iter().map(|(n, i)| (n.as_str(), i)))
        .into_iter()
        .map(|class| {
            let fast = class.nodes.contains(&"a1".to_owned());
            crate::api::ClassStatus {
                image: Some(if fast { "fast:1" } else { "slow:1" }.to_owned()),
                nodes: class.nodes.len() as i32,
                name: class.name,
                labels: class.labels,
                matched: None,
                reason: None,
            }
        })
        .collect();
    status.class_keys = Some(reads);
    policy.status = Some(status);
    let index = index_over(&[policy], &nodes);
    let pod = simple_pod(json!({}), json!({}));
    let plan = index.plan(&request(&pod, false));
    assert_eq!(decision(&plan), Decision::Pinned);
    let after = patched(&pod, &plan);
    assert_eq!(image_of(&after, "app"), "fast:1");
    let placement = Placement::from_pod_spec(after.spec.as_ref().unwrap()).unwrap();
    let placed: Vec<&str> = nodes
        .iter()
        .filter(|(n, i)| placement.matches(&node_meta(n, &i.labels)))
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(placed, ["a1", "a2"]);
}

#[test]
fn a_status_from_another_artifact_source_serves_no_image() {
    let mut changed = policy("flavors", json!({}));
    let mut status = status_over(&changed, &inventory(), &flavor_images());
    let artifact = status.artifact.as_mut().unwrap();
    artifact.source = Some(changed.spec.artifact.source_digest());
    let same = index(&[{
        let mut p = changed.clone();
        p.status = Some(status.clone());
        p
    }]);
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"zone": "a"}}));
    assert!(matches!(plan(&same, &pod), ImagePlan::Patch { .. }));
    // The spec now names another artifact; the status is still the old one's.
    changed.spec.artifact.reference = Some("registry.local/other:v2".into());
    changed.status = Some(status);
    let (reason, _) = held_for(&plan(&index(&[changed]), &pod));
    assert_eq!(reason, "PolicyNotReady");
}
