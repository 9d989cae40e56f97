//! The oras-operator's own example shapes, as its users wrote them, on a real node through the
//! chart (`ocifit run` from ocifit's own image): only the cache is an ArtifactCache and the
//! namespace is opted in. The steps run in an image whose WORKDIR is `/data` (holding a file of
//! its own) and no pod names a `workingDir`, an `input-path` or a `restartPolicy`:
//!
//! - scatter: two bare pods, each pushing `out/` (one with a key the contract does not know), set
//!   to run once with a warning saying so, each run and pushed exactly once;
//! - gather: a fan-in pod reading both with `input-uri_1` and `input-uri_2`, merged into one
//!   `inputs/out/` in its working directory beside the image's file (where the oras-operator's
//!   `cp -R` puts them), pushing its whole working directory;
//! - a Job whose annotations sit on its pod template, with `output-pipe` and `output-path` naming
//!   one file and `debug: "true"` (ocifit's log shows the parsed settings).
//!
//! - its multiple-hello-world example applied with `kubectl` as its README runs it (the cache
//!   `orascache-sample`, two pods each pushing a file, a pod listing both with `ls inputs`):
//!   `kubectl logs hello-world-3` lists both input files.
//!
//! Every artifact is read back with the ORAS Python SDK.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use ocifit_testkit::image::step_image;
use serde_json::{Value, json};

use crate::artifact_cache::workflow::{
    NODE, P, Stage, WORKFLOW, cache_access, cache_access_of, contract, diagnostics, files,
    ocifit_log, ready_cache, run_job, sdk_pull, stage, wait_ready_named,
};

const WAIT: Duration = Duration::from_secs(180);

/// A bare pod as the oras-operator's examples write it: no restartPolicy, no workingDir.
fn bare_pod(name: &str, image: &str, annotations: &[(&str, &str)], script: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": contract(annotations)},
        "spec": pod_spec(image, script)
    }))
    .expect("a pod")
}

fn pod_spec(image: &str, script: &str) -> Value {
    json!({
        "terminationGracePeriodSeconds": 1,
        "nodeSelector": {"kubernetes.io/hostname": NODE},
        "containers": [{"name": "step", "image": image, "command": ["sh", "-c", script]}]
    })
}

/// The warnings the apiserver passes on for creating `pod` (a dry run through every webhook).
async fn admission_warnings(client: &Client, pod: &Pod) -> Vec<String> {
    let body = serde_json::to_vec(pod).expect("the pod as JSON");
    let request = http::Request::post(format!("/api/v1/namespaces/{WORKFLOW}/pods?dryRun=All"))
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body))
        .expect("a request");
    let response = client.send(request).await.expect("the dry run is answered");
    assert!(response.status().is_success(), "{:?}", response.status());
    response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect()
}

/// Creates `pod` and waits until it ended; the pod as it ended.
async fn run_pod(stage: &Stage, pod: &Pod) -> Pod {
    let pods = Api::<Pod>::namespaced(stage.client.clone(), WORKFLOW);
    let name = pod.metadata.name.clone().expect("a name");
    pods.create(&PostParams::default(), pod)
        .await
        .unwrap_or_else(|e| panic!("the pod {name} is admitted: {e}"));
    succeeded(stage, &name).await
}

/// Waits until the pod `name` succeeded; the pod as it ended.
async fn succeeded(stage: &Stage, name: &str) -> Pod {
    let pods = Api::<Pod>::namespaced(stage.client.clone(), WORKFLOW);
    let deadline = Instant::now() + WAIT;
    loop {
        let current = pods.get(name).await.expect("the pod");
        let phase = current.status.as_ref().and_then(|s| s.phase.clone());
        match phase.as_deref() {
            Some("Succeeded") => return current,
            Some("Failed") => panic!(
                "the pod {name} failed\n{}",
                diagnostics(&stage.cluster, WORKFLOW).await
            ),
            _ if Instant::now() > deadline => panic!(
                "the pod {name} did not end\n{}",
                diagnostics(&stage.cluster, WORKFLOW).await
            ),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == "step"))
        .map_or(-1, |c| c.restart_count)
}

#[tokio::test]
async fn the_oras_operators_example_shapes_run_as_written_and_the_oras_sdk_reads_them_back() {
    let stage = stage().await;
    let registry = stage.cluster.registry().expect("a registry");
    let seed_step = registry
        .push_built(
            &step_image()
                .expect("a step image")
                .directory("/data", 0o777, 0)
                .file("/data/image.txt", "from the image\n", 0o644)
                .symlink("/bin/touch", "busybox")
                .working_dir("/data"),
            "steps/with-workdir",
            "v1",
        )
        .await
        .expect("the step image is pushed")
        .reference;
    ready_cache(&stage, json!({"image": stage.cache_image})).await;

    // Scatter: bare pods, default restart policy, each pushing out/.
    let scatter = |n: &str, extra: &[(&str, &str)]| {
        let uri = format!("workflow/scatter-{n}:v1");
        let annotations = [
            &[("output-uri", uri.as_str()), ("output-path", "out")][..],
            extra,
        ]
        .concat();
        bare_pod(
            &format!("scatter-{n}"),
            &seed_step,
            &annotations,
            &format!("mkdir -p out && echo {n} > out/{n}.txt"),
        )
    };
    let one = scatter("1", &[("retries", "3")]);
    let warnings = admission_warnings(&stage.client, &one).await;
    eprintln!("scatter-1 admitted with warnings: {warnings:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("restartPolicy set to Never (it was Always, the default)")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains(&format!(
            "annotation {P}retries is not part of the step contract and is ignored"
        ))),
        "{warnings:?}"
    );
    for pod in [one, scatter("2", &[])] {
        let ended = run_pod(&stage, &pod).await;
        let spec = ended.spec.as_ref().expect("a spec");
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(restarts(&ended), 0, "run once");
    }

    // Gather: a fan-in pod, no input-path, no workingDir, no output-path.
    let gather = bare_pod(
        "gather",
        &seed_step,
        &[
            ("input-uri_1", "workflow/scatter-1:v1"),
            ("input-uri_2", "workflow/scatter-2:v1"),
            ("output-uri", "workflow/gathered:v1"),
        ],
        "ls inputs/out > listing.txt && cat image.txt >> listing.txt",
    );
    run_pod(&stage, &gather).await;

    // A Job with the annotations on its pod template, the pipe pushed, debug on.
    let jobs = Api::<Job>::namespaced(stage.client.clone(), WORKFLOW);
    let mut template_spec = pod_spec(&seed_step, "echo pancakes are really just morning cake");
    template_spec["restartPolicy"] = json!("OnFailure");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "pancakes"},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": contract(&[
                ("output-uri", "workflow/pancakes:v1"),
                ("output-pipe", "pancakes.txt"),
                ("output-path", "pancakes.txt"),
                ("debug", "true"),
            ])},
            "spec": template_spec
        }}
    }))
    .expect("a Job");
    let took = run_job(&stage.cluster, &jobs, &job, true).await;
    eprintln!("the Job with annotations on its template: {took:.1} s");

    // Everything read back with the ORAS SDK.
    let access = cache_access(&stage.client).await;
    let (address, login) = (&access.address, access.login());
    let pulled = tempfile::tempdir().expect("a temp dir");
    let read = |relative: &str| {
        std::fs::read_to_string(pulled.path().join(relative))
            .unwrap_or_else(|e| panic!("{relative}: {e}"))
    };
    for n in ["1", "2"] {
        let dir = format!("scatter-{n}");
        sdk_pull(
            address,
            &format!("workflow/{dir}:v1"),
            &pulled.path().join(&dir),
            login,
        );
        assert_eq!(read(&format!("{dir}/out/{n}.txt")), format!("{n}\n"));
    }
    sdk_pull(
        address,
        "workflow/gathered:v1",
        &pulled.path().join("gathered"),
        login,
    );
    let gathered = files(&pulled.path().join("gathered"));
    eprintln!("gathered: {gathered:?}");
    assert_eq!(
        read("gathered/listing.txt"),
        "1.txt\n2.txt\nfrom the image\n",
        "both inputs merged into one inputs/out/, beside the image's file"
    );
    let names: Vec<&str> = gathered.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "image.txt",
            "inputs/out/1.txt",
            "inputs/out/2.txt",
            "listing.txt"
        ],
        "the whole working directory pushed"
    );
    sdk_pull(
        address,
        "workflow/pancakes:v1",
        &pulled.path().join("pancakes"),
        login,
    );
    assert_eq!(
        read("pancakes/pancakes.txt"),
        "pancakes are really just morning cake\n"
    );

    hello_world(&stage, &seed_step).await;

    // debug: "true" is the oras-operator's "log the parsed settings".
    let logs = ocifit_log(&stage.cluster, "-1")
        .await
        .expect("ocifit's log");
    let debug_line = logs
        .lines()
        .find(|l| l.contains("step settings (annotation debug)") && l.contains("pancakes"))
        .unwrap_or_else(|| panic!("no debug line in ocifit's log:\n{logs}"));
    assert!(debug_line.contains("workflow/pancakes:v1"), "{debug_line}");
}

/// The oras-operator's `examples/tests/multiple-hello-world` files, as written but for the image
/// (`ubuntu` there; here the step image, whose WORKDIR is `/data`) and the real node's selector;
/// its `oras.yaml` is the ArtifactCache `ocifit migrate` makes of it (the test's registry image).
fn hello_world_files(step: &str, cache_image: &str) -> [(&'static str, String); 3] {
    let pod = |n: &str, annotations: &str, command: &str| {
        format!(
            r#"kind: Pod
apiVersion: v1
metadata:
  name: hello-world-{n}
  annotations:
{annotations}
     oras.converged-computing.github.io/debug: "true"
spec:
  nodeSelector: {{kubernetes.io/hostname: {NODE}}}
  containers:
    - name: my-container
      image: {step}
      command: {command}
"#
        )
    };
    let producer = |n: &str, tag: &str| {
        pod(
            n,
            &format!(
                "     oras.converged-computing.github.io/oras-cache: orascache-sample\n     oras.converged-computing.github.io/output-uri: dinosaur/hello-world:{tag}\n     oras.converged-computing.github.io/output-path: hello-world-{n}.txt"
            ),
            &format!(r#"[ "touch", "hello-world-{n}.txt" ]"#),
        )
    };
    [
        (
            "oras.yaml",
            format!(
                "apiVersion: ocifit.io/v1alpha1\nkind: ArtifactCache\nmetadata:\n  name: orascache-sample\nspec:\n  image: {cache_image}\n"
            ),
        ),
        (
            "pods-1.yaml",
            format!("{}---\n{}", producer("1", "one"), producer("2", "two")),
        ),
        (
            "pod-2.yaml",
            pod(
                "3",
                "     oras.converged-computing.github.io/oras-cache: orascache-sample\n     oras.converged-computing.github.io/input-uri_1: dinosaur/hello-world:one\n     oras.converged-computing.github.io/input-uri_2: dinosaur/hello-world:two",
                r#"[ "ls", "inputs" ]"#,
            ),
        ),
    ]
}

/// The multiple-hello-world example run as its README runs it: `kubectl logs hello-world-3`
/// lists both inputs, and both artifacts read back with the ORAS SDK.
async fn hello_world(stage: &Stage, step: &str) {
    let dir = tempfile::tempdir().expect("a temp dir");
    for (name, text) in hello_world_files(step, &stage.cache_image) {
        std::fs::write(dir.path().join(name), text).expect("the example's file");
    }
    let kubectl = async |args: &[&str]| {
        let mut all = vec!["-n", WORKFLOW];
        all.extend(args);
        stage.cluster.kubectl(all).await
    };
    let file = |name: &str| dir.path().join(name).display().to_string();
    kubectl(&["apply", "-f", &file("oras.yaml")])
        .await
        .expect("kubectl apply -f oras.yaml");
    let caches = Api::namespaced(stage.client.clone(), WORKFLOW);
    wait_ready_named(&stage.cluster, &caches, "orascache-sample").await;
    kubectl(&["apply", "-f", &file("pods-1.yaml")])
        .await
        .expect("kubectl apply -f pods-1.yaml");
    for name in ["hello-world-1", "hello-world-2"] {
        succeeded(stage, name).await;
    }
    kubectl(&["delete", "-f", &file("pods-1.yaml")])
        .await
        .expect("kubectl delete -f pods-1.yaml");
    kubectl(&["apply", "-f", &file("pod-2.yaml")])
        .await
        .expect("kubectl apply -f pod-2.yaml");
    // No output: the pod keeps restartPolicy Always and, as the README says, restarts; its log
    // is the listing of each run.
    let deadline = Instant::now() + WAIT;
    let log = loop {
        match kubectl(&["logs", "hello-world-3"]).await {
            Ok(log) if !log.is_empty() => break log,
            _ if Instant::now() > deadline => panic!(
                "hello-world-3 logged nothing\n{}",
                diagnostics(&stage.cluster, WORKFLOW).await
            ),
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    };
    eprintln!("kubectl logs hello-world-3:\n{log}");
    // Its debug: "true" logs the launcher's settings first, as the seed's README shows its own.
    let listing: Vec<&str> = log
        .lines()
        .filter(|line| !line.contains("ocifit::"))
        .collect();
    assert_eq!(listing, ["hello-world-1.txt", "hello-world-2.txt"], "{log}");

    let access = cache_access_of(&stage.client, "orascache-sample").await;
    let pulled = tempfile::tempdir().expect("a temp dir");
    for (n, tag) in [("1", "one"), ("2", "two")] {
        let into = pulled.path().join(tag);
        sdk_pull(
            &access.address,
            &format!("dinosaur/hello-world:{tag}"),
            &into,
            access.login(),
        );
        assert_eq!(files(&into), [(format!("hello-world-{n}.txt"), 0)]);
    }
}
