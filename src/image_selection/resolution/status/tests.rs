use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::reason_from;
use super::*;
use crate::api::ConditionType;
use crate::api::{ArtifactSource, OnNoMatch, OnUnpinned};
use crate::engine::{Artifact, Format};
use crate::image_selection::resolution::PlatformLookup;
use crate::image_selection::resolution::{AttachedArtifact, CandidateArtifact, Content, Resolved};
use crate::platform::Platform;

const FLAVORS: &str = include_str!("../../../../example/flavor-compat.json");
const IMAGES: [&str; 3] = ["debian:11", "ubuntu:24.04", "rockylinux:9"];

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(1_800_000_000 + seconds).unwrap())
}

fn spec() -> ImageSelectionPolicySpec {
    ImageSelectionPolicySpec {
        artifact: ArtifactSource {
            reference: Some("127.0.0.1:5000/ocifit/flavor-compat:v1".into()),
            candidates: None,
            refresh_interval: None,
            pull_secret_ref: None,
        },
        target_image: "placeholder:latest".into(),
        node_selector: BTreeMap::new(),
        on_unpinned: OnUnpinned::Pin,
        on_no_match: OnNoMatch::Deny,
        fallback_image: None,
        include_init_containers: false,
    }
}

fn resolved(digest: &str) -> Resolved {
    Resolved {
        digest: digest.into(),
        format: Format::Ocifit,
        content: Content::Sets(Artifact::parse(Format::Ocifit, FLAVORS.as_bytes()).unwrap()),
    }
}

fn node(name: &str, flavor: &str, arch: &str) -> (String, NodeInputs) {
    let labels = [
        ("feature.node.ocifit-k8s.flavor", flavor),
        ("kubernetes.io/arch", arch),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/hostname", name),
    ];
    (
        name.to_owned(),
        NodeInputs::new(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
    )
}

fn three_flavors() -> Vec<(String, NodeInputs)> {
    vec![
        node("a", "vanilla", "amd64"),
        node("b", "chocolate", "amd64"),
        node("c", "strawberry", "amd64"),
    ]
}

fn linux(architecture: &str, variant: Option<&str>) -> Platform {
    Platform {
        os: "linux".into(),
        architecture: architecture.into(),
        variant: variant.map(Into::into),
        os_version: None,
    }
}

/// Each of `images` built for linux/amd64 only.
fn amd64(images: &[&str]) -> Platforms {
    images
        .iter()
        .map(|image| {
            (
                (*image).to_owned(),
                PlatformLookup::Known(vec![linux("amd64", None)]),
            )
        })
        .collect()
}

struct Case {
    spec: ImageSelectionPolicySpec,
    nodes: Vec<(String, NodeInputs)>,
    platforms: Platforms,
    generation: Option<i64>,
}

impl Case {
    fn new() -> Case {
        Case {
            spec: spec(),
            nodes: three_flavors(),
            platforms: amd64(&IMAGES),
            generation: Some(1),
        }
    }

    fn run(
        &self,
        artifact: ArtifactState<'_>,
        previous: Option<&ImageSelectionPolicyStatus>,
        now: &Time,
    ) -> Computed {
        policy_status(&StatusInputs {
            generation: self.generation,
            spec: &self.spec,
            artifact,
            nodes: &self.nodes,
            platforms: &self.platforms,
            previous,
            now,
            limits: super::StatusLimits::WRITTEN,
        })
    }

    /// A pass with the artifact resolved.
    fn current(
        &self,
        artifact: &Resolved,
        previous: Option<&ImageSelectionPolicyStatus>,
        now: i64,
    ) -> Computed {
        self.run(ArtifactState::Current(artifact), previous, &at(now))
    }

    /// A pass where the artifact failed to resolve.
    fn failed(
        &self,
        failure: &Failure,
        last_good: Option<&Resolved>,
        previous: Option<&ImageSelectionPolicyStatus>,
        now: i64,
    ) -> Computed {
        let artifact = ArtifactState::Failed { failure, last_good };
        self.run(artifact, previous, &at(now))
    }
}

fn condition(status: &ImageSelectionPolicyStatus, type_: ConditionType) -> &Condition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_.as_str())
        .unwrap_or_else(|| panic!("no {type_} condition in {:?}", status.conditions))
}

fn state(c: &Condition) -> (&str, &str) {
    (c.status.as_str(), c.reason.as_str())
}

fn images(status: &ImageSelectionPolicyStatus) -> Vec<Option<&str>> {
    let mut images: Vec<_> = status.classes.iter().map(|c| c.image.as_deref()).collect();
    images.sort();
    images
}

fn class_with_image<'s>(status: &'s ImageSelectionPolicyStatus, image: &str) -> &'s ClassStatus {
    let found = status
        .classes
        .iter()
        .find(|c| c.image.as_deref() == Some(image));
    found.unwrap_or_else(|| panic!("no class with {image} in {:?}", status.classes))
}

fn class_of_flavor<'s>(status: &'s ImageSelectionPolicyStatus, flavor: &str) -> &'s ClassStatus {
    let found = status
        .classes
        .iter()
        .find(|c| c.labels["feature.node.ocifit-k8s.flavor"] == flavor);
    found.unwrap_or_else(|| panic!("no {flavor} class in {:?}", status.classes))
}

fn unavailable() -> Failure {
    Failure {
        reason: Reason::RegistryUnavailable,
        message: "failed to reach 127.0.0.1:5000: connection refused".into(),
    }
}

#[test]
fn the_flavor_example_gives_each_class_its_image_and_is_ready() {
    let artifact = resolved("sha256:aaa");
    let out = Case::new().current(&artifact, None, 0);
    let status = &out.status;
    assert_eq!(
        images(status),
        [
            Some("debian:11"),
            Some("rockylinux:9"),
            Some("ubuntu:24.04")
        ]
    );
    assert_eq!(status.class_count, 3);
    assert_eq!(status.observed_generation, Some(1));
    let artifact_status = status.artifact.as_ref().unwrap();
    assert_eq!(artifact_status.digest, "sha256:aaa");
    assert_eq!(artifact_status.format, Format::Ocifit);
    assert_eq!(artifact_status.candidates, 3);
    assert_eq!(artifact_status.fetched_at, Some(at(0)));
    assert!(
        status
            .class_keys
            .as_ref()
            .unwrap()
            .labels
            .contains("feature.node.ocifit-k8s.flavor")
    );
    assert_eq!(
        state(condition(status, ConditionType::Ready)),
        ("True", "Resolved")
    );
    assert_eq!(
        state(condition(status, ConditionType::ArtifactResolved)),
        ("True", "Fetched")
    );
    assert_eq!(
        state(condition(status, ConditionType::Degraded)),
        ("False", "Current")
    );
    for c in &status.conditions {
        assert_eq!(c.observed_generation, Some(1));
        assert_eq!(c.last_transition_time, at(0));
    }
    let vanilla = class_with_image(status, "debian:11");
    assert_eq!(vanilla.nodes, 1);
    assert_eq!(vanilla.labels["feature.node.ocifit-k8s.flavor"], "vanilla");
    assert!(!vanilla.labels.contains_key("kubernetes.io/hostname"));
    let matched = vanilla.matched.as_ref().unwrap();
    assert_eq!((matched.index, matched.tag.as_str()), (0, "debian:11"));
    assert!(
        vanilla
            .reason
            .as_deref()
            .unwrap()
            .starts_with("debian:11 (set 0")
    );
}

#[test]
fn a_second_pass_with_nothing_new_yields_the_same_status_and_no_event() {
    let case = Case::new();
    let artifact = resolved("sha256:aaa");
    let first = case.current(&artifact, None, 0);
    assert!(!first.events.is_empty(), "the first resolution is news");
    let second = case.current(&artifact, Some(&first.status), 600);
    assert_eq!(second.status, first.status);
    assert!(second.events.is_empty(), "{:?}", second.events);
}

#[test]
fn the_first_resolution_announces_ready_and_fetched_but_not_degraded() {
    let artifact = resolved("sha256:aaa");
    let out = Case::new().current(&artifact, None, 0);
    let reasons: Vec<_> = out.events.iter().map(|e| (e.kind, e.reason)).collect();
    assert_eq!(
        reasons,
        [
            (EventKind::Normal, Reason::Resolved),
            (EventKind::Normal, Reason::Fetched)
        ]
    );
}

#[test]
fn a_new_digest_updates_fetched_at_and_says_so_in_an_event() {
    let case = Case::new();
    let old = resolved("sha256:aaa");
    let first = case.current(&old, None, 0);
    let new = resolved("sha256:bbb");
    let second = case.current(&new, Some(&first.status), 60);
    let artifact = second.status.artifact.as_ref().unwrap();
    assert_eq!(artifact.digest, "sha256:bbb");
    assert_eq!(artifact.fetched_at, Some(at(60)));
    assert_eq!(second.events.len(), 1, "{:?}", second.events);
    assert!(
        second
            .events
            .iter()
            .any(|e| e.note == "the artifact changed from sha256:aaa to sha256:bbb")
    );
    // The message of ArtifactResolved names the digest; Ready did not flip, so it keeps its time.
    assert_eq!(
        condition(&second.status, ConditionType::Ready).last_transition_time,
        at(0)
    );
}

#[test]
fn a_failure_before_any_resolution_is_not_ready_with_the_registry_message() {
    let failure = unavailable();
    let out = Case::new().failed(&failure, None, None, 0);
    let status = &out.status;
    assert!(status.classes.is_empty());
    assert_eq!(status.class_count, 0);
    assert!(status.artifact.is_none());
    let resolved = condition(status, ConditionType::ArtifactResolved);
    assert_eq!(state(resolved), ("False", "RegistryUnavailable"));
    assert_eq!(resolved.message, failure.message);
    assert_eq!(
        state(condition(status, ConditionType::Ready)),
        ("False", "RegistryUnavailable")
    );
    assert_eq!(
        state(condition(status, ConditionType::Degraded)),
        ("False", "RegistryUnavailable")
    );
    assert!(out.events.iter().all(|e| e.kind == EventKind::Warning));
    assert!(
        out.events
            .iter()
            .any(|e| e.reason == Reason::RegistryUnavailable
                && e.note.contains("connection refused"))
    );
}

#[test]
fn an_outage_after_resolution_keeps_the_images_marks_degraded_and_recovers() {
    let case = Case::new();
    let good = resolved("sha256:aaa");
    let before = case.current(&good, None, 0).status;

    let failure = unavailable();
    let outage = case.failed(&failure, Some(&good), Some(&before), 60);
    assert_eq!(outage.status.classes, before.classes);
    assert_eq!(outage.status.artifact, before.artifact);
    let degraded = condition(&outage.status, ConditionType::Degraded);
    assert_eq!(state(degraded), ("True", "StaleArtifact"));
    assert!(
        degraded.message.contains("sha256:aaa"),
        "{}",
        degraded.message
    );
    assert!(degraded.message.contains("connection refused"));
    assert_eq!(degraded.last_transition_time, at(60));
    assert_eq!(
        state(condition(&outage.status, ConditionType::Ready)),
        ("False", "StaleArtifact")
    );
    assert!(
        outage
            .events
            .iter()
            .any(|e| e.kind == EventKind::Warning && e.reason == Reason::StaleArtifact)
    );

    let again = case.failed(&failure, Some(&good), Some(&outage.status), 120);
    assert_eq!(
        again.status, outage.status,
        "a continuing outage writes nothing"
    );
    assert!(again.events.is_empty(), "{:?}", again.events);

    let recovered = case.current(&good, Some(&again.status), 180);
    assert_eq!(
        state(condition(&recovered.status, ConditionType::Degraded)),
        ("False", "Current")
    );
    assert_eq!(
        state(condition(&recovered.status, ConditionType::Ready)),
        ("True", "Resolved")
    );
    assert_eq!(
        recovered.status.artifact.as_ref().unwrap().fetched_at,
        Some(at(0)),
        "the same digest keeps its first fetch time"
    );
    assert!(
        recovered
            .events
            .iter()
            .any(|e| e.kind == EventKind::Normal && e.reason == Reason::Current)
    );
}

#[test]
fn during_an_outage_node_changes_are_still_resolved_from_the_last_good_artifact() {
    let mut case = Case::new();
    let good = resolved("sha256:aaa");
    let before = case.current(&good, None, 0).status;
    case.nodes.push(node("d", "chocolate", "amd64"));
    case.nodes.retain(|(name, _)| name != "c");
    let failure = unavailable();
    let outage = case.failed(&failure, Some(&good), Some(&before), 60);
    assert_eq!(
        images(&outage.status),
        [Some("debian:11"), Some("ubuntu:24.04")]
    );
    let ubuntu = class_with_image(&outage.status, "ubuntu:24.04");
    assert_eq!(ubuntu.nodes, 2);
}

#[test]
fn after_a_restart_during_an_outage_the_stored_classes_are_kept() {
    let case = Case::new();
    let good = resolved("sha256:aaa");
    let before = case.current(&good, None, 0).status;
    let failure = unavailable();
    let out = case.failed(&failure, None, Some(&before), 60);
    assert_eq!(out.status.classes, before.classes);
    assert_eq!(out.status.class_keys, before.class_keys);
    assert_eq!(out.status.artifact, before.artifact);
    assert_eq!(
        state(condition(&out.status, ConditionType::Degraded)),
        ("True", "StaleArtifact")
    );
}

#[test]
fn an_invalid_artifact_carries_the_engine_message() {
    let failure = Failure {
        reason: Reason::InvalidArtifact,
        message: "set 1 (\"ubuntu:24.04\"), expression 0: unknown operator \"Like\"".into(),
    };
    let out = Case::new().failed(&failure, None, None, 0);
    let resolved = condition(&out.status, ConditionType::ArtifactResolved);
    assert_eq!(state(resolved), ("False", "InvalidArtifact"));
    assert_eq!(resolved.message, failure.message);
}

#[test]
fn a_candidate_not_built_for_the_class_arch_is_skipped_for_that_class_only() {
    let mut case = Case::new();
    case.nodes.push(node("arm", "vanilla", "arm64"));
    let artifact = resolved("sha256:aaa");
    let status = case.current(&artifact, None, 0).status;
    assert_eq!(status.class_count, 4);
    let arm = status
        .classes
        .iter()
        .find(|c| c.labels["kubernetes.io/arch"] == "arm64")
        .unwrap();
    assert_eq!(arm.image, None);
    assert!(arm.matched.is_none());
    let reason = arm.reason.as_deref().unwrap();
    assert!(
        reason.contains("debian:11 is not built for linux/arm64 (it offers linux/amd64)"),
        "{reason}"
    );
    let amd = status
        .classes
        .iter()
        .find(|c| {
            c.labels["kubernetes.io/arch"] == "amd64"
                && c.labels["feature.node.ocifit-k8s.flavor"] == "vanilla"
        })
        .unwrap();
    assert_eq!(amd.image.as_deref(), Some("debian:11"));
    let ready = condition(&status, ConditionType::Ready);
    assert_eq!(state(ready), ("False", "NoMatch"));
    assert!(ready.message.contains(&arm.name), "{}", ready.message);
}

#[test]
fn a_class_of_arm64_nodes_gets_an_image_whose_index_lists_linux_aarch64() {
    let mut case = Case::new();
    case.nodes = vec![
        node("arm-1", "vanilla", "arm64"),
        node("arm-2", "vanilla", "arm64"),
    ];
    case.platforms = Platforms::from([(
        "debian:11".to_owned(),
        PlatformLookup::Known(vec![linux("aarch64", None), linux("x86_64", None)]),
    )]);
    let artifact = resolved("sha256:aaa");
    let status = case.current(&artifact, None, 0).status;
    assert_eq!(status.classes.len(), 1, "{:?}", status.classes);
    let arm = &status.classes[0];
    assert_eq!(arm.labels["kubernetes.io/arch"], "arm64");
    assert_eq!(arm.image.as_deref(), Some("debian:11"), "{:?}", arm.reason);
    assert_eq!(
        state(condition(&status, ConditionType::Ready)),
        ("True", "Resolved")
    );
}

#[test]
fn a_skipped_better_candidate_is_named_beside_the_one_chosen() {
    let artifact = Resolved {
        digest: "sha256:ccc".into(),
        format: Format::Ocifit,
        content: Content::Sets(
            Artifact::parse(
                Format::Ocifit,
                br#"{"version":"v1alpha1","compatibilities":[
                {"tag":"fast:v1","weight":10,"rules":[]},
                {"tag":"portable:v1","rules":[]}]}"#,
            )
            .unwrap(),
        ),
    };
    let mut case = Case::new();
    case.nodes = vec![node("arm", "vanilla", "arm64")];
    case.platforms = Platforms::from([
        (
            "fast:v1".to_owned(),
            PlatformLookup::Known(vec![linux("amd64", None)]),
        ),
        (
            "portable:v1".to_owned(),
            PlatformLookup::Known(vec![linux("arm64", Some("v8"))]),
        ),
    ]);
    let status = case.current(&artifact, None, 0).status;
    let row = &status.classes[0];
    assert_eq!(row.image.as_deref(), Some("portable:v1"));
    let reason = row.reason.as_deref().unwrap();
    assert!(
        reason.contains("skipped set 0 (\"fast:v1\"): fast:v1 is not built for linux/arm64"),
        "{reason}"
    );
}

#[test]
fn no_selected_node_is_not_ready_and_names_the_selector() {
    let mut case = Case::new();
    case.spec.node_selector = BTreeMap::from([("pool".to_owned(), "gpu".to_owned())]);
    let artifact = resolved("sha256:aaa");
    let status = case.current(&artifact, None, 0).status;
    assert!(status.classes.is_empty());
    let ready = condition(&status, ConditionType::Ready);
    assert_eq!(state(ready), ("False", "NoNodes"));
    assert_eq!(ready.message, "no node matches the nodeSelector pool=gpu");
    case.spec.node_selector.clear();
    case.nodes.clear();
    let status = case.current(&artifact, None, 0).status;
    assert_eq!(
        state(condition(&status, ConditionType::Ready)),
        ("False", "NoNodes")
    );
}

#[test]
fn control_plane_nodes_are_left_out_unless_selected() {
    let mut case = Case::new();
    let mut cp = node("cp", "vanilla", "amd64");
    cp.1.labels.insert(
        "node-role.kubernetes.io/control-plane".into(),
        String::new(),
    );
    case.nodes = vec![cp];
    let artifact = resolved("sha256:aaa");
    let status = case.current(&artifact, None, 0).status;
    assert!(status.classes.is_empty());
    case.spec.node_selector = BTreeMap::from([(
        "node-role.kubernetes.io/control-plane".to_owned(),
        String::new(),
    )]);
    let status = case.current(&artifact, None, 0).status;
    assert_eq!(status.class_count, 1);
}

#[test]
fn a_class_without_a_match_is_ready_only_when_the_policy_says_what_happens_to_it() {
    let mut case = Case::new();
    case.nodes.push(node("d", "pistachio", "amd64"));
    let artifact = resolved("sha256:aaa");
    let deny = case.current(&artifact, None, 0).status;
    let ready = condition(&deny, ConditionType::Ready);
    assert_eq!(state(ready), ("False", "NoMatch"));
    assert!(
        ready
            .message
            .ends_with("their pods are denied (onNoMatch: Deny)")
    );

    case.spec.on_no_match = OnNoMatch::Allow;
    let allow = case.current(&artifact, None, 0).status;
    assert_eq!(
        state(condition(&allow, ConditionType::Ready)),
        ("True", "NoMatch")
    );

    case.spec.fallback_image = Some("busybox:1".into());
    let fallback = case.current(&artifact, None, 0).status;
    let ready = condition(&fallback, ConditionType::Ready);
    assert_eq!(state(ready), ("True", "NoMatch"));
    assert!(ready.message.contains("fallback image busybox:1"));
    let pistachio = class_of_flavor(&fallback, "pistachio");
    assert_eq!(pistachio.image, None);
    assert!(
        pistachio
            .reason
            .as_deref()
            .unwrap()
            .starts_with("no compatible image")
    );
}

#[test]
fn a_relabel_that_moves_a_node_changes_rows_but_not_transition_times() {
    let mut case = Case::new();
    let artifact = resolved("sha256:aaa");
    let before = case.current(&artifact, None, 0).status;
    case.nodes[2] = node("c", "vanilla", "amd64");
    let after = case.current(&artifact, Some(&before), 30);
    assert_eq!(after.status.class_count, 2);
    let debian = class_with_image(&after.status, "debian:11");
    assert_eq!(debian.nodes, 2);
    assert!(after.events.is_empty(), "{:?}", after.events);
    for c in &after.status.conditions {
        assert_eq!(c.last_transition_time, at(0), "{c:?}");
    }
}

#[test]
fn a_new_generation_is_observed_without_moving_transition_times() {
    let mut case = Case::new();
    let artifact = resolved("sha256:aaa");
    let before = case.current(&artifact, None, 0).status;
    case.generation = Some(2);
    let after = case.current(&artifact, Some(&before), 30).status;
    assert_eq!(after.observed_generation, Some(2));
    for c in &after.conditions {
        assert_eq!(c.observed_generation, Some(2));
        assert_eq!(c.last_transition_time, at(0));
    }
}

#[test]
fn a_failed_platform_lookup_skips_the_candidate_with_the_cause() {
    let mut case = Case::new();
    case.platforms.insert(
        "debian:11".into(),
        PlatformLookup::Failed("manifest unknown: debian:11".into()),
    );
    let artifact = resolved("sha256:aaa");
    let status = case.current(&artifact, None, 0).status;
    let vanilla = class_of_flavor(&status, "vanilla");
    assert_eq!(vanilla.image, None);
    assert!(
        vanilla
            .reason
            .as_deref()
            .unwrap()
            .contains("failed to read the platforms of debian:11: manifest unknown"),
        "{:?}",
        vanilla.reason
    );
}

#[test]
fn images_to_check_lists_each_tag_once() {
    let artifact = Artifact::parse(
        Format::Ocifit,
        br#"{"version":"v1alpha1","compatibilities":[
            {"tag":"b:v1","rules":[]},{"tag":"a:v1","rules":[]},{"tag":"b:v1","rules":[]}]}"#,
    )
    .unwrap();
    let resolved = Resolved {
        digest: "sha256:ddd".into(),
        format: Format::Ocifit,
        content: Content::Sets(artifact),
    };
    assert_eq!(resolved.images(), ["a:v1", "b:v1"]);
}

#[test]
fn every_reason_parses_back_from_its_text() {
    for reason in Reason::ALL {
        assert_eq!(reason_from(reason.as_str()), Some(reason));
    }
    assert_eq!(reason_from("Bogus"), None);
}

mod candidates;
mod class_keys;

#[test]
fn a_changed_artifact_that_cannot_be_resolved_serves_nothing_from_the_previous_source() {
    let mut case = Case::new();
    let good = resolved("sha256:aaa");
    let before = case.current(&good, None, 0).status;
    assert!(!before.classes.is_empty());
    case.spec.artifact.reference = Some("127.0.0.1:5000/ocifit/other:v1".into());
    case.generation = Some(2);
    let failure = unavailable();
    let out = case.failed(&failure, None, Some(&before), 60);
    assert!(out.status.classes.is_empty(), "{:?}", out.status.classes);
    assert_eq!(out.status.class_keys, None);
    assert_eq!(out.status.artifact, None);
    assert_eq!(
        state(condition(&out.status, ConditionType::Ready)).0,
        "False"
    );
}

/// The tests of what was `bound.rs`.
mod bound {
    use super::*;
    use crate::api::ClassMatch;
    use std::collections::BTreeMap;

    fn class(name: usize, reason_bytes: usize, labels: usize) -> ClassStatus {
        ClassStatus {
            name: format!("c-{name:08}"),
            labels: (0..labels)
                .map(|i| (format!("key-{i:04}"), "v".repeat(40)))
                .collect::<BTreeMap<_, _>>(),
            nodes: 1,
            image: Some("registry.local/app:v1".into()),
            matched: Some(ClassMatch {
                index: 0,
                tag: "registry.local/app:v1".into(),
                weight: 0,
                description: Some("d".repeat(200)),
            }),
            reason: Some("é".repeat(reason_bytes / 2)),
        }
    }

    #[test]
    fn small_classes_are_left_as_they_are() {
        let mut classes = vec![class(0, 100, 2), class(1, 100, 2)];
        let before = classes.clone();
        assert_eq!(
            super::bound_classes(&mut classes, MAX_CLASSES_BYTES, MAX_CLASSES_BYTES),
            None
        );
        assert_eq!(classes, before);
    }

    #[test]
    fn long_reasons_are_cut_on_a_character_boundary_and_said() {
        let mut classes = vec![class(0, 10_000, 2), class(1, 100, 2)];
        let said =
            super::bound_classes(&mut classes, MAX_CLASSES_BYTES, MAX_CLASSES_BYTES).unwrap();
        let reason = classes[0].reason.as_deref().unwrap();
        assert!(reason.len() <= MAX_REASON_BYTES && reason.ends_with("…(cut)"));
        assert_eq!(classes[1].reason.as_deref().unwrap().len(), 100);
        assert!(
            said.contains("the reasons of 1 classes cut to 1024 bytes"),
            "{said}"
        );
    }

    #[test]
    fn many_classes_lose_reasons_then_rows_and_stay_under_the_bound() {
        // 5,000 kinds of node with reasons of a large artifact: far over the bound.
        let mut classes: Vec<_> = (0..5_000).map(|i| class(i, 1_000, 4)).collect();
        let said =
            super::bound_classes(&mut classes, MAX_CLASSES_BYTES, MAX_CLASSES_BYTES).unwrap();
        assert!(size(&classes) <= MAX_CLASSES_BYTES);
        assert!(classes.iter().all(|c| c.reason.is_none()));
        assert!(said.contains("every class's reason and set description left out"));
        let kept = classes.len();
        assert!(kept > 1_000 && kept < 5_000, "{kept}");
        assert!(
            said.contains(&format!("{} of 5000 classes left out", 5_000 - kept)),
            "{said}"
        );
    }

    /// A status with `classes` and `labels` class keys of 100 bytes each.
    fn status_with(classes: Vec<ClassStatus>, labels: usize) -> ImageSelectionPolicyStatus {
        ImageSelectionPolicyStatus {
            class_keys: Some(crate::engine::Reads {
                labels: (0..labels)
                    .map(|i| format!("example.com/{i:08}-{}", "k".repeat(79)))
                    .collect(),
                ..Default::default()
            }),
            class_count: i32::try_from(classes.len()).unwrap(),
            classes,
            ..ImageSelectionPolicyStatus::default()
        }
    }

    #[test]
    fn class_keys_over_their_bound_are_left_out_with_every_class_and_said() {
        // 10,000 label keys of 100 bytes: within the engine's limits, over the keys' bound.
        let mut status = status_with(vec![class(0, 100, 2), class(1, 100, 2)], 10_000);
        let said = super::bound_status(&mut status, StatusLimits::WRITTEN).unwrap();
        assert_eq!(status.class_keys, None);
        assert!(status.classes.is_empty());
        assert_eq!(status.class_count, 2, "the count says how many are missing");
        assert!(
            said.contains("classKeys") && said.contains("over its limit of 262144 bytes"),
            "{said}"
        );
        assert!(said.contains("all 2 classes"), "{said}");
    }

    #[test]
    fn class_keys_under_their_bound_are_kept_and_the_classes_take_what_is_left() {
        // 2,000 keys and classes that alone would fit the whole bound.
        let mut status = status_with((0..600).map(|i| class(i, 900, 4)).collect(), 2_000);
        let keys = serde_json::to_vec(&status.class_keys).unwrap().len();
        assert!(size(&status.classes) < MAX_CLASSES_BYTES);
        assert!(size(&status.classes) + keys > MAX_CLASSES_BYTES);
        let said = super::bound_status(&mut status, StatusLimits::WRITTEN).unwrap();
        assert!(status.class_keys.is_some());
        assert!(size(&status.classes) + keys <= MAX_CLASSES_BYTES);
        assert!(
            said.contains("every class's reason and set description left out"),
            "{said}"
        );
        assert!(said.contains("less what classKeys takes"), "{said}");
        let mut small = status_with(vec![class(0, 100, 2)], 10);
        assert_eq!(super::bound_status(&mut small, StatusLimits::WRITTEN), None);
    }

    #[test]
    fn a_managed_policy_keeps_a_few_classes_and_no_large_class_keys() {
        // 600 classes and 100 keys of 100 bytes: fits an admin's policy whole.
        let written = || status_with((0..600).map(|i| class(i, 100, 2)).collect(), 10);
        let mut whole = written();
        assert_eq!(super::bound_status(&mut whole, StatusLimits::WRITTEN), None);
        let mut managed = written();
        let said = super::bound_status(&mut managed, StatusLimits::MANAGED).unwrap();
        let keys = serde_json::to_vec(&managed.class_keys).unwrap().len();
        assert!(size(&managed.classes) + keys <= StatusLimits::MANAGED.classes_bytes);
        assert!(!managed.classes.is_empty() && managed.classes.len() < 100);
        assert!(said.contains("classes left out"), "{said}");
        let mut keyed = status_with(vec![class(0, 100, 2)], 100);
        assert!(super::bound_status(&mut keyed.clone(), StatusLimits::WRITTEN).is_none());
        let said = super::bound_status(&mut keyed, StatusLimits::MANAGED).unwrap();
        assert_eq!(keyed.class_keys, None);
        assert!(said.contains("over its limit of 2048 bytes"), "{said}");
    }
}
