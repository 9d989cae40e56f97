//! The step planner: a pod's (or a Job's pod template's) oras-operator annotations and the
//! namespace's cache become the pod mutation that pulls the step's inputs before it starts and
//! pushes its outputs when it succeeds, or a denial naming what is wrong. Pure: the admission
//! route looks the cache up and applies the answer.
//!
//! The mechanism it plans (init container, launcher, push sidecar): docs/artifact-cache.md,
//! "The mechanism".

mod cache;
mod helpers;
mod mutation;
mod patch;
mod read_step;
mod settings;
pub(super) use read_step::{StepJob, StepPod};

use std::collections::BTreeMap;

use crate::admission::WrittenPatch;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodSpec};

use crate::api::step;
use crate::registry::AllowList;

pub use helpers::PREPARE;

pub use helpers::PUSH;
pub use settings::Source;
pub(super) use settings::StepSettings;
pub use settings::parse as step_settings;

/// The registries a step's `registry` annotation may name instead of its namespace's cache:
/// ocifit's `--allowed-registries`. None when that list is empty: a step then reaches only its
/// own namespace's cache, whose credentials it gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepRegistries {
    allowed: AllowList,
    patterns: Vec<String>,
}

impl StepRegistries {
    /// From `--allowed-registries`' patterns.
    pub fn new(patterns: &[String]) -> Result<StepRegistries, crate::registry::ConfigError> {
        Ok(StepRegistries {
            allowed: AllowList::parse(patterns)?,
            patterns: patterns.to_vec(),
        })
    }

    fn allows(&self, host: &str) -> bool {
        !self.patterns.is_empty() && self.allowed.allows(host)
    }

    fn shown(&self) -> String {
        if self.patterns.is_empty() {
            "none is set".to_string()
        } else {
            self.patterns.join(", ")
        }
    }
}

/// What the planner knows of the cache a step names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CacheState {
    /// Ready: steps reach it at `endpoint` (`host:port`) with the credentials of the Secret
    /// `credentials` (generated for the cache) when it has one.
    Ready {
        endpoint: String,
        plain_http: bool,
        credentials: Option<String>,
    },
    /// It exists and is not Ready yet, but its status already names where steps will reach it
    /// (its Service's address, its generated credentials): a step is injected now and held by a
    /// scheduling gate until the cache is Ready. `reason` is the condition's.
    Starting {
        endpoint: String,
        plain_http: bool,
        credentials: Option<String>,
        reason: String,
    },
    /// It exists but is not Ready, for this reason (the condition's message), and names no
    /// endpoint yet; `stuck` when its condition says it cannot become Ready as it is (`Conflict`,
    /// `ImageNotAllowed`).
    NotReady { reason: String, stuck: bool },
    /// No ArtifactCache of that name in the namespace.
    Missing,
}

/// The helper containers' image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helper {
    /// ocifit's own image (its entrypoint is `ocifit`).
    pub image: String,
    /// Its pull policy, when set.
    pub pull_policy: Option<String>,
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum StepPlan {
    /// No annotation of the contract: admit unchanged.
    NotAStep,
    /// Injected before (the marker annotation is there): admit unchanged.
    AlreadyInjected,
    /// A step with nothing to move: admit unchanged, with these warnings.
    Unchanged {
        warnings: Vec<String>,
    },
    /// Admit with this patch (RFC 6902, against the object as sent) and these warnings.
    Patch {
        patch: WrittenPatch,
        warnings: Vec<String>,
    },
    /// Admit injected and held by the cache's scheduling gate until the cache is Ready.
    Held {
        patch: WrittenPatch,
        warnings: Vec<String>,
    },
    /// A Job whose cache names no endpoint yet: admit it with its contract copied onto its pod
    /// template, so each of its pods is planned when the Job creates it.
    Deferred {
        patch: WrittenPatch,
        warnings: Vec<String>,
    },
    Deny(Denial),
}

/// Why a step is refused; each message names the annotation or field to fix. Each has its row
/// in `docs/artifact-cache.md`'s refusals (a component test holds them equal).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denial {
    #[error("annotation {key} is empty")]
    EmptyAnnotation { key: String },
    #[error("annotation {key} is {value:?}; expected {expected}")]
    InvalidAnnotation {
        key: String,
        value: String,
        expected: &'static str,
    },
    #[error("annotation {key} names {uri:?}, which is not a valid artifact reference ({reason})")]
    InvalidUri {
        key: String,
        uri: String,
        reason: String,
    },
    #[error("annotation {key} names a digest ({uri:?}); outputs are pushed to a tag")]
    OutputByDigest { key: String, uri: String },
    #[error(
        "ArtifactCache {name:?} does not exist in namespace {namespace:?}; create it, name another with annotation {prefix}oras-cache, or name a registry with {prefix}registry",
        prefix = step::PREFIX
    )]
    CacheMissing { name: String, namespace: String },
    #[error("ArtifactCache {name:?} is not Ready: {reason}")]
    CacheNotReady { name: String, reason: String },
    // The same answer whatever the host is (another namespace's cache or not), so a step learns
    // nothing about other namespaces from it.
    #[error(
        "annotation {prefix}registry names {host:?}, which is not an allowed registry: a step uses its namespace's ArtifactCache (annotation {prefix}oras-cache) or a registry on ocifit's --allowed-registries ({allowed})",
        prefix = step::PREFIX
    )]
    RegistryNotAllowed { host: String, allowed: String },
    #[error("the pod has no containers")]
    NoContainers,
    #[error(
        "annotation {prefix}container names {name:?}, which is not a container of the pod ({names})",
        prefix = step::PREFIX
    )]
    UnknownContainer { name: String, names: String },
    #[error(
        "container {container:?} has no command: ocifit runs the step's command to write output-pipe and push its outputs only when it succeeds, and an image's ENTRYPOINT cannot be read at admission; set command (and args)"
    )]
    NoCommand { container: String },
    #[error(
        "{what} for container {container:?}, which has no command: ocifit copies the inputs into inputs/ in the working directory when it runs the step's command, and an image's ENTRYPOINT and WORKDIR cannot be read at admission; set command (and args), or set annotation {prefix}input-path to an absolute path (or the container's workingDir) where the inputs are mounted",
        prefix = step::PREFIX
    )]
    NoInputPath { what: String, container: String },
    #[error(
        "container {container:?} already mounts a volume at {path}, where the inputs would be mounted"
    )]
    MountTaken { path: String, container: String },
    #[error(
        "a step that pushes outputs must run once, but {what} (it would run and push forever); run the step as a Job with restartPolicy Never or OnFailure, or as a pod of its own, which ocifit runs once"
    )]
    RestartsForever { what: String },
    #[error(
        "the pod sets {field}: true, which lets its containers see the process of the sidecar holding the push credentials ({push}); a step that pushes with credentials (its cache's, or annotation {prefix}oras-env) needs its own process namespace: remove {field}",
        push = helpers::PUSH,
        prefix = step::PREFIX
    )]
    SharedProcesses { field: String },
    #[error(
        "ocifit was started without a helper image (--artifact-helper-image, the chart's artifactCache.helperImage), so it cannot run this step's inputs and outputs"
    )]
    NoHelperImage,
}

impl Denial {
    /// The denial's name, for metric labels.
    pub fn name(&self) -> &'static str {
        match self {
            Denial::EmptyAnnotation { .. } => "EmptyAnnotation",
            Denial::InvalidAnnotation { .. } => "InvalidAnnotation",
            Denial::InvalidUri { .. } => "InvalidUri",
            Denial::OutputByDigest { .. } => "OutputByDigest",
            Denial::CacheMissing { .. } => "CacheMissing",
            Denial::CacheNotReady { .. } => "CacheNotReady",
            Denial::RegistryNotAllowed { .. } => "RegistryNotAllowed",
            Denial::NoContainers => "NoContainers",
            Denial::UnknownContainer { .. } => "UnknownContainer",
            Denial::NoCommand { .. } => "NoCommand",
            Denial::NoInputPath { .. } => "NoInputPath",
            Denial::MountTaken { .. } => "MountTaken",
            Denial::RestartsForever { .. } => "RestartsForever",
            Denial::SharedProcesses { .. } => "SharedProcesses",
            Denial::NoHelperImage => "NoHelperImage",
        }
    }
}

/// Plans a pod. `caches` answers for a cache name in `namespace`; `registries` are those the
/// `registry` annotation may name.
pub(super) fn plan_pod(
    pod: &Pod,
    namespace: &str,
    caches: &dyn Fn(&str) -> CacheState,
    helper: &Helper,
    registries: &StepRegistries,
) -> StepPlan {
    let annotations = pod.metadata.annotations.as_ref().unwrap_or(&NO_ANNOTATIONS);
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map_or(mutation::Owner::Bare, |o| {
            mutation::Owner::Controller(format!("{} {}", o.kind, o.name))
        });
    plan(
        annotations,
        annotations,
        pod.spec.as_ref(),
        patch::Target::Pod {
            has_labels: pod.metadata.labels.is_some(),
        },
        StepInputs {
            owner,
            namespace,
            caches,
            helper,
            registries,
        },
    )
}

/// The annotations of an object that has none.
static NO_ANNOTATIONS: BTreeMap<String, String> = BTreeMap::new();

/// How the marker annotation of a step wired to an ArtifactCache begins (then the cache's name).
const CACHE_MARKER: &str = "ArtifactCache ";

/// The ArtifactCache a step pod was wired to, read back from its marker annotation's value;
/// `None` for a step that named its own `registry`.
pub fn cache_of(marker: &str) -> Option<&str> {
    wiring_of(marker).map(|(name, _)| name)
}

/// The ArtifactCache a step pod was wired to and the endpoint it was given, from its marker.
pub fn wiring_of(marker: &str) -> Option<(&str, &str)> {
    marker
        .strip_prefix(CACHE_MARKER)
        .and_then(|rest| rest.split_once(" at "))
}

/// Plans a Job: its own annotations are the contract, its pod template is mutated (and marked, so
/// its pods are not injected again).
pub(super) fn plan_job(
    job: &Job,
    namespace: &str,
    caches: &dyn Fn(&str) -> CacheState,
    helper: &Helper,
    registries: &StepRegistries,
) -> StepPlan {
    let annotations = job.metadata.annotations.as_ref().unwrap_or(&NO_ANNOTATIONS);
    let template = job.spec.as_ref().map(|spec| &spec.template);
    let template_annotations = template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .unwrap_or(&NO_ANNOTATIONS);
    let has_template_metadata = template.is_some_and(|t| t.metadata.is_some());
    plan(
        annotations,
        template_annotations,
        template.and_then(|t| t.spec.as_ref()),
        patch::Target::Job {
            has_template_metadata,
            has_template_labels: template
                .and_then(|t| t.metadata.as_ref())
                .is_some_and(|m| m.labels.is_some()),
        },
        StepInputs {
            owner: mutation::Owner::JobTemplate,
            namespace,
            caches,
            helper,
            registries,
        },
    )
}

/// What a plan looks things up in.
struct StepInputs<'a> {
    /// Who restarts the step's pod.
    owner: mutation::Owner,
    namespace: &'a str,
    caches: &'a dyn Fn(&str) -> CacheState,
    helper: &'a Helper,
    registries: &'a StepRegistries,
}

fn plan(
    annotations: &BTreeMap<String, String>,
    pod_annotations: &BTreeMap<String, String>,
    spec: Option<&PodSpec>,
    target: patch::Target,
    context: StepInputs<'_>,
) -> StepPlan {
    let StepInputs {
        owner,
        namespace,
        caches,
        helper,
        registries,
    } = context;
    let settings = match settings::parse(annotations) {
        Ok(None) => return StepPlan::NotAStep,
        Ok(Some(settings)) => settings,
        Err(denial) => return StepPlan::Deny(denial),
    };
    if pod_annotations.contains_key(step::INJECTED) || mutation::is_injected(spec) {
        return StepPlan::AlreadyInjected;
    }
    let mut warnings: Vec<String> = settings
        .ignored
        .iter()
        .map(|key| {
            format!(
                "annotation {key} is ignored: ocifit's helper runs from ocifit's own image and downloads nothing at run time"
            )
        })
        .chain(settings.unknown.iter().map(|key| {
            format!(
                "annotation {key} is not part of the step contract and is ignored (known: oras-cache, input-uri, input-uri_<suffix>, input-path, output-uri, output-path, output-pipe, unpack, registry, oras-env, container, debug)"
            )
        }))
        .collect();
    let moves_something = !settings.inputs.is_empty()
        || settings.output_uri.is_some()
        || settings.output_pipe.is_some();
    if !moves_something {
        warnings.push(format!(
            "no {p}input-uri, {p}output-uri or {p}output-pipe: the pod is admitted unchanged",
            p = step::PREFIX
        ));
        return StepPlan::Unchanged { warnings };
    }
    let Some(spec) = spec else {
        return StepPlan::Deny(Denial::NoContainers);
    };
    let mut held = false;
    let registry = match &settings.source {
        settings::Source::Registry { host, .. } if !registries.allows(host) => {
            return StepPlan::Deny(Denial::RegistryNotAllowed {
                host: host.clone(),
                allowed: registries.shown(),
            });
        }
        settings::Source::Registry { host, plain_http } => mutation::Registry {
            host: host.clone(),
            plain_http: *plain_http,
            marker: format!("registry {host}"),
            credentials: None,
        },
        settings::Source::Cache(name) => {
            let context = cache::Context {
                namespace,
                annotations,
                template_annotations: pod_annotations,
                target,
            };
            match cache::wire(name, caches(name), &context, &mut warnings) {
                Ok((registry, is_held)) => {
                    held = is_held;
                    registry
                }
                Err(plan) => return checked(*plan, &settings, spec, helper, &owner),
            }
        }
    };
    let mut mutation = match mutation::build(&settings, &registry, spec, helper, &owner) {
        Ok(mutation) => mutation,
        Err(denial) => return StepPlan::Deny(denial),
    };
    warnings.append(&mut mutation.warnings);
    let patch = patch::build(&mutation, spec, pod_annotations, target, held);
    if held {
        StepPlan::Held { patch, warnings }
    } else {
        StepPlan::Patch { patch, warnings }
    }
}

/// A Job whose injection is left to its pods is refused now for what would refuse every one of
/// them (the containers, the command, the URIs): checked against a stand-in for the cache.
fn checked(
    plan: StepPlan,
    settings: &StepSettings,
    spec: &PodSpec,
    helper: &Helper,
    owner: &mutation::Owner,
) -> StepPlan {
    if !matches!(plan, StepPlan::Deferred { .. }) {
        return plan;
    }
    let stand_in = mutation::Registry {
        host: "cache.invalid:5000".to_owned(),
        plain_http: true,
        marker: String::new(),
        credentials: None,
    };
    match mutation::build(settings, &stand_in, spec, helper, owner) {
        Ok(_) => plan,
        Err(denial) => StepPlan::Deny(denial),
    }
}

/// The settings of a step whose `debug` annotation is `"true"`, for the admission log: the
/// oras-operator logs the settings it parsed when it admits such a step.
pub(super) fn debug_settings(annotations: &BTreeMap<String, String>) -> Option<StepSettings> {
    // Read again only for a step that asks (nearly none): every step's admission asks this.
    let asks = annotations.iter().any(|(key, value)| {
        key.strip_prefix(step::PREFIX) == Some(step::DEBUG) && value.trim() == "true"
    });
    if !asks {
        return None;
    }
    match settings::parse(annotations) {
        Ok(Some(settings)) if settings.debug => Some(settings),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
