//! A cache on `storage.s3` against the real registry (distribution) and a real S3 store
//! (SeaweedFS from the test kit), no cluster: the registry runs with the environment the cache's
//! Deployment gives its container, exactly (only the kubelet's part done here: Secret keys filled
//! in, the htpasswd mounted at another path, the address on loopback), over a configuration file
//! with no storage health check of its own, so what is checked is ocifit's settings.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use ocifit::api::ArtifactCache;
use ocifit::artifact_cache::{CacheEnvironment, HTTP_SECRET_KEY, desired};
use ocifit_testkit::{ObjectStore, Tool, Tools, htpasswd_line};
use serde_json::json;
use sha2::{Digest as _, Sha256};

const GENERATED: &str = "oras-registry-credentials-x7k2p";
const USER: &str = "steps-push";
const PASSWORD: &str = "push-password";
/// How long a registry may take to answer, or to see its store fail (health check every 5 s, two
/// failures in a row).
const WAIT: Duration = Duration::from_secs(60);

/// A registry process, killed when dropped.
struct RunningRegistry {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Drop for RunningRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("the registry at {} logged:\n{log}", self.addr);
        }
    }
}

impl RunningRegistry {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The cache's registry environment for a bucket at `endpoint`, with the Secrets' keys filled in:
/// the store's keys (`secret_key` as given), the generated HTTP secret `http_secret`.
fn environment(
    endpoint: &str,
    bucket: &str,
    store: &ObjectStore,
    secret_key: &str,
    http_secret: &str,
) -> Vec<(String, String)> {
    let cache: ArtifactCache = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": "oras", "namespace": "workflow", "uid": "u-1"},
        "spec": {"replicas": 2, "storage": {"s3": {
            "bucket": bucket, "endpoint": endpoint, "forcePathStyle": true,
            "prefix": "/caches/oras",
            "credentialsSecretRef": {"name": "store-keys"}
        }}}
    }))
    .unwrap();
    let settings = CacheEnvironment {
        own_namespace: "ocifit-system",
        credentials: Some(GENERATED),
    };
    let desired = desired(&cache, settings).unwrap().unwrap();
    let pod = desired.deployment.spec.unwrap().template.spec.unwrap();
    let keys = BTreeMap::from([
        (("store-keys", "accessKey"), store.access_key()),
        (("store-keys", "secretKey"), secret_key),
        ((GENERATED, HTTP_SECRET_KEY), http_secret),
    ]);
    let env = pod.containers[0].env.clone().unwrap();
    env.into_iter()
        .map(|var| {
            let value = match (var.value, var.value_from) {
                (Some(value), _) => value,
                (None, Some(from)) => {
                    let key = from.secret_key_ref.unwrap();
                    keys[&(key.name.as_str(), key.key.as_str())].to_owned()
                }
                (None, None) => String::new(),
            };
            (var.name, value)
        })
        .collect()
}

/// Starts the registry with `env` over a configuration file that names only a filesystem store
/// (as distribution's image does) and no health check.
fn start(dir: &Path, name: &str, env: &[(String, String)]) -> RunningRegistry {
    let registry = Tools::locate().unwrap().path(Tool::Registry).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let config = dir.join(format!("{name}.json"));
    let data = dir.join(format!("{name}-filesystem"));
    let file = json!({
        "version": "0.1",
        "storage": {"filesystem": {"rootdirectory": data}},
        "http": {"addr": ":5000"}
    });
    std::fs::write(&config, file.to_string()).unwrap();
    let htpasswd = dir.join("htpasswd");
    std::fs::write(&htpasswd, htpasswd_line(USER, PASSWORD).unwrap()).unwrap();
    let log = dir.join(format!("{name}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let mut command = Command::new(registry);
    command
        .args(["serve".as_ref(), config.as_os_str()])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    for (key, value) in env {
        let value = match key.as_str() {
            "REGISTRY_HTTP_ADDR" => addr.clone(),
            "REGISTRY_AUTH_HTPASSWD_PATH" => htpasswd.display().to_string(),
            _ => value.clone(),
        };
        command.env(key, value);
    }
    let child = command.spawn().unwrap();
    let registry = RunningRegistry { child, addr, log };
    wait_for(&registry, "to answer", |status| status.is_some());
    registry
}

/// Waits until the status of `GET /` satisfies `done`.
fn wait_for(registry: &RunningRegistry, what: &str, done: impl Fn(Option<u16>) -> bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        let status = request(&registry.addr, "GET", "/", &[]).ok().map(|r| r.0);
        if done(status) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the registry did not come {what}: its log:\n{}",
            registry.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// One HTTP/1.1 request with the push user's basic auth: the status, the `Location` header and
/// the body.
fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> std::io::Result<(u16, Option<String>, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Basic {auth}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of headers"))?;
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let location = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("location")
            .then(|| value.trim().to_owned())
    });
    Ok((status, location, response[split + 4..].to_vec()))
}

/// The path and query of an upload's `Location` (distribution may answer with a full URL).
fn path_of(location: &str) -> String {
    match location.split_once("://") {
        Some((_, rest)) => rest[rest.find('/').unwrap_or(rest.len())..].to_owned(),
        None => location.to_owned(),
    }
}

#[tokio::test]
async fn an_upload_begun_on_one_replica_is_finished_on_the_other_and_read_back_from_the_bucket() {
    let store = ObjectStore::builder()
        .bucket("artifacts")
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = environment(
        &store.endpoint(),
        "artifacts",
        &store,
        store.secret_key(),
        "one-secret-for-every-replica",
    );
    let (one, two) = (
        start(dir.path(), "one", &env),
        start(dir.path(), "two", &env),
    );
    wait_for(&one, "ready", |status| status == Some(200));

    let first: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let last = b"the end of the artifact".to_vec();
    let whole = [first.clone(), last.clone()].concat();
    let digest = format!("sha256:{}", hex(&Sha256::digest(&whole)));

    let (status, location, _) =
        request(&one.addr, "POST", "/v2/wf/out/blobs/uploads/", &[]).unwrap();
    assert_eq!(status, 202);
    let (status, location, _) =
        request(&one.addr, "PATCH", &path_of(&location.unwrap()), &first).unwrap();
    assert_eq!(status, 202, "the first part, on one replica");
    // The other replica takes the upload over: its state is signed with the shared HTTP secret.
    let location = path_of(&location.unwrap());
    let finish = format!("{location}&digest={digest}");
    let (status, _, body) = request(&two.addr, "PUT", &finish, &last).unwrap();
    assert_eq!(
        status,
        201,
        "the rest, on the other replica: {}",
        String::from_utf8_lossy(&body)
    );
    for registry in [&one, &two] {
        let (status, _, blob) = request(
            &registry.addr,
            "GET",
            &format!("/v2/wf/out/blobs/{digest}"),
            &[],
        )
        .unwrap();
        assert_eq!(status, 200);
        assert!(blob == whole, "byte for byte from {}", registry.addr);
    }
}

/// A registry whose store fails as `env` makes it: not ready, and its log says why.
fn refused_by_the_store(env: &[(String, String)], why: &str) {
    let dir = tempfile::tempdir().unwrap();
    let registry = start(dir.path(), "registry", env);
    wait_for(&registry, "unhealthy", |status| status == Some(503));
    let log = registry.log();
    let line = log
        .lines()
        .find(|l| l.contains("storage driver health check"))
        .unwrap_or_else(|| panic!("no health check line in:\n{log}"));
    assert!(line.contains(why), "{why} in: {line}");
}

#[tokio::test]
async fn a_missing_bucket_wrong_keys_or_no_store_keep_the_registry_unready_saying_why() {
    let store = ObjectStore::builder()
        .bucket("artifacts")
        .start()
        .await
        .unwrap();
    let (endpoint, secret) = (store.endpoint(), store.secret_key());
    let missing = environment(&endpoint, "no-such-bucket", &store, secret, "s");
    refused_by_the_store(&missing, "NoSuchBucket");
    let wrong = environment(&endpoint, "artifacts", &store, "not-the-secret-key", "s");
    refused_by_the_store(&wrong, "SignatureDoesNotMatch");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let unreachable = environment(&nowhere, "artifacts", &store, secret, "s");
    refused_by_the_store(&unreachable, "connection refused");
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
