//! The Helm chart `charts/ocifit` offline (Helm from the tools cache, no cluster): `sync` keeps it
//! equal to `crds/`, `config/rbac/` and the generated files (`config/install.yaml`, the chart
//! README's values table); `render` checks what an install deploys (HA, hardening, probes, the webhook's
//! selectors and policies) and what each TLS mode and value changes; `values` runs `helm lint
//! --strict` and checks bad values are refused by `values.schema.json` with a message naming the
//! value, and an unknown key at every level the chart owns; `conventions` checks Helm's conventions
//! (names after the overrides, the ServiceAccount, security contexts, extras, the ServiceMonitor,
//! aggregated roles); `selftest` the `helm test` hook; `metadata` Chart.yaml's Artifact Hub metadata,
//! NOTES.txt and the install docs; `monitoring` checks the alerting rules with promtool and the dashboard's queries. Against the real cluster: the cluster tests' `platform::chart_cluster` and `platform::chart_wiring`.

mod conventions;
mod generated;
mod metadata;
mod monitoring;
mod pull_secrets;
mod render;
mod selftest;
mod sync;
mod values;

use ocifit_testkit::chart;
use serde_json::Value;

/// `helm template` of the chart with `sets`; the manifests, or Helm's message.
async fn render(sets: &[&str]) -> Result<String, String> {
    chart::render(sets).await.map_err(|e| e.to_string())
}

/// The YAML documents of `manifests` (empty documents dropped).
fn documents(manifests: &str) -> Vec<Value> {
    chart::documents(manifests).expect("rendered manifests are YAML")
}

/// The documents of a YAML file of the repository.
fn file_documents(relative: &str) -> Vec<Value> {
    chart::file_documents(relative).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The one document of `kind` named `name`.
fn find<'a>(documents: &'a [Value], kind: &str, name: &str) -> &'a Value {
    chart::find(documents, kind, name).unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

/// Whether a document of `kind` named `name` was rendered.
fn has(documents: &[Value], kind: &str, name: &str) -> bool {
    chart::find(documents, kind, name).is_some()
}
