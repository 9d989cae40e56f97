use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use serde_json::json;

use super::*;
use crate::placement::fixtures::{inspected, labelled, map, platform, pod, policy};
use crate::placement::planner::release::InspectionFailure;

const OWN: &str = "ocifit-system";

/// `pod` running on `node`.
fn running(mut pod: Pod, node: &str) -> Pod {
    pod.metadata.name = Some("web-1".into());
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(node.into());
    }
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    });
    pod
}

fn node(text: &str) -> NodePlatform {
    NodePlatform::exactly(&platform(text).normalized())
}

fn owned(mut pod: Pod, api_version: &str, kind: &str, controller: bool) -> Pod {
    pod.metadata.owner_references = Some(vec![OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: "web-5d9".into(),
        uid: "owner-uid".into(),
        controller: Some(controller),
        ..OwnerReference::default()
    }]);
    pod
}

#[test]
fn a_running_pod_is_audited_under_the_policy_the_gate_would_choose_though_it_is_bound() {
    let policies = [
        policy("all", json!({})),
        policy(
            "web",
            json!({"priority": 3, "podSelector": {"matchLabels": {"app": "web"}}}),
        ),
    ];
    let labels = map(&[]);
    let namespace = Namespace {
        name: "apps",
        labels: &labels,
    };
    let web = running(labelled(pod(&[("web", "app:v1")]), &[("app", "web")]), "n1");
    let chosen = audited(&web, namespace, OWN, &policies).map(|p| p.name.as_str());
    assert_eq!(
        chosen,
        Some("web"),
        "bound pods are not excluded from the audit"
    );
}

#[test]
fn pods_not_running_being_deleted_excluded_or_unselected_are_not_audited() {
    let policies = [policy(
        "web",
        json!({"podSelector": {"matchLabels": {"app": "web"}}}),
    )];
    let labels = map(&[]);
    let apps = Namespace {
        name: "apps",
        labels: &labels,
    };
    let web = || running(labelled(pod(&[("web", "app:v1")]), &[("app", "web")]), "n1");
    assert!(audited(&web(), apps, OWN, &policies).is_some());
    let mut pending = web();
    pending.status = Some(PodStatus {
        phase: Some("Pending".into()),
        ..PodStatus::default()
    });
    assert!(audited(&pending, apps, OWN, &policies).is_none());
    let mut deleting = web();
    deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    assert!(audited(&deleting, apps, OWN, &policies).is_none());
    let daemon = owned(web(), "apps/v1", "DaemonSet", true);
    assert!(audited(&daemon, apps, OWN, &policies).is_none());
    let system = Namespace {
        name: "kube-system",
        labels: &labels,
    };
    assert!(audited(&web(), system, OWN, &policies).is_none());
    let other = running(pod(&[("db", "db:v1")]), "n1");
    assert!(audited(&other, apps, OWN, &policies).is_none());
}

#[test]
fn a_node_among_the_images_platforms_is_fine_and_any_other_is_misplaced() {
    let inspections = [
        inspected("web", &["linux/amd64", "linux/arm64"]),
        inspected("proxy", &["linux/arm64"]),
    ];
    assert_eq!(judge("n1", &node("linux/arm64"), &inspections), None);
    let why = judge("n2", &node("linux/amd64"), &inspections).unwrap();
    assert_eq!(
        why,
        Misplacement::WrongPlatform {
            node: "n2".into(),
            platform: "linux/amd64".into(),
            images: "web: registry.example.com/web:v1, proxy: registry.example.com/proxy:v1".into(),
            offered: "linux/arm64".into(),
        }
    );
    assert_eq!(
        why.to_string(),
        "node n2 is linux/amd64; its containers' images (web: registry.example.com/web:v1, \
         proxy: registry.example.com/proxy:v1) run on linux/arm64"
    );
    assert!(why.evictable());
}

#[test]
fn images_without_a_shared_platform_are_misplaced_anywhere() {
    let inspections = [
        inspected("web", &["linux/amd64"]),
        inspected("proxy", &["linux/arm64"]),
    ];
    let why = judge("n1", &node("linux/amd64"), &inspections).unwrap();
    assert_eq!(why.kind(), "NoCommonPlatform");
    assert!(
        why.to_string().contains("proxy runs on linux/arm64"),
        "{why}"
    );
}

#[test]
fn an_image_not_inspected_makes_the_pod_unknown_and_not_evictable() {
    let inspections = [
        inspected("web", &["linux/amd64"]),
        Inspection {
            container: "sidecar".into(),
            image: "registry.example.com/sidecar:v1".into(),
            result: Err(InspectionFailure::Lookup {
                image: "registry.example.com/sidecar:v1".into(),
                summary: "not found".into(),
            }),
        },
    ];
    let why = judge("n1", &node("linux/amd64"), &inspections).unwrap();
    assert_eq!(why.kind(), "PlatformsUnknown");
    assert!(why.to_string().contains("container sidecar"), "{why}");
    assert!(!why.evictable());
}

#[test]
fn only_the_owners_that_recreate_their_pods_count() {
    let base = || running(pod(&[("web", "app:v1")]), "n1");
    assert!(recreating_owner(&owned(base(), "apps/v1", "ReplicaSet", true)).is_some());
    assert!(recreating_owner(&owned(base(), "apps/v1", "StatefulSet", true)).is_some());
    assert!(recreating_owner(&owned(base(), "batch/v1", "Job", true)).is_some());
    assert!(recreating_owner(&owned(base(), "v1", "ReplicationController", true)).is_some());
    assert!(recreating_owner(&base()).is_none(), "a bare pod");
    assert!(
        recreating_owner(&owned(base(), "apps/v1", "ReplicaSet", false)).is_none(),
        "an owner that is not the controller"
    );
    assert!(
        recreating_owner(&owned(base(), "example.com/v1", "ReplicaSet", true)).is_none(),
        "another group's kind of the same name"
    );
    let finding = Finding::new(
        &owned(base(), "apps/v1", "ReplicaSet", true),
        "arm",
        &Misplacement::Unknown {
            container: "web".into(),
            why: "down".into(),
        },
    );
    assert_eq!(finding.owner.as_deref(), Some("ReplicaSet/web-5d9"));
    assert_eq!(finding.node, "n1");
}

#[test]
fn one_pass_evicts_one_pod_per_owner_and_a_bounded_number_in_all() {
    let found = [
        (Some("a"), true),
        (Some("a"), true),
        (None, true),
        (Some("b"), false),
        (Some("c"), true),
    ];
    assert_eq!(to_evict(found), [0, 4]);
    let owners: Vec<String> = (0..50).map(|n| format!("owner-{n}")).collect();
    let many = owners.iter().map(|owner| (Some(owner.as_str()), true));
    assert_eq!(to_evict(many).len(), EVICTIONS_PER_PASS);
}

#[test]
fn a_container_is_judged_by_the_digest_its_node_ran_not_what_its_tag_names_now() {
    let mut web = running(
        pod(&[("web", "registry.example.com/app:v1"), ("side", "side:v1")]),
        "n1",
    );
    let digest = format!("sha256:{}", "a".repeat(64));
    web.status = Some(PodStatus {
        container_statuses: Some(vec![
            k8s_openapi::api::core::v1::ContainerStatus {
                name: "web".into(),
                image_id: format!("registry.example.com/app@{digest}"),
                ..Default::default()
            },
            k8s_openapi::api::core::v1::ContainerStatus {
                name: "side".into(),
                image_id: "sha256:local-image-config".into(),
                ..Default::default()
            },
        ]),
        ..PodStatus::default()
    });
    let ran = as_run(&web);
    let images: Vec<_> = ran
        .spec
        .unwrap()
        .containers
        .into_iter()
        .map(|c| c.image.unwrap())
        .collect();
    assert_eq!(
        images,
        [
            format!("registry.example.com/app@{digest}"),
            "side:v1".to_owned()
        ],
        "a runtime's local image id is no registry digest: the reference stays"
    );
}
