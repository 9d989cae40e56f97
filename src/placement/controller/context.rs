//! What a placement reconcile reads: the cluster view, the policies as compiled once per change
//! of the store (a reconcile compiles none), the shared inspector, ocifit's own credentials, the
//! queue of its Events and metrics, and the schedule of the next inspection of each pod that
//! failed one; and, for one gated pod, what the release planner needs from outside: its pull
//! Secrets (the pod's, then its ServiceAccount's, through the cluster's one Secret reader) and
//! the inspection of every container's image through the shared [`Inspector`]. Thin: every
//! decision is in the pure modules.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures_util::future::join_all;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};

use super::slots::NamespaceSlots;
use super::status_write::Tally;
use crate::cluster::{ClusterView, Notices, SecretRead, Secrets};
use crate::placement::planner::Retries;
use crate::placement::planner::{Freshness, effective, freshness};
use crate::placement::planner::{Inspected, Inspection, InspectionFailure, containers};
use crate::placement::planner::{Policy, PolicyError};
use crate::placement::planner::{PolicySet, UsablePolicies};
use crate::placement::planner::{PullSecrets, SecretProblem, operator_credentials};
use crate::registry::{DockerConfig, Inspector, Lookup, parse_reference};
use crate::telemetry::Metrics;

/// Why a held pod's policy cannot place it: the pod is released unconstrained, with this as the
/// reason its Event gives.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unusable {
    /// The policy named by the pod's label was deleted (or never existed).
    #[error("placement policy {name} no longer exists")]
    Gone { name: String },
    /// The policy exists but does not compile (its status says the same).
    #[error("placement policy {name} cannot be used: {source}")]
    Invalid { name: String, source: PolicyError },
}

/// The usable policy `name` of `set`, or why there is none.
fn usable_policy(set: &PolicySet, name: &str) -> Result<Policy, Unusable> {
    match set.get(name) {
        None => Err(Unusable::Gone { name: name.into() }),
        Some(Ok(policy)) => Ok(policy.clone()),
        Some(Err(source)) => Err(Unusable::Invalid {
            name: name.into(),
            source: source.clone(),
        }),
    }
}

/// What a reconcile reads.
pub(crate) struct Context {
    /// The cluster view (client, leadership).
    pub cluster: ClusterView,
    /// The policies, compiled once per change of the store.
    pub policies: UsablePolicies,
    /// Image inspection, shared by every pod.
    pub inspector: Inspector,
    /// ocifit's own registry credentials, tried after the pod's.
    pub own_credentials: DockerConfig,
    /// Events on pods and owners, published off the reconcile's path (a release never waits
    /// for its Event).
    pub notices: Notices,
    /// Metrics to count into.
    pub metrics: Arc<Metrics>,
    /// ocifit's own namespace (its pods are never placed).
    pub own_namespace: String,
    /// When each pod that failed an inspection is looked at again.
    pub retries: Mutex<Retries>,
    /// Reconciles in flight per namespace.
    pub slots: NamespaceSlots,
    /// Namespace metadata, when the gate's route keeps it in memory (else read when needed).
    pub namespaces: Option<Store<PartialObjectMeta<Namespace>>>,
    /// The releases written, for the status keeper's released counts.
    pub releases: Arc<Tally>,
}

impl Context {
    /// The usable policy `name`, or why there is none.
    pub(crate) fn usable_policy(&self, name: &str) -> Result<Policy, Unusable> {
        usable_policy(&self.policies.set(), name)
    }

    /// The labels of namespace `name` as the gate's store holds them, if it holds it.
    pub(crate) fn stored_namespace_labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let stored = self.namespaces.as_ref()?.get(&ObjectRef::new(name))?;
        Some(stored.metadata.labels.clone().unwrap_or_default())
    }

    /// The retry schedule.
    pub(crate) fn retries(&self) -> MutexGuard<'_, Retries> {
        // Every update is one insert or remove: the map stays consistent after a panic.
        self.retries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The architectures whose nodes ocifit taints (every policy's node tainting together).
    pub(crate) fn tainted(&self) -> BTreeSet<String> {
        self.policies.set().tainted()
    }
}

/// The pod's pull Secrets, then its ServiceAccount's, from its namespace. A missing ServiceAccount
/// or Secret is skipped (as the kubelet does); every Secret that could not be used, and why, is a
/// problem of the result, for an Event on the pod.
pub(super) async fn pull_secrets(client: &Client, reader: &Secrets, pod: &Pod) -> PullSecrets {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let spec = pod.spec.as_ref();
    let mut names: Vec<String> = spec
        .and_then(|spec| spec.image_pull_secrets.as_ref())
        .into_iter()
        .flatten()
        .map(|reference| reference.name.clone())
        .collect();
    let account = spec
        .and_then(|spec| spec.service_account_name.as_deref())
        .unwrap_or("default");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    if let Ok(Some(account)) = accounts.get_opt(account).await {
        names.extend(
            account
                .image_pull_secrets
                .into_iter()
                .flatten()
                .map(|reference| reference.name),
        );
    }
    let mut secrets = BTreeMap::new();
    let mut refused = BTreeMap::new();
    for name in &names {
        if secrets.contains_key(name) || refused.contains_key(name) {
            continue;
        }
        let problem = match reader.get(namespace, name).await {
            Ok(SecretRead::Found(secret)) => {
                secrets.insert(name.clone(), *secret);
                continue;
            }
            // Reported by `PullSecrets::read` as missing.
            Ok(SecretRead::Missing) => continue,
            Ok(SecretRead::NotAllowed) => SecretProblem::NotAllowed {
                name: name.clone(),
                namespace: namespace.to_owned(),
            },
            Ok(SecretRead::Forbidden(message)) => SecretProblem::Unreadable {
                name: name.clone(),
                message: format!("the apiserver refused the read: {message}"),
            },
            Err(err) => SecretProblem::Unreadable {
                name: name.clone(),
                message: err.to_string(),
            },
        };
        refused.insert(name.clone(), problem);
    }
    let mut pull = PullSecrets::read(
        names
            .iter()
            .map(String::as_str)
            .filter(|name| !refused.contains_key(*name)),
        &secrets,
    );
    pull.problems.extend(refused.into_values());
    pull
}

/// Every container's image inspected (init containers first), concurrently.
pub(super) async fn inspections(
    inspector: &Inspector,
    pod: &Pod,
    policy: &Policy,
    secrets: &PullSecrets,
    own: &DockerConfig,
    metrics: &Metrics,
) -> Vec<Inspection> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    join_all(containers(spec).map(|container| async move {
        let image = container.image.clone().unwrap_or_default();
        let result = match parse_reference(&image) {
            Err(err) => {
                metrics.inspection_failed("invalid_reference");
                Err(InspectionFailure::InvalidReference(err.to_string()))
            }
            Ok(reference) => {
                let max_tag_age = match freshness(
                    &reference,
                    effective(container, &reference),
                    &policy.tag_max_age,
                ) {
                    Freshness::Pinned => std::time::Duration::MAX,
                    Freshness::MaxAge(age) => age,
                };
                let credentials =
                    secrets.for_image(&reference, operator_credentials(policy, own));
                inspector
                    .inspect(Lookup {
                        image: &reference,
                        max_tag_age,
                        credentials: &credentials,
                        namespace,
                    })
                    .await
                    .map(|facts| Inspected {
                        digest: facts.digest,
                        platforms: facts.platforms.as_ref().clone(),
                    })
                    .map_err(|err| {
                        metrics.inspection_failed(err.kind_label());
                        // The pod's Events and annotations get the kind of failure only.
                        tracing::info!(%image, error = %crate::telemetry::error_chain(&err), "image inspection failed");
                        InspectionFailure::Lookup {
                            image: image.clone(),
                            summary: err.summary(),
                        }
                    })
            }
        };
        Inspection {
            container: container.name.clone(),
            image,
            result,
        }
    }))
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::PlacementPolicy;
    use crate::placement::fixtures::stored_policy;

    fn stored(name: &str, spec: serde_json::Value) -> Arc<PlacementPolicy> {
        Arc::new(stored_policy(name, spec))
    }

    #[test]
    fn a_reconcile_reads_the_shared_compiled_set_with_each_policys_verdict() {
        let usable = UsablePolicies::default();
        usable.store(PolicySet::compile([
            stored("arm", json!({})),
            stored(
                "broken",
                json!({"onInspectionFailure": {"action": "Fallback"}}),
            ),
        ]));
        let set = usable.set();
        assert!(
            Arc::ptr_eq(&set, &usable.set()),
            "one set, not one per reconcile"
        );
        assert!(matches!(usable_policy(&set, "arm"), Ok(policy) if policy.name == "arm"));
        assert!(matches!(
            usable_policy(&set, "broken"),
            Err(Unusable::Invalid { ref name, source: PolicyError::MissingFallback }) if name == "broken"
        ));
        assert!(matches!(
            usable_policy(&set, "gone"),
            Err(Unusable::Gone { ref name }) if name == "gone"
        ));
        usable.store(PolicySet::compile([stored("broken", json!({}))]));
        assert!(
            usable_policy(&usable.set(), "broken").is_ok(),
            "a fixed policy is usable once the store's change is compiled"
        );
        assert!(matches!(
            usable_policy(&usable.set(), "arm"),
            Err(Unusable::Gone { .. })
        ));
    }

    #[test]
    fn an_unusable_policy_names_itself_and_why() {
        let gone = Unusable::Gone { name: "arm".into() };
        assert_eq!(gone.to_string(), "placement policy arm no longer exists");
        let invalid = Unusable::Invalid {
            name: "arm".into(),
            source: PolicyError::MissingFallback,
        };
        let message = invalid.to_string();
        assert!(
            message.starts_with("placement policy arm cannot be used: "),
            "{message}"
        );
        assert!(
            message.ends_with(&PolicyError::MissingFallback.to_string()),
            "{message}"
        );
    }
}
