//! How large a pod's node selection may be for planning: matching costs each node every
//! requirement and scans each `In`/`NotIn` list, and a pod's author chooses both. The limits sit
//! well above what real pods use and keep one pod's worst case, over thousands of nodes, to a few
//! million comparisons.

use k8s_openapi::api::core::v1::PodSpec;

use super::error::SelectionError;

/// Terms of the required node affinity.
pub(super) const MAX_TERMS: usize = 64;
/// Requirements: nodeSelector entries, matchExpressions and matchFields, over all terms.
pub(super) const MAX_REQUIREMENTS: usize = 512;
/// Values of all requirements together.
pub(super) const MAX_VALUES: usize = 2048;

/// Checks the pod's nodeSelector and required node affinity against the limits.
pub(super) fn check(spec: &PodSpec) -> Result<(), SelectionError> {
    let terms = super::required_terms(spec);
    over(
        terms.len(),
        MAX_TERMS,
        "terms in its required node affinity",
    )?;
    let requirements = terms.iter().flat_map(|term| {
        term.match_expressions
            .iter()
            .flatten()
            .chain(term.match_fields.iter().flatten())
    });
    let (count, values) = requirements.fold((0usize, 0usize), |(count, values), r| {
        (count + 1, values + r.values.as_ref().map_or(0, Vec::len))
    });
    let selector = spec.node_selector.as_ref().map_or(0, |s| s.len());
    over(
        count + selector,
        MAX_REQUIREMENTS,
        "requirements (nodeSelector entries and affinity expressions)",
    )?;
    over(values, MAX_VALUES, "values in its required node affinity")
}

fn over(count: usize, limit: usize, what: &'static str) -> Result<(), SelectionError> {
    if count > limit {
        return Err(SelectionError::TooLarge { what, count, limit });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    };

    use super::*;
    use crate::classes::selection::Placement;

    fn spec(terms: usize, expressions: usize, values: usize, selector: usize) -> PodSpec {
        let requirement = NodeSelectorRequirement {
            key: "zone".into(),
            operator: "NotIn".into(),
            values: Some((0..values).map(|i| format!("z{i}")).collect()),
        };
        let term = NodeSelectorTerm {
            match_expressions: Some(vec![requirement; expressions]),
            match_fields: None,
        };
        PodSpec {
            node_selector: Some(
                (0..selector)
                    .map(|i| (format!("k{i}"), "v".into()))
                    .collect(),
            ),
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![term; terms],
                    }),
                    ..NodeAffinity::default()
                }),
                ..Affinity::default()
            }),
            ..PodSpec::default()
        }
    }

    fn refused(spec: &PodSpec) -> String {
        Placement::from_pod_spec(spec).unwrap_err().to_string()
    }

    #[test]
    fn selections_up_to_the_limits_are_planned() {
        assert!(Placement::from_pod_spec(&spec(1, 1, MAX_VALUES, 0)).is_ok());
        assert!(Placement::from_pod_spec(&spec(MAX_TERMS, 1, 1, 0)).is_ok());
        assert!(Placement::from_pod_spec(&spec(1, MAX_REQUIREMENTS - 8, 1, 8)).is_ok());
    }

    #[test]
    fn a_selection_over_a_limit_is_refused_naming_it() {
        assert_eq!(
            refused(&spec(1, 1, 100_000, 0)),
            "the pod's node selection is too large to plan: 100000 values in its required node \
             affinity, over ocifit's limit of 2048"
        );
        assert!(refused(&spec(MAX_TERMS + 1, 1, 1, 0)).contains("65 terms"));
        assert!(
            refused(&spec(1, MAX_REQUIREMENTS, 1, 1))
                .contains("513 requirements (nodeSelector entries and affinity expressions)")
        );
    }
}
