//! Exec format errors of the pods placement released (every replica watches; the leader reports):
//! the released pods are watched and never stored, only which failed instances each pod's status
//! still shows ([`Seen`]). Each new failure is a Warning Event `ExecFormatError` on the pod and its
//! controlling owner, a count in `ocifit_exec_format_errors_total` and the policy's
//! `status.pods.execFormatErrors`, and the image's cached platforms are dropped so the next pod is
//! placed from a fresh inspection. Followers remember what they saw, so a new leader reports only
//! what fails after it took over, and a starting replica reports once what statuses show then.
//! [`report_finding`] reports these and the audit's misplaced pods alike.

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use super::status_write::Tally;
use crate::api::placement_pod::{OUTCOME_ANNOTATION, POLICY_LABEL};
use crate::cluster::ClusterView;
use crate::cluster::Notices;
use crate::cluster::UNTRUSTED_LIST_PAGE;
use crate::placement::planner::Note;
use crate::placement::planner::released;
use crate::placement::planner::{
    Failure, Known, Seen, describe, failures, inspected_digest, spec_image,
};
use crate::platform::NodePlatform;
use crate::registry::{Inspector, parse_reference};
use crate::telemetry::Metrics;

/// The Event's reason.
pub const REASON: &str = "ExecFormatError";

/// What the reporter reads and writes.
pub(crate) struct ExecErrorReporter {
    pub cluster: ClusterView,
    pub inspector: Inspector,
    pub notices: Notices,
    pub metrics: Arc<Metrics>,
    /// Failures reported, by policy, for the status keeper.
    pub tally: Arc<Tally>,
}

impl ExecErrorReporter {
    /// The reporter over what the controller reads, counting into `tally`.
    pub(crate) fn new(context: &super::Context, tally: Arc<Tally>) -> Self {
        ExecErrorReporter {
            cluster: context.cluster.clone(),
            inspector: context.inspector.clone(),
            notices: context.notices.clone(),
            metrics: Arc::clone(&context.metrics),
            tally,
        }
    }

    /// Watches the released pods until the stream ends.
    pub(crate) async fn watch_released(self) {
        let events = watcher(
            Api::<Pod>::all(self.cluster.client.clone()),
            watcher::Config::default()
                .labels(&released().to_string())
                .page_size(UNTRUSTED_LIST_PAGE),
        )
        .backoff(crate::process::watch_backoff());
        let mut events = std::pin::pin!(events);
        let mut seen = Seen::default();
        // The pods a relist showed: what `seen` keeps of any other was deleted meanwhile.
        let mut relisted: HashSet<String> = HashSet::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Apply(pod)) => self.look(&mut seen, &pod).await,
                Ok(Event::InitApply(pod)) => {
                    relisted.insert(pod.uid().unwrap_or_default());
                    self.look(&mut seen, &pod).await;
                }
                Ok(Event::Delete(pod)) => seen.forget(&pod.uid().unwrap_or_default()),
                Ok(Event::Init) => relisted.clear(),
                Ok(Event::InitDone) => seen.retain(|uid| relisted.contains(uid)),
                Err(err) => tracing::debug!(error = %err, "released pod watch"),
            }
        }
    }

    /// Reports what `pod`'s status shows for the first time (on the leader).
    async fn look(&self, seen: &mut Seen, pod: &Pod) {
        let fresh = seen.fresh(&pod.uid().unwrap_or_default(), failures(pod));
        if fresh.is_empty() || !self.cluster.leadership.is_leader() {
            return;
        }
        for failure in fresh {
            self.report(pod, &failure).await;
        }
    }

    async fn report(&self, pod: &Pod, failure: &Failure) {
        let node = pod
            .spec
            .as_ref()
            .and_then(|spec| spec.node_name.clone())
            .unwrap_or_default();
        let platform = self
            .cluster
            .nodes
            .store()
            .get(&kube::runtime::reflector::ObjectRef::new(&node))
            .map_or_else(
                || "platform unknown".to_owned(),
                |stored| NodePlatform::from_labels(&stored.labels_where(|_| true)).to_string(),
            );
        let inspected = inspected_digest(pod, &failure.container);
        let image = parse_reference(spec_image(pod, failure)).ok();
        let known = match (&image, inspected) {
            (Some(image), Some(digest)) => {
                match self.inspector.cached_platforms(image, &digest).await {
                    Some(platforms) => Known::Platforms {
                        digest,
                        platforms: platforms.as_ref().clone(),
                    },
                    None => Known::Digest(digest),
                }
            }
            _ => Known::Nothing,
        };
        let outcome = pod
            .annotations()
            .get(OUTCOME_ANNOTATION)
            .map(String::as_str);
        let finding = Finding {
            what: "exec format error",
            reason: REASON,
            action: "Run",
            message: describe(failure, &node, &platform, outcome, &known),
            policy: pod.labels().get(POLICY_LABEL).map(String::as_str),
            count: Metrics::exec_format_error,
        };
        report_finding(&self.notices, &self.metrics, &self.tally, pod, finding);
        if let Some(image) = image {
            let mut digests: Vec<&str> = failure.ran_digest().into_iter().collect();
            if let Known::Platforms { digest, .. } | Known::Digest(digest) = &known {
                digests.push(digest);
            }
            self.inspector.forget(&image, &digests).await;
        }
    }
}

/// Something found wrong with a pod, as [`report_finding`] reports it.
pub(super) struct Finding<'a> {
    /// What the log line calls it.
    pub what: &'static str,
    /// The Event's reason and action.
    pub reason: &'static str,
    pub action: &'static str,
    pub message: String,
    /// The policy whose status counts it, if any.
    pub policy: Option<&'a str>,
    /// The metric that counts it.
    pub count: fn(&Metrics),
}

/// Reports `finding` as each of the controller's findings is: logged, a Warning Event on the pod
/// and its controlling owner, one in its metric and one in its policy's status count.
pub(super) fn report_finding(
    notices: &Notices,
    metrics: &Metrics,
    tally: &Tally,
    pod: &Pod,
    finding: Finding<'_>,
) {
    let Finding {
        what,
        reason,
        action,
        message,
        policy,
        count,
    } = finding;
    tracing::warn!(pod = %pod.name_any(), namespace = ?pod.namespace(), %message, "{what}");
    super::reconcile::publish(
        notices,
        pod,
        &[Note {
            warning: true,
            reason,
            message,
        }],
        action,
    );
    count(metrics);
    if let Some(policy) = policy {
        tally.add(policy, 1);
    }
}
