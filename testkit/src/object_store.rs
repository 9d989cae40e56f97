//! A real S3-compatible object store for the artifact cache's `storage.s3`: SeaweedFS's `weed mini`
//! (master, volume server, filer and S3 gateway in one process) on free ports of one address, its
//! data in a temporary directory, one identity (an access key and a secret key) allowed
//! everything, and the buckets it is asked for made at start. No bucket is made on demand: a
//! write to a bucket that does not exist fails, as on a real store.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::error::{Result, io};
use crate::net::{free_port_on, http_status};
use crate::process::{Process, log_tails, wait_until};
use crate::tools::{Tool, Tools};
use crate::workdir::Workdir;

/// The identity's access key.
const ACCESS_KEY: &str = "ocifit-testkit";
/// The identity's secret key.
const SECRET_KEY: &str = "ocifit-testkit-secret-key-0123456789";

/// How long the store may take to answer with its buckets made (it starts four servers).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A running store; stopped (SIGKILL) and its data removed when dropped.
pub struct ObjectStore {
    process: Process,
    address: Ipv4Addr,
    s3_port: u16,
    startup: Duration,
    _workdir: Workdir,
}

/// How to start an [`ObjectStore`].
pub struct ObjectStoreBuilder {
    address: Ipv4Addr,
    buckets: Vec<String>,
    timeout: Duration,
}

impl ObjectStore {
    /// A builder for a store on 127.0.0.1 without buckets.
    pub fn builder() -> ObjectStoreBuilder {
        ObjectStoreBuilder {
            address: Ipv4Addr::LOCALHOST,
            buckets: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The S3 endpoint, `http://HOST:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}:{}", self.address, self.s3_port)
    }

    /// The identity's access key.
    pub fn access_key(&self) -> &'static str {
        ACCESS_KEY
    }

    /// The identity's secret key.
    pub fn secret_key(&self) -> &'static str {
        SECRET_KEY
    }

    /// How long it took until the store answered with its buckets.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The last lines of the store's log.
    pub fn log_tails(&self) -> String {
        log_tails([&self.process])
    }
}

impl Drop for ObjectStore {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "ocifit-testkit: the test failed; the object store's log ends with:\n{}",
                self.log_tails()
            );
        }
        self.process.kill();
    }
}

impl ObjectStoreBuilder {
    /// Listens on `address` instead of 127.0.0.1 (a cluster with real nodes uses this machine's
    /// own address, where pods reach it).
    pub fn listen_on(mut self, address: Ipv4Addr) -> Self {
        self.address = address;
        self
    }

    /// Makes bucket `name` at start.
    pub fn bucket(mut self, name: &str) -> Self {
        self.buckets.push(name.to_owned());
        self
    }

    /// Starts the store and waits until its S3 gateway answers and its buckets exist.
    pub async fn start(self) -> Result<ObjectStore> {
        let started = Instant::now();
        let program = Tools::locate()?.path(Tool::Weed)?;
        let workdir = Workdir::create("object-store-")?;
        let data = workdir.join("data");
        std::fs::create_dir_all(&data).map_err(io("create directory", &data))?;
        let identities = workdir.join("s3.json");
        std::fs::write(&identities, identities_json().to_string())
            .map_err(io("write", &identities))?;
        let ports = Ports::free(self.address)?;
        let address = self.address.to_string();
        let mut args: Vec<OsString> = vec![
            "mini".into(),
            flag("dir", data.as_os_str()),
            flag("ip", &address),
            flag("ip.bind", &address),
            flag("s3.config", identities.as_os_str()),
            // Nothing is sent anywhere: the store reports to no one, and serves only S3.
            "-master.telemetry=false".into(),
            "-webdav=false".into(),
            "-admin.ui=false".into(),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            "-admin.port.legacy=0".into(),
            // A write to a missing bucket fails, as on a real store.
            "-s3.autoCreateBucket=false".into(),
        ];
        args.extend(ports.flags());
        if !self.buckets.is_empty() {
            args.push(flag("bucket", self.buckets.join(",")));
        }
        let mut process = Process::spawn("weed", &program, args, workdir.path())?;
        let filer = format!("http://{address}:{}", ports.filer);
        let buckets = self.buckets.clone();
        let s3 = format!("http://{address}:{}/", ports.s3);
        wait_until(
            "the object store to answer with its buckets",
            self.timeout,
            &mut [&mut process],
            || {
                let (filer, buckets, s3) = (filer.clone(), buckets.clone(), s3.clone());
                async move {
                    // The S3 gateway refuses an anonymous listing; it answers once it serves.
                    let serving = http_status(&s3).await.is_some_and(|c| c == 403);
                    let mut made = true;
                    for bucket in &buckets {
                        let url = format!("{filer}/buckets/{bucket}/");
                        made &= http_status(&url).await == Some(200);
                    }
                    serving && made
                }
            },
        )
        .await?;
        Ok(ObjectStore {
            process,
            address: self.address,
            s3_port: ports.s3,
            startup: started.elapsed(),
            _workdir: workdir,
        })
    }
}

/// The ports of the store's servers. Each is given: left out, a gRPC port would be its HTTP
/// port plus 10000, and the others fixed, which another component (or store) may hold.
struct Ports {
    master: u16,
    master_grpc: u16,
    volume: u16,
    volume_grpc: u16,
    filer: u16,
    filer_grpc: u16,
    s3: u16,
    s3_grpc: u16,
    admin: u16,
    admin_grpc: u16,
}

impl Ports {
    fn free(address: Ipv4Addr) -> Result<Ports> {
        Ok(Ports {
            master: free_port_on(address)?,
            master_grpc: free_port_on(address)?,
            volume: free_port_on(address)?,
            volume_grpc: free_port_on(address)?,
            filer: free_port_on(address)?,
            filer_grpc: free_port_on(address)?,
            s3: free_port_on(address)?,
            s3_grpc: free_port_on(address)?,
            admin: free_port_on(address)?,
            admin_grpc: free_port_on(address)?,
        })
    }

    fn flags(&self) -> Vec<OsString> {
        [
            ("master.port", self.master),
            ("master.port.grpc", self.master_grpc),
            ("volume.port", self.volume),
            ("volume.port.grpc", self.volume_grpc),
            ("filer.port", self.filer),
            ("filer.port.grpc", self.filer_grpc),
            ("s3.port", self.s3),
            ("s3.port.grpc", self.s3_grpc),
            // The admin server runs without its UI; its default ports are fixed.
            ("admin.port", self.admin),
            ("admin.port.grpc", self.admin_grpc),
        ]
        .into_iter()
        .map(|(name, port)| flag(name, port.to_string()))
        .collect()
    }
}

/// The S3 gateway's identities: one, allowed every action.
fn identities_json() -> serde_json::Value {
    serde_json::json!({
        "identities": [{
            "name": "ocifit-testkit",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]
        }]
    })
}

fn flag(name: &str, value: impl AsRef<std::ffi::OsStr>) -> OsString {
    let mut flag = OsString::from(format!("-{name}="));
    flag.push(value.as_ref());
    flag
}
