//! An in-process fake OCI registry, for what the real registry cannot do here: the native
//! referrers API, the bearer-token flow, 429 and 5xx answers, and never answering. Minimal
//! HTTP/1.1 over a loopback socket, one request per connection.

// Test support: a failed setup fails the test at once.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCIFIT_LAYER: &str = "application/vnd.oci.image.compatibilities.v1+json";
pub const NFD_ARTIFACT: &str = "application/vnd.nfd.image-compatibility.v1alpha1";
pub const NFD_LAYER: &str = "application/vnd.nfd.image-compatibility.spec.v1alpha1+yaml";

#[derive(Debug, Clone)]
pub struct FakeRequest {
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
    /// The body, read by its Content-Length (a token request's form).
    pub body: Vec<u8>,
}

impl FakeRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

#[derive(Debug, Clone, Default)]
pub struct FakeResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Wait this long before answering.
    pub delay: Duration,
}

impl FakeResponse {
    pub fn status(status: u16) -> Self {
        FakeResponse {
            status,
            ..FakeResponse::default()
        }
    }
    pub fn ok(content_type: &str, body: Vec<u8>) -> Self {
        FakeResponse {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body,
            ..FakeResponse::default()
        }
    }
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

type Handler = dyn Fn(&FakeRequest) -> FakeResponse + Send + Sync;

pub struct FakeRegistry {
    /// `127.0.0.1:PORT`
    pub host: String,
    pub requests: Arc<Mutex<Vec<FakeRequest>>>,
    /// Connections accepted, whether or not a request followed.
    pub connections: Arc<AtomicUsize>,
}

impl FakeRegistry {
    /// Serves every request with `handler`.
    pub async fn start(
        handler: impl Fn(&FakeRequest) -> FakeResponse + Send + Sync + 'static,
    ) -> Self {
        Self::start_with(handler, |socket| async move { Some(socket) }).await
    }

    /// Serves every request with `handler`, each connection first wrapped by `wrap` (e.g. TLS).
    pub async fn start_with<S, W, Fut>(
        handler: impl Fn(&FakeRequest) -> FakeResponse + Send + Sync + 'static,
        wrap: W,
    ) -> Self
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        W: Fn(TcpStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<S>> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let requests: Arc<Mutex<Vec<FakeRequest>>> = Arc::default();
        let handler: Arc<Handler> = Arc::new(handler);
        let log = Arc::clone(&requests);
        let connections: Arc<AtomicUsize> = Arc::default();
        let accepted = Arc::clone(&connections);
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                accepted.fetch_add(1, Ordering::SeqCst);
                let handler = Arc::clone(&handler);
                let log = Arc::clone(&log);
                let wrapped = wrap(socket);
                tokio::spawn(async move {
                    if let Some(stream) = wrapped.await {
                        serve(stream, &*handler, &log).await;
                    }
                });
            }
        });
        FakeRegistry {
            host,
            requests,
            connections,
        }
    }

    /// Accepts connections and never answers.
    pub async fn silent() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        FakeRegistry {
            host,
            requests: Arc::default(),
            connections: Arc::default(),
        }
    }

    /// How many requests had exactly this method and path.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.method == method && r.path == path)
            .count()
    }

    pub fn total(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

/// Reads one request from `stream`, answers it with `handler`, and closes.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    handler: &Handler,
    log: &Mutex<Vec<FakeRequest>>,
) {
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read);
    let mut first = String::new();
    if lines.read_line(&mut first).await.unwrap_or(0) == 0 {
        return;
    }
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        if lines.read_line(&mut line).await.unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length.min(1024 * 1024)];
    if lines.read_exact(&mut body).await.is_err() {
        return;
    }
    let request = FakeRequest {
        method,
        path,
        headers,
        body,
    };
    log.lock().unwrap().push(request.clone());
    let response = handler(&request);
    tokio::time::sleep(response.delay).await;
    let mut out = format!(
        "HTTP/1.1 {} X\r\nConnection: close\r\nContent-Length: {}\r\n",
        response.status,
        response.body.len()
    );
    for (k, v) in &response.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    if request.method != "HEAD" {
        bytes.extend_from_slice(&response.body);
    }
    let _ = write.write_all(&bytes).await;
    let _ = write.shutdown().await;
}

/// A docker config with a username and password for `host`.
pub fn docker_config(host: &str, user: &str, password: &str) -> ocifit::registry::DockerConfig {
    let json =
        format!(r#"{{"auths":{{"{host}":{{"username":"{user}","password":"{password}"}}}}}}"#);
    ocifit::registry::DockerConfig::from_json(json.as_bytes()).unwrap()
}

pub fn digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// A repository's manifests (by tag and digest) and blobs.
#[derive(Debug, Clone, Default)]
pub struct Store {
    pub manifests: HashMap<String, (String, Vec<u8>)>,
    pub blobs: HashMap<String, Vec<u8>>,
}

impl Store {
    /// Adds an image `app` tagged `tag` (one tar layer); returns the manifest digest.
    pub fn image(&mut self, tag: &str) -> String {
        let layer = "application/vnd.oci.image.layer.v1.tar";
        self.artifact(Some(tag), None, layer, b"img", serde_json::json!({}))
    }

    /// Adds an untagged NFD artifact with `content`; returns the manifest digest.
    pub fn nfd(&mut self, content: &[u8]) -> String {
        let nfd = Some(NFD_ARTIFACT);
        self.artifact(None, nfd, NFD_LAYER, content, serde_json::json!({}))
    }

    /// Adds an artifact (one layer), tagged if `tag` is given; returns the manifest digest.
    pub fn artifact(
        &mut self,
        tag: Option<&str>,
        artifact_type: Option<&str>,
        layer_type: &str,
        content: &[u8],
        extra: serde_json::Value,
    ) -> String {
        let layer = digest(content);
        self.blobs.insert(layer.clone(), content.to_vec());
        self.blobs.insert(digest(b"{}"), b"{}".to_vec());
        let mut manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest(b"{}"), "size": 2},
            "layers": [{"mediaType": layer_type, "digest": layer, "size": content.len()}],
        });
        if let Some(t) = artifact_type {
            manifest["artifactType"] = t.into();
        }
        if let serde_json::Value::Object(extra) = extra {
            for (k, v) in extra {
                manifest[k] = v;
            }
        }
        self.manifest(tag, OCI_MANIFEST, serde_json::to_vec(&manifest).unwrap())
    }

    pub fn manifest(&mut self, tag: Option<&str>, media_type: &str, body: Vec<u8>) -> String {
        let d = digest(&body);
        self.manifests
            .insert(d.clone(), (media_type.into(), body.clone()));
        if let Some(tag) = tag {
            self.manifests.insert(tag.into(), (media_type.into(), body));
        }
        d
    }

    /// Serves `/v2/<repo>/manifests/<ref>` and `/v2/<repo>/blobs/<digest>`; 404 otherwise.
    pub fn serve(&self, request: &FakeRequest) -> FakeResponse {
        if let Some((_, reference)) = request.path.split_once("/manifests/") {
            return match self.manifests.get(reference) {
                Some((media_type, body)) => FakeResponse::ok(media_type, body.clone())
                    .header("Docker-Content-Digest", &digest(body)),
                None => not_found("MANIFEST_UNKNOWN"),
            };
        }
        if let Some((_, d)) = request.path.split_once("/blobs/") {
            return match self.blobs.get(d) {
                Some(body) => FakeResponse::ok("application/octet-stream", body.clone()),
                None => not_found("BLOB_UNKNOWN"),
            };
        }
        not_found("NAME_UNKNOWN")
    }
}

pub fn not_found(code: &str) -> FakeResponse {
    FakeResponse::ok(
        "application/json",
        format!(r#"{{"errors":[{{"code":"{code}","message":"unknown"}}]}}"#).into_bytes(),
    )
    .with_status(404)
}

impl FakeResponse {
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }
}
