//! A real local control plane (etcd, kube-apiserver, and optionally kube-controller-manager,
//! kube-scheduler and kwok) and an OCI registry on loopback, for ocifit's tests and demo. The tools
//! come from `tools/install`'s cache; this crate starts, waits for, uses and tears down what they
//! run, and nothing of it ships in the product.
//!
//! ```no_run
//! # async fn demo() -> ocifit_testkit::Result<()> {
//! use ocifit_testkit::{Cluster, FakeNode, Registry, create_node};
//!
//! let cluster = Cluster::builder()
//!     .with_all_controllers()
//!     .with_registry(Registry::builder())
//!     .start()
//!     .await?;
//! let client = cluster.client()?;
//! create_node(&client, &FakeNode::new("node-a").label("gpu", "yes")).await?;
//! cluster.kubectl(["get", "nodes"]).await?;
//! # Ok(()) }
//! ```

pub mod affinity;
pub mod chart;
mod cluster;
mod command;
mod crds;
pub mod demo;
pub mod dev;
mod error;
pub mod flavors;
pub mod image;
mod kubeconform;
mod net;
mod node;
mod object_store;
mod objects;
pub mod pki;
mod pods;
mod process;
mod proxy;
mod registry;
pub mod review;
mod shared;
mod test_pod;
mod tools;
mod webhook;
mod webhook_durations;
mod workdir;

pub use chart::repo_root;
pub use cluster::{Cluster, ClusterBuilder, StartupTimes};
pub use crds::{apply_crd_dir, apply_crd_files};
pub use error::{Error, Result};
pub use kubeconform::{KindSchema, KubeconformSchemas, kinds_from_crd, kinds_from_openapi};
pub use net::{host_ipv4, silent_server};
pub use node::{RealNode, RunningNode};
pub use object_store::{ObjectStore, ObjectStoreBuilder};
pub use objects::{FakeNode, create_namespace, create_node, pull_secret, service_account_token};
pub use pods::{wait_for_pod_log, wait_for_pod_ready};
pub use proxy::Proxy;
pub use registry::{
    Candidates, Credentials, Descriptor, OrasArtifact, PushedImage, Registry, RegistryBuilder,
    htpasswd_line, oras_sdk_pull,
};
pub use shared::{SharedCluster, SharedClusterGuard};
pub use test_pod::{PLACEHOLDER_IMAGE, TestPod, annotation, gates};
pub use tools::{Tool, ToolError, Tools};
pub use webhook::{PodWebhook, register_pod_webhook, wait_until_admitted};
pub use webhook_durations::{WebhookDurations, webhook_durations};
