//! When a gated pod may be inspected again. The controller reconciles every change of a gated
//! pod, including the update it wrote itself (the attempt count, a hold's reason); without a
//! schedule of its own, that write would start the next inspection at once instead of after the
//! backoff. A pod whose images are unchanged waits until its retry is due, whoever changed it;
//! a pod whose images changed is looked at again at once (the old answer is about other images).
//! Pure: the time is passed in.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::failure::LONGEST_RETRY;
use super::release::containers;

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
mod tests {
    use super::*;
    use crate::placement::fixtures::pod;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_pod_changed_before_its_retry_is_due_waits_for_the_rest_of_it() {
        let mut retries = Retries::default();
        let now = Instant::now();
        let images = images(&pod(&[("web", "registry.example.com/web:missing")]));
        retries.schedule("uid-1", images.clone(), now + 4 * SECOND, now);
        // The controller's own write of the attempt count arrives at once: no inspection.
        assert_eq!(retries.wait("uid-1", &images, now), Some(4 * SECOND));
        assert_eq!(
            retries.wait("uid-1", &images, now + 3 * SECOND),
            Some(SECOND)
        );
        assert_eq!(retries.wait("uid-1", &images, now + 4 * SECOND), None);
        assert_eq!(retries.wait("uid-2", &images, now), None, "another pod");
    }

    #[test]
    fn a_pod_whose_images_changed_is_inspected_at_once() {
        let mut retries = Retries::default();
        let now = Instant::now();
        let before = images(&pod(&[("web", "registry.example.com/web:missing")]));
        let after = images(&pod(&[("web", "registry.example.com/web:v2")]));
        assert_ne!(before, after);
        retries.schedule("uid-1", before, now + 300 * SECOND, now);
        assert_eq!(retries.wait("uid-1", &after, now), None);
    }

    #[test]
    fn a_released_pod_is_forgotten_and_long_past_entries_are_dropped() {
        let mut retries = Retries::default();
        let now = Instant::now();
        retries.schedule("released", String::new(), now + SECOND, now);
        retries.forget("released");
        assert!(retries.is_empty());
        retries.schedule("deleted-while-gated", String::new(), now + SECOND, now);
        let later = now + SECOND + LONGEST_RETRY;
        retries.schedule("live", String::new(), later + SECOND, later);
        assert_eq!(retries.len(), 1, "only the live pod is kept");
        assert_eq!(retries.wait("live", "", later), Some(SECOND));
    }
}
