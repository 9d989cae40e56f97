//! Collecting the policies ocifit took charge of (leader only): a managed policy that no pod
//! has used for `--image-ref-policy-ttl` is deleted. A pod given its image by one carries the
//! label `selection.ocifit.io/managed-policy` naming it, so use is a label selector away; a
//! policy first seen (created, or on becoming leader) counts as used then, so a new leader
//! never deletes at once what the last one kept. Policies without the managed label are never
//! touched. Use is read with one label-selected list of pods per pass (not one per policy).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Preconditions};
use kube::{Api, ResourceExt};

use crate::api::ImageSelectionPolicy;
use crate::api::pod::MANAGED_POLICY_LABEL;
use crate::cluster::ClusterView;
use crate::cluster::Reflected;
use crate::cluster::UNTRUSTED_LIST_PAGE;
use crate::image_selection::planner::is_managed;
use crate::telemetry::error_chain;

/// The managed policies to delete now, given those that exist and those a pod uses; `seen`
/// remembers when each was last used (or first seen) across passes.
pub(super) fn unused(
    seen: &mut HashMap<String, Instant>,
    managed: &[String],
    in_use: &BTreeSet<String>,
    now: Instant,
    ttl: Duration,
) -> Vec<String> {
    seen.retain(|name, _| managed.contains(name));
    let mut collect = Vec::new();
    for name in managed {
        if in_use.contains(name) {
            seen.insert(name.clone(), now);
            continue;
        }
        let since = *seen.entry(name.clone()).or_insert(now);
        if now.duration_since(since) >= ttl {
            collect.push(name.clone());
        }
    }
    collect
}

/// The managed policies some pod uses: one label-selected list of pods' metadata (in pages),
/// whatever the number of policies; `None` when it cannot be read.
async fn in_use(client: &kube::Client) -> Option<BTreeSet<String>> {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut params = ListParams::default()
        .labels(MANAGED_POLICY_LABEL)
        .limit(UNTRUSTED_LIST_PAGE);
    let mut used = BTreeSet::new();
    loop {
        let page = match pods.list_metadata(&params).await {
            Ok(page) => page,
            Err(err) => {
                tracing::warn!(error = %error_chain(&err), "pods using managed policies not listed: none deleted this pass");
                return None;
            }
        };
        used.extend(page.items.into_iter().filter_map(|pod| {
            pod.metadata
                .labels
                .and_then(|mut labels| labels.remove(MANAGED_POLICY_LABEL))
        }));
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Some(used),
        }
    }
}

/// Deletes unused managed policies, looking every quarter of `ttl` (1 s to 5 min), until the
/// process stops.
pub(super) async fn collect(
    cluster: ClusterView,
    policies: Reflected<ImageSelectionPolicy>,
    ttl: Duration,
) {
    let every = (ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(300));
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = HashMap::new();
    loop {
        ticks.tick().await;
        if !cluster.leadership.is_leader() {
            seen.clear();
            continue;
        }
        let managed: Vec<_> = policies
            .store()
            .state()
            .into_iter()
            .filter(|policy| is_managed(policy))
            .collect();
        let names: Vec<String> = managed.iter().map(|p| p.name_any()).collect();
        // Unknown counts as used: never delete on a failed read.
        let Some(in_use) = in_use(&cluster.client).await else {
            continue;
        };
        let api: Api<ImageSelectionPolicy> = Api::all(cluster.client.clone());
        for name in unused(&mut seen, &names, &in_use, Instant::now(), ttl) {
            let uid = managed
                .iter()
                .find(|p| p.name_any() == name)
                .and_then(|p| p.uid());
            let only_that_one = DeleteParams::default().preconditions(Preconditions {
                uid,
                resource_version: None,
            });
            match api.delete(&name, &only_that_one).await {
                Ok(_) => tracing::info!(policy = %name, "unused managed policy deleted"),
                Err(err) => {
                    tracing::warn!(policy = %name, error = %error_chain(&err), "managed policy not deleted")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(60);

    #[test]
    fn a_managed_policy_is_collected_only_after_a_whole_ttl_without_a_pod() {
        let t0 = Instant::now();
        let mut seen = HashMap::new();
        let managed = vec!["a".to_owned(), "b".to_owned()];
        let used = BTreeSet::from(["a".to_owned()]);
        // First seen counts as used: nothing goes at once.
        assert!(unused(&mut seen, &managed, &BTreeSet::new(), t0, TTL).is_empty());
        let later = t0 + Duration::from_secs(59);
        assert!(unused(&mut seen, &managed, &used, later, TTL).is_empty());
        let after = t0 + TTL;
        assert_eq!(unused(&mut seen, &managed, &used, after, TTL), ["b"]);
        // a was used at `after` too: it goes a whole TTL after that, not before.
        let none = BTreeSet::new();
        let only_a = ["a".to_owned()];
        let almost = after + TTL - Duration::from_secs(1);
        assert!(unused(&mut seen, &only_a, &none, almost, TTL).is_empty());
        assert_eq!(unused(&mut seen, &only_a, &none, after + TTL, TTL), ["a"]);
        assert!(!seen.contains_key("b"));
    }
}
