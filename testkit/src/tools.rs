//! Finds the test tools that `tools/install` builds, by the versions pinned in `tools/versions.env`
//! (embedded here, so the test kit and the installer cannot disagree). It only locates files: it never
//! builds, downloads or runs anything.

use std::path::{Path, PathBuf};

/// The installer's version pins, read at compile time.
const VERSIONS: &str = include_str!("../../tools/versions.env");

/// The stage files kwok needs (it exits with "no stages found" without them); `tools/install` copies
/// them out of kwok's module.
const KWOK_STAGES: [&str; 4] = [
    "node-initialize.yaml",
    "pod-ready.yaml",
    "pod-complete.yaml",
    "pod-delete.yaml",
];

/// A test tool that `tools/install` provides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// etcd, the apiserver's store.
    Etcd,
    /// kube-apiserver.
    KubeApiserver,
    /// kube-controller-manager (Deployments, ReplicaSets, ServiceAccounts).
    KubeControllerManager,
    /// kube-scheduler.
    KubeScheduler,
    /// kubectl, built from the same Kubernetes version.
    Kubectl,
    /// kwok, fake kubelets.
    Kwok,
    /// The kubelet of the real node, built from the same Kubernetes version.
    Kubelet,
    /// kube-proxy of the real node (iptables mode).
    KubeProxy,
    /// The pod sandbox program, built from the Kubernetes module's `build/pause`.
    Pause,
    /// distribution's `registry`.
    Registry,
    /// regctl, a registry client.
    Regctl,
    /// crane, a registry client.
    Crane,
    /// Helm.
    Helm,
    /// kubeconform, offline manifest validation.
    Kubeconform,
    /// The Python interpreter of the venv holding the ORAS Python SDK.
    OrasPython,
    /// NFD's API CRDs (NodeFeature, NodeFeatureGroup, NodeFeatureRule), from NFD's Go module.
    NfdCrds,
    /// cert-manager's Issuer and Certificate CRDs, from its Go module (for the chart's checks).
    CertManagerCrds,
    /// The Prometheus Operator's ServiceMonitor CRD, from its Go module (for the chart's checks).
    ServiceMonitorCrd,
    /// actionlint, which checks the GitHub workflows.
    Actionlint,
    /// The Prometheus Operator's PrometheusRule CRD, from its Go module (for the chart's checks).
    PrometheusRuleCrd,
    /// promtool, which checks and unit-tests the chart's alerting rules.
    Promtool,
    /// Prometheus itself.
    Prometheus,
    /// SeaweedFS's `weed`, an S3-compatible object store for the artifact cache's `storage.s3`.
    Weed,
}

impl Tool {
    /// Every tool, in the installer's order of importance for the cluster.
    pub const ALL: [Tool; 23] = [
        Tool::Etcd,
        Tool::KubeApiserver,
        Tool::KubeControllerManager,
        Tool::KubeScheduler,
        Tool::Kubectl,
        Tool::Kwok,
        Tool::Kubelet,
        Tool::KubeProxy,
        Tool::Pause,
        Tool::Registry,
        Tool::Regctl,
        Tool::Crane,
        Tool::Helm,
        Tool::Kubeconform,
        Tool::OrasPython,
        Tool::NfdCrds,
        Tool::CertManagerCrds,
        Tool::ServiceMonitorCrd,
        Tool::Actionlint,
        Tool::PrometheusRuleCrd,
        Tool::Promtool,
        Tool::Prometheus,
        Tool::Weed,
    ];

    /// The name a user knows the tool by.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Etcd => "etcd",
            Tool::KubeApiserver => "kube-apiserver",
            Tool::KubeControllerManager => "kube-controller-manager",
            Tool::KubeScheduler => "kube-scheduler",
            Tool::Kubectl => "kubectl",
            Tool::Kwok => "kwok",
            Tool::Kubelet => "kubelet",
            Tool::KubeProxy => "kube-proxy",
            Tool::Pause => "pause",
            Tool::Registry => "registry (distribution)",
            Tool::Regctl => "regctl",
            Tool::Crane => "crane",
            Tool::Helm => "helm",
            Tool::Kubeconform => "kubeconform",
            Tool::OrasPython => "ORAS Python SDK",
            Tool::NfdCrds => "NFD CRDs",
            Tool::CertManagerCrds => "cert-manager CRDs",
            Tool::ServiceMonitorCrd => "ServiceMonitor CRD",
            Tool::Actionlint => "actionlint",
            Tool::PrometheusRuleCrd => "PrometheusRule CRD",
            Tool::Promtool => "promtool",
            Tool::Prometheus => "prometheus",
            Tool::Weed => "weed (SeaweedFS)",
        }
    }

    /// The installer's directory prefix for the tool and the key of its version in versions.env.
    fn package(self) -> (&'static str, &'static str) {
        match self {
            Tool::Etcd => ("etcd", "ETCD_VERSION"),
            Tool::KubeApiserver
            | Tool::KubeControllerManager
            | Tool::KubeScheduler
            | Tool::Kubectl => ("kubernetes", "KUBERNETES_VERSION"),
            Tool::Kwok => ("kwok", "KWOK_VERSION"),
            Tool::Kubelet | Tool::KubeProxy => ("kubernetes-node", "KUBERNETES_VERSION"),
            Tool::Pause => ("pause", "KUBERNETES_VERSION"),
            Tool::Registry => ("distribution", "DISTRIBUTION_VERSION"),
            Tool::Regctl => ("regctl", "REGCTL_VERSION"),
            Tool::Crane => ("crane", "CRANE_VERSION"),
            Tool::Helm => ("helm", "HELM_VERSION"),
            Tool::Kubeconform => ("kubeconform", "KUBECONFORM_VERSION"),
            Tool::OrasPython => ("oras-py", "ORAS_PY_VERSION"),
            Tool::NfdCrds => ("nfd-crds", "NFD_VERSION"),
            Tool::CertManagerCrds => ("cert-manager-crds", "CERT_MANAGER_VERSION"),
            Tool::ServiceMonitorCrd => ("prometheus-operator-crds", "PROMETHEUS_OPERATOR_VERSION"),
            Tool::Actionlint => ("actionlint", "ACTIONLINT_VERSION"),
            Tool::PrometheusRuleCrd => ("prometheus-rule-crd", "PROMETHEUS_OPERATOR_VERSION"),
            Tool::Promtool | Tool::Prometheus => ("prometheus", "PROMETHEUS_VERSION"),
            Tool::Weed => ("seaweedfs", "SEAWEEDFS_VERSION"),
        }
    }

    /// The executable (or, for CRDs, the file), relative to the tool's install directory.
    fn executable(self) -> &'static str {
        match self {
            Tool::Etcd => "bin/etcd",
            Tool::KubeApiserver => "bin/kube-apiserver",
            Tool::KubeControllerManager => "bin/kube-controller-manager",
            Tool::KubeScheduler => "bin/kube-scheduler",
            Tool::Kubectl => "bin/kubectl",
            Tool::Kwok => "bin/kwok",
            Tool::Kubelet => "bin/kubelet",
            Tool::KubeProxy => "bin/kube-proxy",
            Tool::Pause => "bin/pause",
            Tool::Registry => "bin/registry",
            Tool::Regctl => "bin/regctl",
            Tool::Crane => "bin/crane",
            Tool::Helm => "bin/helm",
            Tool::Kubeconform => "bin/kubeconform",
            Tool::OrasPython => "bin/python",
            Tool::NfdCrds => "nfd-api-crds.yaml",
            Tool::CertManagerCrds => "cert-manager-crds.yaml",
            Tool::ServiceMonitorCrd => "monitoring.coreos.com_servicemonitors.yaml",
            Tool::Actionlint => "bin/actionlint",
            Tool::PrometheusRuleCrd => "monitoring.coreos.com_prometheusrules.yaml",
            Tool::Promtool => "bin/promtool",
            Tool::Prometheus => "bin/prometheus",
            Tool::Weed => "bin/weed",
        }
    }

    /// The tool's pinned version.
    pub fn version(self) -> Result<&'static str, ToolError> {
        let key = self.package().1;
        pinned_version(VERSIONS, key).ok_or(ToolError::UnknownVersion { key })
    }
}

/// Why a tool cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The tool is not where `tools/install` puts it, or its build did not finish.
    #[error("{tool} {version} is not installed (expected {}); run tools/install", path.display())]
    Missing {
        /// The tool's name.
        tool: &'static str,
        /// The pinned version.
        version: &'static str,
        /// Where it was expected.
        path: PathBuf,
    },
    /// `tools/versions.env` pins no version under this key.
    #[error("tools/versions.env has no {key}")]
    UnknownVersion {
        /// The missing key.
        key: &'static str,
    },
    /// Neither `OCIFIT_TOOLS_DIR` nor `HOME` is set, so the cache cannot be found.
    #[error("cannot find the tools cache: set OCIFIT_TOOLS_DIR or HOME")]
    NoCacheDir,
}

/// The tools cache: `$OCIFIT_TOOLS_DIR`, or `$HOME/.cache/ocifit-tools` (the installer's default).
#[derive(Clone, Debug)]
pub struct Tools {
    dir: PathBuf,
}

impl Tools {
    /// The cache the installer writes to, from the environment.
    pub fn locate() -> Result<Self, ToolError> {
        if let Some(dir) = std::env::var_os("OCIFIT_TOOLS_DIR").filter(|d| !d.is_empty()) {
            return Ok(Self::in_dir(dir));
        }
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .ok_or(ToolError::NoCacheDir)?;
        Ok(Self::in_dir(Path::new(&home).join(".cache/ocifit-tools")))
    }

    /// A cache at an explicit directory.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The executable of `tool`, if its installation completed.
    pub fn path(&self, tool: Tool) -> Result<PathBuf, ToolError> {
        let install = self.install_dir(tool)?;
        let path = install.join(tool.executable());
        self.require(tool, &install, path)
    }

    /// kwok's stage files (node initialisation, pod ready/complete/delete).
    pub fn kwok_stages(&self) -> Result<Vec<PathBuf>, ToolError> {
        let install = self.install_dir(Tool::Kwok)?;
        KWOK_STAGES
            .iter()
            .map(|file| self.require(Tool::Kwok, &install, install.join("stages").join(file)))
            .collect()
    }

    fn install_dir(&self, tool: Tool) -> Result<PathBuf, ToolError> {
        Ok(self
            .dir
            .join(format!("{}-{}", tool.package().0, tool.version()?)))
    }

    /// `path` if the installer stamped `install` complete and the file exists.
    fn require(&self, tool: Tool, install: &Path, path: PathBuf) -> Result<PathBuf, ToolError> {
        if install.join(".complete").is_file() && path.is_file() {
            Ok(path)
        } else {
            Err(ToolError::Missing {
                tool: tool.name(),
                version: tool.version()?,
                path,
            })
        }
    }
}

/// The value of `KEY=VALUE` in a versions.env text; comments and blank lines are skipped.
fn pinned_version<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_pinned_version() {
        for tool in Tool::ALL {
            let version = tool.version().unwrap();
            assert!(!version.is_empty(), "{}", tool.name());
        }
    }

    #[test]
    fn pinned_version_reads_key_value_lines_and_skips_comments() {
        let text = "# KWOK_VERSION=v0\n\nKWOK_VERSION=v0.8.0\nETCD_VERSION=\n";
        assert_eq!(pinned_version(text, "KWOK_VERSION"), Some("v0.8.0"));
        assert_eq!(pinned_version(text, "ETCD_VERSION"), None);
        assert_eq!(pinned_version(text, "HELM_VERSION"), None);
    }

    #[test]
    fn missing_tool_names_the_tool_the_path_and_the_installer() {
        let cache = tempfile::tempdir().unwrap();
        let err = Tools::in_dir(cache.path())
            .path(Tool::KubeApiserver)
            .unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with("kube-apiserver v"), "{message}");
        assert!(message.contains("bin/kube-apiserver"), "{message}");
        assert!(message.ends_with("run tools/install"), "{message}");
    }

    #[test]
    fn tool_without_the_installers_completion_stamp_counts_as_missing() {
        let cache = tempfile::tempdir().unwrap();
        let install = cache
            .path()
            .join(format!("crane-{}", Tool::Crane.version().unwrap()));
        std::fs::create_dir_all(install.join("bin")).unwrap();
        std::fs::write(install.join("bin/crane"), "").unwrap();
        let tools = Tools::in_dir(cache.path());
        assert!(matches!(
            tools.path(Tool::Crane),
            Err(ToolError::Missing { .. })
        ));

        std::fs::write(install.join(".complete"), "").unwrap();
        assert_eq!(tools.path(Tool::Crane).unwrap(), install.join("bin/crane"));
    }

    #[test]
    fn kwok_stages_are_found_beside_kwok() {
        let cache = tempfile::tempdir().unwrap();
        let install = cache
            .path()
            .join(format!("kwok-{}", Tool::Kwok.version().unwrap()));
        std::fs::create_dir_all(install.join("stages")).unwrap();
        std::fs::write(install.join(".complete"), "").unwrap();
        let tools = Tools::in_dir(cache.path());
        assert!(tools.kwok_stages().is_err());

        for stage in KWOK_STAGES {
            std::fs::write(install.join("stages").join(stage), "").unwrap();
        }
        assert_eq!(tools.kwok_stages().unwrap().len(), KWOK_STAGES.len());
    }
}
