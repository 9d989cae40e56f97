//! A policy's pod counts, from the watched pods that carry its tracking label: gated (waiting for
//! inspection), held (gated on purpose, outcome `Held`), released (gate gone: only pods released
//! by hand are still watched; the status's released total is kept apart); and for the metrics, its pods still gated with the creation time of the oldest one waiting. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::api::PodCounts;
use crate::api::placement_pod::{OUTCOME_ANNOTATION, Outcome, POLICY_LABEL, SCHEDULING_GATE};
use crate::telemetry::PolicyGates;

/// Where a labelled pod stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PodState {
    Gated,
    Held,
    Released,
}

/// The state of a pod ocifit gated, and the policy that did; `None` for other pods.
pub(super) fn state(pod: &Pod) -> Option<(&str, PodState)> {
    let policy = pod.metadata.labels.as_ref()?.get(POLICY_LABEL)?;
    let gated = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.scheduling_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|gate| gate.name == SCHEDULING_GATE));
    let held = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(OUTCOME_ANNOTATION))
        .is_some_and(|outcome| outcome == Outcome::Held.as_str());
    let state = match (gated, held) {
        (false, _) => PodState::Released,
        (true, true) => PodState::Held,
        (true, false) => PodState::Gated,
    };
    Some((policy, state))
}

/// Counts by policy name over `pods`.
pub(super) fn counts<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> BTreeMap<String, PodCounts> {
    let mut counts: BTreeMap<String, PodCounts> = BTreeMap::new();
    for (policy, state) in pods.into_iter().filter_map(state) {
        let entry = counts.entry(policy.to_owned()).or_default();
        let counter = match state {
            PodState::Gated => &mut entry.gated,
            PodState::Held => &mut entry.held,
            PodState::Released => &mut entry.released,
        };
        *counter = counter.saturating_add(1);
    }
    counts
}

/// By policy name, its pods still gated over `pods`: how many wait and are held, and when the
/// oldest waiting one was created (the bound is the caller's to add).
pub(super) fn gates<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> BTreeMap<String, PolicyGates> {
    let mut gates: BTreeMap<String, PolicyGates> = BTreeMap::new();
    for pod in pods {
        let Some((policy, state)) = state(pod) else {
            continue;
        };
        if state == PodState::Released {
            continue;
        }
        let entry = gates.entry(policy.to_owned()).or_default();
        if state == PodState::Held {
            entry.held = entry.held.saturating_add(1);
            continue;
        }
        entry.gated = entry.gated.saturating_add(1);
        if let Some(created) = &pod.metadata.creation_timestamp {
            let created = created.0.as_second() as f64;
            entry.oldest_gated_created = Some(
                entry
                    .oldest_gated_created
                    .map_or(created, |oldest| oldest.min(created)),
            );
        }
    }
    gates
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSchedulingGate;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::placement::fixtures::{labelled, map, pod};

    fn placed(policy: &str, gated: bool, outcome: Option<&str>) -> Pod {
        let mut pod = labelled(pod(&[("web", "w")]), &[(POLICY_LABEL, policy)]);
        if gated {
            pod.spec.as_mut().unwrap().scheduling_gates = Some(vec![PodSchedulingGate {
                name: SCHEDULING_GATE.into(),
            }]);
        }
        pod.metadata.annotations = outcome.map(|o| map(&[(OUTCOME_ANNOTATION, o)]));
        pod
    }

    #[test]
    fn pods_are_counted_by_policy_and_state() {
        let pods = [
            placed("web", true, None),
            placed("web", true, Some("Held")),
            placed("web", false, Some("Constrained")),
            placed("web", false, Some("Unconstrained")),
            placed("batch", true, None),
            pod(&[("other", "o")]),
        ];
        let counts = counts(&pods);
        assert_eq!(
            counts["web"],
            PodCounts {
                gated: 1,
                held: 1,
                released: 2,
                ..PodCounts::default()
            }
        );
        assert_eq!(
            counts["batch"],
            PodCounts {
                gated: 1,
                held: 0,
                released: 0,
                ..PodCounts::default()
            }
        );
        assert_eq!(counts.len(), 2, "unlabelled pods are not counted");
    }

    #[test]
    fn gates_count_waiting_and_held_pods_and_keep_the_oldest_waiting_creation() {
        let created = |pod: Pod, second: i64| {
            let mut pod = pod;
            pod.metadata.creation_timestamp = Some(Time(Timestamp::from_second(second).unwrap()));
            pod
        };
        let pods = [
            created(placed("web", true, None), 1_700_000_200),
            created(placed("web", true, None), 1_700_000_100),
            // Held and released pods are older, but are not waiting for inspection.
            created(placed("web", true, Some("Held")), 1_600_000_000),
            created(placed("web", false, Some("Constrained")), 1_500_000_000),
            created(placed("batch", true, Some("Held")), 1_700_000_000),
            created(placed("done", false, Some("Constrained")), 1_700_000_000),
        ];
        let gates = gates(&pods);
        assert_eq!(
            gates["web"],
            PolicyGates {
                gated: 2,
                held: 1,
                oldest_gated_created: Some(1_700_000_100.0),
                bound_seconds: None,
            }
        );
        assert_eq!(
            gates["batch"],
            PolicyGates {
                gated: 0,
                held: 1,
                oldest_gated_created: None,
                bound_seconds: None,
            }
        );
        assert!(
            !gates.contains_key("done"),
            "a policy whose pods were all released gates nothing"
        );
    }

    #[test]
    fn a_held_pod_released_by_hand_counts_as_released() {
        let pod = placed("web", false, Some("Held"));
        assert_eq!(state(&pod), Some(("web", PodState::Released)));
    }
}
