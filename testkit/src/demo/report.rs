//! What the demo prints: `helm list` (ocifit, installed by its chart), `kubectl get isp`, and each
//! flavor pod with the node it was bound to, that node's flavor and the pod's image, once every
//! pod is bound; `kubectl get pp` and where the placement example's replicas landed; the artifact
//! cache's workflow.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;

use super::platform_placement::{self, PLACEMENT_NAMESPACE, Replica};
use super::table::aligned;
use super::{
    FLAVOR_LABEL, FLAVOR_PODS, REAL_FLAVOR, REAL_POD, RESULT, WORKFLOW_NAMESPACE, WorkflowRun, say,
};
use crate::chart::{NAMESPACE, RELEASE, helm};
use crate::cluster::Cluster;
use crate::error::{Error, Result, kube as kube_error};
use crate::tools::Tool;

/// How long the pods may take to be bound.
const BIND_TIMEOUT: Duration = Duration::from_secs(60);

/// Where one flavor pod landed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The pod (named after its flavor).
    pub pod: String,
    /// The flavor its nodeSelector asks for.
    pub flavor: String,
    /// The node it was bound to.
    pub node: String,
    /// That node's flavor label.
    pub node_flavor: String,
    /// The pod's (first container's) image as stored.
    pub image: String,
    /// The image the artifact names for the flavor.
    pub expected_image: String,
}

impl Placement {
    /// Bound to a node of its flavor, with that flavor's image.
    pub fn is_right(&self) -> bool {
        self.node_flavor == self.flavor && self.image == self.expected_image
    }
}

/// Waits until every flavor pod is bound, then says where each landed.
pub(super) async fn placements(
    cluster: &Cluster,
    images: &BTreeMap<String, String>,
) -> Result<Vec<Placement>> {
    let client = cluster.client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<Node> = Api::all(client);
    let started = Instant::now();
    loop {
        let mut bound = Vec::new();
        let wanted = FLAVOR_PODS
            .map(|pod| (pod, pod))
            .into_iter()
            .chain([(REAL_POD, REAL_FLAVOR)]);
        for (name, flavor) in wanted {
            let pod = pods
                .get(name)
                .await
                .map_err(kube_error(format!("get pod {name}")))?;
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                break;
            };
            let node_flavor = nodes
                .get(&node)
                .await
                .map_err(kube_error(format!("get node {node}")))?
                .metadata
                .labels
                .and_then(|l| l.get(FLAVOR_LABEL).cloned())
                .unwrap_or_default();
            bound.push(Placement {
                pod: name.to_owned(),
                image: pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.containers.first())
                    .and_then(|c| c.image.clone())
                    .unwrap_or_default(),
                expected_image: images.get(flavor).cloned().unwrap_or_default(),
                flavor: flavor.to_owned(),
                node,
                node_flavor,
            });
        }
        if bound.len() == FLAVOR_PODS.len() + 1 {
            say(&format!(
                "all pods bound after {:.1} s",
                started.elapsed().as_secs_f64()
            ));
            return Ok(bound);
        }
        if started.elapsed() > BIND_TIMEOUT {
            return Err(Error::Timeout {
                what: format!("the demo's pods to be bound ({} of 4 are)", bound.len()),
                timeout: BIND_TIMEOUT,
                log_tails: cluster.log_tails(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The text a person wants to see, ending with how to explore and how to stop.
pub(super) async fn summary(
    cluster: &Cluster,
    placements: &[Placement],
    real_log: &str,
    replicas: &[Replica],
    workflow: &WorkflowRun,
    repo: &Path,
    stays_up: bool,
) -> Result<String> {
    let releases = helm(&["list", "-n", NAMESPACE], Some(cluster.kubeconfig())).await?;
    let isp = cluster.kubectl(["get", "isp"]).await?;
    let mut text = format!("$ helm list -n {NAMESPACE}\n{releases}\n$ kubectl get isp\n{isp}\n");
    text.push_str(&table(placements));
    let _ = write!(text, "\n$ kubectl logs {REAL_POD}\n{real_log}");
    let policies = cluster.kubectl(["get", "pp"]).await?;
    let _ = write!(text, "\n$ kubectl get pp\n{policies}\n");
    text.push_str(&platform_placement::table(replicas));
    let caches = cluster
        .kubectl(["get", "ac", "-n", WORKFLOW_NAMESPACE])
        .await?;
    let _ = write!(text, "\n$ kubectl get ac -n {WORKFLOW_NAMESPACE}\n{caches}");
    for (job, seconds) in &workflow.steps {
        let _ = writeln!(text, "Job {job}: created → complete in {seconds:.1} s");
    }
    let _ = write!(
        text,
        "$ oras pull --plain-http -u {} -p … {}/{RESULT} && cat sum.txt\n{}",
        workflow.login.0, workflow.cache_address, workflow.result
    );
    if !stays_up {
        return Ok(text);
    }
    let kubeconfig = cluster.kubeconfig().display().to_string();
    let tool_dir = |tool| -> Result<String> {
        Ok(cluster
            .tools()
            .path(tool)?
            .parent()
            .map(|dir| dir.display().to_string())
            .unwrap_or_default())
    };
    let (kubectl_dir, helm_dir) = (tool_dir(Tool::Kubectl)?, tool_dir(Tool::Helm)?);
    let _ = write!(
        text,
        "\nThe cluster stays up. To explore it:\n\n\
         \x20 export KUBECONFIG={kubeconfig}\n\
         \x20 export PATH={kubectl_dir}:{helm_dir}:$PATH     # kubectl and helm from tools/install, if you have none\n\
         \x20 helm status {RELEASE} -n {NAMESPACE}       # ocifit, installed by its chart\n\
         \x20 helm test {RELEASE} -n {NAMESPACE} --logs  # the chart's own check: CRDs served, a dry run through each webhook\n\
         \x20 kubectl logs -n {NAMESPACE} deploy/{RELEASE}-controller   # ocifit's log\n\
         \x20 kubectl get isp flavors -o yaml        # one row per node class: image and why\n\
         \x20 kubectl get pods -o wide\n\
         \x20 kubectl get pod vanilla -o yaml        # the decision annotations and the image\n\
         \x20 kubectl logs {REAL_POD}                      # the real node ran the image chosen for it\n\
         \x20 kubectl get ac,jobs,pods -n {WORKFLOW_NAMESPACE}      # the artifact cache and the two steps\n\
         \x20 oras pull --plain-http -u {} -p \"$(kubectl get secret -n {WORKFLOW_NAMESPACE} \"$(kubectl get ac oras -n {WORKFLOW_NAMESPACE} -o jsonpath='{{.status.credentialsSecret}}')\" -o jsonpath='{{.data.ORAS_PULL_PASS}}' | base64 -d)\" {}/{RESULT}   # the workflow's result, from this machine\n\
         \x20 kubectl get pods -n {PLACEMENT_NAMESPACE} -o wide          # the placement example: arm64 nodes only\n\
         \x20 kubectl describe pods -n {PLACEMENT_NAMESPACE} -l app=web  # its placement.ocifit.io annotations and Events\n",
        workflow.login.0, workflow.cache_address
    );
    // The mixed-cluster case of the pod contract, when the examples include it.
    let unpinned = repo.join("example/pods/unpinned.yaml");
    if unpinned.exists() {
        let _ = writeln!(
            text,
            "  kubectl apply -f {}   # no nodeSelector: pinned to one flavor",
            unpinned.display()
        );
    }
    text.push_str("\nStop and remove everything: tools/demo down\n");
    Ok(text)
}

/// Pod → node → image, one line each.
pub fn table(placements: &[Placement]) -> String {
    let rows: Vec<[String; 5]> = placements
        .iter()
        .map(|p| {
            [
                p.pod.clone(),
                p.node.clone(),
                p.node_flavor.clone(),
                p.image.clone(),
                if p.is_right() { "yes" } else { "NO" }.to_owned(),
            ]
        })
        .collect();
    aligned(
        ["POD", "NODE", "NODE FLAVOR", "IMAGE", "AS EXPECTED"],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(pod: &str, node_flavor: &str, image: &str) -> Placement {
        Placement {
            pod: pod.into(),
            flavor: pod.into(),
            node: format!("worker-{node_flavor}"),
            node_flavor: node_flavor.into(),
            image: image.into(),
            expected_image: "r/library/debian:11".into(),
        }
    }

    #[test]
    fn a_pod_is_right_on_a_node_of_its_flavor_with_its_image() {
        assert!(placement("vanilla", "vanilla", "r/library/debian:11").is_right());
        assert!(!placement("vanilla", "chocolate", "r/library/debian:11").is_right());
        assert!(!placement("vanilla", "vanilla", "placeholder:latest").is_right());
    }

    #[test]
    fn the_table_aligns_columns_and_flags_wrong_placements() {
        let text = table(&[
            placement("vanilla", "vanilla", "r/library/debian:11"),
            placement("vanilla", "vanilla", "placeholder:latest"),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "POD       NODE             NODE FLAVOR   IMAGE                 AS EXPECTED"
        );
        assert!(lines[1].ends_with("r/library/debian:11   yes"), "{text}");
        assert!(lines[2].ends_with("NO"), "{text}");
    }
}
