//! The Event reporter: Kubernetes Events on objects, their notes capped as Kubernetes requires,
//! each published one counted. [`EventReporter::publish`] waits for the apiserver; [`queue`]
//! hands request handlers and per-pod reconcilers [`Notices`] that never wait, publishing from
//! one task, optionally one Event per object and reason per window; a full queue, or a
//! namespace past its share (a bounded bucket per namespace: [`Quota`]), drops and counts. A
//! reporter starts a fresh recorder after [`SERIES_MEMORY`] Events, as client-go's correlator
//! does, because kube's recorder sweeps all it remembers on every publish. Decides nothing
//! about what deserves an Event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt, future, stream};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

use crate::telemetry::Metrics;

/// Kubernetes caps an Event's note at 1 kB.
const MAX_NOTE: usize = 1024;

/// Notices waiting for the publisher; beyond this, new ones are dropped (and counted).
const QUEUE: usize = 1024;

/// Notices the queue's task publishes at once: one at a time, a burst of released pods would
/// wait on the apiserver's round trips and overflow the queue.
const IN_FLIGHT: usize = 8;

/// Events a reporter's recorder remembers (for series) before a fresh one replaces it.
pub(super) const SERIES_MEMORY: usize = 4096;

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
    recorder: Arc<Mutex<Remembering>>,
    metrics: Arc<Metrics>,
}

/// The recorder in use and how many Events it has published.
struct Remembering {
    client: Client,
    reporter: Reporter,
    recorder: Recorder,
    published: usize,
    /// How many recorders came before this one.
    generation: u64,
}

impl Remembering {
    /// The recorder for the next Event: a fresh one once this one has published
    /// [`SERIES_MEMORY`].
    fn next(&mut self) -> Recorder {
        if self.published == SERIES_MEMORY {
            self.recorder = Recorder::new(self.client.clone(), self.reporter.clone());
            self.published = 0;
            self.generation += 1;
        }
        self.published += 1;
        self.recorder.clone()
    }
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
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance: Some(identity),
        };
        let recorder = Recorder::new(client.clone(), reporter.clone());
        EventReporter {
            recorder: Arc::new(Mutex::new(Remembering {
                client,
                reporter,
                recorder,
                published: 0,
                generation: 0,
            })),
            metrics,
        }
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
        // Only counting and swapping happen under the lock; the publish runs outside it.
        let recorder = self
            .recorder
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next();
        match recorder.publish(&event, &notice.on).await {
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

/// Where request handlers and per-pod reconcilers queue notices (see [`queue`]).
#[derive(Clone, Debug)]
pub struct Notices {
    sender: mpsc::Sender<Notice>,
    metrics: Arc<Metrics>,
    quota: Arc<Mutex<Quota>>,
}

impl Notices {
    /// Queues `notice`, caused by its object's namespace, without waiting (see
    /// [`Notices::send_caused_by`]).
    pub fn send(&self, notice: Notice) {
        let namespace = notice.on.namespace.clone().unwrap_or_default();
        self.send_caused_by(&namespace, notice);
    }

    /// Queues `notice`, caused by something in `namespace` (the pod a policy's Event names),
    /// without waiting; a namespace past its share (`quota`) or a full queue drops it, counted
    /// (Events are best effort).
    pub fn send_caused_by(&self, namespace: &str, notice: Notice) {
        let allowed = self
            .quota
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .allow(namespace, Instant::now());
        if !allowed {
            self.metrics.event_over_quota();
            tracing::debug!(
                namespace,
                "namespace past its share of Events; event dropped"
            );
            return;
        }
        if self.sender.try_send(notice).is_err() {
            self.metrics.event_dropped();
            tracing::debug!("event queue full; event dropped");
        }
    }
}

/// The queue and the task that publishes from it through `reporter`, `IN_FLIGHT` at once, at
/// most one Event per object and reason per `window` (every one with a zero window). The task
/// ends when every [`Notices`] is dropped.
pub fn queue(reporter: EventReporter, window: Duration) -> (Notices, BoxFuture<'static, ()>) {
    let (sender, mut queue) = mpsc::channel::<Notice>(QUEUE);
    let notices = Notices {
        sender,
        metrics: Arc::clone(&reporter.metrics),
        quota: Arc::new(Mutex::new(Quota::new(Instant::now()))),
    };
    let mut throttle = Throttle::new(window);
    let task = stream::poll_fn(move |cx| queue.poll_recv(cx))
        .filter_map(move |mut notice| {
            let allowed = throttle.allow(&notice, Instant::now()).map(|held| {
                if held > 0 {
                    notice.note.push_str(&format!(
                        " ({held} more like it in the last {}s)",
                        window.as_secs()
                    ));
                }
                notice
            });
            future::ready(allowed)
        })
        .for_each_concurrent(IN_FLIGHT, move |notice| {
            let reporter = reporter.clone();
            async move { reporter.publish(notice).await }
        })
        .boxed();
    (notices, task)
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
        if self.window.is_zero() {
            return Some(0);
        }
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

/// Events one namespace may queue at once: a quarter of the queue, so a Job of a few hundred pods
/// released together gets each its Event and three namespaces flooding at once still leave room.
const BURST: f64 = 256.0;
/// Events a second a namespace's bucket refills with, past the burst.
const RATE: f64 = 10.0;
/// Namespaces with a bucket of their own: each costs its name and two numbers.
const NAMESPACES: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
}

impl Bucket {
    fn full(now: Instant) -> Bucket {
        Bucket {
            tokens: BURST,
            refilled: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * RATE).min(BURST);
        self.refilled = self.refilled.max(now);
    }

    fn take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// The buckets of one queue.
#[derive(Debug)]
struct Quota {
    buckets: HashMap<String, Bucket>,
    /// Shared by namespaces that found no room for a bucket of their own.
    overflow: Bucket,
}

impl Quota {
    fn new(now: Instant) -> Quota {
        Quota {
            buckets: HashMap::new(),
            overflow: Bucket::full(now),
        }
    }

    /// Whether `namespace` (empty for a cluster-scoped cause) may queue one more Event at `now`.
    fn allow(&mut self, namespace: &str, now: Instant) -> bool {
        if let Some(bucket) = self.buckets.get_mut(namespace) {
            return bucket.take(now);
        }
        if self.buckets.len() >= NAMESPACES {
            self.buckets.retain(|_, bucket| {
                bucket.refill(now);
                bucket.tokens < BURST
            });
        }
        if self.buckets.len() >= NAMESPACES {
            return self.overflow.take(now);
        }
        let mut bucket = Bucket::full(now);
        let allowed = bucket.take(now);
        self.buckets.insert(namespace.to_owned(), bucket);
        allowed
    }

    #[cfg(test)]
    fn namespaces(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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

    #[tokio::test]
    async fn a_recorder_publishes_at_most_series_memory_events_before_a_fresh_one_replaces_it() {
        let client =
            Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        let reporter = Reporter {
            controller: "ocifit-test".into(),
            instance: None,
        };
        let mut remembering = Remembering {
            recorder: Recorder::new(client.clone(), reporter.clone()),
            client,
            reporter,
            published: 0,
            generation: 0,
        };
        for _ in 0..SERIES_MEMORY {
            remembering.next();
        }
        assert_eq!(
            remembering.generation, 0,
            "the first recorder takes {SERIES_MEMORY}"
        );
        remembering.next();
        assert_eq!(
            remembering.generation, 1,
            "the next Event goes to a fresh recorder"
        );
        for _ in 1..SERIES_MEMORY {
            remembering.next();
        }
        assert_eq!(remembering.generation, 1);
        remembering.next();
        assert_eq!(remembering.generation, 2);
    }

    #[test]
    fn a_zero_window_lets_every_notice_through() {
        let mut throttle = Throttle::new(Duration::ZERO);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(throttle.allow(&notice("a", "Placed"), t0), Some(0));
        }
    }

    /// One namespace sending more than the queue holds fills only its share: another
    /// namespace's Event is still queued, and the flood's overflow is counted.
    #[test]
    fn a_namespace_flooding_the_queue_leaves_room_for_another_namespaces_event() {
        let (sender, mut queued) = mpsc::channel(QUEUE);
        let metrics = Metrics::new(None);
        let notices = Notices {
            sender,
            metrics: Arc::clone(&metrics),
            quota: Arc::new(Mutex::new(Quota::new(Instant::now()))),
        };
        let on = |namespace: &str| Notice {
            on: ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some(namespace.into()),
                name: Some("p".into()),
                ..ObjectReference::default()
            },
            ..notice("p", "Placed")
        };
        for _ in 0..2 * QUEUE {
            notices.send(on("flood"));
        }
        notices.send(on("quiet"));
        let mut quiet = 0;
        while let Ok(notice) = queued.try_recv() {
            quiet += usize::from(notice.on.namespace.as_deref() == Some("quiet"));
        }
        assert_eq!(quiet, 1, "the quiet namespace's Event was dropped");
        assert!(metrics.events_over_quota() >= (2 * QUEUE - BURST as usize) as u64);
    }

    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        let note = "é".repeat(MAX_NOTE);
        let capped = cap(note);
        assert!(capped.len() <= MAX_NOTE, "{}", capped.len());
        assert!(capped.ends_with("..."));
        assert_eq!(cap("short".to_owned()), "short");
    }

    #[test]
    fn a_namespace_gets_its_burst_then_its_rate_and_others_their_own() {
        let start = Instant::now();
        let mut quota = Quota::new(start);
        let burst = (0..1000).filter(|_| quota.allow("flood", start)).count();
        assert_eq!(burst, BURST as usize);
        assert!(quota.allow("quiet", start), "another namespace has its own");
        let later = start + Duration::from_secs(5);
        let refilled = (0..1000).filter(|_| quota.allow("flood", later)).count();
        assert_eq!(refilled, (5.0 * RATE) as usize);
    }

    /// A namespace per Event (as many namespaces' pods, or a forger's names) keeps at most
    /// [`NAMESPACES`] buckets, and the ones that spent their burst keep theirs.
    #[test]
    fn the_buckets_stay_bounded_however_many_namespaces_send() {
        let start = Instant::now();
        let mut quota = Quota::new(start);
        for _ in 0..BURST as usize {
            assert!(quota.allow("flood", start));
        }
        for n in 0..10 * NAMESPACES {
            quota.allow(&format!("ns-{n}"), start);
            assert!(quota.namespaces() <= NAMESPACES, "{}", quota.namespaces());
        }
        assert!(
            !quota.allow("flood", start),
            "a spent bucket is not forgotten to make room"
        );
    }
}
