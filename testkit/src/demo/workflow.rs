//! The demo's workflow on the real node: ocifit's own image (the step helpers), a registry image
//! (distribution's binary) and a step image (busybox) pushed to the demo's registry (the chart
//! registers the step webhooks for the namespace that opts in); `example/artifacts/cache.yaml` and the two
//! Jobs of `example/artifacts/workflow.yaml` applied as a newcomer would (only the images and the
//! real node's selector and toleration changed), in order; and the result pulled from the cache
//! with the ORAS Python SDK from this machine. The product decides everything; this module sets the
//! stage and reports.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{REAL_NODE, REAL_NODE_TAINT, say};
use crate::cluster::Cluster;
use crate::error::{Error, Result, io, kube as kube_error};
use crate::image::{ocifit_image, registry_image, step_image};
use crate::registry::Registry;
use crate::tools::Tools;

/// The workflow's namespace (the examples name it).
pub const WORKFLOW_NAMESPACE: &str = "workflow";
/// The namespace label that opts in to the step webhooks.
const OPT_IN: (&str, &str) = ("artifacts.ocifit.io/steps", "enabled");
/// The artifact step two pushes, and the file in it.
pub const RESULT: &str = "workflow/step-two:v1";
const RESULT_FILE: &str = "sum.txt";

/// The images the workflow needs, as pushed.
pub(super) struct Images {
    /// ocifit's own image: `--artifact-helper-image`.
    pub helper: String,
    /// The registry image: the ArtifactCache's, on `--artifact-cache-images`.
    pub registry: String,
    step: String,
}

/// What the workflow did.
#[derive(Clone, Debug)]
pub struct WorkflowRun {
    /// Each step's Job and the seconds from its creation to its completion.
    pub steps: Vec<(String, f64)>,
    /// `host:port` of the cache's registry pod, reachable from this machine.
    pub cache_address: String,
    /// The user and password of the cache's generated credentials (its Secret).
    pub login: (String, String),
    /// What `sum.txt`, pulled with the ORAS SDK, says.
    pub result: String,
}

pub(super) async fn push_images(registry: &Registry, ocifit: &Path) -> Result<Images> {
    let tools = Tools::locate()?;
    let helper = registry
        .push_built(
            &ocifit_image(ocifit, env!("CARGO_PKG_VERSION"), "demo")?,
            "ocifit/ocifit",
            "demo",
        )
        .await?;
    let cache = registry
        .push_built(&registry_image(&tools)?, "distribution/registry", "demo")
        .await?;
    let step = registry
        .push_built(&step_image()?, "steps/busybox", "demo")
        .await?;
    say(&format!(
        "pushed ocifit's own image {} (the step helpers), a registry image {} and a step image {}",
        helper.reference, cache.reference, step.reference
    ));
    Ok(Images {
        helper: helper.reference,
        registry: cache.reference,
        step: step.reference,
    })
}

/// Runs the example workflow through the cache on the real node and pulls its result.
pub(super) async fn run(
    cluster: &Cluster,
    repo: &Path,
    images: &Images,
    state_dir: &Path,
    timeout: Duration,
) -> Result<WorkflowRun> {
    let client = cluster.client()?;
    let namespace: Namespace = parse(
        json!({"metadata": {"name": WORKFLOW_NAMESPACE, "labels": {OPT_IN.0: OPT_IN.1}}}),
        "the workflow namespace",
    )?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .map_err(kube_error("create namespace workflow"))?;
    let mut cache = read_documents(&repo.join("example/artifacts/cache.yaml"))?
        .into_iter()
        .next()
        .ok_or_else(|| format_error("read example/artifacts/cache.yaml", "no document"))?;
    // The demo is offline: its registry image instead of docker.io's, on the real node (kwok's
    // nodes only pretend to run pods).
    cache["spec"]["image"] = json!(images.registry);
    cache["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": REAL_NODE});
    cache["spec"]["tolerations"] =
        json!([{"key": REAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]);
    apply(cluster, &cache).await?;
    let started = Instant::now();
    cluster
        .kubectl([
            "wait",
            "-n",
            WORKFLOW_NAMESPACE,
            "ac/oras",
            "--for=condition=Ready",
            &format!("--timeout={}s", timeout.as_secs()),
        ])
        .await?;
    let endpoint = cache_status(cluster, "endpoint").await?;
    say(&format!(
        "applied example/artifacts/cache.yaml: ArtifactCache oras Ready at {} after {:.1} s",
        endpoint.trim(),
        started.elapsed().as_secs_f64()
    ));
    let cache_address = format!("{}:5000", registry_pod_ip(&client).await?);

    let mut steps = Vec::new();
    for job in read_documents(&repo.join("example/artifacts/workflow.yaml"))? {
        let job = on_the_real_node(job, &images.step);
        let name = job["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let took = run_job(cluster, &client, &name, &job, timeout).await?;
        say(&format!(
            "Job {name} (example/artifacts/workflow.yaml): created → complete in {took:.1} s"
        ));
        steps.push((name, took));
    }
    let outdir = state_dir.join("workflow-result");
    let login = cache_login(cluster, &client).await?;
    let result = sdk_pull(&cache_address, RESULT, &outdir, &login)?;
    say(&format!(
        "pulled {cache_address}/{RESULT} with the ORAS SDK: {RESULT_FILE} says {}",
        result.trim()
    ));
    Ok(WorkflowRun {
        steps,
        cache_address,
        login,
        result,
    })
}

/// The Job with the demo's step image, on the real node (tolerating its taint).
fn on_the_real_node(mut job: Value, image: &str) -> Value {
    let spec = &mut job["spec"]["template"]["spec"];
    spec["nodeSelector"] = json!({"kubernetes.io/hostname": REAL_NODE});
    spec["tolerations"] =
        json!([{"key": REAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]);
    if let Some(containers) = spec["containers"].as_array_mut() {
        for container in containers {
            container["image"] = json!(image);
        }
    }
    job
}

/// Creates the Job once the step webhook patches it (a dry run shows the helpers), then waits for
/// it to complete; the seconds from its creation.
async fn run_job(
    cluster: &Cluster,
    client: &Client,
    name: &str,
    job: &Value,
    timeout: Duration,
) -> Result<f64> {
    let job: Job = parse(job.clone(), name)?;
    let jobs = Api::<Job>::namespaced(client.clone(), WORKFLOW_NAMESPACE);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + timeout;
    loop {
        let injected = jobs.create(&dry_run, &job).await.ok().is_some_and(|j| {
            j.spec
                .and_then(|s| s.template.metadata)
                .and_then(|m| m.annotations)
                .is_some_and(|a| a.contains_key("artifacts.ocifit.io/injected"))
        });
        if injected {
            break;
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: "the step webhook to patch a dry-run Job".into(),
                timeout,
                log_tails: String::new(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let created = Instant::now();
    jobs.create(&PostParams::default(), &job)
        .await
        .map_err(kube_error(format!("create Job {name}")))?;
    cluster
        .kubectl([
            "wait",
            "-n",
            WORKFLOW_NAMESPACE,
            &format!("job/{name}"),
            "--for=condition=Complete",
            &format!("--timeout={}s", timeout.as_secs()),
        ])
        .await?;
    Ok(created.elapsed().as_secs_f64())
}

async fn registry_pod_ip(client: &Client) -> Result<String> {
    let pods = Api::<Pod>::namespaced(client.clone(), WORKFLOW_NAMESPACE)
        .list(&ListParams::default().labels("app.kubernetes.io/instance=oras-registry"))
        .await
        .map_err(kube_error("list the cache's registry pods"))?;
    pods.items
        .into_iter()
        .find_map(|p| p.status.and_then(|s| s.pod_ip))
        .ok_or_else(|| format_error("find the cache's registry pod", "it has no IP"))
}

/// The field `field` of the cache's status, as kubectl prints it.
async fn cache_status(cluster: &Cluster, field: &str) -> Result<String> {
    cluster
        .kubectl([
            "get",
            "-n",
            WORKFLOW_NAMESPACE,
            "ac/oras",
            "-o",
            &format!("jsonpath={{.status.{field}}}"),
        ])
        .await
}

/// The cache's generated credentials (user, password), read from the Secret its status names:
/// the cache answers nothing without them.
async fn cache_login(cluster: &Cluster, client: &Client) -> Result<(String, String)> {
    let name = cache_status(cluster, "credentialsSecret").await?;
    let name = name.trim();
    let secret = Api::<Secret>::namespaced(client.clone(), WORKFLOW_NAMESPACE)
        .get(name)
        .await
        .map_err(kube_error(format!("get Secret {name}")))?;
    let data = secret.data.unwrap_or_default();
    let value = |key: &str| {
        data.get(key)
            .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
            .ok_or_else(|| format_error(&format!("read Secret {name}"), &format!("no key {key}")))
    };
    Ok((value("ORAS_USER")?, value("ORAS_PULL_PASS")?))
}

/// Pulls `target` from `registry` into `outdir` with the ORAS SDK, logged in as `login`; what its
/// result file says.
fn sdk_pull(
    registry: &str,
    target: &str,
    outdir: &Path,
    login: &(String, String),
) -> Result<String> {
    let output = crate::registry::oras_sdk_pull(registry, &format!("{registry}/{target}"), outdir)?
        .env("ORAS_USER", &login.0)
        .env("ORAS_PASS", &login.1)
        .output()
        .map_err(|source| Error::Spawn {
            program: "the ORAS SDK's python".to_string(),
            source,
        })?;
    if !output.status.success() {
        return Err(Error::Command {
            command: format!("the ORAS SDK's pull of {registry}/{target}"),
            status: output.status.to_string(),
            output: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    let file = outdir.join(RESULT_FILE);
    std::fs::read_to_string(&file).map_err(io("read", &file))
}

async fn apply(cluster: &Cluster, object: &Value) -> Result<()> {
    cluster
        .kubectl_with_input(["apply", "-f", "-"], &object.to_string())
        .await?;
    Ok(())
}

fn read_documents(path: &Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).map_err(io("read", path))?;
    serde_saphyr::from_multiple(&text)
        .map_err(|e| format_error(&format!("read {}", path.display()), &e.to_string()))
}

fn parse<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<T> {
    serde_json::from_value(value)
        .map_err(|e| format_error(&format!("build {what}"), &e.to_string()))
}

fn format_error(action: &str, message: &str) -> Error {
    Error::Format {
        action: action.to_owned(),
        message: message.to_owned(),
    }
}
