//! A pod as placement's selection and gate read it: its metadata (labels, annotations, owners,
//! namespace), its node, its scheduling gates and each container's `terminationMessagePolicy`,
//! and nothing else. The controller takes this view of a pod it watches ([`PodView::from`] a
//! `Pod`); admission decodes a review's pod straight into [`GatePod`], since reading a whole `Pod`
//! cost the gate more than its deciding (docs/performance.md). Both read the same fields through
//! the same functions.

use k8s_openapi::api::core::v1::{Container, Pod, PodSchedulingGate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use crate::admission::{ReadMetadata, read_as};

/// What selection and the gate read of a pod.
#[derive(Clone, Copy, Debug)]
pub struct PodView<'a> {
    /// Labels, annotations, owner references and namespace (other members may be empty).
    pub metadata: &'a ObjectMeta,
    /// `spec.nodeName`.
    pub node_name: Option<&'a str>,
    /// `spec.schedulingGates`, `None` when the pod has no list.
    pub scheduling_gates: Option<&'a [PodSchedulingGate]>,
    /// Each container's and init container's termination message policy.
    pub containers: Containers<'a>,
}

/// The containers of a pod, as whichever read of it holds them.
#[derive(Clone, Copy, Debug)]
pub enum Containers<'a> {
    /// A whole pod's (the controller's, the tests').
    Whole {
        init: &'a [Container],
        main: &'a [Container],
    },
    /// A review's pod as the gate decodes it.
    Read {
        init: &'a [ReadContainer],
        main: &'a [ReadContainer],
    },
}

/// The containers' list in the pod spec: `initContainers` or `containers`.
pub(super) type ListName = &'static str;

impl Containers<'_> {
    /// Where a container keeps the default `File` termination message policy (or none), as
    /// (list, index): the containers whose failure says nothing in their status unless they
    /// wrote a termination message.
    pub fn leaving_file(&self) -> Vec<(ListName, usize)> {
        fn file(policy: Option<&str>) -> bool {
            policy.is_none_or(|policy| policy == "File")
        }
        let (init, main): (Vec<bool>, Vec<bool>) = match self {
            Containers::Whole { init, main } => (
                init.iter()
                    .map(|c| file(c.termination_message_policy.as_deref()))
                    .collect(),
                main.iter()
                    .map(|c| file(c.termination_message_policy.as_deref()))
                    .collect(),
            ),
            Containers::Read { init, main } => (
                init.iter()
                    .map(|c| file(c.termination_message_policy.as_deref()))
                    .collect(),
                main.iter()
                    .map(|c| file(c.termination_message_policy.as_deref()))
                    .collect(),
            ),
        };
        let listed = |name: ListName, files: Vec<bool>| {
            files
                .into_iter()
                .enumerate()
                .filter(|(_, file)| *file)
                .map(move |(index, _)| (name, index))
        };
        listed("initContainers", init)
            .chain(listed("containers", main))
            .collect()
    }
}

impl<'a> From<&'a Pod> for PodView<'a> {
    fn from(pod: &'a Pod) -> Self {
        let spec = pod.spec.as_ref();
        PodView {
            metadata: &pod.metadata,
            node_name: spec.and_then(|spec| spec.node_name.as_deref()),
            scheduling_gates: spec.and_then(|spec| spec.scheduling_gates.as_deref()),
            containers: Containers::Whole {
                init: spec
                    .and_then(|spec| spec.init_containers.as_deref())
                    .unwrap_or_default(),
                main: spec
                    .map(|spec| spec.containers.as_slice())
                    .unwrap_or_default(),
            },
        }
    }
}

impl<'a> From<&'a GatePod> for PodView<'a> {
    fn from(pod: &'a GatePod) -> Self {
        PodView {
            metadata: &pod.metadata,
            node_name: pod.spec.node_name.as_deref(),
            scheduling_gates: pod.spec.scheduling_gates.as_deref(),
            containers: Containers::Read {
                init: pod.spec.init_containers.as_deref().unwrap_or_default(),
                main: pod.spec.containers.as_deref().unwrap_or_default(),
            },
        }
    }
}

/// A pod as the gate decodes it from a review: the fields of [`PodView`]; everything else in the
/// object is skipped unread (the apiserver validates the pod itself after admission).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Read")]
pub struct GatePod {
    /// Its metadata as planners read it ([`ReadMetadata`]): identity, labels, annotations, owners.
    pub metadata: ObjectMeta,
    spec: GateSpec,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Read {
    metadata: Option<ReadMetadata>,
    spec: Option<GateSpec>,
}

/// The members of the pod's spec the view reads.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct GateSpec {
    node_name: Option<String>,
    scheduling_gates: Option<Vec<PodSchedulingGate>>,
    init_containers: Option<Vec<ReadContainer>>,
    containers: Option<Vec<ReadContainer>>,
}

/// What the gate reads of a container: its termination message policy (the rest is skipped).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReadContainer {
    termination_message_policy: Option<String>,
}

impl From<Read> for GatePod {
    fn from(read: Read) -> Self {
        GatePod {
            metadata: read.metadata.unwrap_or_default().into(),
            spec: read.spec.unwrap_or_default(),
        }
    }
}

read_as!(GatePod, Pod, metadata);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Every field the view reads, and more it does not.
    fn pod() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-1", "namespace": "shop", "uid": "u", "finalizers": ["f"],
                "labels": {"app": "web"},
                "annotations": {"kubernetes.io/config.mirror": "x"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "o"}],
                "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {
                "nodeName": "n1",
                "schedulingGates": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "app", "image": "nginx", "env": [{"name": "A", "value": "1"}]}]
            },
            "status": {"phase": "Pending"}
        })
    }

    #[test]
    fn the_gate_reads_of_a_review_what_it_reads_of_a_whole_pod() {
        let whole: Pod = serde_json::from_value(pod()).unwrap();
        let gated: GatePod = serde_json::from_value(pod()).unwrap();
        let (from_whole, from_gated) = (PodView::from(&whole), PodView::from(&gated));
        assert_eq!(from_gated.metadata.labels, from_whole.metadata.labels);
        assert_eq!(
            from_gated.metadata.annotations,
            from_whole.metadata.annotations
        );
        assert_eq!(
            from_gated.metadata.owner_references,
            from_whole.metadata.owner_references
        );
        assert_eq!(from_gated.metadata.namespace, from_whole.metadata.namespace);
        assert_eq!(from_gated.node_name, Some("n1"));
        assert_eq!(from_gated.scheduling_gates, from_whole.scheduling_gates);
        // What it does not read is not kept.
        assert_eq!(from_gated.metadata.managed_fields, None);
        assert_eq!(from_gated.metadata.finalizers, None);
    }

    #[test]
    fn absent_and_null_members_read_as_absent() {
        for pod in [
            json!({}),
            json!({"metadata": null, "spec": null}),
            json!({"metadata": {"labels": null}, "spec": {"schedulingGates": null}}),
        ] {
            let gated: GatePod = serde_json::from_value(pod.clone()).unwrap();
            let view = PodView::from(&gated);
            assert_eq!(view.metadata.labels, None, "{pod}");
            assert_eq!(view.node_name, None, "{pod}");
            assert_eq!(view.scheduling_gates, None, "{pod}");
        }
    }

    #[test]
    fn a_member_of_the_wrong_type_is_an_error_naming_it() {
        let err = serde_json::from_value::<GatePod>(json!({"spec": {"nodeName": 5}})).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}
