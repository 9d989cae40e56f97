//! The step routes through the admission host's decoding and encoding: Pods and Jobs as the
//! apiserver sends them, the cache looked up in the reflected store of the request's namespace.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::*;
use crate::admission::Route;
use crate::admission::review_fixtures::{UID, apiserver_review};
use crate::artifact_cache::status::{Observed, status};

const P: &str = "oras.converged-computing.github.io/";

/// A Ready cache `oras` in `default` (the namespace `apiserver_review` sends).
fn caches(ready: bool) -> Store<ArtifactCache> {
    let mut cache: ArtifactCache = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": "oras", "namespace": "default", "uid": "u", "generation": 1},
        "spec": {}
    }))
    .unwrap();
    let deployment = serde_json::from_value(json!({
        "metadata": {"name": "oras-registry", "generation": 1},
        "status": {"readyReplicas": i32::from(ready), "observedGeneration": 1}
    }))
    .unwrap();
    let service = serde_json::from_value(json!({"spec": {"clusterIP": "10.0.0.9"}})).unwrap();
    cache.status = Some(status(
        &cache,
        Some(Observed {
            deployment: &deployment,
            service: &service,
            pods: &[],
        }),
        Some("oras-registry-credentials-x7k2p".into()),
        &Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    ));
    let mut writer = Writer::default();
    writer.apply_watcher_event(&watcher::Event::Apply(cache));
    writer.as_reader()
}

/// The cache `oras` in `default` as created, before ocifit's controller wrote a status.
fn unwired() -> Store<ArtifactCache> {
    let cache: ArtifactCache = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": "oras", "namespace": "default", "uid": "u", "generation": 1},
        "spec": {}
    }))
    .unwrap();
    let mut writer = Writer::default();
    writer.apply_watcher_event(&watcher::Event::Apply(cache));
    writer.as_reader()
}

fn steps(ready: bool, helper: bool) -> Steps {
    Steps {
        caches: caches(ready),
        helper: helper.then(|| Helper {
            image: "registry.local/ocifit/ocifit:test".into(),
            pull_policy: None,
        }),
        read_again: None,
        registries: StepRegistries::default(),
    }
}

fn step_pod(annotations: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "step", "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox", "command": ["sh", "-c", "echo hi"], "workingDir": "/work"}
        ]}
    }))
    .unwrap()
}

/// (outcome, reason, response) of `object` (a Pod, or a Job when `job`).
fn answer(steps: Steps, object: &Pod, job: bool) -> (&'static str, &'static str, Value) {
    let mut review = apiserver_review(object, false);
    let route = if job {
        let job_object = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": object.metadata,
            "spec": {"template": {"spec": object.spec}}
        });
        review["request"]["object"] = job_object;
        review["request"]["kind"] = json!({"group": "batch", "version": "v1", "kind": "Job"});
        review["request"]["resource"] =
            json!({"group": "batch", "version": "v1", "resource": "jobs"});
        Route::new(JOBS, StepJobs(steps))
    } else {
        Route::new(PODS, StepPods(steps))
    };
    let answer = route.answer(&serde_json::to_vec(&review).unwrap());
    let body: Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(body["response"]["uid"], json!(UID));
    (answer.outcome, answer.reason, body["response"].clone())
}

#[test]
fn a_step_pod_and_a_step_job_are_patched_with_the_ready_caches_endpoint() {
    let pod = step_pod(
        json!({format!("{P}output-uri"): "results:v1", format!("{P}output-pipe"): "out.txt"}),
    );
    for job in [false, true] {
        let (outcome, reason, response) = answer(steps(true, true), &pod, job);
        assert_eq!((outcome, reason), ("patched", "StepInjected"), "{response}");
        assert_eq!(response["allowed"], json!(true));
        let patch = String::from_utf8(
            base64::Engine::decode(
                &base64::engine::general_purpose::STANDARD,
                response["patch"].as_str().unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        assert!(patch.contains("10.0.0.9:5000/results:v1"), "{patch}");
        assert!(
            patch.contains("registry.local/ocifit/ocifit:test"),
            "{patch}"
        );
        if job {
            assert!(patch.contains("/spec/template/spec"), "{patch}");
        }
    }
}

#[test]
fn the_old_mechanisms_annotations_are_warned_about_and_nothing_else_changes() {
    let pod = step_pod(json!({
        format!("{P}output-uri"): "results:v1",
        format!("{P}output-pipe"): "out.txt",
        format!("{P}oras-container"): "ghcr.io/oras-project/oras:v1.1.0",
        format!("{P}entrypoint"): "https://example.com/entrypoint.sh"
    }));
    let (outcome, _, response) = answer(steps(true, true), &pod, false);
    assert_eq!(outcome, "patched");
    let warnings: Vec<String> = serde_json::from_value(response["warnings"].clone()).unwrap();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings.iter().all(|w| w.contains("is ignored")),
        "{warnings:?}"
    );
}

/// The patch of an answer, as text.
fn patch_text(response: &Value) -> String {
    String::from_utf8(
        base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            response["patch"].as_str().unwrap(),
        )
        .unwrap(),
    )
    .unwrap()
}

#[test]
fn a_step_whose_cache_is_starting_is_admitted_held_behind_the_caches_gate() {
    let pod = step_pod(json!({format!("{P}input-uri"): "data:v1"}));
    for job in [false, true] {
        let (outcome, reason, response) = answer(steps(false, true), &pod, job);
        assert_eq!((outcome, reason), ("held", "StepHeld"), "{response}");
        assert_eq!(response["allowed"], json!(true));
        let patch = patch_text(&response);
        assert!(patch.contains("10.0.0.9:5000/data:v1"), "{patch}");
        assert!(
            patch.contains(r#""value":[{"name":"artifacts.ocifit.io/cache"}]"#),
            "{patch}"
        );
    }
}

#[test]
fn a_cache_that_is_missing_or_names_no_endpoint_yet_is_a_denial_naming_it() {
    let pod = step_pod(json!({format!("{P}input-uri"): "data:v1"}));
    let mut fresh = steps(false, true);
    fresh.caches = unwired();
    let (outcome, reason, response) = answer(fresh.clone(), &pod, false);
    assert_eq!((outcome, reason), ("denied", "CacheNotReady"));
    assert_eq!(response["allowed"], json!(false));
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("ArtifactCache \"oras\" is not Ready: it has no status yet"),
        "{message}"
    );
    // A Job is admitted, its contract left for its pods.
    let (outcome, reason, response) = answer(fresh, &pod, true);
    assert_eq!((outcome, reason), ("patched", "StepDeferred"), "{response}");
    let patch = patch_text(&response);
    assert!(patch.contains("/spec/template/metadata"), "{patch}");
    let other = step_pod(
        json!({format!("{P}input-uri"): "data:v1", format!("{P}oras-cache"): "elsewhere"}),
    );
    let (_, reason, response) = answer(steps(true, true), &other, true);
    assert_eq!(reason, "CacheMissing");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("ArtifactCache \"elsewhere\" does not exist in namespace \"default\""),
        "{message}"
    );
}

/// A read again answering from `store`, as the apiserver would.
fn read_from(store: Store<ArtifactCache>) -> ReadAgain {
    ReadAgain::new(move |cache: &ObjectRef<ArtifactCache>| {
        store.get(cache).map(|cache| (*cache).clone())
    })
}

/// This replica's store still has the cache not Ready while the leader has written Ready: the
/// cache read again decides, so a step created as soon as the cache is Ready is admitted
/// unheld; a cache the apiserver has not Ready either (or cannot give) holds it.
#[test]
fn a_store_that_lags_the_ready_status_is_read_again_before_a_step_is_refused() {
    let pod = step_pod(json!({format!("{P}input-uri"): "data:v1"}));
    let mut lagging = steps(false, true);
    lagging.read_again = Some(read_from(caches(true)));
    for job in [false, true] {
        let (outcome, reason, response) = answer(lagging.clone(), &pod, job);
        assert_eq!((outcome, reason), ("patched", "StepInjected"), "{response}");
    }

    let mut not_ready = steps(false, true);
    not_ready.read_again = Some(read_from(caches(false)));
    let (_, reason, _) = answer(not_ready, &pod, false);
    assert_eq!(reason, "StepHeld");
    let mut unreadable = steps(false, true);
    unreadable.read_again = Some(ReadAgain::new(|_: &ObjectRef<ArtifactCache>| None));
    let (_, reason, _) = answer(unreadable, &pod, false);
    assert_eq!(reason, "StepHeld");
}

/// The request the apiserver sends for `pod`, typed.
fn request(pod: &Pod) -> Request<StepPod> {
    serde_json::from_value(apiserver_review(pod, false)["request"].take()).unwrap()
}

/// The request the apiserver sends for a Job running `pod`'s spec, with its annotations.
fn job_request(pod: &Pod) -> Request<StepJob> {
    let mut review = apiserver_review(pod, false);
    review["request"]["object"] = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": pod.metadata,
        "spec": {"template": {"spec": pod.spec}}
    });
    review["request"]["kind"] = json!({"group": "batch", "version": "v1", "kind": "Job"});
    serde_json::from_value(review["request"].take()).unwrap()
}

/// A step whose cache the store shows Ready is planned on the connection's worker, with no read
/// from the apiserver; one whose cache the store lags on declines there, so only it waits for
/// the read, on the blocking pool.
#[test]
fn a_step_is_planned_without_waiting_unless_its_cache_must_be_read_again() {
    let pod = step_pod(json!({format!("{P}input-uri"): "data:v1"}));
    let mut ready = steps(true, true);
    ready.read_again = Some(ReadAgain::new(|cache: &ObjectRef<ArtifactCache>| {
        panic!("{cache} read again although Ready in the store")
    }));
    assert!(matches!(
        StepPods(ready.clone()).plan_now(&request(&pod)),
        Some(StepPlan::Patch { .. })
    ));
    assert!(matches!(
        StepJobs(ready).plan_now(&job_request(&pod)),
        Some(StepPlan::Patch { .. })
    ));

    let mut lagging = steps(false, true);
    lagging.read_again = Some(read_from(caches(true)));
    assert_eq!(StepPods(lagging.clone()).plan_now(&request(&pod)), None);
    assert_eq!(StepJobs(lagging.clone()).plan_now(&job_request(&pod)), None);
    assert!(matches!(
        StepPods(lagging.clone()).plan(&request(&pod)),
        StepPlan::Patch { .. }
    ));
    // What names no cache never waits.
    let plain = step_pod(json!({}));
    assert_eq!(
        StepPods(lagging).plan_now(&request(&plain)),
        Some(StepPlan::NotAStep)
    );
    // Without a read again, the store alone decides, at once.
    assert!(matches!(
        StepPods(steps(false, true)).plan_now(&request(&pod)),
        Some(StepPlan::Held { .. })
    ));
}

#[test]
fn without_a_helper_image_steps_are_refused_and_other_pods_pass() {
    let pod = step_pod(json!({format!("{P}input-uri"): "data:v1"}));
    let (outcome, reason, response) = answer(steps(true, false), &pod, false);
    assert_eq!((outcome, reason), ("denied", "NoHelperImage"));
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("--artifact-helper-image")
    );
    let plain = step_pod(json!({}));
    let (outcome, reason, response) = answer(steps(true, false), &plain, false);
    assert_eq!((outcome, reason), ("skipped", "NotAStep"));
    assert_eq!(response["allowed"], json!(true));
    assert!(response.get("patch").is_none());
}

#[test]
fn a_misspelt_annotation_is_a_warning_in_the_admission_response() {
    let pod = step_pod(json!({format!("{P}output-uri"): "r:v1", format!("{P}ouput-path"): "x"}));
    let (outcome, reason, response) = answer(steps(true, true), &pod, false);
    assert_eq!((outcome, reason), ("patched", "StepInjected"), "{response}");
    let warnings: Vec<String> = serde_json::from_value(response["warnings"].clone()).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!("{P}ouput-path is not part of the step contract")),
        "{warnings:?}"
    );
}

/// A review from namespace `b` (forged or real) learns nothing of `default`'s cache: naming its
/// endpoint as the registry is refused as any host off the allow-list is, and naming its cache
/// looks in `b`.
#[test]
fn a_step_of_another_namespace_learns_nothing_of_a_caches_existence() {
    let answer_in_b = |annotations: Value| {
        let pod = step_pod(annotations);
        let mut review = apiserver_review(&pod, false);
        review["request"]["namespace"] = json!("b");
        let route = Route::new(PODS, StepPods(steps(true, true)));
        let answer = route.answer(&serde_json::to_vec(&review).unwrap());
        let body: Value = serde_json::from_slice(&answer.body).unwrap();
        let message = body["response"]["status"]["message"]
            .as_str()
            .map(str::to_owned);
        (answer.reason, message.unwrap_or_default())
    };
    let input = format!("{P}input-uri");
    let registry = format!("{P}registry");
    let (reason, to_cache) =
        answer_in_b(json!({&input: "data:v1", &registry: "http://10.0.0.9:5000"}));
    assert_eq!(reason, "RegistryNotAllowed");
    let (_, to_nothing) =
        answer_in_b(json!({&input: "data:v1", &registry: "http://10.0.0.8:5000"}));
    assert_eq!(
        to_cache.replace("10.0.0.9", "IP"),
        to_nothing.replace("10.0.0.8", "IP")
    );
    let (reason, named) = answer_in_b(json!({&input: "data:v1", format!("{P}oras-cache"): "oras"}));
    assert_eq!(reason, "CacheMissing");
    assert!(named.contains("in namespace \"b\""), "{named}");
}
