//! One node heartbeat as the node watch receives it, decoded and compacted into the view's node:
//! into kube's `PartialObjectMeta<Node>` (every metadata member built, `managedFields` as generic
//! JSON trees) against ocifit's `NodeMeta` (the four members the view keeps, the rest skipped).
//! The node is the memory bench's (the test kit's `realistic_flavor_node`): 30 labels, a few
//! annotations, and the managed fields the apiserver records for its creator, the node
//! controller and the heartbeat writer.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Node;
use kube::core::PartialObjectMeta;
use kube::core::watch::WatchEvent;
use ocifit::cluster::NodeMeta;
use ocifit::cluster::{ClusterNode, Strings};
use ocifit_testkit::flavors::realistic_flavor_node;
use serde_json::{Map, Value, json};

/// The labels of the memory bench's node.
fn labels() -> Map<String, Value> {
    let node = realistic_flavor_node(7).to_node();
    node.metadata
        .labels
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| (key, Value::String(value)))
        .collect()
}

/// The MODIFIED event a heartbeat causes, as a metadata-only watch receives it.
fn heartbeat() -> String {
    let labels = labels();
    let owned: Map<String, Value> = labels
        .keys()
        .map(|key| (format!("f:{key}"), json!({})))
        .collect();
    json!({
        "type": "MODIFIED",
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {
                "name": "node-00007",
                "uid": "0b6f5f4e-8a51-4a43-9d1e-6f2b4c1f9a07",
                "resourceVersion": "1843221",
                "creationTimestamp": "2026-11-25T19:00:00Z",
                "labels": labels,
                "annotations": {
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                    "kwok.x-k8s.io/node": "fake"
                },
                "managedFields": [
                    {"manager": "ocifit-testkit", "operation": "Update", "apiVersion": "v1",
                     "time": "2026-11-25T19:00:00Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:annotations": {
                        ".": {}, "f:kwok.x-k8s.io/node": {}}, "f:labels": owned}}},
                    {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                     "time": "2026-11-25T19:00:01Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:annotations": {
                        "f:node.alpha.kubernetes.io/ttl": {},
                        "f:volumes.kubernetes.io/controller-managed-attach-detach": {}}},
                        "f:spec": {"f:podCIDR": {}, "f:podCIDRs": {".": {}, "v:\"10.244.7.0/24\"": {}}}}},
                    {"manager": "memory-bench", "operation": "Update", "apiVersion": "v1",
                     "time": "2026-11-25T19:20:31Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {
                        ".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {},
                        "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}}},
                     "subresource": "status"}
                ]
            }
        }
    })
    .to_string()
}

fn decode(c: &mut Criterion) {
    let event = heartbeat();
    let mut strings = Strings::default();
    let mut group = c.benchmark_group("node heartbeat event");
    group.bench_function("PartialObjectMeta<Node> (before)", |b| {
        b.iter(|| {
            let WatchEvent::Modified(node) =
                serde_json::from_str::<WatchEvent<PartialObjectMeta<Node>>>(black_box(&event))
                    .expect("an event")
            else {
                unreachable!("a modification");
            };
            let PartialObjectMeta { metadata, .. } = node;
            let meta = NodeMeta {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: metadata.name,
                    resource_version: metadata.resource_version,
                    deletion_timestamp: metadata.deletion_timestamp,
                    labels: metadata.labels,
                    ..Default::default()
                },
            };
            black_box(ClusterNode::from_metadata(meta, &mut strings))
        })
    });
    group.bench_function("NodeMeta (now)", |b| {
        b.iter(|| {
            let WatchEvent::Modified(node) =
                serde_json::from_str::<WatchEvent<NodeMeta>>(black_box(&event)).expect("an event")
            else {
                unreachable!("a modification");
            };
            black_box(ClusterNode::from_metadata(node, &mut strings))
        })
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
