//! archaware-controller's install manifests → a PlacementPolicy that taints nodes by
//! architecture and gives each pod the tolerations of the architectures all its containers run
//! on, as archaware-controller did. Its ServiceAccount and RBAC have no counterpart to write: the
//! chart installs ocifit's own.

use serde_json::{Value, json};

use super::stranded::{Stranded, Workload, stranded};
use super::{Migration, Output, describe};
use crate::api::placement_pod::TAINT_KEY;

/// The PlacementPolicy's name.
const POLICY: &str = "archaware-controller";
/// The taint key archaware-controller puts on every node (value: its architecture).
const TAINT_KEY_SEED: &str = "supported-arch";
const NAME: &str = "archaware-controller";

/// Whether the object is archaware-controller's own Deployment.
pub(super) fn is_controller(value: &Value) -> bool {
    value.get("kind").and_then(Value::as_str) == Some("Deployment")
        && images(value).iter().any(|image| image.contains(NAME))
}

/// Whether the object is part of archaware-controller's install.
pub(super) fn is_archaware(value: &Value) -> bool {
    let named = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_some_and(|name| name.starts_with(NAME));
    let runs_it = images(value).iter().any(|image| image.contains(NAME));
    named || runs_it
}

fn images(value: &Value) -> Vec<&str> {
    value
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("image").and_then(Value::as_str))
        .collect()
}

/// `workloads`: the cluster's DaemonSets and kube-system pods, when the user passed them.
pub(super) fn translate(
    source: &str,
    value: &Value,
    workloads: Option<&[Workload]>,
    migration: &mut Migration,
) {
    let what = describe(value);
    if !is_controller(value) {
        migration.objects.push(Output {
            notes: vec![format!(
                "{source}: {what}: not carried over: archaware-controller's own access; ocifit's \
                 chart installs ocifit's"
            )],
            object: None,
        });
        return;
    }
    // The controller tolerates its own taint on every architecture it was installed for.
    let mut architectures: Vec<String> = value
        .pointer("/spec/template/spec/tolerations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| t.get("key").and_then(Value::as_str) == Some(TAINT_KEY_SEED))
        .filter_map(|t| t.get("value").and_then(Value::as_str).map(str::to_owned))
        .collect();
    architectures.sort();
    architectures.dedup();
    let mut notes = vec![
        format!(
            "{source}: {what} → PlacementPolicy {POLICY}; carried over: the architectures its \
             {TAINT_KEY_SEED} tolerations name, as node tainting. Delete archaware-controller \
             first, then take its taints off: kubectl taint nodes --all {TAINT_KEY_SEED}- (ocifit \
             taints with {TAINT_KEY} instead, and `ocifit placement untaint` takes those off)."
        ),
        "replicas, resources and the image of archaware-controller's Deployment: not carried \
         over: ocifit's chart runs its own (replicaCount, resources)"
            .to_owned(),
    ];
    let mut spec = json!({});
    if architectures.is_empty() {
        notes.push(format!(
            "spec.nodeTainting: not carried over: the Deployment tolerates no {TAINT_KEY_SEED} \
             taint, so which architectures archaware-controller tainted is unknown; list them \
             under spec.nodeTainting.architectures"
        ));
    } else {
        let spared = spare(&architectures, workloads);
        let tainted: Vec<String> = architectures
            .iter()
            .filter(|arch| Some(*arch) != spared.as_ref())
            .cloned()
            .collect();
        notes.extend(tainting_notes(&tainted, spared.as_deref(), workloads));
        if !tainted.is_empty() {
            spec["nodeTainting"] = json!({"architectures": tainted});
        }
    }
    migration
        .objects
        .push(Output::placement_policy(POLICY, spec, notes));
}

/// The architecture left untainted so pods ocifit never tolerates keep nodes: with the cluster's
/// workloads, none when none would be stranded, else the one stranding fewest (amd64 first, then
/// by name); without them, amd64 when archaware-controller served it (system images run there).
fn spare(architectures: &[String], workloads: Option<&[Workload]>) -> Option<String> {
    let mut order: Vec<&String> = architectures.iter().collect();
    order.sort_by(|a, b| (*a != "amd64", a).cmp(&(*b != "amd64", b)));
    let Some(workloads) = workloads else {
        return order
            .first()
            .filter(|arch| arch.as_str() == "amd64")
            .map(|arch| (*arch).clone());
    };
    let stranded_pods = |spared: Option<&String>| {
        let (tainted, untainted): (Vec<String>, Vec<String>) = architectures
            .iter()
            .cloned()
            .partition(|arch| Some(arch) != spared);
        stranded(workloads, &tainted, &untainted)
            .iter()
            .filter(|s| !s.daemon_set)
            .count()
    };
    let mut best = (stranded_pods(None), None);
    for arch in order {
        let count = stranded_pods(Some(arch));
        if count < best.0 {
            best = (count, Some(arch.clone()));
        }
    }
    best.1
}

fn tainting_notes(
    tainted: &[String],
    spared: Option<&str>,
    workloads: Option<&[Workload]>,
) -> Vec<String> {
    let mut notes = vec![format!(
        "spec.nodeTainting: archaware-controller tainted every node and gave every pod, \
         kube-system's and DaemonSets' too, its toleration. ocifit never tolerates kube-system \
         pods or DaemonSet pods (nor pods no PlacementPolicy selects): they keep off every node \
         ocifit taints unless they tolerate {TAINT_KEY} themselves, so with every architecture \
         tainted they would have nowhere to run. Tainted: {}{}.",
        if tainted.is_empty() {
            "none".to_owned()
        } else {
            tainted.join(", ")
        },
        match spared {
            Some(arch) => format!("; {arch} left untainted, so that they still have nodes"),
            None => String::new(),
        }
    )];
    let untainted: Vec<String> = spared.into_iter().map(str::to_owned).collect();
    match workloads {
        None => notes.push(format!(
            "which system pods would be stranded: not known from this input. A DaemonSet that \
             does not tolerate {TAINT_KEY} does not run on the tainted nodes, and a kube-system \
             pod that may only run on tainted architectures has no node once it is replaced. To \
             have them named: kubectl get pods,daemonsets -A -o yaml | ocifit migrate \
             archaware-controller.yaml -"
        )),
        Some(workloads) => {
            let found = stranded(workloads, tainted, &untainted);
            if found.is_empty() {
                notes.push(format!(
                    "stranded system pods: none of the {} DaemonSets and kube-system pods given",
                    workloads.len()
                ));
            }
            notes.extend(found.iter().map(stranded_note));
        }
    }
    notes
}

fn stranded_note(stranded: &Stranded) -> String {
    let lost = stranded.lost.join(", ");
    let fix = format!(
        "give it the toleration {{key: {TAINT_KEY}, operator: Exists, effect: NoSchedule}}, or \
         take an architecture it runs on off spec.nodeTainting.architectures"
    );
    if stranded.daemon_set {
        format!(
            "stranded: {}: does not tolerate {TAINT_KEY}, so it would not run on the nodes of {lost}; {fix}",
            stranded.what
        )
    } else {
        format!(
            "stranded: {}: every architecture it may run on ({lost}) would be tainted and it does \
             not tolerate {TAINT_KEY}, so once replaced it has no node to run on; {fix}",
            stranded.what
        )
    }
}
