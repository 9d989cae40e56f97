//! `ocifit explain pod NAME`: what ocifit did to a pod and why, from the live cluster. It reads
//! what the operator recorded (the pod's annotations, labels and gates, its Events, the status of
//! its policies and cache, its node) and prints one report ([`report`]); nothing is written.

use std::fmt::Write as _;
use std::process::ExitCode;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::ListParams;
use kube::{Api, Client};

use super::Exit;
use super::OutputArgs;
use crate::api::{ArtifactCache, ImageSelectionPolicy, PlacementPolicy};
use crate::startup::KubeArgs;

mod report;

pub(super) use report::Explained;

pub(super) use report::Gathered;

pub(super) use report::explain;

/// `ocifit explain`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    #[command(subcommand)]
    pub what: ExplainWhat,
}

#[derive(Debug, clap::Subcommand)]
pub enum ExplainWhat {
    /// A pod, in `-n NAMESPACE` (default the context's).
    Pod(ExplainPodArgs),
}

#[derive(Debug, clap::Args)]
pub struct ExplainPodArgs {
    /// The pod's name.
    pub name: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `ocifit explain pod`: 0 with the report, [`Exit::Usage`] when the pod does not exist,
/// [`Exit::Cluster`] when the cluster cannot be used.
pub(super) async fn run(args: &ExplainArgs, kube: &KubeArgs) -> ExitCode {
    let ExplainWhat::Pod(pod_args) = &args.what;
    let client = match super::connect(kube).await {
        Ok(client) => client,
        Err(exit) => return exit,
    };
    let namespace = kube
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let pod = match Api::<Pod>::namespaced(client.clone(), &namespace)
        .get(&pod_args.name)
        .await
    {
        Ok(pod) => pod,
        Err(err) => {
            let exit = Exit::of_kube(&err);
            let why = match exit {
                Exit::Usage => format!("pod {namespace}/{} not found", pod_args.name),
                _ => format!(
                    "failed to read pod {namespace}/{}: {}",
                    pod_args.name,
                    crate::telemetry::error_chain(&err)
                ),
            };
            eprintln!("error: {why}");
            return exit.into();
        }
    };
    let gathered = gather(&client, &namespace, pod).await;
    pod_args.output.output.print(&explain(&gathered), table);
    Exit::Ok.into()
}

/// Reads what the report draws on beside the pod; what cannot be read is noted, not fatal.
async fn gather(client: &Client, namespace: &str, pod: Pod) -> Gathered {
    let mut gathered = Gathered::default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let events = Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await;
    match events {
        Ok(list) => {
            let mut ours: Vec<Event> = list
                .items
                .into_iter()
                .filter(|e| {
                    let by = e.reporting_component.as_deref().unwrap_or_default();
                    by.starts_with("ocifit")
                })
                .collect();
            ours.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
            gathered.events = ours;
        }
        Err(err) => gathered.unread.push(unread("the pod's Events", &err)),
    }
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let selection = annotations
        .get(crate::api::pod::DECISION_POLICY)
        .or_else(|| labels.get(crate::api::pod::POLICY))
        .or_else(|| annotations.get(crate::api::pod::POLICY));
    if let Some(name) = selection {
        let api = Api::<ImageSelectionPolicy>::all(client.clone());
        gathered.selection_policy = read(api, name, &mut gathered.unread).await;
    }
    if let Some(name) = labels.get(crate::api::placement_pod::POLICY_LABEL) {
        let api = Api::<PlacementPolicy>::all(client.clone());
        gathered.placement_policy = read(api, name, &mut gathered.unread).await;
    }
    if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
        let api = Api::<Node>::all(client.clone());
        gathered.node = read(api, node, &mut gathered.unread).await;
    }
    let marker = annotations.get(crate::api::step::INJECTED);
    if let Some(cache) = marker.and_then(|m| crate::artifact_cache::cache_of(m)) {
        let api = Api::<ArtifactCache>::namespaced(client.clone(), namespace);
        gathered.cache = read(api, cache, &mut gathered.unread).await;
    }
    gathered.pod = pod;
    gathered
}

/// One object by name; a failure noted in `unread`.
async fn read<K>(api: Api<K>, name: &str, unread_list: &mut Vec<String>) -> Option<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get(name).await {
        Ok(object) => Some(object),
        Err(err) => {
            let what = format!("{} {name}", K::kind(&()));
            unread_list.push(unread(&what, &err));
            None
        }
    }
}

fn unread(what: &str, err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if status.code == 404 => format!("{what}: not found"),
        other => format!("{what}: {}", crate::telemetry::error_chain(other)),
    }
}

/// The report for people: one paragraph per feature that touched the pod.
pub(super) fn table(report: &Explained) -> String {
    let mut out = format!("Pod {}", report.pod);
    match &report.node {
        Some(node) => {
            let platform = node.platform.as_deref().unwrap_or("platform unknown");
            let _ = writeln!(out, " on node {} ({platform})", node.name);
        }
        None => out.push_str(" (not scheduled)\n"),
    }
    let gates = if report.scheduling_gates.is_empty() {
        "none".to_owned()
    } else {
        report.scheduling_gates.join(", ")
    };
    let _ = writeln!(out, "Scheduling gates: {gates}");
    if let Some(s) = &report.image_selection {
        let policy = s.policy.as_deref().unwrap_or("(none found)");
        let _ = writeln!(out, "\nImage selection: {} by policy {policy}", s.state);
        line(&mut out, "held", s.held.as_deref());
        line(&mut out, "policy Ready", s.policy_ready.as_deref());
        line(&mut out, "artifact", s.artifact_digest.as_deref());
        if !s.classes.is_empty() {
            let _ = writeln!(out, "  classes allowed: {}", s.classes.join(", "));
        }
        if let Some(class) = &s.node_class {
            let image = class.image.as_deref().unwrap_or("no image");
            let reason = class.reason.as_deref().unwrap_or_default();
            let _ = writeln!(out, "  node's class {}: {image} ({reason})", class.name);
        }
        for (container, image) in &s.images {
            let _ = writeln!(out, "  container {container}: {image}");
        }
    }
    if let Some(p) = &report.placement {
        let outcome = p.outcome.as_deref().unwrap_or("not decided yet");
        let _ = writeln!(
            out,
            "\nPlacement: gate {} by policy {}, {outcome}",
            p.gate, p.policy
        );
        if !p.policy_found {
            out.push_str("  policy: not found\n");
        }
        if !p.platforms.is_empty() {
            let _ = writeln!(out, "  platforms: {}", p.platforms.join(", "));
        }
        line(&mut out, "node's platform", p.node_platform.as_deref());
        line(&mut out, "why", p.message.as_deref());
        for (container, digest) in &p.digests {
            let _ = writeln!(out, "  container {container}: {digest}");
        }
        for error in &p.exec_format_errors {
            let _ = writeln!(out, "  exec format error: {error}");
        }
    }
    if let Some(a) = &report.artifact_cache {
        let cache = a.cache.as_deref().unwrap_or("(its own registry)");
        let _ = writeln!(out, "\nArtifact cache: step of {cache}, gate {}", a.gate);
        line(&mut out, "endpoint", a.endpoint.as_deref());
        line(&mut out, "cache Ready", a.cache_ready.as_deref());
        line(&mut out, "held", a.held.as_deref());
        for input in &a.inputs {
            let _ = writeln!(out, "  input: {input}");
        }
        line(&mut out, "output", a.output.as_deref());
        if !a.helpers.is_empty() {
            let _ = writeln!(out, "  helpers: {}", a.helpers.join(", "));
        }
    }
    if report.image_selection.is_none()
        && report.placement.is_none()
        && report.artifact_cache.is_none()
    {
        out.push_str("\nocifit did nothing to this pod (no feature selected it).\n");
    }
    if !report.events.is_empty() {
        out.push_str("\nEvents (ocifit):\n");
        for e in &report.events {
            let _ = writeln!(
                out,
                "  {} {} (x{}): {}",
                e.kind, e.reason, e.count, e.message
            );
        }
    }
    for what in &report.unread {
        let _ = writeln!(out, "note: could not read {what}");
    }
    out
}

fn line(out: &mut String, what: &str, value: Option<&str>) {
    if let Some(value) = value {
        let _ = writeln!(out, "  {what}: {value}");
    }
}
