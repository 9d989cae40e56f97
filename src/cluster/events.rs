//! The Event reporter: Kubernetes Events on objects, their notes capped as Kubernetes requires,
//! each published one counted. [`EventReporter::publish`] waits for the apiserver (reconcilers
//! call it); [`queue`] hands request handlers a [`Notices`] that never waits, publishing from
//! one task at most one Event per object and reason per window, the next one saying how many
//! were held back. Decides nothing about what deserves an Event.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

use crate::telemetry::Metrics;

/// Kubernetes caps an Event's note at 1 kB.
const MAX_NOTE: usize = 1024;

/// Notices waiting for the publisher; beyond this, new ones are dropped (and logged at debug).
const QUEUE: usize = 256;

/// One Event to publish.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    /// The object it is about.
    pub on: ObjectReference,
    /// Warning (something to look at) or Normal.
    pub warning: bool,
    /// The Event reason: a name from the reporting feature's own vocabulary.
    pub reason: &'static str,
    /// What the reporter did (`Reconcile`, `Admit`).
    pub action: &'static str,
    /// What happened, for people (capped to 1 kB when published).
    pub note: String,
}

/// Publishes Events as one reporting controller and replica.
#[derive(Clone)]
pub struct EventReporter {
    recorder: Recorder,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for EventReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventReporter").finish_non_exhaustive()
    }
}

impl EventReporter {
    /// Events reported by `controller` (e.g. `ocifit-controller`) from replica `identity`.
    pub fn new(
        client: Client,
        controller: &str,
        identity: String,
        metrics: Arc<Metrics>,
    ) -> EventReporter {
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: controller.to_owned(),
                instance: Some(identity),
            },
        );
        EventReporter { recorder, metrics }
    }

    /// Publishes `notice`; a failure is logged, never returned (Events are best effort).
    pub async fn publish(&self, notice: Notice) {
        self.publish_with(notice, None).await;
    }

    /// As [`EventReporter::publish`], naming `related`, the object the reporter acted on: Events
    /// on one object with one reason and action stay apart per related object (the recorder
    /// folds repeats into a series that keeps its first note).
    pub async fn publish_related(&self, notice: Notice, related: ObjectReference) {
        self.publish_with(notice, Some(related)).await;
    }

    async fn publish_with(&self, notice: Notice, related: Option<ObjectReference>) {
        let event = Event {
            type_: if notice.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: notice.reason.to_owned(),
            note: Some(cap(notice.note)),
            action: notice.action.to_owned(),
            secondary: related,
        };
        match self.recorder.publish(&event, &notice.on).await {
            Ok(()) => self.metrics.event_published(),
            Err(err) => tracing::warn!(
                object = ?notice.on.name,
                reason = notice.reason,
                error = %err,
                "failed to publish an event"
            ),
        }
    }
}

/// Where request handlers queue notices (see [`queue`]).
#[derive(Clone, Debug)]
pub struct Notices(mpsc::Sender<Notice>);

impl Notices {
    /// Queues `notice` without waiting; a full queue drops it (Events are best effort).
    pub fn send(&self, notice: Notice) {
        if self.0.try_send(notice).is_err() {
            tracing::debug!("event queue full; event dropped");
        }
    }
}

/// The queue and the task that publishes from it through `reporter`, at most one Event per
/// object and reason per `window`. The task ends when every [`Notices`] is dropped.
pub fn queue(reporter: EventReporter, window: Duration) -> (Notices, BoxFuture<'static, ()>) {
    let (sender, mut queue) = mpsc::channel::<Notice>(QUEUE);
    let task = async move {
        let mut throttle = Throttle::new(window);
        while let Some(mut notice) = queue.recv().await {
            let Some(held) = throttle.allow(&notice, Instant::now()) else {
                continue;
            };
            if held > 0 {
                notice.note.push_str(&format!(
                    " ({held} more like it in the last {}s)",
                    window.as_secs()
                ));
            }
            reporter.publish(notice).await;
        }
    }
    .boxed();
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

/// Per object and reason: when the last Event went out and how many were held back since.
#[derive(Debug)]
struct Throttle {
    window: Duration,
    last: HashMap<(String, &'static str), (Instant, u64)>,
}

impl Throttle {
    fn new(window: Duration) -> Throttle {
        Throttle {
            window,
            last: HashMap::new(),
        }
    }

    /// `Some(held back since the last one)` when `notice` may be published at `now`.
    fn allow(&mut self, notice: &Notice, now: Instant) -> Option<u64> {
        // Forget quiet keys now and then, so the map stays as small as the set of live ones.
        if self.last.len() > 1024 {
            let window = self.window;
            self.last
                .retain(|_, (last, _)| now.duration_since(*last) < window);
        }
        let object = format!(
            "{}/{}/{}",
            notice.on.kind.as_deref().unwrap_or_default(),
            notice.on.namespace.as_deref().unwrap_or_default(),
            notice.on.name.as_deref().unwrap_or_default()
        );
        match self.last.get_mut(&(object.clone(), notice.reason)) {
            Some((last, held)) if now.duration_since(*last) < self.window => {
                *held += 1;
                None
            }
            Some((last, held)) => {
                *last = now;
                Some(std::mem::take(held))
            }
            None => {
                self.last.insert((object, notice.reason), (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(name: &str, reason: &'static str) -> Notice {
        Notice {
            on: ObjectReference {
                kind: Some("ImageSelectionPolicy".into()),
                name: Some(name.into()),
                ..ObjectReference::default()
            },
            warning: true,
            reason,
            action: "Admit",
            note: String::new(),
        }
    }

    #[test]
    fn one_event_per_object_and_reason_per_window_counting_the_held_back() {
        let window = Duration::from_secs(60);
        let mut throttle = Throttle::new(window);
        let t0 = Instant::now();
        assert_eq!(throttle.allow(&notice("a", "Unpinned"), t0), Some(0));
        assert_eq!(throttle.allow(&notice("a", "Unpinned"), t0), None);
        assert_eq!(throttle.allow(&notice("a", "Unpinned"), t0), None);
        assert_eq!(throttle.allow(&notice("a", "NoMatch"), t0), Some(0));
        assert_eq!(throttle.allow(&notice("b", "Unpinned"), t0), Some(0));
        assert_eq!(
            throttle.allow(&notice("a", "Unpinned"), t0 + window),
            Some(2)
        );
    }

    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        let note = "é".repeat(MAX_NOTE);
        let capped = cap(note);
        assert!(capped.len() <= MAX_NOTE, "{}", capped.len());
        assert!(capped.ends_with("..."));
        assert_eq!(cap("short".to_owned()), "short");
    }
}
