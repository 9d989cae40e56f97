//! Condition types and reasons of a PlacementPolicy's status, as constants, so the controller,
//! tests and docs cannot drift apart on spelling.

use std::fmt;

/// The `type` of a PlacementPolicy status condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlacementConditionType {
    /// The policy's selectors and durations are valid, so admission uses it.
    Ready,
}

impl PlacementConditionType {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
        }
    }
}

impl fmt::Display for PlacementConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The machine-readable `reason` of a PlacementPolicy condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlacementReason {
    /// Valid and in use.
    Valid,
    /// A namespace or pod selector cannot be read (unknown operator, missing values).
    InvalidSelector,
    /// A duration (timeout, tag cache lifetime) cannot be read.
    InvalidDuration,
    /// `action: Fallback` names no architecture.
    MissingFallback,
}

impl PlacementReason {
    /// Every reason, for the documentation and for parsing a stored condition back.
    pub const ALL: [PlacementReason; 4] = [
        Self::Valid,
        Self::InvalidSelector,
        Self::InvalidDuration,
        Self::MissingFallback,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Valid => "Valid",
            Self::InvalidSelector => "InvalidSelector",
            Self::InvalidDuration => "InvalidDuration",
            Self::MissingFallback => "MissingFallback",
        }
    }
}

impl fmt::Display for PlacementReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
