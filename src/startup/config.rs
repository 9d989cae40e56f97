//! The configuration of `ocifit run`, typed, read from the flags and the files they name once,
//! and checked before anything starts: every part gets its settings from here, none reads a
//! flag.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::args::RunArgs;
use crate::admission::{self, DEADLINE};
use crate::artifact_cache::{Helper, StepRegistries};
use crate::cluster;
use crate::cluster::LeaseSettings;
use crate::cluster::SecretNamespaces;
use crate::image_selection::{Backoff, ControllerTunables, HoldRules, ManagedShare, Quota};
use crate::registry::{
    AllowList, CacheOptions, DockerConfig, Mirrors, PrivateRegistries, RegistryOptions,
};
use crate::telemetry::LogFormat;

/// A flag's value, or a file it names, cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file named by a flag could not be read.
    #[error("failed to read {what} {path}")]
    Read {
        /// Which flag's file.
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The docker config does not parse.
    #[error("failed to parse the docker config {path}")]
    DockerConfig {
        path: PathBuf,
        #[source]
        source: crate::registry::ConfigError,
    },
    /// `--allowed-registries` has a pattern that is not a host.
    #[error("--allowed-registries")]
    AllowedRegistries(#[source] crate::registry::ConfigError),
    /// `--allowed-private-registries` has an entry that is not a host or a CIDR.
    #[error("--allowed-private-registries")]
    AllowedPrivateRegistries(#[source] crate::registry::ConfigError),
    /// `--registry-mirrors-dir` holds a file ocifit cannot follow.
    #[error("--registry-mirrors-dir")]
    RegistryMirrors(#[source] crate::registry::ConfigError),
}

/// Everything `ocifit run` is told.
#[derive(Clone, Debug)]
pub struct Config {
    /// Which cluster (`--kubeconfig`, `--context`), else the usual places.
    pub kube: super::KubeArgs,
    pub log_format: LogFormat,
    /// The admin server's address.
    pub admin: SocketAddr,
    /// This replica's identity (Lease holder, Events).
    pub identity: String,
    /// Leader election, unless off.
    pub lease: Option<LeaseSettings>,
    /// The registry client's options.
    pub registry: RegistryOptions,
    /// How the cluster view is kept.
    pub cluster: cluster::ViewSettings,
    /// The image-selection controller's tunables.
    pub controller: ControllerTunables,
    /// How long image selection holds a pod it cannot decide yet, and what follows.
    pub hold: HoldRules,
    /// The admission host, when it has a certificate source.
    pub admission: Option<admission::HostSettings>,
    /// ocifit's own namespace (placement never gates its pods).
    pub own_namespace: String,
    /// The MutatingWebhookConfiguration of ocifit's webhooks.
    pub webhook_configuration: String,
    /// ocifit's own credentials for placement's image inspection.
    pub placement_credentials: DockerConfig,
    /// How often placement audits running pods; `None`: never.
    pub placement_audit_interval: Option<Duration>,
    /// Whether the deprecated `--placement-allow-private-registries` opened every internal
    /// address (a warning at start).
    pub every_private_registry: bool,
    /// The artifact-cache step helpers' image.
    pub artifact_helper: Option<Helper>,
    /// The registries a step's `registry` annotation may name (`--allowed-registries`).
    pub step_registries: StepRegistries,
    /// The registry images a cache may deploy.
    pub artifact_cache_images: Vec<String>,
}

impl Config {
    /// Reads the flags (and the files they name) into a configuration.
    pub fn from_args(args: &RunArgs) -> Result<Config, ConfigError> {
        let identity = args.identity.clone().unwrap_or_else(hostname);
        let client_ca = match &args.webhook_client_ca {
            Some(path) => Some(read("the webhook client CA file", path)?),
            None => None,
        };
        let admission = args.certificate_source().map(|certificates| {
            let certificates = match certificates {
                admission::CertificateSource::Managed(mut managed) => {
                    managed.identity.clone_from(&identity);
                    admission::CertificateSource::Managed(managed)
                }
                files => files,
            };
            admission::HostSettings {
                bind: args.webhook_bind_address,
                certificates,
                deadline: DEADLINE,
                shutdown_delay: args.webhook_shutdown_delay,
                client_ca,
                uncertified: args.webhook_uncertified_clients,
            }
        });
        Ok(Config {
            kube: args.kube.clone(),
            log_format: args.log_format,
            admin: args.admin_bind_address,
            lease: args.leader_elect.then(|| LeaseSettings {
                name: args.lease_name.clone(),
                namespace: args.lease_namespace.clone(),
                identity: identity.clone(),
                duration: args.lease_duration,
                grace: args.lease_grace,
            }),
            identity,
            registry: registry_options(args)?,
            cluster: cluster::ViewSettings {
                nfd_namespace: args.nfd_namespace.clone(),
                nfd_discovery_interval: args.nfd_discovery_interval,
                secret_namespaces: SecretNamespaces::from_list(
                    &args.pull_secret_namespaces,
                    &args.lease_namespace,
                ),
            },
            controller: ControllerTunables {
                backoff: Backoff {
                    max: args.max_retry_interval,
                    ..Backoff::default()
                },
                debounce: args.debounce,
                concurrency: args.concurrency,
                managed: ManagedShare {
                    concurrency: args.image_ref_concurrency,
                    deadline: args.image_ref_deadline,
                },
            },
            hold: HoldRules {
                bound: args.image_hold_timeout,
                failure: args.image_hold_failure,
                take_charge: args.image_ref_policies,
                collect_after: args.image_ref_policy_ttl,
                quota: Quota {
                    per_namespace: usize::try_from(args.image_ref_policies_per_namespace)
                        .unwrap_or(usize::MAX),
                    global: usize::try_from(args.image_ref_policies_max).unwrap_or(usize::MAX),
                },
            },
            admission,
            own_namespace: args.lease_namespace.clone(),
            webhook_configuration: args.webhook_configuration.clone(),
            placement_credentials: match &args.placement_docker_config {
                Some(path) => docker_config(path)?,
                None => DockerConfig::default(),
            },
            placement_audit_interval: (!args.placement_audit_interval.is_zero())
                .then_some(args.placement_audit_interval),
            every_private_registry: args.placement_allow_private_registries,
            artifact_helper: args.artifact_helper_image.clone().map(|image| Helper {
                image,
                pull_policy: None,
            }),
            step_registries: StepRegistries::new(&args.allowed_registries)
                .map_err(ConfigError::AllowedRegistries)?,
            artifact_cache_images: args.artifact_cache_images.clone(),
        })
    }
}

fn read(what: &'static str, path: &PathBuf) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|source| ConfigError::Read {
        what,
        path: path.clone(),
        source,
    })
}

fn docker_config(path: &PathBuf) -> Result<DockerConfig, ConfigError> {
    let bytes = read("the docker config", path)?;
    DockerConfig::from_json(&bytes).map_err(|source| ConfigError::DockerConfig {
        path: path.clone(),
        source,
    })
}

fn registry_options(args: &RunArgs) -> Result<RegistryOptions, ConfigError> {
    let mut options = RegistryOptions {
        plain_http: args.plain_http_registries.clone(),
        allowed: AllowList::parse(&args.allowed_registries)
            .map_err(ConfigError::AllowedRegistries)?,
        private: private_registries(args)?,
        request_timeout: args.registry_timeout,
        max_artifact_bytes: args.max_artifact_bytes,
        cache: CacheOptions {
            tag_ttl: args.registry_tag_ttl,
            ..CacheOptions::default()
        },
        ..RegistryOptions::default()
    };
    if let Some(path) = &args.docker_config {
        options.credentials = docker_config(path)?;
    }
    if let Some(path) = &args.ca_file {
        options.extra_ca_pem.push(read("the CA file", path)?);
    }
    if let Some(dir) = &args.registry_mirrors_dir {
        options.mirrors = Mirrors::load(dir).map_err(ConfigError::RegistryMirrors)?;
    }
    Ok(options)
}

/// `--allowed-private-registries`, and every internal address with the deprecated
/// `--placement-allow-private-registries`.
fn private_registries(args: &RunArgs) -> Result<PrivateRegistries, ConfigError> {
    let listed = PrivateRegistries::parse(&args.allowed_private_registries)
        .map_err(ConfigError::AllowedPrivateRegistries)?;
    Ok(if args.placement_allow_private_registries {
        listed.and(&PrivateRegistries::every())
    } else {
        listed
    })
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| format!("ocifit-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::startup::args::RunOnly;

    fn config(flags: &[&str]) -> Result<Config, ConfigError> {
        let mut argv = vec!["ocifit"];
        argv.extend(flags);
        Config::from_args(&RunOnly::try_parse_from(argv).unwrap().run)
    }

    #[test]
    fn the_managed_certificates_and_the_lease_carry_this_replicas_identity() {
        let config = config(&["--identity", "replica-1", "--manage-webhook-certificate"]).unwrap();
        assert_eq!(config.lease.unwrap().identity, "replica-1");
        let Some(admission::CertificateSource::Managed(managed)) =
            config.admission.map(|a| a.certificates)
        else {
            panic!("the managed mode");
        };
        assert_eq!(managed.identity, "replica-1");
    }

    #[test]
    fn without_leader_election_or_a_certificate_there_is_no_lease_and_no_admission() {
        let config = config(&["--leader-elect", "false"]).unwrap();
        assert!(config.lease.is_none());
        assert!(config.admission.is_none());
    }

    #[test]
    fn an_unreadable_ca_file_is_named() {
        let err = config(&["--ca-file", "/nonexistent/ca.pem"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to read the CA file /nonexistent/ca.pem"
        );
    }

    #[test]
    fn the_private_registries_are_the_listed_ones_and_every_one_only_with_the_deprecated_flag() {
        let listed = config(&[
            "--allowed-private-registries",
            "registry.internal:5000,10.96.0.0/12",
        ])
        .unwrap();
        assert_eq!(
            listed.registry.private,
            PrivateRegistries::parse(&["registry.internal:5000", "10.96.0.0/12"]).unwrap()
        );
        assert!(!listed.every_private_registry);
        let none = config(&[]).unwrap();
        assert_eq!(none.registry.private, PrivateRegistries::default());
        let every = config(&["--placement-allow-private-registries"]).unwrap();
        assert!(every.every_private_registry);
        assert_eq!(
            every.registry.private,
            PrivateRegistries::default().and(&PrivateRegistries::every())
        );
        let err = config(&["--allowed-private-registries", "10.0.0.0/33"]).unwrap_err();
        assert_eq!(err.to_string(), "--allowed-private-registries");
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert!(
            source.is_some_and(|s| s.contains("\"10.0.0.0/33\"")),
            "{err:?}"
        );
    }

    #[test]
    fn the_mirrors_dir_is_read_at_startup_and_a_bad_file_fails_it_naming_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let registry = dir.path().join("docker.io");
        std::fs::create_dir(&registry).unwrap();
        std::fs::write(
            registry.join("hosts.toml"),
            "[host.\"https://m.example\"]\n",
        )
        .unwrap();
        let path = dir.path().display().to_string();
        let read = config(&["--registry-mirrors-dir", &path]).unwrap();
        assert!(!read.registry.mirrors.is_empty());
        assert!(config(&[]).unwrap().registry.mirrors.is_empty());
        std::fs::write(
            registry.join("hosts.toml"),
            "[host.\"https://m.example\"]\ncapabilities = [\"pul\"]\n",
        )
        .unwrap();
        let err = config(&["--registry-mirrors-dir", &path]).unwrap_err();
        assert_eq!(err.to_string(), "--registry-mirrors-dir");
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert!(
            source
                .as_deref()
                .is_some_and(|s| s.contains("docker.io/hosts.toml")
                    && s.contains("`host.\"https://m.example\".capabilities`")),
            "{source:?}"
        );
    }
}
