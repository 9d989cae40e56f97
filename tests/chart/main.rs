//! The Helm chart `charts/ocifit` offline (Helm from the tools cache, no cluster): `sync` keeps it
//! equal to `crds/`, `config/rbac/` and the generated files (`config/install.yaml`, the README's
//! values table); `render` checks what an install deploys (HA, hardening, probes, the webhook's
//! selectors and policies) and what each TLS mode and value changes; `values` runs `helm lint
//! --strict` and checks bad values are refused by `values.schema.json` with a message naming the
//! value. Against the real cluster: `tests/chart_cluster.rs`.

#[path = "../chart_support/mod.rs"]
mod chart_support;

mod render;
mod sync;
mod values;
