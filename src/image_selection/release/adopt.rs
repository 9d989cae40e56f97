//! Creating the policy ocifit takes charge of for a held pod's `image-ref`, within the quotas
//! (per namespace, counted by the label the policy carries, and in all; policies this leader
//! created that its store does not show yet count too). Beyond a quota, or when the name is
//! taken by a policy ocifit did not create for that artifact, nothing is created: the pod stays
//! held, its held annotation and one Warning Event saying why, and at its bound follows the
//! hold failure rule like any pod no decision reached (a tenant past its share is neither
//! refused at admission nor served: it waits for an admin's policy or for room).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use json_patch::Patch as JsonPatch;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;

use super::Error;
use crate::admission::replace_op;
use crate::api::{FIELD_MANAGER, ImageSelectionPolicy};
use crate::cluster::{Notice, Notices};
use crate::image_selection::planner::{
    Quota, Room, counted_against, foreign, held_annotation_op, is_managed, room,
};

/// How long a policy this leader created counts before its store shows it.
const PENDING_FOR: Duration = Duration::from_secs(60);

/// What the creation needs.
pub(super) struct Adopter {
    pub(super) policies: Store<ImageSelectionPolicy>,
    pub(super) quota: Quota,
    /// Created here, maybe not in the store yet: name, namespace, when.
    pending: Mutex<Vec<(String, String, Instant)>>,
}

impl Adopter {
    /// Creates within `quota`, counting what `policies` holds.
    pub(super) fn new(policies: Store<ImageSelectionPolicy>, quota: Quota) -> Adopter {
        Adopter {
            policies,
            quota,
            pending: Mutex::default(),
        }
    }

    /// Whether `policy` may be created now; reserves its place if so.
    fn reserve(&self, policy: &ImageSelectionPolicy) -> Room {
        let state = self.policies.state();
        let managed: Vec<&ImageSelectionPolicy> = state
            .iter()
            .map(AsRef::as_ref)
            .filter(|p| is_managed(p))
            .collect();
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.retain(|(name, _, at)| {
            at.elapsed() < PENDING_FOR && !managed.iter().any(|p| p.name_any() == *name)
        });
        let name = policy.name_any();
        if let Some(existing) = state.iter().find(|p| p.name_any() == name) {
            return match foreign_in_store(existing, policy) {
                Some(why) => Room::Full(why),
                None => Room::Exists,
            };
        }
        let there = managed
            .iter()
            .map(|p| {
                (
                    p.metadata.name.as_deref().unwrap_or_default(),
                    counted_against(p),
                )
            })
            .chain(
                pending
                    .iter()
                    .map(|(n, ns, _)| (n.as_str(), Some(ns.as_str()))),
            );
        let verdict = room(there, policy, self.quota);
        if verdict == Room::Free {
            let namespace = counted_against(policy).unwrap_or_default().to_owned();
            pending.push((name, namespace, Instant::now()));
        }
        verdict
    }
}

/// The store keeps no managedFields: only the artifact can be compared there.
fn foreign_in_store(
    existing: &ImageSelectionPolicy,
    wanted: &ImageSelectionPolicy,
) -> Option<String> {
    (existing.spec.artifact.reference != wanted.spec.artifact.reference || !is_managed(existing))
        .then(|| {
            format!(
                "ImageSelectionPolicy {} exists and is not ocifit's for this artifact",
                existing.name_any()
            )
        })
}

/// Creates the policy ocifit takes charge of for `pod`'s artifact, or says on the pod why not.
pub(super) async fn adopt(
    client: &kube::Client,
    adopter: &Adopter,
    notices: &Notices,
    pod: &Pod,
    policy: &ImageSelectionPolicy,
) -> Result<(), Error> {
    let name = policy.name_any();
    match adopter.reserve(policy) {
        Room::Exists => return Ok(()),
        Room::Full(why) => return held_saying(client, notices, pod, &why).await,
        Room::Free => {}
    }
    let api: Api<ImageSelectionPolicy> = Api::all(client.clone());
    let create = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api.create(&create, policy).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = api.get(&name).await.map_err(|source| Error::CreatePolicy {
                name: name.clone(),
                source,
            })?;
            return match foreign(&existing, policy) {
                None => Ok(()),
                Some(why) => held_saying(client, notices, pod, &why).await,
            };
        }
        Err(source) => return Err(Error::CreatePolicy { name, source }),
    }
    tracing::info!(policy = %name, pod = %pod.name_any(), namespace = ?pod.namespace(), "managed policy created");
    let reference = policy
        .spec
        .artifact
        .reference
        .as_deref()
        .unwrap_or_default();
    notices.send(Notice {
        on: pod.object_ref(&()),
        warning: false,
        reason: "PolicyCreated",
        action: "Release",
        note: format!(
            "created ImageSelectionPolicy {name} for artifact {reference} (no policy used it); the pod is released once it resolves"
        ),
    });
    Ok(())
}

/// Keeps `pod` held saying `why` (its held annotation, and a Warning Event once per reason).
async fn held_saying(
    client: &kube::Client,
    notices: &Notices,
    pod: &Pod,
    why: &str,
) -> Result<(), Error> {
    let Some(patch) = saying(pod, why) else {
        return Ok(());
    };
    let namespace = pod.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    match api
        .patch(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
    {
        Ok(_) => {}
        // Changed or gone meanwhile: the next look decides again.
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {
            return Ok(());
        }
        Err(source) => {
            return Err(Error::Patch {
                namespace,
                name: pod.name_any(),
                source,
            });
        }
    }
    tracing::info!(pod = %pod.name_any(), %namespace, %why, "no managed policy created");
    notices.send(Notice {
        on: pod.object_ref(&()),
        warning: true,
        reason: "PolicyNotCreated",
        action: "Release",
        note: format!(
            "no policy created for the pod's image-ref: {why}; it stays held until a policy \
             for its artifact exists, then the hold failure rule applies at its bound"
        ),
    });
    Ok(())
}

/// The patch writing `why` as `pod`'s held annotation (against the version it was read at), or
/// `None` when it says so already. Pure.
pub(super) fn saying(pod: &Pod, why: &str) -> Option<JsonPatch> {
    let said = held_annotation_op(pod, why)?;
    let mut ops: Vec<_> = pod
        .metadata
        .resource_version
        .iter()
        .map(|version| {
            replace_op(
                &["metadata", "resourceVersion"],
                Value::from(version.as_str()),
            )
        })
        .collect();
    ops.push(said);
    Some(JsonPatch(ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::pod::HELD_ANNOTATION;

    #[test]
    fn the_reason_is_written_once() {
        let mut pod = Pod::default();
        pod.metadata.resource_version = Some("3".into());
        let patch = saying(&pod, "over quota").unwrap();
        let mut value = serde_json::to_value(&pod).unwrap();
        json_patch::patch(&mut value, &patch).unwrap();
        let said: Pod = serde_json::from_value(value).unwrap();
        assert_eq!(
            said.metadata.annotations.as_ref().unwrap()[HELD_ANNOTATION],
            "over quota"
        );
        assert_eq!(saying(&said, "over quota"), None);
        assert!(saying(&said, "another reason").is_some());
    }
}
