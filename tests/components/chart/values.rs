//! Values: `helm lint --strict` passes with every value set, and `values.schema.json` refuses bad
//! values at render time with a message naming the value.

use ocifit_testkit::chart::{VALUE_SETS, chart_dir as chart, helm, set_args};

use super::render;

#[tokio::test]
async fn helm_lint_strict_passes_with_every_value_set() {
    let chart = chart();
    for (name, sets) in VALUE_SETS {
        let mut args = vec!["lint", "--strict", chart.to_str().unwrap()];
        let sets = sets.concat();
        args.extend(set_args(&sets));
        let output = helm(&args, None)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(output.contains("0 chart(s) failed"), "{name}: {output}");
    }
}

#[tokio::test]
async fn bad_values_are_refused_with_a_message_naming_the_value() {
    for (set, expected) in [
        ("tls.mode=selfSigned", "/tls/mode"),
        ("webhook.failurePolicy=Sometimes", "/webhook/failurePolicy"),
        (
            "webhook.reinvocationPolicy=Always",
            "/webhook/reinvocationPolicy",
        ),
        ("webhook.timeoutSeconds=60", "/webhook/timeoutSeconds"),
        ("webhook.timeoutSeconds=1", "/webhook/timeoutSeconds"),
        ("replicaCount=two", "/replicaCount"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("image.digest=sha256:short", "/image/digest"),
        ("image.tag=bad tag", "/image/tag"),
        ("logFormat=xml", "/logFormat"),
        (
            "monitoring.rules.kind=Alertmanager",
            "/monitoring/rules/kind",
        ),
        // A quote would end the PromQL string it is put in.
        ("monitoring.rules.job=a\"b", "/monitoring/rules/job"),
        ("registry.timeout=ten", "/registry/timeout"),
        ("webhook.failurPolicy=Fail", "failurPolicy"),
        ("tls.mode=secret", "/tls/secret/name"),
        (
            "placement.webhook.reinvocationPolicy=Always",
            "/placement/webhook/reinvocationPolicy",
        ),
        (
            "placement.webhook.objectSelector.matchExpressions[0].operator=Maybe",
            "/placement/webhook/objectSelector/matchExpressions/0",
        ),
        (
            "placement.webhook.objectSelector.matchLabel.tier=web",
            "matchLabel",
        ),
        (
            "placement.dockerConfigSecret=Placement_Credentials",
            "/placement/dockerConfigSecret",
        ),
        (
            "controller.maxRetryInterval=1 day",
            "/controller/maxRetryInterval",
        ),
        (
            "controller.maxRetryInterval=12h1d",
            "/controller/maxRetryInterval",
        ),
    ] {
        let err = render(&[set]).await.unwrap_err();
        assert!(
            err.contains("values don't meet the specifications of the schema"),
            "{set}: {err}"
        );
        assert!(err.contains(expected), "{set}: {err}");
    }
}

#[test]
fn the_charts_durations_are_spelled_as_the_crds_and_the_flags_read_them() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(chart().join("values.schema.json")).expect("the values schema"),
    )
    .expect("the values schema is JSON");
    assert_eq!(
        schema["definitions"]["duration"]["pattern"],
        ocifit::api::DURATION_PATTERN
    );
}

/// Objects of values.yaml whose keys are Kubernetes' or the user's, not the chart's: a key the
/// chart does not know is theirs to add.
const FREE_FORM: &[&str] = &[
    "podSecurityContext",
    "securityContext",
    "resources",
    "monitoring.dashboard.labels",
];

/// Every object of `values` the chart owns (its keys are the chart's), as dotted paths.
fn owned_objects(values: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    let Some(map) = values.as_object() else {
        return;
    };
    if FREE_FORM
        .iter()
        .any(|free| path == *free || path.starts_with(&format!("{free}.")))
        || (map.is_empty() && !path.is_empty())
    {
        return;
    }
    out.push(path.to_owned());
    for (key, value) in map {
        let child = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        owned_objects(value, &child, out);
    }
}

#[tokio::test]
async fn an_unknown_key_at_any_level_the_chart_owns_is_refused_naming_it() {
    let values: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(chart().join("values.yaml")).expect("values.yaml"),
    )
    .expect("values.yaml is YAML");
    let mut objects = Vec::new();
    owned_objects(&values, "", &mut objects);
    assert!(objects.len() > 20, "{objects:?}");
    for object in objects {
        let typo = if object.is_empty() {
            "typo=1".to_owned()
        } else {
            format!("{object}.typo=1")
        };
        let err = render(&[&typo])
            .await
            .expect_err(&format!("{typo} is refused"));
        assert!(
            err.contains("values don't meet the specifications of the schema")
                && err.contains("'typo' not allowed"),
            "{typo}: {err}"
        );
        let at = format!("at '/{}'", object.replace('.', "/"));
        assert!(
            err.contains(if object.is_empty() { "at ''" } else { &at }),
            "{typo} names where: {err}"
        );
    }
}
