//! What workflow steps moved, counted once per finished helper container: step pods (by the
//! planner's label) are watched, each helper's termination message read as its report, and the
//! leader counts it in the metrics. A pod author can write the label, the marker annotation and a
//! terminated status, so a run counts only when its helper containers run ocifit's helper image
//! and the marker names a cache in the store with that endpoint; the `cache` label is then read
//! from the cache object, so a forged pod adds no series. A run is known by its container ID until
//! its pod is gone, so a relist never counts it twice; what finished before ocifit started (or
//! before its leader moved) is marked, never counted.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{Container, ContainerStateTerminated, Pod, PodSpec};
use kube::core::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use super::planner::{self, PREPARE, PUSH};
use crate::api::{ArtifactCache, step};
use crate::cluster::Leadership;
use crate::step_helper::Report;
use crate::telemetry::{Metrics, StepTransfer};

/// One finished helper container run and what it reported.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Finished {
    /// The run's container ID (a restarted container is a new run).
    pub id: String,
    /// The ArtifactCache as `namespace/name`, from the cache object; empty for a step naming its
    /// own registry.
    pub cache: String,
    pub report: Report,
}

/// What a step pod is checked against: ocifit's helper image and the caches in the store.
pub(super) struct Facts<'a> {
    /// The image ocifit injects its helpers with.
    pub helper_image: &'a str,
    /// The ArtifactCache of a namespace and name, as the store holds it.
    pub cache: &'a dyn Fn(&str, &str) -> Option<Arc<ArtifactCache>>,
}

/// The cache label of a pod whose steps ocifit injected (`Some("")` for a step naming its own
/// registry), or `None` when the pod is not one: a marker naming no cache in the store, or
/// another endpoint than the cache's; a helper container on another image than ocifit's.
fn injected_cache(pod: &Pod, facts: &Facts<'_>) -> Option<String> {
    let marker = pod.metadata.annotations.as_ref()?.get(step::INJECTED)?;
    let helpers_are_ours = pod
        .spec
        .iter()
        .flat_map(|spec| spec.init_containers.iter().flatten())
        .filter(|c| c.name == PREPARE || c.name == PUSH)
        .all(|c| c.image.as_deref() == Some(facts.helper_image));
    if !helpers_are_ours {
        return None;
    }
    let Some(name) = planner::cache_of(marker) else {
        return Some(String::new());
    };
    let namespace = pod.metadata.namespace.as_deref()?;
    let endpoint = marker.rsplit_once(" at ").map(|(_, endpoint)| endpoint);
    let cache = (facts.cache)(namespace, name)?;
    let status = cache.status.as_ref()?;
    (status.endpoint.as_deref() == endpoint).then(|| label(&cache))?
}

/// A cache's `namespace/name` from its own object.
pub(super) fn label(cache: &ArtifactCache) -> Option<String> {
    let metadata = &cache.metadata;
    Some(format!(
        "{}/{}",
        metadata.namespace.as_deref()?,
        metadata.name.as_deref()?
    ))
}

/// The finished helper runs a pod's status shows (the current and the last state of each), with
/// a report in their termination message; none for a pod whose steps ocifit did not inject.
pub(super) fn finished(pod: &Pod, facts: &Facts<'_>) -> Vec<Finished> {
    let Some(cache) = injected_cache(pod, facts) else {
        return Vec::new();
    };
    let injected: BTreeSet<&str> = pod
        .spec
        .iter()
        .flat_map(|spec| spec.init_containers.iter().flatten())
        .map(|c| c.name.as_str())
        .filter(|name| *name == PREPARE || *name == PUSH)
        .collect();
    let statuses = pod
        .status
        .iter()
        .flat_map(|s| s.init_container_statuses.iter().flatten())
        .filter(|c| injected.contains(c.name.as_str()));
    let runs = statuses.flat_map(|c| {
        let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
        let now = c.state.as_ref().and_then(|s| s.terminated.as_ref());
        last.into_iter().chain(now)
    });
    runs.filter_map(|run| read(run, &cache)).collect()
}

fn read(run: &ContainerStateTerminated, cache: &str) -> Option<Finished> {
    Some(Finished {
        id: run.container_id.clone()?,
        cache: cache.to_owned(),
        report: Report::read(run.message.as_deref()?)?,
    })
}

/// Keeps of a step pod what the counting reads: identity, the marker, its helper containers'
/// names and images, and its status.
pub(super) fn trim(pod: &mut Pod) {
    let Pod {
        metadata,
        spec,
        status,
    } = std::mem::take(pod);
    let marker = metadata
        .annotations
        .into_iter()
        .flatten()
        .filter(|(key, _)| key == step::INJECTED)
        .collect();
    pod.metadata = ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        annotations: Some(marker),
        ..ObjectMeta::default()
    };
    pod.spec = spec.map(|spec| PodSpec {
        init_containers: spec.init_containers.map(|containers| {
            containers
                .into_iter()
                .filter(|c| c.name == PREPARE || c.name == PUSH)
                .map(|c| Container {
                    name: c.name,
                    image: c.image,
                    ..Container::default()
                })
                .collect()
        }),
        ..PodSpec::default()
    });
    pod.status = status;
}

/// The runs already seen, by pod.
#[derive(Debug, Default)]
pub(super) struct Tally {
    seen: HashMap<String, BTreeSet<String>>,
}

impl Tally {
    /// The runs of `pod` not seen before, now marked seen.
    /// A pod whose steps ocifit did not inject is not remembered.
    pub(super) fn new_runs(&mut self, pod: &Pod, facts: &Facts<'_>) -> Vec<Finished> {
        let runs = finished(pod, facts);
        if runs.is_empty() {
            return runs;
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let seen = self.seen.entry(uid).or_default();
        runs.into_iter()
            .filter(|run| seen.insert(run.id.clone()))
            .collect()
    }

    /// Forgets a pod that is gone.
    pub(super) fn forget(&mut self, pod: &Pod) {
        if let Some(uid) = &pod.metadata.uid {
            self.seen.remove(uid);
        }
    }

    /// Keeps only the pods a relist returned: one deleted while the watch was down is forgotten.
    pub(super) fn keep_only(&mut self, listed: &BTreeSet<String>) {
        self.seen.retain(|uid, _| listed.contains(uid));
    }
}

/// Watches the step pods and counts each new finished helper run of `helper_image` while
/// leading; what is there at the first list is marked, not counted.
pub(super) fn count(
    client: Client,
    leadership: Leadership,
    metrics: Arc<Metrics>,
    caches: Store<ArtifactCache>,
    helper_image: String,
) -> BoxFuture<'static, ()> {
    let config = watcher::Config::default()
        .labels(&format!("{}={}", step::STEP_LABEL, step::STEP_LABEL_VALUE))
        .page_size(crate::cluster::UNTRUSTED_LIST_PAGE);
    let events = watcher(Api::<Pod>::all(client), config)
        .backoff(crate::process::watch_backoff())
        .modify(trim);
    let cache =
        move |namespace: &str, name: &str| caches.get(&ObjectRef::new(name).within(namespace));
    let mut tally = Tally::default();
    let mut started = false;
    let mut listed = BTreeSet::new();
    Box::pin(events.for_each(move |event| {
        let facts = Facts {
            helper_image: &helper_image,
            cache: &cache,
        };
        match event {
            Ok(watcher::Event::InitApply(pod)) => {
                listed.extend(pod.metadata.uid.clone());
                let runs = tally.new_runs(&pod, &facts);
                if started {
                    record(&metrics, &leadership, runs);
                }
            }
            Ok(watcher::Event::InitDone) => {
                tally.keep_only(&std::mem::take(&mut listed));
                started = true;
            }
            Ok(watcher::Event::Apply(pod)) => {
                record(&metrics, &leadership, tally.new_runs(&pod, &facts));
            }
            Ok(watcher::Event::Delete(pod)) => {
                record(&metrics, &leadership, tally.new_runs(&pod, &facts));
                tally.forget(&pod);
            }
            Ok(watcher::Event::Init) => listed.clear(),
            Err(err) => tracing::warn!(error = %err, "watching step pods"),
        }
        std::future::ready(())
    }))
}

fn record(metrics: &Metrics, leadership: &Leadership, runs: Vec<Finished>) {
    if !leadership.is_leader() {
        return;
    }
    for run in runs {
        metrics.step_transferred(&StepTransfer {
            cache: &run.cache,
            direction: run.report.direction.as_str(),
            ok: run.report.ok,
            bytes: run.report.bytes,
            seconds: run.report.seconds,
        });
    }
}

#[cfg(test)]
mod tests;
