//! For the chart-wiring scenarios: the container of the Deployment the chart stored, turned into
//! the command line and environment the kubelet would give it, and `ocifit run` started with them
//! on this host.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Container;
use kube::{Api, Client};
use ocifit_testkit::Cluster;
use ocifit_testkit::chart::{self, NAMESPACE};
use tokio::process::{Child, Command};

use super::{get, terminate};

/// The pod name the downward API would give this replica.
pub const POD_NAME: &str = "ocifit-controller-7d9f8-wiring";
pub const WAIT: Duration = Duration::from_secs(30);

/// `helm install` of the chart with `sets` into the cluster.
pub async fn install(cluster: &Cluster, sets: &[&str]) {
    chart::install(&chart::chart_dir(), sets, cluster.kubeconfig())
        .await
        .expect("helm install");
}

/// What the chart's pod runs: arguments, resolved environment, ServiceAccount.
#[derive(Debug)]
pub struct ChartPod {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub account: String,
}

impl ChartPod {
    /// The pod of the stored `ocifit-controller` Deployment.
    pub async fn stored(client: &Client) -> ChartPod {
        let deployment = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
            .get("ocifit-controller")
            .await
            .expect("the chart's Deployment");
        let pod = deployment
            .spec
            .and_then(|s| s.template.spec)
            .expect("a pod template");
        let container = &pod.containers[0];
        // No command: the image's entrypoint is the binary itself.
        assert_eq!(container.command, None);
        let args = container.args.clone().expect("the container's args");
        assert_eq!(args[0], "run");
        ChartPod {
            args,
            env: resolved_env(container, NAMESPACE),
            account: pod.service_account_name.expect("a ServiceAccount"),
        }
    }

    /// The arguments with the values of `--admin-bind-address=` and `--webhook-bind-address=`
    /// replaced: clap refuses a repeated flag and a flag outranks its environment variable, so
    /// they cannot be overridden by appending. Every other argument stays as the chart gives it.
    pub fn with_bind_addresses(mut self, admin: &str, webhook: &str) -> ChartPod {
        let mut replaced = 0;
        for arg in &mut self.args {
            for (flag, address) in [
                ("--admin-bind-address=", admin),
                ("--webhook-bind-address=", webhook),
            ] {
                if arg.starts_with(flag) {
                    replaced += 1;
                    *arg = format!("{flag}{address}");
                }
            }
        }
        assert_eq!(replaced, 2, "both bind addresses in {:?}", self.args);
        self
    }
}

/// The container's environment as the kubelet would set it: literal values, and the downward
/// API's pod name and namespace.
fn resolved_env(container: &Container, namespace: &str) -> Vec<(String, String)> {
    let env = container.env.clone().unwrap_or_default();
    let resolved: Vec<(String, String)> = env
        .into_iter()
        .map(|var| {
            let value = match (var.value, var.value_from) {
                (Some(value), None) => value,
                (None, Some(from)) => {
                    let field = from.field_ref.expect("only fieldRef values").field_path;
                    match field.as_str() {
                        "metadata.name" => POD_NAME.to_owned(),
                        "metadata.namespace" => namespace.to_owned(),
                        other => panic!("{}: unexpected downward-API field {other}", var.name),
                    }
                }
                other => panic!("{}: unexpected value {other:?}", var.name),
            };
            (var.name, value)
        })
        .collect();
    let names: Vec<&str> = resolved.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"POD_NAME") && names.contains(&"POD_NAMESPACE"),
        "{names:?}"
    );
    resolved
}

/// `ocifit run` started as the chart's pod would run it.
pub struct Replica {
    child: Child,
    log: PathBuf,
}

impl Replica {
    /// Starts `ocifit` (the binary) with the pod's arguments and only its environment, plus
    /// `KUBECONFIG` standing for the in-cluster configuration; waits until `admin` answers
    /// `/readyz` 200.
    pub async fn start(
        ocifit: &Path,
        pod: &ChartPod,
        kubeconfig: &Path,
        admin: &str,
        log: PathBuf,
    ) -> Replica {
        let child = Command::new(ocifit)
            .args(&pod.args)
            .env_clear()
            .envs(pod.env.iter().cloned())
            .env("KUBECONFIG", kubeconfig)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("a log file"))
            .kill_on_drop(true)
            .spawn()
            .expect("ocifit run");
        let mut replica = Replica { child, log };
        let start = Instant::now();
        while get(admin, "/readyz").await.map(|(code, _)| code) != Some(200) {
            assert!(
                start.elapsed() < WAIT,
                "not ready within {WAIT:?} with the chart's arguments {:?}; log:\n{}",
                pod.args,
                replica.log_text()
            );
            if let Ok(Some(status)) = replica.child.try_wait() {
                panic!("ocifit run exited ({status}); log:\n{}", replica.log_text());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        replica
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM; asserts a clean exit within [`WAIT`].
    pub async fn stop(mut self) {
        let status = terminate(&mut self.child, WAIT).await;
        assert!(status.success(), "{status}; log:\n{}", self.log_text());
    }
}
