//! Every feature of `ocifit run`, started from the configuration over the cluster view, each
//! returning the same face: its tasks, its admission routes, its readiness.

use std::sync::Arc;

use crate::admission::Route;
use crate::cluster::ClusterView;
use crate::image_selection::{self, RegistrySource};
use crate::process::{Feature, Shutdown};
use crate::registry::{DockerConfig, InspectorOptions, RegistryOptions};
use crate::telemetry::Metrics;
use crate::{artifact_cache, placement};

use super::Config;

/// Image selection, placement and the artifact cache, in that order (the order of their tasks in
/// the supervisor's list).
pub(super) fn run(
    config: &Config,
    cluster: &ClusterView,
    source: Arc<RegistrySource>,
    metrics: &Arc<Metrics>,
    shutdown: &Shutdown,
) -> [Feature<Route>; 3] {
    [
        image_selection::run(image_selection::ImageSelectionDeps {
            cluster: cluster.clone(),
            source,
            metrics: Arc::clone(metrics),
            settings: config.controller.clone(),
            hold: config.hold,
            identity: config.identity.clone(),
            admission: config.admission.is_some(),
            webhook_configuration: config.webhook_configuration.clone(),
            own_namespace: config.own_namespace.clone(),
            shutdown: shutdown.clone(),
        }),
        placement::run(placement::PlacementDeps {
            cluster: cluster.clone(),
            metrics: Arc::clone(metrics),
            identity: config.identity.clone(),
            own_namespace: config.own_namespace.clone(),
            // Credentials come with each lookup (the pod's Secrets, then ocifit's own).
            inspector: InspectorOptions {
                registry: RegistryOptions {
                    credentials: DockerConfig::default(),
                    ..config.registry.clone()
                },
                ..InspectorOptions::default()
            },
            own_credentials: config.placement_credentials.clone(),
            admission: config.admission.is_some(),
            audit_interval: config.placement_audit_interval,
            shutdown: shutdown.clone(),
        }),
        artifact_cache::run(artifact_cache::ArtifactCacheDeps {
            cluster: cluster.clone(),
            metrics: Arc::clone(metrics),
            identity: config.identity.clone(),
            helper: config.artifact_helper.clone(),
            registries: config.step_registries.clone(),
            settings: artifact_cache::CacheControllerSettings {
                own_namespace: config.own_namespace.clone(),
                images: config.artifact_cache_images.clone(),
            },
            // The hold bound and failure rule every ocifit hold shares.
            hold: artifact_cache::HoldRules {
                bound: config.hold.bound,
                failure: config.hold.failure,
            },
            shutdown: shutdown.clone(),
        }),
    ]
}
