//! Steps whose cache exists but is not Ready yet: held behind the cache's gate when its status
//! already says where it serves, a Job's injection left to its pods when it does not, refused
//! only when nothing would create them again or the cache cannot become Ready.

use super::jobs::{SEED_JOB, job, pod_of};
use super::*;

fn starting(name: &str) -> CacheState {
    assert_eq!(name, "oras", "the planner asked for another cache");
    CacheState::Starting {
        endpoint: ENDPOINT.into(),
        plain_http: true,
        credentials: Some(CREDENTIALS.into()),
        reason: "Deploying: the registry's Deployment oras-registry has no ready replica yet"
            .into(),
    }
}

fn unwired(_: &str) -> CacheState {
    CacheState::NotReady {
        reason: "it has no status yet (is ocifit's controller running?)".into(),
        stuck: false,
    }
}

fn stuck(_: &str) -> CacheState {
    CacheState::NotReady {
        reason: "ImageNotAllowed: image example.com/registry:2 is not one ocifit deploys".into(),
        stuck: true,
    }
}

fn planned_job(object: &Value, caches: &dyn Fn(&str) -> CacheState) -> StepPlan {
    let StepJob(job) = serde_json::from_value(object.clone()).unwrap();
    plan_job(&job, "workflow", caches, &helper(), &allowed())
}

fn applied<T: serde::de::DeserializeOwned>(object: &Value, patch: &WrittenPatch) -> T {
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &operations(patch)).unwrap();
    serde_json::from_value(patched).unwrap()
}

fn gates(spec: &k8s_openapi::api::core::v1::PodSpec) -> Vec<&str> {
    spec.scheduling_gates
        .iter()
        .flatten()
        .map(|g| g.name.as_str())
        .collect()
}

#[test]
fn a_pod_whose_cache_is_starting_is_injected_now_and_held_behind_the_gate() {
    let mut object = pod(&[("input-uri", "w/in:v1"), ("output-uri", "w/out:v1")]);
    object["spec"]["schedulingGates"] = json!([{"name": "example.com/quota"}]);
    let StepPlan::Held { patch, warnings } = plan_json(&object, &starting) else {
        panic!(
            "expected a held step, got {:?}",
            plan_json(&object, &starting)
        );
    };
    let held: Pod = applied(&object, &patch);
    let spec = held.spec.as_ref().unwrap();
    assert_eq!(gates(spec), ["example.com/quota", step::CACHE_GATE]);
    assert_eq!(
        names(&held).0,
        [PREPARE, PUSH],
        "wired as for a Ready cache"
    );
    let labels = held.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[step::HELD_LABEL], "true");
    assert_eq!(labels[step::STEP_LABEL], step::STEP_LABEL_VALUE);
    assert_eq!(
        held.metadata.annotations.as_ref().unwrap()[step::INJECTED],
        "ArtifactCache oras at 10.0.0.17:5000"
    );
    assert!(
        warnings.iter().any(|w| w.starts_with(
            "ArtifactCache \"oras\" is not Ready yet (Deploying: the registry's Deployment"
        ) && w
            .ends_with("held by scheduling gate artifacts.ocifit.io/cache until it is")),
        "{warnings:?}"
    );
    // The same pod with its cache Ready: injected alike, neither gated nor labelled held.
    let (ready_pod, _) = admitted(&object);
    assert_eq!(
        gates(ready_pod.spec.as_ref().unwrap()),
        ["example.com/quota"]
    );
    assert!(
        !ready_pod
            .metadata
            .labels
            .unwrap()
            .contains_key(step::HELD_LABEL)
    );
}

#[test]
fn a_job_whose_cache_is_starting_has_its_template_injected_and_gated() {
    let object = job(&SEED_JOB, Some(json!({"labels": {"app": "breakfast"}})));
    let StepPlan::Held { patch, .. } = planned_job(&object, &starting) else {
        panic!("expected a held Job");
    };
    let held: Job = applied(&object, &patch);
    let template = &held.spec.as_ref().unwrap().template;
    assert_eq!(
        gates(template.spec.as_ref().unwrap()),
        [step::CACHE_GATE],
        "its pods are created gated"
    );
    let labels = template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
    assert_eq!(labels[step::HELD_LABEL], "true");
    assert_eq!(labels["app"], "breakfast");
    // Its pods carry the marker: the pod route leaves them as they are.
    assert_eq!(plan_json(&pod_of(&held), &starting), StepPlan::NotAStep);
}

#[test]
fn a_job_whose_cache_names_no_endpoint_yet_leaves_the_injection_to_its_pods() {
    for template_metadata in [
        None,
        Some(json!({"labels": {"app": "breakfast"}})),
        Some(json!({"annotations": {"team": "kitchen"}})),
    ] {
        let object = job(&SEED_JOB, template_metadata);
        let StepPlan::Deferred { patch, warnings } = planned_job(&object, &unwired) else {
            panic!(
                "expected a deferred Job, got {:?}",
                planned_job(&object, &unwired)
            );
        };
        assert!(
            warnings[0].contains("the Job's pods are injected as they are created"),
            "{warnings:?}"
        );
        let deferred: Job = applied(&object, &patch);
        let template = &deferred.spec.as_ref().unwrap().template;
        let spec = template.spec.as_ref().unwrap();
        assert!(spec.init_containers.is_none(), "nothing injected yet");
        let carried = template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap();
        for (key, value) in SEED_JOB {
            assert_eq!(carried[&format!("{P}{key}")], value);
        }
        // Each pod the Job makes is a step of its own: held while the cache starts, injected
        // once it is Ready, refused (and made again by the Job) while it names no endpoint.
        let pod = pod_of(&deferred);
        assert!(matches!(plan_json(&pod, &starting), StepPlan::Held { .. }));
        assert!(matches!(plan_json(&pod, &ready), StepPlan::Patch { .. }));
        assert!(matches!(
            plan_json(&pod, &unwired),
            StepPlan::Deny(Denial::CacheNotReady { .. })
        ));
    }
}

#[test]
fn a_pod_whose_cache_names_no_endpoint_yet_is_refused_saying_why() {
    let object = pod(&[("input-uri", "w/in:v1")]);
    let StepPlan::Deny(denial) = plan_json(&object, &unwired) else {
        panic!("expected a denial");
    };
    assert_eq!(
        denial.to_string(),
        "ArtifactCache \"oras\" is not Ready: it has no status yet (is ocifit's controller running?)"
    );
}

#[test]
fn a_cache_that_cannot_become_ready_or_does_not_exist_refuses_a_job_too() {
    let object = job(&SEED_JOB, None);
    let StepPlan::Deny(denial) = planned_job(&object, &stuck) else {
        panic!("expected a denial");
    };
    assert!(
        denial
            .to_string()
            .starts_with("ArtifactCache \"oras\" is not Ready: ImageNotAllowed"),
        "{denial}"
    );
    assert!(matches!(
        planned_job(&object, &|_| CacheState::Missing),
        StepPlan::Deny(Denial::CacheMissing { .. })
    ));
}

#[test]
fn a_job_left_to_its_pods_is_still_refused_for_what_would_refuse_every_one_of_them() {
    let mut object = job(&SEED_JOB, None);
    object["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("command");
    let StepPlan::Deny(denial) = planned_job(&object, &unwired) else {
        panic!("expected a denial");
    };
    assert!(
        denial.to_string().contains("\"breakfast\" has no command"),
        "{denial}"
    );
}
