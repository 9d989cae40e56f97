//! Waiting on pods that really run (on a real node): until one is Ready, and until its log shows a
//! line. A pod that fails for good (its image cannot be pulled, its container keeps crashing) ends
//! the wait at once with the reason the kubelet gave.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;
use kube::{Api, Client};

use crate::error::{Error, Result};

const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// Container waiting reasons that do not heal by waiting a few seconds.
const STUCK: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// Waits until the pod `namespace/name` is Ready; the pod.
pub async fn wait_for_pod_ready(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    loop {
        let pod = pods.get_opt(name).await.ok().flatten();
        if let Some(pod) = &pod {
            if is_ready(pod) {
                return Ok(pod.clone());
            }
            if let Some(reason) = stuck(pod) {
                return Err(Error::Format {
                    action: format!("wait for pod {namespace}/{name} to be Ready"),
                    message: reason,
                });
            }
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("pod {namespace}/{name} to be Ready"),
                timeout,
                log_tails: pod.map(|p| describe(&p)).unwrap_or_default(),
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Waits until the log of the pod's (first) container has a line containing `needle`; the log.
pub async fn wait_for_pod_log(
    client: &Client,
    namespace: &str,
    name: &str,
    needle: &str,
    timeout: Duration,
) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    loop {
        let log = pods
            .logs(name, &LogParams::default())
            .await
            .unwrap_or_default();
        if log.lines().any(|line| line.contains(needle)) {
            return Ok(log);
        }
        if let Some(reason) = pods
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .as_ref()
            .and_then(stuck)
        {
            return Err(Error::Format {
                action: format!("wait for {needle:?} in the log of pod {namespace}/{name}"),
                message: reason,
            });
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("{needle:?} in the log of pod {namespace}/{name}"),
                timeout,
                log_tails: log,
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The kubelet's reason and message for a container that will not start, if one is stuck.
fn stuck(pod: &Pod) -> Option<String> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses.iter().find_map(|status| {
        let waiting = status.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        STUCK.contains(&reason).then(|| {
            format!(
                "container {}: {reason}: {}",
                status.name,
                waiting.message.as_deref().unwrap_or_default()
            )
        })
    })
}

/// The pod's phase and conditions, for a timeout's message.
fn describe(pod: &Pod) -> String {
    let Some(status) = &pod.status else {
        return "no status yet".into();
    };
    let conditions: Vec<String> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| format!("{}={}", c.type_, c.status))
        .collect();
    format!(
        "phase {}, node {}, conditions {}",
        status.phase.as_deref().unwrap_or("unknown"),
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("none"),
        conditions.join(" ")
    )
}
