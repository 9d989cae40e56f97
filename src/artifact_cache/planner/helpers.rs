//! The containers and volumes ocifit adds to a step's pod, as typed objects: the `ocifit-prepare`
//! init container, the `ocifit-push` native sidecar, their credentials, their lock-down and their
//! volumes. Knows nothing of when each is needed (that is `mutation`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvFromSource, EnvVar, EnvVarSource, PodSpec,
    ResourceRequirements, SeccompProfile, SecretEnvSource, SecretKeySelector, SecurityContext,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::Helper;
use super::settings::StepSettings;
use crate::step_helper::command::{self, Deliver, Prepare, Transfer};

/// The init container that pulls the inputs and installs the launcher.
pub const PREPARE: &str = "ocifit-prepare";
/// The native sidecar that pushes the outputs.
pub const PUSH: &str = "ocifit-push";
/// The volume holding the pulled inputs.
pub const INPUTS_VOLUME: &str = "ocifit-inputs";
/// The volume holding the launcher and the hand-off between the step and the pusher.
pub const RUN_VOLUME: &str = "ocifit-run";
pub use crate::step_helper::command::INPUTS_DIR;
/// Where every container of the step sees the run volume.
pub const RUN_DIR: &str = "/ocifit/run";
/// The launcher: ocifit with its loader (`ld.so`) and libraries.
pub const LAUNCHER_DIR: &str = "/ocifit/run/bin";
/// The container's termination message path unless it sets its own.
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// Where the step's URIs are.
pub struct Registry {
    /// `host[:port]` prefixed to every URI.
    pub host: String,
    pub plain_http: bool,
    /// The marker annotation's value: what the step was wired to.
    pub marker: String,
    /// The Secret generated for the cache: its credentials go to the helpers, by reference.
    pub credentials: Option<String>,
}

pub fn prepare(
    settings: &StepSettings,
    registry: &Registry,
    helper: &Helper,
    inputs: &[String],
    launched: bool,
    security: &SecurityContext,
) -> Container {
    let mut mounts = Vec::new();
    if !inputs.is_empty() {
        mounts.push(mount(INPUTS_VOLUME, INPUTS_DIR));
    }
    if launched {
        mounts.push(mount(RUN_VOLUME, RUN_DIR));
    }
    let args = Prepare {
        inputs: inputs.to_vec(),
        inputs_dir: INPUTS_DIR.into(),
        launcher: launched.then(|| LAUNCHER_DIR.into()),
        termination_log: Some(TERMINATION_LOG.into()),
        debug: settings.debug,
        transfer: transfer(settings, registry),
    }
    .to_args();
    let mut container = helper_container(PREPARE, settings, helper, args, mounts, security);
    container.env = cache_credentials(settings, registry);
    container
}

pub fn pusher(
    settings: &StepSettings,
    registry: &Registry,
    helper: &Helper,
    reference: &str,
    security: &SecurityContext,
) -> Container {
    let args = Deliver {
        run: RUN_DIR.into(),
        to: reference.into(),
        compression_level: crate::step_helper::DEFAULT_COMPRESSION,
        termination_log: Some(TERMINATION_LOG.into()),
        debug: settings.debug,
        transfer: transfer(settings, registry),
    }
    .to_args();
    let mut container = helper_container(
        PUSH,
        settings,
        helper,
        args,
        vec![mount(RUN_VOLUME, RUN_DIR)],
        security,
    );
    container.env = cache_credentials(settings, registry);
    // A native sidecar: started before the step, stopped after it.
    container.restart_policy = Some("Always".into());
    container
}

fn transfer(settings: &StepSettings, registry: &Registry) -> Transfer {
    Transfer {
        plain_http: registry.plain_http,
        no_unpack: !settings.unpack,
    }
}

fn helper_container(
    name: &str,
    settings: &StepSettings,
    helper: &Helper,
    args: Vec<std::ffi::OsString>,
    mounts: Vec<VolumeMount>,
    security: &SecurityContext,
) -> Container {
    Container {
        name: name.into(),
        image: Some(helper.image.clone()),
        image_pull_policy: helper.pull_policy.clone(),
        args: Some(command::strings(args)),
        // Only the helpers see the credentials: never the step's container, never the spec.
        env_from: settings.oras_env.as_ref().map(|secret| {
            vec![EnvFromSource {
                secret_ref: Some(SecretEnvSource {
                    name: secret.clone(),
                    optional: Some(false),
                }),
                ..EnvFromSource::default()
            }]
        }),
        volume_mounts: Some(mounts),
        security_context: Some(security.clone()),
        resources: Some(helper_resources()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Container::default()
    }
}

/// The cache's generated credentials, as references to its Secret (never values), for a step
/// that names no `oras-env` of its own.
fn cache_credentials(settings: &StepSettings, registry: &Registry) -> Option<Vec<EnvVar>> {
    if settings.oras_env.is_some() {
        return None;
    }
    let secret = registry.credentials.as_ref()?;
    let from = |key: &str| EnvVar {
        name: key.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.clone(),
                key: key.to_string(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    };
    Some(
        crate::artifact_cache::secret::STEP_KEYS
            .iter()
            .map(|key| from(key))
            .collect(),
    )
}

/// The user the helpers run as when the step's would be root or is not named: ocifit's image's
/// own (distroless `nonroot`).
pub const HELPER_USER: i64 = 65532;

/// Locked down as Pod Security `restricted` asks of every container (whatever the pod's own
/// settings), and as the step's user when it names one, so what the helpers write the step can
/// read and what the step writes they can. A step running as root gets helpers running as
/// [`HELPER_USER`]: root may read and write what they make, and they never need root themselves.
pub fn security_context(step: &Container, pod: &PodSpec) -> SecurityContext {
    let step_security = step.security_context.as_ref();
    let pod_user = pod.security_context.as_ref().and_then(|s| s.run_as_user);
    let run_as_user = match (step_security.and_then(|s| s.run_as_user), pod_user) {
        (Some(0), _) | (None, Some(0)) | (None, None) => Some(HELPER_USER),
        (Some(user), _) => Some(user),
        // The pod's own user applies to the helpers as to the step.
        (None, Some(_)) => None,
    };
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        run_as_non_root: Some(true),
        run_as_user,
        run_as_group: step_security.and_then(|s| s.run_as_group),
        ..SecurityContext::default()
    }
}

/// What each helper asks for and may use: a transfer streams through bounded buffers (peaks of
/// 28–36 MiB measured on 1 GiB, docs/artifact-cache.md), so 256 MiB leaves room for the page
/// cache of large files; a CPU limit keeps compression from taking the node.
fn helper_resources() -> ResourceRequirements {
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.to_string())),
            ("memory".to_string(), Quantity(memory.to_string())),
        ])
    };
    ResourceRequirements {
        requests: Some(quantities("50m", "64Mi")),
        limits: Some(quantities("1", "256Mi")),
        ..ResourceRequirements::default()
    }
}

pub fn mount(volume: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: volume.into(),
        mount_path: path.into(),
        ..VolumeMount::default()
    }
}

pub fn empty_dir(name: &str) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }
}
