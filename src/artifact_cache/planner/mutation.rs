//! What a step's pod gains: which container is the step, whether its command runs under the
//! launcher, where its inputs appear, which helpers it gets (made by `helpers`), and whether its
//! restart policy changes; checked against what only the pod spec can tell.
//!
//! Inputs are copied into place by the launcher, as the oras-operator's script does, so nothing of
//! the image in the working directory is hidden. Only a step without `command` (whose ENTRYPOINT
//! ocifit cannot wrap) or with a read-only root file system gets its inputs as a volume mounted at
//! `input-path` (or `inputs/` in its `workingDir`).

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::Denial;
use super::Helper;
use super::helpers::{
    self, EmptyDirVolume, HelperContainer, INPUTS_DIR, INPUTS_VOLUME, Mount, RUN_DIR, RUN_VOLUME,
    TERMINATION_LOG,
};
use super::settings::StepSettings;
use crate::api::step;
use crate::registry;
use crate::step_helper::{INPUTS_NAME, PUSH_TIMEOUT};
use crate::step_helper::{Launch, strings};

pub(super) use super::helpers::LAUNCHER_DIR;

pub(super) use super::helpers::PREPARE;

pub(super) use super::helpers::PUSH;

pub(super) use super::helpers::Registry;

/// What `output-path` is when the step names none: the working directory, whose entries are
/// pushed as the artifact's top level (what the oras-operator pushes for its working directory).
pub(super) const WORKING_DIRECTORY: &str = ".";

/// Who restarts the step's pod, which decides what a restart policy of `Always` means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Owner {
    /// A pod of its own (the oras-operator's examples): ocifit may make it run once.
    Bare,
    /// A pod a controller made (this kind and name), which would replace it whatever it says.
    Controller(String),
    /// A Job's pod template.
    JobTemplate,
}

/// The mutation of the pod spec; its helpers borrow from the step's settings, its registry and
/// the helper image.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Mutation<'a> {
    /// Init containers to put first, in order.
    pub init_containers: Vec<HelperContainer<'a>>,
    pub volumes: Vec<EmptyDirVolume>,
    /// Index of the step's container in `containers`.
    pub step: usize,
    /// Mounts the step's container gains.
    pub mounts: Vec<Mount>,
    /// The step's new command, when it runs under the launcher.
    pub command: Option<Vec<String>>,
    /// The pod's new restart policy, when ocifit changes it.
    pub restart_policy: Option<String>,
    /// What ocifit changed that the step's author did not ask for, for the admission warnings.
    pub warnings: Vec<String>,
    /// The marker annotation's value.
    pub marker: String,
}

/// Whether a pod spec already carries the helpers (injected before the marker was known).
pub(super) fn is_injected(spec: Option<&PodSpec>) -> bool {
    spec.and_then(|s| s.init_containers.as_ref())
        .is_some_and(|init| init.iter().any(|c| c.name == PREPARE || c.name == PUSH))
}

pub(super) fn build<'a>(
    settings: &'a StepSettings,
    registry: &'a Registry,
    spec: &PodSpec,
    helper: &'a Helper,
    owner: &Owner,
) -> Result<Mutation<'a>, Denial> {
    let step_index = step_container(settings, spec)?;
    let container = &spec.containers[step_index];
    let inputs = settings
        .inputs
        .iter()
        .map(|uri| reference(registry, step::INPUT_URI, uri))
        .collect::<Result<Vec<_>, _>>()?;
    let output = output(settings, registry)?;
    helpers::check_process_isolation(settings, registry, spec)?;
    let mut warnings = Vec::new();
    let restart_policy = match &output {
        Some(_) => run_once(spec, owner, &mut warnings)?,
        None => None,
    };
    let original = container.command.clone().filter(|c| !c.is_empty());
    let wraps_outputs = output.is_some() || settings.output_pipe.is_some();
    if wraps_outputs && original.is_none() {
        return Err(Denial::NoCommand {
            container: container.name.clone(),
        });
    }
    let mut mounts = Vec::new();
    let mut volumes = Vec::new();
    let read_only = container
        .security_context
        .as_ref()
        .and_then(|s| s.read_only_root_filesystem)
        == Some(true);
    let copies_inputs = original.is_some() && !inputs.is_empty() && !read_only;
    let launched = original.is_some() && (wraps_outputs || copies_inputs);
    if !inputs.is_empty() {
        let at = if copies_inputs {
            INPUTS_DIR.to_string()
        } else {
            let at = mounted_inputs(settings, container)?;
            if read_only && original.is_some() {
                warnings.push(format!(
                    "container {:?} has a read-only root file system, so its inputs cannot be copied into place: they are mounted at {at}, hiding what its image has there",
                    container.name
                ));
            }
            at
        };
        mounts.push(helpers::mount(INPUTS_VOLUME, &at));
        volumes.push(helpers::empty_dir(INPUTS_VOLUME));
    }
    let command = match original {
        Some(original) if launched => {
            mounts.push(helpers::mount(RUN_VOLUME, RUN_DIR));
            volumes.push(helpers::empty_dir(RUN_VOLUME));
            let output_path = output.as_ref().map(|(_, path)| path.as_str());
            Some(launch_command(
                settings,
                container,
                output_path,
                copies_inputs,
                original,
            ))
        }
        _ => None,
    };
    let security = helpers::security_context(container, spec);
    let mut init_containers = vec![helpers::prepare(
        settings, registry, helper, &inputs, launched, security,
    )];
    if let Some((reference, _)) = &output {
        init_containers.push(helpers::pusher(
            settings, registry, helper, reference, security,
        ));
    }
    Ok(Mutation {
        init_containers,
        volumes,
        step: step_index,
        mounts,
        command,
        restart_policy,
        warnings,
        marker: registry.marker.clone(),
    })
}

/// Where the outputs go and what is pushed: the reference (a tag) and `output-path`.
fn output(
    settings: &StepSettings,
    registry: &Registry,
) -> Result<Option<(String, String)>, Denial> {
    let Some(uri) = &settings.output_uri else {
        return Ok(None);
    };
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
        .unwrap_or_else(|| WORKING_DIRECTORY.to_string());
    Ok(Some((reference, path)))
}

/// The step's container: the one `container` names, else the first, as the oras-operator takes.
fn step_container(settings: &StepSettings, spec: &PodSpec) -> Result<usize, Denial> {
    if spec.containers.is_empty() {
        return Err(Denial::NoContainers);
    }
    let Some(name) = &settings.container else {
        return Ok(0);
    };
    spec.containers
        .iter()
        .position(|c| &c.name == name)
        .ok_or_else(|| Denial::UnknownContainer {
            name: name.clone(),
            names: spec
                .containers
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// A step that pushes must run once, or it pushes again at every restart. A bare pod with
/// `Always` (the default, which admission cannot tell from one written out) is set to `Never` with
/// a warning; a controller's pod or a Job's template cannot be, as the controller would restart it.
fn run_once(
    spec: &PodSpec,
    owner: &Owner,
    warnings: &mut Vec<String>,
) -> Result<Option<String>, Denial> {
    if !matches!(spec.restart_policy.as_deref(), None | Some("Always")) {
        return Ok(None);
    }
    match owner {
        Owner::Bare => {
            warnings.push(format!(
                "restartPolicy set to Never (it was Always, the default): the step runs once and pushes its outputs once, as the oras-operator's steps are meant to; set restartPolicy: OnFailure to retry a failing step, or remove {}output-uri for a pod that should restart",
                step::PREFIX
            ));
            Ok(Some("Never".to_string()))
        }
        Owner::Controller(owner) => Err(Denial::RestartsForever {
            what: format!("its pods are made by {owner}, which starts them again"),
        }),
        Owner::JobTemplate => Err(Denial::RestartsForever {
            what: "the Job's pod template says restartPolicy Always".to_string(),
        }),
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

/// Where the inputs volume is mounted for a step without `command`: an absolute directory the
/// container does not already mount; `input-path` itself (the image's files are unknown at
/// admission), else `inputs/` in the working directory, as `cp -R` puts them.
fn mounted_inputs(settings: &StepSettings, container: &Container) -> Result<String, Denial> {
    let working_dir = container
        .working_dir
        .as_deref()
        .filter(|w| w.starts_with('/'));
    let path = match (&settings.input_path, working_dir) {
        (Some(path), _) if path.starts_with('/') => path.clone(),
        (Some(path), Some(dir)) => format!("{}/{path}", dir.trim_end_matches('/')),
        (None, Some(dir)) => format!("{}/{INPUTS_NAME}", dir.trim_end_matches('/')),
        (Some(path), None) => {
            return Err(Denial::NoInputPath {
                what: format!("input-path {path:?} is relative and there is no workingDir"),
                container: container.name.clone(),
            });
        }
        (None, None) => {
            return Err(Denial::NoInputPath {
                what: "no input-path and no workingDir".to_string(),
                container: container.name.clone(),
            });
        }
    };
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
    Ok(path)
}

fn launch_command(
    settings: &StepSettings,
    container: &Container,
    output_path: Option<&str>,
    copies_inputs: bool,
    original: Vec<String>,
) -> Vec<String> {
    let launch = Launch {
        run: RUN_DIR.into(),
        termination_log: Some(
            container
                .termination_message_path
                .as_deref()
                .unwrap_or(TERMINATION_LOG)
                .into(),
        ),
        inputs: copies_inputs.then(|| INPUTS_DIR.into()),
        input_path: settings
            .input_path
            .as_ref()
            .filter(|_| copies_inputs)
            .map(Into::into),
        push: output_path.map(Into::into),
        pipe: settings.output_pipe.as_ref().map(Into::into),
        push_timeout: PUSH_TIMEOUT.as_secs(),
        debug: settings.debug,
        command: original.into_iter().map(Into::into).collect(),
    };
    // The launcher is run by its own loader, from the run volume: the step's image may have
    // neither ocifit nor a compatible libc.
    let mut command = vec![
        format!("{LAUNCHER_DIR}/ld.so"),
        "--library-path".into(),
        LAUNCHER_DIR.into(),
        format!("{LAUNCHER_DIR}/ocifit"),
    ];
    command.extend(strings(launch.to_args()));
    command
}
