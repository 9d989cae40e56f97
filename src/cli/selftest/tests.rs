use serde_json::json;

use super::*;

fn labels() -> Vec<(String, String)> {
    vec![("team".to_owned(), "a".to_owned())]
}

#[test]
fn each_webhook_gets_the_probes_of_what_it_admits() {
    assert_eq!(
        Probe::of(&[Webhook::Steps, Webhook::ImageSelection, Webhook::Placement]),
        [
            Probe::ImageSelection,
            Probe::Placement,
            Probe::StepPod,
            Probe::StepJob
        ]
    );
    assert_eq!(Probe::of(&[]), []);
}

#[test]
fn each_probe_is_an_object_its_webhook_must_act_on_carrying_the_given_labels() {
    let selection = Probe::ImageSelection.object(&labels());
    assert_eq!(selection["kind"], "Pod");
    assert_eq!(
        selection["metadata"]["labels"][crate::api::pod::ENABLED_LABEL],
        "true"
    );
    assert_eq!(selection["metadata"]["labels"]["team"], "a");
    assert_eq!(selection["spec"]["containers"][0]["image"], NO_POLICY_IMAGE);

    let placement = Probe::Placement.object(&labels());
    assert_eq!(
        placement["metadata"]["labels"][PROBE_LABEL],
        PLACEMENT_PROBE
    );
    assert!(
        placement["metadata"]["labels"]
            .get(crate::api::pod::ENABLED_LABEL)
            .is_none()
    );

    let cache = format!(
        "{}{}",
        crate::api::step::PREFIX,
        crate::api::step::ORAS_CACHE
    );
    let step = Probe::StepPod.object(&labels());
    assert_eq!(step["metadata"]["annotations"][&cache], MISSING_CACHE);
    let job = Probe::StepJob.object(&labels());
    assert_eq!(job["kind"], "Job");
    assert_eq!(job["metadata"]["annotations"][&cache], MISSING_CACHE);
    assert_eq!(job["spec"]["template"]["metadata"]["labels"]["team"], "a");
    // Every probe reads as the Kubernetes object it is sent as.
    for probe in [Probe::ImageSelection, Probe::Placement, Probe::StepPod] {
        serde_json::from_value::<Pod>(probe.object(&labels())).expect("a pod");
    }
    serde_json::from_value::<Job>(job).expect("a job");
}

#[test]
fn a_denial_counts_only_when_the_probes_own_webhook_gave_it() {
    let denied = "admission webhook \"pods.steps.artifacts.ocifit.io\" denied the request: \
                  CacheMissing: no ArtifactCache";
    assert!(Probe::StepPod.judge(Err(denied)).is_ok());
    assert!(Probe::ImageSelection.judge(Err(denied)).is_err());
    let unreachable = "Internal error occurred: failed calling webhook \"pods.ocifit.io\": \
                       connection refused";
    let why = Probe::ImageSelection.judge(Err(unreachable)).unwrap_err();
    assert!(why.contains("connection refused"), "{why}");
}

#[test]
fn an_admitted_object_counts_only_with_its_webhooks_mark() {
    let unchanged = json!({"metadata": {}, "spec": {"containers": []}});
    for probe in [
        Probe::ImageSelection,
        Probe::Placement,
        Probe::StepPod,
        Probe::StepJob,
    ] {
        let why = probe.judge(Ok(&unchanged)).unwrap_err();
        assert!(why.contains("admitted unchanged"), "{probe:?}: {why}");
    }
    let gated = |gate: &str| json!({"spec": {"schedulingGates": [{"name": gate}]}});
    assert!(
        Probe::Placement
            .judge(Ok(&gated(crate::api::placement_pod::SCHEDULING_GATE)))
            .is_ok()
    );
    assert!(
        Probe::Placement
            .judge(Ok(&gated(crate::api::pod::SCHEDULING_GATE)))
            .is_err()
    );
    assert!(
        Probe::ImageSelection
            .judge(Ok(&gated(crate::api::pod::SCHEDULING_GATE)))
            .is_ok()
    );
    let injected = json!({crate::api::step::INJECTED: "true"});
    assert!(
        Probe::StepPod
            .judge(Ok(&json!({"metadata": {"annotations": injected}})))
            .is_ok()
    );
    assert!(
        Probe::StepJob
            .judge(Ok(
                &json!({"spec": {"template": {"metadata": {"annotations": injected}}}})
            ))
            .is_ok()
    );
}

#[test]
fn pod_labels_are_key_value_pairs() {
    assert_eq!(parse_label("a=b=c"), Ok(("a".into(), "b=c".into())));
    assert!(parse_label("novalue").is_err());
    assert!(parse_label("=v").is_err());
}
