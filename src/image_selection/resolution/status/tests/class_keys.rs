//! An artifact whose rules read more keys than the status can hold: `classKeys` is left out
//! whole, every class with it, and the policy says so rather than serving a grouping the
//! webhook could not repeat.

use super::*;

/// One set whose rule reads `keys` label keys of some 100 bytes each, in terms of 200
/// expressions (the engine's limit per term is 256).
fn reading(keys: usize) -> Resolved {
    let expression = |i: usize| {
        format!(
            r#"{{"op":"In","key":"example.com/{i:08}-{}","value":["x"]}}"#,
            "k".repeat(79)
        )
    };
    let terms: Vec<String> = (0..keys)
        .step_by(200)
        .map(|first| {
            let expressions: Vec<String> = (first..keys.min(first + 200)).map(expression).collect();
            format!(r#"{{"matchExpressions":[{}]}}"#, expressions.join(","))
        })
        .collect();
    let json = format!(
        r#"{{"version":"v1alpha1","compatibilities":[{{"tag":"debian:11","rules":[{{"matchFeatures":[{}]}}]}}]}}"#,
        terms.join(",")
    );
    Resolved {
        digest: "sha256:keys".into(),
        format: Format::Ocifit,
        content: Content::Sets(Artifact::parse(Format::Ocifit, json.as_bytes()).unwrap()),
    }
}

#[test]
fn class_keys_too_large_for_the_status_leave_no_class_served_and_say_why() {
    // 3,000 keys: within the engine's limits, some 300 KiB as classKeys.
    let artifact = reading(3_000);
    let out = Case::new().run(ArtifactState::Current(&artifact), None, &at(0));
    let status = &out.status;
    assert_eq!(status.class_keys, None);
    assert!(status.classes.is_empty());
    assert_eq!(
        status.class_count, 1,
        "one kind of node for these rules, counted"
    );
    assert_eq!(
        state(condition(status, ConditionType::Ready)),
        ("False", "StatusTooLarge")
    );
    let truncated = condition(status, ConditionType::Truncated);
    assert_eq!(state(truncated), ("True", "StatusTooLarge"));
    assert!(
        truncated.message.contains("classKeys"),
        "{}",
        truncated.message
    );

    // Fewer keys fit: served as usual.
    let artifact = reading(100);
    let out = Case::new().run(ArtifactState::Current(&artifact), None, &at(0));
    assert_eq!(out.status.class_keys.as_ref().unwrap().labels.len(), 100);
    assert!(
        out.status
            .conditions
            .iter()
            .all(|c| c.type_ != ConditionType::Truncated.as_str())
    );
}
