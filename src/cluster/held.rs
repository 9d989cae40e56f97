//! A pod held behind one of ocifit's scheduling gates, handled alike by every feature that holds
//! pods. Anyone who creates pods can set a held label, with megabytes of `args`, `env` or
//! annotations beside it, so a watch of held pods keeps only what its feature reads ([`trim`],
//! told which by the feature's [`Kept`]). A trimmed pod is never written back whole: a decision
//! reaches the live pod as one JSON patch of what it changes ([`changes`], and
//! [`unhold`](super::gates::unhold) for the gate) that
//! carries the resourceVersion it was decided from ([`guarded`]), so the apiserver refuses it
//! (409) if the pod changed since and nobody's concurrent change is lost. Pure.

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::core::ObjectMeta;
use serde_json::Value;

/// Which keys of a label or annotation map a feature reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Every key (pod selectors read any label).
    All,
    /// The keys starting with one of these. A map the pod has stays, maybe emptied, so a patch
    /// adds keys to it rather than writing it whole.
    Prefixed(&'static [&'static str]),
    /// None: the map is dropped.
    Nothing,
}

impl Keys {
    fn keep(self, map: Option<BTreeMap<String, String>>) -> Option<BTreeMap<String, String>> {
        match self {
            Keys::All => map,
            Keys::Nothing => None,
            Keys::Prefixed(prefixes) => map.map(|map| {
                map.into_iter()
                    .filter(|(key, _)| prefixes.iter().any(|p| key.starts_with(p)))
                    .collect()
            }),
        }
    }
}

/// How much of a held pod's spec a feature reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    /// Nothing: the pod is only counted.
    Dropped,
    /// Its scheduling gates.
    Gates,
    /// What choosing the pod's images reads: its owners, its containers' names and images, and
    /// where it may be scheduled (`nodeName`, `nodeSelector`, `affinity`, its gates).
    Scheduling,
    /// That, and what pulling its images and tolerating nodes reads: the containers' pull
    /// policies, pull secrets, service account, tolerations and `os`.
    Inspection,
}

/// What a feature's watch keeps of a held pod, besides its identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    pub labels: Keys,
    pub annotations: Keys,
    pub spec: Spec,
}

/// Keeps of `pod` its identity and what `kept` says its feature reads.
pub fn trim(pod: &mut Pod, kept: &Kept) {
    let Pod { metadata, spec, .. } = std::mem::take(pod);
    let planned = matches!(kept.spec, Spec::Scheduling | Spec::Inspection);
    pod.metadata = ObjectMeta {
        name: metadata.name,
        generate_name: metadata.generate_name.filter(|_| planned),
        namespace: metadata.namespace,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        creation_timestamp: metadata.creation_timestamp,
        deletion_timestamp: metadata.deletion_timestamp,
        labels: kept.labels.keep(metadata.labels),
        annotations: kept.annotations.keep(metadata.annotations),
        owner_references: metadata.owner_references.filter(|_| planned),
        ..ObjectMeta::default()
    };
    pod.spec = match kept.spec {
        Spec::Dropped => None,
        Spec::Gates => spec.map(|spec| PodSpec {
            scheduling_gates: spec.scheduling_gates,
            ..PodSpec::default()
        }),
        Spec::Scheduling | Spec::Inspection => spec.map(|spec| {
            let pulls = kept.spec == Spec::Inspection;
            let containers = |list: Vec<Container>| {
                list.into_iter()
                    .map(|container| image_only(container, pulls))
                    .collect::<Vec<_>>()
            };
            PodSpec {
                containers: containers(spec.containers),
                init_containers: spec.init_containers.map(containers),
                node_name: spec.node_name,
                node_selector: spec.node_selector,
                affinity: spec.affinity,
                scheduling_gates: spec.scheduling_gates,
                image_pull_secrets: spec.image_pull_secrets.filter(|_| pulls),
                service_account_name: spec.service_account_name.filter(|_| pulls),
                tolerations: spec.tolerations.filter(|_| pulls),
                os: spec.os.filter(|_| pulls),
                ..PodSpec::default()
            }
        }),
    };
}

fn image_only(container: Container, pulls: bool) -> Container {
    Container {
        name: container.name,
        image: container.image,
        image_pull_policy: container.image_pull_policy.filter(|_| pulls),
        ..Container::default()
    }
}

/// The one release patch: `ops` for the live pod `read` was trimmed from, after `read`'s
/// resourceVersion written back, which the apiserver checks: it refuses the patch (409) if the
/// pod changed since it was read, and the caller reads it again.
pub fn guarded(read: &Pod, ops: impl IntoIterator<Item = PatchOperation>) -> Patch {
    let pin = read.metadata.resource_version.iter().map(|version| {
        PatchOperation::Replace(ReplaceOperation {
            path: pointer(&["metadata", "resourceVersion"]),
            value: Value::from(version.as_str()),
        })
    });
    Patch(pin.chain(ops).collect())
}

/// The operations turning the live pod `read` was trimmed from into `planned`: objects member by
/// member, anything else (a list, a string) whole, a member `planned` dropped removed. Empty when
/// the plan changes nothing.
pub fn changes(read: &Pod, planned: &Pod) -> Result<Vec<PatchOperation>, serde_json::Error> {
    let mut ops = Vec::new();
    let (before, after) = (serde_json::to_value(read)?, serde_json::to_value(planned)?);
    diff(&mut Vec::new(), &before, &after, &mut ops);
    Ok(ops)
}

fn diff(at: &mut Vec<String>, before: &Value, after: &Value, ops: &mut Vec<PatchOperation>) {
    let (Value::Object(before), Value::Object(after)) = (before, after) else {
        if before != after {
            ops.push(PatchOperation::Replace(ReplaceOperation {
                path: pointer(at),
                value: after.clone(),
            }));
        }
        return;
    };
    for (key, value) in after {
        at.push(key.clone());
        match before.get(key) {
            Some(old) => diff(at, old, value, ops),
            None => ops.push(PatchOperation::Add(AddOperation {
                path: pointer(at),
                value: value.clone(),
            })),
        }
        at.pop();
    }
    for key in before.keys().filter(|key| !after.contains_key(*key)) {
        at.push(key.clone());
        ops.push(PatchOperation::Remove(RemoveOperation {
            path: pointer(at),
        }));
        at.pop();
    }
}

fn pointer<T: AsRef<str>>(tokens: &[T]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().map(AsRef::as_ref))
}

#[cfg(test)]
mod tests;
