//! The audit of running pods (leader only), every `--placement-audit-interval` (off by default):
//! running pods are listed a page at a time (between passes only the uids of misplaced pods
//! already reported are kept), judged by [`crate::placement::planner::audit`] over the shared
//! inspections, and each misplaced pod is reported once as exec format errors are: a Warning Event
//! `Misplaced` on the pod and its owner, `ocifit_misplaced_pods_total`, the policy's
//! `status.pods.misplaced`. With `misplaced: Evict` the pods [`to_evict`] chooses are evicted one
//! every [`EVICTION_SPACING`]; a PodDisruptionBudget's refusal (429) is left for the next pass.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Preconditions, Status};
use kube::api::{ListParams, PostParams};
use kube::core::{ObjectMeta, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};

use super::Context;
use super::context::{inspections, pull_secrets};
use super::exec_errors::{Finding, report_finding};
use super::status_write::Tally;
use crate::api::Misplaced;
use crate::classes::{ARCH_LABEL, OS_LABEL};
use crate::cluster::ClusterView;
use crate::cluster::Notices;
use crate::placement::planner::Namespace as SelectedNamespace;
use crate::placement::planner::Note;
use crate::placement::planner::UsablePolicies;
use crate::placement::planner::{
    Misplacement, as_run, audited, judge, node, recreating_owner, to_evict,
};
use crate::placement::read_labels;
use crate::platform::NodePlatform;
use crate::registry::{DockerConfig, Inspector};
use crate::telemetry::Metrics;

/// The Event's reason for a misplaced pod.
pub(super) const REASON: &str = "Misplaced";
/// The Event's reason for an eviction.
pub(super) const EVICTED: &str = "EvictedMisplaced";
/// Running pods listed per request.
const PAGE: u32 = 100;
/// Least time between two evictions: at most [`crate::placement::planner::EVICTIONS_PER_PASS`]
/// pods a pass, spread so the replacements' inspections and scheduling keep up.
pub(super) const EVICTION_SPACING: Duration = Duration::from_secs(1);

/// Longest wait for the Eviction API's answer.
const EVICTION_TIMEOUT: Duration = Duration::from_secs(30);

/// What the audit reads and writes.
pub(crate) struct Auditor {
    pub cluster: ClusterView,
    pub policies: UsablePolicies,
    pub inspector: Inspector,
    pub own_credentials: DockerConfig,
    pub notices: Notices,
    pub metrics: Arc<Metrics>,
    pub own_namespace: String,
    /// Namespace metadata, when the gate's route keeps it in memory (else read once a pass).
    pub namespaces: Option<Store<PartialObjectMeta<Namespace>>>,
    /// Misplaced pods reported, by policy, for the status keeper.
    pub tally: Arc<Tally>,
    /// Time between passes.
    pub interval: Duration,
}

/// A misplaced pod to evict: what the Eviction API and its Event need.
struct Candidate {
    pod: Pod,
    owner: String,
    why: String,
}

impl Auditor {
    /// The audit over what the controller reads, counting into `tally`, every `interval`.
    pub(crate) fn new(context: &Context, tally: Arc<Tally>, interval: Duration) -> Self {
        Auditor {
            cluster: context.cluster.clone(),
            policies: context.policies.clone(),
            inspector: context.inspector.clone(),
            own_credentials: context.own_credentials.clone(),
            notices: context.notices.clone(),
            metrics: Arc::clone(&context.metrics),
            own_namespace: context.own_namespace.clone(),
            namespaces: context.namespaces.clone(),
            tally,
            interval,
        }
    }

    /// Audits every interval until the task is stopped.
    pub(crate) async fn run(self) {
        let mut reported = HashSet::new();
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            // A new leader reports afresh what is misplaced when it takes over.
            if !self.cluster.leadership.is_leader() {
                reported.clear();
                continue;
            }
            if let Err(err) = self.pass(&mut reported).await {
                tracing::warn!(error = %crate::telemetry::error_chain(&err), "placement audit pass failed");
            }
        }
    }

    /// One pass over the running pods: reports the misplaced ones not reported before, then
    /// evicts those their policy says to.
    async fn pass(&self, reported: &mut HashSet<String>) -> Result<(), kube::Error> {
        let mut found = HashSet::new();
        let mut candidates = Vec::new();
        let mut labels = HashMap::new();
        let api: Api<Pod> = Api::all(self.cluster.client.clone());
        let mut params = ListParams::default()
            .fields("status.phase=Running")
            .limit(PAGE);
        loop {
            let page = api.list(&params).await?;
            for pod in &page.items {
                let Some((policy, misplaced, why)) = self.look(pod, &mut labels).await? else {
                    continue;
                };
                let uid = pod.uid().unwrap_or_default();
                found.insert(uid.clone());
                if reported.insert(uid) {
                    self.report(pod, &policy, &why);
                }
                let owner = recreating_owner(pod).map(|owner| owner.uid.clone());
                if let (Misplaced::Evict, true, Some(owner)) = (misplaced, why.evictable(), owner) {
                    candidates.push(Candidate {
                        pod: identity(pod),
                        owner,
                        why: why.to_string(),
                    });
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params.continue_token = Some(token),
                _ => break,
            }
        }
        reported.retain(|uid| found.contains(uid));
        let chosen = to_evict(candidates.iter().map(|c| (Some(c.owner.as_str()), true)));
        tracing::info!(
            misplaced = found.len(),
            evictable = candidates.len(),
            evicting = chosen.len(),
            "placement audit pass"
        );
        for (turn, index) in chosen.into_iter().enumerate() {
            if turn > 0 {
                tokio::time::sleep(EVICTION_SPACING).await;
            }
            if let Some(candidate) = candidates.get(index) {
                self.evict(candidate).await;
            }
        }
        Ok(())
    }

    /// The policy selecting `pod`, what it does with misplaced pods and why the pod is
    /// misplaced, if it is.
    async fn look(
        &self,
        pod: &Pod,
        labels: &mut HashMap<String, BTreeMap<String, String>>,
    ) -> Result<Option<(String, Misplaced, Misplacement)>, kube::Error> {
        let namespace = pod.namespace().unwrap_or_default();
        if !labels.contains_key(&namespace) {
            let read = match self.stored_labels(&namespace) {
                Some(stored) => stored,
                None => read_labels(&self.cluster.client, &namespace).await?,
            };
            labels.insert(namespace.clone(), read);
        }
        let empty = BTreeMap::new();
        let selected = SelectedNamespace {
            name: &namespace,
            labels: labels.get(&namespace).unwrap_or(&empty),
        };
        let policies = self.policies.load();
        let Some(policy) = audited(pod, selected, &self.own_namespace, &policies) else {
            return Ok(None);
        };
        let node = node(pod).unwrap_or_default();
        let platform = self
            .cluster
            .nodes
            .store()
            .get(&ObjectRef::new(node))
            .map_or(NodePlatform::from_labels(&BTreeMap::new()), |stored| {
                NodePlatform::from_labels(
                    &stored.labels_where(|key| key == OS_LABEL || key == ARCH_LABEL),
                )
            });
        let ran = as_run(pod);
        let secrets = pull_secrets(&self.cluster.client, &self.cluster.secrets(), &ran).await;
        let inspected = inspections(
            &self.inspector,
            &ran,
            policy,
            &secrets,
            &self.own_credentials,
            &self.metrics,
        )
        .await;
        Ok(judge(node, &platform, &inspected)
            .map(|why| (policy.name.clone(), policy.misplaced, why)))
    }

    fn stored_labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let stored = self.namespaces.as_ref()?.get(&ObjectRef::new(name))?;
        Some(stored.metadata.labels.clone().unwrap_or_default())
    }

    /// A Warning Event on the pod and its owner, the metric and the policy's count.
    fn report(&self, pod: &Pod, policy: &str, why: &Misplacement) {
        let finding = Finding {
            what: "misplaced pod",
            reason: REASON,
            action: "Audit",
            message: format!("placement policy {policy} selects this running pod: {why}"),
            policy: Some(policy),
            count: Metrics::misplaced_pod,
        };
        report_finding(&self.notices, &self.metrics, &self.tally, pod, finding);
    }

    /// Evicts one pod (this very pod: its uid is a precondition); an Event when it is gone.
    async fn evict(&self, candidate: &Candidate) {
        let pod = &candidate.pod;
        let api: Api<Pod> = Api::namespaced(
            self.cluster.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = pod.name_any();
        // Our own body, not kube's `EvictParams`: kube-core 5 writes its delete options under
        // `delete_options`, which the apiserver ignores, so the uid precondition would be lost.
        let eviction = Eviction {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: pod.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            delete_options: Some(DeleteOptions {
                preconditions: Some(Preconditions {
                    uid: pod.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteOptions::default()
            }),
        };
        let post = PostParams::default();
        let request = api.create_subresource::<_, Status>("eviction", &name, &post, &eviction);
        tracing::info!(pod = %name, namespace = ?pod.namespace(), "evicting a misplaced pod");
        // A call that never answers must not stop the audit's later passes.
        let Ok(answer) = tokio::time::timeout(EVICTION_TIMEOUT, request).await else {
            tracing::warn!(pod = %name, namespace = ?pod.namespace(), "eviction of a misplaced pod not answered in time; tried again next pass");
            return;
        };
        match answer {
            Ok(_) => {
                tracing::info!(pod = %name, namespace = ?pod.namespace(), "evicted a misplaced pod");
                self.metrics.misplaced_eviction();
                super::reconcile::publish(
                    &self.notices,
                    pod,
                    &[Note {
                        warning: true,
                        reason: EVICTED,
                        message: format!(
                            "evicted by ocifit (misplaced: Evict) so its owner recreates it and \
                             placement places the replacement: {}",
                            candidate.why
                        ),
                    }],
                    "Evict",
                );
            }
            // A PodDisruptionBudget allows no disruption now: tried again next pass, never forced.
            Err(kube::Error::Api(status)) if status.code == 429 => {
                tracing::info!(pod = %pod.name_any(), namespace = ?pod.namespace(), "eviction of a misplaced pod refused by a PodDisruptionBudget; tried again next pass");
            }
            // Gone or replaced meanwhile.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(err) => {
                tracing::warn!(pod = %pod.name_any(), namespace = ?pod.namespace(), error = %crate::telemetry::error_chain(&err), "failed to evict a misplaced pod");
            }
        }
    }
}

/// What an eviction and its Events read of a pod: name, namespace, uid, owners.
fn identity(pod: &Pod) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            owner_references: pod.metadata.owner_references.clone(),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}
