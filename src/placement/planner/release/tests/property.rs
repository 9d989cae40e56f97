//! The release planner over generated pods: a released pod can only be scheduled on a node
//! where every one of its containers runs, and it keeps every node of its own choice that every
//! container runs on; a pod that is not constrained is held (or released unconstrained only when
//! the policy says so).

use k8s_openapi::api::core::v1::NodeSelectorTerm;
use proptest::prelude::*;

use super::*;
use crate::platform::NodePlatform;
use ocifit_testkit::affinity::{node, term};

const PLATFORMS: [&str; 5] = [
    "linux/amd64",
    "linux/arm64",
    "linux/s390x",
    "windows/amd64",
    "windows/arm64",
];

fn arb_term() -> impl Strategy<Value = NodeSelectorTerm> {
    (
        0..4usize,
        proptest::collection::vec(0..PLATFORMS.len(), 1..3),
    )
        .prop_map(|(kind, picks)| {
            let arches: Vec<&str> = picks
                .iter()
                .map(|p| PLATFORMS[*p].split('/').nth(1).unwrap())
                .collect();
            match kind {
                0 => term(vec![req("kubernetes.io/arch", "In", &arches)], Vec::new()),
                1 => term(
                    vec![req("kubernetes.io/arch", "NotIn", &arches)],
                    Vec::new(),
                ),
                2 => term(vec![req("zone", "In", &["a"])], Vec::new()),
                _ => term(vec![req("kubernetes.io/os", "In", &["linux"])], Vec::new()),
            }
        })
}

proptest! {
    #[test]
    fn a_released_pod_fits_only_nodes_every_container_runs_on(
        containers in proptest::collection::vec(
            proptest::collection::btree_set(0..PLATFORMS.len(), 0..4), 1..5),
        terms in proptest::option::of(proptest::collection::vec(arb_term(), 1..3)),
    ) {
        let policy = arm_pool_policy(json!({}));
        let none = BTreeSet::new();
        let mut pod = gated(&[("c", "image")]);
        pod.spec.as_mut().unwrap().affinity = terms.clone().map(required);
        let inspections: Vec<Inspection> = containers
            .iter()
            .enumerate()
            .map(|(index, picks)| {
                let texts: Vec<&str> = picks.iter().map(|p| PLATFORMS[*p]).collect();
                inspected(&format!("c{index}"), &texts)
            })
            .collect();
        let plan = plan_release(&pod, &inspections, context(&policy, &none, 3));

        let before = Placement::from_pod_spec(pod.spec.as_ref().unwrap()).unwrap();
        let after = Placement::from_pod_spec(plan.pod.spec.as_ref().unwrap()).unwrap();
        let mut some_node_fits = false;
        for text in PLATFORMS {
            for zone in ["a", "b"] {
                let (os, arch) = text.split_once('/').unwrap();
                let candidate = node(
                    "n",
                    &[("kubernetes.io/os", os), ("kubernetes.io/arch", arch), ("zone", zone)],
                );
                let node_platform = NodePlatform::from_labels(candidate.labels.as_ref().unwrap());
                let every_container_runs = inspections.iter().all(|inspection| {
                    inspection.result.as_ref().unwrap().platforms.iter()
                        .any(|p| p.runs_on(&node_platform))
                });
                let fits = before.matches(&candidate) && every_container_runs;
                some_node_fits |= fits;
                if plan.outcome == Some(Outcome::Constrained) {
                    prop_assert!(
                        !after.matches(&candidate) || every_container_runs,
                        "released onto {} where a container cannot run", text
                    );
                    // Mixed operating systems narrow to one; within it nothing that fits is lost.
                    let kept_os = annotation(&plan.pod, PLATFORMS_ANNOTATION)
                        .is_some_and(|p| p.contains(&format!("{os}/")));
                    if fits && kept_os {
                        prop_assert!(after.matches(&candidate), "lost {} in zone {}", text, zone);
                    }
                }
            }
        }
        match plan.outcome {
            Some(Outcome::Constrained) => prop_assert!(some_node_fits),
            Some(Outcome::Held) => {
                prop_assert!(!some_node_fits, "held although a node fits");
                prop_assert!(gate_names(&plan.pod).contains(&SCHEDULING_GATE));
            }
            other => prop_assert!(false, "unexpected outcome {:?}", other),
        }
    }
}
