//! What every feature stands on: the chart, the CRDs, RBAC, leader election, supervision, webhook
//! certificates and latency, monitoring, `ocifit migrate`, the scale run, the demo, the fault suite,
//! and the test kit's own cluster, admission path and real node.

mod admission_path;
mod chart_cluster;
mod chart_real_node;
mod chart_wiring;
mod crds;
mod demo;
mod faults;
mod kubeconfig;
mod leader;
mod least_power;
mod migrate_apply;
mod monitoring_alerts;
mod rbac;
mod real_node;
mod real_node_teardown;
mod scale_run;
mod scheduling;
mod supervision;
mod webhook_certificates;
mod webhook_client_certificate;
mod webhook_latency;
