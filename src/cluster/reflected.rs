//! One watch, one store, and everyone who wants to hear of its changes: the task driving a watch
//! applies each event to the reflector store, then tells every subscriber what changed, so the
//! controller's triggers and the admission indexes wake on the change itself (no timer) and
//! share the store's objects instead of copying them.
//!
//! kube-runtime's own shared reflector (`store_shared` + `subscribe`) hands subscribers applied
//! objects only; ours also says when an object was deleted and when a (re)list finished, which
//! an index needs to stay exact after a gap in the watch.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::runtime::Controller;
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::{mpsc, watch};

use crate::telemetry::error_chain;

/// What happened to a store, as its subscribers hear it.
pub enum Change<K> {
    /// An object was added or modified (the store's own `Arc`); after a (re)list, every listed
    /// object once.
    Applied(Arc<K>),
    /// An object was deleted (as last seen).
    Deleted(Arc<K>),
    /// A (re)list finished: the store holds exactly what was listed. Objects deleted while the
    /// watch was down were never announced; compare with the store.
    Synced,
}

impl<K> Clone for Change<K> {
    fn clone(&self) -> Self {
        match self {
            Change::Applied(object) => Change::Applied(Arc::clone(object)),
            Change::Deleted(object) => Change::Deleted(Arc::clone(object)),
            Change::Synced => Change::Synced,
        }
    }
}

impl<K> fmt::Debug for Change<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Change::Applied(_) => "Applied",
            Change::Deleted(_) => "Deleted",
            Change::Synced => "Synced",
        })
    }
}

/// A store kept by one watch, and its subscribers. Cheap to clone.
pub struct Reflected<K>
where
    K: Resource + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    subscribers: Arc<Mutex<Vec<mpsc::UnboundedSender<Change<K>>>>>,
    // Our own flag: kube's `Store::wait_until_ready` wakes only the last of several waiters.
    synced: watch::Receiver<bool>,
}

impl<K> Clone for Reflected<K>
where
    K: Resource + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Reflected {
            store: self.store.clone(),
            subscribers: Arc::clone(&self.subscribers),
            synced: self.synced.clone(),
        }
    }
}

impl<K> fmt::Debug for Reflected<K>
where
    K: Resource + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reflected").finish_non_exhaustive()
    }
}

impl<K> Reflected<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    /// The store (read it any time; [`Reflected::synced`] says when it holds a first list).
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Whether the store holds a first list.
    pub fn synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Resolves once the store holds a first list (never, if the watch task is gone first).
    pub async fn wait_synced(&self) {
        let mut synced = self.synced.clone();
        if synced.wait_for(|synced| *synced).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Every change from now on. A subscriber that comes after the first list starts with
    /// [`Change::Synced`], so it reads the store once. Each subscriber has its own queue: one
    /// that stops reading holds only `Arc`s, and is dropped with its stream.
    pub fn subscribe(&self) -> impl Stream<Item = Change<K>> + Send + 'static {
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let mut subscribers = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.synced() {
            let _ = sender.send(Change::Synced);
        }
        subscribers.push(sender);
        futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
    }

    /// Objects first seen or whose spec changed (a new `metadata.generation`): status-only
    /// changes, a controller's own status writes included, reconcile nothing.
    pub fn spec_changes(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        spec_changes(self.subscribe())
    }

    fn publish(&self, change: Change<K>) {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|subscriber| subscriber.send(change.clone()).is_ok());
    }
}

/// The applied objects of `changes` whose generation differs from the last one seen for their
/// namespace and name (the generation moves on spec changes only).
fn spec_changes<K: Resource + Send + Sync + 'static>(
    changes: impl Stream<Item = Change<K>> + Send + 'static,
) -> impl Stream<Item = Arc<K>> + Send + 'static {
    let mut generations: HashMap<(Option<String>, Option<String>), Option<i64>> = HashMap::new();
    changes.filter_map(move |change| {
        let key = |object: &K| (object.meta().namespace.clone(), object.meta().name.clone());
        let changed = match change {
            Change::Applied(object) => {
                let generation = object.meta().generation;
                (generations.insert(key(&object), generation) != Some(generation)).then_some(object)
            }
            Change::Deleted(object) => {
                generations.remove(&key(&object));
                None
            }
            Change::Synced => None,
        };
        std::future::ready(changed)
    })
}

/// The store fed by `events` and the task that drives them (it runs as long as the watch: a
/// watch with backoff never ends, so its end is a failure for the supervisor to report). `what`
/// names the watch in logs.
pub fn reflect<K, S>(events: S, what: &'static str) -> (Reflected<K>, BoxFuture<'static, ()>)
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let mut writer = Writer::<K>::default();
    let (synced, synced_flag) = watch::channel(false);
    let reflected = Reflected {
        store: writer.as_reader(),
        subscribers: Arc::default(),
        synced: synced_flag,
    };
    let hub = reflected.clone();
    let task = async move {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(err) => {
                    tracing::warn!(watch = what, error = %err, "watch failed; retrying with backoff");
                    continue;
                }
            };
            writer.apply_watcher_event(&event);
            match event {
                watcher::Event::Apply(object) => {
                    let stored = hub.store.get(&ObjectRef::from_obj(&object));
                    hub.publish(Change::Applied(
                        stored.unwrap_or_else(|| Arc::new(object)),
                    ));
                }
                watcher::Event::Delete(object) => hub.publish(Change::Deleted(Arc::new(object))),
                watcher::Event::InitDone => {
                    synced.send_replace(true);
                    let listed = hub.store.state();
                    tracing::debug!(watch = what, objects = listed.len(), "watch listed");
                    for object in listed {
                        hub.publish(Change::Applied(object));
                    }
                    hub.publish(Change::Synced);
                }
                watcher::Event::Init | watcher::Event::InitApply(_) => {}
            }
        }
    }
    .boxed();
    (reflected, task)
}

/// How long `pod` has been held: since its creation (zero without a creation time, or one
/// ahead of this clock).
pub(crate) fn held_for(pod: &Pod) -> Duration {
    let now = Timestamp::now();
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |time| time.0);
    now.duration_since(created)
        .try_into()
        .unwrap_or(Duration::ZERO)
}

/// A feature's release of its held pods: a kube `Controller` over the pods `held` picks, all of
/// them again on each `again`, until `shutdown`; the controller's own errors logged as `what`.
pub(crate) fn held_pods_controller<C, R, F, E, P>(
    pods: &Reflected<Pod>,
    held: fn(&Pod) -> bool,
    again: impl Stream<Item = ()> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    (reconcile, error_policy, context): (R, P, Arc<C>),
    (concurrency, what): (u16, &'static str),
) -> BoxFuture<'static, ()>
where
    C: Send + Sync + 'static,
    R: FnMut(Arc<Pod>, Arc<C>) -> F + Send + 'static,
    F: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
    P: Fn(Arc<Pod>, &E, Arc<C>) -> Action + Send + Sync + 'static,
{
    let picked = pods.subscribe().filter_map(move |change| {
        std::future::ready(match change {
            Change::Applied(pod) if held(&pod) => Some(pod),
            _ => None,
        })
    });
    Controller::for_shared_stream(picked, pods.store())
        .with_config(Config::default().concurrency(concurrency))
        .reconcile_all_on(again)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(move |result| {
            if let Err(err) = result {
                tracing::debug!(error = %error_chain(&err), "{what}");
            }
            std::future::ready(())
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn map(name: &str, value: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            data: Some([("k".to_owned(), value.to_owned())].into()),
            ..ConfigMap::default()
        }
    }

    fn names(changes: &[Change<ConfigMap>]) -> Vec<String> {
        changes
            .iter()
            .map(|change| match change {
                Change::Applied(o) => format!("+{}", o.metadata.name.as_deref().unwrap_or("")),
                Change::Deleted(o) => format!("-{}", o.metadata.name.as_deref().unwrap_or("")),
                Change::Synced => "synced".to_owned(),
            })
            .collect()
    }

    #[tokio::test]
    async fn subscribers_hear_the_list_then_each_change_and_share_the_stores_objects() {
        let events = futures_util::stream::iter([
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(map("a", "1"))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(map("b", "1"))),
            Err(watcher::Error::NoResourceVersion),
            Ok(watcher::Event::Delete(map("a", "1"))),
        ]);
        let (reflected, task) = reflect(events, "test");
        let changes = reflected.subscribe();
        task.await;
        let seen: Vec<Change<ConfigMap>> = changes.take(4).collect().await;
        assert_eq!(names(&seen), ["+a", "synced", "+b", "-a"]);
        let stored = reflected
            .store()
            .get(&ObjectRef::new("b").within("ns"))
            .expect("b is stored");
        let Change::Applied(heard) = &seen[2] else {
            panic!("b was applied");
        };
        assert!(Arc::ptr_eq(&stored, heard), "the same object, not a copy");
        assert!(reflected.synced());
    }

    fn generation(mut object: ConfigMap, generation: i64) -> Arc<ConfigMap> {
        object.metadata.generation = Some(generation);
        Arc::new(object)
    }

    #[tokio::test]
    async fn spec_changes_pass_new_generations_only_and_forget_deleted_objects() {
        let changes = futures_util::stream::iter([
            Change::Applied(generation(map("a", "1"), 1)),
            Change::Synced,
            // A status write: same generation.
            Change::Applied(generation(map("a", "1"), 1)),
            Change::Applied(generation(map("a", "2"), 2)),
            Change::Deleted(generation(map("a", "2"), 2)),
            // Recreated with the generation the deleted one had: a new object all the same.
            Change::Applied(generation(map("a", "3"), 2)),
        ]);
        let passed: Vec<Arc<ConfigMap>> = spec_changes(changes).collect().await;
        let values: Vec<&str> = passed
            .iter()
            .map(|o| {
                o.data
                    .as_ref()
                    .and_then(|d| d.get("k"))
                    .map_or("", String::as_str)
            })
            .collect();
        assert_eq!(values, ["1", "2", "3"]);
    }

    #[tokio::test]
    async fn a_late_subscriber_starts_by_reading_the_store() {
        let events =
            futures_util::stream::iter([Ok(watcher::Event::Init), Ok(watcher::Event::InitDone)]);
        let (reflected, task) = reflect::<ConfigMap, _>(events, "test");
        task.await;
        let first: Vec<Change<ConfigMap>> = reflected.subscribe().take(1).collect().await;
        assert_eq!(names(&first), ["synced"]);
    }

    #[test]
    fn a_pod_is_held_since_its_creation_and_never_for_less_than_nothing() {
        let created = |seconds_ago: i64| -> Pod {
            let time = Timestamp::now()
                .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(seconds_ago))
                .unwrap();
            let mut pod = Pod::default();
            pod.metadata.creation_timestamp = Some(Time(time));
            pod
        };
        let waited = held_for(&created(90));
        assert!(waited >= Duration::from_secs(90) && waited < Duration::from_secs(120));
        assert_eq!(
            held_for(&created(-60)),
            Duration::ZERO,
            "created ahead of this clock"
        );
        assert_eq!(
            held_for(&Pod::default()),
            Duration::ZERO,
            "no creation time"
        );
    }
}
