//! What `ocifit explain pod` says, drawn from what the operator recorded: the pod's decision
//! annotations, labels and gates, its Events, its policies' status and its node. Pure: the
//! objects in, the report out. Where it has to recompute something (the node's class), it calls
//! the function the controller draws classes with, so the answer is the controller's.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Event, Node, Pod};
use serde::Serialize;

use crate::api::placement_pod as placement;
use crate::api::{ArtifactCache, ImageSelectionPolicy, PlacementPolicy, pod as selection, step};
use crate::artifact_cache::{PREPARE, PUSH, StepSource as Source, step_settings, wiring_of};
use crate::classes::group;
use crate::engine::NodeInputs;

/// Everything read from the cluster about one pod.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    pub pod: Pod,
    /// The Events whose object is the pod.
    pub events: Vec<Event>,
    pub selection_policy: Option<ImageSelectionPolicy>,
    pub placement_policy: Option<PlacementPolicy>,
    pub node: Option<Node>,
    pub cache: Option<ArtifactCache>,
    /// What could not be read, in a sentence each (the report says so rather than guess).
    pub unread: Vec<String>,
}

/// The answer, as `-o json|yaml` prints it.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Explained {
    /// `namespace/name`.
    pub pod: String,
    /// The node it was scheduled to, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeReport>,
    /// The scheduling gates it still has (any, ocifit's or not).
    pub scheduling_gates: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_selection: Option<SelectionReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_cache: Option<StepReport>,
    /// ocifit's Events on the pod, oldest first.
    pub events: Vec<EventReport>,
    /// What could not be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeReport {
    pub name: String,
    /// `os/arch` from its `kubernetes.io/` labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
}

/// Image selection's part: which policy, which class, which image per container.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SelectionReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// `selected`, `held` (behind its gate) or `unchanged` (admitted without a decision).
    pub state: String,
    /// Why it is held, when the hold failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    /// Container → the image it was given.
    pub images: BTreeMap<String, String>,
    /// The node classes it may run on.
    pub classes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_digest: Option<String>,
    /// The class of its node, and what the policy resolved for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_class: Option<ClassReport>,
    /// The policy's Ready condition: status and message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_ready: Option<String>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClassReport {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Placement's part: the gate, the platforms, the node's, exec format errors.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PlacementReport {
    pub policy: String,
    /// `held` (the gate is on) or `released`.
    pub gate: String,
    /// What the controller did: Constrained, Unconstrained, Fallback or Held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The platforms the pod was constrained to.
    pub platforms: Vec<String>,
    /// Container → the digest inspected.
    pub digests: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The node's platform, to compare with `platforms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_platform: Option<String>,
    /// Each `exec format error` found in a container of the pod (the Events' notes).
    pub exec_format_errors: Vec<String>,
    /// Whether the PlacementPolicy still exists.
    pub policy_found: bool,
}

/// The artifact cache's part: which cache, which steps, which helpers.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StepReport {
    /// The ArtifactCache the step was wired to (absent when it named its own registry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `held` (waiting for the cache to be Ready) or `released`.
    pub gate: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    /// The cache's Ready condition: status and message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_ready: Option<String>,
    /// The artifacts pulled before the step.
    pub inputs: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The helper containers injected, each with its state.
    pub helpers: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EventReport {
    #[serde(rename = "type")]
    pub kind: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
}

/// The report on `gathered`.
pub(crate) fn explain(gathered: &Gathered) -> Explained {
    let pod = &gathered.pod;
    let name = format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    );
    Explained {
        pod: name,
        node: gathered.node.as_ref().map(|node| NodeReport {
            name: node.metadata.name.clone().unwrap_or_default(),
            platform: platform(node),
        }),
        scheduling_gates: gates(pod),
        image_selection: image_selection(gathered),
        placement: placement(gathered),
        artifact_cache: artifact_cache(gathered),
        events: gathered
            .events
            .iter()
            .map(|e| EventReport {
                kind: e.type_.clone().unwrap_or_default(),
                reason: e.reason.clone().unwrap_or_default(),
                message: e.message.clone().unwrap_or_default(),
                count: e.count.unwrap_or(1),
            })
            .collect(),
        unread: gathered.unread.clone(),
    }
}

fn gates(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.scheduling_gates.iter().flatten())
        .map(|g| g.name.clone())
        .collect()
}

fn annotation<'p>(pod: &'p Pod, key: &str) -> Option<&'p str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn label<'p>(pod: &'p Pod, key: &str) -> Option<&'p str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn platform(node: &Node) -> Option<String> {
    let labels = node.metadata.labels.as_ref()?;
    let os = labels.get("kubernetes.io/os")?;
    let arch = labels.get("kubernetes.io/arch")?;
    Some(format!("{os}/{arch}"))
}

/// A JSON map of container → value, as the decision annotations write it.
fn by_container(text: Option<&str>) -> BTreeMap<String, String> {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

fn ready(
    conditions: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
) -> Option<String> {
    let ready = conditions?.iter().find(|c| c.type_ == "Ready")?;
    Some(format!(
        "{} ({}): {}",
        ready.status, ready.reason, ready.message
    ))
}

fn image_selection(gathered: &Gathered) -> Option<SelectionReport> {
    let pod = &gathered.pod;
    let policy = annotation(pod, selection::DECISION_POLICY)
        .or_else(|| label(pod, selection::POLICY))
        .or_else(|| annotation(pod, selection::POLICY));
    let held = gates(pod).iter().any(|g| g == selection::SCHEDULING_GATE);
    let opted_in = label(pod, selection::ENABLED_LABEL) == Some("true");
    if policy.is_none() && !held && !opted_in {
        return None;
    }
    let images = by_container(annotation(pod, selection::DECISION_IMAGES));
    let state = if held {
        "held"
    } else if images.is_empty() {
        "unchanged"
    } else {
        "selected"
    };
    let found = gathered.selection_policy.as_ref();
    Some(SelectionReport {
        policy: policy.map(str::to_owned),
        state: state.to_owned(),
        held: annotation(pod, selection::HELD_ANNOTATION).map(str::to_owned),
        images,
        classes: annotation(pod, selection::DECISION_CLASSES)
            .map(|c| {
                c.split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        artifact_digest: annotation(pod, selection::DECISION_ARTIFACT_DIGEST).map(str::to_owned),
        node_class: found
            .zip(gathered.node.as_ref())
            .and_then(|(p, n)| node_class(p, n)),
        policy_ready: found.and_then(|p| ready(p.status.as_ref().map(|s| &s.conditions))),
    })
}

/// The node's class as the controller draws it (the same grouping over the keys the policy's
/// status says its artifact reads), and what the policy resolved for that class.
fn node_class(policy: &ImageSelectionPolicy, node: &Node) -> Option<ClassReport> {
    let status = policy.status.as_ref()?;
    let reads = status.class_keys.clone().unwrap_or_default();
    let inputs = NodeInputs::new(node.metadata.labels.clone().unwrap_or_default());
    let name = node.metadata.name.clone().unwrap_or_default();
    let drawn = group(&reads, [(name.as_str(), &inputs)]);
    let labels = &drawn.first()?.labels;
    let class = status.classes.iter().find(|c| &c.labels == labels)?;
    Some(ClassReport {
        name: class.name.clone(),
        image: class.image.clone(),
        reason: class.reason.clone(),
    })
}

fn placement(gathered: &Gathered) -> Option<PlacementReport> {
    let pod = &gathered.pod;
    let policy = label(pod, placement::POLICY_LABEL)?;
    let held = gates(pod).iter().any(|g| g == placement::SCHEDULING_GATE);
    Some(PlacementReport {
        policy: policy.to_owned(),
        gate: if held { "held" } else { "released" }.to_owned(),
        outcome: annotation(pod, placement::OUTCOME_ANNOTATION).map(str::to_owned),
        platforms: annotation(pod, placement::PLATFORMS_ANNOTATION)
            .map(|p| {
                p.split(',')
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        digests: by_container(annotation(pod, placement::DIGESTS_ANNOTATION)),
        message: annotation(pod, placement::MESSAGE_ANNOTATION).map(str::to_owned),
        node_platform: gathered.node.as_ref().and_then(platform),
        exec_format_errors: gathered
            .events
            .iter()
            .filter(|e| e.reason.as_deref() == Some(crate::placement::EXEC_FORMAT_ERROR_REASON))
            .filter_map(|e| e.message.clone())
            .collect(),
        policy_found: gathered.placement_policy.is_some(),
    })
}

fn artifact_cache(gathered: &Gathered) -> Option<StepReport> {
    let pod = &gathered.pod;
    let marker = annotation(pod, step::INJECTED);
    let held = gates(pod).iter().any(|g| g == step::CACHE_GATE);
    if marker.is_none() && !held {
        return None;
    }
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    // The settings are read with the parser admission planned the step with.
    let settings = step_settings(&annotations).ok().flatten();
    let wiring = marker.and_then(wiring_of);
    let cache = wiring.map(|(name, _)| name.to_owned()).or_else(|| {
        settings.as_ref().and_then(|s| match &s.source {
            Source::Cache(name) => Some(name.clone()),
            Source::Registry { .. } => None,
        })
    });
    Some(StepReport {
        cache,
        endpoint: wiring.map(|(_, at)| at.to_owned()),
        gate: if held { "held" } else { "released" }.to_owned(),
        held: annotation(pod, step::HELD_ANNOTATION).map(str::to_owned),
        cache_ready: gathered
            .cache
            .as_ref()
            .and_then(|c| ready(c.status.as_ref().map(|s| &s.conditions))),
        inputs: settings
            .as_ref()
            .map(|s| s.inputs.clone())
            .unwrap_or_default(),
        output: settings.as_ref().and_then(|s| {
            let uri = s.output_uri.as_deref()?;
            let from = s.output_path.as_deref().or(s.output_pipe.as_deref());
            Some(match from {
                Some(from) => format!("{uri} from {from}"),
                None => uri.to_owned(),
            })
        }),
        helpers: helpers(pod),
    })
}

/// The helper containers injected (`ocifit-prepare`, `ocifit-push`), each with its state.
fn helpers(pod: &Pod) -> Vec<String> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let status = pod.status.as_ref();
    let states: Vec<&ContainerStatus> = status
        .iter()
        .flat_map(|s| s.init_container_statuses.iter().flatten())
        .chain(
            status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten()),
        )
        .collect();
    let all: Vec<&Container> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .collect();
    all.into_iter()
        .filter(|c| c.name == PREPARE || c.name == PUSH)
        .map(|c| {
            let state = states
                .iter()
                .find(|s| s.name == c.name)
                .and_then(|s| s.state.as_ref())
                .map(|s| {
                    if s.running.is_some() {
                        "running".to_owned()
                    } else if let Some(done) = &s.terminated {
                        format!("exited {}", done.exit_code)
                    } else {
                        "waiting".to_owned()
                    }
                })
                .unwrap_or_else(|| "not started".to_owned());
            format!("{} ({state})", c.name)
        })
        .collect()
}

#[cfg(test)]
mod tests;
