//! The cache's objects on the apiserver: whether one of their names is taken by an object the
//! cache does not own, and applying one (putting back what someone changed, with an Event).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::{ArtifactCache, FIELD_MANAGER};
use crate::artifact_cache::desired::{self, Desired};
use crate::artifact_cache::owned::Trimmed;
use crate::artifact_cache::owned::{Ours, REASON, ours, restored};
use crate::artifact_cache::secret;
use crate::cluster::Reflected;
use crate::cluster::{EventReporter, Notice};

/// A reconcile failed against the apiserver (what the cache's objects say is status, not this).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("failed to make the ArtifactCache's objects")]
    Desired(#[from] desired::DesiredError),
    #[error("failed to generate the ArtifactCache's credentials")]
    Credentials(#[from] secret::SecretError),
    #[error("failed to read {what} of ArtifactCache {namespace}/{name}")]
    Read {
        what: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to apply {what} of ArtifactCache {namespace}/{name}")]
    Apply {
        what: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The first of the cache's objects that exists and is not owned by the cache (`its Service
/// ns/name`), read by metadata only.
pub(super) async fn conflict(
    client: &Client,
    cache: &ArtifactCache,
    desired: &Desired,
) -> Result<Option<String>, Error> {
    let checks = [
        foreign::<Deployment>(client, cache, "its Deployment", &desired.deployment).await?,
        foreign::<Service>(client, cache, "its Service", &desired.service).await?,
        foreign::<NetworkPolicy>(client, cache, "its NetworkPolicy", &desired.network_policy)
            .await?,
        match &desired.claim {
            Some(claim) => {
                let what = "its PersistentVolumeClaim";
                foreign::<PersistentVolumeClaim>(client, cache, what, claim).await?
            }
            None => None,
        },
        match &desired.disruption_budget {
            Some(budget) => {
                let what = "its PodDisruptionBudget";
                foreign::<PodDisruptionBudget>(client, cache, what, budget).await?
            }
            None => None,
        },
    ];
    Ok(checks.into_iter().flatten().next())
}

async fn foreign<K>(
    client: &Client,
    cache: &ArtifactCache,
    what: &'static str,
    object: &K,
) -> Result<Option<String>, Error>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let namespace = cache.namespace().unwrap_or_default();
    let name = object.name_any();
    let found = Api::<K>::namespaced(client.clone(), &namespace)
        .get_metadata_opt(&name)
        .await
        .map_err(|source| Error::Read {
            what,
            namespace: namespace.clone(),
            name: cache.name_any(),
            source,
        })?;
    Ok(found
        .filter(|existing| !desired::owned_by(&existing.metadata, cache))
        .map(|_| {
            let kind = what.trim_start_matches("its ");
            format!("the {kind} {namespace}/{name}")
        }))
}

/// What each owned object was after this controller's last apply of it, so an object it just
/// created that the owned watch has not seen yet is not read as deleted and created again. Bounded:
/// an object evicted is judged by the watch alone, as after a restart.
pub(super) type LastApplied = moka::future::Cache<String, Ours>;

/// Owned objects whose last applied UID is kept.
const LAST_APPLIED: u64 = 10_000;

/// An empty [`LastApplied`].
pub(super) fn last_applied() -> LastApplied {
    moka::future::Cache::new(LAST_APPLIED)
}

/// Server-side apply of one owned object, forced: the fields we own go back, fields others added
/// stay theirs. When that put back what someone else changed or deleted (against the digest
/// `owned` last saw), an Event on the cache says so.
pub(super) async fn apply<K>(
    client: &Client,
    reporter: &EventReporter,
    cache: &ArtifactCache,
    what: &'static str,
    object: &K,
    (owned, applied): (Option<&Reflected<Trimmed<K>>>, &LastApplied),
) -> Result<K, Error>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let namespace = cache.namespace().unwrap_or_default();
    let name = object.name_any();
    let before = owned.and_then(|o| {
        o.store()
            .get(&ObjectRef::<Trimmed<K>>::new(&name).within(&namespace))
    });
    // k8s-openapi's objects serialize their apiVersion and kind, as an apply body needs.
    let after = Api::<K>::namespaced(client.clone(), &namespace)
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await
        .map_err(|source| Error::Apply {
            what,
            namespace: namespace.clone(),
            name: cache.name_any(),
            source,
        })?;
    let Some(owned) = owned else {
        return Ok(after);
    };
    let applied_before = owned.synced()
        && cache
            .status
            .as_ref()
            .is_some_and(|s| s.observed_generation == cache.metadata.generation);
    let before = before.as_ref().map(|before| &before.ours);
    let after_ours = ours(&after);
    let key = format!("{what}/{namespace}/{name}");
    let last_applied = applied.get(&key).await;
    applied.insert(key, after_ours.clone()).await;
    let known = (applied_before, last_applied.as_ref());
    if let Some(put_back) = restored(what, &name, before, &after_ours, known) {
        let notice = Notice {
            on: cache.object_ref(&()),
            warning: true,
            reason: REASON,
            action: put_back.action,
            note: put_back.note,
        };
        reporter
            .publish_related(notice, after.object_ref(&()))
            .await;
    }
    Ok(after)
}
