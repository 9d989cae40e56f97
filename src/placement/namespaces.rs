//! A namespace's labels, for namespace selectors, when the namespace watch's store does not hold
//! the namespace yet: a namespace created a moment before its first pod (one `kubectl apply` of a
//! Namespace and a Deployment) reaches the apiserver's admission before it reaches the watch.
//! Read with `list` by name (the one namespace verb ocifit has beside `watch`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::{Api, Client};

/// The label the apiserver puts on every namespace, naming it.
pub const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The labels every namespace is sure to carry: its name label.
pub fn name_only(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(NAME_LABEL.to_owned(), name.to_owned())])
}

/// The labels of namespace `name`, read from the apiserver; a namespace not found has only its
/// name label, as admission assumes.
pub async fn read_labels(
    client: &Client,
    name: &str,
) -> Result<BTreeMap<String, String>, kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let listed = namespaces
        .list_metadata(&ListParams::default().fields(&format!("metadata.name={name}")))
        .await?;
    Ok(listed
        .items
        .into_iter()
        .find_map(|namespace| namespace.metadata.labels)
        .unwrap_or_else(|| name_only(name)))
}

/// Reads a namespace's labels for admission when the store does not hold it: `None` when it
/// cannot be read in time. Called on the blocking pool (the gate plans there only then).
#[derive(Clone)]
pub struct ReadNamespace(pub Arc<ReadLabels>);

/// The read behind [`ReadNamespace`].
pub type ReadLabels = dyn Fn(&str) -> Option<BTreeMap<String, String>> + Send + Sync;

/// How long the gate waits to read a namespace: well inside the request's deadline.
const READ_WITHIN: Duration = Duration::from_millis(500);

impl ReadNamespace {
    /// A read from the apiserver; `None` outside a Tokio runtime.
    pub fn from_apiserver(client: &Client) -> Option<ReadNamespace> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let client = client.clone();
        Some(ReadNamespace(Arc::new(move |name| {
            // On the blocking pool (`admission::server`), where waiting on the runtime is allowed.
            match runtime.block_on(tokio::time::timeout(
                READ_WITHIN,
                read_labels(&client, name),
            )) {
                Ok(Ok(labels)) => Some(labels),
                Ok(Err(error)) => {
                    tracing::debug!(namespace = %name, %error, "namespace not read for the gate");
                    None
                }
                Err(_) => None,
            }
        })))
    }
}

impl fmt::Debug for ReadNamespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReadNamespace")
    }
}
