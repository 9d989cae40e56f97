use super::*;

#[test]
fn example_policy_reads_as_a_typed_policy() {
    let policy: PlacementPolicy =
        serde_saphyr::from_str(include_str!("../../../example/placement/policy.yaml")).unwrap();
    assert_eq!(policy.metadata.name.as_deref(), Some("default"));
    let arm = &policy.spec.architectures[0];
    assert_eq!((arm.name.as_str(), arm.weight), ("arm64", Some(50)));
    assert_eq!(arm.tolerations[0].key.as_deref(), Some("pool"));
    assert_eq!(
        policy.spec.on_inspection_failure.action,
        FailureAction::Fallback
    );
    assert_eq!(
        policy
            .spec
            .on_inspection_failure
            .fallback_architecture
            .as_deref(),
        Some("amd64")
    );
}

#[test]
fn an_empty_spec_selects_everything_and_fails_open_with_documented_defaults() {
    let spec: PlacementPolicySpec = serde_json::from_value(serde_json::json!({})).unwrap();
    assert_eq!(spec.priority, 0);
    assert!(spec.namespace_selector.is_none() && spec.pod_selector.is_none());
    assert!(spec.node_tainting.is_none(), "tainting is off by default");
    assert_eq!(spec.on_inspection_failure.attempts, 5);
    assert_eq!(spec.on_inspection_failure.timeout, "2m");
    assert_eq!(
        spec.on_inspection_failure.action,
        FailureAction::ReleaseUnconstrained
    );
    assert_eq!(spec.on_no_common_platform, NoCommonPlatform::Hold);
    assert_eq!(spec.tag_cache.if_not_present, "24h");
    assert_eq!(spec.tag_cache.always, "0s");
    assert_eq!(spec, PlacementPolicySpec::default());
}

#[test]
fn status_counts_serialize_where_the_printer_columns_read_them() {
    let status = PlacementPolicyStatus {
        observed_generation: Some(2),
        pods: PodCounts {
            gated: 3,
            held: 1,
            released: 40,
            ..PodCounts::default()
        },
        conditions: Vec::new(),
    };
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["pods"]["gated"], 3);
    assert_eq!(json["pods"]["held"], 1);
    assert_eq!(json["pods"]["released"], 40);
    assert!(json.get("conditions").is_none());
}

#[test]
fn outcome_names_are_the_annotation_values() {
    use pod::Outcome;
    let names: Vec<&str> = [
        Outcome::Constrained,
        Outcome::Unconstrained,
        Outcome::Fallback,
        Outcome::Held,
    ]
    .iter()
    .map(|o| o.as_str())
    .collect();
    assert_eq!(names, ["Constrained", "Unconstrained", "Fallback", "Held"]);
    assert_eq!(Outcome::Held.to_string(), "Held");
}

#[test]
fn the_scheduling_gate_and_labels_are_valid_qualified_names() {
    for name in [
        pod::SCHEDULING_GATE,
        pod::POLICY_LABEL,
        pod::ENABLED_LABEL,
        pod::TAINT_KEY,
    ] {
        let (prefix, local) = name.split_once('/').unwrap();
        assert_eq!(prefix, "placement.ocifit.io", "{name}");
        assert!(local.len() <= 63 && !local.is_empty(), "{name}");
        assert!(
            local
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-'),
            "{name}"
        );
    }
}
