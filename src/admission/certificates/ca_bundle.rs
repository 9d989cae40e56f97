//! The `caBundle` of every webhook in the MutatingWebhookConfiguration: patched to the Secret's
//! `ca.crt` where it differs (a `helm upgrade` or a person may have reset it), by a strategic
//! merge on the webhooks' names with the resourceVersion read as a precondition, so a concurrent
//! change of the webhook list is re-read rather than clobbered. Only the leader calls it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::CertificatesError;
use crate::api::FIELD_MANAGER;

/// Sets `bundle` as the caBundle of every webhook of the configuration `name` that lacks it;
/// returns the names of the webhooks patched.
pub(super) async fn make_current(
    api: &Api<MutatingWebhookConfiguration>,
    name: &str,
    bundle: &[u8],
) -> Result<Vec<String>, CertificatesError> {
    let configuration = api
        .get_opt(name)
        .await
        .map_err(CertificatesError::kube("read the webhook configuration"))?
        .ok_or_else(|| CertificatesError::ConfigurationMissing {
            name: name.to_owned(),
        })?;
    let stale: Vec<String> = configuration
        .webhooks
        .iter()
        .flatten()
        .filter(|webhook| {
            webhook
                .client_config
                .ca_bundle
                .as_ref()
                .map(|b| b.0.as_slice())
                != Some(bundle)
        })
        .map(|webhook| webhook.name.clone())
        .collect();
    if stale.is_empty() {
        return Ok(stale);
    }
    let encoded = STANDARD.encode(bundle);
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": configuration.metadata.resource_version},
        "webhooks": stale
            .iter()
            .map(|webhook| serde_json::json!({"name": webhook, "clientConfig": {"caBundle": encoded}}))
            .collect::<Vec<_>>(),
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Strategic(patch))
        .await
        .map_err(CertificatesError::kube(
            "patch the webhook configuration's caBundle",
        ))?;
    Ok(stale)
}
