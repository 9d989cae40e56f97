//! `helm install` for real: ocifit's own image (assembled from this test's binary, pushed to the
//! cluster's registry) installed by its own chart with default values (managed TLS, two replicas)
//! runs as pods on a real node (kubelet, containerd): both replicas become Ready, one holds the
//! Lease, and the apiserver calls the webhook through the chart's Service. The flavor example's
//! policy over kwok's flavor nodes and the real node becomes Ready, and an opted-in pod on the real
//! node gets its class's image, which runs (its log says which flavor it is). `helm test` passes
//! (the chart's test pod, ocifit's own image running `ocifit selftest`: the CRDs served, a dry run
//! through each of the four webhooks), and the chart's aggregated roles let a namespace's `edit`
//! user create an ArtifactCache and its `view` user only read it (impersonated). A `kubectl rollout
//! restart` of the operator under a steady stream of opted-in pod creations fails no admission.
//! `helm upgrade` with changed values rolls out; `helm uninstall` keeps the CRD and the policy,
//! leaves nothing of ours running, and its hook Job releases the pod placement was holding. The
//! same rollout restart while every core of the machine is kept busy fails no admission either.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use ocifit::api::ImageSelectionPolicy;
use ocifit::api::placement_pod::{OUTCOME_ANNOTATION, Outcome, SCHEDULING_GATE};
use ocifit_testkit::chart::{NAMESPACE, RELEASE, chart_dir, helm, repo_root};
use ocifit_testkit::flavors::{
    FLAVOR_LABEL, FLAVOR_POLICY, FlavorArtifact, apply_flavor_policy, create_flavor_nodes,
    flavor_line, push_flavor_example,
};
use ocifit_testkit::image::ocifit_image;
use ocifit_testkit::{
    Cluster, PushedImage, RealNode, Registry, create_namespace, wait_for_pod_log,
    wait_for_pod_ready, wait_until_admitted,
};

use crate::support::placement::{self, gates};

const NODE: &str = "real-1";
const OPT_IN: &str = "oci.image.compatibilities.selection/enabled";
const SELECTOR: &str = "app.kubernetes.io/name=ocifit,app.kubernetes.io/component=controller";
const WAIT: Duration = Duration::from_secs(180);

#[tokio::test]
async fn the_chart_runs_ocifits_image_on_a_real_node_and_a_rollout_restart_fails_no_admission() {
    let started = Instant::now();
    let (cluster, client) = vanilla_real_node().await;
    eprintln!(
        "cluster with a real node: {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let pushed = install_ocifit(&cluster).await;

    let operator = operator_pods(&client).await;
    assert_eq!(operator.len(), 2, "two replicas");
    for pod in &operator {
        let spec = pod.spec.as_ref().expect("a spec");
        assert_eq!(spec.node_name.as_deref(), Some(NODE));
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some(pushed.reference.as_str())
        );
    }
    let names: Vec<String> = operator
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let holder = leader(&client).await;
    assert!(
        names.contains(&holder),
        "the Lease holder {holder} is one of {names:?}"
    );
    let configuration = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get("ocifit")
        .await
        .expect("the chart's webhook configuration");
    let hook = &configuration.webhooks.expect("a webhook")[0];
    let service = hook
        .client_config
        .service
        .as_ref()
        .expect("called through a Service");
    assert_eq!(
        (service.namespace.as_str(), service.name.as_str()),
        (NAMESPACE, "ocifit-webhook")
    );
    assert_eq!(hook.client_config.url, None);

    helm_test_passes(&cluster).await;
    a_namespace_editor_creates_an_artifact_cache_and_a_viewer_only_reads_it(&cluster).await;

    // The flavor example over kwok's flavor nodes and the real node.
    let example = stage_flavor_example(&cluster).await;
    let policy = policy_ready(&client).await;
    let classes = policy.status.expect("a status").classes;
    let vanilla = classes
        .iter()
        .find(|c| c.labels.get(FLAVOR_LABEL).map(String::as_str) == Some("vanilla"))
        .expect("a vanilla class");
    assert_eq!(
        vanilla.nodes, 2,
        "worker-vanilla and the real node: {classes:?}"
    );

    // An opted-in pod on the real node gets its class's image, and runs it.
    create_namespace(&client, "apps")
        .await
        .expect("a namespace");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "apps");
    let mut app = opted_in("runs");
    app["spec"]["nodeSelector"] = serde_json::json!({"kubernetes.io/hostname": NODE});
    let app: Pod = serde_json::from_value(app).expect("a pod");
    // Ready is written by the leader; each replica's index follows its own watch a moment later.
    wait_until_admitted(&client, "apps", &app, WAIT, |pod| {
        image_of(pod) == example.images["vanilla"]
    })
    .await
    .expect("the webhook gives the vanilla image");
    let created = pods
        .create(&PostParams::default(), &app)
        .await
        .expect("the pod is admitted");
    assert_eq!(image_of(&created), example.images["vanilla"]);
    wait_for_pod_log(&client, "apps", "runs", &flavor_line("vanilla"), WAIT)
        .await
        .expect("the chosen image runs");
    let logs = cluster
        .kubectl(["logs", "-n", "apps", "runs"])
        .await
        .expect("kubectl logs");
    assert_eq!(logs.trim(), flavor_line("vanilla"));

    rollout_restart_under_load(&cluster, &client, &example.images["chocolate"]).await;

    // helm upgrade with changed values rolls out.
    helm_release(
        &cluster,
        "upgrade",
        &[
            "--reuse-values",
            "--set",
            "replicaCount=3",
            "--set",
            "logFormat=text",
        ],
    )
    .await;
    let upgraded = operator_pods(&client).await;
    assert_eq!(upgraded.len(), 3, "three replicas after the upgrade");
    for pod in &upgraded {
        let args = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers[0].args.clone())
            .unwrap_or_default();
        assert!(args.contains(&"--log-format=text".to_owned()), "{args:?}");
    }
    let admitted = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(opted_in("after-upgrade")).expect("a pod"),
        )
        .await
        .expect("admitted after the upgrade");
    assert_eq!(image_of(&admitted), example.images["chocolate"]);

    let held = held_by_placement(&client).await;

    // helm uninstall keeps the CRD and the policy, and nothing of ours runs any more.
    helm(
        &["uninstall", RELEASE, "--namespace", NAMESPACE, "--wait"],
        Some(cluster.kubeconfig()),
    )
    .await
    .expect("helm uninstall");
    Api::<CustomResourceDefinition>::all(client.clone())
        .get("imageselectionpolicies.ocifit.io")
        .await
        .expect("the CRD is kept");
    Api::<ImageSelectionPolicy>::all(client.clone())
        .get(FLAVOR_POLICY)
        .await
        .expect("the policy is kept");
    let deadline = Instant::now() + WAIT;
    while !operator_pods_all(&client).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the operator's pods are still there"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .get_opt("ocifit")
            .await
            .expect("a webhook configuration lookup")
            .is_none()
    );
    let unchanged = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(opted_in("after-uninstall")).expect("a pod"),
        )
        .await
        .expect("no webhook refuses it");
    assert_eq!(image_of(&unchanged), "placeholder:latest");
    // The chart's post-delete Job released the held pod, then its own objects were deleted.
    let released = held.get("held").await.expect("the held pod");
    assert!(gates(&released).is_empty(), "{:?}", released.spec);
    assert!(
        Api::<ClusterRole>::all(client.clone())
            .get_opt("ocifit-release-gates")
            .await
            .expect("a ClusterRole lookup")
            .is_none(),
        "the hook's RBAC is deleted once the Job succeeded"
    );
    eprintln!("whole scenario: {:.1} s", started.elapsed().as_secs_f64());
}

#[tokio::test]
async fn a_rollout_restart_on_a_machine_busy_on_every_core_fails_no_admission() {
    let (cluster, client) = vanilla_real_node().await;
    install_ocifit(&cluster).await;
    let example = stage_flavor_example(&cluster).await;
    policy_ready(&client).await;
    create_namespace(&client, "apps")
        .await
        .expect("a namespace");
    let probe: Pod = serde_json::from_value(opted_in("probe")).expect("a pod");
    wait_until_admitted(&client, "apps", &probe, WAIT, |pod| {
        image_of(pod) == example.images["chocolate"]
    })
    .await
    .expect("every replica gives the chocolate image");

    let hog = CpuHog::on_every_core();
    eprintln!("CPU hog: {} busy processes", hog.processes());
    rollout_restart_under_load(&cluster, &client, &example.images["chocolate"]).await;
    drop(hog);
}

/// Processes busy-looping, one per core, killed when dropped (and by `timeout` after 5 minutes
/// should the test process die first): a machine as loaded as a node during a rollout.
struct CpuHog(Vec<std::process::Child>);

impl CpuHog {
    fn on_every_core() -> CpuHog {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let children = (0..cores)
            .map(|_| {
                std::process::Command::new("timeout")
                    .args(["300", "sh", "-c", "while :; do :; done"])
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .expect("a busy process")
            })
            .collect();
        CpuHog(children)
    }

    fn processes(&self) -> usize {
        self.0.len()
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        for child in &mut self.0 {
            // SIGTERM, which `timeout` passes on to its loop (SIGKILL would orphan the loop).
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }
}

/// `helm test`: the chart's test pod (ocifit's own image, `ocifit selftest`) finds the CRDs served
/// and a dry run through each of the four webhooks denied or changed by it.
async fn helm_test_passes(cluster: &Cluster) {
    let output = match helm(
        &[
            "test",
            RELEASE,
            "--namespace",
            NAMESPACE,
            "--logs",
            "--timeout",
            "50s",
        ],
        Some(cluster.kubeconfig()),
    )
    .await
    {
        Ok(output) => output,
        Err(e) => {
            let logs = cluster
                .kubectl(["logs", "-n", NAMESPACE, "ocifit-test"])
                .await
                .unwrap_or_default();
            panic!("helm test failed: {e}\nits pod's log:\n{logs}");
        }
    };
    eprintln!("helm test:\n{output}");
    assert!(output.contains("every check passed"), "{output}");
    for check in [
        "ok    CRD imageselectionpolicies served",
        "ok    CRD placementpolicies served",
        "ok    CRD artifactcaches served",
        "ok    webhook pods.ocifit.io: denied by pods.ocifit.io",
        "ok    webhook placement.ocifit.io: gated by placement.ocifit.io",
        "ok    webhook pods.steps.artifacts.ocifit.io: denied",
        "ok    webhook jobs.steps.artifacts.ocifit.io: denied",
    ] {
        assert!(output.contains(check), "{check}\n{output}");
    }
}

/// The chart's aggregated ClusterRoles: a user bound to the default `edit` role in one namespace
/// creates an ArtifactCache there (no RBAC of the admin's own), and one bound to `view` reads it
/// but may not create one. Both through the real apiserver, impersonated.
async fn a_namespace_editor_creates_an_artifact_cache_and_a_viewer_only_reads_it(
    cluster: &Cluster,
) {
    let client = cluster.client().expect("a client");
    create_namespace(&client, "team")
        .await
        .expect("a namespace");
    for (user, role) in [("jane", "edit"), ("bob", "view")] {
        cluster
            .kubectl([
                "create",
                "rolebinding",
                user,
                "-n",
                "team",
                "--clusterrole",
                role,
                "--user",
                user,
            ])
            .await
            .expect("a RoleBinding");
    }
    // The clusterrole-aggregation controller folds the chart's roles into edit a moment later.
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let deadline = Instant::now() + WAIT;
    loop {
        let edit = roles.get("edit").await.expect("the edit role");
        let aggregated = edit.rules.unwrap_or_default().iter().any(|r| {
            r.resources
                .as_ref()
                .is_some_and(|rs| rs.contains(&"artifactcaches".to_owned()))
                && r.verbs.contains(&"create".to_owned())
        });
        if aggregated {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "edit never aggregated the chart's ArtifactCache role"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // An external cache (nothing deployed), at the test kit's own registry.
    let registry = cluster.registry().expect("a registry").addr();
    let cache = format!(
        "apiVersion: ocifit.io/v1alpha1\nkind: ArtifactCache\nmetadata:\n  name: oras\n  \
         namespace: team\nspec:\n  deploy: false\n  endpoint: {registry}\n  plainHTTP: true\n"
    );
    let created = cluster
        .kubectl_with_input(["--as", "bob", "create", "-f", "-"], &cache)
        .await;
    let refused = created
        .expect_err("a viewer may not create a cache")
        .to_string();
    assert!(refused.contains("forbidden"), "{refused}");
    cluster
        .kubectl_with_input(["--as", "jane", "create", "-f", "-"], &cache)
        .await
        .expect("an editor creates a cache");
    let read = cluster
        .kubectl([
            "--as",
            "bob",
            "get",
            "artifactcaches",
            "-n",
            "team",
            "-o",
            "name",
        ])
        .await
        .expect("a viewer reads caches");
    assert_eq!(read.trim(), "artifactcache.ocifit.io/oras");
}

/// A pod the chart's placement gate gated and the controller keeps holding: its image's registry
/// does not answer and its policy says `Hold`. Its namespace's pod API.
async fn held_by_placement(client: &Client) -> Api<Pod> {
    create_namespace(client, "held").await.expect("a namespace");
    placement::create_policy(
        client,
        "hold-unreadable",
        serde_json::json!({
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "held"}},
            "onInspectionFailure": {"attempts": 1, "timeout": "1s", "action": "Hold"},
        }),
    )
    .await;
    let pod = placement::pod(
        "held",
        "held",
        serde_json::json!({}),
        &[("app", "127.0.0.1:9/nothing/here:v1")],
    );
    // Each replica's gate holds the policy a moment after it is stored.
    wait_until_admitted(client, "held", &pod, WAIT, |p| {
        gates(p) == [SCHEDULING_GATE]
    })
    .await
    .expect("the gate admits the pod gated");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "held");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("the pod is created");
    placement::wait_pod(&pods, "held", "held by its policy", |p| {
        placement::annotation(p, OUTCOME_ANNOTATION) == Outcome::Held.as_str()
            && gates(p) == [SCHEDULING_GATE]
    })
    .await;
    pods
}

/// `kubectl rollout restart` of the operator while pods are created, opted in, as fast as the
/// apiserver admits them one after another: every creation must be admitted with its class's image.
async fn rollout_restart_under_load(cluster: &Cluster, client: &Client, expected: &str) {
    create_namespace(client, "load").await.expect("a namespace");
    let stop = Arc::new(AtomicBool::new(false));
    let stream = {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "load");
        let stop = Arc::clone(&stop);
        let expected = expected.to_owned();
        tokio::spawn(async move {
            let (mut created, mut admitted, mut failures) = (0_u32, 0_u32, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let mut pod = opted_in("");
                pod["metadata"] =
                    serde_json::json!({"generateName": "load-", "labels": {OPT_IN: "true"}});
                let pod: Pod = serde_json::from_value(pod).expect("a pod");
                match pods.create(&PostParams::default(), &pod).await {
                    Ok(stored) if image_of(&stored) == expected => {
                        created += 1;
                        admitted += 1;
                    }
                    Ok(stored) => {
                        created += 1;
                        failures.push(format!("admitted with {}", image_of(&stored)));
                    }
                    Err(e) => failures.push(e.to_string()),
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (created, admitted, failures)
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before: Vec<String> = operator_pods_all(client)
        .await
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let since = Instant::now();
    cluster
        .kubectl([
            "rollout",
            "restart",
            "deployment/ocifit-controller",
            "-n",
            NAMESPACE,
        ])
        .await
        .expect("kubectl rollout restart");
    let deadline = Instant::now() + WAIT;
    loop {
        let now = operator_pods_all(client).await;
        let replaced = now.len() == 2
            && now.iter().all(|p| {
                !before.contains(p.metadata.name.as_ref().expect("a name"))
                    && p.metadata.deletion_timestamp.is_none()
            });
        if replaced && operator_pods(client).await.len() == 2 {
            break;
        }
        if Instant::now() >= deadline {
            let pods = cluster
                .kubectl(["get", "pods", "-n", NAMESPACE, "-o", "wide"])
                .await
                .unwrap_or_default();
            panic!("the rollout did not finish in {WAIT:?}:\n{pods}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let rollout = since.elapsed();
    // Old pods may still answer for their grace period; keep creating a little longer.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let (created, admitted, failures) = stream.await.expect("the pod stream");
    eprintln!(
        "rollout restart under load: rolled out in {:.1} s; {created} pods created, {admitted} \
         admitted with their class's image, {} failed",
        rollout.as_secs_f64(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "admissions failed during the rollout: {failures:#?}"
    );
    assert!(
        created >= 50,
        "only {created} pods were created: not a steady stream"
    );
}

/// `helm ACTION` of the chart, waiting for its pods to be Ready.
async fn helm_release(cluster: &Cluster, action: &str, extra: &[&str]) {
    let chart = chart_dir();
    // Helm's own timeout, below the test kit's limit on one command (60 s).
    let timeout = "50s";
    let mut args = vec![
        action,
        RELEASE,
        chart.to_str().expect("a UTF-8 path"),
        "--namespace",
        NAMESPACE,
        "--wait",
        "--timeout",
        timeout,
    ];
    args.extend(extra);
    if let Err(e) = helm(&args, Some(cluster.kubeconfig())).await {
        let pods = cluster
            .kubectl(["get", "pods", "-A", "-o", "wide"])
            .await
            .unwrap_or_default();
        let events = cluster
            .kubectl(["get", "events", "-n", NAMESPACE])
            .await
            .unwrap_or_default();
        panic!("{e}\npods:\n{pods}\nevents:\n{events}");
    }
}

/// The operator's Ready pods.
async fn operator_pods(client: &Client) -> Vec<Pod> {
    let mut ready = Vec::new();
    for pod in operator_pods_all(client).await {
        let name = pod.metadata.name.clone().expect("a name");
        if pod.metadata.deletion_timestamp.is_none()
            && wait_for_pod_ready(client, NAMESPACE, &name, Duration::ZERO)
                .await
                .is_ok()
        {
            ready.push(pod);
        }
    }
    ready
}

/// The operator's pods, whatever their state.
async fn operator_pods_all(client: &Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(SELECTOR))
        .await
        .expect("the operator's pods")
        .items
}

async fn leader(client: &Client) -> String {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + WAIT;
    loop {
        let holder = leases
            .get_opt("ocifit-controller")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity);
        if let Some(holder) = holder.filter(|h| !h.is_empty()) {
            return holder;
        }
        assert!(Instant::now() < deadline, "nobody took the chart's Lease");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn policy_ready(client: &Client) -> ImageSelectionPolicy {
    let policies: Api<ImageSelectionPolicy> = Api::all(client.clone());
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(policy) = policies.get_opt(FLAVOR_POLICY).await.ok().flatten() {
            let ready = policy.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            });
            if ready {
                return policy;
            }
        }
        assert!(Instant::now() < deadline, "the flavor policy is not Ready");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An opted-in pod with the placeholder image, for the chocolate flavor (kwok's node) unless its
/// nodeSelector is changed.
fn opted_in(name: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": name, "labels": {OPT_IN: "true"}},
        "spec": {
            "nodeSelector": {FLAVOR_LABEL: "chocolate"},
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "placeholder:latest"}],
        },
    })
}

fn image_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers[0].image.clone())
        .unwrap_or_default()
}

/// ocifit's image, assembled from the binary under test, pushed to the cluster's registry and
/// installed by the chart (`helm install --wait`): defaults but for the image, the local
/// plain-HTTP registry, and the node: kwok's nodes run nothing, so the operator's pods must land
/// on the real one. The image as pushed.
async fn install_ocifit(cluster: &Cluster) -> PushedImage {
    let registry = cluster.registry().expect("a registry");
    let since = Instant::now();
    let image = ocifit_image(
        Path::new(crate::support::ocifit_binary()),
        env!("CARGO_PKG_VERSION"),
        "test",
    )
    .expect("ocifit's image");
    let pushed = registry
        .push_built(&image, "ocifit/ocifit", "test")
        .await
        .expect("ocifit's image is pushed");
    eprintln!(
        "ocifit's image assembled and pushed: {:.1} s",
        since.elapsed().as_secs_f64()
    );

    let since = Instant::now();
    let repository = format!("image.repository={}/ocifit/ocifit", registry.addr());
    let plain_http = format!("registry.plainHttp={{{}}}", registry.addr());
    let private = format!("registry.allowedPrivate={{{}}}", registry.addr());
    let node_selector = format!("nodeSelector.kubernetes\\.io/hostname={NODE}");
    helm_release(
        cluster,
        "install",
        &[
            "--create-namespace",
            "--set",
            &repository,
            "--set",
            "image.tag=test",
            "--set",
            &plain_http,
            "--set",
            &node_selector,
            // The registry is on this machine's own address.
            "--set",
            &private,
        ],
    )
    .await;
    eprintln!(
        "helm install --wait: {:.1} s",
        since.elapsed().as_secs_f64()
    );
    pushed
}

/// A cluster with a real node of the vanilla flavor, and a client.
async fn vanilla_real_node() -> (Cluster, Client) {
    let cluster = Cluster::builder()
        .with_all_controllers()
        .with_registry(Registry::builder())
        .real_node(RealNode::new(NODE).label(FLAVOR_LABEL, "vanilla"))
        .start()
        .await
        .expect("a cluster with a real node");
    let client = cluster.client().expect("a client");
    (cluster, client)
}

/// The flavor example staged: its images and artifact pushed, kwok's flavor nodes, the policy;
/// the artifact as pushed.
async fn stage_flavor_example(cluster: &Cluster) -> FlavorArtifact {
    let registry = cluster.registry().expect("a registry");
    let scratch = tempfile::tempdir().expect("a directory");
    let example = push_flavor_example(registry, &repo_root(), scratch.path())
        .await
        .expect("the flavor example is pushed");
    let client = cluster.client().expect("a client");
    create_flavor_nodes(&client, &repo_root())
        .await
        .expect("the flavor nodes");
    apply_flavor_policy(cluster, &repo_root(), &example.reference)
        .await
        .expect("the policy is applied");
    example
}
