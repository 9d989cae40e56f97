//! What workflow steps moved, counted once per finished helper container: the step pods (by the
//! label the planner sets) are watched, each helper's termination message read as the step
//! helper's report, and the leader counts it in the metrics.
//!
//! Once means: a container run is known by its container ID, remembered until its pod is gone, so
//! a resync or a relist never counts it again. What had already finished when ocifit started is
//! marked, never counted: a restart of ocifit (or its leader's move to another replica, which
//! marks while it follows) misses what finished meanwhile rather than counting it twice.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use super::planner::{self, PREPARE, PUSH};
use crate::api::step;
use crate::cluster::leader::Leadership;
use crate::step_helper::report::Report;
use crate::telemetry::{Metrics, StepTransfer};

/// One finished helper container run and what it reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The run's container ID (a restarted container is a new run).
    pub id: String,
    /// The ArtifactCache as `namespace/name`; empty for a step naming its own registry.
    pub cache: String,
    pub report: Report,
}

/// The finished helper runs a pod's status shows (the current and the last state of each), with
/// a report in their termination message.
pub fn finished(pod: &Pod) -> Vec<Finished> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let cache = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(step::INJECTED))
        .and_then(|marker| planner::cache_of(marker))
        .map(|name| format!("{namespace}/{name}"))
        .unwrap_or_default();
    let statuses = pod
        .status
        .iter()
        .flat_map(|s| s.init_container_statuses.iter().flatten())
        .filter(|c| c.name == PREPARE || c.name == PUSH);
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

/// The runs already seen, by pod.
#[derive(Debug, Default)]
pub struct Tally {
    seen: HashMap<String, BTreeSet<String>>,
}

impl Tally {
    /// The runs of `pod` not seen before, now marked seen.
    pub fn new_runs(&mut self, pod: &Pod) -> Vec<Finished> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let seen = self.seen.entry(uid).or_default();
        finished(pod)
            .into_iter()
            .filter(|run| seen.insert(run.id.clone()))
            .collect()
    }

    /// Forgets a pod that is gone.
    pub fn forget(&mut self, pod: &Pod) {
        if let Some(uid) = &pod.metadata.uid {
            self.seen.remove(uid);
        }
    }

    /// Keeps only the pods a relist returned: one deleted while the watch was down is forgotten.
    pub fn keep_only(&mut self, listed: &BTreeSet<String>) {
        self.seen.retain(|uid, _| listed.contains(uid));
    }
}

/// Watches the step pods and counts each new finished helper run while leading; what is there
/// at the first list is marked, not counted.
pub fn count(
    client: Client,
    leadership: Leadership,
    metrics: Arc<Metrics>,
) -> BoxFuture<'static, ()> {
    let config = watcher::Config::default()
        .labels(&format!("{}={}", step::STEP_LABEL, step::STEP_LABEL_VALUE))
        .page_size(crate::cluster::watches::UNTRUSTED_LIST_PAGE);
    let events = watcher(Api::<Pod>::all(client), config)
        .backoff(crate::process::watch_backoff())
        .modify(|pod| {
            pod.metadata.managed_fields = None;
            pod.spec = None;
        });
    let mut tally = Tally::default();
    let mut started = false;
    let mut listed = BTreeSet::new();
    Box::pin(events.for_each(move |event| {
        match event {
            Ok(watcher::Event::InitApply(pod)) => {
                listed.extend(pod.metadata.uid.clone());
                let runs = tally.new_runs(&pod);
                if started {
                    record(&metrics, &leadership, runs);
                }
            }
            Ok(watcher::Event::InitDone) => {
                tally.keep_only(&std::mem::take(&mut listed));
                started = true;
            }
            Ok(watcher::Event::Apply(pod)) => {
                record(&metrics, &leadership, tally.new_runs(&pod));
            }
            Ok(watcher::Event::Delete(pod)) => {
                record(&metrics, &leadership, tally.new_runs(&pod));
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
mod tests {
    use serde_json::json;

    use super::*;
    use crate::step_helper::report::Direction;

    fn report(direction: Direction, bytes: u64) -> String {
        let mut report = Report::new(direction);
        report.moved([bytes], std::time::Duration::from_millis(250));
        report.message()
    }

    fn pod(statuses: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "step-1", "namespace": "workflow", "uid": "u1",
                "annotations": {step::INJECTED: "ArtifactCache oras at 10.0.0.1:5000"}
            },
            "status": {"initContainerStatuses": statuses}
        }))
        .unwrap()
    }

    fn terminated(id: &str, message: &str) -> serde_json::Value {
        json!({"terminated": {"exitCode": 0, "containerID": id, "message": message}})
    }

    #[test]
    fn each_helper_run_is_counted_once_across_resyncs_and_restarts() {
        let running = pod(json!([
            {"name": PREPARE, "image": "o", "imageID": "", "ready": false, "restartCount": 0,
             "state": terminated("c://1", &report(Direction::Pull, 42))},
            {"name": PUSH, "image": "o", "imageID": "", "ready": true, "restartCount": 0,
             "state": {"running": {}}}
        ]));
        let mut tally = Tally::default();
        let first = tally.new_runs(&running);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].cache, "workflow/oras");
        assert_eq!(first[0].report.bytes, 42);
        assert_eq!(
            tally.new_runs(&running),
            [],
            "a resync counts nothing again"
        );
        let restarted_pusher = pod(json!([
            {"name": PREPARE, "image": "o", "imageID": "", "ready": false, "restartCount": 0,
             "state": terminated("c://1", &report(Direction::Pull, 42))},
            {"name": PUSH, "image": "o", "imageID": "", "ready": false, "restartCount": 1,
             "lastState": terminated("c://2", &report(Direction::Push, 7)),
             "state": terminated("c://3", &report(Direction::Push, 9))}
        ]));
        let pushes: Vec<u64> = tally
            .new_runs(&restarted_pusher)
            .iter()
            .map(|run| run.report.bytes)
            .collect();
        assert_eq!(pushes, [7, 9], "each run of a restarted container, once");
        assert_eq!(tally.new_runs(&restarted_pusher), []);
        tally.keep_only(&BTreeSet::from(["u1".to_string()]));
        assert_eq!(
            tally.new_runs(&restarted_pusher),
            [],
            "still listed, still seen"
        );
        tally.keep_only(&BTreeSet::new());
        assert!(
            tally.seen.is_empty(),
            "a pod a relist no longer returns is forgotten"
        );
        tally.new_runs(&restarted_pusher);
        tally.forget(&restarted_pusher);
        assert!(tally.seen.is_empty(), "a pod gone is forgotten");
    }

    #[test]
    fn a_message_that_is_no_report_and_a_registry_step_are_read_as_such() {
        let mut plain = pod(json!([
            {"name": PREPARE, "image": "o", "imageID": "", "ready": false, "restartCount": 0,
             "state": terminated("c://1", "failed to pull input a:1")}
        ]));
        assert_eq!(finished(&plain), []);
        plain.metadata.annotations = Some(
            [(
                step::INJECTED.to_string(),
                "registry 10.0.0.9:5000".to_string(),
            )]
            .into(),
        );
        plain.status = pod(json!([
            {"name": PREPARE, "image": "o", "imageID": "", "ready": false, "restartCount": 0,
             "state": terminated("c://1", &report(Direction::Pull, 1))}
        ]))
        .status;
        assert_eq!(finished(&plain)[0].cache, "");
    }
}
