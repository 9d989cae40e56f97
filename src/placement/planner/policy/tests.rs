use std::time::Duration;

use serde_json::json;

use super::*;
use crate::placement::fixtures::{map, policy, stored_policy};

fn stored(spec: serde_json::Value) -> PlacementPolicy {
    stored_policy("p", spec)
}

#[test]
fn an_empty_policy_selects_every_namespace_and_pod_and_gives_up_by_releasing() {
    let policy = policy("p", json!({}));
    assert!(policy.selects_namespace(&map(&[])));
    assert!(policy.selects_pod(&map(&[("app", "web")])));
    assert_eq!(
        policy.failure,
        FailureBound {
            attempts: 5,
            timeout: Duration::from_secs(120),
            action: GiveUp::ReleaseUnconstrained
        }
    );
    assert_eq!(
        policy.tag_max_age,
        TagMaxAge {
            if_not_present: Duration::from_secs(86_400),
            always: Duration::ZERO
        }
    );
    assert!(policy.tainted.is_empty());
}

#[test]
fn selectors_read_match_labels_and_expressions() {
    let policy = policy(
        "p",
        json!({
            "namespaceSelector": {"matchLabels": {"placement": "enabled"}},
            "podSelector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}
        }),
    );
    assert!(policy.selects_namespace(&map(&[("placement", "enabled")])));
    assert!(!policy.selects_namespace(&map(&[("placement", "off")])));
    assert!(policy.selects_pod(&map(&[("tier", "web")])));
    assert!(!policy.selects_pod(&map(&[("tier", "db")])));
}

#[test]
fn architectures_fallback_and_tainting_are_read() {
    let policy = policy(
        "p",
        json!({
            "architectures": [{"name": "arm64", "weight": 40, "tolerations": [{"key": "pool", "operator": "Exists"}]}],
            "nodeTainting": {"architectures": ["arm64", "s390x"]},
            "onInspectionFailure": {"attempts": 2, "timeout": "30s", "action": "Fallback", "fallbackArchitecture": "amd64"}
        }),
    );
    let arm = &policy.architectures["arm64"];
    assert_eq!(arm.weight, Some(40));
    assert_eq!(arm.tolerations[0].key.as_deref(), Some("pool"));
    assert_eq!(
        policy
            .tainted
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["arm64", "s390x"]
    );
    assert_eq!(policy.failure.action, GiveUp::Fallback("amd64".into()));
    assert_eq!(policy.failure.timeout, Duration::from_secs(30));
}

#[test]
fn an_invalid_selector_is_an_error_naming_the_field() {
    let err = Policy::compile(&stored(json!({
        "podSelector": {"matchExpressions": [{"key": "tier", "operator": "Is", "values": ["db"]}]}
    })))
    .unwrap_err();
    assert!(matches!(
        err,
        PolicyError::InvalidSelector {
            field: "podSelector",
            ..
        }
    ));
    assert_eq!(err.reason(), PlacementReason::InvalidSelector);
    assert!(
        err.to_string()
            .starts_with("spec.podSelector is not a valid label selector")
    );
}

#[test]
fn an_unreadable_duration_and_a_fallback_without_architecture_are_errors() {
    let err = Policy::compile(&stored(
        json!({"tagCache": {"always": "99999999999999999999h"}}),
    ))
    .unwrap_err();
    assert_eq!(
        err,
        PolicyError::InvalidDuration {
            field: "tagCache.always",
            value: "99999999999999999999h".into()
        }
    );
    assert_eq!(err.reason(), PlacementReason::InvalidDuration);
    let err = Policy::compile(&stored(
        json!({"onInspectionFailure": {"action": "Fallback"}}),
    ))
    .unwrap_err();
    assert_eq!(err, PolicyError::MissingFallback);
    assert_eq!(err.reason(), PlacementReason::MissingFallback);
}

#[test]
fn architectures_spelled_as_runtimes_spell_them_are_read_as_nodes_label_them() {
    let policy = policy(
        "p",
        json!({
            "architectures": [{"name": "aarch64", "weight": 40}, {"name": "x86_64", "weight": 10}],
            "nodeTainting": {"architectures": ["aarch64"]},
            "onInspectionFailure": {"action": "Fallback", "fallbackArchitecture": "x86_64"}
        }),
    );
    assert_eq!(
        policy
            .architectures
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["amd64", "arm64"]
    );
    assert_eq!(policy.architectures["arm64"].weight, Some(40));
    assert_eq!(
        policy
            .tainted
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["arm64"]
    );
    assert_eq!(policy.failure.action, GiveUp::Fallback("amd64".into()));
}

#[test]
fn the_watch_holds_a_policy_without_its_labels_annotations_owners_and_finalizers() {
    let pile = "x".repeat(60_000);
    let mut held: PlacementPolicy = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {
            "name": "p",
            "uid": "u",
            "generation": 2,
            "labels": {"app": pile},
            "annotations": {"note": pile},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "o"}],
            "finalizers": ["example.com/keep"],
        },
        "spec": {},
    }))
    .unwrap();
    let spec = serde_json::to_value(&held.spec).unwrap();
    trim_policy(&mut held);
    assert_eq!(
        serde_json::to_value(&held.metadata).unwrap(),
        json!({"name": "p", "uid": "u", "generation": 2, "labels": {}})
    );
    assert_eq!(serde_json::to_value(&held.spec).unwrap(), spec);
}
