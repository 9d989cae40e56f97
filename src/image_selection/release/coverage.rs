//! Which namespaces the release acts in: those whose pods the webhook sees. Anyone who creates
//! pods can set ocifit's gate and held label, also where the webhook skips; such a pod is left
//! alone. The source of truth is the webhook configuration (`--webhook-configuration`, its
//! `pods.ocifit.io` webhook's namespaceSelector, as the apiserver applies it), read again at most
//! every [`READ_EVERY`], as is each namespace's answer; the two namespaces the chart always
//! excludes are excluded whatever it says. A missing configuration (a webhook registered by hand
//! under another name) leaves only those two excluded, with a warning in the log.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ListParams;
use kube::core::{Selector, SelectorExt};
use kube::{Api, Client};

use crate::telemetry::error_chain;

/// The webhook of the configuration whose namespaceSelector counts (the chart's name).
pub(super) const WEBHOOK: &str = "pods.ocifit.io";
/// How long a read of the configuration, or a namespace's answer, is used.
const READ_EVERY: Duration = Duration::from_secs(30);
/// Most namespaces' answers kept (beyond, all are forgotten and read again).
const NAMESPACES_KEPT: usize = 4096;

/// What the webhook covers, as read from its configuration.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Covers {
    /// The configuration's namespaceSelector (none: every namespace).
    Selector(Option<LabelSelector>),
    /// No such configuration (or webhook): only the fixed exclusions.
    Unknown,
}

/// Whether the webhook covers `namespace`, labelled `labels`; `own` is ocifit's namespace.
pub(super) fn covered(
    covers: &Covers,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    own: &str,
) -> bool {
    if namespace == "kube-system" || namespace == own {
        return false;
    }
    match covers {
        Covers::Unknown | Covers::Selector(None) => true,
        Covers::Selector(Some(selector)) => Selector::try_from(selector.clone())
            // A selector the apiserver took but we cannot read: act nowhere rather than guess.
            .is_ok_and(|selector| selector.matches(labels)),
    }
}

/// Reads the configuration and namespaces for [`covered`].
pub(super) struct Coverage {
    client: Client,
    configuration: String,
    own_namespace: String,
    read: Mutex<Option<(Instant, Covers)>>,
    answers: Mutex<HashMap<String, (Instant, bool)>>,
}

impl Coverage {
    /// Coverage as the configuration `configuration` says; `own_namespace` is ocifit's.
    pub(super) fn new(client: Client, configuration: String, own_namespace: String) -> Coverage {
        Coverage {
            client,
            configuration,
            own_namespace,
            read: Mutex::new(None),
            answers: Mutex::default(),
        }
    }

    /// Whether the webhook covers `namespace`; `false` when that cannot be read now.
    pub(super) async fn covers(&self, namespace: &str) -> bool {
        if let Some((at, answer)) = lock(&self.answers).get(namespace)
            && at.elapsed() < READ_EVERY
        {
            return *answer;
        }
        let Some(covers) = self.configuration().await else {
            return false;
        };
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let by_name = ListParams::default().fields(&format!("metadata.name={namespace}"));
        match namespaces.list_metadata(&by_name).await {
            Ok(listed) => {
                let answer = listed.items.first().is_some_and(|found| {
                    let labels = found.metadata.labels.clone().unwrap_or_default();
                    covered(&covers, namespace, &labels, &self.own_namespace)
                });
                let mut answers = lock(&self.answers);
                if answers.len() >= NAMESPACES_KEPT {
                    answers.clear();
                }
                answers.insert(namespace.to_owned(), (Instant::now(), answer));
                answer
            }
            Err(err) => {
                tracing::warn!(%namespace, error = %error_chain(&err), "namespace not read: its held pods wait");
                false
            }
        }
    }

    async fn configuration(&self) -> Option<Covers> {
        if let Some((at, covers)) = lock(&self.read).as_ref()
            && at.elapsed() < READ_EVERY
        {
            return Some(covers.clone());
        }
        let api: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        let covers = match api.get_opt(&self.configuration).await {
            Ok(found) => match found
                .and_then(|c| c.webhooks)
                .and_then(|hooks| hooks.into_iter().find(|h| h.name == WEBHOOK))
            {
                Some(webhook) => Covers::Selector(webhook.namespace_selector),
                None => {
                    tracing::warn!(configuration = %self.configuration, "no webhook {WEBHOOK} in this MutatingWebhookConfiguration: held pods are released in every namespace but kube-system and ocifit's own");
                    Covers::Unknown
                }
            },
            Err(err) => {
                tracing::warn!(configuration = %self.configuration, error = %error_chain(&err), "webhook configuration not read: held pods wait");
                return None;
            }
        };
        *lock(&self.read) = Some((Instant::now(), covers.clone()));
        Some(covers)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(name: &str, more: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut labels =
            BTreeMap::from([("kubernetes.io/metadata.name".to_owned(), name.to_owned())]);
        labels.extend(more.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        labels
    }

    #[test]
    fn a_namespace_the_webhook_skips_is_not_covered() {
        // As the chart writes it: kube-system and the release namespace out, plus a label.
        let chart = Covers::Selector(Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("team".to_owned(), "yes".to_owned())])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "kubernetes.io/metadata.name".into(),
                operator: "NotIn".into(),
                values: Some(vec!["kube-system".into(), "ocifit-system".into()]),
            }]),
        }));
        let own = "ocifit-system";
        assert!(covered(&chart, "a", &labels("a", &[("team", "yes")]), own));
        assert!(!covered(&chart, "b", &labels("b", &[]), own));
        assert!(!covered(&chart, own, &labels(own, &[("team", "yes")]), own));
        // Whatever the configuration says, or without one.
        let everything = Covers::Selector(None);
        assert!(covered(&everything, "b", &labels("b", &[]), own));
        assert!(!covered(
            &everything,
            "kube-system",
            &labels("kube-system", &[]),
            own
        ));
        assert!(!covered(&Covers::Unknown, own, &labels(own, &[]), own));
        assert!(covered(&Covers::Unknown, "b", &labels("b", &[]), own));
    }
}
