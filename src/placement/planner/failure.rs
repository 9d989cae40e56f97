//! The failure state machine: after an inspection of a gated pod fails, retry after a growing
//! delay until both bounds of the policy are reached (attempts, and time since the pod was
//! created), then give up as the policy says. Holding keeps retrying at the longest delay, so a
//! registry that comes back still releases the pod. Pure: the time is passed in.

use std::time::Duration;

use super::policy::{FailureBound, GiveUp};
use crate::process::growing_delay;

/// The delay after the first failure; doubled after each further one.
pub(super) const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest delay between inspections, and the cadence of a held pod.
pub(super) const LONGEST_RETRY: Duration = Duration::from_secs(300);

/// What to do after a failed inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// Keep the gate and inspect again after this long.
    RetryIn(Duration),
    /// The bound is reached: do what the policy says (for `Hold`, also inspect again after
    /// [`LONGEST_RETRY`]).
    GiveUp(GiveUp),
}

/// The step after the `failed`-th failed inspection (1 for the first) of a pod created
/// `since_creation` ago.
pub(super) fn after_failure(bound: &FailureBound, failed: u32, since_creation: Duration) -> Step {
    let attempts_used = failed >= bound.attempts;
    let time_used = since_creation >= bound.timeout;
    if attempts_used && time_used {
        return Step::GiveUp(bound.action.clone());
    }
    let backoff = growing_delay(FIRST_RETRY, LONGEST_RETRY, failed);
    // Attempts used up early: the next look is when the timeout is reached, not later.
    let wait = if attempts_used {
        backoff.min(bound.timeout.saturating_sub(since_creation))
    } else {
        backoff
    };
    Step::RetryIn(wait.max(FIRST_RETRY))
}

#[cfg(test)]
mod tests;
