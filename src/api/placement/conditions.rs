//! The reasons of a PlacementPolicy's `Ready` condition.

use crate::api::conditions::names;

names! {
    /// The machine-readable `reason` of a PlacementPolicy condition.
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
}
