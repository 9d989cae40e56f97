//! A decided image written down: the decision annotations, the JSON patch (with the pinned
//! node affinity when pinned), the response warnings and the Event note. Decides nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec};

use super::managed::is_managed;
use super::policy_choice::{Choice, List};
use super::{Decision, DenyReason, ImagePlan, patch};
use crate::api::pod::{
    DECISION_ARTIFACT_DIGEST, DECISION_CLASSES, DECISION_IMAGES, DECISION_POLICY,
    MANAGED_POLICY_LABEL,
};
use crate::classes::{ClassSelector, pin};

/// An image decided for the pod, to be written as a patch.
pub(super) struct Decided<'a> {
    pub(super) choice: &'a Choice<'a>,
    pub(super) containers: &'a [((List, usize), &'a str)],
    pub(super) image: &'a str,
    pub(super) classes: Vec<&'a str>,
    pub(super) excluded: Vec<&'a str>,
    pub(super) decision: Decision,
}

impl Decided<'_> {
    pub(super) fn patch(
        &self,
        pod: &Pod,
        spec: &PodSpec,
        selectors: &[ClassSelector],
    ) -> ImagePlan {
        let entry = self.choice.entry;
        let policy = entry.name();
        let internal = |what: String| ImagePlan::Deny {
            policy: Some(Arc::clone(&entry.policy)),
            reason: DenyReason::Internal { what },
        };
        let affinity = if self.decision == Decision::Pinned {
            match pin(spec.affinity.as_ref(), selectors) {
                Ok(affinity) => affinity,
                Err(error) => {
                    return internal(format!(
                        "failed to pin the pod to node classes {}: {error}",
                        self.classes.join(", ")
                    ));
                }
            }
        } else {
            None
        };
        let images: BTreeMap<&str, &str> = self
            .containers
            .iter()
            .map(|(_, name)| (*name, self.image))
            .collect();
        let digest = entry
            .policy
            .status
            .as_ref()
            .and_then(|status| status.artifact.as_ref())
            .map(|artifact| artifact.digest.clone());
        let encoded = serde_json::to_string(&images).and_then(|images| {
            let mut annotations = BTreeMap::from([
                (DECISION_POLICY.to_owned(), policy.to_owned()),
                (DECISION_IMAGES.to_owned(), images),
                (DECISION_CLASSES.to_owned(), self.classes.join(",")),
            ]);
            if let Some(digest) = &digest {
                annotations.insert(DECISION_ARTIFACT_DIGEST.to_owned(), digest.clone());
            }
            let containers: Vec<(List, usize)> =
                self.containers.iter().map(|(at, _)| *at).collect();
            let managed = is_managed(&entry.policy).then_some((MANAGED_POLICY_LABEL, policy));
            let patch = patch::build(
                pod,
                &containers,
                self.image,
                affinity.as_ref(),
                &annotations,
                managed,
            )?;
            Ok((patch, annotations))
        });
        let (patch, annotations) = match encoded {
            Ok(encoded) => encoded,
            Err(error) => return internal(format!("failed to encode the patch: {error}")),
        };
        let warnings = match self.decision {
            Decision::Selected => Vec::new(),
            Decision::Pinned => vec![format!(
                "pinned to node classes {} (image {}) by ImageSelectionPolicy {policy}; classes {} \
                 left out",
                self.classes.join(", "),
                self.image,
                self.excluded.join(", ")
            )],
            Decision::Fallback => vec![format!(
                "no candidate image of ImageSelectionPolicy {policy} fits the pod's nodes: \
                 fallback image {} used",
                self.image
            )],
        };
        let containers: Vec<&str> = self.containers.iter().map(|(_, name)| *name).collect();
        let event = format!(
            "ImageSelectionPolicy {policy} ({}) gave {} image {} for node classes {}{}",
            self.choice.via.describe(),
            containers.join(", "),
            self.image,
            self.classes.join(", "),
            digest
                .map(|digest| format!(" (artifact {digest})"))
                .unwrap_or_default()
        );
        ImagePlan::Patch {
            policy: Arc::clone(&entry.policy),
            patch,
            annotations,
            warnings,
            decision: self.decision,
            event,
        }
    }
}
