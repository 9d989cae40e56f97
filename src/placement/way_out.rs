//! The way out: `ocifit placement release-all` removes ocifit's scheduling gate from every pod
//! that still carries it (after an uninstall, or while every replica is down), leaving any
//! other gate alone. Each pod is patched by a JSON patch that first tests the gate is still at
//! the index it was read at, so a pod changed meanwhile is read again, never stripped of
//! another gate. A pod that cannot be released does not stop the others: every failure is
//! reported at the end.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};

use crate::api::placement::pod::{POLICY_LABEL, SCHEDULING_GATE};

/// Attempts per pod when it keeps changing under the patch.
const ATTEMPTS: usize = 5;

/// What release-all did.
#[derive(Debug, Default)]
pub struct Released {
    /// `namespace/name` of every pod released.
    pub pods: Vec<String>,
    /// Every pod that could not be released, and why.
    pub failed: Vec<WayOutError>,
}

/// Releasing failed.
#[derive(Debug, thiserror::Error)]
pub enum WayOutError {
    /// The gated pods could not be listed.
    #[error("failed to list the pods labelled {POLICY_LABEL}")]
    List(#[source] kube::Error),
    /// A pod could not be patched.
    #[error("failed to remove the gate from pod {pod}")]
    Patch {
        pod: String,
        #[source]
        source: kube::Error,
    },
    /// A pod kept changing under the patch.
    #[error(
        "failed to remove the gate from pod {pod}: it changed under every one of {ATTEMPTS} attempts"
    )]
    KeptChanging { pod: String },
}

/// The JSON patch removing ocifit's gate from `pod`, if it carries it.
pub fn removal(pod: &Pod) -> Option<json_patch::Patch> {
    let index = pod
        .spec
        .as_ref()?
        .scheduling_gates
        .as_ref()?
        .iter()
        .position(|gate| gate.name == SCHEDULING_GATE)?;
    let path = format!("/spec/schedulingGates/{index}");
    serde_json::from_value(serde_json::json!([
        {"op": "test", "path": format!("{path}/name"), "value": SCHEDULING_GATE},
        {"op": "remove", "path": path},
    ]))
    .ok()
}

/// Removes ocifit's gate from every pod in the cluster that carries it; a pod that cannot be
/// released is recorded in the result and the others are still released. `Err` only when the
/// pods could not be listed at all.
pub async fn release_all(client: Client) -> Result<Released, WayOutError> {
    let all: Api<Pod> = Api::all(client.clone());
    let listed = all
        .list(&ListParams::default().labels(POLICY_LABEL))
        .await
        .map_err(WayOutError::List)?;
    let mut released = Released::default();
    for pod in listed.items.iter().filter(|pod| removal(pod).is_some()) {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let pod_name = format!("{namespace}/{name}");
        match release_one(&api, &name, pod.clone()).await {
            Ok(true) => released.pods.push(pod_name),
            Ok(false) => {}
            Err(source) => released.failed.push(match source {
                Some(source) => WayOutError::Patch {
                    pod: pod_name,
                    source,
                },
                None => WayOutError::KeptChanging { pod: pod_name },
            }),
        }
    }
    Ok(released)
}

/// Removes the gate from one pod: `Ok(true)` released, `Ok(false)` nothing left to release (gone,
/// or released meanwhile), `Err(None)` it changed under every attempt.
async fn release_one(
    api: &Api<Pod>,
    name: &str,
    mut current: Pod,
) -> Result<bool, Option<kube::Error>> {
    for _ in 0..ATTEMPTS {
        let Some(patch) = removal(&current) else {
            return Ok(false);
        };
        match api
            .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            // The test failed (the gates moved) or a conflict: read again.
            Err(kube::Error::Api(status)) if status.code == 422 || status.code == 409 => {
                match api.get_opt(name).await {
                    Ok(Some(pod)) => current = pod,
                    Ok(None) => return Ok(false),
                    Err(source) => return Err(Some(source)),
                }
            }
            Err(source) => return Err(Some(source)),
        }
    }
    Err(None)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSchedulingGate;

    use super::*;
    use crate::placement::fixtures::pod;

    fn with_gates(names: &[&str]) -> Pod {
        let mut pod = pod(&[("web", "nginx")]);
        pod.spec.as_mut().unwrap().scheduling_gates = Some(
            names
                .iter()
                .map(|name| PodSchedulingGate {
                    name: (*name).to_owned(),
                })
                .collect(),
        );
        pod
    }

    #[test]
    fn the_removal_takes_only_ocifits_gate_and_tests_it_is_still_there() {
        let gated = with_gates(&["example.com/quota", SCHEDULING_GATE]);
        let patch = removal(&gated).unwrap();
        let mut object = serde_json::to_value(&gated).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
        let released: Pod = serde_json::from_value(object).unwrap();
        assert_eq!(
            released.spec.unwrap().scheduling_gates.unwrap(),
            vec![PodSchedulingGate {
                name: "example.com/quota".into()
            }]
        );
        // Applied to a pod whose gates moved, the test fails instead of removing another gate.
        let moved = with_gates(&["example.com/quota"]);
        let mut object = serde_json::to_value(&moved).unwrap();
        assert!(json_patch::patch(&mut object, &patch).is_err());
    }

    #[test]
    fn a_pod_without_ocifits_gate_needs_no_removal() {
        assert!(removal(&with_gates(&["example.com/quota"])).is_none());
        assert!(removal(&pod(&[("web", "nginx")])).is_none());
    }
}
