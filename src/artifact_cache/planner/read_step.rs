//! A step's pod or Job as the step planner reads it from a review: what the planner reads and
//! nothing else — the annotations (the step contract), whether there are labels, the owners, and
//! of the pod spec the containers' names, commands, mounts, working directories, termination
//! message paths and security contexts, the init containers' and volumes' names, the restart
//! policy, the pod's security context, whether it shares a process namespace and its scheduling
//! gates. The rest is skipped unread, never built (docs/performance.md says what a whole `Pod`
//! costs); the apiserver validates the object after admission.

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodSchedulingGate, PodSecurityContext, PodSpec, PodTemplateSpec,
    SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use crate::admission::{ReadMetadata, read_as};

/// A review's pod, holding only what the step planner reads.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "ReadPod")]
pub struct StepPod(pub Pod);

/// A review's Job, holding only what the step planner reads.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "ReadJob")]
pub struct StepJob(pub Job);

#[derive(Default, Deserialize)]
#[serde(default)]
struct ReadPod {
    metadata: Option<ReadMetadata>,
    spec: Option<Spec>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct ReadJob {
    metadata: Option<ReadMetadata>,
    spec: Option<ReadJobSpec>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct ReadJobSpec {
    template: Option<Template>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Template {
    metadata: Option<ReadMetadata>,
    spec: Option<Spec>,
}

#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Spec {
    containers: Option<Vec<ReadContainer>>,
    init_containers: Option<Vec<Named>>,
    volumes: Option<Vec<Named>>,
    restart_policy: Option<String>,
    security_context: Option<PodSecurityContext>,
    share_process_namespace: Option<bool>,
    #[serde(rename = "hostPID")]
    host_pid: Option<bool>,
    scheduling_gates: Option<Vec<PodSchedulingGate>>,
}

#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ReadContainer {
    name: String,
    command: Option<Vec<String>>,
    volume_mounts: Option<Vec<VolumeMount>>,
    working_dir: Option<String>,
    termination_message_path: Option<String>,
    security_context: Option<SecurityContext>,
}

/// A name alone (an init container, a volume).
#[derive(Default, Deserialize)]
#[serde(default)]
struct Named {
    name: String,
}

impl From<Spec> for PodSpec {
    fn from(read: Spec) -> Self {
        PodSpec {
            containers: read
                .containers
                .unwrap_or_default()
                .into_iter()
                .map(|c| Container {
                    name: c.name,
                    command: c.command,
                    volume_mounts: c.volume_mounts,
                    working_dir: c.working_dir,
                    termination_message_path: c.termination_message_path,
                    security_context: c.security_context,
                    ..Container::default()
                })
                .collect(),
            init_containers: read.init_containers.map(|named| {
                named
                    .into_iter()
                    .map(|c| Container {
                        name: c.name,
                        ..Container::default()
                    })
                    .collect()
            }),
            volumes: read.volumes.map(|named| {
                named
                    .into_iter()
                    .map(|v| Volume {
                        name: v.name,
                        ..Volume::default()
                    })
                    .collect()
            }),
            restart_policy: read.restart_policy,
            security_context: read.security_context,
            share_process_namespace: read.share_process_namespace,
            host_pid: read.host_pid,
            scheduling_gates: read.scheduling_gates,
            ..PodSpec::default()
        }
    }
}

impl From<ReadPod> for StepPod {
    fn from(read: ReadPod) -> Self {
        StepPod(Pod {
            metadata: read.metadata.unwrap_or_default().into(),
            spec: read.spec.map(PodSpec::from),
            status: None,
        })
    }
}

impl From<ReadJob> for StepJob {
    fn from(read: ReadJob) -> Self {
        StepJob(Job {
            metadata: read.metadata.unwrap_or_default().into(),
            spec: read.spec.map(|spec| {
                let template = spec.template.unwrap_or_default();
                JobSpec {
                    template: PodTemplateSpec {
                        metadata: template.metadata.map(ObjectMeta::from),
                        spec: template.spec.map(PodSpec::from),
                    },
                    ..JobSpec::default()
                }
            }),
            status: None,
        })
    }
}

read_as!(StepPod, Pod, 0.metadata);
read_as!(StepJob, Job, 0.metadata);
