//! The way out of a scheduling gate: the one removal every release uses ([`unhold`]), and
//! removing one gate from every pod that still carries it (after an uninstall, or while every
//! replica is down), leaving any other gate alone. A removal tests the gate is still where it was
//! read; [`patch_as_read`] (placement's untaint uses it too) reads a pod or node that moved on
//! again and remakes the patch, a bounded number of times. A pod that cannot be released does not
//! stop the others: every failure is reported at the end. Every feature that holds pods uses it,
//! each with its own [`Gate`], and the holds share one failure rule ([`HoldFailure`]).

use std::collections::BTreeMap;
use std::fmt::Debug;

use json_patch::jsonptr::PointerBuf;
use json_patch::{PatchOperation, RemoveOperation, TestOperation};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What follows a hold that cannot end as it should (no decision within the bound, a decision
/// that would have refused the pod, a cache that cannot become Ready): one rule for every hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldFailure {
    /// Released unchanged (the placeholder image), as `failurePolicy: Ignore` admits a pod.
    Ignore,
    /// Kept held, with a Warning Event and the held annotation saying why, as
    /// `failurePolicy: Fail` refuses a pod; released if the decision comes later.
    Fail,
}

/// A hold failure rule other than `Ignore` or `Fail`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither Ignore nor Fail")]
pub struct UnknownHoldFailure(String);

impl std::str::FromStr for HoldFailure {
    type Err = UnknownHoldFailure;

    fn from_str(value: &str) -> Result<Self, UnknownHoldFailure> {
        match value {
            "Ignore" => Ok(HoldFailure::Ignore),
            "Fail" => Ok(HoldFailure::Fail),
            other => Err(UnknownHoldFailure(other.to_owned())),
        }
    }
}

impl std::fmt::Display for HoldFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HoldFailure::Ignore => "Ignore",
            HoldFailure::Fail => "Fail",
        })
    }
}

/// A scheduling gate ocifit adds, and the label every pod carrying it has (the list is by label,
/// so the apiserver never sends the cluster's other pods).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gate {
    /// The scheduling gate's name.
    pub name: &'static str,
    /// A label selector every pod holding the gate matches.
    pub label: &'static str,
}

/// What releasing did.
#[derive(Debug, Default)]
pub struct Released {
    /// `namespace/name` of every pod released.
    pub pods: Vec<String>,
    /// Every pod that could not be released, and why.
    pub failed: Vec<GateError>,
}

/// Releasing failed.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The gated pods could not be listed.
    #[error("failed to list the pods labelled {label}")]
    List {
        label: &'static str,
        #[source]
        source: kube::Error,
    },
    /// A pod could not be patched.
    #[error("failed to remove the gate from pod {pod} (gate {gate})")]
    Patch {
        gate: &'static str,
        pod: String,
        #[source]
        source: kube::Error,
    },
    /// A pod kept changing under the patch.
    #[error(
        "failed to remove the gate from pod {pod} (gate {gate}): it changed under every one of {ATTEMPTS} attempts"
    )]
    KeptChanging { gate: &'static str, pod: String },
}

/// Where `pod` carries `gate` in its scheduling gates, if it does.
pub fn held_at(pod: &Pod, gate: Gate) -> Option<usize> {
    pod.spec
        .as_ref()?
        .scheduling_gates
        .as_ref()?
        .iter()
        .position(|held| held.name == gate.name)
}

/// A label or annotation a feature puts on the pods it holds, removed with its gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark<'a> {
    Label(&'a str),
    Annotation(&'a str),
}

/// The one way a gate is removed: the operations taking `gate` from `pod` (first testing it is
/// still at the index it was read at, so a pod whose gates moved meanwhile is refused, never
/// stripped of another gate) and the `marks` it has. Empty when the pod carries none of them.
pub fn unhold(pod: &Pod, gate: Gate, marks: &[Mark<'_>]) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    if let Some(index) = held_at(pod, gate) {
        let path = pointer(&["spec", "schedulingGates", &index.to_string()]);
        ops.push(PatchOperation::Test(TestOperation {
            path: pointer(&["spec", "schedulingGates", &index.to_string(), "name"]),
            value: Value::from(gate.name),
        }));
        ops.push(PatchOperation::Remove(RemoveOperation { path }));
    }
    let has = |map: &Option<BTreeMap<String, String>>, key: &str| {
        map.as_ref().is_some_and(|map| map.contains_key(key))
    };
    for mark in marks {
        let path = match *mark {
            Mark::Label(key) if has(&pod.metadata.labels, key) => {
                pointer(&["metadata", "labels", key])
            }
            Mark::Annotation(key) if has(&pod.metadata.annotations, key) => {
                pointer(&["metadata", "annotations", key])
            }
            _ => continue,
        };
        ops.push(PatchOperation::Remove(RemoveOperation { path }));
    }
    ops
}

fn pointer(tokens: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().copied())
}

/// Which pods a release covers, and whether it writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    /// Only this namespace's pods; `None`: every namespace.
    pub namespace: Option<String>,
    /// List the pods that would be released, patching none.
    pub dry_run: bool,
}

/// Removes `gate` from every pod in `scope` that carries it; a pod that cannot be released is
/// recorded and the others still released (`scope.dry_run` writes nothing). `Err` only when the
/// pods could not be listed.
pub async fn release_all(client: Client, gate: Gate, scope: &Scope) -> Result<Released, GateError> {
    let listing: Api<Pod> = match &scope.namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let listed = listing
        .list(&ListParams::default().labels(gate.label))
        .await
        .map_err(|source| GateError::List {
            label: gate.label,
            source,
        })?;
    let mut released = Released::default();
    for pod in listed
        .items
        .iter()
        .filter(|pod| held_at(pod, gate).is_some())
    {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let pod_name = format!("{namespace}/{name}");
        if scope.dry_run {
            released.pods.push(pod_name);
            continue;
        }
        // A 422 is the patch's test failing: the gates moved since the pod was read.
        let released_one = patch_as_read(&api, &name, pod.clone(), &[409, 422], |pod| {
            let ops = unhold(pod, gate, &[]);
            (!ops.is_empty()).then_some(Patch::<()>::Json(json_patch::Patch(ops)))
        });
        match released_one.await {
            Ok(true) => released.pods.push(pod_name),
            Ok(false) => {}
            Err(Some(source)) => released.failed.push(GateError::Patch {
                gate: gate.name,
                pod: pod_name,
                source,
            }),
            Err(None) => released.failed.push(GateError::KeptChanging {
                gate: gate.name,
                pod: pod_name,
            }),
        }
    }
    Ok(released)
}

/// Attempts per object when it keeps changing under the patch.
pub const ATTEMPTS: usize = 5;

/// Patches `name` with what `patch_for` makes of `current`: `Ok(true)` applied, `Ok(false)`
/// nothing to do, `Err(None)` it changed under every attempt, `Err(Some(_))` refused otherwise;
/// an answer whose code is in `moved_on` means "read again".
pub async fn patch_as_read<K, P>(
    api: &Api<K>,
    name: &str,
    mut current: K,
    moved_on: &[u16],
    patch_for: impl Fn(&K) -> Option<Patch<P>>,
) -> Result<bool, Option<kube::Error>>
where
    K: Clone + DeserializeOwned + Debug,
    P: Serialize + Debug,
{
    for _ in 0..ATTEMPTS {
        let Some(patch) = patch_for(&current) else {
            return Ok(false);
        };
        match api.patch(name, &PatchParams::default(), &patch).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            Err(kube::Error::Api(status)) if moved_on.contains(&status.code) => {
                match api.get_opt(name).await {
                    Ok(Some(object)) => current = object,
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
    use k8s_openapi::api::core::v1::{PodSchedulingGate, PodSpec};

    use super::*;

    const OURS: Gate = Gate {
        name: "placement.ocifit.io/platforms",
        label: "placement.ocifit.io/policy",
    };
    const OTHER_OF_OURS: Gate = Gate {
        name: "selection.ocifit.io/image",
        label: "selection.ocifit.io/held=true",
    };

    fn with_gates(names: &[&str]) -> Pod {
        Pod {
            spec: Some(PodSpec {
                scheduling_gates: Some(
                    names
                        .iter()
                        .map(|name| PodSchedulingGate {
                            name: (*name).to_owned(),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn removal(pod: &Pod, gate: Gate) -> Option<Vec<PatchOperation>> {
        Some(unhold(pod, gate, &[])).filter(|ops| !ops.is_empty())
    }

    fn gates_after(pod: &Pod, ops: &[PatchOperation]) -> Result<Vec<String>, String> {
        let mut object = serde_json::to_value(pod).unwrap();
        json_patch::patch(&mut object, ops).map_err(|err| err.to_string())?;
        let released: Pod = serde_json::from_value(object).unwrap();
        Ok(released
            .spec
            .unwrap()
            .scheduling_gates
            .unwrap_or_default()
            .into_iter()
            .map(|gate| gate.name)
            .collect())
    }

    #[test]
    fn the_removal_takes_only_its_gate_and_tests_it_is_still_there() {
        let gated = with_gates(&["example.com/quota", OTHER_OF_OURS.name, OURS.name]);
        let patch = removal(&gated, OURS).unwrap();
        assert_eq!(
            gates_after(&gated, &patch).unwrap(),
            ["example.com/quota", OTHER_OF_OURS.name]
        );
        let patch = removal(&gated, OTHER_OF_OURS).unwrap();
        assert_eq!(
            gates_after(&gated, &patch).unwrap(),
            ["example.com/quota", OURS.name]
        );
        // Applied to a pod whose gates moved, the test fails instead of removing another gate.
        let moved = with_gates(&["example.com/quota", OURS.name]);
        assert!(gates_after(&moved, &patch).is_err());
    }

    #[test]
    fn a_pod_without_the_gate_needs_no_removal() {
        assert!(
            removal(
                &with_gates(&["example.com/quota", OTHER_OF_OURS.name]),
                OURS
            )
            .is_none()
        );
        assert!(removal(&with_gates(&[]), OURS).is_none());
        assert!(removal(&Pod::default(), OURS).is_none());
    }

    #[test]
    fn the_marks_go_with_the_gate_and_only_the_ones_present() {
        let mut pod = with_gates(&[OURS.name]);
        pod.metadata.labels = Some(BTreeMap::from([
            ("example.com/held".to_owned(), "true".to_owned()),
            ("app".to_owned(), "web".to_owned()),
        ]));
        let marks = [
            Mark::Label("example.com/held"),
            Mark::Annotation("example.com/why"),
        ];
        let ops = unhold(&pod, OURS, &marks);
        let mut object = serde_json::to_value(&pod).unwrap();
        json_patch::patch(&mut object, &ops).unwrap();
        assert_eq!(
            object["metadata"]["labels"],
            serde_json::json!({"app": "web"})
        );
        assert_eq!(object["spec"]["schedulingGates"], serde_json::json!([]));
    }
}
