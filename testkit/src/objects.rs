//! Kubernetes objects tests need before they can start: fake Nodes with labels, resources and a
//! Ready condition (kwok, when running, keeps them Ready and runs their pods), and namespaces.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    Namespace, Node, NodeCondition, NodeStatus, Secret, ServiceAccount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::error::{Error, Result, kube as kube_error};

/// A Node to create: a name, labels and the resources it offers.
#[derive(Clone, Debug)]
pub struct FakeNode {
    name: String,
    labels: BTreeMap<String, String>,
    cpu: String,
    memory: String,
    pods: String,
}

impl FakeNode {
    /// A node offering 4 CPUs, 16 GiB and 110 pods, labelled only with its hostname.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            labels: BTreeMap::from([("kubernetes.io/hostname".to_owned(), name.to_owned())]),
            cpu: "4".into(),
            memory: "16Gi".into(),
            pods: "110".into(),
        }
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Sets capacity and allocatable (quantities as Kubernetes writes them: `"4"`, `"16Gi"`, `"110"`).
    pub fn resources(mut self, cpu: &str, memory: &str, pods: &str) -> Self {
        self.cpu = cpu.to_owned();
        self.memory = memory.to_owned();
        self.pods = pods.to_owned();
        self
    }

    /// The Node object, Ready.
    pub fn to_node(&self) -> Node {
        let resources = BTreeMap::from([
            ("cpu".to_owned(), Quantity(self.cpu.clone())),
            ("memory".to_owned(), Quantity(self.memory.clone())),
            ("pods".to_owned(), Quantity(self.pods.clone())),
        ]);
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(self.labels.clone()),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(NodeStatus {
                allocatable: Some(resources.clone()),
                capacity: Some(resources),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    reason: Some("KubeletReady".into()),
                    message: Some("a fake node made by ocifit-testkit".into()),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
        }
    }
}

/// A pull Secret (`kubernetes.io/dockerconfigjson`) named `name` logging in to `registry` as
/// `user` with `password`.
pub fn pull_secret(name: &str, registry: &str, user: &str, password: &str) -> Secret {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let config = serde_json::json!({"auths": {registry: {"auth": auth}}}).to_string();
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_owned(),
            ByteString(config.into_bytes()),
        )])),
        ..Secret::default()
    }
}

/// Creates the node; the apiserver keeps the status given on create.
pub async fn create_node(client: &Client, node: &FakeNode) -> Result<Node> {
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node.to_node())
        .await
        .map_err(kube_error(format!("create node {}", node.name)))
}

/// Creates a namespace.
pub async fn create_namespace(client: &Client, name: &str) -> Result<Namespace> {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .map_err(kube_error(format!("create namespace {name}")))
}

/// A token for the ServiceAccount `namespace/name`, valid for an hour: tests use it to act as
/// exactly that identity (and nothing more) against the apiserver.
pub async fn service_account_token(client: &Client, namespace: &str, name: &str) -> Result<String> {
    let action = format!("request a token for the ServiceAccount {namespace}/{name}");
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(kube_error(action.clone()))?
        .status
        .and_then(|status| status.token)
        .ok_or(Error::Format {
            action,
            message: "the apiserver's answer has no token".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_node_offers_its_resources_and_is_ready() {
        let node = FakeNode::new("n1")
            .label("ocifit.io/class", "gpu")
            .resources("8", "32Gi", "50")
            .to_node();
        let labels = node.metadata.labels.unwrap();
        assert_eq!(labels["ocifit.io/class"], "gpu");
        assert_eq!(labels["kubernetes.io/hostname"], "n1");
        let status = node.status.unwrap();
        assert_eq!(status.allocatable.unwrap()["cpu"], Quantity("8".into()));
        assert_eq!(status.capacity.unwrap()["memory"], Quantity("32Gi".into()));
        let ready = &status.conditions.unwrap()[0];
        assert_eq!(
            (ready.type_.as_str(), ready.status.as_str()),
            ("Ready", "True")
        );
    }
}
