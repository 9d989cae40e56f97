//! Condition types and reasons of an ImageSelectionPolicy's status, as constants, so the
//! controller, tests and docs cannot drift apart on spelling.

use std::fmt;

/// The `type` of a status condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionType {
    /// Every selected node class has an image (or the policy's rules say what happens to it) and the
    /// status reflects the current artifact.
    Ready,
    /// The compatibility artifact was fetched and parsed.
    ArtifactResolved,
    /// The status is served from the last known good artifact because the current one cannot be had.
    Degraded,
    /// Part of the status was cut to stay within what etcd stores (present only then).
    Truncated,
}

impl ConditionType {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
            Self::ArtifactResolved => "ArtifactResolved",
            Self::Degraded => "Degraded",
            Self::Truncated => "Truncated",
        }
    }
}

impl fmt::Display for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The machine-readable `reason` of a status condition (CamelCase, as Kubernetes requires).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

impl Reason {
    /// Every reason, for parsing a stored condition back and for the documentation.
    pub const ALL: [Reason; 15] = [
        Self::Resolved,
        Self::NoMatch,
        Self::NoNodes,
        Self::Fetched,
        Self::InvalidArtifact,
        Self::RegistryUnavailable,
        Self::Unauthorized,
        Self::RegistryNotAllowed,
        Self::NotFound,
        Self::InvalidReference,
        Self::SecretInvalid,
        Self::SecretNotAllowed,
        Self::StaleArtifact,
        Self::Current,
        Self::StatusTooLarge,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Resolved => "Resolved",
            Self::NoMatch => "NoMatch",
            Self::NoNodes => "NoNodes",
            Self::Fetched => "Fetched",
            Self::InvalidArtifact => "InvalidArtifact",
            Self::RegistryUnavailable => "RegistryUnavailable",
            Self::Unauthorized => "Unauthorized",
            Self::RegistryNotAllowed => "RegistryNotAllowed",
            Self::NotFound => "NotFound",
            Self::InvalidReference => "InvalidReference",
            Self::SecretInvalid => "SecretInvalid",
            Self::SecretNotAllowed => "SecretNotAllowed",
            Self::StaleArtifact => "StaleArtifact",
            Self::Current => "Current",
            Self::StatusTooLarge => "StatusTooLarge",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
