//! A cache's NetworkPolicy: the registry's port open to its own namespace and ocifit's only; for
//! a cache on object storage, the registry's egress closed but for its store.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::REGISTRY_PORT;

/// The label every namespace carries with its own name; the NetworkPolicy selects by it.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Who the registry talks with.
pub(super) struct Peers<'a> {
    /// The cache's namespace.
    pub namespace: &'a str,
    /// ocifit's namespace.
    pub own_namespace: &'a str,
    /// The only egress allowed, when it is restricted (a cache on object storage).
    pub egress: Option<Vec<NetworkPolicyEgressRule>>,
}

/// The registry's port open to pods of the cache's namespace and of ocifit's, to nothing else:
/// defence in depth where the network enforces NetworkPolicy (the credentials hold either way).
/// A registry on object storage reaches only its store.
pub(super) fn network_policy(
    metadata: ObjectMeta,
    selector: &BTreeMap<String, String>,
    peers: Peers<'_>,
) -> NetworkPolicy {
    let Peers {
        namespace,
        own_namespace,
        egress,
    } = peers;
    let mut namespaces = vec![namespace.to_string()];
    if own_namespace != namespace {
        namespaces.push(own_namespace.to_string());
    }
    let from = namespaces
        .into_iter()
        .map(|name| NetworkPolicyPeer {
            namespace_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), name)])),
                match_expressions: None,
            }),
            ..NetworkPolicyPeer::default()
        })
        .collect();
    NetworkPolicy {
        metadata,
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selector.clone()),
                match_expressions: None,
            }),
            policy_types: Some(if egress.is_some() {
                vec!["Ingress".into(), "Egress".into()]
            } else {
                vec!["Ingress".into()]
            }),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(from),
                ports: Some(vec![NetworkPolicyPort {
                    port: Some(IntOrString::Int(REGISTRY_PORT)),
                    protocol: Some("TCP".into()),
                    end_port: None,
                }]),
            }]),
            egress,
        }),
    }
}
