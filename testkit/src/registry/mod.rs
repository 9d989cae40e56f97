//! A throwaway OCI registry on loopback (distribution's `registry serve` with a configuration written
//! here, optionally behind htpasswd basic auth), with regctl and crane configured for it in their own
//! config directories so nothing reads or writes the user's credentials. Pushing content with the
//! real clients lives in `artifacts` and `images`.

mod artifacts;
mod candidates;
mod images;

pub(crate) use artifacts::sha256_digest;
pub use artifacts::{Descriptor, OrasArtifact, oras_sdk_pull};
pub use candidates::Candidates;
pub use images::PushedImage;

use std::ffi::{OsStr, OsString};
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::command::Invocation;
use crate::error::{Error, Result, io};
use crate::net::{free_port_on, http_status};
use crate::process::{Process, log_tails, wait_until};
use crate::tools::{Tool, Tools};
use crate::workdir::Workdir;

/// How long the registry may take to answer by default.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// bcrypt's lowest cost: the registry checks the password on every request.
const BCRYPT_COST: u32 = 4;

/// One htpasswd line (bcrypt, as distribution reads it) for `username` and `password`.
pub fn htpasswd_line(username: &str, password: &str) -> Result<String> {
    let hash = bcrypt::hash(password, BCRYPT_COST).map_err(|e| Error::Format {
        action: "hash the registry password".into(),
        message: e.to_string(),
    })?;
    Ok(format!("{username}:{hash}\n"))
}

/// A user name and password for the registry's basic auth.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

/// How to start a registry; see [`Registry::builder`].
#[derive(Clone, Debug)]
pub struct RegistryBuilder {
    credentials: Option<Credentials>,
    address: Ipv4Addr,
    timeout: Duration,
    bucket: Option<Bucket>,
}

/// A bucket of an S3 store to keep content in, instead of the registry's own directory.
#[derive(Clone, Debug)]
struct Bucket {
    endpoint: String,
    name: String,
    access_key: String,
    secret_key: String,
}

/// The HTTP secret every registry of the kit on object storage shares, as a cache's replicas do:
/// an upload begun on one is finished on another.
const SHARED_HTTP_SECRET: &str = "ocifit-testkit-shared-upload-secret";

/// A running registry. Dropping it kills it and removes its storage; when dropped during a panic it
/// first prints the end of its log.
pub struct Registry {
    process: Process,
    addr: String,
    credentials: Option<Credentials>,
    tools: Tools,
    client_env: Vec<(&'static str, OsString)>,
    startup: Duration,
    workdir: Workdir,
}

impl Registry {
    /// A builder for a registry without authentication.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder {
            credentials: None,
            address: Ipv4Addr::LOCALHOST,
            timeout: DEFAULT_TIMEOUT,
            bucket: None,
        }
    }

    /// `HOST:PORT`: `127.0.0.1:PORT`, or this machine's own address in a cluster with real nodes.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// `HOST:PORT/<path>`, e.g. `reference("app:v1")`.
    pub fn reference(&self, path: &str) -> String {
        format!("{}/{path}", self.addr)
    }

    /// The basic-auth credentials, if the registry requires them.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// How long it took until the registry answered.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The registry's directory (storage, configuration, client configuration), removed with it.
    pub fn dir(&self) -> &Path {
        self.workdir.path()
    }

    /// Freezes the registry process (SIGSTOP): connections are accepted by the kernel but never
    /// answered, as with a registry that hangs. [`Registry::resume`] thaws it.
    pub fn pause(&self) -> Result<()> {
        self.process.signal("STOP")?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.process.is_stopped() {
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: "the registry to stop after SIGSTOP".to_owned(),
                    timeout: Duration::from_secs(5),
                    log_tails: self.log_tails(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Thaws a paused registry (SIGCONT).
    pub fn resume(&self) -> Result<()> {
        self.process.signal("CONT")
    }

    /// The last lines of the registry's log.
    pub fn log_tails(&self) -> String {
        log_tails([&self.process])
    }

    /// Runs `regctl` configured for this registry (plain HTTP, credentials); its stdout.
    pub async fn regctl<I, S>(&self, args: I) -> Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.client(Tool::Regctl, args)?.run().await
    }

    /// Runs `crane --insecure` configured for this registry; its stdout.
    pub async fn crane<I, S>(&self, args: I) -> Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.client(Tool::Crane, args)?.run().await
    }

    fn client<I, S>(&self, tool: Tool, args: I) -> Result<Invocation<'static>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let insecure = (tool == Tool::Crane).then_some(OsString::from("--insecure"));
        let mut invocation = Invocation::new(self.tools.path(tool)?)
            .args(insecure)
            .args(args.into_iter().map(|a| a.as_ref().to_owned()));
        for (key, value) in &self.client_env {
            invocation = invocation.env(key, value.clone());
        }
        Ok(invocation)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "ocifit-testkit: the test failed; the registry's log ends with:\n{}",
                self.log_tails()
            );
        }
    }
}

impl RegistryBuilder {
    /// Requires basic auth (htpasswd, bcrypt) with these credentials; the kit's clients log in.
    pub fn with_basic_auth(mut self, username: &str, password: &str) -> Self {
        self.credentials = Some(Credentials {
            username: username.to_owned(),
            password: password.to_owned(),
        });
        self
    }

    /// Listens on `address` instead of 127.0.0.1 (a cluster with real nodes uses this machine's own
    /// address, where pods and the nodes' containerd reach it).
    pub fn listen_on(mut self, address: Ipv4Addr) -> Self {
        self.address = address;
        self
    }

    /// Keeps the content in `bucket` of `store` (distribution's S3 driver, path-style, blobs
    /// served by the registry rather than redirected), with the HTTP secret every such registry
    /// of the kit shares: several started on one bucket are replicas of one registry.
    pub fn object_store(mut self, store: &crate::ObjectStore, bucket: &str) -> Self {
        self.bucket = Some(Bucket {
            endpoint: store.endpoint(),
            name: bucket.to_owned(),
            access_key: store.access_key().to_owned(),
            secret_key: store.secret_key().to_owned(),
        });
        self
    }

    /// How long the registry may take to answer (default 30 s).
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Starts the registry, waits until it answers and configures regctl and crane for it.
    pub async fn start(self) -> Result<Registry> {
        let started = Instant::now();
        let tools = Tools::locate()?;
        let program = tools.path(Tool::Registry)?;
        tools.path(Tool::Regctl)?;
        tools.path(Tool::Crane)?;
        let workdir = Workdir::create("registry-")?;
        let addr = format!("{}:{}", self.address, free_port_on(self.address)?);
        let config = self.write_config(&workdir, &addr)?;
        let mut process = Process::spawn(
            "registry",
            &program,
            vec!["serve".into(), config.into_os_string()],
            workdir.path(),
        )?;
        let url = format!("http://{addr}/v2/");
        wait_until(
            "the registry to answer",
            self.timeout,
            &mut [&mut process],
            || async { matches!(http_status(&url).await, Some(200 | 401)) },
        )
        .await?;
        let client_env = vec![
            (
                "REGCTL_CONFIG",
                workdir.join("regctl.json").into_os_string(),
            ),
            ("DOCKER_CONFIG", workdir.join("docker").into_os_string()),
        ];
        let mut registry = Registry {
            process,
            addr,
            credentials: self.credentials,
            tools,
            client_env,
            startup: Duration::ZERO,
            workdir,
        };
        registry.configure_clients().await?;
        registry.startup = started.elapsed();
        Ok(registry)
    }

    fn write_config(&self, workdir: &Workdir, addr: &str) -> Result<std::path::PathBuf> {
        let storage = workdir.join("storage");
        let mut config = serde_json::json!({
            "version": "0.1",
            "log": {"level": "info"},
            "storage": {
                "filesystem": {"rootdirectory": storage},
                "delete": {"enabled": true},
            },
            "http": {"addr": addr},
        });
        if let Some(bucket) = &self.bucket {
            config["storage"] = serde_json::json!({
                "s3": {
                    "regionendpoint": bucket.endpoint, "region": "us-east-1",
                    "bucket": bucket.name, "forcepathstyle": true,
                    "accesskey": bucket.access_key, "secretkey": bucket.secret_key,
                },
                "redirect": {"disable": true},
                "delete": {"enabled": true},
            });
            config["http"]["secret"] = SHARED_HTTP_SECRET.into();
        }
        if let Some(credentials) = &self.credentials {
            let htpasswd = workdir.join("htpasswd");
            std::fs::write(
                &htpasswd,
                htpasswd_line(&credentials.username, &credentials.password)?,
            )
            .map_err(io("write", &htpasswd))?;
            config["auth"] = serde_json::json!({
                "htpasswd": {"realm": "ocifit-test", "path": htpasswd},
            });
        }
        let yaml = serde_saphyr::to_string(&config).map_err(|e| Error::Format {
            action: "write the registry configuration".into(),
            message: e.to_string(),
        })?;
        let path = workdir.join("config.yml");
        std::fs::write(&path, yaml).map_err(io("write", &path))?;
        Ok(path)
    }
}

impl Registry {
    /// Points regctl at plain HTTP and logs both clients in.
    async fn configure_clients(&self) -> Result<()> {
        // No connectivity check yet: behind auth it fails until the login below.
        self.regctl([
            "registry",
            "set",
            "--skip-check",
            "--tls",
            "disabled",
            &self.addr,
        ])
        .await?;
        if let Some(credentials) = &self.credentials {
            let login = |user: &'static str, pass: &'static str| {
                vec![
                    self.addr.clone(),
                    user.to_owned(),
                    credentials.username.clone(),
                    pass.to_owned(),
                    credentials.password.clone(),
                ]
            };
            let mut regctl = vec!["registry".to_owned(), "login".to_owned()];
            regctl.extend(login("--user", "--pass"));
            self.regctl(regctl).await?;
            let mut crane = vec!["auth".to_owned(), "login".to_owned()];
            crane.extend(login("--username", "--password"));
            self.crane(crane).await?;
        }
        Ok(())
    }
}
