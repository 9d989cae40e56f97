//! The artifact cache end to end on a real node (kubelet, containerd), installed by the chart from
//! ocifit's own image: an ArtifactCache becomes Ready as a real registry pod (distribution, packed
//! here as an image); a two-step workflow runs as two Jobs — step one writes files and a piped
//! stdout, step two reads them as inputs and writes its own — and both artifacts are read back
//! from the cache with the ORAS Python SDK; a failing step pushes nothing and says why; a step
//! whose input is missing never starts and its pod says why; a step naming no cache is refused;
//! the cache's objects are put back when edited or deleted; deleting the cache removes its
//! registry. A cache behind htpasswd serves steps that name their credentials by `oras-env`, and
//! the password shows in no pod spec, log or Event. Prints the time from each Job's creation to
//! its completion and what was pushed; ocifit's /metrics counts the bytes each step pulled and pushed.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use ocifit::api::{ArtifactCache, step};
use ocifit_testkit::chart::{NAMESPACE, RELEASE, chart_dir, helm};
use ocifit_testkit::image::{ocifit_image, registry_image, step_image};
use ocifit_testkit::{Cluster, RealNode, Registry, Tool, Tools, htpasswd_line, oras_sdk_pull};
use serde_json::{Value, json};

pub(crate) const NODE: &str = "real-1";
pub(crate) const WORKFLOW: &str = "workflow";
const WAIT: Duration = Duration::from_secs(180);
pub(crate) const P: &str = step::PREFIX;

/// A cluster with a real node, ocifit installed by its chart from its own image, the registry
/// and step images pushed, and the workflow namespace opted in.
pub(crate) struct Stage {
    pub(crate) cluster: Cluster,
    pub(crate) client: Client,
    /// The registry image a cache deploys.
    pub(crate) cache_image: String,
    /// The steps' image.
    pub(crate) step: String,
}

pub(crate) async fn stage() -> Stage {
    stage_with(&[]).await
}

/// [`stage`], the workflow namespace created with these labels besides the opt-in.
pub(crate) async fn stage_with(namespace_labels: &[(&str, &str)]) -> Stage {
    let cluster = Cluster::builder()
        .with_all_controllers()
        .with_registry(Registry::builder())
        .real_node(RealNode::new(NODE))
        .start()
        .await
        .expect("a cluster with a real node");
    let client = cluster.client().expect("a client");
    let registry = cluster.registry().expect("a registry");
    let tools = Tools::locate().expect("the tools cache");

    let since = Instant::now();
    let ocifit = registry
        .push_built(
            &ocifit_image(
                Path::new(crate::support::ocifit_binary()),
                env!("CARGO_PKG_VERSION"),
                "test",
            )
            .expect("ocifit's image"),
            "ocifit/ocifit",
            "test",
        )
        .await
        .expect("ocifit's image is pushed");
    let cache_image = registry
        .push_built(
            &registry_image(&tools).expect("a registry image"),
            "distribution/registry",
            "test",
        )
        .await
        .expect("the registry image is pushed");
    let step = registry
        .push_built(&step_image().expect("a step image"), "steps/busybox", "v1")
        .await
        .expect("the step image is pushed");
    eprintln!(
        "images assembled and pushed: {:.1} s",
        since.elapsed().as_secs_f64()
    );

    let since = Instant::now();
    install_chart(
        &cluster,
        registry,
        &ocifit.reference,
        &cache_image.reference,
    )
    .await;
    eprintln!(
        "helm install --wait: {:.1} s",
        since.elapsed().as_secs_f64()
    );
    create_workflow_namespace(&client, namespace_labels).await;
    Stage {
        cluster,
        client,
        cache_image: cache_image.reference,
        step: step.reference,
    }
}

#[tokio::test]
async fn a_two_step_workflow_runs_on_a_real_node_through_a_cache_the_oras_sdk_reads_back() {
    let stage = stage().await;

    // The cache, Ready as a real pod.
    let since = Instant::now();
    let ReadyCache {
        caches,
        endpoint,
        jobs,
    } = ready_cache(
        &stage,
        json!({"image": stage.cache_image, "storage": {"emptyDir": {"sizeLimit": "1Gi"}}}),
    )
    .await;
    eprintln!(
        "ArtifactCache Ready at {endpoint}: {:.1} s",
        since.elapsed().as_secs_f64()
    );
    let registry_pod = registry_pod(&stage.client).await;
    assert_eq!(
        registry_pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref()),
        Some(NODE)
    );
    // The Event follows the status that made the cache Ready: wait for it, not for any Event
    // (the first one listed may be the Deploying before it).
    events(&stage.client, "oras", "Available").await;

    // Step one: files in a directory, and its standard output piped into it.
    let one = job(
        "step-one",
        &stage.step,
        &[
            ("output-uri", "workflow/step-one:v1"),
            ("output-path", "out"),
            ("output-pipe", "out/stdout.txt"),
        ],
        "echo alpha > out/a.txt && mkdir out/nested && echo beta > out/nested/b.txt && echo step one says hello",
    );
    let took = run_first_step(&stage.cluster, &jobs, &one).await;
    eprintln!("step one: Job created → complete in {took:.1} s");

    // Step two: step one's artifact as its input, its own output piped.
    let two = job(
        "step-two",
        &stage.step,
        &[
            ("input-uri", "workflow/step-one:v1"),
            ("input-path", "/inputs"),
            ("output-uri", "workflow/step-two:v1"),
            ("output-pipe", "out/summary.txt"),
        ],
        "cat /inputs/out/a.txt /inputs/out/nested/b.txt /inputs/out/stdout.txt | tr a-z A-Z",
    );
    let took = run_job(&stage.cluster, &jobs, &two, true).await;
    eprintln!("step two: Job created → complete in {took:.1} s");

    // Both artifacts, read back from the cache with the ORAS SDK from this host, with the
    // credentials ocifit generated for the cache (its steps got them by reference).
    let access = cache_access(&stage.client).await;
    let (cache_address, login) = (&access.address, access.login());
    let pulled = tempfile::tempdir().expect("a temp dir");
    sdk_pull(
        cache_address,
        "workflow/step-one:v1",
        &pulled.path().join("one"),
        login,
    );
    let read = |relative: &str| {
        std::fs::read_to_string(pulled.path().join(relative))
            .unwrap_or_else(|e| panic!("{relative}: {e}"))
    };
    assert_eq!(read("one/out/a.txt"), "alpha\n");
    assert_eq!(read("one/out/nested/b.txt"), "beta\n");
    assert_eq!(read("one/out/stdout.txt"), "step one says hello\n");
    sdk_pull(
        cache_address,
        "workflow/step-two:v1",
        &pulled.path().join("two"),
        login,
    );
    // No output-path: the working directory is pushed, its entries (here `out/`) at the top.
    assert_eq!(
        read("two/out/summary.txt"),
        "ALPHA\nBETA\nSTEP ONE SAYS HELLO\n"
    );
    for (step, dir) in [("one", "one"), ("two", "two")] {
        eprintln!(
            "pushed by step {step}: {:?}",
            files(&pulled.path().join(dir))
        );
    }

    // What the steps' helpers moved, in ocifit's /metrics: step two pulled step one's artifact,
    // each step pushed its own; the bytes are the layers' sizes in the cache's manifests.
    let one_bytes = manifest_layer_bytes(cache_address, "workflow/step-one", login).await;
    let two_bytes = manifest_layer_bytes(cache_address, "workflow/step-two", login).await;
    let metrics_address = ocifit_admin_address(&stage.client).await;
    let counted = eventually("both pushes and the pull counted", async || {
        let text = crate::support::get(&metrics_address, "/metrics").await?.1;
        let steps = |direction: &str| {
            sample(
                &text,
                &format!(
                    "ocifit_artifact_steps_total{{cache=\"workflow/oras\",direction=\"{direction}\",outcome=\"ok\"}}"
                ),
            )
        };
        (steps("push") == Some(2.0) && steps("pull") == Some(1.0)).then_some(text)
    })
    .await;
    let bytes = |direction: &str| {
        sample(
            &counted,
            &format!(
                "ocifit_artifact_step_bytes_total{{cache=\"workflow/oras\",direction=\"{direction}\"}}"
            ),
        )
    };
    assert_eq!(
        bytes("pull"),
        Some(one_bytes as f64),
        "step two pulled step one's layers"
    );
    assert_eq!(
        bytes("push"),
        Some((one_bytes + two_bytes) as f64),
        "the layers both steps pushed"
    );
    eprintln!(
        "counted in /metrics: pulled {one_bytes} B, pushed {} B",
        one_bytes + two_bytes
    );

    // A failing step: nothing pushed, the step's own exit status on its pod.
    let failing = job(
        "step-fails",
        &stage.step,
        &[("output-uri", "workflow/failed:v1"), ("output-path", "out")],
        "echo partial > out/part.txt; exit 3",
    );
    run_job(&stage.cluster, &jobs, &failing, false).await;
    let pod = job_pod(&stage.client, "step-fails").await;
    let exit = container_state(&pod, "step")
        .and_then(|s| s.terminated)
        .map(|t| t.exit_code);
    assert_eq!(exit, Some(3), "the step's own status");
    let missing = sdk_pull_fails(cache_address, "workflow/failed:v1", pulled.path(), login);
    eprintln!("the failed step pushed nothing: {missing}");

    // A missing input: the step never starts; the init container says which input.
    let pods = Api::<Pod>::namespaced(stage.client.clone(), WORKFLOW);
    let absent = step_pod(
        "needs-absent",
        &stage.step,
        &[
            ("input-uri", "workflow/absent:v1"),
            ("input-path", "/inputs"),
        ],
    );
    pods.create(&PostParams::default(), &absent)
        .await
        .expect("the pod is admitted");
    let message = wait_prepare_failed(&stage.client, "needs-absent").await;
    assert!(message.contains("workflow/absent:v1"), "{message}");
    let pod = pods.get("needs-absent").await.expect("the pod");
    let step_state = container_state(&pod, "step").expect("the step's state");
    assert!(
        step_state.running.is_none() && step_state.terminated.is_none(),
        "the step never started: {step_state:?}"
    );
    eprintln!("missing input, on the pod: {message}");

    // A step naming a cache that does not exist is refused, saying so.
    let nowhere = job(
        "no-cache",
        &stage.step,
        &[
            ("oras-cache", "nowhere"),
            ("input-uri", "workflow/step-one:v1"),
            ("input-path", "/inputs"),
        ],
        "true",
    );
    let refused = jobs
        .create(&PostParams::default(), &nowhere)
        .await
        .expect_err("a step naming no cache is refused");
    assert!(
        refused
            .to_string()
            .contains("ArtifactCache \"nowhere\" does not exist in namespace \"workflow\""),
        "{refused}"
    );

    // The cache's objects are put back: a scaled-down Deployment, a deleted Service.
    let deployments = Api::<Deployment>::namespaced(stage.client.clone(), WORKFLOW);
    deployments
        .patch(
            "oras-registry",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .expect("the Deployment is scaled down");
    let services = Api::<Service>::namespaced(stage.client.clone(), WORKFLOW);
    let old = services.get("oras-registry").await.expect("the Service");
    services
        .delete("oras-registry", &DeleteParams::default())
        .await
        .expect("the Service is deleted");
    eventually("the Deployment back at one replica", async || {
        let d = deployments.get("oras-registry").await.ok()?;
        (d.spec?.replicas == Some(1)).then_some(())
    })
    .await;
    eventually("the Service recreated", async || {
        let s = services.get_opt("oras-registry").await.ok()??;
        (s.metadata.uid != old.metadata.uid).then_some(())
    })
    .await;
    let endpoint = wait_ready(&stage.cluster, &caches).await;
    eprintln!("put back; Ready again at {endpoint}");

    // Deleting the cache deletes its registry; steps naming it are refused.
    let since = Instant::now();
    caches
        .delete("oras", &DeleteParams::default())
        .await
        .expect("the cache is deleted");
    eventually("the registry's objects and pod gone", async || {
        let deployment = deployments.get_opt("oras-registry").await.ok()?;
        let service = services.get_opt("oras-registry").await.ok()?;
        let pods = pods
            .list(&ListParams::default().labels("app.kubernetes.io/instance=oras-registry"))
            .await
            .ok()?;
        (deployment.is_none() && service.is_none() && pods.items.is_empty()).then_some(())
    })
    .await;
    eprintln!(
        "cache deleted, its registry gone: {:.1} s",
        since.elapsed().as_secs_f64()
    );
    let refused = jobs
        .create(
            &PostParams::default(),
            &job(
                "after",
                &stage.step,
                &[("output-uri", "x:v1"), ("output-pipe", "out/x")],
                "true",
            ),
        )
        .await
        .expect_err("a step naming the deleted cache is refused");
    assert!(
        refused
            .to_string()
            .contains("ArtifactCache \"oras\" does not exist"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_cache_behind_htpasswd_serves_steps_whose_credentials_never_show() {
    const PASSWORD: &str = "s3cret-never-shown";
    let stage = stage().await;
    let secrets = Api::<Secret>::namespaced(stage.client.clone(), WORKFLOW);
    let htpasswd = htpasswd_line("wf", PASSWORD).expect("an htpasswd line");
    for secret in [
        json!({"metadata": {"name": "cache-users"}, "stringData": {"htpasswd": htpasswd}}),
        json!({"metadata": {"name": "oras-creds"}, "stringData": {
            "ORAS_USER": "wf", "ORAS_PUSH_PASS": PASSWORD, "ORAS_PULL_PASS": PASSWORD
        }}),
    ] {
        let secret: Secret = serde_json::from_value(secret).expect("a Secret");
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .expect("the Secret is created");
    }
    let ReadyCache { jobs, .. } = ready_cache(
        &stage,
        json!({"image": stage.cache_image, "htpasswdSecretRef": {"name": "cache-users"}}),
    )
    .await;
    let cache_address = cache_address(&stage.client).await;

    let writes = job(
        "writes",
        &stage.step,
        &[
            ("oras-env", "oras-creds"),
            ("output-uri", "private/result:v1"),
            ("output-pipe", "out/said.txt"),
        ],
        "echo behind basic auth",
    );
    let took = run_first_step(&stage.cluster, &jobs, &writes).await;
    eprintln!("a step pushing with credentials: {took:.1} s");
    let reads = job(
        "reads",
        &stage.step,
        &[
            ("oras-env", "oras-creds"),
            ("input-uri", "private/result:v1"),
            ("input-path", "/inputs"),
            ("output-uri", "private/again:v1"),
            ("output-pipe", "out/again.txt"),
        ],
        "cat /inputs/out/said.txt",
    );
    let took = run_job(&stage.cluster, &jobs, &reads, true).await;
    eprintln!("a step pulling and pushing with credentials: {took:.1} s");

    let pulled = tempfile::tempdir().expect("a temp dir");
    let anonymous = anonymous_status(&cache_address, "/v2/private/again/manifests/v1");
    assert_eq!(
        anonymous, 401,
        "the cache refuses a pull without credentials"
    );
    sdk_pull(
        &cache_address,
        "private/again:v1",
        pulled.path(),
        Some(("wf", PASSWORD)),
    );
    let again =
        std::fs::read_to_string(pulled.path().join("out/again.txt")).expect("out/again.txt");
    assert_eq!(again, "behind basic auth\n");

    // The password is in the Secret only: not in any pod's spec, no step container gets the
    // Secret, and no log or Event says it.
    let pods = Api::<Pod>::namespaced(stage.client.clone(), WORKFLOW)
        .list(&ListParams::default())
        .await
        .expect("the pods");
    for pod in &pods.items {
        let text = serde_json::to_string(pod).expect("the pod as JSON");
        assert!(!text.contains(PASSWORD), "{text}");
        let spec = pod.spec.as_ref().expect("a spec");
        for container in spec.containers.iter().filter(|c| c.name == "step") {
            assert!(container.env_from.is_none(), "{container:?}");
        }
    }
    let logs = stage
        .cluster
        .kubectl([
            "logs",
            "-n",
            WORKFLOW,
            "-l",
            "job-name",
            "--all-containers",
            "--tail",
            "-1",
        ])
        .await
        .unwrap_or_default();
    assert!(!logs.contains(PASSWORD), "{logs}");
    let events = stage
        .cluster
        .kubectl(["get", "events", "-n", WORKFLOW, "-o", "json"])
        .await
        .expect("the Events");
    assert!(!events.contains(PASSWORD));
}

async fn install_chart(cluster: &Cluster, registry: &Registry, image: &str, cache_image: &str) {
    let (repository, tag) = image.rsplit_once(':').expect("a tagged reference");
    let sets = [
        format!("artifactCache.registryImages={{{cache_image}}}"),
        format!("image.repository={repository}"),
        format!("image.tag={tag}"),
        "replicaCount=1".to_owned(),
        format!("registry.plainHttp={{{}}}", registry.addr()),
        format!("registry.allowedPrivate={{{}}}", registry.addr()),
        format!("nodeSelector.kubernetes\\.io/hostname={NODE}"),
    ];
    let chart = chart_dir();
    let mut args = vec![
        "install",
        RELEASE,
        chart.to_str().expect("a UTF-8 path"),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--wait",
        "--timeout",
        "50s",
    ];
    for set in &sets {
        args.extend(["--set", set.as_str()]);
    }
    if let Err(e) = helm(&args, Some(cluster.kubeconfig())).await {
        panic!("{e}\n{}", diagnostics(cluster, NAMESPACE).await);
    }
}

/// The namespace, opted in to the step webhooks by its label, with `labels` besides.
async fn create_workflow_namespace(client: &Client, labels: &[(&str, &str)]) {
    let mut all = BTreeMap::from([(step::NAMESPACE_OPT_IN, step::NAMESPACE_OPT_IN_VALUE)]);
    all.extend(labels.iter().copied());
    let namespace: Namespace = serde_json::from_value(json!({
        "metadata": {"name": WORKFLOW, "labels": all}
    }))
    .expect("a namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("the namespace is created");
}

/// A Job running `script` in the step image on the real node, with these contract annotations;
/// its working directory is `/work`, where `out/` is an empty directory.
pub(crate) fn job(name: &str, image: &str, annotations: &[(&str, &str)], script: &str) -> Job {
    let annotations = contract(annotations);
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"backoffLimit": 0, "template": {"spec": pod_spec(image, script)}}
    }))
    .expect("a Job")
}

/// A bare pod with these contract annotations that lists its inputs.
fn step_pod(name: &str, image: &str, annotations: &[(&str, &str)]) -> Pod {
    let annotations = contract(annotations);
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": pod_spec(image, "ls -R /inputs")
    }))
    .expect("a pod")
}

/// The contract's annotations, under its prefix.
pub(crate) fn contract(annotations: &[(&str, &str)]) -> BTreeMap<String, String> {
    annotations
        .iter()
        .map(|(k, v)| (format!("{P}{k}"), (*v).to_owned()))
        .collect()
}

fn pod_spec(image: &str, script: &str) -> Value {
    json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "nodeSelector": {"kubernetes.io/hostname": NODE},
        "containers": [{
            "name": "step", "image": image, "command": ["sh", "-c", script], "workingDir": "/work",
            "volumeMounts": [{"name": "out", "mountPath": "/work/out"}]
        }],
        "volumes": [{"name": "out", "emptyDir": {}}]
    })
}

/// Creates `job` and waits until it completes (`succeed`) or fails; the seconds from its creation
/// until this test saw it finish.
pub(crate) async fn run_job(cluster: &Cluster, jobs: &Api<Job>, job: &Job, succeed: bool) -> f64 {
    let name = job.metadata.name.clone().expect("a name");
    let created = Instant::now();
    jobs.create(&PostParams::default(), job)
        .await
        .unwrap_or_else(|e| panic!("the Job {name} is admitted: {e}"));
    wait_job(cluster, jobs, &name, created, succeed).await
}

/// Waits until the Job `name` (created at `created`) completes (`succeed`) or fails; the seconds
/// from its creation until this test saw it finish.
pub(crate) async fn wait_job(
    cluster: &Cluster,
    jobs: &Api<Job>,
    name: &str,
    created: Instant,
    succeed: bool,
) -> f64 {
    let deadline = created + WAIT;
    loop {
        let status = jobs.get(name).await.ok().and_then(|j| j.status);
        let succeeded = status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
        let failed = status.as_ref().and_then(|s| s.failed).unwrap_or(0);
        if succeeded > 0 || failed > 0 {
            if (succeeded > 0) != succeed {
                panic!(
                    "the Job {name} {} \n{}",
                    if succeed { "failed" } else { "succeeded" },
                    diagnostics(cluster, WORKFLOW).await
                );
            }
            return created.elapsed().as_secs_f64();
        }
        if Instant::now() > deadline {
            panic!(
                "the Job {name} did not finish\n{}",
                diagnostics(cluster, WORKFLOW).await
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the apiserver calls the chart's step webhook (it picks a new configuration up a
/// moment after it is created): a dry run of `job` comes back injected.
pub(crate) async fn wait_step_webhook(jobs: &Api<Job>, job: &Job) {
    eventually("the step webhook to patch a dry-run Job", async || {
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let admitted = jobs.create(&dry_run, job).await.ok()?;
        let template = admitted.spec?.template.metadata?.annotations?;
        template.contains_key(step::INJECTED).then_some(())
    })
    .await;
}

pub(crate) async fn job_pod(client: &Client, job: &str) -> Pod {
    let pods = Api::<Pod>::namespaced(client.clone(), WORKFLOW)
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .expect("the Job's pods");
    pods.items.into_iter().next().expect("the Job's pod")
}

pub(crate) fn container_state(
    pod: &Pod,
    name: &str,
) -> Option<k8s_openapi::api::core::v1::ContainerState> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)?
        .state
        .clone()
}

/// The termination message of `ocifit-prepare` once it failed.
async fn wait_prepare_failed(client: &Client, pod: &str) -> String {
    let pods = Api::<Pod>::namespaced(client.clone(), WORKFLOW);
    eventually("the input pull to fail", async || {
        let pod = pods.get(pod).await.ok()?;
        let init = pod.status?.init_container_statuses?;
        let prepare = init.into_iter().find(|c| c.name == "ocifit-prepare")?;
        let terminated = prepare
            .last_state
            .and_then(|s| s.terminated)
            .or(prepare.state.and_then(|s| s.terminated))?;
        (terminated.exit_code != 0).then(|| terminated.message.unwrap_or_default())
    })
    .await
}

/// Creates the ArtifactCache `oras` of the workflow namespace with `spec`.
pub(crate) async fn create_cache(client: &Client, spec: Value) -> Api<ArtifactCache> {
    let caches = Api::<ArtifactCache>::namespaced(client.clone(), WORKFLOW);
    create_cache_in(&caches, spec).await;
    caches
}

/// Creates the ArtifactCache `oras` with `spec` in the namespace of `caches`.
pub(crate) async fn create_cache_in(caches: &Api<ArtifactCache>, spec: Value) {
    let cache: ArtifactCache = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": "oras"},
        "spec": spec
    }))
    .expect("a cache");
    caches
        .create(&PostParams::default(), &cache)
        .await
        .expect("the cache is created");
}

/// Waits for the cache's Ready condition; its endpoint.
pub(crate) async fn wait_ready(cluster: &Cluster, caches: &Api<ArtifactCache>) -> String {
    wait_ready_named(cluster, caches, "oras").await
}

/// Waits for the Ready condition of the cache `name`; its endpoint.
pub(crate) async fn wait_ready_named(
    cluster: &Cluster,
    caches: &Api<ArtifactCache>,
    name: &str,
) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let cache = caches.get(name).await.expect("the cache");
        let status = cache.status.unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if ready && status.observed_generation == cache.metadata.generation {
            return status.endpoint.expect("a Ready cache has an endpoint");
        }
        if Instant::now() > deadline {
            panic!(
                "the cache is not Ready: {:?}\n{}",
                status.conditions,
                diagnostics(cluster, WORKFLOW).await
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The workflow namespace's cache `oras`, Ready.
pub(crate) struct ReadyCache {
    pub(crate) caches: Api<ArtifactCache>,
    /// The endpoint its status names.
    pub(crate) endpoint: String,
    /// The namespace's Jobs.
    pub(crate) jobs: Api<Job>,
}

/// Creates the workflow namespace's cache with `spec` and waits until it is Ready.
pub(crate) async fn ready_cache(stage: &Stage, spec: Value) -> ReadyCache {
    let caches = create_cache(&stage.client, spec).await;
    let endpoint = wait_ready(&stage.cluster, &caches).await;
    ReadyCache {
        caches,
        endpoint,
        jobs: Api::namespaced(stage.client.clone(), WORKFLOW),
    }
}

/// Runs `job`, the first step of a namespace, to success once the step webhook injects it (its
/// configuration comes with the chart a moment before); the seconds [`run_job`] measured.
pub(crate) async fn run_first_step(cluster: &Cluster, jobs: &Api<Job>, job: &Job) -> f64 {
    wait_step_webhook(jobs, job).await;
    run_job(cluster, jobs, job, true).await
}

/// How this host reaches the workflow namespace's cache: the registry pod's address and the
/// login ocifit generated for the cache.
pub(crate) struct CacheAccess {
    pub(crate) address: String,
    pub(crate) user: String,
    pub(crate) password: String,
}

impl CacheAccess {
    /// The login as the registry clients here take it.
    pub(crate) fn login(&self) -> Option<(&str, &str)> {
        Some((&self.user, &self.password))
    }
}

pub(crate) async fn cache_access(client: &Client) -> CacheAccess {
    cache_access_of(client, "oras").await
}

/// How this host reaches the workflow namespace's cache `cache`.
pub(crate) async fn cache_access_of(client: &Client, cache: &str) -> CacheAccess {
    let (user, password) = generated_login_of(client, WORKFLOW, cache).await;
    CacheAccess {
        address: cache_address_of(client, cache).await,
        user,
        password,
    }
}

/// The cache's registry on the node's network (the pod's address), `ip:5000`.
pub(crate) async fn cache_address(client: &Client) -> String {
    cache_address_of(client, "oras").await
}

/// The registry of the cache `cache` on the node's network, `ip:5000`.
async fn cache_address_of(client: &Client, cache: &str) -> String {
    let pod_ip = registry_pod_of(client, cache)
        .await
        .status
        .and_then(|s| s.pod_ip)
        .expect("the registry pod's IP");
    format!("{pod_ip}:5000")
}

pub(crate) async fn registry_pod(client: &Client) -> Pod {
    registry_pod_of(client, "oras").await
}

async fn registry_pod_of(client: &Client, cache: &str) -> Pod {
    live_registry_pod_of(client, cache)
        .await
        .expect("the registry's pod")
}

/// The cache `oras`'s registry pod that is not being deleted, if there is one yet: right after a
/// pod is deleted its ReplicaSet may not have made the replacement.
pub(crate) async fn live_registry_pod(client: &Client) -> Option<Pod> {
    live_registry_pod_of(client, "oras").await
}

async fn live_registry_pod_of(client: &Client, cache: &str) -> Option<Pod> {
    let pods = Api::<Pod>::namespaced(client.clone(), WORKFLOW)
        .list(
            &ListParams::default().labels(&format!("app.kubernetes.io/instance={cache}-registry")),
        )
        .await
        .expect("the registry's pods");
    pods.items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
}

/// Waits for an Event with `reason` about ArtifactCache `name`; (reason, note) of all its Events.
async fn events(client: &Client, name: &str, reason: &str) -> Vec<(String, String)> {
    eventually("the Event on the cache", async || {
        let list = Api::<Event>::namespaced(client.clone(), WORKFLOW)
            .list(&ListParams::default())
            .await
            .ok()?;
        let found: Vec<(String, String)> = list
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some("ArtifactCache") && r.name.as_deref() == Some(name)
                })
            })
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect();
        found.iter().any(|(r, _)| r == reason).then_some(found)
    })
    .await
}

pub(crate) async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The value of one series in a Prometheus text exposition.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

/// Where ocifit's admin server (/metrics) is reached from this host: its pod's IP.
async fn ocifit_admin_address(client: &Client) -> String {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(
            &ListParams::default()
                .labels("app.kubernetes.io/name=ocifit,app.kubernetes.io/component=controller"),
        )
        .await
        .expect("ocifit's pods");
    let ip = pods
        .items
        .into_iter()
        .find_map(|p| p.status?.pod_ip)
        .expect("ocifit's pod IP");
    format!("{ip}:8080")
}

/// The sum of the layer sizes of `repository:v1`'s manifest in the cache, read over HTTP with
/// the cache's generated login.
async fn manifest_layer_bytes(address: &str, repository: &str, login: Option<(&str, &str)>) -> u64 {
    use base64::Engine;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (user, password) = login.expect("the cache's login");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("the cache is reachable");
    let request = format!(
        "GET /v2/{repository}/manifests/v1 HTTP/1.0\r\nHost: {address}\r\nAuthorization: Basic {basic}\r\nAccept: application/vnd.oci.image.manifest.v1+json\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("the request is sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("the manifest is read");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body)
        .unwrap_or_default();
    let manifest: Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{repository}: {e}: {response}"));
    manifest["layers"]
        .as_array()
        .expect("the manifest's layers")
        .iter()
        .map(|layer| layer["size"].as_u64().expect("a layer size"))
        .sum()
}

/// Pods, Jobs and Events of `namespace`, and the nodes' pressures and taints, for a failure's
/// message.
pub(crate) async fn diagnostics(cluster: &Cluster, namespace: &str) -> String {
    let mut text = String::new();
    for args in [
        vec![
            "get",
            "nodes",
            "-o",
            "custom-columns=NAME:.metadata.name,TRUE:.status.conditions[?(@.status==\"True\")].type,TAINTS:.spec.taints[*].key",
        ],
        vec![
            "get",
            "pods,jobs,deployments,services",
            "-n",
            namespace,
            "-o",
            "wide",
        ],
        vec!["get", "pods", "-n", namespace, "-o", "yaml"],
        vec!["get", "events", "-n", namespace],
    ] {
        text.push_str(
            &cluster
                .kubectl(args)
                .await
                .unwrap_or_else(|e| e.to_string()),
        );
        text.push('\n');
    }
    text.push_str(
        &ocifit_log(cluster, "50")
            .await
            .unwrap_or_else(|e| e.to_string()),
    );
    text
}

/// The last `tail` lines (`-1`: all) of the log of every ocifit pod the chart runs.
pub(crate) async fn ocifit_log(cluster: &Cluster, tail: &str) -> ocifit_testkit::Result<String> {
    let selector = "app.kubernetes.io/name=ocifit";
    cluster
        .kubectl(["logs", "-n", NAMESPACE, "-l", selector, "--tail", tail])
        .await
}

/// The user and password of the credentials ocifit generated for the cache `oras` of
/// `namespace`, from the Secret its status names.
pub(crate) async fn generated_login(client: &Client, namespace: &str) -> (String, String) {
    generated_login_of(client, namespace, "oras").await
}

/// The login ocifit generated for the cache `cache` of `namespace`.
async fn generated_login_of(client: &Client, namespace: &str, cache: &str) -> (String, String) {
    let cache = Api::<ArtifactCache>::namespaced(client.clone(), namespace)
        .get(cache)
        .await
        .expect("the cache");
    let name = cache
        .status
        .and_then(|s| s.credentials_secret)
        .expect("the cache's credentials Secret in its status");
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(&name)
        .await
        .expect("the credentials Secret");
    let data = secret.data.expect("the Secret's data");
    let value = |key: &str| String::from_utf8(data[key].0.clone()).expect("UTF-8");
    (value("ORAS_USER"), value("ORAS_PULL_PASS"))
}

/// The SDK's pull, logged in as `login` (user, password) when given.
pub(crate) fn sdk(
    registry: &str,
    target: &str,
    outdir: &Path,
    login: Option<(&str, &str)>,
) -> std::process::Output {
    let mut command = oras_sdk_pull(registry, &format!("{registry}/{target}"), outdir)
        .expect("the ORAS Python SDK");
    if let Some((user, password)) = login {
        command.env("ORAS_USER", user).env("ORAS_PASS", password);
    }
    command.output().expect("the SDK runs")
}

/// Pulls `target` from the cache at `registry` with the ORAS SDK into `outdir`.
pub(crate) fn sdk_pull(registry: &str, target: &str, outdir: &Path, login: Option<(&str, &str)>) {
    let output = sdk(registry, target, outdir, login);
    assert!(
        output.status.success(),
        "the SDK's pull of {target} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The HTTP status the cache at `registry` answers `path` with, asked without credentials.
pub(crate) fn anonymous_status(registry: &str, path: &str) -> u16 {
    let script = r#"
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1]).status)
except urllib.error.HTTPError as e:
    print(e.code)
"#;
    let python = Tools::locate()
        .expect("the tools cache")
        .path(Tool::OrasPython)
        .expect("the ORAS Python SDK's Python");
    let output = std::process::Command::new(python)
        .args(["-c", script, &format!("http://{registry}{path}")])
        .output()
        .expect("python runs");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)))
}

/// The files under `root`: (path relative to it, bytes).
pub(crate) fn files(root: &Path) -> Vec<(String, u64)> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("a directory").flatten() {
            let path = entry.path();
            let meta = entry.metadata().expect("its metadata");
            if meta.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(root).unwrap_or(&path);
                found.push((relative.display().to_string(), meta.len()));
            }
        }
    }
    found.sort();
    found
}

/// The SDK's pull of `target` fails; the last line it said.
pub(crate) fn sdk_pull_fails(
    registry: &str,
    target: &str,
    scratch: &Path,
    login: Option<(&str, &str)>,
) -> String {
    let output = sdk(registry, target, &scratch.join("absent"), login);
    assert!(!output.status.success(), "{target} was pushed");
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned()
}
