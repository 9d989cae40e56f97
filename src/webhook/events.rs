//! Events on the policy for the webhook's denials and pins, rate-limited: at most one per policy
//! and reason per [`WINDOW`]; the ones held back are counted and named in the next one's note.
//! Request handlers only queue a notice (never wait for the apiserver); one task publishes. Dry
//! runs queue nothing. It owns the Event wording around the planner's message, not the decision.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::core::admission::AdmissionRequest;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use tokio::sync::mpsc;

use super::planner::{Decision, Index, Plan};
use crate::telemetry::Metrics;

/// At most one Event per policy and reason in this window.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Notices waiting for the publisher; beyond this, new ones are dropped (and logged at debug).
const QUEUE: usize = 256;

/// Kubernetes caps an Event's note at 1 kB.
const MAX_NOTE: usize = 1024;

/// The name admission Events are reported under.
pub const REPORTING_CONTROLLER: &str = "ocifit-webhook";

/// One Event to publish, before rate limiting.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    /// The policy it is about.
    pub policy: ObjectReference,
    /// Normal (a pin) or Warning (a denial).
    pub warning: bool,
    /// The Event reason (the planner's decision or deny reason).
    pub reason: &'static str,
    /// What happened to which pod.
    pub note: String,
}

/// The Event `plan` deserves, if any: a denial under a known policy or a pin, not in a dry run.
pub fn notice(index: &Index, request: &AdmissionRequest<Pod>, plan: &Plan) -> Option<Notice> {
    if request.dry_run {
        return None;
    }
    let pod = request.object.as_ref()?;
    let who = pod_name(request, pod);
    match plan {
        Plan::Deny { reason, message } => Some(Notice {
            policy: index.policy_for(pod)?.object_ref(&()),
            warning: true,
            reason: reason.as_str(),
            note: format!("denied pod {who}: {message}"),
        }),
        Plan::Patch {
            decision: Decision::Pinned,
            event,
            annotations,
            ..
        } => {
            let name = annotations.get(crate::api::pod::DECISION_POLICY)?;
            Some(Notice {
                policy: index.policy(name)?.object_ref(&()),
                warning: false,
                reason: Decision::Pinned.as_str(),
                note: format!("pinned pod {who}: {event}"),
            })
        }
        _ => None,
    }
}

/// `namespace/name`, or `namespace/generateName*` for a pod named by the apiserver later.
fn pod_name(request: &AdmissionRequest<Pod>, pod: &Pod) -> String {
    let namespace = request
        .namespace
        .as_deref()
        .or(pod.metadata.namespace.as_deref())
        .unwrap_or("default");
    match (
        pod.metadata.name.as_deref(),
        pod.metadata.generate_name.as_deref(),
    ) {
        (Some(name), _) if !name.is_empty() => format!("{namespace}/{name}"),
        (_, Some(prefix)) => format!("{namespace}/{prefix}* (generateName)"),
        _ if !request.name.is_empty() => format!("{namespace}/{}", request.name),
        _ => format!("{namespace}/(unnamed)"),
    }
}

/// Where request handlers queue notices.
#[derive(Clone, Debug)]
pub struct Notices(mpsc::Sender<Notice>);

impl Notices {
    /// Queues `notice` without waiting; a full queue drops it (Events are best effort).
    pub fn send(&self, notice: Notice) {
        if self.0.try_send(notice).is_err() {
            tracing::debug!("admission event queue full; event dropped");
        }
    }
}

/// The queue and the task that publishes from it (as `identity`) until every sender is gone.
pub fn publisher(
    client: Client,
    identity: String,
    metrics: Arc<Metrics>,
) -> (Notices, impl Future<Output = ()> + Send + 'static) {
    let (sender, mut queue) = mpsc::channel::<Notice>(QUEUE);
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: REPORTING_CONTROLLER.to_owned(),
            instance: Some(identity),
        },
    );
    let task = async move {
        let mut throttle = Throttle::default();
        while let Some(notice) = queue.recv().await {
            let Some(held) = throttle.allow(&notice, Instant::now()) else {
                continue;
            };
            let mut note = notice.note;
            if held > 0 {
                note.push_str(&format!(
                    " ({held} more like it in the last {}s)",
                    WINDOW.as_secs()
                ));
            }
            let event = Event {
                type_: if notice.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: notice.reason.to_owned(),
                note: Some(cap(note)),
                action: "Admit".to_owned(),
                secondary: None,
            };
            match recorder.publish(&event, &notice.policy).await {
                Ok(()) => metrics.event_published(),
                Err(err) => tracing::warn!(error = %err, "failed to publish an admission event"),
            }
        }
    };
    (Notices(sender), task)
}

fn cap(mut note: String) -> String {
    if note.len() > MAX_NOTE {
        let mut cut = MAX_NOTE - 3;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    note
}

/// Per policy and reason: when the last Event went out and how many were held back since.
#[derive(Debug, Default)]
struct Throttle(HashMap<(String, &'static str), (Instant, u64)>);

impl Throttle {
    /// `Some(held back since the last one)` when `notice` may be published at `now`.
    fn allow(&mut self, notice: &Notice, now: Instant) -> Option<u64> {
        // Forget quiet keys now and then, so the map stays as small as the set of live ones.
        if self.0.len() > 1024 {
            self.0
                .retain(|_, (last, _)| now.duration_since(*last) < WINDOW);
        }
        let key = (
            notice.policy.name.clone().unwrap_or_default(),
            notice.reason,
        );
        match self.0.get_mut(&key) {
            Some((last, held)) if now.duration_since(*last) < WINDOW => {
                *held += 1;
                None
            }
            Some((last, held)) => {
                *last = now;
                Some(std::mem::take(held))
            }
            None => {
                self.0.insert(key, (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests;
