//! Leader election on a Lease (kube-lease-manager): only the leader reconciles and writes; every
//! replica keeps its watches (the webhook's caches) warm. Leadership is published on a watch
//! channel; the Lease is released on shutdown, after in-flight reconciles finished, and followers
//! watch it, so the next leader takes over without waiting for the lease to expire.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::telemetry::Metrics;

#[derive(Clone, Debug)]
pub struct LeaseSettings {
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace (the operator's).
    pub namespace: String,
    /// This replica's identity (its pod name).
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub duration: Duration,
    /// How long before expiry the holder renews.
    pub grace: Duration,
}

/// The Lease could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("failed to set up the leader-election lease {namespace}/{name}")]
pub struct LeaseError {
    namespace: String,
    name: String,
    #[source]
    source: kube_lease_manager::LeaseManagerError,
}

impl LeaseError {
    /// Whether it failed because the Lease's namespace does not exist (the apiserver answered
    /// 404 for the namespace).
    pub fn namespace_missing(&self) -> bool {
        matches!(
            &self.source,
            kube_lease_manager::LeaseManagerError::KubeError(kube::Error::Api(status))
                if status.code == 404
                    && status.details.as_ref().is_some_and(|d| d.kind == "namespaces")
        )
    }

    /// Whether it failed because the Lease does not exist and this replica may not create it
    /// (the Role grants no `create`: the install creates the Lease).
    pub fn lease_missing(&self) -> bool {
        matches!(
            &self.source,
            kube_lease_manager::LeaseManagerError::KubeError(kube::Error::Api(status))
                if status.code == 403
        )
    }
}

/// Whether this replica leads, now and as it changes. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Leadership {
    state: watch::Receiver<bool>,
}

impl Leadership {
    /// A replica that always leads (leader election off).
    pub fn always() -> (Leadership, LeaderTask) {
        let (tx, state) = watch::channel(true);
        (Leadership { state }, LeaderTask::Fixed(tx))
    }

    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        *self.state.borrow()
    }

    /// Whether this replica leads, as a channel that changes with it (for rooms that cannot
    /// name this type).
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.state.clone()
    }

    /// Yields once each time this replica becomes the leader (at once if it already is); ends
    /// when the lease task is gone.
    pub fn gained(&self) -> impl Stream<Item = ()> + Send + 'static {
        futures_util::stream::unfold(
            (self.state.clone(), true),
            |(mut state, first)| async move {
                if first && *state.borrow_and_update() {
                    return Some(((), (state, false)));
                }
                loop {
                    state.changed().await.ok()?;
                    if *state.borrow_and_update() {
                        return Some(((), (state, false)));
                    }
                }
            },
        )
    }
}

/// The task keeping the lease; [`LeaderTask::release`] gives it up.
pub enum LeaderTask {
    /// Leader election is off.
    Fixed(watch::Sender<bool>),
    /// The lease loop and the way to stop it.
    Lease {
        stop: oneshot::Sender<()>,
        task: JoinHandle<()>,
    },
}

impl LeaderTask {
    /// Stops competing and releases the lease if held, so another replica takes over now.
    pub async fn release(self) {
        match self {
            LeaderTask::Fixed(tx) => {
                let _ = tx.send(false);
            }
            LeaderTask::Lease { stop, task } => {
                let _ = stop.send(());
                if let Err(err) = task.await {
                    tracing::warn!(error = %err, "the leader-election task ended abnormally");
                }
            }
        }
    }
}

/// Starts competing for the lease.
pub async fn elect(
    client: kube::Client,
    settings: LeaseSettings,
    metrics: std::sync::Arc<Metrics>,
) -> Result<(Leadership, LeaderTask), LeaseError> {
    let manager = build_manager(&client, &settings).await?;
    let (tx, state) = watch::channel(false);
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(keep(client, manager, tx, stopped, metrics, settings));
    Ok((Leadership { state }, LeaderTask::Lease { stop, task }))
}

/// A lease manager whose view of the Lease is read fresh from the apiserver.
async fn build_manager(
    client: &kube::Client,
    settings: &LeaseSettings,
) -> Result<LeaseManager, LeaseError> {
    LeaseManagerBuilder::new(client.clone(), settings.name.clone())
        .with_namespace(settings.namespace.clone())
        .with_identity(settings.identity.clone())
        .with_duration(settings.duration.as_secs().max(1))
        .with_grace(settings.grace.as_secs())
        .build()
        .await
        .map_err(|source| LeaseError {
            namespace: settings.namespace.clone(),
            name: settings.name.clone(),
            source,
        })
}

/// Updates of the Lease that leave it without a holder (a leader released it).
fn releases(
    client: kube::Client,
    settings: &LeaseSettings,
) -> impl Stream<Item = ()> + Send + 'static {
    let leases: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let by_name = watcher::Config::default().fields(&format!("metadata.name={}", settings.name));
    watcher(leases, by_name)
        .backoff(crate::process::watch_backoff())
        .applied_objects()
        .filter_map(|lease| {
            let released = lease.ok().is_some_and(|lease| {
                lease
                    .spec
                    .and_then(|spec| spec.holder_identity)
                    .is_none_or(|holder| holder.is_empty())
            });
            std::future::ready(released.then_some(()))
        })
}

async fn keep(
    client: kube::Client,
    mut manager: LeaseManager,
    tx: watch::Sender<bool>,
    mut stopped: oneshot::Receiver<()>,
    metrics: std::sync::Arc<Metrics>,
    settings: LeaseSettings,
) {
    // The lease manager sleeps until the lease it saw expires; watching the Lease lets a follower
    // take over as soon as a stopping leader releases it.
    let mut released = std::pin::pin!(releases(client.clone(), &settings));
    loop {
        let leading = *tx.borrow();
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            Some(()) = released.next(), if !leading => {
                match build_manager(&client, &settings).await {
                    Ok(fresh) => manager = fresh,
                    Err(err) => tracing::warn!(error = %err, "failed to read the released lease"),
                }
            }
            changed = manager.changed() => match changed {
                Ok(leading) => {
                    tracing::info!(identity = %settings.identity, leading, "leadership changed");
                    metrics.set_leader(leading);
                    let _ = tx.send(leading);
                }
                Err(err) => {
                    // Without a renewed lease this replica cannot know it still leads.
                    tracing::warn!(error = %err, "failed to renew or acquire the lease");
                    metrics.set_leader(false);
                    let _ = tx.send(false);
                    tokio::time::sleep(settings.grace.max(Duration::from_secs(1))).await;
                }
            }
        }
    }
    let _ = tx.send(false);
    metrics.set_leader(false);
    if let Err(err) = manager.release().await {
        tracing::warn!(error = %err, "failed to release the lease");
    } else {
        tracing::info!(identity = %settings.identity, "released the lease");
    }
}
