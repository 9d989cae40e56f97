//! What the leader writes on the apiserver. The webhook Secret: read it, plan, and write what the
//! plan carries out, with optimistic concurrency (a create that finds the Secret already there, or
//! an update whose resourceVersion is stale, re-reads and plans again rather than overwriting
//! another replica's work); unknown keys, labels and the Secret's type are left as found. The
//! `caBundle` of every webhook in the MutatingWebhookConfiguration: patched to the Secret's
//! `ca.crt` where it differs (a `helm upgrade` or a person may have reset it), by a strategic
//! merge with the resourceVersion read as a precondition: a concurrent change is re-read, never
//! clobbered.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};

use super::{
    CertificateAction, CertificatesError, Material, ServingReason, StoredCertificates,
    plan_certificates,
};
use crate::api::FIELD_MANAGER;

/// The Secret keys.
pub(super) const CA_CRT: &str = "ca.crt";
pub(super) const CA_KEY: &str = "ca.key";
pub(super) const TLS_CRT: &str = "tls.crt";
pub(super) const TLS_KEY: &str = "tls.key";

/// Re-reads after a conflict before giving up until the next check.
const ATTEMPTS: usize = 4;

/// What the Secret holds now.
#[derive(Debug, Clone)]
pub(super) struct Current {
    /// `ca.crt`, the bundle the webhook configuration must carry.
    pub ca_bundle: Vec<u8>,
    /// When to look again: the next renewal, or the second step of a CA change.
    pub next_check: Timestamp,
    /// The resourceVersion of the Secret as read or written last, to tell its own writes from
    /// others' when they come back through the watch.
    pub resource_version: Option<String>,
    /// What was written on the way (each with the Secret it was written to), oldest first.
    pub written: Vec<(CertificateAction, Secret)>,
}

/// Makes the Secret `name` current for `dns_names`. A write that changes the CA bundle sets
/// `next_check` after `rollover_delay`, and a new CA serves only once `trusted_bundle` (what the
/// webhook configuration carries) is the Secret's bundle, so the apiserver trusts it first.
pub(super) async fn make_current(
    api: &Api<Secret>,
    name: &str,
    dns_names: &[String],
    rollover_delay: SignedDuration,
    trusted_bundle: Option<&[u8]>,
) -> Result<Current, CertificatesError> {
    let mut written = Vec::new();
    for _ in 0..ATTEMPTS {
        let found = api
            .get_opt(name)
            .await
            .map_err(CertificatesError::kube("read the webhook Secret"))?;
        let stored = found.as_ref().map(stored).unwrap_or_default();
        let now = Timestamp::now();
        let plan = plan_certificates(&stored, dns_names, now);
        let untrusted = stored.ca_crt.as_deref() != trusted_bundle;
        if untrusted
            && *plan.action() == CertificateAction::IssueServing(ServingReason::SignedByPreviousCa)
        {
            tracing::debug!(
                secret = name,
                "the new CA is not in the webhook configuration yet; its serving certificate waits"
            );
            return Ok(Current {
                ca_bundle: stored.ca_crt.unwrap_or_default(),
                next_check: now + rollover_delay,
                resource_version: found.and_then(|s| s.metadata.resource_version),
                written,
            });
        }
        let Some(material) = plan.carry_out(now)? else {
            let CertificateAction::Keep { renew_at } = *plan.action() else {
                return Err(CertificatesError::Unsettled);
            };
            let ca_bundle = stored.ca_crt.unwrap_or_default();
            return Ok(Current {
                ca_bundle,
                next_check: renew_at,
                resource_version: found.and_then(|s| s.metadata.resource_version),
                written,
            });
        };
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        let result = match found {
            None => api.create(&params, &new_secret(name, &material)).await,
            Some(mut secret) => {
                secret.data = Some(with_material(secret.data.take(), &material));
                // metadata.resourceVersion stays as read: the update fails if anyone wrote since.
                api.replace(name, &params, &secret).await
            }
        };
        match result {
            Ok(secret) => {
                let resource_version = secret.metadata.resource_version.clone();
                written.push((plan.action().clone(), secret));
                if stored.ca_crt.as_deref() != Some(material.ca_crt.as_bytes()) {
                    return Ok(Current {
                        ca_bundle: material.ca_crt.into_bytes(),
                        next_check: now + rollover_delay,
                        resource_version,
                        written,
                    });
                }
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                tracing::debug!(
                    secret = name,
                    "the webhook Secret changed under us; reading it again"
                );
            }
            Err(err) => {
                return Err(CertificatesError::Kube {
                    what: "write the webhook Secret",
                    source: err,
                });
            }
        }
    }
    Err(CertificatesError::Unsettled)
}

/// The certificate data of a Secret.
pub(super) fn stored(secret: &Secret) -> StoredCertificates {
    let data = secret.data.as_ref();
    let get = |key: &str| data.and_then(|d| d.get(key)).map(|b| b.0.clone());
    StoredCertificates {
        ca_crt: get(CA_CRT),
        ca_key: get(CA_KEY),
        tls_crt: get(TLS_CRT),
        tls_key: get(TLS_KEY),
    }
}

fn new_secret(name: &str, material: &Material) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                "ocifit".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(with_material(None, material)),
        ..Secret::default()
    }
}

fn with_material(
    data: Option<BTreeMap<String, ByteString>>,
    material: &Material,
) -> BTreeMap<String, ByteString> {
    let mut data = data.unwrap_or_default();
    for (key, value) in [
        (CA_CRT, &material.ca_crt),
        (CA_KEY, &material.ca_key),
        (TLS_CRT, &material.tls_crt),
        (TLS_KEY, &material.tls_key),
    ] {
        data.insert(key.to_owned(), ByteString(value.clone().into_bytes()));
    }
    data
}

/// Sets `bundle` as the caBundle of every webhook of the configuration `name` that lacks it;
/// returns the names of the webhooks patched.
pub(super) async fn make_bundle_current(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn material() -> Material {
        Material {
            ca_crt: "ca cert".to_owned(),
            ca_key: "ca key".to_owned(),
            tls_crt: "tls cert".to_owned(),
            tls_key: "tls key".to_owned(),
        }
    }

    #[test]
    fn a_new_secret_is_a_tls_secret_with_the_four_keys() {
        let secret = new_secret("webhook-tls", &material());
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(
            stored(&secret),
            StoredCertificates {
                ca_crt: Some(b"ca cert".to_vec()),
                ca_key: Some(b"ca key".to_vec()),
                tls_crt: Some(b"tls cert".to_vec()),
                tls_key: Some(b"tls key".to_vec()),
            }
        );
    }

    #[test]
    fn an_update_keeps_keys_it_does_not_own() {
        let data = BTreeMap::from([
            ("tls.crt".to_owned(), ByteString(b"old".to_vec())),
            ("extra".to_owned(), ByteString(b"kept".to_vec())),
        ]);
        let data = with_material(Some(data), &material());
        assert_eq!(data["extra"].0, b"kept");
        assert_eq!(data["tls.crt"].0, b"tls cert");
        assert_eq!(data.len(), 5);
    }

    #[test]
    fn a_secret_without_data_is_read_as_empty() {
        assert_eq!(stored(&Secret::default()), StoredCertificates::default());
    }
}
