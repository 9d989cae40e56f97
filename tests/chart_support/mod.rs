//! Shared by the chart's tests: Helm from the test tools' cache run on `charts/ocifit`, the value
//! sets every test renders, rendered manifests read back as JSON documents, and the generators of
//! the files kept in sync with the chart (`config/install.yaml`, the README's values table).

#![allow(dead_code)] // each test binary uses a different part of this module

pub mod generated;

use std::path::{Path, PathBuf};

use ocifit_testkit::{Tool, Tools};
use serde_json::Value;

/// Release name and namespace of every render and install (the chart's documented defaults).
pub const RELEASE: &str = "ocifit";
pub const NAMESPACE: &str = "ocifit-system";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn chart() -> PathBuf {
    repo().join("charts/ocifit")
}

pub fn tools() -> Tools {
    Tools::locate().expect("the tools cache")
}

/// Non-default value sets, each a list of `--set` arguments, rendered and validated like the
/// defaults: every TLS mode, every optional object and every value-driven volume.
pub const VALUE_SETS: &[(&str, &[&str])] = &[
    ("defaults", &[]),
    (
        "cert-manager with a ServiceMonitor",
        &[
            "tls.mode=certManager",
            "metrics.serviceMonitor.enabled=true",
            "metrics.serviceMonitor.labels.release=prometheus",
        ],
    ),
    (
        "user-provided secret, registry CA and credentials",
        &[
            "tls.mode=secret",
            "tls.secret.name=my-webhook-tls",
            "tls.secret.caBundle=LS0tLS1CRUdJTg==",
            "registry.caSecret=registry-ca",
            "registry.credentialsSecret=regcred",
            "registry.plainHttp={registry.local:5000,10.0.0.1}",
        ],
    ),
    (
        "no CRD, no PDB, one replica, Ignore, text logs, extra selectors",
        &[
            "crds.install=false",
            "podDisruptionBudget.enabled=false",
            "replicaCount=1",
            "webhook.failurePolicy=Ignore",
            "webhook.reinvocationPolicy=Never",
            "webhook.timeoutSeconds=10",
            "logFormat=text",
            "leaderElection.enabled=false",
            "webhook.namespaceSelector.matchLabels.team=a",
            "webhook.namespaceSelector.matchExpressions[0].key=env",
            "webhook.namespaceSelector.matchExpressions[0].operator=In",
            "webhook.namespaceSelector.matchExpressions[0].values={dev,prod}",
            "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "extraArgs={--concurrency=8}",
            "priorityClassName=system-cluster-critical",
        ],
    ),
];

/// Runs helm with `args` (and the kubeconfig, when given); stdout, or the combined output as the
/// error.
pub async fn helm(args: &[&str], kubeconfig: Option<&Path>) -> Result<String, String> {
    let helm = tools().path(Tool::Helm).expect("helm (run tools/install)");
    let mut command = tokio::process::Command::new(&helm);
    command.args(args);
    // Helm's caches and plugins stay in a throwaway place, never the user's home.
    let home = std::env::temp_dir().join("ocifit-chart-tests-helm");
    command
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    if let Some(kubeconfig) = kubeconfig {
        command.env("KUBECONFIG", kubeconfig);
    }
    let output = command.output().await.expect("helm runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "helm {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr),
            stdout
        ))
    }
}

/// `--set` arguments for `helm`.
pub fn set_args<'a>(sets: &[&'a str]) -> Vec<&'a str> {
    sets.iter().flat_map(|s| ["--set", s]).collect()
}

/// `helm template` of the chart with `sets`; the manifests, or Helm's message.
pub async fn render(sets: &[&str]) -> Result<String, String> {
    let chart = chart();
    let mut args = vec![
        "template",
        RELEASE,
        chart.to_str().expect("a UTF-8 path"),
        "--namespace",
        NAMESPACE,
    ];
    args.extend(set_args(sets));
    helm(&args, None).await
}

/// The YAML documents of `manifests` as JSON values (empty documents dropped).
pub fn documents(manifests: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(manifests)
        .expect("rendered manifests are YAML")
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// The one document of `kind` named `name`.
pub fn find<'a>(documents: &'a [Value], kind: &str, name: &str) -> &'a Value {
    documents
        .iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

/// Whether a document of `kind` named `name` was rendered.
pub fn has(documents: &[Value], kind: &str, name: &str) -> bool {
    documents
        .iter()
        .any(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

/// The documents of a YAML file of the repository.
pub fn file_documents(relative: &str) -> Vec<Value> {
    let path = repo().join(relative);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("failed to read {}: {e}", path.display()));
    documents(&text)
}
