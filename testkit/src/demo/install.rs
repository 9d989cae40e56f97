//! Installing ocifit the way its users do: `helm install` of the repository's chart with default
//! values but for a values file of what differs on this machine (written to the state directory and
//! printed): ocifit's own image, assembled from the binary just built as the cluster tests assemble
//! it and pushed to the demo's registry; that registry, on this machine's address over plain HTTP;
//! the registry image a cache may deploy (the demo is offline); and the real node, since kwok's
//! nodes run nothing. The chart registers every webhook and manages its certificate.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;

use super::{REAL_NODE, REAL_NODE_TAINT, say};
use crate::chart::{NAMESPACE, RELEASE, helm};
use crate::cluster::Cluster;
use crate::error::{Error, Result, io, kube as kube_error};

/// The chart's Deployment with its default names.
const DEPLOYMENT: &str = "ocifit-controller";
/// The values file, in the state directory.
pub(super) const VALUES_FILE: &str = "values.yaml";

/// `helm install` of `repo`'s chart with `image` (`repository:tag`) and `cache_image`, then waits
/// until every replica is available.
pub(super) async fn install(
    cluster: &Cluster,
    repo: &Path,
    state_dir: &Path,
    (image, cache_image): (&str, &str),
    timeout: Duration,
) -> Result<()> {
    let registry = cluster
        .registry()
        .map(|r| r.addr().to_owned())
        .unwrap_or_default();
    let path = state_dir.join(VALUES_FILE);
    std::fs::write(&path, values(image, &registry, cache_image)?).map_err(io("write", &path))?;
    let chart = repo.join("charts/ocifit");
    let (chart_arg, values_arg) = (path_str(&chart)?, path_str(&path)?);
    say(&format!(
        "helm install {RELEASE} charts/ocifit --namespace {NAMESPACE} --create-namespace \
         --values {values_arg} (ocifit's own image {image}, built here)"
    ));
    let started = Instant::now();
    helm(
        &[
            "install",
            RELEASE,
            chart_arg,
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--values",
            values_arg,
        ],
        Some(cluster.kubeconfig()),
    )
    .await?;
    let replicas = wait_available(cluster, timeout).await?;
    say(&format!(
        "the chart's {replicas} replicas of ocifit Ready on {REAL_NODE} after {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// The values that differ on this machine, commented for whoever opens the file.
fn values(image: &str, registry: &str, cache_image: &str) -> Result<String> {
    let (repository, tag) = image
        .rsplit_once(':')
        .filter(|(_, tag)| !tag.contains('/'))
        .ok_or_else(|| Error::Format {
            action: "write the demo's chart values".into(),
            message: format!("the image {image} has no tag"),
        })?;
    let quoted = |s: &str| serde_json::Value::from(s).to_string();
    Ok(format!(
        "# tools/demo's values for charts/ocifit: only what differs on this machine.\n\
         # ocifit's own image, assembled from the binary just built, in the demo's registry.\n\
         image:\n  repository: {}\n  tag: {}\n\
         # The demo's registry listens on this machine's address, over plain HTTP.\n\
         registry:\n  plainHttp: [{r}]\n  allowedPrivate: [{r}]\n\
         # The registry image an ArtifactCache may deploy (the demo is offline: no docker.io).\n\
         artifactCache:\n  registryImages: [{}]\n\
         # kwok's nodes run nothing: ocifit runs on the real node, tainted for the demo's own pods.\n\
         nodeSelector:\n  kubernetes.io/hostname: {}\n\
         tolerations:\n  - key: {}\n    operator: Exists\n    effect: NoSchedule\n",
        quoted(repository),
        quoted(tag),
        quoted(cache_image),
        quoted(REAL_NODE),
        quoted(REAL_NODE_TAINT),
        r = quoted(registry),
    ))
}

/// Waits until the chart's Deployment has all its replicas available; their number.
async fn wait_available(cluster: &Cluster, timeout: Duration) -> Result<i32> {
    let deployments: Api<Deployment> = Api::namespaced(cluster.client()?, NAMESPACE);
    let started = Instant::now();
    loop {
        let deployment = deployments
            .get(DEPLOYMENT)
            .await
            .map_err(kube_error(format!("get deployment {DEPLOYMENT}")))?;
        let wanted = deployment.spec.and_then(|s| s.replicas).unwrap_or(1);
        let status = deployment.status.unwrap_or_default();
        if status.available_replicas == Some(wanted) && status.updated_replicas == Some(wanted) {
            return Ok(wanted);
        }
        if started.elapsed() > timeout {
            return Err(Error::Timeout {
                what: format!("the chart's {wanted} replicas of ocifit to be available"),
                timeout,
                log_tails: operator_state(cluster).await,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether ocifit still runs: at least one of the chart's replicas is available.
pub(super) async fn check_running(cluster: &Cluster) -> Result<()> {
    let available = Api::<Deployment>::namespaced(cluster.client()?, NAMESPACE)
        .get(DEPLOYMENT)
        .await
        .map_err(kube_error(format!("get deployment {DEPLOYMENT}")))?
        .status
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    if available > 0 {
        return Ok(());
    }
    Err(Error::Format {
        action: "check that ocifit still runs".into(),
        message: format!(
            "no replica of the chart's Deployment is available\n{}",
            operator_state(cluster).await
        ),
    })
}

/// The operator's pods, their Events and the end of their logs, for a failure message.
pub(super) async fn operator_state(cluster: &Cluster) -> String {
    let mut text = String::new();
    for args in [
        vec!["get", "pods", "-n", NAMESPACE, "-o", "wide"],
        vec!["get", "events", "-n", NAMESPACE],
        vec![
            "logs",
            "-n",
            NAMESPACE,
            "-l",
            "app.kubernetes.io/name=ocifit",
            "--tail",
            "30",
        ],
    ] {
        let output = cluster
            .kubectl(args.iter().copied())
            .await
            .unwrap_or_else(|e| e.to_string());
        text.push_str(&format!("$ kubectl {}\n{output}\n", args.join(" ")));
    }
    text
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str().ok_or_else(|| Error::Format {
        action: format!("pass {} to helm", path.display()),
        message: "the path is not UTF-8".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_values_name_the_image_the_registry_and_the_real_node_and_helm_can_read_them() {
        let text = values(
            "192.0.2.2:45021/ocifit/ocifit:demo",
            "192.0.2.2:45021",
            "192.0.2.2:45021/distribution/registry:demo",
        )
        .expect("values");
        let read: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
        assert_eq!(
            read,
            serde_json::json!({
                "image": {"repository": "192.0.2.2:45021/ocifit/ocifit", "tag": "demo"},
                "registry": {"plainHttp": ["192.0.2.2:45021"], "allowedPrivate": ["192.0.2.2:45021"]},
                "artifactCache": {"registryImages": ["192.0.2.2:45021/distribution/registry:demo"]},
                "nodeSelector": {"kubernetes.io/hostname": REAL_NODE},
                "tolerations": [{"key": REAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
            })
        );
    }

    #[test]
    fn an_image_without_a_tag_is_refused_by_name() {
        for image in ["registry/ocifit", "192.0.2.2:45021/ocifit"] {
            let error = values(image, "r", "c").expect_err("no tag");
            assert!(error.to_string().contains(image), "{error}");
        }
    }
}
