//! `ocifit selftest`: what the chart's `helm test` runs (`templates/tests/`), from ocifit's own
//! image. It checks that the apiserver serves the three CRDs and dry-runs (`dryRun=All`, nothing
//! stored, no Event) an object through each enabled webhook: a webhook counts as reached when it
//! denied the object by its name or left its mark on it, so a webhook the apiserver skips (its
//! selectors, `failurePolicy: Ignore` while ocifit is unreachable) fails the check, saying so.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client, Resource};
use serde_json::{Value, json};

use super::Exit;
use crate::api::{ArtifactCache, ImageSelectionPolicy, PlacementPolicy, parse_duration};

/// The label the chart's test PlacementPolicy selects its probe pod by, with [`PLACEMENT_PROBE`].
pub const PROBE_LABEL: &str = "selftest.ocifit.io/probe";
/// The value of [`PROBE_LABEL`] on placement's probe pod.
pub const PLACEMENT_PROBE: &str = "placement";
/// A cache no namespace has (names end in an alphanumeric, so this one cannot exist).
const MISSING_CACHE: &str = "ocifit-selftest-no-such-cache";
/// An image no policy uses as its placeholder (`.invalid` is reserved: never a real registry).
const NO_POLICY_IMAGE: &str = "selftest.ocifit.invalid/no-policy:selftest";

/// One of ocifit's webhooks, as `--webhook` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Webhook {
    /// `pods.ocifit.io`: image selection.
    ImageSelection,
    /// `placement.ocifit.io`: the scheduling gate.
    Placement,
    /// `pods.steps.artifacts.ocifit.io` and `jobs.steps.artifacts.ocifit.io`: workflow steps.
    Steps,
}

/// `ocifit selftest`'s arguments.
#[derive(Debug, clap::Args)]
pub struct SelftestArgs {
    /// Which cluster, and (`-n/--namespace`, required) the namespace the objects are dry-run
    /// in: one every checked webhook covers (the chart's test creates it labelled for them).
    /// The global flags, filled in by `cli::run`.
    #[arg(skip)]
    pub kube: crate::startup::KubeArgs,
    /// A webhook to dry-run an object through (repeatable); none: only the CRDs are checked.
    #[arg(long = "webhook", value_enum, value_name = "WEBHOOK")]
    pub webhooks: Vec<Webhook>,
    /// A label every probe pod carries (repeatable), for the webhooks' objectSelectors.
    #[arg(long = "pod-label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub pod_labels: Vec<(String, String)>,
    /// How long placement's probe may wait for the test's PlacementPolicy to reach the replicas
    /// (a policy gates the pods created once a replica holds it).
    #[arg(long, default_value = "60s", value_parser = wait)]
    pub placement_wait: Duration,
    #[command(flatten)]
    pub output: super::OutputArgs,
}

fn wait(text: &str) -> Result<Duration, String> {
    parse_duration(text).ok_or_else(|| format!("{text:?} is not a duration such as 30s or 2m"))
}

fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// What one dry run is sent as and which webhook must answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Probe {
    ImageSelection,
    Placement,
    StepPod,
    StepJob,
}

impl Probe {
    /// The probes of the webhooks asked for, in the order the webhooks are called.
    pub(super) fn of(webhooks: &[Webhook]) -> Vec<Probe> {
        let mut probes = Vec::new();
        if webhooks.contains(&Webhook::ImageSelection) {
            probes.push(Probe::ImageSelection);
        }
        if webhooks.contains(&Webhook::Placement) {
            probes.push(Probe::Placement);
        }
        if webhooks.contains(&Webhook::Steps) {
            probes.extend([Probe::StepPod, Probe::StepJob]);
        }
        probes
    }

    /// The webhook's name in the chart's MutatingWebhookConfiguration.
    pub(super) fn webhook(self) -> &'static str {
        match self {
            Probe::ImageSelection => "pods.ocifit.io",
            Probe::Placement => "placement.ocifit.io",
            Probe::StepPod => "pods.steps.artifacts.ocifit.io",
            Probe::StepJob => "jobs.steps.artifacts.ocifit.io",
        }
    }

    /// The object dry-run for this probe, carrying `labels`: each is one the webhook must act
    /// on (an opted-in pod naming no policy's placeholder, a pod the test's PlacementPolicy
    /// selects, a step pod and a step Job naming a cache that does not exist).
    pub(super) fn object(self, labels: &[(String, String)]) -> Value {
        let mut pod_labels: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let mut annotations = serde_json::Map::new();
        match self {
            Probe::ImageSelection => {
                pod_labels.insert(crate::api::pod::ENABLED_LABEL.into(), "true".into());
            }
            Probe::Placement => {
                pod_labels.insert(PROBE_LABEL.into(), PLACEMENT_PROBE.into());
            }
            Probe::StepPod | Probe::StepJob => {
                use crate::api::step::{INPUT_URI, ORAS_CACHE, PREFIX};
                annotations.insert(format!("{PREFIX}{ORAS_CACHE}"), MISSING_CACHE.into());
                annotations.insert(format!("{PREFIX}{INPUT_URI}"), "selftest/input:v1".into());
            }
        }
        let image = match self {
            Probe::ImageSelection => NO_POLICY_IMAGE,
            _ => "selftest.ocifit.invalid/probe:selftest",
        };
        let pod_spec = json!({
            "restartPolicy": "Never",
            "containers": [{"name": "probe", "image": image, "command": ["true"]}],
        });
        let metadata = json!({"generateName": "ocifit-selftest-", "labels": pod_labels, "annotations": annotations});
        match self {
            Probe::StepJob => json!({
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": metadata,
                "spec": {"template": {"metadata": {"labels": pod_labels}, "spec": pod_spec}},
            }),
            _ => json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}),
        }
    }

    /// Whether the webhook acted on the dry run: the apiserver's error when it refused, else the
    /// object as it would have been stored. `Ok` says how, `Err` why not.
    pub(super) fn judge(self, answer: Result<&Value, &str>) -> Result<String, String> {
        let webhook = self.webhook();
        let object = match answer {
            Err(message)
                if message.contains(&format!("admission webhook \"{webhook}\" denied")) =>
            {
                return Ok(format!("denied by {webhook}: {message}"));
            }
            Err(message) => return Err(format!("the dry run failed: {message}")),
            Ok(object) => object,
        };
        let (mark, what) = match self {
            Probe::ImageSelection => (
                gated(object, crate::api::pod::SCHEDULING_GATE),
                "held by its scheduling gate",
            ),
            Probe::Placement => (
                gated(object, crate::api::placement_pod::SCHEDULING_GATE),
                "gated",
            ),
            Probe::StepPod => (
                object["metadata"]["annotations"]
                    .get(crate::api::step::INJECTED)
                    .is_some(),
                "injected",
            ),
            Probe::StepJob => (
                object["spec"]["template"]["metadata"]["annotations"]
                    .get(crate::api::step::INJECTED)
                    .is_some(),
                "its pod template injected",
            ),
        };
        if mark {
            Ok(format!("{what} by {webhook}"))
        } else {
            Err(format!(
                "admitted unchanged: {webhook} was not called (does its namespaceSelector and \
                 objectSelector cover the probe?) or answered nothing"
            ))
        }
    }
}

fn gated(pod: &Value, gate: &str) -> bool {
    pod["spec"]["schedulingGates"]
        .as_array()
        .is_some_and(|gates| gates.iter().any(|g| g["name"] == gate))
}

/// The CRDs `ocifit run` needs: (plural, group/version) as the apiserver must serve them.
fn crds() -> [(String, String); 3] {
    [
        (
            ImageSelectionPolicy::plural(&()).into_owned(),
            ImageSelectionPolicy::api_version(&()).into_owned(),
        ),
        (
            PlacementPolicy::plural(&()).into_owned(),
            PlacementPolicy::api_version(&()).into_owned(),
        ),
        (
            ArtifactCache::plural(&()).into_owned(),
            ArtifactCache::api_version(&()).into_owned(),
        ),
    ]
}

/// Runs `ocifit selftest`: one line per check; exit 0 when every check passed, 1 otherwise.
pub(super) async fn run(args: &SelftestArgs) -> ExitCode {
    let Some(namespace) = args.kube.namespace.as_deref() else {
        eprintln!("error: selftest needs --namespace: where the probe objects are dry-run");
        return Exit::Usage.into();
    };
    let client = match super::connect(&args.kube).await {
        Ok(client) => client,
        Err(exit) => return exit,
    };
    let mut checks = Vec::new();
    for (plural, version) in crds() {
        let listed = client.list_api_group_resources(&version).await;
        if let Err(err) = &listed
            && Exit::of_kube(err) == Exit::Cluster
        {
            eprintln!("error: {}", crate::telemetry::error_chain(err));
            return Exit::Cluster.into();
        }
        let served = listed.map_err(|e| e.to_string()).and_then(|list| {
            list.resources
                .iter()
                .any(|r| r.name == plural)
                .then(|| "listed by discovery".to_owned())
                .ok_or_else(|| format!("{version} does not list {plural}"))
        });
        checks.push(Check::new(
            format!("CRD {plural} served at {version}"),
            served,
        ));
    }
    for probe in Probe::of(&args.webhooks) {
        let outcome = dry_run_until_reached(&client, args, namespace, probe).await;
        checks.push(Check::new(format!("webhook {}", probe.webhook()), outcome));
    }
    let failed = checks.iter().filter(|c| !c.passed).count();
    args.output.output.print(&checks, |checks| table(checks));
    if failed == 0 {
        Exit::Ok.into()
    } else {
        eprintln!("{failed} check(s) failed");
        Exit::Failed.into()
    }
}

/// One check's outcome, as `-o json|yaml` prints it.
#[derive(Debug, serde::Serialize)]
pub(super) struct Check {
    /// What was checked.
    pub check: String,
    pub passed: bool,
    /// How it passed, or why not.
    pub detail: String,
}

impl Check {
    fn new(check: String, outcome: Result<String, String>) -> Check {
        let (passed, detail) = match outcome {
            Ok(how) => (true, how),
            Err(why) => (false, why),
        };
        Check {
            check,
            passed,
            detail,
        }
    }
}

/// One line per check, then whether all passed.
fn table(checks: &[Check]) -> String {
    let mut out: String = checks
        .iter()
        .map(|c| {
            let mark = if c.passed { "ok  " } else { "FAIL" };
            format!("{mark}  {}: {}\n", c.check, c.detail)
        })
        .collect();
    if checks.iter().all(|c| c.passed) {
        out.push_str("every check passed\n");
    }
    out
}

/// One dry run of `probe`, judged. Placement's is repeated until its deadline while it is only
/// admitted unchanged: the test's PlacementPolicy was created a moment ago and gates pods once a
/// replica's watch holds it. The other webhooks need nothing that is not there already.
async fn dry_run_until_reached(
    client: &Client,
    args: &SelftestArgs,
    namespace: &str,
    probe: Probe,
) -> Result<String, String> {
    let deadline = Instant::now() + args.placement_wait;
    loop {
        let answer = dry_run(client, namespace, probe.object(&args.pod_labels)).await;
        let outcome = probe.judge(answer.as_ref().map_err(String::as_str));
        if outcome.is_ok() || probe != Probe::Placement || Instant::now() >= deadline {
            return outcome;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Creates `object` with `dryRun=All`: the object as it would have been stored, or the
/// apiserver's message.
async fn dry_run(client: &Client, namespace: &str, object: Value) -> Result<Value, String> {
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let stored = if object["kind"] == "Job" {
        let job: Job = serde_json::from_value(object).map_err(|e| e.to_string())?;
        let created = Api::<Job>::namespaced(client.clone(), namespace)
            .create(&params, &job)
            .await;
        created.map(|j| serde_json::to_value(j).unwrap_or_default())
    } else {
        let pod: Pod = serde_json::from_value(object).map_err(|e| e.to_string())?;
        let created = Api::<Pod>::namespaced(client.clone(), namespace)
            .create(&params, &pod)
            .await;
        created.map(|p| serde_json::to_value(p).unwrap_or_default())
    };
    stored.map_err(|e| match e {
        kube::Error::Api(status) => status.message,
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests;
