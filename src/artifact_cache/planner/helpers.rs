//! The containers and volumes ocifit adds to a step's pod, as small typed values holding what
//! the patch writes of them, written straight into the patch's JSON text: neither k8s-openapi's
//! large `Container` nor a tree of JSON values is built, written and dropped on every admission.
//! The `ocifit-prepare` init container, the `ocifit-push` native sidecar, their credentials,
//! their lock-down and their volumes. Knows nothing of when each is needed (that is
//! `mutation`). Each writes its keys in the order of their names, so the JSON reads as before,
//! when these were JSON maps.

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::settings::StepSettings;
use super::{Denial, Helper};
use crate::admission::{JsonText, WriteJson};
use crate::artifact_cache::secret;
use crate::step_helper::Limits;
use crate::step_helper::{Deliver, Prepare, Transfer, strings};
use crate::step_helper::{Direction, PRE_SPLIT_USER, USER};

/// The init container that pulls the inputs and installs the launcher.
pub const PREPARE: &str = "ocifit-prepare";
/// The native sidecar that pushes the outputs.
pub const PUSH: &str = "ocifit-push";
/// The volume holding the pulled inputs.
pub(super) const INPUTS_VOLUME: &str = "ocifit-inputs";
/// The volume holding the launcher and the hand-off between the step and the pusher.
pub(super) const RUN_VOLUME: &str = "ocifit-run";
pub(super) use crate::step_helper::INPUTS_DIR;
/// Where every container of the step sees the run volume.
pub(super) const RUN_DIR: &str = "/ocifit/run";
/// The launcher: ocifit with its loader (`ld.so`) and libraries.
pub(super) const LAUNCHER_DIR: &str = "/ocifit/run/bin";
/// The container's termination message path unless it sets its own.
pub(super) const TERMINATION_LOG: &str = "/dev/termination-log";

/// Where the step's URIs are.
pub(super) struct Registry {
    /// `host[:port]` prefixed to every URI.
    pub host: String,
    pub plain_http: bool,
    /// The marker annotation's value: what the step was wired to.
    pub marker: String,
    /// The Secret generated for the cache: its credentials go to the helpers, by reference.
    pub credentials: Option<String>,
}

/// A helper container, as the patch writes it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct HelperContainer<'a> {
    args: Vec<String>,
    env: Vec<SecretKeyEnv<'a>>,
    image: &'a str,
    image_pull_policy: Option<&'a str>,
    name: &'static str,
    /// `Always` for the pusher: a native sidecar.
    restart_policy: Option<&'static str>,
    security_context: SecurityContext,
    volume_mounts: Vec<Mount>,
}

/// What each helper asks for and may use, as the patch writes it: transfers stream through
/// bounded buffers (docs/artifact-cache.md, "Measured"), so the memory limit leaves room for the
/// page cache of large files; a CPU limit keeps compression from taking the node.
const HELPER_RESOURCES: &str =
    r#"{"limits":{"cpu":"1","memory":"256Mi"},"requests":{"cpu":"50m","memory":"64Mi"}}"#;

impl WriteJson for HelperContainer<'_> {
    fn write_json(&self, out: &mut JsonText<'_>) {
        // Keys in the order of their names, as the JSON maps these once were wrote them.
        out.raw(r#"{"args":"#);
        out.list(&self.args);
        if !self.env.is_empty() {
            out.raw(r#","env":"#);
            out.list(&self.env);
        }
        out.raw(r#","image":"#);
        out.string(self.image);
        if let Some(policy) = self.image_pull_policy {
            out.raw(r#","imagePullPolicy":"#);
            out.string(policy);
        }
        out.raw(r#","name":"#);
        out.string(self.name);
        out.raw(r#","resources":"#);
        out.raw(HELPER_RESOURCES);
        if let Some(policy) = self.restart_policy {
            out.raw(r#","restartPolicy":"#);
            out.string(policy);
        }
        out.raw(r#","securityContext":"#);
        self.security_context.write_json(out);
        out.raw(r#","terminationMessagePolicy":"FallbackToLogsOnError","volumeMounts":"#);
        out.list(&self.volume_mounts);
        out.raw("}");
    }
}

/// One of the cache's credentials, by reference to its Secret.
#[derive(Debug, Clone, PartialEq)]
struct SecretKeyEnv<'a> {
    name: &'static str,
    key: &'static str,
    secret: &'a str,
    optional: bool,
}

impl WriteJson for SecretKeyEnv<'_> {
    fn write_json(&self, out: &mut JsonText<'_>) {
        out.raw(r#"{"name":"#);
        out.string(self.name);
        out.raw(r#","valueFrom":{"secretKeyRef":{"key":"#);
        out.string(self.key);
        out.raw(r#","name":"#);
        out.string(self.secret);
        out.raw(if self.optional {
            r#","optional":true}}}"#
        } else {
            r#","optional":false}}}"#
        });
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mount {
    mount_path: String,
    name: &'static str,
}

impl WriteJson for Mount {
    fn write_json(&self, out: &mut JsonText<'_>) {
        out.raw(r#"{"mountPath":"#);
        out.string(&self.mount_path);
        out.raw(r#","name":"#);
        out.string(self.name);
        out.raw("}");
    }
}

/// An `emptyDir` volume of [`VOLUME_SIZE_LIMIT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EmptyDirVolume {
    name: &'static str,
}

impl WriteJson for EmptyDirVolume {
    fn write_json(&self, out: &mut JsonText<'_>) {
        out.raw(r#"{"emptyDir":{"sizeLimit":"#);
        out.string(VOLUME_SIZE_LIMIT);
        out.raw(r#"},"name":"#);
        out.string(self.name);
        out.raw("}");
    }
}

/// Each injected volume's `sizeLimit`, what one pull may write: the kubelet evicts a pod whose
/// volume grows past it, before the node's disk fills and DiskPressure evicts other tenants' pods
/// ([`crate::step_helper::DEFAULT_MAX_BYTES`]).
pub(super) const VOLUME_SIZE_LIMIT: &str = "10Gi";

/// A helper's lock-down ([`security_context`]): Pod Security `restricted`, and the user and
/// group the step's own side runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SecurityContext {
    run_as_group: Option<i64>,
    run_as_user: Option<i64>,
}

impl WriteJson for SecurityContext {
    fn write_json(&self, out: &mut JsonText<'_>) {
        out.raw(
            r#"{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},"readOnlyRootFilesystem":true"#,
        );
        if let Some(group) = self.run_as_group {
            out.raw(r#","runAsGroup":"#);
            out.raw(itoa::Buffer::new().format(group));
        }
        out.raw(r#","runAsNonRoot":true"#);
        if let Some(user) = self.run_as_user {
            out.raw(r#","runAsUser":"#);
            out.raw(itoa::Buffer::new().format(user));
        }
        out.raw(r#","seccompProfile":{"type":"RuntimeDefault"}}"#);
    }
}

pub(super) fn prepare<'a>(
    settings: &'a StepSettings,
    registry: &'a Registry,
    helper: &'a Helper,
    inputs: &[String],
    launched: bool,
    security: SecurityContext,
) -> HelperContainer<'a> {
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
        // The default bytes are the inputs volume's `sizeLimit`: a pull stops before the kubelet
        // would evict the pod.
        limits: Limits::default(),
    }
    .to_args();
    let env = credentials(settings, registry, Direction::Pull);
    helper_container(PREPARE, helper, args, env, mounts, security)
}

pub(super) fn pusher<'a>(
    settings: &'a StepSettings,
    registry: &'a Registry,
    helper: &'a Helper,
    reference: &str,
    security: SecurityContext,
) -> HelperContainer<'a> {
    let args = Deliver {
        run: RUN_DIR.into(),
        to: reference.into(),
        compression_level: crate::step_helper::DEFAULT_COMPRESSION,
        termination_log: Some(TERMINATION_LOG.into()),
        debug: settings.debug,
        transfer: transfer(settings, registry),
    }
    .to_args();
    let env = credentials(settings, registry, Direction::Push);
    let mounts = vec![mount(RUN_VOLUME, RUN_DIR)];
    let mut container = helper_container(PUSH, helper, args, env, mounts, security);
    // A native sidecar: started before the step, stopped after it.
    container.restart_policy = Some("Always");
    container
}

fn transfer(settings: &StepSettings, registry: &Registry) -> Transfer {
    Transfer {
        plain_http: registry.plain_http,
        no_unpack: !settings.unpack,
    }
}

fn helper_container<'a>(
    name: &'static str,
    helper: &'a Helper,
    args: Vec<std::ffi::OsString>,
    env: Vec<SecretKeyEnv<'a>>,
    volume_mounts: Vec<Mount>,
    security_context: SecurityContext,
) -> HelperContainer<'a> {
    HelperContainer {
        args: strings(args),
        env,
        image: &helper.image,
        image_pull_policy: helper.pull_policy.as_deref(),
        name,
        restart_policy: None,
        security_context,
        volume_mounts,
    }
}

/// A helper's credentials for its one direction, as Secret references (never values), given only
/// to the helpers: from the step's `oras-env` Secret, else the cache's generated one. The pusher's
/// user falls back to `ORAS_USER` ([`PRE_SPLIT_USER`]) so older Secrets keep pushing.
fn credentials<'a>(
    settings: &'a StepSettings,
    registry: &'a Registry,
    direction: Direction,
) -> Vec<SecretKeyEnv<'a>> {
    let password = direction.password_variable();
    let (secret, generated) = match (&settings.oras_env, &registry.credentials) {
        (Some(secret), _) => (secret, false),
        (None, Some(secret)) => (secret, true),
        (None, None) => return Vec::new(),
    };
    let variable = |name: &'static str, key: &'static str, optional: bool| SecretKeyEnv {
        name,
        key,
        secret,
        optional,
    };
    match (generated, direction) {
        (false, _) => vec![
            variable(USER, USER, false),
            variable(password, password, true),
        ],
        (true, Direction::Pull) => vec![
            variable(USER, USER, false),
            variable(password, password, false),
        ],
        (true, Direction::Push) => vec![
            variable(USER, secret::PUSH_USER_KEY, true),
            variable(PRE_SPLIT_USER, USER, false),
            variable(password, password, false),
        ],
    }
}

/// Whether the helper that runs beside the step (the pusher) holds credentials.
fn pusher_holds_credentials(settings: &StepSettings, registry: &Registry) -> bool {
    settings.output_uri.is_some() && (settings.oras_env.is_some() || registry.credentials.is_some())
}

/// Refuses a pod whose containers could see the pusher's process while it holds credentials: a
/// shared process namespace (or the host's) lets step code signal the sidecar and read its
/// `/proc/<pid>`. Files are shared through volumes, so a step needs neither.
pub(super) fn check_process_isolation(
    settings: &StepSettings,
    registry: &Registry,
    spec: &PodSpec,
) -> Result<(), Denial> {
    if !pusher_holds_credentials(settings, registry) {
        return Ok(());
    }
    let field = if spec.share_process_namespace == Some(true) {
        "shareProcessNamespace"
    } else if spec.host_pid == Some(true) {
        "hostPID"
    } else {
        return Ok(());
    };
    Err(Denial::SharedProcesses {
        field: field.to_string(),
    })
}

/// The user the helpers run as when the step's would be root or is not named: ocifit's image's
/// own (distroless `nonroot`).
pub(super) const HELPER_USER: i64 = 65532;

/// Pod Security `restricted` whatever the pod's settings, and the step's user when it names one,
/// so each side can read what the other writes. A step running as root gets [`HELPER_USER`]
/// helpers: root can still read what they make, and they never need root.
pub(super) fn security_context(step: &Container, pod: &PodSpec) -> SecurityContext {
    let step_security = step.security_context.as_ref();
    let pod_user = pod.security_context.as_ref().and_then(|s| s.run_as_user);
    let run_as_user = match (step_security.and_then(|s| s.run_as_user), pod_user) {
        (Some(0), _) | (None, Some(0)) | (None, None) => Some(HELPER_USER),
        (Some(user), _) => Some(user),
        // The pod's own user applies to the helpers as to the step.
        (None, Some(_)) => None,
    };
    SecurityContext {
        run_as_group: step_security.and_then(|s| s.run_as_group),
        run_as_user,
    }
}

pub(super) fn mount(volume: &'static str, path: &str) -> Mount {
    Mount {
        mount_path: path.to_owned(),
        name: volume,
    }
}

pub(super) fn empty_dir(name: &'static str) -> EmptyDirVolume {
    EmptyDirVolume { name }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_volumes_size_limit_is_what_one_pull_may_write() {
        assert_eq!(
            VOLUME_SIZE_LIMIT.strip_suffix("Gi").map(str::parse::<u64>),
            Some(Ok(crate::step_helper::DEFAULT_MAX_BYTES >> 30))
        );
    }
}
