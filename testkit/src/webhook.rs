//! Registers a mutating admission webhook for pod creation that points at an HTTPS server on the
//! host (`https://127.0.0.1:PORT/path`), selected by pod labels and limited to given namespaces so
//! tests sharing a cluster do not see each other's pods; and waits until the apiserver calls it.
//! Serving the webhook is the test's (or the product's) job.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::error::{Error, Result, kube as kube_error};

/// How often [`wait_until_admitted`] retries.
const RETRY_INTERVAL: Duration = Duration::from_millis(200);

/// The name of the configuration's webhook unless [`PodWebhook::named`] says otherwise: the name
/// both of ocifit's own configurations give theirs.
const DEFAULT_WEBHOOK_NAME: &str = "pods.ocifit.io";

/// A mutating webhook for `CREATE pods`, with `failurePolicy: Fail` and `sideEffects: None`.
#[derive(Clone, Debug)]
pub struct PodWebhook {
    name: String,
    webhook_name: String,
    url: String,
    ca_pem: String,
    match_labels: BTreeMap<String, String>,
    namespaces: Vec<String>,
}

impl PodWebhook {
    /// A webhook configuration `name` calling `url` and trusting `ca_pem`.
    pub fn new(name: &str, url: &str, ca_pem: &str) -> Self {
        Self {
            name: name.to_owned(),
            webhook_name: DEFAULT_WEBHOOK_NAME.to_owned(),
            url: url.to_owned(),
            ca_pem: ca_pem.to_owned(),
            match_labels: BTreeMap::new(),
            namespaces: Vec::new(),
        }
    }

    /// Names the configuration's single webhook `webhook` (`pods.ocifit.io` otherwise): the
    /// apiserver's admission metrics are by webhook name, so two configurations measured side by
    /// side need names of their own.
    pub fn named(mut self, webhook: &str) -> Self {
        self.webhook_name = webhook.to_owned();
        self
    }

    /// Only pods with this label are sent (the objectSelector).
    pub fn match_label(mut self, key: &str, value: &str) -> Self {
        self.match_labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Only pods in this namespace are sent (may be repeated; none means every namespace).
    pub fn in_namespace(mut self, namespace: &str) -> Self {
        self.namespaces.push(namespace.to_owned());
        self
    }

    /// The MutatingWebhookConfiguration object.
    pub fn to_configuration(&self) -> MutatingWebhookConfiguration {
        let namespace_selector = (!self.namespaces.is_empty()).then(|| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "kubernetes.io/metadata.name".into(),
                operator: "In".into(),
                values: Some(self.namespaces.clone()),
            }]),
            match_labels: None,
        });
        MutatingWebhookConfiguration {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            webhooks: Some(vec![MutatingWebhook {
                name: self.webhook_name.clone(),
                client_config: WebhookClientConfig {
                    url: Some(self.url.clone()),
                    ca_bundle: Some(ByteString(self.ca_pem.as_bytes().to_vec())),
                    service: None,
                },
                rules: Some(vec![RuleWithOperations {
                    operations: Some(vec!["CREATE".into()]),
                    api_groups: Some(vec![String::new()]),
                    api_versions: Some(vec!["v1".into()]),
                    resources: Some(vec!["pods".into()]),
                    scope: None,
                }]),
                object_selector: Some(LabelSelector {
                    match_labels: Some(self.match_labels.clone()),
                    match_expressions: None,
                }),
                namespace_selector,
                admission_review_versions: vec!["v1".into()],
                side_effects: "None".into(),
                failure_policy: Some("Fail".into()),
                timeout_seconds: Some(5),
                ..MutatingWebhook::default()
            }]),
        }
    }
}

/// Creates the webhook configuration. The apiserver picks it up through an informer a moment
/// later: use [`wait_until_admitted`] before relying on it.
pub async fn register_pod_webhook(
    client: &Client,
    webhook: &PodWebhook,
) -> Result<MutatingWebhookConfiguration> {
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &webhook.to_configuration())
        .await
        .map_err(kube_error(format!(
            "create MutatingWebhookConfiguration {}",
            webhook.name
        )))
}

/// Creates `probe` with `dryRun=All` (nothing is stored) until the pod the apiserver would store
/// satisfies `admitted`, e.g. shows the webhook's patch; the last such pod. A new webhook
/// configuration becomes active within a few seconds; a webhook that keeps failing makes this
/// time out with the apiserver's last answer.
pub async fn wait_until_admitted(
    client: &Client,
    namespace: &str,
    probe: &Pod,
    timeout: Duration,
    admitted: impl Fn(&Pod) -> bool,
) -> Result<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + timeout;
    loop {
        let last = match api.create(&dry_run, probe).await {
            Ok(pod) if admitted(&pod) => return Ok(pod),
            Ok(_) => "the pod was admitted unchanged".to_owned(),
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("the webhook to admit the probe pod (last answer: {last})"),
                timeout,
                log_tails: String::new(),
            });
        }
        tokio::time::sleep(RETRY_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_selects_labelled_pods_in_the_given_namespaces() {
        let config = PodWebhook::new("w", "https://127.0.0.1:1/mutate", "PEM")
            .match_label("oci.image.compatibilities.selection/enabled", "true")
            .in_namespace("t1")
            .to_configuration();
        let webhook = &config.webhooks.unwrap()[0];
        assert_eq!(
            webhook.client_config.url.as_deref(),
            Some("https://127.0.0.1:1/mutate")
        );
        assert_eq!(
            webhook
                .object_selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap()["oci.image.compatibilities.selection/enabled"],
            "true"
        );
        let namespaces = webhook.namespace_selector.as_ref().unwrap();
        assert_eq!(
            namespaces.match_expressions.as_ref().unwrap()[0].values,
            Some(vec!["t1".to_owned()])
        );
        assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"));
    }

    #[test]
    fn the_webhook_is_named_pods_ocifit_io_unless_named_otherwise() {
        let webhook = PodWebhook::new("w", "https://127.0.0.1:1/", "PEM");
        let name =
            |webhook: &PodWebhook| webhook.to_configuration().webhooks.unwrap()[0].name.clone();
        assert_eq!(name(&webhook), "pods.ocifit.io");
        let named = webhook.named("noop.scale.ocifit.io");
        assert_eq!(name(&named), "noop.scale.ocifit.io");
        assert_eq!(
            named.to_configuration().metadata.name.as_deref(),
            Some("w"),
            "the configuration keeps its own name"
        );
    }

    #[test]
    fn without_namespaces_every_namespace_is_selected() {
        let config = PodWebhook::new("w", "https://127.0.0.1:1/", "PEM").to_configuration();
        assert!(config.webhooks.unwrap()[0].namespace_selector.is_none());
    }
}
