//! The controller part of image selection: reconciles every ImageSelectionPolicy into per-class
//! images in its status. The decisions are pure and unit-tested (`triggers`, `schedule`,
//! `resolution_memory`; the status itself is `resolution`'s); the adapters (`artifact_fetch`,
//! `reconcile`, `runner`, `registry_source`) gather their inputs from the cluster
//! view and the registry and apply the result. It must not decide anything the webhook or
//! `ocifit resolve` decides differently: all three call `resolution`. It must not serve HTTP nor
//! parse flags.

mod artifact_fetch;
mod context;
mod reconcile;
mod registry_source;
mod resolution_memory;
mod runner;
mod schedule;
mod source;
mod trackers;
mod triggers;
pub use context::{ControllerTunables, ManagedShare};
pub use registry_source::RegistrySource;
pub(super) use runner::{ControllerDeps, controller};
pub use schedule::Backoff;
pub use source::{Request, Source, Wanted};

/// A reconcile failed against the apiserver (artifact problems are status, not errors).
#[derive(Debug, thiserror::Error)]
pub(super) enum Error {
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
