//! ocifit-k8s's own install manifest (its `deploy/webhook.yaml`, or the one with the model
//! server): nothing of it is applied again, since ocifit's chart installs what replaces each
//! object; each gets a note saying what that is. Its users' pods keep their labels and
//! annotations (docs/migrating.md).

use serde_json::Value;

use super::{Migration, Output, describe};
use crate::api::pod::{ENABLED_LABEL, MODEL_ANNOTATION};

/// The name ocifit-k8s's objects carry, and its image.
const NAME: &str = "ocifit-k8s";
/// The webhook its MutatingWebhookConfiguration registers.
const WEBHOOK: &str = "oci.image.compatibilities.selection";
/// Its install's objects without `ocifit-k8s` in their name.
const UNNAMED: [(&str, &str); 2] = [
    ("Issuer", "selfsigned-issuer"),
    ("ClusterRole", "node-reader"),
];

/// Whether the object is part of ocifit-k8s's install. `beside` says whether its file holds
/// another object that is: only then are its generically named objects taken for its own.
pub(super) fn is_ocifit_k8s(value: &Value, beside: bool) -> bool {
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
    let (kind, name) = (text("/kind"), text("/metadata/name"));
    let named = name.is_some_and(|name| name.starts_with(NAME));
    let webhook = value
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|w| w.get("name").and_then(Value::as_str) == Some(WEBHOOK));
    let unnamed = beside
        && UNNAMED
            .iter()
            .any(|(k, n)| kind == Some(*k) && name == Some(*n));
    named || webhook || unnamed || runs_it(value)
}

fn containers(value: &Value) -> impl Iterator<Item = &Value> {
    value
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn runs_it(value: &Value) -> bool {
    containers(value).any(|c| {
        c.get("image")
            .and_then(Value::as_str)
            .is_some_and(|image| image.contains(&format!("/{NAME}")))
    })
}

pub(super) fn translate(source: &str, value: &Value, migration: &mut Migration) {
    let what = describe(value);
    let replaced_by = match value.get("kind").and_then(Value::as_str) {
        Some("MutatingWebhookConfiguration") => format!(
            "ocifit's chart registers its own image-selection webhook, pods.ocifit.io in the \
             MutatingWebhookConfiguration `ocifit` (helm install ocifit charts/ocifit), selecting \
             the same pods (label {ENABLED_LABEL}: \"true\") in every namespace but kube-system \
             and ocifit's own. Delete this one first (kubectl delete -f it): both would rewrite \
             the same pods. Its MiniCluster rule has no counterpart: ocifit selects the images \
             of pods, and a MiniCluster's pods are pods"
        ),
        Some("Deployment") => {
            let model = containers(value).any(|c| {
                c.get("env")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .any(|e| e.get("name").and_then(Value::as_str) == Some("MODEL_SERVER_URL"))
            }) || containers(value).count() > 1;
            let mut text = "ocifit's chart runs ocifit's own controller and webhook (Deployment \
                            ocifit-controller; replicaCount, resources)"
                .to_owned();
            if model {
                text.push_str(&format!(
                    ". Its model server has no counterpart: ocifit refuses pods with the \
                     {MODEL_ANNOTATION} annotation (ModelUnsupported); select their images with an \
                     ImageSelectionPolicy and a compatibility artifact instead"
                ));
            }
            text
        }
        Some("Certificate" | "Issuer") => "ocifit keeps its webhook's certificate itself (chart \
                                           tls.mode managed, the default; tls.mode certManager \
                                           makes its own Issuer and Certificate)"
            .to_owned(),
        Some("Service") => {
            "ocifit's chart creates its own webhook Service (ocifit-webhook)".to_owned()
        }
        _ => "ocifit's chart installs ocifit's own ServiceAccount and least-privilege RBAC"
            .to_owned(),
    };
    migration.objects.push(Output {
        notes: vec![format!(
            "{source}: {what}: part of ocifit-k8s's install, not carried over: {replaced_by}."
        )],
        object: None,
    });
}
