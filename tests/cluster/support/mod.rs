//! What the cluster scenarios share, and with them the main crate's benches that run a cluster and
//! its components: a real control plane and registry from the test kit with the CRD applied
//! (`Env`), artifacts and images pushed with the ORAS SDK and crane, and `ocifit run` started as a
//! real process (`Controller`: signals, leader election and the admin server are the real ones),
//! the binary being the one the caller built and passed to `Env::start`. Typed object builders are
//! in `objects`, ServiceAccount kubeconfigs and the TLS client in `access`, the chart's pod in
//! `chart_pod`, the certificate manager's harness in `certificates`, placement's served gate and
//! pod waits in `placement`, `ocifit run` serving the pod webhook in `webhook`, the HTTPS server
//! that stands in for a webhook in `https`, a real Prometheus on the chart's rules in `prometheus`, the scale run in `scale`, the flavor example's
//! resolved status (no cluster) in `flavor_example`.

pub mod access;
pub mod certificates;
pub mod chart_pod;
pub mod flavor_example;
pub mod https;
pub mod objects;
pub mod placement;
pub mod prometheus;
pub mod scale;
pub mod webhook;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use objects::Policy;
use ocifit::api::{ImageSelectionPolicy, ImageSelectionPolicyStatus};
use ocifit_testkit::{Cluster, ClusterBuilder, FakeNode, OrasArtifact, Registry, create_node};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

pub const COMPAT_LAYER: &str = "application/vnd.oci.image.compatibilities.v1+json";
pub const FLAVOR: &str = "feature.node.ocifit-k8s.flavor";
/// Where [`Env::push_flavors`] pushes the seed's flavor artifact in the test registry.
pub const FLAVOR_ARTIFACT: &str = "ocifit/flavor-compat:v1";

/// A cluster (etcd + apiserver) with the CRD applied and a registry, and the `ocifit` binary its
/// [`Controller`]s run.
pub struct Env {
    pub cluster: Cluster,
    pub client: Client,
    /// The binary the caller built: the cluster crate's `ocifit-under-test`, or the main crate's
    /// `ocifit` for a bench (compiled with the bench profile).
    pub ocifit: PathBuf,
}

impl Env {
    pub async fn start(ocifit: impl Into<PathBuf>) -> Env {
        Env::start_with(ocifit, Cluster::builder()).await
    }

    /// As [`Env::start`], with every controller (kube-controller-manager, kube-scheduler, kwok):
    /// pods are scheduled, bound and run.
    pub async fn start_scheduling(ocifit: impl Into<PathBuf>) -> Env {
        Env::start_with(ocifit, Cluster::builder().with_all_controllers()).await
    }

    /// As [`Env::start`], from `builder` (e.g. with kube-scheduler and kwok).
    pub async fn start_with(ocifit: impl Into<PathBuf>, builder: ClusterBuilder) -> Env {
        let cluster = builder
            .with_registry(Registry::builder())
            .start()
            .await
            .expect("a local cluster and registry");
        let client = cluster.client().expect("a client");
        ocifit_testkit::apply_crd_dir(&client, &ocifit_testkit::repo_root().join("crds"))
            .await
            .expect("the ImageSelectionPolicy CRD");
        ocifit_testkit::create_namespace(&client, "ocifit-system")
            .await
            .expect("the operator namespace");
        Env {
            cluster,
            client,
            ocifit: ocifit.into(),
        }
    }

    pub fn registry(&self) -> &Registry {
        self.cluster.registry().expect("a registry")
    }

    /// Pushes an ocifit artifact (JSON text) with the ORAS SDK; returns its digest.
    pub async fn push_artifact(&self, repository_tag: &str, json: &str) -> String {
        let registry = self.registry();
        let file = registry.dir().join(format!(
            "compat-{}.json",
            repository_tag.replace(['/', ':'], "-")
        ));
        std::fs::write(&file, json).expect("an artifact file");
        let reference = registry.reference(repository_tag);
        registry
            .push_artifact(&OrasArtifact::new(&reference, &file, COMPAT_LAYER))
            .await
            .expect("oras push")
    }

    /// The seed's flavor artifact pushed to [`FLAVOR_ARTIFACT`] with its three images
    /// (`<registry>/library/{debian:11,ubuntu:24.04,rockylinux:9}`, linux/amd64 and arm64).
    pub async fn push_flavors(&self) -> [String; 3] {
        let registry = self.registry();
        let images = [
            ("library/debian", "11", "vanilla"),
            ("library/ubuntu", "24.04", "chocolate"),
            ("library/rockylinux", "9", "strawberry"),
        ];
        for (repository, tag, _) in images {
            registry
                .push_multi_platform(repository, tag, &["linux/amd64", "linux/arm64"])
                .await
                .expect("crane push");
        }
        let refs = images.map(|(repo, tag, _)| registry.reference(&format!("{repo}:{tag}")));
        let sets = images
            .iter()
            .zip(&refs)
            .map(|((_, _, flavor), image)| (image.as_str(), *flavor));
        self.push_artifact(FLAVOR_ARTIFACT, &flavor_artifact(sets))
            .await;
        refs
    }

    /// Creates the node (see [`objects::linux_node`]).
    pub async fn add_node(&self, node: FakeNode) {
        create_node(&self.client, &node).await.expect("a node");
    }

    pub async fn label_node(&self, name: &str, key: &str, value: &str) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"labels": {key: value}}})),
            )
            .await
            .expect("a relabelled node");
    }

    pub async fn delete_node(&self, name: &str) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .delete(name, &Default::default())
            .await
            .expect("a deleted node");
    }

    /// A policy on the artifact at `path` in the test registry.
    pub fn policy_on(&self, name: &str, path: &str) -> Policy {
        Policy::on_artifact(name, &self.registry().reference(path))
    }

    /// The policy named `name` on the seed's flavor artifact ([`Env::push_flavors`]).
    pub fn flavor_policy(&self, name: &str) -> Policy {
        self.policy_on(name, FLAVOR_ARTIFACT)
    }

    /// Creates the policy.
    pub async fn create_policy(&self, policy: &Policy) {
        self.policies()
            .create(&PostParams::default(), &policy.build())
            .await
            .expect("a created policy");
    }

    pub fn policies(&self) -> Api<ImageSelectionPolicy> {
        Api::all(self.client.clone())
    }

    pub async fn status(&self, name: &str) -> Option<ImageSelectionPolicyStatus> {
        self.policies().get(name).await.expect("the policy").status
    }

    /// Waits (30s at most) until the policy is Ready: every class resolved.
    pub async fn wait_ready(&self, name: &str) -> ImageSelectionPolicyStatus {
        let (status, _) = self
            .wait_status(name, Duration::from_secs(30), "Ready", |s| {
                is(s, "Ready", "True", "Resolved")
            })
            .await;
        status
    }

    /// Polls the policy status until `check` holds; returns it and how long it took.
    pub async fn wait_status(
        &self,
        name: &str,
        timeout: Duration,
        what: &str,
        check: impl Fn(&ImageSelectionPolicyStatus) -> bool,
    ) -> (ImageSelectionPolicyStatus, Duration) {
        let start = Instant::now();
        loop {
            let status = self.status(name).await;
            if let Some(status) = status.as_ref().filter(|s| check(s)) {
                return (status.clone(), start.elapsed());
            }
            assert!(
                start.elapsed() < timeout,
                "policy {name}: {what} not seen within {timeout:?}; last status: {}",
                serde_json::to_string_pretty(&status).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `kubectl get isp NAME` as printed.
    pub async fn kubectl_get_isp(&self, name: &str) -> String {
        self.cluster
            .kubectl(["get", "isp", name])
            .await
            .expect("kubectl get isp")
    }

    /// Events on the policy: (type, reason, note).
    pub async fn events(&self, name: &str) -> Vec<(String, String, String)> {
        let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(self.client.clone());
        events
            .list(&Default::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                    && e.regarding.as_ref().and_then(|r| r.kind.as_deref())
                        == Some("ImageSelectionPolicy")
            })
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.note.unwrap_or_default(),
                )
            })
            .collect()
    }
}

impl Env {
    /// Waits until the policy has an Event of `type_` with `reason` (Events follow the status
    /// write they describe); returns every Event seen.
    pub async fn wait_event(
        &self,
        name: &str,
        type_: &str,
        reason: &str,
    ) -> Vec<(String, String, String)> {
        let start = Instant::now();
        loop {
            let events = self.events(name).await;
            if events.iter().any(|(t, r, _)| t == type_ && r == reason) {
                return events;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no {type_} {reason} event on {name}: {events:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The flavor artifact: one set per `(image, flavor)`.
pub fn flavor_artifact<'a>(sets: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let sets: Vec<String> = sets
        .into_iter()
        .map(|(image, flavor)| flavor_set(image, flavor))
        .collect();
    format!(
        r#"{{"version":"v1alpha1","compatibilities":[{}]}}"#,
        sets.join(",")
    )
}

/// One ocifit set: `image` for nodes whose flavor label is `flavor`.
pub fn flavor_set(image: &str, flavor: &str) -> String {
    format!(
        r#"{{"tag":"{image}","description":"flavor {flavor}","rules":[{{"matchFeatures":[{{"matchExpressions":[{{"op":"In","key":"{FLAVOR}","value":["{flavor}"]}}]}}]}}]}}"#
    )
}

/// Applies every file of `config/rbac/` (the operator's ServiceAccount, roles and bindings).
pub async fn apply_config_rbac(cluster: &Cluster) {
    let dir = ocifit_testkit::repo_root().join("config/rbac");
    for file in std::fs::read_dir(dir).expect("config/rbac") {
        let path = file.expect("a file").path();
        cluster
            .kubectl(["apply", "-f", &path.display().to_string()])
            .await
            .expect("kubectl apply");
    }
}

/// The text of a Secret's `key` (PEM data).
pub fn data(secret: &Secret, key: &str) -> String {
    let bytes = &secret.data.as_ref().expect("Secret data")[key].0;
    String::from_utf8(bytes.clone()).expect("UTF-8 PEM")
}

/// The condition `type_`'s (status, reason), if present.
pub fn condition(status: &ImageSelectionPolicyStatus, type_: &str) -> Option<(String, String)> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// The message of the condition `type_`, empty when absent.
pub fn condition_message(status: &ImageSelectionPolicyStatus, type_: &str) -> String {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

pub fn is(status: &ImageSelectionPolicyStatus, type_: &str, value: &str, reason: &str) -> bool {
    condition(status, type_) == Some((value.to_owned(), reason.to_owned()))
}

/// The images of the classes, sorted.
pub fn images(status: &ImageSelectionPolicyStatus) -> Vec<Option<String>> {
    let mut images: Vec<_> = status.classes.iter().map(|c| c.image.clone()).collect();
    images.sort();
    images
}

/// A running `ocifit run` process.
pub struct Controller {
    child: Child,
    pub admin: String,
    pub log: PathBuf,
}

impl Controller {
    /// Starts `ocifit run` against the env's cluster with the registry as plain HTTP, and
    /// waits until it is ready.
    pub async fn start(env: &Env, identity: &str, extra: &[&str]) -> Controller {
        let controller = Controller::spawn(env, identity, extra);
        controller.wait_ready().await;
        controller
    }

    /// As [`Controller::start`], without waiting for readiness.
    pub fn spawn(env: &Env, identity: &str, extra: &[&str]) -> Controller {
        let admin = free_address();
        let log = env.cluster.dir().join(format!("ocifit-{identity}.log"));
        let log_file = std::fs::File::create(&log).expect("a log file");
        let mut args: Vec<String> = vec!["run".into()];
        if !extra.contains(&"--kubeconfig") {
            args.extend([
                "--kubeconfig".into(),
                env.cluster.kubeconfig().display().to_string(),
            ]);
        }
        args.extend([
            "--admin-bind-address".into(),
            admin.clone(),
            "--plain-http-registry".into(),
            env.registry().addr().to_owned(),
            // The test kit's registries are on loopback (or this machine's own address): the
            // suite's registry, and the fakes some tests start beside it.
            "--allowed-private-registries".into(),
            format!("127.0.0.0/8,{}", env.registry().addr()),
            "--identity".into(),
            identity.into(),
            "--lease-namespace".into(),
            "ocifit-system".into(),
            "--log-format".into(),
            "json".into(),
        ]);
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let child = Command::new(&env.ocifit)
            .args(&args)
            .env("RUST_LOG", "info,ocifit=debug")
            .env_remove("KUBECONFIG")
            .stdout(Stdio::null())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .expect("ocifit run");
        Controller { child, admin, log }
    }

    async fn wait_ready(&self) {
        let start = Instant::now();
        while get(&self.admin, "/readyz").await.map(|(code, _)| code) != Some(200) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "ocifit run not ready within 30s; log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("a running process")
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The value of a metric line (`name{labels}` exactly as exposed), 0 when absent.
    pub async fn metric(&self, series: &str) -> f64 {
        let (_, body) = get(&self.admin, "/metrics").await.expect("/metrics");
        body.lines()
            .find_map(|line| {
                line.strip_prefix(series)
                    .and_then(|rest| rest.strip_prefix(' '))
                    .and_then(|value| value.trim().parse().ok())
            })
            .unwrap_or(0.0)
    }

    /// Waits until the metric exceeds `value` (a counter counts after the write it counts is
    /// visible, so a test that saw the write polls); returns when that was seen.
    pub async fn wait_metric_above(&self, series: &str, value: f64, timeout: Duration) -> Instant {
        let start = Instant::now();
        loop {
            if self.metric(series).await > value {
                return Instant::now();
            }
            assert!(start.elapsed() < timeout, "{series} stayed at {value}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, then the exit status (which must come within 30s).
    pub async fn stop(mut self) -> std::process::ExitStatus {
        terminate(&mut self.child, Duration::from_secs(30)).await
    }

    /// Sends SIGTERM without waiting: the process keeps running while it shuts down.
    pub fn begin_stop(&self) {
        sigterm(&self.child);
    }

    /// The exit status after [`Controller::begin_stop`], which must come `within`.
    pub async fn exited(mut self, within: Duration) -> std::process::ExitStatus {
        exit_status(&mut self.child, within).await
    }
}

/// Sends SIGTERM to `child` and returns its exit status, which must come `within`.
pub async fn terminate(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    sigterm(child);
    exit_status(child, within).await
}

fn sigterm(child: &Child) {
    let pid = child.id().expect("a running process");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
}

async fn exit_status(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    tokio::time::timeout(within, child.wait())
        .await
        .unwrap_or_else(|_| panic!("ocifit run exits within {within:?} of SIGTERM"))
        .expect("an exit status")
}

/// The standard output of a finished command that must have succeeded; a failure names `what`
/// and shows both outputs.
pub fn succeeded(what: &str, output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what}: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

pub fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("an address").to_string()
}

/// A plain HTTP GET: (status code, body).
pub async fn get(address: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(address).await.ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((code, body))
}

impl Controller {
    /// SIGKILL: the process dies holding whatever it held (its Lease expires on its own).
    pub async fn kill(mut self) {
        self.child.kill().await.expect("a killed process");
    }
}
