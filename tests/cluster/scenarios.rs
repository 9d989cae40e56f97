//! ocifit's real-cluster tests: every scenario that starts the test kit's local control plane
//! (etcd, kube-apiserver, and where a scenario needs them kube-controller-manager, kube-scheduler
//! and kwok) with a real registry, as modules of one test binary. `support` holds what the
//! scenarios share: `Env` (a cluster with the CRD and a registry), `Controller` (`ocifit run` as a
//! real process: this crate's copy of the binary), typed builders for policies, pods and nodes, and a
//! TLS client.
//!
//! Each module keeps the cluster arrangement it had as a test binary of its own: a scenario that
//! runs `ocifit run` starts its own cluster (a controller reconciles every policy, so two cannot
//! share one); the modules whose tests work in their own namespaces share one cluster per module
//! (`SharedCluster`). The scenarios are grouped by feature (`image_selection`, `placement`,
//! `artifact_cache`) and `platform` (what every feature stands on: the chart, the CRDs, the node,
//! certificates, supervision, the fault suite, the demo, monitoring). Run one module with
//! `cargo test --workspace --test cluster image_selection::flavors::` (with `--workspace`, the
//! features and so the build are those of `tools/test`).

/// The crate's library (`support/`), under the name the scenarios use, with the binary they run.
mod support {
    pub use ocifit_cluster_tests::*;

    /// The `ocifit` binary the scenarios run: this crate's copy of `src/main.rs` (see its
    /// Cargo.toml).
    pub fn ocifit_binary() -> &'static str {
        env!("CARGO_BIN_EXE_ocifit-under-test")
    }

    /// `ocifit explain pod NAME -n NAMESPACE -o json` against the cluster `kubeconfig` names, as
    /// a user runs it: the report, which it must have printed with exit 0.
    pub async fn explain_pod(
        kubeconfig: &std::path::Path,
        namespace: &str,
        name: &str,
    ) -> serde_json::Value {
        let output = tokio::process::Command::new(ocifit_binary())
            .args(["explain", "pod", name, "-n", namespace, "-o", "json"])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .output()
            .await
            .expect("ocifit explain runs");
        let stdout = succeeded(&format!("ocifit explain pod {namespace}/{name}"), &output);
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("explain printed no JSON ({e}): {stdout}"))
    }
}

mod artifact_cache;
mod image_selection;
mod placement;
mod platform;
