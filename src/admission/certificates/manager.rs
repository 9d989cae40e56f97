//! The loop every replica runs: it watches the webhook Secret and hands its serving certificate to
//! the [`CertificateSink`]; as leader it also makes the Secret current (at start, when the Secret
//! changes or disappears, at the next renewal and at least every `rotation_check`) and the
//! webhook configuration's caBundle current (after the Secret, when the configuration changes and
//! at least every `bundle_check`). A failure is logged and retried after `retry`; nothing in here
//! ends the process.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, stream::BoxStream};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{CertificateSettings, CertificateSink, CertificatesError, secret, service_dns_names};
use crate::api::REPORTING_CONTROLLER;
use crate::telemetry::error_chain;

/// Runs until `shutdown` resolves. `leading` says whether this replica leads, as it changes.
pub async fn manage_certificates(
    client: Client,
    settings: CertificateSettings,
    mut leading: watch::Receiver<bool>,
    sink: Arc<dyn CertificateSink>,
    shutdown: impl Future<Output = ()>,
) {
    let mut secret_events = by_name(
        Api::<Secret>::namespaced(client.clone(), &settings.namespace),
        &settings.secret,
    );
    let mut configuration_events = by_name(
        Api::<MutatingWebhookConfiguration>::all(client.clone()),
        &settings.configuration,
    );
    let mut shutdown = std::pin::pin!(shutdown);
    let mut keeper = Keeper::new(client, settings, sink);
    loop {
        let leader = *leading.borrow_and_update();
        let due = keeper.secret_due.min(keeper.bundle_due);
        tokio::select! {
            () = &mut shutdown => return,
            event = secret_events.next() => match event {
                Some(event) => keeper.on_secret(event),
                None => return,
            },
            event = configuration_events.next() => match event {
                Some(event) => keeper.on_configuration(event),
                None => return,
            },
            Ok(()) = leading.changed() => {
                // Just became the leader: look at once.
                if *leading.borrow() {
                    keeper.secret_due = keeper.hold.max(Instant::now());
                    keeper.bundle_due = Instant::now();
                }
            }
            () = tokio::time::sleep_until(due), if leader => {
                if keeper.secret_due <= Instant::now() {
                    keeper.check_secret().await;
                }
                if keeper.bundle_due <= Instant::now() {
                    keeper.check_bundle().await;
                }
            }
        }
    }
}

/// A serving certificate and its key (PEM).
type Pair = (Vec<u8>, Vec<u8>);

/// What the loop knows and when it looks next.
struct Keeper {
    settings: CertificateSettings,
    secrets: Api<Secret>,
    configurations: Api<MutatingWebhookConfiguration>,
    recorder: Recorder,
    sink: Arc<dyn CertificateSink>,
    dns_names: Vec<String>,
    rollover_delay: SignedDuration,
    /// The serving certificate and key handed to the sink last.
    loaded: Option<Pair>,
    /// A newer serving pair and its Secret's `ca.crt`, held back until the configuration's
    /// caBundles carry that CA (a recreated Secret has a new CA the apiserver does not trust yet).
    waiting: Option<(Pair, Vec<u8>)>,
    /// The caBundle of each webhook of the configuration as last seen; `None` while there is no
    /// configuration (nothing to break).
    seen_bundles: Option<Vec<Option<Vec<u8>>>>,
    /// The Secret's `ca.crt` as the leader last saw it.
    bundle: Option<Vec<u8>>,
    /// The bundle the webhook configuration was last found or made to carry (or any, when there
    /// is no configuration to break).
    trusted: Option<Vec<u8>>,
    /// The Secret's resourceVersion as the leader last read or wrote it.
    known_version: Option<String>,
    secret_due: Instant,
    bundle_due: Instant,
    /// After a write that changed the CA bundle, the Secret is not looked at again before this
    /// (the bundle's way to the apiserver).
    hold: Instant,
    /// The missing configuration was reported (said once, not at every check).
    missing_reported: bool,
}

impl Keeper {
    fn new(
        client: Client,
        settings: CertificateSettings,
        sink: Arc<dyn CertificateSink>,
    ) -> Keeper {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: REPORTING_CONTROLLER.to_owned(),
                instance: (!settings.identity.is_empty()).then(|| settings.identity.clone()),
            },
        );
        Keeper {
            secrets: Api::namespaced(client.clone(), &settings.namespace),
            configurations: Api::all(client),
            recorder,
            sink,
            dns_names: service_dns_names(&settings.service, &settings.namespace),
            rollover_delay: SignedDuration::try_from(settings.rollover_delay)
                .unwrap_or(SignedDuration::MAX),
            settings,
            loaded: None,
            waiting: None,
            seen_bundles: None,
            bundle: None,
            trusted: None,
            known_version: None,
            secret_due: Instant::now(),
            bundle_due: Instant::now(),
            hold: Instant::now(),
            missing_reported: false,
        }
    }

    /// Every replica serves what the Secret holds; a change by anyone else is looked at.
    fn on_secret(&mut self, event: Result<watcher::Event<Secret>, watcher::Error>) {
        match event {
            Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                self.load(&object);
                // Its own writes coming back need no look; nothing hurries the second step of a
                // CA change (a late event of the Secret as it was before would).
                if object.metadata.resource_version != self.known_version {
                    self.secret_due = self.hold.max(Instant::now());
                }
            }
            Ok(watcher::Event::Delete(_)) => {
                tracing::warn!(
                    secret = %self.settings.secret,
                    "the webhook Secret was deleted; the leader creates a new one, and this \
                     replica serves its current certificate until then"
                );
                self.secret_due = self.hold.max(Instant::now());
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
            Err(err) => {
                tracing::warn!(secret = %self.settings.secret, error = %err, "failed to watch the webhook Secret");
            }
        }
    }

    /// A changed configuration may have lost its caBundle (`helm upgrade`).
    fn on_configuration(
        &mut self,
        event: Result<watcher::Event<MutatingWebhookConfiguration>, watcher::Error>,
    ) {
        match event {
            Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
            Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                self.seen_bundles = Some(
                    object
                        .webhooks
                        .iter()
                        .flatten()
                        .map(|w| w.client_config.ca_bundle.as_ref().map(|b| b.0.clone()))
                        .collect(),
                );
                self.load_waiting();
                self.bundle_due = Instant::now();
            }
            Ok(watcher::Event::Delete(_)) => {
                self.seen_bundles = None;
                self.load_waiting();
                self.bundle_due = Instant::now();
            }
            Err(err) => tracing::warn!(
                configuration = %self.settings.configuration,
                error = %err,
                "failed to watch the webhook configuration; its caBundle is still checked every {:?}",
                self.settings.bundle_check
            ),
        }
    }

    /// Hands the Secret's serving certificate to the sink, unless it is what the sink has, or
    /// (while the sink serves one) its CA is not yet in every webhook's caBundle: then it waits
    /// for the configuration to carry it, and the current certificate is served meanwhile.
    fn load(&mut self, object: &Secret) {
        let stored = secret::stored(object);
        let secret = &self.settings.secret;
        let (Some(cert), Some(key)) = (stored.tls_crt, stored.tls_key) else {
            tracing::info!(%secret, "the webhook Secret has no serving certificate yet");
            return;
        };
        let pair = (cert, key);
        if self.loaded.as_ref() == Some(&pair) {
            self.waiting = None;
            return;
        }
        let ca = stored.ca_crt.unwrap_or_default();
        if self.loaded.is_some() && !self.trusted_by_configuration(&ca) {
            tracing::info!(
                %secret,
                "the webhook Secret's serving certificate waits until the webhook configuration's \
                 caBundle carries its CA; serving the current one meanwhile"
            );
            self.waiting = Some((pair, ca));
            return;
        }
        self.waiting = None;
        self.hand_over(pair, &ca);
    }

    /// Loads the waiting certificate once the configuration trusts its CA.
    fn load_waiting(&mut self) {
        let trusted = self
            .waiting
            .as_ref()
            .is_some_and(|(_, ca)| self.trusted_by_configuration(ca));
        if trusted && let Some((pair, ca)) = self.waiting.take() {
            self.hand_over(pair, &ca);
        }
    }

    /// Whether every webhook of the configuration (as last seen) carries `ca` as its caBundle.
    fn trusted_by_configuration(&self, ca: &[u8]) -> bool {
        self.seen_bundles
            .as_ref()
            .is_none_or(|bundles| bundles.iter().all(|b| b.as_deref() == Some(ca)))
    }

    /// Serves `pair`, and reports the expiry of the CA in `ca` (the Secret's bundle) that signed it.
    fn hand_over(&mut self, pair: Pair, ca: &[u8]) {
        let secret = &self.settings.secret;
        match self.sink.load(&pair.0, &pair.1) {
            Ok(()) => {
                tracing::info!(%secret, "serving certificate loaded");
                if let Some(not_after) = super::inspect::signer_expiry(&pair.0, ca) {
                    self.sink.signed_by_ca_until(not_after);
                }
                self.loaded = Some(pair);
            }
            Err(err) => tracing::warn!(
                %secret,
                error = %error_chain(&err),
                "the webhook Secret's serving certificate cannot be served; keeping the current one"
            ),
        }
    }

    /// Leader: makes the Secret current.
    async fn check_secret(&mut self) {
        let result = secret::make_current(
            &self.secrets,
            &self.settings.secret,
            &self.dns_names,
            self.rollover_delay,
            self.trusted.as_deref(),
        )
        .await;
        self.secret_due = match result {
            Ok(current) => {
                self.known_version = current.resource_version;
                for (action, written) in &current.written {
                    announce(&self.recorder, action, written).await;
                }
                let next =
                    Instant::now() + until(current.next_check).min(self.settings.rotation_check);
                if self.bundle.as_ref() != Some(&current.ca_bundle) {
                    if !current.written.is_empty() {
                        self.hold = next;
                    }
                    self.bundle = Some(current.ca_bundle);
                    self.bundle_due = Instant::now();
                }
                next
            }
            Err(err) => {
                tracing::warn!(
                    secret = %self.settings.secret,
                    error = %error_chain(&err),
                    "failed to keep the webhook certificates current; retrying"
                );
                Instant::now() + self.settings.retry
            }
        };
    }

    /// Leader: makes every webhook's caBundle the Secret's `ca.crt`.
    async fn check_bundle(&mut self) {
        let Some(bundle) = &self.bundle else {
            return;
        };
        let configuration = &self.settings.configuration;
        let result = secret::make_bundle_current(&self.configurations, configuration, bundle).await;
        self.bundle_due = match result {
            Ok(patched) => {
                if !patched.is_empty() {
                    tracing::info!(%configuration, webhooks = ?patched, "caBundle set");
                }
                self.trusted = Some(bundle.clone());
                self.missing_reported = false;
                Instant::now() + self.settings.bundle_check
            }
            Err(err @ CertificatesError::ConfigurationMissing { .. }) => {
                // Said once; its creation wakes the watch.
                if !self.missing_reported {
                    tracing::warn!(error = %err, "waiting for the webhook configuration");
                    self.missing_reported = true;
                }
                self.trusted = Some(bundle.clone());
                Instant::now() + self.settings.bundle_check
            }
            Err(err) => {
                tracing::warn!(
                    %configuration,
                    error = %error_chain(&err),
                    "failed to set the webhook configuration's caBundle; retrying"
                );
                Instant::now() + self.settings.retry
            }
        };
    }
}

/// Events of the named object only.
fn by_name<K>(
    api: Api<K>,
    name: &str,
) -> BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher(api, config)
        .backoff(crate::process::watch_backoff())
        .boxed()
}

/// A log line and an Event on the Secret for a change written to it.
async fn announce(recorder: &Recorder, action: &super::CertificateAction, written: &Secret) {
    let note = action.to_string();
    let type_ = if action.is_unexpected() {
        tracing::warn!(
            secret = written.metadata.name.as_deref().unwrap_or_default(),
            reason = action.reason(),
            "{note}"
        );
        EventType::Warning
    } else {
        tracing::info!(
            secret = written.metadata.name.as_deref().unwrap_or_default(),
            reason = action.reason(),
            "{note}"
        );
        EventType::Normal
    };
    let event = Event {
        type_,
        reason: action.reason().to_owned(),
        note: Some(note),
        action: "ManageCertificates".to_owned(),
        secondary: None,
    };
    if let Err(err) = recorder.publish(&event, &written.object_ref(&())).await {
        tracing::warn!(error = %err, "failed to publish an event");
    }
}

/// Time from now until `at`, zero if past.
fn until(at: Timestamp) -> Duration {
    Duration::try_from(at.duration_since(Timestamp::now())).unwrap_or(Duration::ZERO)
}
