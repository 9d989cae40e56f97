//! Registry credentials from a docker config (`~/.docker/config.json`, or a Kubernetes
//! `kubernetes.io/dockerconfigjson` / legacy `dockercfg` secret), matched to an image the way the
//! kubelet matches them. Pure: no I/O. Credentials never appear in `Debug` output or errors.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::error::ConfigError;

/// The key Docker writes for Docker Hub, and the kubelet's fallback for Docker Hub images.
const DEFAULT_REGISTRY_HOST: &str = "index.docker.io";

/// How to authenticate to one registry.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// Username and password (or token as password), sent as Basic or exchanged for a bearer token.
    Basic { username: String, password: String },
    /// A registry token sent as a bearer token as is.
    Bearer(String),
    /// An OAuth2 refresh token (docker's `identitytoken`): exchanged at the token endpoint with
    /// the `refresh_token` grant for an access token, never sent to the registry itself.
    IdentityToken(String),
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
            Credentials::Bearer(_) => f.debug_tuple("Bearer").field(&"<redacted>").finish(),
            Credentials::IdentityToken(_) => {
                f.debug_tuple("IdentityToken").field(&"<redacted>").finish()
            }
        }
    }
}

impl Credentials {
    /// A fingerprint that tells credentials apart without holding them (never 0, which stands
    /// for anonymous access): caches are scoped by it.
    pub(crate) fn fingerprint(&self) -> u128 {
        let mut hasher = Sha256::new();
        match self {
            Credentials::Basic { username, password } => {
                hasher.update(b"basic\0");
                hasher.update(username.as_bytes());
                hasher.update(b"\0");
                hasher.update(password.as_bytes());
            }
            Credentials::Bearer(token) => {
                hasher.update(b"bearer\0");
                hasher.update(token.as_bytes());
            }
            Credentials::IdentityToken(token) => {
                hasher.update(b"identity\0");
                hasher.update(token.as_bytes());
            }
        }
        let digest = hasher.finalize();
        let mut first = [0u8; 16];
        first.copy_from_slice(&digest[..16]);
        u128::from_be_bytes(first).max(1)
    }
}

/// Credentials keyed by registry host (and optional path), looked up per image.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct DockerConfig {
    /// Kubelet keys (`host[:port][/path]`), most specific first.
    entries: Vec<(String, Credentials)>,
}

impl fmt::Debug for DockerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(key, _)| key))
            .finish()
    }
}

#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

impl DockerConfig {
    /// Parses a docker config: `{"auths": {...}}` (config.json, dockerconfigjson) or the legacy
    /// `dockercfg` map of the same entries without `auths`. Entries without usable credentials
    /// are skipped, as the kubelet skips them.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ConfigError> {
        let value: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|err| ConfigError::DockerConfig(format!("not JSON: {err}")))?;
        let auths = match value.get("auths") {
            Some(auths) => auths.clone(),
            // The legacy `dockercfg` is a map of registry to entry; a config.json without
            // `auths` (only `credsStore`, `currentContext`, …) has no entries.
            None if is_legacy_dockercfg(&value) => value,
            None => serde_json::Value::Object(serde_json::Map::new()),
        };
        let auths: BTreeMap<String, AuthEntry> = serde_json::from_value(auths).map_err(|err| {
            ConfigError::DockerConfig(format!("expected a map of registry to auth entry: {err}"))
        })?;
        let mut entries = Vec::new();
        for (location, entry) in auths {
            let Some(credentials) = credentials(&entry)? else {
                continue;
            };
            entries.push((key_for(&location), credentials));
        }
        // Reverse order puts "quay.io/acme" before "quay.io", so more specific keys win.
        entries.sort_by(|a, b| b.0.cmp(&a.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        Ok(DockerConfig { entries })
    }

    /// A config holding `credentials` for every repository of `registry` (`host[:port]`, as in
    /// references): how a caller that chose the credentials itself builds a client for them.
    pub fn for_registry(registry: &str, credentials: Credentials) -> Self {
        DockerConfig {
            entries: vec![(registry.to_string(), credentials)],
        }
    }

    /// This config with `credentials` for every repository of `registry` ahead of its own
    /// entries: what the caller chose (a flag, the environment, a credential helper) wins.
    pub fn with_first(mut self, registry: &str, credentials: Credentials) -> Self {
        self.entries.insert(0, (registry.to_string(), credentials));
        self
    }

    /// True when the config has no credentials at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The credentials for an image `registry/repository`, matched as the kubelet does (host
    /// globs, equal ports and label counts, key path a prefix of the repository); Docker Hub
    /// images fall back to the `index.docker.io` entry.
    pub fn lookup(&self, registry: &str, repository: &str) -> Option<&Credentials> {
        let image = format!("{registry}/{repository}");
        let found = self
            .entries
            .iter()
            .find(|(key, _)| urls_match(key, &image))
            .map(|(_, creds)| creds);
        found.or_else(|| {
            is_default_registry(registry)
                .then(|| {
                    self.entries
                        .iter()
                        .find(|(key, _)| key == DEFAULT_REGISTRY_HOST)
                        .map(|(_, creds)| creds)
                })
                .flatten()
        })
    }
}

fn credentials(entry: &AuthEntry) -> Result<Option<Credentials>, ConfigError> {
    if let Some(token) = entry.registrytoken.as_ref().filter(|t| !t.is_empty()) {
        return Ok(Some(Credentials::Bearer(token.clone())));
    }
    // Docker writes the refresh token beside an `auth` whose user is often `<token>`: the token
    // is what authenticates, as with docker itself.
    if let Some(token) = entry.identitytoken.as_ref().filter(|t| !t.is_empty()) {
        return Ok(Some(Credentials::IdentityToken(token.clone())));
    }
    if let (Some(username), Some(password)) = (&entry.username, &entry.password)
        && !username.is_empty()
    {
        return Ok(Some(Credentials::Basic {
            username: username.clone(),
            password: password.clone(),
        }));
    }
    let Some(auth) = entry.auth.as_ref().filter(|a| !a.is_empty()) else {
        return Ok(None);
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .map_err(|_| ConfigError::DockerConfig("an \"auth\" field is not valid base64".into()))?;
    let text = String::from_utf8(decoded)
        .map_err(|_| ConfigError::DockerConfig("an \"auth\" field is not UTF-8".into()))?;
    let (username, password) = text.split_once(':').ok_or_else(|| {
        ConfigError::DockerConfig("an \"auth\" field is not base64 of user:password".into())
    })?;
    Ok(Some(Credentials::Basic {
        username: username.to_string(),
        password: password.to_string(),
    }))
}

/// Whether a config without `auths` is the legacy `dockercfg` map: every value an entry object.
fn is_legacy_dockercfg(value: &serde_json::Value) -> bool {
    value
        .as_object()
        .is_some_and(|map| map.values().all(serde_json::Value::is_object))
}

/// The kubelet's key for a config location: scheme dropped, `/v1/` or `/v2/` path prefix
/// dropped, host plus the remaining path.
fn key_for(location: &str) -> String {
    let rest = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let path = if path.starts_with("/v1/") || path.starts_with("/v2/") {
        &path[3..]
    } else {
        path
    };
    if path.is_empty() || path == "/" {
        host.to_string()
    } else {
        format!("{host}{path}")
    }
}

fn split_host_path(s: &str) -> (&str, &str) {
    match s.find('/') {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

fn split_port(host: &str) -> (&str, &str) {
    match host.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            (name, port)
        }
        _ => (host, ""),
    }
}

/// The kubelet's `URLsMatch`: does the key (a glob) cover the image?
fn urls_match(key: &str, image: &str) -> bool {
    let (key_host, key_path) = split_host_path(key);
    let (image_host, image_path) = split_host_path(image);
    let (key_name, key_port) = split_port(key_host);
    let (image_name, image_port) = split_port(image_host);
    if key_port != image_port || !image_path.starts_with(key_path) {
        return false;
    }
    let key_labels: Vec<&str> = key_name.split('.').collect();
    let image_labels: Vec<&str> = image_name.split('.').collect();
    key_labels.len() == image_labels.len()
        && key_labels
            .iter()
            .zip(&image_labels)
            .all(|(glob, label)| glob_match(glob.as_bytes(), label.as_bytes()))
}

/// Shell-style match of one host label: `*` any run of characters, `?` any one character.
fn glob_match(glob: &[u8], text: &[u8]) -> bool {
    match glob.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| glob_match(rest, &text[skip..])),
        Some((b'?', rest)) => !text.is_empty() && glob_match(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && glob_match(rest, &text[1..]),
    }
}

/// The kubelet's `isDefaultRegistryMatch`, given the reference's registry.
fn is_default_registry(registry: &str) -> bool {
    registry == "docker.io" || registry == DEFAULT_REGISTRY_HOST
}

#[cfg(test)]
mod tests;
