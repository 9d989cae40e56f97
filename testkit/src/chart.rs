//! The Helm chart `charts/ocifit` through the tools cache's Helm, for the offline chart tests and
//! the cluster tests alike: the value sets every test renders, `helm` itself (with its caches in a
//! throwaway place), rendering, and rendered manifests or repository files read back as JSON
//! documents.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::command::Invocation;
use crate::error::{Error, Result, io};
use crate::tools::{Tool, Tools};

/// Release name and namespace of every render and install (the chart's documented defaults).
pub const RELEASE: &str = "ocifit";
pub const NAMESPACE: &str = "ocifit-system";

/// The repository's root directory (the test kit lives in `testkit/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The chart's directory.
pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/ocifit")
}

/// Host network, and an extra volume, mount, env variable and argument for the controller.
pub const HOST_NETWORK_AND_EXTRAS: &[&str] = &[
    "hostNetwork=true",
    "extraVolumes[0].name=bundle",
    "extraVolumes[0].configMap.name=ca-bundle",
    "extraVolumeMounts[0].name=bundle",
    "extraVolumeMounts[0].mountPath=/etc/bundle",
    "extraEnv[0].name=HTTPS_PROXY",
    "extraEnv[0].value=http://proxy:3128",
    "extraArgs={--concurrency=8}",
];

/// A ServiceMonitor in `monitoring`, with its scrape settings.
pub const SERVICE_MONITOR: &[&str] = &[
    "monitoring.serviceMonitor.enabled=true",
    "monitoring.serviceMonitor.namespace=monitoring",
    "monitoring.serviceMonitor.scrapeTimeout=10s",
    "monitoring.serviceMonitor.relabelings[0].targetLabel=cluster",
    "monitoring.serviceMonitor.relabelings[0].replacement=east",
    "monitoring.serviceMonitor.metricRelabelings[0].action=drop",
    "monitoring.serviceMonitor.metricRelabelings[0].regex=process_.*",
    "monitoring.serviceMonitor.metricRelabelings[0].sourceLabels={__name__}",
];

/// Non-default value sets, each a list of `--set` arguments (in groups, joined with `concat`), rendered and validated like the
/// defaults: every TLS mode, every optional object and every value-driven volume.
pub const VALUE_SETS: &[(&str, &[&[&str]])] = &[
    ("defaults", &[]),
    (
        "cert-manager with a ServiceMonitor",
        &[&[
            "tls.mode=certManager",
            "metrics.serviceMonitor.enabled=true",
            "metrics.serviceMonitor.labels.release=prometheus",
        ]],
    ),
    (
        "monitoring: alerting rules as a PrometheusRule, the dashboard",
        &[&[
            "monitoring.enabled=true",
            "monitoring.rules.kind=PrometheusRule",
            "monitoring.labels.release=prometheus",
        ]],
    ),
    (
        "monitoring: alerting rules in a ConfigMap, the dashboard unlabelled",
        &[&[
            "monitoring.enabled=true",
            "monitoring.dashboard.labels=null",
        ]],
    ),
    (
        "user-provided secret, registry CA and credentials",
        &[&[
            "tls.mode=secret",
            "tls.secret.name=my-webhook-tls",
            "tls.secret.caBundle=LS0tLS1CRUdJTg==",
            "registry.caSecret=registry-ca",
            "registry.credentialsSecret=regcred",
            "registry.plainHttp={registry.local:5000,10.0.0.1}",
            r#"registry.mirrors.docker\.io=server = "https://registry-1.docker.io""#,
            r#"registry.mirrors.registry\.local_5000_=[host."http://10.0.0.1:5000"]"#,
            "placement.dockerConfigSecret=placement-regcred",
        ]],
    ),
    (
        "no CRD, no PDB, one replica, Ignore, text logs, extra selectors",
        &[&[
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
            "placement.webhook.reinvocationPolicy=Never",
            "placement.webhook.objectSelector.matchLabels.placement=enabled",
            "placement.webhook.objectSelector.matchExpressions[0].key=tier",
            "placement.webhook.objectSelector.matchExpressions[0].operator=Exists",
            "controller.maxRetryInterval=1d",
            "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "extraArgs={--concurrency=8}",
            "priorityClassName=system-cluster-critical",
        ]],
    ),
    (
        "every switch on: names, ServiceAccount, host network, extras, ServiceMonitor, rules",
        &[
            HOST_NETWORK_AND_EXTRAS,
            SERVICE_MONITOR,
            &[
                "fullnameOverride=acme",
                "serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account=ocifit@p.iam.gserviceaccount.com",
                "podSecurityContext.fsGroup=65532",
                "monitoring.enabled=true",
                "monitoring.rules.kind=PrometheusRule",
                "pullSecrets.namespaces={*}",
                "webhook.clientCASecret=webhook-client-ca",
                "registry.caSecret=registry-ca",
                "registry.credentialsSecret=regcred",
                "placement.dockerConfigSecret=placement-regcred",
                "placement.webhook.objectSelector.matchLabels.tier=web",
            ],
        ],
    ),
];

/// Runs helm with `args` (and the kubeconfig, when given); its stdout, or an error carrying
/// Helm's message.
pub async fn helm(args: &[&str], kubeconfig: Option<&Path>) -> Result<String> {
    let helm = Tools::locate()?.path(Tool::Helm)?;
    // Helm's caches and plugins stay in a throwaway place, never the user's home.
    let home = std::env::temp_dir().join("ocifit-chart-tests-helm");
    let mut command = Invocation::new(helm)
        .args(args.iter().copied())
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    if let Some(kubeconfig) = kubeconfig {
        command = command.env("KUBECONFIG", kubeconfig);
    }
    command.run().await
}

/// `--set` arguments for `helm`.
pub fn set_args<'a>(sets: &[&'a str]) -> Vec<&'a str> {
    sets.iter().flat_map(|s| ["--set", s]).collect()
}

/// `helm template` of the chart with `sets`: the manifests, hooks included.
pub async fn render(sets: &[&str]) -> Result<String> {
    render_with(&[], sets).await
}

/// `helm template` of the chart with `sets` and no hooks: what `kubectl apply` of plain
/// manifests would create (there is no uninstall for a hook to run on).
pub async fn render_without_hooks(sets: &[&str]) -> Result<String> {
    render_with(&["--no-hooks"], sets).await
}

async fn render_with(flags: &[&str], sets: &[&str]) -> Result<String> {
    let chart = chart_dir();
    let mut args = vec![
        "template",
        RELEASE,
        path_str(&chart)?,
        "--namespace",
        NAMESPACE,
    ];
    args.extend(flags);
    args.extend(set_args(sets));
    helm(&args, None).await
}

/// `helm install` of `chart` (the repository's, or a copy) with `sets` into the cluster of
/// `kubeconfig`, creating the namespace.
pub async fn install(chart: &Path, sets: &[&str], kubeconfig: &Path) -> Result<String> {
    let mut args = vec![
        "install",
        RELEASE,
        path_str(chart)?,
        "--namespace",
        NAMESPACE,
        "--create-namespace",
    ];
    args.extend(set_args(sets));
    helm(&args, Some(kubeconfig)).await
}

/// The YAML documents of `manifests` as JSON values (empty documents dropped).
pub fn documents(manifests: &str) -> Result<Vec<Value>> {
    let documents = serde_saphyr::from_multiple::<Value>(manifests).map_err(|e| Error::Format {
        action: "read rendered manifests as YAML".into(),
        message: e.to_string(),
    })?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// The documents of a YAML file of the repository (`relative` to its root).
pub fn file_documents(relative: &str) -> Result<Vec<Value>> {
    let path = repo_root().join(relative);
    let text = std::fs::read_to_string(&path).map_err(io("read", &path))?;
    documents(&text)
}

/// The one document of `kind` named `name`, if rendered.
pub fn find<'a>(documents: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    documents
        .iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str().ok_or_else(|| Error::Format {
        action: format!("pass {} to helm", path.display()),
        message: "the path is not UTF-8".into(),
    })
}

/// A query of the chart's Grafana dashboard as Prometheus reads it once Grafana has filled in its
/// variables with "All" (`$job`, `$namespace`, `$instance`: any) and `$__rate_interval` with
/// `rate_interval`.
pub fn grafana_query(expr: &str, rate_interval: &str) -> String {
    expr.replace("$__rate_interval", rate_interval)
        .replace("$job", ".*")
        .replace("$namespace", ".*")
        .replace("$instance", ".*")
}
