//! The status conditions (`Ready`, `ArtifactResolved`, `Degraded`) from the inputs and the new
//! rows, merged with the previous ones so `lastTransitionTime` moves only when a status flips.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::{ArtifactState, Failure, StatusInputs};
use crate::api::{
    ClassStatus, ConditionType, ImageSelectionPolicySpec, ImageSelectionPolicyStatus, OnNoMatch,
    Reason, WantedCondition as Wanted, merge_condition,
};
use crate::image_selection::resolution::{Content, Resolved};

pub(super) fn conditions(
    inputs: &StatusInputs<'_>,
    status: &ImageSelectionPolicyStatus,
    cut: Option<String>,
) -> Vec<Condition> {
    let serving = status.artifact.as_ref().map(|a| a.digest.as_str());
    let (ready, resolved, degraded) = match inputs.artifact {
        ArtifactState::Current(current) => (
            ready_with_artifact(inputs.spec, status),
            fetched(current),
            Wanted {
                type_: ConditionType::Degraded,
                status: false,
                reason: Reason::Current.as_str(),
                message: "the status reflects the current artifact".to_owned(),
            },
        ),
        ArtifactState::Failed { failure, .. } => (
            not_ready(failure, serving),
            failed(failure),
            degraded(failure, serving),
        ),
    };
    let truncated = cut.map(|message| Wanted {
        type_: ConditionType::Truncated,
        status: true,
        reason: Reason::StatusTooLarge.as_str(),
        message,
    });
    let previous = inputs
        .previous
        .map(|p| p.conditions.as_slice())
        .unwrap_or_default();
    [Some(ready), Some(resolved), Some(degraded), truncated]
        .into_iter()
        .flatten()
        .map(|wanted| merge_condition(previous, wanted, inputs.generation, inputs.now))
        .collect()
}

/// `ArtifactResolved` when the current artifact was had: what it holds.
fn fetched(current: &Resolved) -> Wanted {
    Wanted {
        type_: ConditionType::ArtifactResolved,
        status: true,
        reason: Reason::Fetched.as_str(),
        message: match &current.content {
            Content::Sets(artifact) => format!(
                "{} artifact {} with {} candidate sets",
                current.format,
                current.digest,
                artifact.sets().len()
            ),
            Content::Candidates(all) => format!(
                "{} of {} candidate images have an {} artifact (together {})",
                current.candidate_count(),
                all.len(),
                current.format,
                current.digest
            ),
        },
    }
}

/// `Degraded` when the current artifact cannot be had: degraded only while an older one is served.
fn degraded(failure: &Failure, serving: Option<&str>) -> Wanted {
    match serving {
        Some(digest) => Wanted {
            type_: ConditionType::Degraded,
            status: true,
            reason: Reason::StaleArtifact.as_str(),
            message: format!(
                "serving the last known good artifact {digest}: {}",
                failure.message
            ),
        },
        None => Wanted {
            type_: ConditionType::Degraded,
            status: false,
            reason: failure.reason.as_str(),
            message: "no artifact was ever resolved, so there is nothing to serve".to_owned(),
        },
    }
}

/// `Ready` when the current artifact cannot be had: never, whether or not an older one is served.
fn not_ready(failure: &Failure, serving: Option<&str>) -> Wanted {
    match serving {
        Some(digest) => Wanted {
            type_: ConditionType::Ready,
            status: false,
            reason: Reason::StaleArtifact.as_str(),
            message: format!(
                "images are served from the last known good artifact {digest}; the current one cannot be had"
            ),
        },
        None => Wanted {
            type_: ConditionType::Ready,
            status: false,
            reason: failure.reason.as_str(),
            message: format!("no artifact: {}", failure.message),
        },
    }
}

/// `Ready` with the current artifact: not while the status had to leave classes out.
fn ready_with_artifact(
    spec: &ImageSelectionPolicySpec,
    status: &ImageSelectionPolicyStatus,
) -> Wanted {
    let left_out = usize::try_from(status.class_count)
        .unwrap_or_default()
        .saturating_sub(status.classes.len());
    if status.class_keys.is_none() {
        Wanted {
            type_: ConditionType::Ready,
            status: false,
            reason: Reason::StatusTooLarge.as_str(),
            message: "the labels and features the artifact's rules read (classKeys) are \
                      too large for the status (etcd), so no class is served; every \
                      pod is denied"
                .to_owned(),
        }
    } else if left_out > 0 {
        Wanted {
            type_: ConditionType::Ready,
            status: false,
            reason: Reason::StatusTooLarge.as_str(),
            message: format!(
                "{left_out} node classes are left out of the status (too large for etcd); \
                 their pods are denied"
            ),
        }
    } else {
        ready(spec, &status.classes)
    }
}

fn failed(failure: &Failure) -> Wanted {
    Wanted {
        type_: ConditionType::ArtifactResolved,
        status: false,
        reason: failure.reason.as_str(),
        message: failure.message.clone(),
    }
}

fn ready(spec: &ImageSelectionPolicySpec, classes: &[ClassStatus]) -> Wanted {
    let wanted = |status, reason: Reason, message| Wanted {
        type_: ConditionType::Ready,
        status,
        reason: reason.as_str(),
        message,
    };
    if classes.is_empty() {
        let which = if spec.node_selector.is_empty() {
            "no node except control-plane nodes exists".to_owned()
        } else {
            let selector: Vec<String> = spec
                .node_selector
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!("no node matches the nodeSelector {}", selector.join(","))
        };
        return wanted(false, Reason::NoNodes, which);
    }
    let unmatched: Vec<&str> = classes
        .iter()
        .filter(|c| c.image.is_none())
        .map(|c| c.name.as_str())
        .collect();
    if unmatched.is_empty() {
        return wanted(
            true,
            Reason::Resolved,
            format!("all {} node classes have an image", classes.len()),
        );
    }
    let names = listed(&unmatched);
    match (&spec.fallback_image, spec.on_no_match) {
        (Some(fallback), _) => wanted(
            true,
            Reason::NoMatch,
            format!(
                "no compatible image for node classes {names}; their pods get the fallback image {fallback}"
            ),
        ),
        (None, OnNoMatch::Allow) => wanted(
            true,
            Reason::NoMatch,
            format!(
                "no compatible image for node classes {names}; their pods are admitted unchanged (onNoMatch: Allow)"
            ),
        ),
        (None, OnNoMatch::Deny) => wanted(
            false,
            Reason::NoMatch,
            format!(
                "no compatible image for node classes {names}; their pods are denied (onNoMatch: Deny)"
            ),
        ),
    }
}

/// Up to [`LISTED`] names, then how many more: a message stays short whatever the classes.
fn listed(names: &[&str]) -> String {
    let shown = names[..names.len().min(LISTED)].join(", ");
    match names.len().checked_sub(LISTED) {
        Some(more) if more > 0 => format!("{shown} and {more} more"),
        _ => shown,
    }
}

/// Names listed in a condition message.
const LISTED: usize = 8;
