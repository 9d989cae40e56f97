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
use tokio::time::Instant;

use super::{CertificateSink, CertificatesError, Settings, ca_bundle, secret, service_dns_names};
use crate::controller::leader::Leadership;
use crate::controller::runner::REPORTING_CONTROLLER;

/// Runs until `shutdown` resolves.
pub async fn manage(
    client: Client,
    settings: Settings,
    leadership: Leadership,
    sink: Arc<dyn CertificateSink>,
    shutdown: impl Future<Output = ()>,
) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &settings.namespace);
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: REPORTING_CONTROLLER.to_owned(),
            instance: Some(settings.identity.clone()),
        },
    );
    let dns_names = service_dns_names(&settings.service, &settings.namespace);
    let rollover_delay =
        SignedDuration::try_from(settings.rollover_delay).unwrap_or(SignedDuration::MAX);
    let mut secret_events = by_name(secrets.clone(), &settings.secret);
    let mut configuration_events = by_name(configurations.clone(), &settings.configuration);
    let mut gained = leadership.gained().boxed();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut loaded: Option<(Vec<u8>, Vec<u8>)> = None;
    let mut bundle: Option<Vec<u8>> = None;
    let mut secret_due = Instant::now();
    let mut bundle_due = Instant::now();
    let mut missing_reported = false;
    let mut known_version: Option<String> = None;
    loop {
        let leader = leadership.is_leader();
        tokio::select! {
            () = &mut shutdown => return,
            event = secret_events.next() => match event {
                Some(Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object))) => {
                    load(&*sink, &settings, &object, &mut loaded);
                    // Its own writes coming back need no look (and must not hurry the second
                    // step of a CA change).
                    if object.metadata.resource_version != known_version {
                        secret_due = Instant::now();
                    }
                }
                Some(Ok(watcher::Event::Delete(_))) => {
                    tracing::warn!(
                        secret = %settings.secret,
                        "the webhook Secret was deleted; the leader creates a new one, and this \
                         replica serves its current certificate until then"
                    );
                    secret_due = Instant::now();
                }
                Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
                Some(Err(err)) => {
                    tracing::warn!(secret = %settings.secret, error = %err, "failed to watch the webhook Secret");
                }
                None => return,
            },
            event = configuration_events.next() => match event {
                Some(Ok(watcher::Event::Apply(_) | watcher::Event::InitApply(_) | watcher::Event::Delete(_))) => {
                    bundle_due = Instant::now();
                }
                Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
                Some(Err(err)) => {
                    tracing::warn!(
                        configuration = %settings.configuration,
                        error = %err,
                        "failed to watch the webhook configuration; its caBundle is still checked every {:?}",
                        settings.bundle_check
                    );
                }
                None => return,
            },
            Some(()) = gained.next() => {
                secret_due = Instant::now();
                bundle_due = Instant::now();
            }
            () = tokio::time::sleep_until(secret_due.min(bundle_due)), if leader => {
                if secret_due <= Instant::now() {
                    secret_due = match secret::make_current(&secrets, &settings.secret, &dns_names, rollover_delay).await {
                        Ok(current) => {
                            known_version = current.resource_version;
                            for (action, written) in &current.written {
                                announce(&recorder, action, written).await;
                            }
                            if bundle.as_ref() != Some(&current.ca_bundle) {
                                bundle = Some(current.ca_bundle);
                                bundle_due = Instant::now();
                            }
                            Instant::now() + until(current.next_check).min(settings.rotation_check)
                        }
                        Err(err) => {
                            tracing::warn!(secret = %settings.secret, error = %error_chain(&err), "failed to keep the webhook certificates current; retrying");
                            Instant::now() + settings.retry
                        }
                    };
                }
                if let Some(bundle) = bundle.as_ref().filter(|_| bundle_due <= Instant::now()) {
                    bundle_due = match ca_bundle::make_current(&configurations, &settings.configuration, bundle).await {
                        Ok(patched) => {
                            if !patched.is_empty() {
                                tracing::info!(configuration = %settings.configuration, webhooks = ?patched, "caBundle set");
                            }
                            missing_reported = false;
                            Instant::now() + settings.bundle_check
                        }
                        Err(err @ CertificatesError::ConfigurationMissing { .. }) => {
                            // Said once; its creation wakes the watch.
                            if !missing_reported {
                                tracing::warn!(error = %err, "waiting for the webhook configuration");
                                missing_reported = true;
                            }
                            Instant::now() + settings.bundle_check
                        }
                        Err(err) => {
                            tracing::warn!(configuration = %settings.configuration, error = %error_chain(&err), "failed to set the webhook configuration's caBundle; retrying");
                            Instant::now() + settings.retry
                        }
                    };
                }
            }
        }
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
    watcher(api, config).default_backoff().boxed()
}

/// Hands the Secret's serving certificate to the sink, unless it is what the sink has.
fn load(
    sink: &dyn CertificateSink,
    settings: &Settings,
    object: &Secret,
    loaded: &mut Option<(Vec<u8>, Vec<u8>)>,
) {
    let stored = secret::stored(object);
    let (Some(cert), Some(key)) = (stored.tls_crt, stored.tls_key) else {
        tracing::info!(secret = %settings.secret, "the webhook Secret has no serving certificate yet");
        return;
    };
    let pair = (cert, key);
    if loaded.as_ref() == Some(&pair) {
        return;
    }
    match sink.load(&pair.0, &pair.1) {
        Ok(()) => {
            tracing::info!(secret = %settings.secret, "serving certificate loaded");
            *loaded = Some(pair);
        }
        Err(err) => {
            tracing::warn!(secret = %settings.secret, error = %err, "the webhook Secret's serving certificate cannot be served; keeping the current one");
        }
    }
}

/// A log line and an Event on the Secret for a change written to it.
async fn announce(recorder: &Recorder, action: &super::Action, written: &Secret) {
    let note = action.to_string();
    let type_ = if action.is_unexpected() {
        tracing::warn!(secret = ?written.metadata.name, reason = action.reason(), "{note}");
        EventType::Warning
    } else {
        tracing::info!(secret = ?written.metadata.name, reason = action.reason(), "{note}");
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

fn error_chain(err: &CertificatesError) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
