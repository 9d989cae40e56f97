//! Image selection: the controller part (every ImageSelectionPolicy's status: per node class, the
//! image `resolution` picks) and the `/mutate` admission route (opted-in pods get their images
//! from that status). Imports no other feature.
//!
//! `resolution` is pure and serves `ocifit resolve` too; `controller` reconciles policies
//! (leader only); `planner` plans pods over a [`planner::Index`] that `feed` keeps current;
//! `route` serves it, with the Events its answers deserve; `release` releases the pods admission
//! held; [`run`] composes them into one `process::Feature`.

mod controller;
mod feed;
mod planner;
mod release;
mod resolution;
mod route;
pub use controller::RegistrySource;

pub use feed::SharedIndex;
pub use planner::{ImagePlan, Index, SelectionPod, managed_name};
pub use resolution::{
    ArtifactState, AttachedArtifact, CandidateArtifact, ClassAnswer, Content, PlatformLookup,
    Platforms, Resolved, StatusInputs, StatusLimits, policy_status, resolve_classes,
};
pub use route::{MutatePods, PATH, notice};

// The face `startup` and the CLI use: the artifact source and its settings, how held pods are
// treated; the decision itself is `resolution`.
pub use controller::{Backoff, ControllerTunables, ManagedShare, Request, Source, Wanted};
pub use planner::{GATE, HoldFailure, HoldRules, Quota};

use std::sync::Arc;

use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};

use crate::admission::Route;
use crate::api::{ImageSelectionPolicy, REPORTING_ADMISSION, REPORTING_CONTROLLER};
use crate::cluster::ClusterView;
use crate::cluster::identity_and_labels;
use crate::cluster::reflect;
use crate::cluster::{EventReporter, queue};
use crate::process::{Feature, Readiness, Shutdown, Tasks, until};
use crate::telemetry::Metrics;
use controller::{ControllerDeps, controller};

/// What image selection needs from the rest of the process.
pub struct ImageSelectionDeps {
    pub cluster: ClusterView,
    /// Where artifacts come from.
    pub source: Arc<dyn Source>,
    /// Metrics to count into.
    pub metrics: Arc<Metrics>,
    /// The controller's tunables.
    pub settings: ControllerTunables,
    /// How long a held pod may wait for its decision, and what follows.
    pub hold: HoldRules,
    /// This replica's identity (pod name), on its Events.
    pub identity: String,
    /// Whether the `/mutate` route is served.
    pub admission: bool,
    /// The MutatingWebhookConfiguration whose `pods.ocifit.io` webhook decides which
    /// namespaces' held pods are released.
    pub webhook_configuration: String,
    /// ocifit's own namespace (never released in).
    pub own_namespace: String,
    /// Resolves once shutdown begins.
    pub shutdown: Shutdown,
}

/// Starts image selection over the cluster view: its tasks are the policy watch, the index
/// feed, the controller, the held-pod release, and with the route the admission Event queue. It
/// can serve once the policy store holds a first list and, with the route, the index is built.
pub fn run(parts: ImageSelectionDeps) -> Feature<Route> {
    let ImageSelectionDeps {
        cluster,
        source,
        metrics,
        settings,
        hold,
        identity,
        admission,
        webhook_configuration,
        own_namespace,
        shutdown,
    } = parts;
    let (policies, policy_watch) = reflect(
        watcher(
            Api::<ImageSelectionPolicy>::all(cluster.client.clone()),
            watcher::Config::default(),
        )
        .backoff(crate::process::watch_backoff())
        .modify(trim),
        "imageselectionpolicies",
    );
    let mut tasks: Tasks = vec![("policy watch", until(shutdown.clone(), policy_watch))];
    // Kept on every replica: the route plans from it, the leader releases held pods with it.
    let index = SharedIndex::default();
    tasks.push((
        "admission index feed",
        until(
            shutdown.clone(),
            feed::feed(
                policies.clone(),
                cluster.clone(),
                index.clone(),
                Arc::clone(&metrics),
            ),
        ),
    ));
    tasks.extend(release::run(
        release::ReleaseDeps {
            cluster: cluster.clone(),
            index: index.clone(),
            reporter: EventReporter::new(
                cluster.client.clone(),
                REPORTING_CONTROLLER,
                identity.clone(),
                Arc::clone(&metrics),
            ),
            rules: hold,
            policies: policies.clone(),
            webhook_configuration,
            own_namespace,
        },
        &shutdown,
    ));
    let route = admission.then(|| {
        let reporter = EventReporter::new(
            cluster.client.clone(),
            REPORTING_ADMISSION,
            identity.clone(),
            Arc::clone(&metrics),
        );
        let (notices, publisher) = queue(reporter, route::WINDOW);
        tasks.push(("admission events", until(shutdown.clone(), publisher)));
        Route::new(
            route::PATH,
            MutatePods {
                index: index.clone(),
                notices: Some(notices),
            },
        )
    });
    let run = controller(
        ControllerDeps {
            cluster,
            source,
            metrics,
            settings,
            identity,
        },
        &policies,
        shutdown.wait(),
    );
    tasks.push(("controller", run));
    // Without the route nothing plans from the index, so it is not waited for.
    let index = route.is_some().then_some(index);
    let synced = policies.clone();
    Feature {
        tasks,
        routes: route.into_iter().collect(),
        readiness: Readiness::new(async move { synced.wait_synced().await }, move || {
            policies.synced() && index.as_ref().is_none_or(SharedIndex::is_built)
        }),
    }
}

/// What the watch keeps of a policy: the spec and status (bounded by the CRD schema), its
/// identity, and only ocifit's own labels (the managed policies' quotas read them); a policy
/// author's other labels, annotations, owners and finalizers are dropped.
pub fn trim(policy: &mut ImageSelectionPolicy) {
    identity_and_labels(&mut policy.metadata, &["selection.ocifit.io/"]);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_policy_is_held_with_ocifits_labels_only() {
        let mut policy: ImageSelectionPolicy = serde_json::from_value(serde_json::json!({
            "apiVersion": "ocifit.io/v1alpha1",
            "kind": "ImageSelectionPolicy",
            "metadata": {
                "name": "p",
                "uid": "u",
                "generation": 3,
                "labels": {"selection.ocifit.io/managed-for": "team", "app": "x".repeat(60_000)},
                "annotations": {"note": "x".repeat(60_000)},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "o"}],
                "finalizers": ["example.com/keep"],
            },
            "spec": {"artifact": {"reference": "registry.example/a:1"}, "targetImage": "placeholder:1"},
        }))
        .unwrap();
        let spec = serde_json::to_value(&policy.spec).unwrap();
        trim(&mut policy);
        assert_eq!(
            policy.metadata.labels,
            Some(BTreeMap::from([(
                "selection.ocifit.io/managed-for".to_owned(),
                "team".to_owned()
            )]))
        );
        assert_eq!(policy.metadata.annotations, None);
        assert_eq!(policy.metadata.owner_references, None);
        assert_eq!(policy.metadata.finalizers, None);
        assert_eq!(policy.metadata.generation, Some(3));
        assert_eq!(serde_json::to_value(&policy.spec).unwrap(), spec);
    }
}
