//! What a step's pod gains, as typed objects: the `ocifit-prepare` init container, the
//! `ocifit-push` native sidecar, their volumes, the step container's mounts and its command run
//! under the launcher. Checks what only the pod spec can tell (which container, its command, its
//! mounts, the restart policy).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvFromSource, EnvVar, EnvVarSource, PodSpec,
    ResourceRequirements, SeccompProfile, SecretEnvSource, SecretKeySelector, SecurityContext,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::Denial;
use super::Helper;
use super::settings::StepSettings;
use crate::api::step;
use crate::registry;

/// The init container that pulls the inputs and installs the launcher.
pub const PREPARE: &str = "ocifit-prepare";
/// The native sidecar that pushes the outputs.
pub const PUSH: &str = "ocifit-push";
/// The volume holding the inputs, mounted at `input-path` in the step's container.
pub const INPUTS_VOLUME: &str = "ocifit-inputs";
/// The volume holding the launcher and the hand-off between the step and the pusher.
pub const RUN_VOLUME: &str = "ocifit-run";
/// Where the helpers see the inputs.
pub const INPUTS_DIR: &str = "/ocifit/inputs";
/// Where every container of the step sees the run volume.
pub const RUN_DIR: &str = "/ocifit/run";
/// The launcher: ocifit with its loader (`ld.so`) and libraries.
pub const LAUNCHER_DIR: &str = "/ocifit/run/bin";
/// The container's termination message path unless it sets its own.
const TERMINATION_LOG: &str = "/dev/termination-log";

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

/// The mutation of the pod spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutation {
    /// Init containers to put first, in order.
    pub init_containers: Vec<Container>,
    pub volumes: Vec<Volume>,
    /// Index of the step's container in `containers`.
    pub step: usize,
    /// Mounts the step's container gains.
    pub mounts: Vec<VolumeMount>,
    /// The step's new command, when it runs under the launcher.
    pub command: Option<Vec<String>>,
    /// The marker annotation's value.
    pub marker: String,
}

/// Whether a pod spec already carries the helpers (injected before the marker was known).
pub fn is_injected(spec: Option<&PodSpec>) -> bool {
    spec.and_then(|s| s.init_containers.as_ref())
        .is_some_and(|init| init.iter().any(|c| c.name == PREPARE || c.name == PUSH))
}

pub fn build(
    settings: &StepSettings,
    registry: &Registry,
    spec: &PodSpec,
    helper: &Helper,
) -> Result<Mutation, Denial> {
    let step_index = step_container(settings, spec)?;
    let container = &spec.containers[step_index];
    let inputs = settings
        .inputs
        .iter()
        .map(|uri| reference(registry, step::INPUT_URI, uri))
        .collect::<Result<Vec<_>, _>>()?;
    let output = match &settings.output_uri {
        None => None,
        Some(uri) => {
            let reference = reference(registry, step::OUTPUT_URI, uri)?;
            if reference.contains('@') {
                return Err(Denial::OutputByDigest {
                    key: format!("{}{}", step::PREFIX, step::OUTPUT_URI),
                    uri: uri.clone(),
                });
            }
            let path = settings
                .output_path
                .clone()
                .or_else(|| settings.output_pipe.clone())
                .ok_or(Denial::NoOutputPath)?;
            if matches!(spec.restart_policy.as_deref(), None | Some("Always")) {
                return Err(Denial::RestartsForever);
            }
            Some((reference, path))
        }
    };
    let launched = output.is_some() || settings.output_pipe.is_some();
    let command = if launched {
        let original = container
            .command
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| Denial::NoCommand {
                container: container.name.clone(),
            })?;
        Some(launch_command(
            settings,
            container,
            output.as_ref(),
            original,
        ))
    } else {
        None
    };
    let mut mounts = Vec::new();
    let mut volumes = Vec::new();
    if !inputs.is_empty() {
        let path = input_dir(settings, container)?;
        let taken = container
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path.trim_end_matches('/') == path.trim_end_matches('/'));
        if taken {
            return Err(Denial::MountTaken {
                path,
                container: container.name.clone(),
            });
        }
        mounts.push(mount(INPUTS_VOLUME, &path));
        volumes.push(empty_dir(INPUTS_VOLUME));
    }
    if launched {
        mounts.push(mount(RUN_VOLUME, RUN_DIR));
        volumes.push(empty_dir(RUN_VOLUME));
    }
    let security = security_context(container, spec);
    let mut init_containers = vec![prepare(
        settings, registry, helper, &inputs, launched, &security,
    )];
    if let Some((reference, _)) = &output {
        init_containers.push(pusher(settings, registry, helper, reference, &security));
    }
    Ok(Mutation {
        init_containers,
        volumes,
        step: step_index,
        mounts,
        command,
        marker: registry.marker.clone(),
    })
}

fn step_container(settings: &StepSettings, spec: &PodSpec) -> Result<usize, Denial> {
    let names = || {
        spec.containers
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (&settings.container, spec.containers.len()) {
        (_, 0) => Err(Denial::NoContainers),
        (Some(name), _) => spec
            .containers
            .iter()
            .position(|c| &c.name == name)
            .ok_or_else(|| Denial::UnknownContainer {
                name: name.clone(),
                names: names(),
            }),
        (None, 1) => Ok(0),
        (None, _) => Err(Denial::ContainerNeeded { names: names() }),
    }
}

/// `host/uri`, checked as an OCI reference.
fn reference(registry: &Registry, field: &str, uri: &str) -> Result<String, Denial> {
    let whole = format!("{}/{}", registry.host, uri.trim_start_matches('/'));
    registry::parse_reference(&whole)
        .map(|r| r.whole())
        .map_err(|err| Denial::InvalidUri {
            key: format!("{}{field}", step::PREFIX),
            uri: uri.to_string(),
            reason: match err {
                registry::Error::InvalidReference { reason, .. } => reason,
                other => other.to_string(),
            },
        })
}

/// The absolute directory the inputs are mounted at.
fn input_dir(settings: &StepSettings, container: &Container) -> Result<String, Denial> {
    let working_dir = container
        .working_dir
        .as_deref()
        .filter(|w| w.starts_with('/'));
    match (&settings.input_path, working_dir) {
        (Some(path), _) if path.starts_with('/') => Ok(path.clone()),
        (Some(path), Some(dir)) => Ok(format!("{}/{path}", dir.trim_end_matches('/'))),
        (None, Some(dir)) => Ok(dir.to_string()),
        (Some(path), None) => Err(Denial::NoInputPath {
            what: format!("input-path {path:?} is relative and there is no workingDir"),
            container: container.name.clone(),
        }),
        (None, None) => Err(Denial::NoInputPath {
            what: "no input-path and no workingDir".to_string(),
            container: container.name.clone(),
        }),
    }
}

fn launch_command(
    settings: &StepSettings,
    container: &Container,
    output: Option<&(String, String)>,
    original: Vec<String>,
) -> Vec<String> {
    let mut command: Vec<String> = vec![
        format!("{LAUNCHER_DIR}/ld.so"),
        "--library-path".into(),
        LAUNCHER_DIR.into(),
        format!("{LAUNCHER_DIR}/ocifit"),
        "artifact".into(),
        "launch".into(),
        "--run".into(),
        RUN_DIR.into(),
        "--termination-log".into(),
        container
            .termination_message_path
            .clone()
            .unwrap_or_else(|| TERMINATION_LOG.to_string()),
    ];
    if let Some((_, path)) = output {
        command.extend(["--push".into(), path.clone()]);
    }
    if let Some(pipe) = &settings.output_pipe {
        command.extend(["--pipe".into(), pipe.clone()]);
    }
    if settings.debug {
        command.push("--debug".into());
    }
    command.push("--".into());
    command.extend(original);
    command
}

fn prepare(
    settings: &StepSettings,
    registry: &Registry,
    helper: &Helper,
    inputs: &[String],
    launched: bool,
    security: &SecurityContext,
) -> Container {
    let mut args: Vec<String> = vec!["artifact".into(), "prepare".into()];
    for input in inputs {
        args.extend(["--input".into(), input.clone()]);
    }
    let mut mounts = Vec::new();
    if !inputs.is_empty() {
        args.extend(["--into".into(), INPUTS_DIR.into()]);
        mounts.push(mount(INPUTS_VOLUME, INPUTS_DIR));
    }
    if launched {
        args.extend(["--launcher".into(), LAUNCHER_DIR.into()]);
        mounts.push(mount(RUN_VOLUME, RUN_DIR));
    }
    args.extend(transfer_flags(settings, registry));
    args.extend(["--termination-log".into(), TERMINATION_LOG.into()]);
    let mut container = helper_container(PREPARE, settings, helper, args, mounts, security);
    container.env = cache_credentials(settings, registry);
    container
}

fn pusher(
    settings: &StepSettings,
    registry: &Registry,
    helper: &Helper,
    reference: &str,
    security: &SecurityContext,
) -> Container {
    let mut args: Vec<String> = vec![
        "artifact".into(),
        "deliver".into(),
        "--run".into(),
        RUN_DIR.into(),
        "--to".into(),
        reference.into(),
    ];
    args.extend(transfer_flags(settings, registry));
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

fn transfer_flags(settings: &StepSettings, registry: &Registry) -> Vec<String> {
    let mut flags = Vec::new();
    if registry.plain_http {
        flags.push("--plain-http".into());
    }
    if !settings.unpack {
        flags.push("--no-unpack".into());
    }
    if settings.debug {
        flags.push("--debug".into());
    }
    flags
}

fn helper_container(
    name: &str,
    settings: &StepSettings,
    helper: &Helper,
    args: Vec<String>,
    mounts: Vec<VolumeMount>,
    security: &SecurityContext,
) -> Container {
    Container {
        name: name.into(),
        image: Some(helper.image.clone()),
        image_pull_policy: helper.pull_policy.clone(),
        args: Some(args),
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
fn security_context(step: &Container, pod: &PodSpec) -> SecurityContext {
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

fn mount(volume: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: volume.into(),
        mount_path: path.into(),
        ..VolumeMount::default()
    }
}

fn empty_dir(name: &str) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }
}
