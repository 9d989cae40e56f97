//! A namespace's labels, for namespace selectors, when the namespace watch's store does not hold
//! the namespace yet: a namespace created a moment before its first pod (one `kubectl apply` of a
//! Namespace and a Deployment) reaches the apiserver's admission before it reaches the watch.
//! Read with `list` by name (the one namespace verb ocifit has beside `watch`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::{Api, Client};

use crate::cluster::ReadAgain;

/// The label the apiserver puts on every namespace, naming it.
pub(super) const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The labels every namespace is sure to carry: its name label.
pub(super) fn name_only(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(NAME_LABEL.to_owned(), name.to_owned())])
}

/// The labels of namespace `name`, read from the apiserver; a namespace not found has only its
/// name label, as admission assumes.
pub(super) async fn read_labels(
    client: &Client,
    name: &str,
) -> Result<BTreeMap<String, String>, kube::Error> {
    Ok(find_labels(client, name)
        .await?
        .unwrap_or_else(|| name_only(name)))
}

/// The labels of namespace `name` if it exists (one without labels has its name label).
async fn find_labels(
    client: &Client,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let listed = namespaces
        .list_metadata(&ListParams::default().fields(&format!("metadata.name={name}")))
        .await?;
    Ok(listed
        .items
        .into_iter()
        .next()
        .map(|namespace| namespace.metadata.labels.unwrap_or_else(|| name_only(name))))
}

/// Reads a namespace's labels for admission when the store does not hold it: `None` when it
/// cannot be read in time. Called on the blocking pool (the gate plans there only then).
pub(super) type ReadNamespace = ReadAgain<str, BTreeMap<String, String>>;

/// The gate's read of a namespace from the apiserver, within admission's budget of reads (a
/// namespace not found is not read again for a while); `None` outside a Tokio runtime.
pub(super) fn read_namespace(client: &Client) -> Option<ReadNamespace> {
    ReadAgain::from_apiserver(client, |client, name: &str| {
        let name = name.to_owned();
        async move { find_labels(&client, &name).await }
    })
}
