//! Pods to create in a test: one builder, so a field every scenario's pod needs is set in one
//! place.

use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    Pod, PodSpec,
};
use kube::api::ObjectMeta;

/// The image a pod names until something chooses its real one.
pub const PLACEHOLDER_IMAGE: &str = "placeholder:latest";

/// A Pod to create: one container `app` running [`PLACEHOLDER_IMAGE`] unless told otherwise.
#[derive(Clone, Debug)]
pub struct TestPod {
    pod: Pod,
}

impl TestPod {
    pub fn named(name: &str) -> TestPod {
        TestPod {
            pod: Pod {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    ..ObjectMeta::default()
                },
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".to_owned(),
                        image: Some(PLACEHOLDER_IMAGE.to_owned()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
                ..Pod::default()
            },
        }
    }

    /// The namespace (else the one the pod is created in).
    pub fn in_namespace(mut self, namespace: &str) -> TestPod {
        self.pod.metadata.namespace = Some(namespace.to_owned());
        self
    }

    /// One container per `(name, image)`, in place of the pod's.
    pub fn containers(mut self, containers: &[(&str, &str)]) -> TestPod {
        self.spec().containers = containers
            .iter()
            .map(|(name, image)| Container {
                name: (*name).to_owned(),
                image: Some((*image).to_owned()),
                ..Container::default()
            })
            .collect();
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> TestPod {
        self.pod
            .metadata
            .labels
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
        self
    }

    /// The image of the first container.
    pub fn image(mut self, image: &str) -> TestPod {
        self.spec().containers[0].image = Some(image.to_owned());
        self
    }

    /// The name of the first container.
    pub fn container(mut self, name: &str) -> TestPod {
        self.spec().containers[0].name = name.to_owned();
        self
    }

    /// The first container's command: `script`, run by `/bin/sh -c`.
    pub fn command(mut self, script: &str) -> TestPod {
        self.spec().containers[0].command =
            Some(vec!["/bin/sh".into(), "-c".into(), script.into()]);
        self
    }

    /// Adds a `nodeSelector` entry.
    pub fn node_selector(mut self, key: &str, value: &str) -> TestPod {
        self.spec()
            .node_selector
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
        self
    }

    /// Required node affinity: one term, `key In values`.
    pub fn requires_node_in(mut self, key: &str, values: &[&str]) -> TestPod {
        let term = NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.to_owned(),
                operator: "In".to_owned(),
                values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
            }]),
            match_fields: None,
        };
        self.spec().affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![term],
                }),
                ..NodeAffinity::default()
            }),
            ..Affinity::default()
        });
        self
    }

    /// No ServiceAccount token mounted.
    pub fn without_token(mut self) -> TestPod {
        self.spec().automount_service_account_token = Some(false);
        self
    }

    /// Seconds the kubelet waits for the containers to stop when the pod is deleted.
    pub fn grace_period(mut self, seconds: i64) -> TestPod {
        self.spec().termination_grace_period_seconds = Some(seconds);
        self
    }

    fn spec(&mut self) -> &mut PodSpec {
        self.pod.spec.get_or_insert_default()
    }

    /// The object.
    pub fn build(&self) -> Pod {
        self.pod.clone()
    }
}

/// The pod's scheduling gates, by name.
pub fn gates(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.scheduling_gates.as_ref())
        .into_iter()
        .flatten()
        .map(|gate| gate.name.clone())
        .collect()
}

/// The pod's annotation `key`.
pub fn annotation<'p>(pod: &'p Pod, key: &str) -> Option<&'p str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSchedulingGate;

    #[test]
    fn a_pod_runs_the_placeholder_until_told_and_keeps_what_it_is_given() {
        let pod = TestPod::named("p")
            .label("app", "p")
            .node_selector("zone", "a")
            .container("main")
            .command("echo hi")
            .grace_period(1)
            .build();
        let spec = pod.spec.expect("a spec");
        let container = &spec.containers[0];
        assert_eq!(container.image.as_deref(), Some(PLACEHOLDER_IMAGE));
        assert_eq!(container.name, "main");
        assert_eq!(
            container.command.as_deref(),
            Some(&["/bin/sh".to_owned(), "-c".to_owned(), "echo hi".to_owned()][..])
        );
        assert_eq!(spec.termination_grace_period_seconds, Some(1));
        assert_eq!(spec.node_selector.expect("a selector")["zone"], "a");
        assert_eq!(pod.metadata.labels.expect("labels")["app"], "p");
        let two = TestPod::named("q")
            .in_namespace("team")
            .containers(&[("web", "web:1"), ("sidecar", "proxy:2")])
            .build();
        assert_eq!(two.metadata.namespace.as_deref(), Some("team"));
        let containers = two.spec.expect("a spec").containers;
        let named: Vec<(&str, Option<&str>)> = containers
            .iter()
            .map(|c| (c.name.as_str(), c.image.as_deref()))
            .collect();
        assert_eq!(
            named,
            [("web", Some("web:1")), ("sidecar", Some("proxy:2"))]
        );
    }

    #[test]
    fn gates_and_annotations_are_read_by_name_and_absent_is_none() {
        let mut pod = TestPod::named("p").build();
        assert!(gates(&pod).is_empty());
        assert_eq!(annotation(&pod, "a"), None);
        pod.metadata.annotations = Some([("a".to_owned(), "1".to_owned())].into());
        pod.spec.as_mut().expect("a spec").scheduling_gates = Some(vec![PodSchedulingGate {
            name: "example.com/wait".into(),
        }]);
        assert_eq!(gates(&pod), ["example.com/wait"]);
        assert_eq!(annotation(&pod, "a"), Some("1"));
        assert_eq!(annotation(&pod, "b"), None);
    }
}
