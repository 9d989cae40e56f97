//! Jobs: the Job's annotations shape its pod template, and the pods it makes are not injected
//! again.

use super::*;

pub(super) fn job(pairs: &[(&str, &str)], template_metadata: Option<Value>) -> Value {
    let mut template = json!({
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "breakfast", "image": "perl:5.34.0", "command": ["echo", "blueberry"]}]
        }
    });
    if let Some(metadata) = template_metadata {
        template["metadata"] = metadata;
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "breakfast", "annotations": annotations(pairs)},
        "spec": {"backoffLimit": 4, "template": template}
    })
}

fn plan_job_json(object: &Value) -> StepPlan {
    // Read as the step routes read a review's Job.
    let StepJob(job) = serde_json::from_value(object.clone()).unwrap();
    plan_job(
        &job,
        "workflow",
        &ready,
        &helper(),
        &StepRegistries::default(),
    )
}

fn admitted_job(object: &Value) -> Job {
    let StepPlan::Patch { patch, .. } = plan_job_json(object) else {
        panic!("expected a patch, got {:?}", plan_job_json(object));
    };
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &operations(&patch)).unwrap();
    serde_json::from_value(patched).unwrap()
}

/// The pod the Job controller makes from a template: its metadata and spec, nothing of the Job's.
pub(super) fn pod_of(job: &Job) -> Value {
    let template = &job.spec.as_ref().unwrap().template;
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": template.metadata.clone().unwrap_or_default(),
        "spec": template.spec.clone().unwrap()
    })
}

pub(super) const SEED_JOB: [(&str, &str); 4] = [
    ("oras-cache", "oras"),
    ("output-uri", "dinosaur/hello-world:pancakes"),
    ("output-path", "pancakes.txt"),
    ("output-pipe", "pancakes.txt"),
];

#[test]
fn the_oras_operators_job_example_gets_its_template_injected() {
    let job = admitted_job(&job(&SEED_JOB, None));
    let template = &job.spec.as_ref().unwrap().template;
    let spec = template.spec.as_ref().unwrap();
    let inits: Vec<_> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(inits, [PREPARE, PUSH]);
    let command = spec.containers[0].command.clone().unwrap();
    assert_eq!(&command[command.len() - 3..], ["--", "echo", "blueberry"]);
    assert_eq!(
        template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap()[step::INJECTED],
        "ArtifactCache oras at 10.0.0.17:5000"
    );
    // The Job's own annotations are the user's and stay as written.
    assert_eq!(
        job.metadata.annotations.as_ref().unwrap().len(),
        SEED_JOB.len()
    );
}

#[test]
fn the_pods_of_an_injected_job_are_not_injected_again() {
    let job = admitted_job(&job(&SEED_JOB, None));
    // The pod carries the template's marker, not the Job's contract: nothing to do.
    assert_eq!(plan_json(&pod_of(&job), &ready), StepPlan::NotAStep);
    // Even a pod that also carries the contract (copied by some tool) is left alone.
    let mut copied = pod_of(&job);
    for (key, value) in SEED_JOB {
        copied["metadata"]["annotations"][format!("{P}{key}")] = json!(value);
    }
    assert_eq!(plan_json(&copied, &ready), StepPlan::AlreadyInjected);
    let patched_job = serde_json::to_value(&job).unwrap();
    assert_eq!(plan_job_json(&patched_job), StepPlan::AlreadyInjected);
}

#[test]
fn a_template_with_labels_keeps_them_and_gains_the_marker() {
    let job = admitted_job(&job(
        &SEED_JOB,
        Some(json!({"labels": {"app": "breakfast"}})),
    ));
    let metadata = job.spec.unwrap().template.metadata.unwrap();
    let labels = metadata.labels.unwrap();
    assert_eq!(labels["app"], "breakfast");
    assert_eq!(labels[step::STEP_LABEL], step::STEP_LABEL_VALUE);
    assert!(metadata.annotations.unwrap().contains_key(step::INJECTED));
    let annotated = admitted_job(&job_with_template_annotation());
    let annotations = annotated
        .spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .annotations
        .unwrap();
    assert_eq!(annotations["team"], "kitchen");
    assert!(annotations.contains_key(step::INJECTED));
}

#[test]
fn a_template_without_metadata_gains_the_marker_and_the_step_label() {
    let job = admitted_job(&job(&SEED_JOB, None));
    let metadata = job.spec.unwrap().template.metadata.unwrap();
    assert_eq!(
        metadata.labels.unwrap()[step::STEP_LABEL],
        step::STEP_LABEL_VALUE
    );
    assert!(metadata.annotations.unwrap().contains_key(step::INJECTED));
}

fn job_with_template_annotation() -> Value {
    job(&SEED_JOB, Some(json!({"annotations": {"team": "kitchen"}})))
}

#[test]
fn a_job_is_refused_like_a_pod() {
    let mut object = job(&SEED_JOB, None);
    object["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("command");
    let StepPlan::Deny(denial) = plan_job_json(&object) else {
        panic!("expected a denial");
    };
    assert!(
        denial.to_string().contains("\"breakfast\" has no command"),
        "{denial}"
    );
}

#[test]
fn a_job_without_the_contract_is_not_a_step() {
    assert_eq!(plan_job_json(&job(&[], None)), StepPlan::NotAStep);
}

#[test]
fn the_workflow_example_plans_both_steps() {
    let text = include_str!("../../../../example/artifacts/workflow.yaml");
    let jobs: Vec<Job> = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect();
    assert_eq!(jobs.len(), 2);
    for job in &jobs {
        let StepPlan::Patch { warnings, .. } = plan_job(
            job,
            "workflow",
            &ready,
            &helper(),
            &StepRegistries::default(),
        ) else {
            panic!("{:?} is not planned", job.metadata.name);
        };
        assert!(warnings.is_empty(), "{warnings:?}");
    }
    let step_two = admitted_job(&serde_json::to_value(&jobs[1]).unwrap());
    let spec = step_two.spec.unwrap().template.spec.unwrap();
    let prepare = &spec.init_containers.as_ref().unwrap()[0];
    assert!(
        prepare
            .args
            .as_ref()
            .unwrap()
            .contains(&"10.0.0.17:5000/workflow/step-one:v1".to_string())
    );
}
