//! The status conditions of every ocifit resource: their types and reasons, each declared once
//! with [`names!`] so code, tests and docs cannot drift apart on spelling, and the one [`merge_condition`]
//! that keeps a condition's `lastTransitionTime` while its status does not flip.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Declares a condition type or reason enum whose values are spelled as their variants' names,
/// with `as_str`, `Display` and `ALL` (every value, to parse a stored condition back and to check
/// the documentation).
macro_rules! names {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$doc:meta])* $variant:ident,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$doc])* $variant,)+
        }

        impl $name {
            pub const ALL: [$name; [$(stringify!($variant)),+].len()] = [$(Self::$variant),+];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => stringify!($variant),)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use names;

names! {
    /// The `type` of a status condition. Every resource has `Ready`; the others are an
    /// ImageSelectionPolicy's.
    pub enum ConditionType {
        /// The resource does what it is for: every selected node class has an image (or the
        /// policy's rules say what happens to it), a PlacementPolicy's selectors and durations
        /// read, an ArtifactCache's registry answers.
        Ready,
        /// The compatibility artifact was fetched and parsed.
        ArtifactResolved,
        /// The status is served from the last known good artifact because the current one cannot be had.
        Degraded,
        /// Part of the status was cut to stay within what etcd stores (present only then).
        Truncated,
    }
}

/// A condition's new value, before [`merge_condition`] gives it its transition time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedCondition {
    pub type_: ConditionType,
    pub status: bool,
    /// One of the resource's reasons, as its `as_str` spells it.
    pub reason: &'static str,
    pub message: String,
}

/// The condition `wanted` asks for, with the `lastTransitionTime` of the `previous` condition of
/// its type kept while the status is the same, and `now` when it flips or is new. Conditions of
/// other types are not read.
pub fn merge_condition(
    previous: &[Condition],
    wanted: WantedCondition,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if wanted.status { "True" } else { "False" };
    let type_ = wanted.type_.as_str();
    let last_transition_time = match previous.iter().find(|c| c.type_ == type_) {
        Some(earlier) if earlier.status == status => earlier.last_transition_time.clone(),
        _ => now.clone(),
    };
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: wanted.reason.to_owned(),
        message: wanted.message,
        observed_generation: generation,
        last_transition_time,
    }
}

names! {
    /// The machine-readable `reason` of a status condition (CamelCase, as Kubernetes requires).
    pub enum Reason {
        /// Every node class resolved to an image.
        Resolved,
        /// Some node class has no compatible image.
        NoMatch,
        /// The policy selects no node.
        NoNodes,
        /// The artifact was fetched and parsed.
        Fetched,
        /// The artifact does not parse or is invalid (unknown operator, bad regex, …).
        InvalidArtifact,
        /// The registry could not be reached, or answered with an error.
        RegistryUnavailable,
        /// The registry refused the credentials, or none were given.
        Unauthorized,
        /// The registry (or its token realm, or a redirect) is not in the operator's allowed
        /// registries, or would be reached over plain HTTP.
        RegistryNotAllowed,
        /// The artifact or image reference does not exist (candidates mode: no candidate image has
        /// an NFD artifact attached).
        NotFound,
        /// The artifact reference is not a valid OCI reference.
        InvalidReference,
        /// The referenced pull Secret is missing or not a dockerconfigjson.
        SecretInvalid,
        /// The pull Secret's namespace is not one the operator may read Secrets in
        /// (`--pull-secret-namespaces`): nothing was read.
        SecretNotAllowed,
        /// The status is the last known good one; the current artifact cannot be had.
        StaleArtifact,
        /// The status reflects the current artifact.
        Current,
        /// The status would exceed what etcd stores: class reasons, or classes, were cut.
        StatusTooLarge,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn stored(type_: ConditionType, status: &str, since: i64) -> Condition {
        Condition {
            type_: type_.as_str().to_owned(),
            status: status.to_owned(),
            reason: "Before".to_owned(),
            message: "before".to_owned(),
            observed_generation: Some(1),
            last_transition_time: at(since),
        }
    }

    fn ready(status: bool) -> WantedCondition {
        WantedCondition {
            type_: ConditionType::Ready,
            status,
            reason: Reason::Resolved.as_str(),
            message: "now".to_owned(),
        }
    }

    #[test]
    fn an_unchanged_status_keeps_its_transition_time_and_takes_the_new_reason() {
        let previous = [stored(ConditionType::Ready, "True", 10)];
        let merged = merge_condition(&previous, ready(true), Some(2), &at(99));
        assert_eq!(merged.last_transition_time, at(10));
        assert_eq!(
            (
                merged.reason.as_str(),
                merged.message.as_str(),
                merged.observed_generation
            ),
            ("Resolved", "now", Some(2))
        );
    }

    #[test]
    fn a_flipped_or_new_status_moves_its_transition_time_to_now() {
        let previous = [stored(ConditionType::Ready, "True", 10)];
        let flipped = merge_condition(&previous, ready(false), None, &at(99));
        assert_eq!(
            (flipped.status.as_str(), flipped.last_transition_time),
            ("False", at(99))
        );
        assert_eq!(
            merge_condition(&[], ready(true), None, &at(99)).last_transition_time,
            at(99)
        );
    }

    #[test]
    fn another_types_condition_lends_no_transition_time() {
        // A Degraded condition with Ready's status must not make a new Ready look unchanged.
        let previous = [
            stored(ConditionType::Degraded, "True", 10),
            stored(ConditionType::Ready, "False", 20),
        ];
        let merged = merge_condition(&previous, ready(true), None, &at(99));
        assert_eq!(merged.last_transition_time, at(99));
        let degraded = WantedCondition {
            type_: ConditionType::Degraded,
            ..ready(true)
        };
        assert_eq!(
            merge_condition(&previous, degraded, None, &at(99)).last_transition_time,
            at(10)
        );
    }

    #[test]
    fn names_are_spelled_as_their_variants() {
        assert_eq!(
            ConditionType::ALL.map(ConditionType::as_str),
            ["Ready", "ArtifactResolved", "Degraded", "Truncated"]
        );
        assert_eq!(Reason::ALL.len(), 15);
        assert_eq!(Reason::RegistryNotAllowed.to_string(), "RegistryNotAllowed");
    }
}
