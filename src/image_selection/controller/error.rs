//! The controller's one error: a reconcile that failed against the apiserver (artifact
//! problems are status, not errors).

/// A reconcile failed against the apiserver (artifact problems are status, not errors).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pull Secret could not be read (other than missing or forbidden).
    #[error("failed to read the pull secret {namespace}/{name}")]
    ReadSecret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The status could not be applied.
    #[error("failed to write the status of policy {name}")]
    WriteStatus {
        name: String,
        #[source]
        source: kube::Error,
    },
}
