//! A cache and a step applied together, in one `kubectl apply -f` of one file, as a workflow tool
//! creates them: the step is admitted though its cache is not Ready, its pod held behind the
//! cache's scheduling gate while the cache starts (its registry waits for a Secret the test
//! creates later; `ocifit explain pod` says so), released with an Event once the cache is Ready, and the Job completes; its
//! artifact is read back with the ORAS SDK.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, PostParams};
use ocifit::api::step;
use serde_json::json;

use crate::artifact_cache::workflow::{
    P, WORKFLOW, cache_access, eventually, job, sdk_pull, stage, wait_job,
};

/// A Secret the cache's registry takes its environment from, created only once the test saw
/// the step held: until then the registry's pod cannot start and the cache stays `Deploying`.
const LATER: &str = "registry-settings";

#[tokio::test]
async fn a_cache_and_a_job_applied_in_one_file_run_to_completion() {
    let stage = stage().await;
    let jobs = Api::<Job>::namespaced(stage.client.clone(), WORKFLOW);
    let pods = Api::<Pod>::namespaced(stage.client.clone(), WORKFLOW);
    step_webhook_answers(&jobs).await;

    let cache = json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": "oras"},
        "spec": {"image": stage.cache_image, "envSecretRefs": [{"name": LATER}]}
    });
    let mut step = serde_json::to_value(job(
        "held",
        &stage.step,
        &[("output-uri", "workflow/held:v1"), ("output-path", "out")],
        "echo held until the cache was Ready > out/said.txt",
    ))
    .expect("the Job as JSON");
    step["apiVersion"] = json!("batch/v1");
    step["kind"] = json!("Job");
    let file = tempfile::NamedTempFile::new().expect("a temp file");
    std::fs::write(file.path(), format!("{cache}\n---\n{step}\n")).expect("the file");
    let applied = Instant::now();
    let out = stage
        .cluster
        .kubectl([
            "apply",
            "-n",
            WORKFLOW,
            "-f",
            file.path().to_str().expect("a UTF-8 path"),
        ])
        .await
        .expect("kubectl apply of the cache and the Job in one file");
    eprintln!("{out}");

    // Held: the Job's pod is created behind the cache's gate while the cache is not Ready.
    let held = eventually("the Job's pod held by the cache's gate", async || {
        let list = pods
            .list(&ListParams::default().labels("job-name=held"))
            .await
            .ok()?;
        list.items.into_iter().find(|pod| {
            pod.spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|g| g.iter().any(|g| g.name == step::CACHE_GATE))
        })
    })
    .await;
    let name = held.metadata.name.clone().expect("a name");
    eprintln!(
        "the Job's pod {name} held: {:.1} s after the apply",
        applied.elapsed().as_secs_f64()
    );
    let labels = held.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(step::HELD_LABEL).map(String::as_str),
        Some("true")
    );
    // `ocifit explain pod` says which cache the step waits for, its steps and its helpers.
    let report = crate::support::explain_pod(stage.cluster.kubeconfig(), WORKFLOW, &name).await;
    let steps = &report["artifactCache"];
    assert_eq!(steps["cache"], "oras", "{report:#}");
    assert_eq!(steps["gate"], "held", "{report:#}");
    assert_eq!(steps["output"], "workflow/held:v1 from out", "{report:#}");
    assert!(
        steps["cacheReady"].as_str().unwrap().starts_with("False"),
        "the cache it waits for is not Ready yet: {report:#}"
    );
    let helpers = steps["helpers"].to_string();
    assert!(
        helpers.contains("ocifit-prepare") && helpers.contains("ocifit-push"),
        "{report:#}"
    );

    // The cache can start: the pod is released with an Event and the Job completes.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": LATER},
        "stringData": {"REGISTRY_LOG_LEVEL": "info"}
    }))
    .expect("a Secret");
    Api::<Secret>::namespaced(stage.client.clone(), WORKFLOW)
        .create(&PostParams::default(), &secret)
        .await
        .expect("the Secret is created");
    let took = wait_job(&stage.cluster, &jobs, "held", applied, true).await;
    eprintln!("the Job applied with its cache: complete {took:.1} s after the apply");
    let released = eventually("the pod's release Event", async || {
        let list = Api::<Event>::namespaced(stage.client.clone(), WORKFLOW)
            .list(&ListParams::default())
            .await
            .ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("CacheReady")
                && e.regarding
                    .as_ref()
                    .is_some_and(|r| r.name.as_deref() == Some(name.as_str()))
        })
    })
    .await;
    let note = released.note.unwrap_or_default();
    assert!(
        note.starts_with(
            "released from scheduling gate artifacts.ocifit.io/cache: ArtifactCache oras is Ready at "
        ),
        "{note}"
    );

    let access = cache_access(&stage.client).await;
    let pulled = tempfile::tempdir().expect("a temp dir");
    sdk_pull(
        &access.address,
        "workflow/held:v1",
        pulled.path(),
        access.login(),
    );
    assert_eq!(
        std::fs::read_to_string(pulled.path().join("out/said.txt")).expect("out/said.txt"),
        "held until the cache was Ready\n"
    );
}

/// Waits until the apiserver calls the chart's step webhook (a moment after the chart created
/// its configuration): a dry-run Job naming a cache that does not exist is refused saying so.
async fn step_webhook_answers(jobs: &Api<Job>) {
    let probe: Job = serde_json::from_value(json!({
        "metadata": {"name": "probe", "annotations": {
            format!("{P}oras-cache"): "absent", format!("{P}output-pipe"): "out.txt"
        }},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "step", "image": "busybox", "command": ["true"]}]}}}
    }))
    .expect("a Job");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    eventually("the step webhook to answer", async || {
        match jobs.create(&dry_run, &probe).await {
            Err(kube::Error::Api(status)) if status.message.contains("does not exist") => Some(()),
            _ => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                None
            }
        }
    })
    .await;
}
