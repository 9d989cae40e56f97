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
//! (`SharedCluster`). Run one module with `cargo test --workspace --test cluster controller_flavors::`
//! (with `--workspace`, the features and so the build are those of `tools/test`).

mod support;

mod artifact_from_outside;
mod artifact_restricted;
mod artifact_seed_examples;
mod artifact_step_code;
mod artifact_workflow;
mod chart_cluster;
mod chart_real_node;
mod chart_wiring;
mod cluster_artifact_cache;
mod cluster_crd;
mod cluster_scheduling;
mod cluster_webhook;
mod controller_candidates;
mod controller_failures;
mod controller_flavors;
mod controller_leader;
mod controller_nfd;
mod controller_rbac;
mod demo;
mod faults;
mod migrate_apply;
mod monitoring_alerts;
mod placement_e2e;
mod placement_node_labels;
mod placement_real_node;
mod placement_registry;
mod placement_taints;
mod placement_way_out;
mod placement_with_selection;
mod real_node;
mod real_node_teardown;
mod scale_run;
mod supervision;
mod webhook_certificates;
mod webhook_client_certificate;
mod webhook_e2e;
mod webhook_latency;
