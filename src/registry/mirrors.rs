//! Registry mirrors as containerd reads them (`hosts.toml` in a `certs.d` directory): which hosts
//! a registry's requests go to, in which order, and which may resolve tags. Pure: the files' text
//! in, endpoints out; reading the directory is `mirrors/load.rs`. The subset read is
//! docs/registries.md's "Pulling through a mirror"; any other key, or `skip_verify = true`, is
//! refused with the file and key named, since a setting silently left out would make ocifit reach
//! a host otherwise than the node does.

use std::collections::BTreeMap;

use reqwest::Url;

use super::error::ConfigError;

mod load;

/// The namespace whose file serves every registry without one of its own.
const DEFAULT_NAMESPACE: &str = "_default";

/// What a host may be asked for (containerd's `capabilities`; `push` is read and never used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Capabilities {
    pub pull: bool,
    pub resolve: bool,
    pub push: bool,
}

impl Capabilities {
    /// A host without a `capabilities` key may do everything, as in containerd.
    const ALL: Capabilities = Capabilities {
        pull: true,
        resolve: true,
        push: true,
    };

    fn allow(self, need: Need) -> bool {
        match need {
            Need::Pull => self.pull,
            Need::Resolve => self.resolve,
        }
    }
}

/// What a request asks a host for: content by digest (`pull`), or a name's mapping to a digest
/// (`resolve`: a tag, or the referrers of a digest, neither of which the answer proves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Pull,
    Resolve,
}

impl Need {
    /// The capability's name in `hosts.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Need::Pull => "pull",
            Need::Resolve => "resolve",
        }
    }
}

/// One host of a `hosts.toml`: a `[host."URL"]` table, or `server`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Host {
    /// `host[:port]`.
    host: String,
    plain_http: bool,
    /// The API root requests go below (`/v2`, or a prefix the URL gave).
    root: String,
    capabilities: Capabilities,
}

/// One registry namespace's file: its hosts in the file's order, then `server` (absent: the
/// registry itself).
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostsFile {
    hosts: Vec<Host>,
    server: Option<Host>,
}

/// Where one request may go, in the order to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host[:port]`.
    pub host: String,
    /// Plain HTTP as its URL says; `None` for the registry itself, reached as
    /// `--plain-http-registry` says.
    pub plain_http: Option<bool>,
    /// The API root requests go below (`/v2` unless the URL named another).
    pub root: String,
    /// A host the admin's file named that is not the registry's own: it is told the registry
    /// (`ns=`), is sent the credentials of its own host only, and may be reached inside a
    /// network (the admin chose it, a pod cannot).
    pub mirror: bool,
}

/// Every `hosts.toml` read, by registry namespace (`host[:port]`, or `_default`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mirrors {
    files: BTreeMap<String, HostsFile>,
}

impl Mirrors {
    /// Adds the `hosts.toml` of `namespace` (a directory name: `host`, `host_port_`,
    /// `host:port` or `_default`); `file` names it in errors.
    pub fn add(&mut self, namespace: &str, file: &str, text: &str) -> Result<(), ConfigError> {
        let namespace = namespace_of(namespace);
        if self.files.contains_key(&namespace) {
            return Err(problem(file, "", "a second file for the same registry"));
        }
        self.files.insert(namespace, parse(file, text)?);
        Ok(())
    }

    /// True when no file was read: every request goes to the registry it names.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The endpoints a request to `registry` served at `api_host` tries, in order: the file's
    /// hosts that may do `need`, then its server (or the registry) if that may. `None` when no
    /// file applies; empty when the file leaves no host for `need`.
    pub fn route(&self, registry: &str, api_host: &str, need: Need) -> Option<Vec<Endpoint>> {
        let file = self
            .files
            .get(registry)
            .or_else(|| self.files.get(DEFAULT_NAMESPACE))?;
        let configured = |host: &Host| Endpoint {
            host: host.host.clone(),
            plain_http: Some(host.plain_http),
            root: host.root.clone(),
            mirror: !host.host.eq_ignore_ascii_case(api_host),
        };
        let mut endpoints: Vec<Endpoint> = file
            .hosts
            .iter()
            .filter(|host| host.capabilities.allow(need))
            .map(configured)
            .collect();
        match &file.server {
            Some(server) if server.capabilities.allow(need) => endpoints.push(configured(server)),
            Some(_) => {}
            None => endpoints.push(Endpoint {
                host: api_host.to_owned(),
                plain_http: None,
                root: "/v2".to_owned(),
                mirror: false,
            }),
        }
        Some(endpoints)
    }

    /// Every host the files name that is not a registry of its own (`host[:port]`), and whether
    /// it is plain HTTP: the hosts the fence admits when, and only when, reached as a mirror.
    pub fn hosts(&self) -> Vec<(String, bool)> {
        let mut hosts: Vec<(String, bool)> = self
            .files
            .values()
            .flat_map(|file| file.hosts.iter().chain(&file.server))
            .map(|host| (host.host.clone(), host.plain_http))
            .collect();
        hosts.sort();
        hosts.dedup();
        hosts
    }
}

/// containerd's directory names: `host_port_` (the form that works on every system) stands for
/// `host:port`.
fn namespace_of(directory: &str) -> String {
    match directory.strip_suffix('_').and_then(|d| d.rsplit_once('_')) {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
            format!("{host}:{port}")
        }
        _ => directory.to_owned(),
    }
}

fn problem(file: &str, key: &str, what: impl Into<String>) -> ConfigError {
    ConfigError::Mirrors {
        file: file.to_owned(),
        key: key.to_owned(),
        problem: what.into(),
    }
}

/// Parses one `hosts.toml`.
fn parse(file: &str, text: &str) -> Result<HostsFile, ConfigError> {
    let table: toml::Table = text.parse().map_err(|err: toml::de::Error| {
        problem(file, "", format!("not TOML: {}", err.message()))
    })?;
    let mut server = None;
    let mut hosts = Vec::new();
    for (key, value) in &table {
        match key.as_str() {
            "server" => {
                let url = value
                    .as_str()
                    .ok_or_else(|| problem(file, key, "expected a string (a URL)"))?;
                server = Some(url);
            }
            "host" => {
                let entries = value
                    .as_table()
                    .ok_or_else(|| problem(file, key, "expected tables [host.\"URL\"]"))?;
                for (url, settings) in entries {
                    let at = format!("host.\"{url}\"");
                    let settings = settings
                        .as_table()
                        .ok_or_else(|| problem(file, &at, "expected a table"))?;
                    hosts.push(host(file, &at, url, settings)?);
                }
            }
            // Read with `server`, below.
            "capabilities" | "override_path" => {}
            _ => settings_key(file, key, key, value)?,
        }
    }
    let server = match server {
        Some(url) => Some(host(file, "server", url, &table)?),
        None => {
            // Without a server the top-level settings would apply to nothing.
            if let Some(key) = ["capabilities", "override_path"]
                .into_iter()
                .find(|key| table.contains_key(*key))
            {
                return Err(problem(
                    file,
                    key,
                    "set without `server` (the registry itself may do everything)",
                ));
            }
            None
        }
    };
    Ok(HostsFile { hosts, server })
}

/// One host from its URL and the settings beside it (its table, or the file's top level for
/// `server`).
fn host(file: &str, at: &str, url: &str, settings: &toml::Table) -> Result<Host, ConfigError> {
    let mut capabilities = None;
    let mut override_path = false;
    for (key, value) in settings {
        let top = at == "server";
        let named = if top {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        match key.as_str() {
            // The top level's other keys were checked by `parse`.
            "server" | "host" | "skip_verify" if top => {}
            "capabilities" => capabilities = Some(capabilities_of(file, &named, value)?),
            "override_path" => {
                override_path = value
                    .as_bool()
                    .ok_or_else(|| problem(file, &named, "expected true or false"))?;
            }
            _ => settings_key(file, &named, key, value)?,
        }
    }
    let (host, plain_http, root) = endpoint_url(url, override_path)
        .map_err(|why| problem(file, at, format!("{url:?} {why}")))?;
    Ok(Host {
        host,
        plain_http,
        root,
        capabilities: capabilities.unwrap_or(Capabilities::ALL),
    })
}

/// A key ocifit does not act on: `skip_verify = false` (the default) is fine, containerd's other
/// settings and unknown keys are refused.
fn settings_key(file: &str, key: &str, name: &str, value: &toml::Value) -> Result<(), ConfigError> {
    let why = match name {
        "skip_verify" if value.as_bool() == Some(false) => return Ok(()),
        "skip_verify" => "is not supported: ocifit always verifies a registry's certificate",
        "ca" => "is not supported: give the CA with --ca-file (trusted for every registry)",
        "client" => "is not supported: ocifit presents no client certificate",
        "header" => "is not supported: ocifit sends no extra headers",
        "dial_timeout" => "is not supported: --registry-timeout bounds every request",
        "proxy" => "is not supported: ocifit reaches registries without a proxy",
        _ => "is not a hosts.toml key ocifit knows",
    };
    Err(problem(file, key, why))
}

fn capabilities_of(
    file: &str,
    key: &str,
    value: &toml::Value,
) -> Result<Capabilities, ConfigError> {
    let list = value
        .as_array()
        .ok_or_else(|| problem(file, key, "expected a list such as [\"pull\", \"resolve\"]"))?;
    let mut capabilities = Capabilities {
        pull: false,
        resolve: false,
        push: false,
    };
    for entry in list {
        match entry.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("pull") => capabilities.pull = true,
            Some("resolve") => capabilities.resolve = true,
            Some("push") => capabilities.push = true,
            _ => {
                let shown = entry.as_str().map_or_else(
                    || format!("of type {}", entry.type_str()),
                    |name| format!("{name:?}"),
                );
                return Err(problem(
                    file,
                    key,
                    format!("unknown capability {shown} (pull, resolve or push)"),
                ));
            }
        }
    }
    Ok(capabilities)
}

/// `host[:port]`, plain HTTP, and the API root of a host's URL, as containerd reads it: no
/// scheme is HTTPS; the path, if any, is a prefix below which `/v2` is added unless the path
/// already ends with it or `override_path` says the path is the API root itself.
fn endpoint_url(url: &str, override_path: bool) -> Result<(String, bool, String), &'static str> {
    let full = if url.contains("://") {
        url.to_owned()
    } else {
        format!("https://{url}")
    };
    let parsed = Url::parse(&full).map_err(|_| "is not a URL")?;
    let plain_http = match parsed.scheme() {
        "https" => false,
        "http" => true,
        _ => return Err("is not an http:// or https:// URL"),
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("carries credentials");
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err("has a query or fragment");
    }
    let host = match (parsed.host_str(), parsed.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        (None, _) => return Err("names no host"),
    };
    let path = parsed.path().trim_end_matches('/');
    let root = if override_path || path.ends_with("/v2") {
        path.to_owned()
    } else {
        format!("{path}/v2")
    };
    Ok((host, plain_http, root))
}

#[cfg(test)]
mod tests;
