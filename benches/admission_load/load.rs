//! The load generator: keep-alive HTTPS connections (rustls, trusting only the run's CA) sending
//! AdmissionReviews to a route (`POST /mutate`, `POST /placement`), either at a fixed rate (open loop) or as fast as answers
//! come back (closed loop), with latencies in an HDR histogram.
//!
//! Open loop, as wrk2 does it: request `i` is due at `start + i / rate`, whatever happened to the
//! ones before, and its latency runs from that due time to the end of its answer. A server that
//! stalls therefore shows the whole queue it caused instead of one slow request (coordinated
//! omission). Due times are kept by a pacing thread sleeping on the OS clock (tokio's timer has
//! millisecond granularity, as coarse as the target), which hands each due request to connection
//! `i mod N`; a busy connection queues it, and the wait counts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::TlsConnector;

/// Latencies above this many microseconds are clamped (a minute: nothing real gets there).
const HIGHEST_MICROS: u64 = 60_000_000;

/// Where to send, and how to trust the answer.
#[derive(Clone)]
pub struct Target {
    pub address: std::net::SocketAddr,
    pub connector: TlsConnector,
    /// The route requests are sent to (`/mutate`, `/placement`).
    pub path: &'static str,
}

impl Target {
    /// `path` at `address`, whose certificate must chain to `ca_pem` and name 127.0.0.1.
    pub fn new(address: std::net::SocketAddr, ca_pem: &str, path: &'static str) -> Result<Target> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(ca_pem.as_bytes())?)?;
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Target {
            address,
            connector: TlsConnector::from(Arc::new(config)),
            path,
        })
    }

    /// One keep-alive HTTP/1.1 connection, TLS handshake done.
    pub async fn connect(&self) -> Result<SendRequest<Full<Bytes>>> {
        let tcp = TcpStream::connect(self.address).await?;
        tcp.set_nodelay(true)?;
        let name = ServerName::IpAddress(self.address.ip().into());
        let tls = self.connector.connect(name, tcp).await?;
        let (sender, connection) = http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(connection);
        Ok(sender)
    }
}

/// Sends one AdmissionReview to `path` and returns the answer's body; anything but 200 is an
/// error.
pub async fn send(
    sender: &mut SendRequest<Full<Bytes>>,
    path: &str,
    body: &Bytes,
) -> Result<Bytes> {
    sender.ready().await?;
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, "127.0.0.1")
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body.clone()))?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let answer = response.into_body().collect().await?.to_bytes();
    if status != hyper::StatusCode::OK {
        bail!("HTTP {status}: {}", String::from_utf8_lossy(&answer));
    }
    Ok(answer)
}

/// What one run measured.
pub struct Measured {
    /// Latencies in microseconds.
    pub latencies: Histogram<u64>,
    /// Fixed rate only: from each request's due time to the moment its connection was free and
    /// began sending it, in microseconds. High while latencies are low means the load generator
    /// (or the machine) fell behind, not the server.
    pub lag: Option<Histogram<u64>>,
    /// Requests that got no 200 answer.
    pub errors: u64,
    /// From the first due time (or start) to the last answer.
    pub elapsed: Duration,
    /// CPU time this process spent during the run, all of it and the servers' part, when Linux
    /// says (`/proc/self/task/*/schedstat`). Per answer, it is what a request costs whatever
    /// else the machine runs, where throughput on a shared machine is only what was left over.
    pub cpu: Option<Cpu>,
}

/// CPU time of this process's threads: all of them, and the servers' (actix-web's worker and
/// acceptor threads) apart from the generator's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    pub all: Duration,
    pub server: Duration,
}

impl Cpu {
    fn checked_sub(self, before: Cpu) -> Option<Cpu> {
        Some(Cpu {
            all: self.all.checked_sub(before.all)?,
            server: self.server.checked_sub(before.server)?,
        })
    }
}

impl std::ops::Add for Cpu {
    type Output = Cpu;
    fn add(self, other: Cpu) -> Cpu {
        Cpu {
            all: self.all + other.all,
            server: self.server + other.server,
        }
    }
}

impl Measured {
    /// Adds another run's figures (runs one after the other).
    pub fn merge(&mut self, other: &Measured) -> Result<()> {
        self.latencies.add(&other.latencies)?;
        if let (Some(lag), Some(other)) = (self.lag.as_mut(), other.lag.as_ref()) {
            lag.add(other)?;
        }
        self.errors += other.errors;
        self.elapsed += other.elapsed;
        self.cpu = self.cpu.zip(other.cpu).map(|(a, b)| a + b);
        Ok(())
    }

    /// CPU microseconds per answered request, the generator's included.
    pub fn cpu_per_request(&self) -> Option<f64> {
        self.per_request(self.cpu?.all)
    }

    /// The server's CPU microseconds per answered request: what serving costs, without the
    /// generator's side of the same connections.
    pub fn server_cpu_per_request(&self) -> Option<f64> {
        self.per_request(self.cpu?.server)
    }

    fn per_request(&self, cpu: Duration) -> Option<f64> {
        let answered = self.latencies.len();
        (answered > 0).then_some(cpu.as_secs_f64() * 1e6 / answered as f64)
    }

    /// Answered requests per second.
    pub fn throughput(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }
}

fn histogram() -> Result<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1, HIGHEST_MICROS, 3)?)
}

fn micros(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_micros())
        .unwrap_or(u64::MAX)
        .clamp(1, HIGHEST_MICROS)
}

/// Sends `rate` requests per second for `duration` over `connections` connections, the bodies
/// in turn, each latency measured from its due time.
pub async fn fixed_rate(
    target: &Target,
    bodies: &[Bytes],
    connections: usize,
    rate: f64,
    duration: Duration,
) -> Result<Measured> {
    let mut senders = Vec::new();
    for _ in 0..connections {
        senders.push(target.connect().await?);
    }
    let total = (rate * duration.as_secs_f64()) as usize;
    let mut queues = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    let path = target.path;
    for mut sender in senders {
        let (queue, mut due) = mpsc::unbounded_channel::<(Instant, Bytes)>();
        queues.push(queue);
        tasks.spawn(async move {
            let mut latencies = histogram()?;
            let mut lag = histogram()?;
            let mut errors = 0u64;
            let mut last = None;
            while let Some((due_at, body)) = due.recv().await {
                lag.saturating_record(micros(due_at.elapsed()));
                match send(&mut sender, path, &body).await {
                    Ok(_) => latencies.saturating_record(micros(due_at.elapsed())),
                    Err(_) => errors += 1,
                }
                last = Some(Instant::now());
            }
            anyhow::Ok((latencies, lag, errors, last))
        });
    }
    let cpu_before = cpu_time();
    let start = Instant::now() + Duration::from_millis(10);
    let bodies = bodies.to_vec();
    let pacer = std::thread::spawn(move || {
        for i in 0..total {
            let due_at = start + Duration::from_secs_f64(i as f64 / rate);
            if let Some(wait) = due_at.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let body = bodies[i % bodies.len()].clone();
            if queues[i % queues.len()].send((due_at, body)).is_err() {
                return;
            }
        }
    });
    let mut measured = Measured {
        latencies: histogram()?,
        lag: Some(histogram()?),
        errors: 0,
        elapsed: Duration::ZERO,
        cpu: None,
    };
    while let Some(done) = tasks.join_next().await {
        let (latencies, lag, errors, last) = done??;
        measured.latencies.add(&latencies)?;
        if let Some(all) = measured.lag.as_mut() {
            all.add(&lag)?;
        }
        measured.errors += errors;
        if let Some(last) = last {
            measured.elapsed = measured.elapsed.max(last.duration_since(start));
        }
    }
    pacer
        .join()
        .map_err(|_| anyhow::anyhow!("the pacing thread panicked"))?;
    measured.cpu = cpu_since(cpu_before);
    Ok(measured)
}

/// Each of `connections` connections sends the bodies in turn, the next as soon as the answer
/// came, for `duration`; latency from send to answer.
pub async fn max_throughput(
    target: &Target,
    bodies: &[Bytes],
    connections: usize,
    duration: Duration,
) -> Result<Measured> {
    let mut senders = Vec::new();
    for _ in 0..connections {
        senders.push(target.connect().await?);
    }
    let cpu_before = cpu_time();
    let start = Instant::now();
    let end = start + duration;
    let mut tasks = tokio::task::JoinSet::new();
    let path = target.path;
    for (at, mut sender) in senders.into_iter().enumerate() {
        let bodies = bodies.to_vec();
        tasks.spawn(async move {
            let mut latencies = histogram()?;
            let mut errors = 0u64;
            let mut i = at;
            while Instant::now() < end {
                let sent = Instant::now();
                match send(&mut sender, path, &bodies[i % bodies.len()]).await {
                    Ok(_) => latencies.saturating_record(micros(sent.elapsed())),
                    Err(_) => errors += 1,
                }
                i += 1;
            }
            anyhow::Ok((latencies, errors))
        });
    }
    let mut measured = Measured {
        latencies: histogram()?,
        lag: None,
        errors: 0,
        elapsed: Duration::ZERO,
        cpu: None,
    };
    while let Some(done) = tasks.join_next().await {
        let (latencies, errors) = done.context("a connection task failed")??;
        measured.latencies.add(&latencies)?;
        measured.errors += errors;
    }
    measured.elapsed = start.elapsed();
    measured.cpu = cpu_since(cpu_before);
    Ok(measured)
}

/// CPU time spent by this process's threads so far (nanoseconds on CPU, from
/// `/proc/self/task/*/schedstat`), the servers' apart by their threads' names (actix-server
/// names them `actix-server worker N` and `actix-server acceptor`); `None` where that is not
/// readable.
pub fn cpu_time() -> Option<Cpu> {
    let mut cpu = Cpu::default();
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let task = task.ok()?.path();
        let stat = std::fs::read_to_string(task.join("schedstat")).ok()?;
        let spent = Duration::from_nanos(stat.split_whitespace().next()?.parse::<u64>().ok()?);
        cpu.all += spent;
        let name = std::fs::read_to_string(task.join("comm")).ok()?;
        if name.starts_with("actix-server") {
            cpu.server += spent;
        }
    }
    Some(cpu)
}

/// CPU time spent since `before`. Threads that ended meanwhile are not counted (the servers'
/// and the generator's threads live through every run).
pub fn cpu_since(before: Option<Cpu>) -> Option<Cpu> {
    cpu_time()?.checked_sub(before?)
}
