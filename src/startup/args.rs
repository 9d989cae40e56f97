//! The flags of `ocifit run`, each with an environment variable and a default.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::admission::CertificateSettings;
use crate::admission::CertificateSource;
use crate::admission::Uncertified;
use crate::api::parse_duration;
use crate::image_selection::HoldFailure;
use crate::telemetry::LogFormat;

/// Flags of `ocifit run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Which cluster, as every subcommand finds it: the global flags, filled in by `cli::run`.
    #[arg(skip)]
    pub kube: super::KubeArgs,

    /// Address of the admin HTTP server (/livez, /readyz, /metrics).
    #[arg(
        long,
        env = "OCIFIT_ADMIN_BIND_ADDRESS",
        default_value = "0.0.0.0:8080"
    )]
    pub admin_bind_address: SocketAddr,

    /// Log format; the filter comes from RUST_LOG (default info).
    #[arg(long, env = "OCIFIT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// A registry reached over plain HTTP, exactly as references spell it (`HOST[:PORT]`);
    /// repeatable (comma-separated in the environment). Every other registry is HTTPS.
    #[arg(
        long = "plain-http-registry",
        env = "OCIFIT_PLAIN_HTTP_REGISTRIES",
        value_name = "HOST[:PORT]",
        value_delimiter = ','
    )]
    pub plain_http_registries: Vec<String>,

    /// Registries the operator may reach (`HOST[:PORT]` or `*.DOMAIN[:PORT]`; repeatable,
    /// comma-separated in the environment): artifact references, candidate images, the images
    /// artifacts name, token realms on another host and redirects. Empty: any registry. Also the
    /// only registries a workflow step's `registry` annotation may name (none when empty).
    #[arg(
        long = "allowed-registries",
        env = "OCIFIT_ALLOWED_REGISTRIES",
        value_name = "PATTERN",
        value_delimiter = ','
    )]
    pub allowed_registries: Vec<String>,

    /// Namespaces whose Secrets policies may name as pull secrets (read with `get` only, never
    /// listed or watched); `*`: every namespace. Empty: the operator's own namespace
    /// (--lease-namespace).
    #[arg(
        long = "pull-secret-namespaces",
        env = "OCIFIT_PULL_SECRET_NAMESPACES",
        value_name = "NAMESPACE",
        value_delimiter = ','
    )]
    pub pull_secret_namespaces: Vec<String>,

    /// PEM file of extra CA certificates trusted for registries.
    #[arg(long, env = "OCIFIT_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,

    /// Docker config (config.json or a dockerconfigjson) with registry credentials for policies
    /// without a pull secret.
    #[arg(long, env = "OCIFIT_DOCKER_CONFIG", value_name = "FILE")]
    pub docker_config: Option<PathBuf>,

    /// Docker config (config.json or a dockerconfigjson) with ocifit's own credentials for
    /// placement's image inspection, tried after a pod's pull Secrets and its ServiceAccount's,
    /// for the pods of policies with `operatorCredentials: true` only.
    #[arg(long, env = "OCIFIT_PLACEMENT_DOCKER_CONFIG", value_name = "FILE")]
    pub placement_docker_config: Option<PathBuf>,

    /// Registries inside the cluster's or the node's network that ocifit may reach: `HOST[:PORT]`
    /// or `*.DOMAIN[:PORT]` (whatever the name resolves to; on that port only) and CIDRs
    /// (`10.96.0.0/12`: addresses that may be connected to). Every other private, loopback,
    /// link-local, shared or reserved address is refused at connect time, for every request
    /// (registries, token realms, redirects).
    #[arg(
        long = "allowed-private-registries",
        env = "OCIFIT_ALLOWED_PRIVATE_REGISTRIES",
        value_name = "HOST[:PORT]|CIDR",
        value_delimiter = ','
    )]
    pub allowed_private_registries: Vec<String>,

    /// A containerd-style `certs.d` directory (`DIR/<registry host>/hosts.toml`, `_default` for
    /// the rest): each registry's reads go to the mirrors its file lists first, as the nodes
    /// pull. Read at startup; a file ocifit cannot follow fails the start.
    #[arg(long, env = "OCIFIT_REGISTRY_MIRRORS_DIR", value_name = "DIR")]
    pub registry_mirrors_dir: Option<PathBuf>,

    /// Deprecated: allows every private, loopback and link-local address (as
    /// `--allowed-private-registries` listing all of them). Name the registries instead.
    #[arg(long, env = "OCIFIT_PLACEMENT_ALLOW_PRIVATE_REGISTRIES", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub placement_allow_private_registries: bool,

    /// Timeout of one registry request.
    #[arg(long, env = "OCIFIT_REGISTRY_TIMEOUT", value_parser = duration, default_value = "10s")]
    pub registry_timeout: Duration,

    /// How long a tag's digest is trusted by the registry cache (keep it below the shortest
    /// refreshInterval so a refresh sees a re-pushed tag).
    #[arg(long, env = "OCIFIT_REGISTRY_TAG_TTL", value_parser = duration, default_value = "5s")]
    pub registry_tag_ttl: Duration,

    /// How often the placement controller audits running pods for ones on a node their images
    /// are not built for (reported, and evicted under policies with `misplaced: Evict`): `0s`
    /// (the default) never; else at least 10s. Each pass lists every running pod a page at a
    /// time and inspects the images of those a policy selects (through the inspection cache).
    #[arg(long, env = "OCIFIT_PLACEMENT_AUDIT_INTERVAL", value_parser = audit_interval, default_value = "0s")]
    pub placement_audit_interval: Duration,

    /// Largest compatibility artifact read, in bytes.
    #[arg(long, env = "OCIFIT_MAX_ARTIFACT_BYTES", default_value_t = 1024 * 1024)]
    pub max_artifact_bytes: u64,

    /// Elect one leader through a Lease; only the leader reconciles and writes.
    #[arg(long, env = "OCIFIT_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// Name of the leader-election Lease.
    #[arg(long, env = "OCIFIT_LEASE_NAME", default_value = "ocifit-controller")]
    pub lease_name: String,

    /// Namespace of the Lease (the operator's namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "ocifit-system")]
    pub lease_namespace: String,

    /// How long the lease holds without renewal (whole seconds).
    #[arg(long, env = "OCIFIT_LEASE_DURATION", value_parser = duration, default_value = "15s")]
    pub lease_duration: Duration,

    /// How long before expiry the leader renews (whole seconds).
    #[arg(long, env = "OCIFIT_LEASE_GRACE", value_parser = duration, default_value = "5s")]
    pub lease_grace: Duration,

    /// This replica's identity in the Lease and on Events; default: the host name.
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,

    /// Namespace of nfd-master (its NodeFeature objects are merged first).
    #[arg(
        long,
        env = "OCIFIT_NFD_NAMESPACE",
        default_value = "node-feature-discovery"
    )]
    pub nfd_namespace: String,

    /// How often to look for NFD's NodeFeature API until it is installed.
    #[arg(long, env = "OCIFIT_NFD_DISCOVERY_INTERVAL", value_parser = duration, default_value = "15s")]
    pub nfd_discovery_interval: Duration,

    /// How long triggers are held so a burst of node changes makes one reconcile.
    #[arg(long, env = "OCIFIT_DEBOUNCE", value_parser = duration, default_value = "200ms")]
    pub debounce: Duration,

    /// Policies reconciled at once.
    #[arg(long, env = "OCIFIT_CONCURRENCY", default_value_t = 4)]
    pub concurrency: u16,

    /// Longest wait before retrying a failed artifact resolution.
    #[arg(long, env = "OCIFIT_MAX_RETRY_INTERVAL", value_parser = duration, default_value = "5m")]
    pub max_retry_interval: Duration,

    /// Longest an opted-in pod is held (admitted with ocifit's scheduling gate) waiting for its
    /// image to be decidable, or a workflow step waiting for its ArtifactCache to be Ready, from
    /// its creation; then --image-hold-failure applies.
    #[arg(long, env = "OCIFIT_IMAGE_HOLD_TIMEOUT", value_parser = duration, default_value = "5m")]
    pub image_hold_timeout: Duration,

    /// What follows a hold past --image-hold-timeout, or a decision that would have refused the
    /// held pod (or a cache that cannot become Ready): `Ignore` releases it unchanged, `Fail`
    /// keeps it held (a Warning Event and the annotation selection.ocifit.io/held, or
    /// artifacts.ocifit.io/held for a step, say why). Both with an Event. The chart passes
    /// webhook.failurePolicy.
    #[arg(long, env = "OCIFIT_IMAGE_HOLD_FAILURE", default_value = "Fail")]
    pub image_hold_failure: HoldFailure,

    /// Take charge of an ImageSelectionPolicy for a pod whose `image-ref` annotation names an
    /// artifact no policy uses (created by the leader, labelled selection.ocifit.io/managed,
    /// resolved anonymously from public addresses only); the pod is held until it resolves.
    /// Off: such a pod stays held until someone creates one, then the hold failure rule.
    #[arg(long, env = "OCIFIT_IMAGE_REF_POLICIES", default_value_t = true, action = clap::ArgAction::Set)]
    pub image_ref_policies: bool,

    /// How long a policy ocifit took charge of stays once no pod uses it (pods it gave an image
    /// carry the label selection.ocifit.io/managed-policy); then it is deleted.
    #[arg(long, env = "OCIFIT_IMAGE_REF_POLICY_TTL", value_parser = duration, default_value = "24h")]
    pub image_ref_policy_ttl: Duration,

    /// Most policies ocifit takes charge of for the pods of one namespace (counted by the label
    /// selection.ocifit.io/managed-for); beyond it the pod stays held, saying so, until its
    /// hold bound.
    #[arg(long, env = "OCIFIT_IMAGE_REF_POLICIES_PER_NAMESPACE", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub image_ref_policies_per_namespace: u32,

    /// Most policies ocifit takes charge of in the whole cluster.
    #[arg(long, env = "OCIFIT_IMAGE_REF_POLICIES_MAX", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub image_ref_policies_max: u32,

    /// Policies ocifit took charge of resolved at once, apart from --concurrency's (a registry
    /// a pod author names never takes an admin policy's turn).
    #[arg(long, env = "OCIFIT_IMAGE_REF_CONCURRENCY", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    pub image_ref_concurrency: u16,

    /// Longest one resolution of a policy ocifit took charge of may take (the artifact and every
    /// image it names); then it fails as RegistryUnavailable and is retried with backoff.
    #[arg(long, env = "OCIFIT_IMAGE_REF_DEADLINE", value_parser = duration, default_value = "60s")]
    pub image_ref_deadline: Duration,

    /// Image of the artifact-cache step helpers (ocifit's own image; the chart sets it): the init
    /// container and sidecar injected into workflow steps. Unset: steps that move artifacts are
    /// refused, saying so.
    #[arg(long, env = "OCIFIT_ARTIFACT_HELPER_IMAGE", value_name = "IMAGE")]
    pub artifact_helper_image: Option<String>,

    /// Registry images an ArtifactCache may deploy (`spec.image`, compared exactly; repeatable,
    /// comma-separated in the environment): a cache runs its image with a Secret of its
    /// namespace mounted, so only these run. Another image leaves the cache not Ready with
    /// reason ImageNotAllowed.
    #[arg(
        long = "artifact-cache-images",
        env = "OCIFIT_ARTIFACT_CACHE_IMAGES",
        value_name = "IMAGE",
        value_delimiter = ',',
        default_value = crate::api::DEFAULT_REGISTRY_IMAGE
    )]
    pub artifact_cache_images: Vec<String>,

    /// Address of the webhook's HTTPS server (POST /mutate); served only with a certificate
    /// (--tls-cert-file/--tls-key-file or --manage-webhook-certificate).
    #[arg(
        long,
        env = "OCIFIT_WEBHOOK_BIND_ADDRESS",
        default_value = "0.0.0.0:8443"
    )]
    pub webhook_bind_address: SocketAddr,

    /// How long the webhook keeps serving after SIGTERM before it drains and exits (readiness
    /// fails at once, so endpoints drop the replica meanwhile); at most 60s.
    #[arg(
        long,
        env = "OCIFIT_WEBHOOK_SHUTDOWN_DELAY",
        value_parser = shutdown_delay,
        default_value = "5s"
    )]
    pub webhook_shutdown_delay: Duration,

    /// PEM CA certificates the webhook's clients must present a certificate signed by (give the
    /// apiserver one through its admission configuration's kubeConfigFile): a client without
    /// one is refused at the TLS handshake. Unset: any client that reaches the port is served.
    #[arg(long, env = "OCIFIT_WEBHOOK_CLIENT_CA", value_name = "FILE")]
    pub webhook_client_ca: Option<PathBuf>,

    /// With --webhook-client-ca, what a client presenting no certificate gets: `refuse` at the
    /// TLS handshake, or `answer-without-events`: answered as any client, but its reviews
    /// write no Event (only the apiserver's, with its certificate, do).
    #[arg(
        long,
        env = "OCIFIT_WEBHOOK_UNCERTIFIED_CLIENTS",
        value_enum,
        default_value_t = Uncertified::Refuse,
        requires = "webhook_client_ca"
    )]
    pub webhook_uncertified_clients: Uncertified,

    /// PEM serving certificate (chain, leaf first) of the webhook; re-read when it changes.
    #[arg(
        long,
        env = "OCIFIT_TLS_CERT_FILE",
        value_name = "FILE",
        requires = "tls_key_file",
        conflicts_with = "manage_webhook_certificate"
    )]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of the webhook's serving certificate; re-read when it changes.
    #[arg(
        long,
        env = "OCIFIT_TLS_KEY_FILE",
        value_name = "FILE",
        requires = "tls_cert_file",
        conflicts_with = "manage_webhook_certificate"
    )]
    pub tls_key_file: Option<PathBuf>,

    /// Keep the webhook's CA and serving certificate in a Secret and the CA in the webhook
    /// configuration.
    #[arg(long, env = "OCIFIT_MANAGE_WEBHOOK_CERTIFICATE", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub manage_webhook_certificate: bool,

    /// Secret (in the operator's namespace) holding the managed CA and serving certificate.
    #[arg(
        long,
        env = "OCIFIT_WEBHOOK_SECRET",
        default_value = "ocifit-webhook-tls"
    )]
    pub webhook_secret: String,

    /// Service whose DNS names the managed certificate carries.
    #[arg(long, env = "OCIFIT_WEBHOOK_SERVICE", default_value = "ocifit-webhook")]
    pub webhook_service: String,

    /// MutatingWebhookConfiguration of ocifit's webhooks: its `pods.ocifit.io` namespaceSelector
    /// decides in which namespaces held pods are released; the managed mode keeps its caBundle
    /// current.
    #[arg(long, env = "OCIFIT_WEBHOOK_CONFIGURATION", default_value = "ocifit")]
    pub webhook_configuration: String,
}

impl RunArgs {
    /// The certificate source the flags choose; `None`: the webhook is not served.
    pub fn certificate_source(&self) -> Option<CertificateSource> {
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => Some(CertificateSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ if self.manage_webhook_certificate => {
                Some(CertificateSource::Managed(CertificateSettings::new(
                    &self.lease_namespace,
                    &self.webhook_secret,
                    &self.webhook_service,
                    &self.webhook_configuration,
                )))
            }
            _ => None,
        }
    }
}

/// Why a duration flag's value is refused (clap prints it after the flag's name).
#[derive(Debug, thiserror::Error)]
pub(super) enum DurationFlagError {
    #[error("{0:?} is not a duration such as 10s, 5m, 250ms or 1d12h")]
    NotADuration(String),
    #[error(
        "{text:?} is longer than {}s: a replica that stopping takes that long to leave holds up rollouts",
        MAX_SHUTDOWN_DELAY.as_secs()
    )]
    ShutdownDelayTooLong { text: String },
    #[error(
        "{text:?} is shorter than {}s: each audit pass lists every running pod; 0s turns the audit off",
        MIN_AUDIT_INTERVAL.as_secs()
    )]
    AuditTooOften { text: String },
}

fn duration(text: &str) -> Result<Duration, DurationFlagError> {
    parse_duration(text).ok_or_else(|| DurationFlagError::NotADuration(text.to_owned()))
}

/// The longest `--webhook-shutdown-delay`: the chart's termination grace period is this plus
/// the time tasks get to finish.
pub(super) const MAX_SHUTDOWN_DELAY: Duration = Duration::from_secs(60);

/// The shortest `--placement-audit-interval` but 0s (off).
pub(super) const MIN_AUDIT_INTERVAL: Duration = Duration::from_secs(10);

fn audit_interval(text: &str) -> Result<Duration, DurationFlagError> {
    let interval = duration(text)?;
    if !interval.is_zero() && interval < MIN_AUDIT_INTERVAL {
        return Err(DurationFlagError::AuditTooOften {
            text: text.to_owned(),
        });
    }
    Ok(interval)
}

fn shutdown_delay(text: &str) -> Result<Duration, DurationFlagError> {
    let delay = duration(text)?;
    if delay > MAX_SHUTDOWN_DELAY {
        return Err(DurationFlagError::ShutdownDelayTooLong {
            text: text.to_owned(),
        });
    }
    Ok(delay)
}

/// `ocifit run`'s arguments alone, parsed as its command line is: the tests' way in.
#[cfg(test)]
#[derive(Debug, clap::Parser)]
pub(super) struct RunOnly {
    #[command(flatten)]
    pub run: RunArgs,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn defaults_are_the_documented_ones() {
        let args = RunOnly::try_parse_from(["ocifit"]).unwrap().run;
        assert_eq!(args.admin_bind_address.to_string(), "0.0.0.0:8080");
        assert!(args.leader_elect);
        assert_eq!(args.lease_duration, Duration::from_secs(15));
        assert_eq!(args.debounce, Duration::from_millis(200));
        assert!(args.plain_http_registries.is_empty());
        assert_eq!(args.webhook_shutdown_delay, Duration::from_secs(5));
    }

    #[test]
    fn plain_http_registries_repeat_and_leader_election_turns_off() {
        let args = RunOnly::try_parse_from([
            "ocifit",
            "--plain-http-registry",
            "127.0.0.1:5000",
            "--plain-http-registry",
            "registry.local",
            "--leader-elect",
            "false",
            "--debounce",
            "50ms",
        ])
        .unwrap()
        .run;
        assert_eq!(
            args.plain_http_registries,
            ["127.0.0.1:5000", "registry.local"]
        );
        assert!(!args.leader_elect);
        assert_eq!(args.debounce, Duration::from_millis(50));
    }

    #[test]
    fn without_certificate_flags_the_webhook_is_not_served() {
        let args = RunOnly::try_parse_from(["ocifit"]).unwrap().run;
        assert_eq!(args.webhook_bind_address.to_string(), "0.0.0.0:8443");
        assert_eq!(args.certificate_source(), None);
        assert_eq!(args.webhook_secret, "ocifit-webhook-tls");
        assert_eq!(args.webhook_service, "ocifit-webhook");
        assert_eq!(args.webhook_configuration, "ocifit");
    }

    #[test]
    fn certificate_files_come_in_pairs_and_exclude_the_managed_mode() {
        let files = RunOnly::try_parse_from([
            "ocifit",
            "--tls-cert-file",
            "/tls/tls.crt",
            "--tls-key-file",
            "/tls/tls.key",
        ])
        .unwrap()
        .run;
        assert_eq!(
            files.certificate_source(),
            Some(CertificateSource::Files {
                cert: "/tls/tls.crt".into(),
                key: "/tls/tls.key".into()
            })
        );
        assert!(RunOnly::try_parse_from(["ocifit", "--tls-cert-file", "/tls/tls.crt"]).is_err());
        let both = RunOnly::try_parse_from([
            "ocifit",
            "--tls-cert-file",
            "a",
            "--tls-key-file",
            "b",
            "--manage-webhook-certificate",
        ]);
        assert!(both.is_err());
        let managed = RunOnly::try_parse_from(["ocifit", "--manage-webhook-certificate"])
            .unwrap()
            .run;
        let Some(CertificateSource::Managed(settings)) = managed.certificate_source() else {
            panic!("the managed mode");
        };
        assert_eq!(
            (settings.namespace.as_str(), settings.secret.as_str()),
            ("ocifit-system", "ocifit-webhook-tls")
        );
    }

    #[test]
    fn a_webhook_shutdown_delay_over_a_minute_is_refused() {
        let args = RunOnly::try_parse_from(["ocifit", "--webhook-shutdown-delay", "0s"])
            .unwrap()
            .run;
        assert_eq!(args.webhook_shutdown_delay, Duration::ZERO);
        let err =
            RunOnly::try_parse_from(["ocifit", "--webhook-shutdown-delay", "2m"]).unwrap_err();
        assert!(err.to_string().contains("longer than 60s"), "{err}");
    }

    #[test]
    fn a_duration_flag_reads_days_as_the_crds_do() {
        let args = RunOnly::try_parse_from(["ocifit", "--max-retry-interval", "1d12h"]).unwrap();
        assert_eq!(args.run.max_retry_interval, Duration::from_secs(36 * 3600));
    }

    #[test]
    fn an_unknown_hold_failure_rule_is_refused_naming_both_rules() {
        let err = RunOnly::try_parse_from(["ocifit", "--image-hold-failure", "Maybe"]).unwrap_err();
        assert!(
            err.to_string()
                .contains("\"Maybe\" is neither Ignore nor Fail"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_duration_is_refused_with_an_example() {
        let err = RunOnly::try_parse_from(["ocifit", "--lease-duration", "soon"]).unwrap_err();
        assert!(err.to_string().contains("such as 10s"), "{err}");
    }
}
