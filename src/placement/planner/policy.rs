//! A PlacementPolicy read once into the form decisions use: selectors parsed, durations read,
//! per-architecture settings by name. A policy that cannot be read is an error naming the field,
//! which the controller turns into its `Ready` condition; admission never uses such a policy.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt as _;
use kube::core::{Selector, SelectorExt as _};

use crate::api::parse_duration;
use crate::api::{FailureAction, Misplaced, NoCommonPlatform, PlacementPolicy, PlacementReason};
use crate::cluster::identity_and_labels;
use crate::platform::architecture_name;

/// A policy ready for decisions.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// `metadata.name`, also the tracking label's value.
    pub name: String,
    /// Higher wins when several policies select a pod.
    pub priority: i32,
    namespaces: Selector,
    pods: Selector,
    /// Settings by architecture, as `kubernetes.io/arch` names it (other spellings read as it).
    pub architectures: BTreeMap<String, Architecture>,
    /// Architectures whose nodes this policy taints (node-tainting mode), as
    /// `kubernetes.io/arch` names them; empty when off.
    pub tainted: BTreeSet<String>,
    /// When to give up on failing inspections, and what then.
    pub failure: FailureBound,
    /// What to do when the containers share no platform.
    pub no_common_platform: NoCommonPlatform,
    /// How old a tag's digest may be, by pull policy.
    pub tag_max_age: TagMaxAge,
    /// Whether ocifit's own registry credentials are tried for its pods' images.
    pub operator_credentials: bool,
    /// What the audit does with a running pod on the wrong platform.
    pub misplaced: Misplaced,
}

/// What one architecture adds to a pod that can run on it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Architecture {
    /// Preferred node affinity weight, 1-100.
    pub weight: Option<i32>,
    pub tolerations: Vec<Toleration>,
    /// Node labels a node of this architecture must also carry.
    pub required_labels: BTreeMap<String, String>,
}

/// The bound on failed inspections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureBound {
    /// Failed inspections before giving up.
    pub attempts: u32,
    /// Time since the pod's creation before giving up (both bounds must be reached).
    pub timeout: Duration,
    /// What to do then.
    pub action: GiveUp,
}

/// What giving up means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GiveUp {
    /// Remove the gate, constrain nothing.
    ReleaseUnconstrained,
    /// Constrain to this architecture and remove the gate.
    Fallback(String),
    /// Keep the gate, retry at the longest delay.
    Hold,
}

/// How old a tag's resolved digest may be, by effective pull policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagMaxAge {
    /// `IfNotPresent` and `Never`.
    pub if_not_present: Duration,
    /// `Always`.
    pub always: Duration,
}

/// Why a policy cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A label selector with an unknown operator or missing values.
    #[error("spec.{field} is not a valid label selector: {message}")]
    InvalidSelector {
        field: &'static str,
        message: String,
    },
    /// A duration that does not read (out of range).
    #[error("spec.{field} is not a duration: {value:?}")]
    InvalidDuration { field: &'static str, value: String },
    /// `action: Fallback` without an architecture (the CRD's rule forbids it; kept for objects
    /// stored before the rule).
    #[error("spec.onInspectionFailure.fallbackArchitecture is required with action Fallback")]
    MissingFallback,
}

impl PolicyError {
    /// The `Ready` condition's reason for this error.
    pub fn reason(&self) -> PlacementReason {
        match self {
            Self::InvalidSelector { .. } => PlacementReason::InvalidSelector,
            Self::InvalidDuration { .. } => PlacementReason::InvalidDuration,
            Self::MissingFallback => PlacementReason::MissingFallback,
        }
    }
}

impl Policy {
    /// Reads a stored policy.
    pub fn compile(policy: &PlacementPolicy) -> Result<Self, PolicyError> {
        let spec = &policy.spec;
        let duration = |field: &'static str, value: &str| {
            parse_duration(value).ok_or_else(|| PolicyError::InvalidDuration {
                field,
                value: value.to_owned(),
            })
        };
        let failure = &spec.on_inspection_failure;
        let action = match failure.action {
            FailureAction::ReleaseUnconstrained => GiveUp::ReleaseUnconstrained,
            FailureAction::Hold => GiveUp::Hold,
            FailureAction::Fallback => GiveUp::Fallback(architecture_name(
                failure
                    .fallback_architecture
                    .as_deref()
                    .ok_or(PolicyError::MissingFallback)?,
            )),
        };
        Ok(Policy {
            name: policy.name_any(),
            priority: spec.priority,
            namespaces: selector("namespaceSelector", spec.namespace_selector.as_ref())?,
            pods: selector("podSelector", spec.pod_selector.as_ref())?,
            architectures: spec
                .architectures
                .iter()
                .map(|settings| {
                    check_labels(&settings.require_node_labels)?;
                    Ok((
                        architecture_name(&settings.name),
                        Architecture {
                            weight: settings.weight,
                            tolerations: settings.tolerations.clone(),
                            required_labels: settings.require_node_labels.clone(),
                        },
                    ))
                })
                .collect::<Result<_, PolicyError>>()?,
            tainted: spec
                .node_tainting
                .iter()
                .flat_map(|tainting| tainting.architectures.iter())
                .map(|name| architecture_name(name))
                .collect(),
            failure: FailureBound {
                attempts: u32::try_from(failure.attempts.max(1)).unwrap_or(1),
                timeout: duration("onInspectionFailure.timeout", &failure.timeout)?,
                action,
            },
            no_common_platform: spec.on_no_common_platform,
            tag_max_age: TagMaxAge {
                if_not_present: duration("tagCache.ifNotPresent", &spec.tag_cache.if_not_present)?,
                always: duration("tagCache.always", &spec.tag_cache.always)?,
            },
            operator_credentials: spec.operator_credentials,
            misplaced: spec.misplaced,
        })
    }

    /// Whether the policy selects namespaces with `labels`.
    pub fn selects_namespace(&self, labels: &BTreeMap<String, String>) -> bool {
        self.namespaces.matches(labels)
    }

    /// Whether the policy selects pods with `labels` (namespace aside).
    pub fn selects_pod(&self, labels: &BTreeMap<String, String>) -> bool {
        self.pods.matches(labels)
    }
}

/// A required node label must be one a node can carry: a pod whose node affinity names an
/// invalid key or value is refused by the apiserver at release, again and again.
fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), PolicyError> {
    let invalid = |message: String| PolicyError::InvalidSelector {
        field: "architectures[].requireNodeLabels",
        message,
    };
    for (key, value) in labels {
        let (prefix, name) = key.rsplit_once('/').unwrap_or(("", key));
        let prefix_ok = prefix.is_empty()
            || (prefix.len() <= 253
                && prefix
                    .split('.')
                    .all(|part| label_part(part) && !part.contains('_')));
        if !prefix_ok || name.is_empty() || !label_part(name) {
            return Err(invalid(format!("{key:?} is not a label key")));
        }
        if !value.is_empty() && !label_part(value) {
            return Err(invalid(format!(
                "{value:?} (of {key}) is not a label value"
            )));
        }
    }
    Ok(())
}

/// At most 63 characters, alphanumeric at both ends, `-`, `_` and `.` between.
fn label_part(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn selector(
    field: &'static str,
    selector: Option<&LabelSelector>,
) -> Result<Selector, PolicyError> {
    selector.cloned().unwrap_or_default().try_into().map_err(
        |err: kube::core::ParseExpressionError| PolicyError::InvalidSelector {
            field,
            message: err.0,
        },
    )
}

/// What the watch keeps of a PlacementPolicy: the spec and status (bounded by the CRD schema)
/// and its identity; no label, annotation, owner or finalizer is read.
pub(crate) fn trim_policy(policy: &mut PlacementPolicy) {
    identity_and_labels(&mut policy.metadata, &[]);
}

#[cfg(test)]
mod tests;
