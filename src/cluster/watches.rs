//! The watches of the shared cluster view: nodes (metadata only: names and labels are all any
//! feature reads), NFD NodeFeature objects once NFD's CRD exists, and the metadata of
//! dockerconfigjson Secrets (pull credentials). Each yields raw watcher events, with backoff,
//! trimmed of what no one reads; [`reflect`](super::reflected::reflect) stores and fans them out.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use crate::engine::NodeFeature;

/// The API group and version of NFD's NodeFeature.
const NFD_API_VERSION: &str = "nfd.k8s-sigs.io/v1alpha1";
/// The field selector of the Secrets pull credentials come from.
const DOCKER_CONFIG_SECRETS: &str = "type=kubernetes.io/dockerconfigjson";

/// A watch's events, or its error (retried with backoff).
pub type Events<K> = watcher::Result<watcher::Event<K>>;

/// Node metadata events: names and labels kept, the rest of the metadata dropped.
pub fn nodes(
    client: Client,
) -> impl Stream<Item = Events<PartialObjectMeta<Node>>> + Send + 'static {
    watcher(
        Api::<PartialObjectMeta<Node>>::all(client),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(|node| {
        let metadata = &mut node.metadata;
        metadata.managed_fields = None;
        metadata.annotations = None;
        metadata.owner_references = None;
        metadata.finalizers = None;
        metadata.uid = None;
        metadata.creation_timestamp = None;
    })
}

/// dockerconfigjson Secret metadata events (only which Secret changed is read).
pub fn secrets(
    client: Client,
) -> impl Stream<Item = Events<PartialObjectMeta<Secret>>> + Send + 'static {
    watcher(
        Api::<PartialObjectMeta<Secret>>::all(client),
        watcher::Config::default().fields(DOCKER_CONFIG_SECRETS),
    )
    .default_backoff()
    .modify(|secret| {
        secret.metadata.managed_fields = None;
        secret.metadata.annotations = None;
    })
}

/// NodeFeature events once NFD's CRD is installed (looked for every `interval` until then).
pub fn node_features(
    client: Client,
    interval: Duration,
) -> impl Stream<Item = Events<NodeFeature>> + Send + 'static {
    futures_util::stream::once(async move {
        wait_for_node_features(&client, interval).await;
        tracing::info!("NFD NodeFeature API found; watching NodeFeature objects");
        watcher(Api::<NodeFeature>::all(client), watcher::Config::default())
            .default_backoff()
            .modify(|object| {
                object.metadata.managed_fields = None;
                object.metadata.annotations = None;
            })
    })
    .flatten()
}

async fn wait_for_node_features(client: &Client, interval: Duration) {
    loop {
        match client.list_api_group_resources(NFD_API_VERSION).await {
            Ok(list) if list.resources.iter().any(|r| r.name == "nodefeatures") => return,
            Ok(_) | Err(_) => tokio::time::sleep(interval).await,
        }
    }
}
