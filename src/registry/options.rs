//! Everything a registry client can be told ([`RegistryOptions`]), read by the client (caches,
//! read limits) and by its transport (where requests may go, how long they take, how many run at
//! once); and the options the command line's registry flags make ([`RegistryFlags`]:
//! `--plain-http`, `--docker-config FILE`, `--ca-file FILE`, `--allowed-registries`), reading the
//! named files. The room's only other file I/O is `mirrors/load` (`--registry-mirrors-dir`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::addresses::PrivateRegistries;
use super::allow::AllowList;
use super::cache::CacheOptions;
use super::docker_config::DockerConfig;
use super::error::{ConfigError, Error};
use super::mirrors::Mirrors;
use super::reference::Reference;
use super::retry::Restarts;
use super::retry::RetryPolicy;

/// Everything the client can be told. `Default` is anonymous HTTPS with the documented limits.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Registries (`host[:port]`, exactly as in references) reached over plain HTTP. Only
    /// registries named here; every other one is HTTPS.
    pub plain_http: Vec<String>,
    /// The registries that may be reached (`--allowed-registries`); empty allows every one.
    pub allowed: AllowList,
    /// The hosts and networks inside a network that may be reached
    /// (`--allowed-private-registries`); empty (the default) allows none.
    pub private: PrivateRegistries,
    /// Credentials, matched per image as the kubelet matches them.
    pub credentials: DockerConfig,
    /// The hosts each registry's reads go to first (`--registry-mirrors-dir`); empty: none.
    pub mirrors: Mirrors,
    /// Extra trusted CA certificates (PEM bundles), added to the system roots.
    pub extra_ca_pem: Vec<Vec<u8>>,
    /// Limit for one whole request (connect, headers and body).
    pub request_timeout: Duration,
    /// Limit for establishing a connection.
    pub connect_timeout: Duration,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// Tries of a push or pull that broke off mid-transfer, each started again whole (a blob
    /// download resumes where it stopped).
    pub restarts: Restarts,
    /// Most registry requests in flight at once, over every client made from this one (a policy
    /// naming many images waits for permits rather than opening as many connections).
    pub max_concurrent_requests: usize,
    /// Largest compatibility artifact layer read.
    pub max_artifact_bytes: u64,
    /// Largest manifest, index or image config read.
    pub max_manifest_bytes: u64,
    /// Cache lifetimes and size.
    pub cache: CacheOptions,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            plain_http: Vec::new(),
            allowed: AllowList::default(),
            private: PrivateRegistries::default(),
            credentials: DockerConfig::default(),
            mirrors: Mirrors::default(),
            extra_ca_pem: Vec::new(),
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            retry: RetryPolicy::default(),
            restarts: Restarts::default(),
            max_concurrent_requests: 16,
            max_artifact_bytes: 1024 * 1024,
            max_manifest_bytes: 4 * 1024 * 1024,
            cache: CacheOptions::default(),
        }
    }
}

/// The registry flags of `ocifit resolve`, spelled as ORAS spells them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryFlags {
    /// Reach the artifact's registry over plain HTTP (only that registry).
    pub plain_http: bool,
    /// A docker config (`~/.docker/config.json` or a dockerconfigjson) with credentials.
    pub docker_config: Option<PathBuf>,
    /// A PEM file of extra CA certificates to trust.
    pub ca_file: Option<PathBuf>,
    /// Registry host patterns that may be reached (`HOST[:PORT]`, `*.DOMAIN[:PORT]`); empty
    /// allows every registry.
    pub allowed_registries: Vec<String>,
}

impl RegistryFlags {
    /// Client options for fetching `reference`: plain HTTP only for its registry when asked; its
    /// registry reached whatever it resolves to (the command line chose it), every other host
    /// (realms, redirects, the images an artifact names elsewhere) behind the fence.
    pub fn options_for(&self, reference: &Reference) -> Result<RegistryOptions, Error> {
        let mut options = RegistryOptions {
            allowed: AllowList::parse(&self.allowed_registries)?,
            private: PrivateRegistries::registries_of(&[reference]),
            ..RegistryOptions::default()
        };
        if self.plain_http {
            options.plain_http.push(reference.registry().to_string());
        }
        if let Some(path) = &self.docker_config {
            options.credentials = DockerConfig::from_json(&read(path)?)?;
        }
        if let Some(path) = &self.ca_file {
            options.extra_ca_pem.push(read_ca_file(path)?);
        }
        Ok(options)
    }
}

/// A `--ca-file`: PEM certificates to trust besides the system's; a file without one is refused.
pub fn read_ca_file(path: &Path) -> Result<Vec<u8>, Error> {
    let pem = read(path)?;
    if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err(ConfigError::NoCertificate(path.display().to_string()).into());
    }
    Ok(pem)
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|err| {
        ConfigError::ReadFile {
            path: path.display().to_string(),
            message: err.to_string(),
        }
        .into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::reference::parse;

    fn temp(dir: &tempfile::TempDir, name: &str, content: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    #[test]
    fn plain_http_names_only_the_artifact_registry() {
        let flags = RegistryFlags {
            plain_http: true,
            ..RegistryFlags::default()
        };
        let options = flags
            .options_for(&parse("127.0.0.1:5000/a/b:v1").unwrap())
            .unwrap();
        assert_eq!(options.plain_http, vec!["127.0.0.1:5000".to_string()]);
        let https = RegistryFlags::default()
            .options_for(&parse("127.0.0.1:5000/a").unwrap())
            .unwrap();
        assert!(https.plain_http.is_empty());
    }

    #[test]
    fn allowed_registries_are_parsed_and_a_bad_pattern_is_a_config_error() {
        let flags = RegistryFlags {
            allowed_registries: vec!["r.example.com".into(), "*.example.org".into()],
            ..RegistryFlags::default()
        };
        let options = flags
            .options_for(&parse("r.example.com/a").unwrap())
            .unwrap();
        assert!(options.allowed.allows("a.example.org"));
        assert!(!options.allowed.allows("other.example.com"));
        let bad = RegistryFlags {
            allowed_registries: vec!["https://r.example.com".into()],
            ..RegistryFlags::default()
        };
        let err = bad.options_for(&parse("a").unwrap()).unwrap_err();
        assert!(
            matches!(err, Error::Config(ConfigError::AllowedRegistry { .. })),
            "{err}"
        );
    }

    #[test]
    fn docker_config_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = temp(
            &dir,
            "config.json",
            r#"{"auths":{"r.example.com":{"username":"u","password":"p"}}}"#,
        );
        let flags = RegistryFlags {
            docker_config: Some(path),
            ..RegistryFlags::default()
        };
        let options = flags
            .options_for(&parse("r.example.com/a").unwrap())
            .unwrap();
        assert!(options.credentials.lookup("r.example.com", "a").is_some());
    }

    #[test]
    fn missing_files_and_non_pem_ca_files_are_config_errors_naming_the_file() {
        let flags = RegistryFlags {
            docker_config: Some(PathBuf::from("/nonexistent/ocifit/config.json")),
            ..RegistryFlags::default()
        };
        let err = flags.options_for(&parse("a").unwrap()).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/ocifit/config.json"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let ca = temp(&dir, "ca.pem", "not a certificate");
        let flags = RegistryFlags {
            ca_file: Some(ca.clone()),
            ..RegistryFlags::default()
        };
        let err = flags.options_for(&parse("a").unwrap()).unwrap_err();
        assert!(
            matches!(err, Error::Config(ConfigError::NoCertificate(_))),
            "{err}"
        );
        assert!(err.to_string().contains(&ca.display().to_string()));
    }
}
