//! Containers of placed pods that failed with `exec format error`: their node's CPU cannot run
//! the image's entrypoint, so placement let the pod through wrongly (fail-open, a lying registry,
//! a tag moved after inspection). runc writes the error only to the log; the gate gives placed
//! pods `FallbackToLogsOnError`, so the kubelet copies its tail into the terminated `message` that
//! [`failures`] reads (`state` and `lastState` of every container and init container). A failure
//! is one container instance, named by its container ID (the restart count stays while the
//! kubelet backs off); [`Seen`] reports each once. [`describe`] writes the Event's note. Pure.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use crate::api::placement_pod::DIGESTS_ANNOTATION;
use crate::platform::Platform;

/// What runc's log line says (`exec /bin/app: exec format error`).
pub(super) const PHRASE: &str = "exec format error";

/// One container instance that failed with an exec format error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The container's name.
    pub container: String,
    /// Whether it is an init container.
    pub init: bool,
    /// The image as the pod's spec names it (as the kubelet reports it when the spec has no such
    /// container): a runtime reports the first name it holds for the digest it ran, which may be
    /// another image's.
    pub image: String,
    /// The image the node ran (`imageID`), with its digest when the runtime knows it.
    pub image_id: String,
    /// Which instance of the container failed: its container ID (its finish time if the
    /// runtime gave none).
    pub instance: String,
}

impl Failure {
    /// The digest of the image the node ran, from its `imageID`.
    pub(crate) fn ran_digest(&self) -> Option<&str> {
        self.image_id
            .rsplit_once('@')
            .map(|(_, digest)| digest)
            .filter(|digest| digest.starts_with("sha256:"))
    }
}

/// Every container instance of `pod` whose termination message says [`PHRASE`].
pub(crate) fn failures(pod: &Pod) -> Vec<Failure> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    let init = status.init_container_statuses.iter().flatten();
    let main = status.container_statuses.iter().flatten();
    init.map(|status| (true, status))
        .chain(main.map(|status| (false, status)))
        .flat_map(|(init, status)| of_container(init, status))
        .map(|mut failure| {
            failure.image = spec_image(pod, &failure).to_owned();
            failure
        })
        .collect()
}

/// The failed instances one container's status shows: the current one and the one before.
fn of_container(init: bool, status: &ContainerStatus) -> Vec<Failure> {
    let states = [status.state.as_ref(), status.last_state.as_ref()];
    states
        .into_iter()
        .flatten()
        .filter_map(|state| state.terminated.as_ref())
        .filter(|terminated| {
            terminated
                .message
                .as_deref()
                .is_some_and(|message| message.to_ascii_lowercase().contains(PHRASE))
        })
        .map(|terminated| Failure {
            container: status.name.clone(),
            init,
            image: status.image.clone(),
            image_id: status.image_id.clone(),
            instance: terminated
                .container_id
                .clone()
                .filter(|id| !id.is_empty())
                .or_else(|| {
                    terminated
                        .finished_at
                        .as_ref()
                        .map(|time| time.0.to_string())
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// The image the pod's spec names for the failed container (what ocifit inspected), else the
/// one its status names.
pub(crate) fn spec_image<'a>(pod: &'a Pod, failure: &'a Failure) -> &'a str {
    let spec = pod.spec.as_ref();
    let list = if failure.init {
        spec.and_then(|spec| spec.init_containers.as_deref())
    } else {
        spec.map(|spec| spec.containers.as_slice())
    };
    list.into_iter()
        .flatten()
        .find(|container| container.name == failure.container)
        .and_then(|container| container.image.as_deref())
        .unwrap_or(&failure.image)
}

/// The digest ocifit inspected for `container`, from the pod's digests annotation.
pub(crate) fn inspected_digest(pod: &Pod, container: &str) -> Option<String> {
    let digests = pod.metadata.annotations.as_ref()?.get(DIGESTS_ANNOTATION)?;
    let digests: BTreeMap<String, String> = serde_json::from_str(digests).ok()?;
    digests.get(container).cloned()
}

/// The failures reported so far that a pod's status still shows, by pod uid: each instance is
/// reported once. Only what the latest status shows is kept (at most two instances per
/// container), and a pod's entry goes with the pod.
#[derive(Debug, Default)]
pub(crate) struct Seen(HashMap<String, BTreeSet<(bool, String, String)>>);

impl Seen {
    #[cfg(test)]
    /// How many pods show a failure.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    #[cfg(test)]
    /// Whether no pod shows a failure.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The failures of pod `uid` not reported before; remembers what the status shows now.
    pub(crate) fn fresh(&mut self, uid: &str, now: Vec<Failure>) -> Vec<Failure> {
        let key = |failure: &Failure| {
            (
                failure.init,
                failure.container.clone(),
                failure.instance.clone(),
            )
        };
        let shown: BTreeSet<_> = now.iter().map(key).collect();
        let before = if shown.is_empty() {
            self.0.remove(uid)
        } else {
            self.0.insert(uid.to_owned(), shown)
        }
        .unwrap_or_default();
        now.into_iter()
            .filter(|failure| !before.contains(&key(failure)))
            .collect()
    }

    /// Keeps only the pods `keep` says still exist.
    pub(crate) fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.0.retain(|uid, _| keep(uid));
    }

    /// Forgets a deleted pod.
    pub(crate) fn forget(&mut self, uid: &str) {
        self.0.remove(uid);
    }
}

/// What ocifit knew of a failed container's image when it released the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Known {
    /// The platforms inspection found for this digest (still in the inspection cache).
    Platforms {
        digest: String,
        platforms: Vec<Platform>,
    },
    /// Inspected as this digest, whose platforms are no longer cached.
    Digest(String),
    /// Never inspected (e.g. `imagePullPolicy: Never`, or the inspection failed).
    Nothing,
}

/// The Event's note: the container, its image, the node and its platform, what ocifit decided
/// (`outcome`: the pod's outcome annotation) and knew of the image.
pub(crate) fn describe(
    failure: &Failure,
    node: &str,
    node_platform: &str,
    outcome: Option<&str>,
    known: &Known,
) -> String {
    let kind = if failure.init {
        "init container"
    } else {
        "container"
    };
    let mut note = format!(
        "{kind} {} (image {}) failed with exec format error on node {node} ({node_platform}): \
         its entrypoint is built for another platform",
        failure.container, failure.image
    );
    if let Some(outcome) = outcome {
        note.push_str(&format!("; ocifit released the pod {outcome}"));
    }
    let ran = failure.ran_digest();
    match known {
        Known::Platforms { digest, platforms } => {
            let listed: Vec<String> = platforms.iter().map(ToString::to_string).collect();
            note.push_str(&format!(
                "; ocifit inspected {digest}: {}",
                if listed.is_empty() {
                    "no platform".to_owned()
                } else {
                    listed.join(", ")
                }
            ));
            if ran.is_some_and(|ran| ran != digest) {
                note.push_str(" (the node ran another digest: the tag moved since)");
            }
        }
        Known::Digest(digest) => {
            note.push_str(&format!(
                "; ocifit inspected {digest}, its platforms no longer cached"
            ));
        }
        Known::Nothing => note.push_str("; ocifit had not inspected this image"),
    }
    if let Some(ran) = ran {
        note.push_str(&format!("; the node ran {ran}"));
    }
    note.push_str("; its platforms are inspected afresh for the next pod");
    note
}

#[cfg(test)]
mod tests;
