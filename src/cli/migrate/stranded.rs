//! The pods archaware-controller's migration could leave with nowhere to run. archaware-controller
//! gave every pod the toleration for its taint; ocifit never places kube-system pods or DaemonSet
//! pods, so they keep off every node ocifit taints unless they tolerate its taint themselves. Read
//! from the cluster's Pods and DaemonSets when the user passes them; pure.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::api::placement_pod::TAINT_KEY;

const ARCH_LABEL: &str = "kubernetes.io/arch";
const MIRROR: &str = "kubernetes.io/config.mirror";

/// A workload ocifit never gives its toleration: a DaemonSet, or a pod in kube-system.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Workload {
    /// `DaemonSet ns/name` or `Pod kube-system/name`.
    pub what: String,
    /// A DaemonSet runs on every node, so each tainted architecture it cannot tolerate loses it
    /// those nodes; another pod is stranded only when every architecture it may run on is.
    pub daemon_set: bool,
    tolerations: Vec<Value>,
    /// The architectures its node selector and required node affinity allow; `None`: any.
    architectures: Option<BTreeSet<String>>,
}

/// Whether the document is one of the cluster's objects this module reads.
pub(super) fn is_cluster_object(value: &Value) -> bool {
    matches!(
        value.get("kind").and_then(Value::as_str),
        Some("Pod" | "DaemonSet")
    )
}

/// The workloads among the cluster's objects, each once (a DaemonSet and its pods are one).
pub(super) fn workloads<'a>(values: impl Iterator<Item = &'a Value>) -> Vec<Workload> {
    let mut out: Vec<Workload> = Vec::new();
    for value in values {
        let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
        let namespace = text("/metadata/namespace").unwrap_or("default");
        let name = text("/metadata/name").unwrap_or("");
        let (what, spec) = match text("/kind") {
            Some("DaemonSet") => (
                format!("DaemonSet {namespace}/{name}"),
                value.pointer("/spec/template/spec"),
            ),
            Some("Pod")
                if value
                    .pointer(&format!(
                        "/metadata/annotations/{}",
                        MIRROR.replace('/', "~1")
                    ))
                    .is_some() =>
            {
                continue;
            }
            Some("Pod") => {
                let owner = value
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .find(|o| o.get("kind").and_then(Value::as_str) == Some("DaemonSet"))
                    .and_then(|o| o.get("name").and_then(Value::as_str));
                match owner {
                    Some(owner) => (format!("DaemonSet {namespace}/{owner}"), value.get("spec")),
                    None if namespace == "kube-system" => {
                        (format!("Pod {namespace}/{name}"), value.get("spec"))
                    }
                    None => continue,
                }
            }
            _ => continue,
        };
        if out.iter().any(|w| w.what == what) {
            continue;
        }
        let spec = spec.cloned().unwrap_or(Value::Null);
        out.push(Workload {
            daemon_set: what.starts_with("DaemonSet"),
            what,
            tolerations: spec
                .get("tolerations")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            architectures: architectures(&spec),
        });
    }
    out
}

/// The architectures a pod spec allows: its `nodeSelector`, ANDed with its required node
/// affinity's terms (ORed; a term that does not name the architecture allows any).
fn architectures(spec: &Value) -> Option<BTreeSet<String>> {
    let selected = spec
        .pointer("/nodeSelector")
        .and_then(|s| s.get(ARCH_LABEL))
        .and_then(Value::as_str)
        .map(|arch| BTreeSet::from([arch.to_owned()]));
    let terms = spec
        .pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array);
    let mut by_affinity: Option<BTreeSet<String>> = None;
    for term in terms.into_iter().flatten() {
        let named = term
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|e| {
                e.get("key").and_then(Value::as_str) == Some(ARCH_LABEL)
                    && e.get("operator").and_then(Value::as_str) == Some("In")
            })
            .and_then(|e| e.get("values").and_then(Value::as_array));
        let Some(values) = named else {
            by_affinity = None;
            break;
        };
        by_affinity
            .get_or_insert_with(BTreeSet::new)
            .extend(values.iter().filter_map(Value::as_str).map(str::to_owned));
    }
    match (selected, by_affinity) {
        (Some(a), Some(b)) => Some(a.intersection(&b).cloned().collect()),
        (a, b) => a.or(b),
    }
}

/// Whether the tolerations tolerate ocifit's taint on `arch`'s nodes.
fn tolerates(tolerations: &[Value], arch: &str) -> bool {
    tolerations.iter().any(|t| {
        let text = |field: &str| t.get(field).and_then(Value::as_str).unwrap_or("");
        let effect = matches!(text("effect"), "" | "NoSchedule");
        let matches = match text("operator") {
            "Exists" => matches!(text("key"), "" | TAINT_KEY),
            _ => text("key") == TAINT_KEY && text("value") == arch,
        };
        effect && matches
    })
}

/// A workload and the tainted architectures it would lose.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Stranded {
    pub what: String,
    pub daemon_set: bool,
    pub lost: Vec<String>,
}

/// Which workloads lose nodes with `tainted` tainted and `untainted` left alone (the cluster's
/// architectures are the two together).
pub(super) fn stranded(
    workloads: &[Workload],
    tainted: &[String],
    untainted: &[String],
) -> Vec<Stranded> {
    let mut out = Vec::new();
    for workload in workloads {
        let allowed = |arch: &String| {
            workload
                .architectures
                .as_ref()
                .is_none_or(|allowed| allowed.contains(arch))
        };
        let lost: Vec<String> = tainted
            .iter()
            .filter(|arch| allowed(arch) && !tolerates(&workload.tolerations, arch))
            .cloned()
            .collect();
        let lost_all = lost.len() == tainted.iter().filter(|a| allowed(a)).count()
            && !untainted.iter().any(allowed);
        if !lost.is_empty() && (workload.daemon_set || lost_all) {
            out.push(Stranded {
                what: workload.what.clone(),
                daemon_set: workload.daemon_set,
                lost,
            });
        }
    }
    out
}
