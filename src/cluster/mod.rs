//! The cluster view every feature reads: the node and NodeFeature stores with their watches and
//! change subscriptions (`reflected`), leadership (`leader`), the node inventory the engine reads
//! (`node_inputs`), Events (`events`), the one way Secrets are read (`secrets`), admission's
//! bounded read of what a store may lag (`read_again`) and the metadata trim
//! ([`identity_and_labels`]). A feature takes a [`ClusterView`], [`Reflected::subscribe`]s to
//! changes (never polls), watches its own kinds with [`reflected::reflect`], and acts only while
//! [`leader::Leadership::is_leader`]. Decides nothing about images, pods or policies.

mod events;
mod gates;
mod held;
mod leader;
mod nodes;
mod read_again;
mod reflected;
mod secrets;
mod watches;
pub use events::{EventReporter, Notice, Notices, queue};
pub use gates::{ATTEMPTS, patch_as_read};
pub use gates::{Gate, GateError, HoldFailure, Mark, Scope, held_at, release_all, unhold};
pub use held::{Kept, Keys, Spec, changes, guarded, trim};
pub use leader::{LeaderTask, Leadership, LeaseSettings, elect};
pub use nodes::node_inputs;
pub use nodes::{ClusterNode, NodeMeta, Strings};
pub use read_again::ReadAgain;
pub use reflected::{Change, Reflected, reflect};
pub(crate) use reflected::{held_for, held_pods_controller};
pub use secrets::{SecretNamespaces, SecretRead, Secrets};
pub use watches::{Events, UNTRUSTED_LIST_PAGE};
pub use watches::{identity_and_labels, pod_selector};

use std::time::Duration;

use kube::Client;

use crate::engine::NodeFeature;
use crate::process::{Shutdown, Tasks, until};

/// How the view is kept.
#[derive(Clone, Debug)]
pub struct ViewSettings {
    /// Namespace of nfd-master, whose NodeFeature objects are merged first.
    pub nfd_namespace: String,
    /// How often to look for the NodeFeature API until NFD's CRD is installed.
    pub nfd_discovery_interval: Duration,
    /// The namespaces Secrets may be read in.
    pub secret_namespaces: SecretNamespaces,
}

impl Default for ViewSettings {
    fn default() -> Self {
        ViewSettings {
            nfd_namespace: "node-feature-discovery".to_owned(),
            nfd_discovery_interval: Duration::from_secs(15),
            secret_namespaces: SecretNamespaces::default(),
        }
    }
}

/// What several features read from the API, shared. Cheap to clone.
#[derive(Clone)]
pub struct ClusterView {
    pub client: Client,
    /// Nodes: names and labels.
    pub nodes: Reflected<ClusterNode>,
    /// NFD NodeFeature objects (empty while NFD's CRD is not installed).
    pub node_features: Reflected<NodeFeature>,
    /// Whether this replica leads.
    pub leadership: Leadership,
    /// How the view is kept (the NodeFeature merge order reads `nfd_namespace`).
    pub settings: ViewSettings,
}

impl ClusterView {
    /// The reader of Secrets, limited to the allowed namespaces.
    pub fn secrets(&self) -> Secrets {
        Secrets::new(self.client.clone(), self.settings.secret_namespaces.clone())
    }

    /// The view and the tasks that keep it (the node and NodeFeature watches, until
    /// `shutdown`).
    pub fn watch(
        client: Client,
        leadership: Leadership,
        settings: ViewSettings,
        shutdown: Shutdown,
    ) -> (ClusterView, Tasks) {
        let (nodes, node_task) = reflect(watches::nodes(client.clone()), "nodes");
        let (node_features, feature_task) = reflect(
            watches::node_features(client.clone(), settings.nfd_discovery_interval),
            "nodefeatures",
        );
        let view = ClusterView {
            client,
            nodes,
            node_features,
            leadership,
            settings,
        };
        (
            view,
            vec![
                ("node watch", until(shutdown.clone(), node_task)),
                ("NodeFeature watch", until(shutdown, feature_task)),
            ],
        )
    }
}
