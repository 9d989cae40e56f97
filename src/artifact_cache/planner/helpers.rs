//! The containers and volumes ocifit adds to a step's pod, written straight as the JSON the patch
//! carries (what k8s-openapi wrote for them, without building its large typed `Container` and
//! converting it on every admission): the `ocifit-prepare` init container, the `ocifit-push`
//! native sidecar, their credentials, their lock-down and their volumes. Knows nothing of when
//! each is needed (that is `mutation`).

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::{Map, Value, json};

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
    security: &Value,
) -> Value {
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
    Value::Object(helper_container(
        PREPARE, settings, registry, helper, args, mounts, security,
    ))
}

pub fn pusher(
    settings: &StepSettings,
    registry: &Registry,
    helper: &Helper,
    reference: &str,
    security: &Value,
) -> Value {
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
        registry,
        helper,
        args,
        vec![mount(RUN_VOLUME, RUN_DIR)],
        security,
    );
    // A native sidecar: started before the step, stopped after it.
    container.insert("restartPolicy".into(), "Always".into());
    Value::Object(container)
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
    registry: &Registry,
    helper: &Helper,
    args: Vec<std::ffi::OsString>,
    mounts: Vec<Value>,
    security: &Value,
) -> Map<String, Value> {
    let mut container = Map::new();
    container.insert("name".into(), name.into());
    container.insert("image".into(), helper.image.as_str().into());
    if let Some(policy) = &helper.pull_policy {
        container.insert("imagePullPolicy".into(), policy.as_str().into());
    }
    container.insert("args".into(), command::strings(args).into());
    // Only the helpers see the credentials: never the step's container, never the spec.
    if let Some(secret) = &settings.oras_env {
        container.insert(
            "envFrom".into(),
            json!([{"secretRef": {"name": secret, "optional": false}}]),
        );
    } else if let Some(secret) = &registry.credentials {
        container.insert("env".into(), cache_credentials(secret));
    }
    container.insert("volumeMounts".into(), Value::Array(mounts));
    container.insert("securityContext".into(), security.clone());
    container.insert("resources".into(), helper_resources());
    container.insert(
        "terminationMessagePolicy".into(),
        "FallbackToLogsOnError".into(),
    );
    container
}

/// The cache's generated credentials, as references to its Secret (never values), for a step
/// that names no `oras-env` of its own.
fn cache_credentials(secret: &str) -> Value {
    crate::artifact_cache::secret::STEP_KEYS
        .iter()
        .map(|key| {
            json!({
                "name": key,
                "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": false}},
            })
        })
        .collect()
}

/// The user the helpers run as when the step's would be root or is not named: ocifit's image's
/// own (distroless `nonroot`).
pub const HELPER_USER: i64 = 65532;

/// Locked down as Pod Security `restricted` asks of every container (whatever the pod's own
/// settings), and as the step's user when it names one, so what the helpers write the step can
/// read and what the step writes they can. A step running as root gets helpers running as
/// [`HELPER_USER`]: root may read and write what they make, and they never need root themselves.
pub fn security_context(step: &Container, pod: &PodSpec) -> Value {
    let step_security = step.security_context.as_ref();
    let pod_user = pod.security_context.as_ref().and_then(|s| s.run_as_user);
    let run_as_user = match (step_security.and_then(|s| s.run_as_user), pod_user) {
        (Some(0), _) | (None, Some(0)) | (None, None) => Some(HELPER_USER),
        (Some(user), _) => Some(user),
        // The pod's own user applies to the helpers as to the step.
        (None, Some(_)) => None,
    };
    let mut security = json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": true,
    });
    if let Some(user) = run_as_user {
        security["runAsUser"] = user.into();
    }
    if let Some(group) = step_security.and_then(|s| s.run_as_group) {
        security["runAsGroup"] = group.into();
    }
    security
}

/// What each helper asks for and may use: a transfer streams through bounded buffers (peaks of
/// 28–36 MiB measured on 1 GiB, docs/artifact-cache.md), so 256 MiB leaves room for the page
/// cache of large files; a CPU limit keeps compression from taking the node.
fn helper_resources() -> Value {
    json!({
        "requests": {"cpu": "50m", "memory": "64Mi"},
        "limits": {"cpu": "1", "memory": "256Mi"},
    })
}

pub fn mount(volume: &str, path: &str) -> Value {
    json!({"name": volume, "mountPath": path})
}

pub fn empty_dir(name: &str) -> Value {
    json!({"name": name, "emptyDir": {}})
}
