//! The demo's platform placement: a multi-platform image and an arm64-only one pushed to the
//! demo's registry with crane (the chart registers the gate webhook); `example/placement/policy.yaml` and
//! `example/placement/deployment.yaml` applied as a newcomer would (only the Deployment's images
//! replaced by the pushed ones); and where each replica landed, with its node's architecture and
//! the platforms ocifit wrote on it. The product decides everything; this module sets the stage
//! and reports.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::say;
use super::table::aligned;
use crate::cluster::Cluster;
use crate::error::{Error, Result, io, kube as kube_error};
use crate::registry::Registry;

/// The example Deployment's namespace, labelled for the example policy.
pub const PLACEMENT_NAMESPACE: &str = "shop";
/// The example policy's name.
const POLICY: &str = "default";
/// The example Deployment's pod label.
const APP: &str = "app=web";
/// The example's replicas.
const REPLICAS: usize = 2;
/// The annotation where ocifit writes the platforms a pod was constrained to.
const PLATFORMS_ANNOTATION: &str = "placement.ocifit.io/platforms";
/// The image references the example Deployment names, replaced by the pushed ones.
const EXAMPLE_WEB: &str = "127.0.0.1:5000/shop/web:v1";
const EXAMPLE_METRICS: &str = "127.0.0.1:5000/shop/metrics-arm:v1";

/// The example's images, as pushed.
pub(super) struct Images {
    web: String,
    metrics: String,
}

/// Where one replica of the example Deployment landed.
#[derive(Clone, Debug)]
pub struct Replica {
    pub pod: String,
    pub node: String,
    /// The node's `kubernetes.io/arch`.
    pub arch: String,
    /// What ocifit wrote in `placement.ocifit.io/platforms`.
    pub platforms: String,
}

impl Replica {
    /// The sidecar is arm64-only: the replica must be on an arm64 node, constrained to it.
    pub fn is_right(&self) -> bool {
        self.arch == "arm64" && self.platforms == "linux/arm64"
    }
}

pub(super) async fn push_images(registry: &Registry) -> Result<Images> {
    let web = registry
        .push_multi_platform("shop/web", "v1", &["linux/amd64", "linux/arm64"])
        .await?;
    let metrics = registry
        .push_image("shop/metrics-arm", "v1", "linux/arm64")
        .await?;
    say(&format!(
        "pushed {} (linux/amd64, linux/arm64) and {} (linux/arm64 only) with crane",
        web.reference, metrics.reference
    ));
    Ok(Images {
        web: web.reference,
        metrics: metrics.reference,
    })
}

/// Applies the example policy and Deployment and waits until every replica is bound.
pub(super) async fn run(
    cluster: &Cluster,
    repo: &Path,
    images: &Images,
    timeout: Duration,
) -> Result<Vec<Replica>> {
    let client = cluster.client()?;
    let example = repo.join("example/placement");
    let policy = example.join("policy.yaml");
    cluster
        .kubectl(["apply", "-f", &policy.display().to_string()])
        .await?;
    // As docs/placement.md says: a policy gates the pods created once ocifit has it (READY).
    let label = format!("PlacementPolicy {POLICY}");
    super::ready::wait_ready(cluster, ("pp", POLICY, &label), timeout).await?;
    let path = example.join("deployment.yaml");
    let deployment = std::fs::read_to_string(&path)
        .map_err(io("read", &path))?
        .replace(EXAMPLE_WEB, &images.web)
        .replace(EXAMPLE_METRICS, &images.metrics);
    let started = Instant::now();
    cluster
        .kubectl_with_input(["apply", "-f", "-"], &deployment)
        .await?;
    say("applied example/placement/policy.yaml and example/placement/deployment.yaml");
    let pods: Api<Pod> = Api::namespaced(client.clone(), PLACEMENT_NAMESPACE);
    let bound = loop {
        let listed = pods
            .list(&ListParams::default().labels(APP))
            .await
            .map_err(kube_error("list the example Deployment's pods"))?;
        let bound: Vec<Pod> = listed
            .items
            .into_iter()
            .filter(|pod| node_of(pod).is_some())
            .collect();
        if bound.len() >= REPLICAS {
            break bound;
        }
        if started.elapsed() > timeout {
            return Err(Error::Timeout {
                what: format!(
                    "the example Deployment's {REPLICAS} pods to be released and bound \
                     ({} bound)",
                    bound.len()
                ),
                timeout,
                log_tails: String::new(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    say(&format!(
        "the example Deployment's {REPLICAS} pods were gated, released and bound in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let nodes: Api<Node> = Api::all(client);
    let mut replicas = Vec::new();
    for pod in bound {
        let node = node_of(&pod).unwrap_or_default();
        let arch = nodes
            .get(&node)
            .await
            .map_err(kube_error(format!("get node {node}")))?
            .labels()
            .get("kubernetes.io/arch")
            .cloned()
            .unwrap_or_default();
        replicas.push(Replica {
            pod: pod.name_any(),
            node,
            arch,
            platforms: pod
                .annotations()
                .get(PLATFORMS_ANNOTATION)
                .cloned()
                .unwrap_or_default(),
        });
    }
    replicas.sort_by(|a, b| a.pod.cmp(&b.pod));
    Ok(replicas)
}

fn node_of(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|spec| spec.node_name.clone())
}

/// Pod → node → architecture → platforms, one line each.
pub fn table(replicas: &[Replica]) -> String {
    let rows: Vec<[String; 5]> = replicas
        .iter()
        .map(|r| {
            [
                r.pod.clone(),
                r.node.clone(),
                r.arch.clone(),
                r.platforms.clone(),
                if r.is_right() { "yes" } else { "NO" }.to_owned(),
            ]
        })
        .collect();
    aligned(
        ["POD", "NODE", "NODE ARCH", "PLATFORMS", "AS EXPECTED"],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(arch: &str, platforms: &str) -> Replica {
        Replica {
            pod: "web-1".into(),
            node: "worker".into(),
            arch: arch.into(),
            platforms: platforms.into(),
        }
    }

    #[test]
    fn a_replica_is_right_on_an_arm64_node_constrained_to_arm64() {
        assert!(replica("arm64", "linux/arm64").is_right());
        assert!(!replica("amd64", "linux/arm64").is_right());
        assert!(!replica("arm64", "").is_right(), "released unconstrained");
    }
}
