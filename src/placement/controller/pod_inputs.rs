//! What the release planner needs from outside, read for one gated pod: its pull Secrets (the
//! pod's, then its ServiceAccount's, through the cluster's one Secret reader: `get` only, in the
//! allowed namespaces) and the inspection of every container's
//! image through the shared [`Inspector`] (caches, one lookup in flight per image, backoff per
//! registry). Thin: every decision is in the pure modules.

use std::collections::BTreeMap;

use futures_util::future::join_all;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::{Api, Client};

use crate::cluster::{SecretRead, Secrets};
use crate::placement::planner::Policy;
use crate::placement::planner::{Freshness, effective, freshness};
use crate::placement::planner::{Inspected, Inspection, InspectionFailure, containers};
use crate::placement::planner::{PullSecrets, SecretProblem, operator_credentials};
use crate::registry::{DockerConfig, Inspector, Lookup, parse_reference};
use crate::telemetry::Metrics;

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
