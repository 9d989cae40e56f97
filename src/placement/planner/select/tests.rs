use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::json;

use super::*;
use crate::placement::fixtures::{labelled, map, pod, policy};

const OWN: &str = "ocifit-system";

fn chosen<'p>(selection: Selection<'p>) -> Option<&'p str> {
    match selection {
        Selection::Selected(policy) => Some(&policy.name),
        _ => None,
    }
}

fn in_namespace<'a>(name: &'a str, labels: &'a BTreeMap<String, String>) -> Namespace<'a> {
    Namespace { name, labels }
}

#[test]
fn the_highest_priority_wins_then_the_first_name() {
    let policies = [
        policy("zeta", json!({"priority": 5})),
        policy("alpha", json!({"priority": 1})),
        policy("beta", json!({"priority": 5})),
    ];
    let labels = map(&[]);
    let selection = select(
        &pod(&[("web", "app:v1")]),
        in_namespace("apps", &labels),
        OWN,
        &policies,
    );
    assert_eq!(chosen(selection), Some("beta"));
}

#[test]
fn a_policy_whose_selectors_do_not_match_is_skipped() {
    let policies = [
        policy(
            "strict",
            json!({"priority": 9, "podSelector": {"matchLabels": {"tier": "db"}}}),
        ),
        policy(
            "web-ns",
            json!({"namespaceSelector": {"matchLabels": {"team": "web"}}}),
        ),
    ];
    let web = map(&[("team", "web")]);
    let other = map(&[("team", "data")]);
    let pod = labelled(pod(&[("web", "app:v1")]), &[("tier", "web")]);
    assert_eq!(
        chosen(select(&pod, in_namespace("a", &web), OWN, &policies)),
        Some("web-ns")
    );
    assert_eq!(
        select(&pod, in_namespace("b", &other), OWN, &policies),
        Selection::Unselected
    );
}

#[test]
fn always_excluded_pods_are_never_selected_by_an_all_selecting_policy() {
    let policies = [policy("all", json!({}))];
    let labels = map(&[]);
    let base = pod(&[("web", "app:v1")]);

    let mut daemon = base.clone();
    daemon.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "DaemonSet".into(),
        name: "agent".into(),
        uid: "u".into(),
        ..OwnerReference::default()
    }]);
    let mut bound = base.clone();
    bound.spec.as_mut().unwrap().node_name = Some("node-1".into());
    let mut mirror = base.clone();
    mirror.metadata.annotations = Some(map(&[("kubernetes.io/config.mirror", "abc")]));
    let opted_out = labelled(base.clone(), &[("placement.ocifit.io/enabled", "false")]);

    let cases = [
        (&base, "kube-system", Exclusion::SystemNamespace),
        (&base, OWN, Exclusion::OwnNamespace),
        (&daemon, "apps", Exclusion::DaemonSet),
        (&bound, "apps", Exclusion::BoundToNode),
        (&mirror, "apps", Exclusion::Mirror),
        (&opted_out, "apps", Exclusion::OptedOut),
    ];
    for (pod, namespace, expected) in cases {
        assert_eq!(
            select(pod, in_namespace(namespace, &labels), OWN, &policies),
            Selection::Excluded(expected),
            "{expected}"
        );
    }
}

#[test]
fn a_namespace_labelled_out_keeps_all_its_pods_out_of_every_policy_and_the_recheck() {
    let everywhere = policy("all", json!({}));
    let policies = [everywhere.clone()];
    let base = pod(&[("web", "app:v1")]);
    let out = map(&[(ENABLED_LABEL, OPT_OUT_VALUE), ("team", "a")]);
    assert_eq!(
        select(&base, in_namespace("legacy", &out), OWN, &policies),
        Selection::Excluded(Exclusion::NamespaceOptedOut)
    );
    assert_eq!(
        recheck(&base, in_namespace("legacy", &out), OWN, &everywhere),
        Err(NotSelected::Excluded(Exclusion::NamespaceOptedOut)),
        "a pod gated by hand there is released untouched"
    );
    let on = map(&[(ENABLED_LABEL, "true")]);
    assert!(matches!(
        select(&base, in_namespace("legacy", &on), OWN, &policies),
        Selection::Selected(_)
    ));
}

#[test]
fn near_misses_of_the_exclusions_are_selected() {
    let policies = [policy("all", json!({}))];
    let labels = map(&[]);
    let base = pod(&[("web", "app:v1")]);
    let mut replica_set = base.clone();
    replica_set.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "web-1".into(),
        uid: "u".into(),
        ..OwnerReference::default()
    }]);
    let mut empty_node_name = base.clone();
    empty_node_name.spec.as_mut().unwrap().node_name = Some(String::new());
    let opted_in = labelled(base.clone(), &[("placement.ocifit.io/enabled", "true")]);
    for pod in [&replica_set, &empty_node_name, &opted_in] {
        assert_eq!(
            chosen(select(
                pod,
                in_namespace("kube-public", &labels),
                OWN,
                &policies
            )),
            Some("all")
        );
    }
}

#[test]
fn exclusions_say_why_in_a_sentence() {
    assert_eq!(
        Exclusion::BoundToNode.to_string(),
        "the pod is already bound to a node (spec.nodeName)"
    );
}

#[test]
fn a_gated_pod_naming_a_policy_that_does_not_select_it_is_refused_by_the_recheck() {
    let web_only = policy(
        "web-only",
        json!({
            "namespaceSelector": {"matchLabels": {"team": "web"}},
            "podSelector": {"matchLabels": {"tier": "web"}},
        }),
    );
    let web = map(&[("team", "web")]);
    let other = map(&[("team", "data")]);
    let named = |labels: &[(&str, &str)]| {
        let mut all = labels.to_vec();
        all.push((POLICY_LABEL, "web-only"));
        labelled(pod(&[("web", "app:v1")]), &all)
    };
    assert_eq!(
        recheck(
            &named(&[("tier", "web")]),
            in_namespace("a", &web),
            OWN,
            &web_only
        ),
        Ok(())
    );
    assert_eq!(
        recheck(
            &named(&[("tier", "web")]),
            in_namespace("b", &other),
            OWN,
            &web_only
        ),
        Err(NotSelected::Foreign {
            policy: "web-only".into(),
            selector: "namespaceSelector"
        })
    );
    assert_eq!(
        recheck(
            &named(&[("tier", "db")]),
            in_namespace("a", &web),
            OWN,
            &web_only
        ),
        Err(NotSelected::Foreign {
            policy: "web-only".into(),
            selector: "podSelector"
        })
    );
    let opted_out = named(&[("tier", "web"), (ENABLED_LABEL, OPT_OUT_VALUE)]);
    assert_eq!(
        recheck(&opted_out, in_namespace("a", &web), OWN, &web_only),
        Err(NotSelected::Excluded(Exclusion::OptedOut))
    );
    let everywhere = policy("everywhere", json!({}));
    let system = map(&[]);
    assert_eq!(
        recheck(
            &named(&[]),
            in_namespace("kube-system", &system),
            OWN,
            &everywhere
        ),
        Err(NotSelected::Excluded(Exclusion::SystemNamespace))
    );
    assert_eq!(
        recheck(&named(&[]), in_namespace(OWN, &system), OWN, &everywhere),
        Err(NotSelected::Excluded(Exclusion::OwnNamespace))
    );
}

#[test]
fn the_recheck_matches_the_labels_admission_saw_without_the_tracking_label() {
    let unlabelled_only = policy(
        "unlabelled-only",
        json!({"podSelector": {"matchExpressions": [{"key": POLICY_LABEL, "operator": "DoesNotExist"}]}}),
    );
    let labels = map(&[]);
    let gated = labelled(
        pod(&[("web", "app:v1")]),
        &[(POLICY_LABEL, "unlabelled-only")],
    );
    assert_eq!(
        recheck(&gated, in_namespace("a", &labels), OWN, &unlabelled_only),
        Ok(())
    );
}
