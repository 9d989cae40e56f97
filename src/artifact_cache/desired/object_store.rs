//! What `storage.s3` changes in a cache's objects: distribution's `s3` driver configured by
//! environment (the credentials by reference to the user's Secret, which ocifit never reads),
//! its storage health check on, so a replica whose bucket does not answer is not Ready and says
//! why; the same HTTP secret in every replica, so an upload begun on one finishes on another; the
//! CA mounted; the NetworkPolicy's egress opened to the endpoint's port (and DNS) only; a
//! PodDisruptionBudget.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, EnvVar, EnvVarSource, KeyToPath, SecretKeySelector, SecretVolumeSource,
    Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::S3Storage;

/// The generated credentials Secret's key holding the registry's HTTP secret (distribution signs
/// upload state with it: replicas that share it continue each other's uploads).
pub const HTTP_SECRET_KEY: &str = "httpSecret";
/// How often the registry checks its bucket.
pub(super) const HEALTH_INTERVAL_SECONDS: i32 = 5;
/// Where the CA bundle is mounted.
const CA_DIR: &str = "/etc/ocifit/s3-ca";
/// The file name of the mounted CA bundle.
const CA_FILE: &str = "ca.crt";

/// The scheme, host and port of an `http(s)://host[:port]` endpoint (the CRD's pattern).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Endpoint {
    pub secure: bool,
    pub host: String,
    pub port: u16,
}

/// `endpoint` taken apart; `None` when it is not what the CRD admits.
pub(super) fn endpoint(endpoint: &str) -> Option<Endpoint> {
    let (secure, rest) = match endpoint.split_once("://")? {
        ("https", rest) => (true, rest),
        ("http", rest) => (false, rest),
        _ => return None,
    };
    let default_port = if secure { 443 } else { 80 };
    let (host, port) = match rest.strip_prefix('[') {
        Some(bracketed) => {
            let (host, after) = bracketed.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match rest.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        },
    };
    let port = match port {
        Some(port) => port.parse().ok().filter(|p| *p != 0)?,
        None => default_port,
    };
    (!host.is_empty() && !host.contains('/')).then(|| Endpoint {
        secure,
        host: host.to_string(),
        port,
    })
}

/// The registry's storage settings for `s3`; `http_secret` names the generated Secret holding
/// [`HTTP_SECRET_KEY`] (none when the cache brings its own htpasswd: then its `envSecretRefs`
/// carry `REGISTRY_HTTP_SECRET`).
pub(super) fn env(s3: &S3Storage, http_secret: Option<&str>) -> Vec<EnvVar> {
    let secure = endpoint(&s3.endpoint).is_none_or(|e| e.secure);
    let mut env = vec![
        value("REGISTRY_STORAGE", "s3"),
        value("REGISTRY_STORAGE_S3_BUCKET", &s3.bucket),
        value("REGISTRY_STORAGE_S3_REGION", &s3.region),
        value("REGISTRY_STORAGE_S3_REGIONENDPOINT", &s3.endpoint),
        value(
            "REGISTRY_STORAGE_S3_FORCEPATHSTYLE",
            &s3.force_path_style.to_string(),
        ),
        value("REGISTRY_STORAGE_S3_SECURE", &secure.to_string()),
        from_secret(
            "REGISTRY_STORAGE_S3_ACCESSKEY",
            &s3.credentials_secret_ref.name,
            &s3.credentials_secret_ref.access_key,
            false,
        ),
        from_secret(
            "REGISTRY_STORAGE_S3_SECRETKEY",
            &s3.credentials_secret_ref.name,
            &s3.credentials_secret_ref.secret_key,
            false,
        ),
        // Blobs are served through the registry, never by a redirect to the store: steps need
        // not reach the store, and the NetworkPolicy's one opening stays the registry's.
        value("REGISTRY_STORAGE_REDIRECT_DISABLE", "true"),
        // A replica whose bucket does not answer fails its readiness, and logs the driver's
        // error, from the first check on (every HEALTH_INTERVAL_SECONDS, the first one after it).
        value("REGISTRY_HEALTH_STORAGEDRIVER_ENABLED", "true"),
        value(
            "REGISTRY_HEALTH_STORAGEDRIVER_INTERVAL",
            &format!("{HEALTH_INTERVAL_SECONDS}s"),
        ),
        value("REGISTRY_HEALTH_STORAGEDRIVER_THRESHOLD", "1"),
        // distribution exports traces to localhost by default; there is no collector.
        value("OTEL_TRACES_EXPORTER", "none"),
    ];
    if let Some(prefix) = &s3.prefix {
        env.push(value("REGISTRY_STORAGE_S3_ROOTDIRECTORY", prefix));
    }
    if s3.ca.is_some() {
        // Go reads the trusted CAs from this file instead of the image's.
        env.push(value("SSL_CERT_FILE", &format!("{CA_DIR}/{CA_FILE}")));
    }
    if let Some(secret) = http_secret {
        // Optional: a Secret generated before ocifit wrote this key still starts the registry.
        env.push(from_secret(
            "REGISTRY_HTTP_SECRET",
            secret,
            HTTP_SECRET_KEY,
            true,
        ));
    }
    env
}

/// The CA bundle's volume and its mount, when the cache names one.
pub(super) fn ca(s3: &S3Storage) -> Option<(Volume, VolumeMount)> {
    let ca = s3.ca.as_ref()?;
    let items = |key: &str| {
        Some(vec![KeyToPath {
            key: key.to_string(),
            path: CA_FILE.into(),
            mode: None,
        }])
    };
    let volume = match (&ca.secret_key_ref, &ca.config_map_key_ref) {
        (Some(secret), _) => Volume {
            name: "s3-ca".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.name.clone()),
                items: items(&secret.key),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
        (None, Some(map)) => Volume {
            name: "s3-ca".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: map.name.clone(),
                items: items(&map.key),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        (None, None) => return None,
    };
    let mount = VolumeMount {
        name: "s3-ca".into(),
        mount_path: CA_DIR.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    };
    Some((volume, mount))
}

/// The egress the registry needs for `s3`: the endpoint's port (to its address alone when the
/// endpoint is one), and DNS to resolve a named endpoint.
pub(super) fn egress(s3: &S3Storage) -> Vec<NetworkPolicyEgressRule> {
    let Some(endpoint) = endpoint(&s3.endpoint) else {
        return Vec::new();
    };
    let port = |port: i32, protocol: &str| NetworkPolicyPort {
        port: Some(IntOrString::Int(port)),
        protocol: Some(protocol.into()),
        end_port: None,
    };
    let store = NetworkPolicyEgressRule {
        to: endpoint.host.parse::<IpAddr>().ok().map(|ip| {
            let bits = if ip.is_ipv4() { 32 } else { 128 };
            vec![NetworkPolicyPeer {
                ip_block: Some(IPBlock {
                    cidr: format!("{ip}/{bits}"),
                    except: None,
                }),
                ..NetworkPolicyPeer::default()
            }]
        }),
        ports: Some(vec![port(i32::from(endpoint.port), "TCP")]),
    };
    let named = endpoint.host.parse::<IpAddr>().is_err();
    let dns = named.then(|| NetworkPolicyEgressRule {
        to: None,
        ports: Some(vec![port(53, "UDP"), port(53, "TCP")]),
    });
    std::iter::once(store).chain(dns).collect()
}

/// At most one replica down at a time by a voluntary disruption (a drain): with two or more,
/// one keeps serving; with one, a drain is not blocked.
pub(super) fn disruption_budget(
    metadata: ObjectMeta,
    selector: &BTreeMap<String, String>,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata,
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(selector.clone()),
                match_expressions: None,
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

fn value(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

fn from_secret(name: &str, secret: &str, key: &str, optional: bool) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.into(),
                key: key.into(),
                optional: optional.then_some(true),
            }),
            ..EnvVarSource::default()
        }),
    }
}

#[cfg(test)]
mod tests;
