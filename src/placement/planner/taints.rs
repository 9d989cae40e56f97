//! Node tainting (a policy's `nodeTainting`): which taints a node should carry. A node whose
//! `kubernetes.io/arch` is one of the tainted architectures gets
//! `placement.ocifit.io/arch=<arch>:NoSchedule`; any other node loses ocifit's taint (an
//! architecture no policy taints any more, or a node relabelled). Other taints are never
//! touched. Pure: the node's labels and taints are passed in.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Taint;

use crate::api::placement_pod::TAINT_KEY;
use crate::classes::ARCH_LABEL;

/// The effect of ocifit's taint: pods without the toleration are not scheduled there (running
/// pods stay).
pub(super) const EFFECT: &str = "NoSchedule";

/// The node's taints after applying `tainted`, or `None` when they are right already.
pub(crate) fn plan_taints(
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    tainted: &BTreeSet<String>,
) -> Option<Vec<Taint>> {
    let wanted = labels
        .get(ARCH_LABEL)
        .filter(|arch| tainted.contains(*arch))
        .map(|arch| Taint {
            key: TAINT_KEY.to_owned(),
            value: Some(arch.clone()),
            effect: EFFECT.to_owned(),
            time_added: None,
        });
    let ours: Vec<&Taint> = taints.iter().filter(|t| t.key == TAINT_KEY).collect();
    let right = match &wanted {
        Some(wanted) => {
            ours.len() == 1 && ours[0].value == wanted.value && ours[0].effect == wanted.effect
        }
        None => ours.is_empty(),
    };
    if right {
        return None;
    }
    let mut planned: Vec<Taint> = taints
        .iter()
        .filter(|t| t.key != TAINT_KEY)
        .cloned()
        .collect();
    planned.extend(wanted);
    Some(planned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::fixtures::map;

    fn taint(key: &str, value: &str) -> Taint {
        Taint {
            key: key.to_owned(),
            value: Some(value.to_owned()),
            effect: EFFECT.to_owned(),
            time_added: None,
        }
    }

    fn arm() -> BTreeSet<String> {
        BTreeSet::from(["arm64".to_owned()])
    }

    #[test]
    fn a_node_of_a_tainted_architecture_gets_ocifits_taint_beside_its_own() {
        let labels = map(&[(ARCH_LABEL, "arm64")]);
        let planned = plan_taints(&labels, &[taint("pool", "arm64")], &arm()).unwrap();
        assert_eq!(
            planned,
            vec![taint("pool", "arm64"), taint(TAINT_KEY, "arm64")]
        );
        assert_eq!(
            plan_taints(&labels, &planned, &arm()),
            None,
            "then nothing to do"
        );
    }

    #[test]
    fn ocifits_taint_leaves_nodes_no_policy_taints_and_others_are_kept() {
        let tainted = [taint("pool", "x"), taint(TAINT_KEY, "arm64")];
        let labels = map(&[(ARCH_LABEL, "arm64")]);
        assert_eq!(
            plan_taints(&labels, &tainted, &BTreeSet::new()),
            Some(vec![taint("pool", "x")])
        );
        let relabelled = map(&[(ARCH_LABEL, "amd64")]);
        assert_eq!(
            plan_taints(&relabelled, &tainted, &arm()),
            Some(vec![taint("pool", "x")])
        );
        assert_eq!(
            plan_taints(&relabelled, &[taint("pool", "x")], &arm()),
            None
        );
    }

    #[test]
    fn a_stale_value_is_replaced_and_a_node_without_an_architecture_is_never_tainted() {
        let labels = map(&[(ARCH_LABEL, "arm64")]);
        assert_eq!(
            plan_taints(&labels, &[taint(TAINT_KEY, "amd64")], &arm()),
            Some(vec![taint(TAINT_KEY, "arm64")])
        );
        assert_eq!(plan_taints(&BTreeMap::new(), &[], &arm()), None);
    }
}
