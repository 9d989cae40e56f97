//! archaware-controller's install manifests → a PlacementPolicy that taints nodes by
//! architecture and gives each pod the tolerations of the architectures all its containers run
//! on, as archaware-controller did. Its ServiceAccount and RBAC have no counterpart to write: the
//! chart installs ocifit's own.

use serde_json::{Value, json};

use super::{Migration, Output, describe};

/// The PlacementPolicy's name.
const POLICY: &str = "archaware-controller";
/// The taint key archaware-controller puts on every node (value: its architecture).
const TAINT_KEY: &str = "supported-arch";
const NAME: &str = "archaware-controller";

/// Whether the object is part of archaware-controller's install.
pub fn is_archaware(value: &Value) -> bool {
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

pub fn translate(source: &str, value: &Value, migration: &mut Migration) {
    let what = describe(value);
    let is_controller = value.get("kind").and_then(Value::as_str) == Some("Deployment")
        && images(value).iter().any(|image| image.contains(NAME));
    if !is_controller {
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
        .filter(|t| t.get("key").and_then(Value::as_str) == Some(TAINT_KEY))
        .filter_map(|t| t.get("value").and_then(Value::as_str).map(str::to_owned))
        .collect();
    architectures.sort();
    architectures.dedup();
    let mut notes = vec![
        format!(
            "{source}: {what} → PlacementPolicy {POLICY}. Delete archaware-controller first, then \
             take its taints off: kubectl taint nodes --all {TAINT_KEY}- (ocifit taints with \
             placement.ocifit.io/arch instead, and `ocifit placement untaint` takes those off)."
        ),
        "replicas, resources and the image of archaware-controller's Deployment: not carried \
         over: ocifit's chart runs its own (replicaCount, resources)"
            .to_owned(),
    ];
    let mut spec = json!({});
    if architectures.is_empty() {
        notes.push(format!(
            "spec.nodeTainting: not carried over: the Deployment tolerates no {TAINT_KEY} taint, \
             so which architectures archaware-controller tainted is unknown; list them under \
             spec.nodeTainting.architectures"
        ));
    } else {
        notes.push(format!(
            "spec.nodeTainting: archaware-controller tainted every node; ocifit taints the \
             architectures listed ({}), read from the Deployment's {TAINT_KEY} tolerations. \
             Leaving off the one every image is built for keeps pods that never reach ocifit \
             schedulable there.",
            architectures.join(", ")
        ));
        spec["nodeTainting"] = json!({"architectures": architectures});
    }
    migration.objects.push(Output {
        notes,
        object: Some(json!({
            "apiVersion": "ocifit.io/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": POLICY},
            "spec": spec,
        })),
    });
}
