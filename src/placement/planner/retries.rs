//! When a gated pod is inspected again. After a failed inspection: again after a growing delay
//! until both bounds of the policy are reached (attempts, and time since the pod was created),
//! then give up as the policy says; holding keeps retrying at the longest delay, so a registry
//! that comes back still releases the pod. The controller also reconciles its own write (the
//! attempt count, a hold's reason), so [`Retries`] keeps each pod's due time: a pod whose images
//! are unchanged waits until it is due, whoever changed it; a pod whose images changed is looked
//! at again at once (the old answer is about other images). Pure: the time is passed in.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::policy::{FailureBound, GiveUp};
use super::release::containers;
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

/// The next inspection of each gated pod that is waiting for one, by pod UID.
#[derive(Debug, Default)]
pub(crate) struct Retries {
    due: HashMap<String, Due>,
}

#[derive(Debug, Clone)]
struct Due {
    at: Instant,
    images: String,
}

/// What the pod's inspection reads: every container's image, init containers first.
pub(crate) fn images(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .map(|spec| {
            containers(spec)
                .map(|container| container.image.as_deref().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

impl Retries {
    #[cfg(test)]
    /// Pods waiting.
    pub(crate) fn len(&self) -> usize {
        self.due.len()
    }

    #[cfg(test)]
    /// Whether no pod is waiting.
    pub(crate) fn is_empty(&self) -> bool {
        self.due.is_empty()
    }

    /// How long the pod `uid` with `images` must still wait at `now`; `None`: inspect it now.
    pub(crate) fn wait(&self, uid: &str, images: &str, now: Instant) -> Option<Duration> {
        let due = self.due.get(uid)?;
        (due.images == images && now < due.at).then(|| due.at - now)
    }

    /// The pod `uid` with `images` is next inspected at `at`. Entries long past are dropped
    /// here: a pod deleted while gated is never reconciled again to forget its own.
    pub(crate) fn schedule(&mut self, uid: &str, images: String, at: Instant, now: Instant) {
        self.due.retain(|_, due| due.at + LONGEST_RETRY > now);
        self.due.insert(uid.to_owned(), Due { at, images });
    }

    /// The pod `uid` waits for nothing any more (released, or gone).
    pub(crate) fn forget(&mut self, uid: &str) {
        self.due.remove(uid);
    }
}

#[cfg(test)]
mod tests;
