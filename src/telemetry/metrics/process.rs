//! What the process says about itself: its build (`ocifit_build_info`), its CPU time, memory,
//! file descriptors and start time under the names Prometheus's own client libraries give them
//! (`process_*`, read from `/proc/self` at scrape time through the `procfs` crate: the metrics
//! library has no process collector), and when the certificates it serves expire.

use std::sync::atomic::AtomicU64;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};

use super::{Metrics, Registering};

/// The revision the binary was built from, when the build said (`OCIFIT_REVISION`, set by the
/// release image's build).
const REVISION: &str = match option_env!("OCIFIT_REVISION") {
    Some(revision) => revision,
    None => "unknown",
};

/// A certificate ocifit serves or signs with, as the `certificate` label names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Certificate {
    /// The webhook's serving certificate, whatever its source (files or managed).
    Serving,
    /// The managed mode's CA that signed the serving certificate.
    Ca,
}

impl Certificate {
    const fn as_str(self) -> &'static str {
        match self {
            Certificate::Serving => "serving",
            Certificate::Ca => "ca",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    revision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CertificateLabels {
    certificate: &'static str,
}

/// The metrics of this file kept in the registry.
pub(super) struct OwnMetrics {
    certificate_expiry: Family<CertificateLabels, Gauge<f64, AtomicU64>>,
}

impl OwnMetrics {
    pub(super) fn register(registry: &mut Registering) -> OwnMetrics {
        let build: Family<BuildLabels, Gauge> = registry.add(
            "build_info",
            "Always 1, labelled with the version and the source revision ocifit was built from",
            Family::default(),
        );
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                revision: REVISION,
            })
            .set(1);
        OwnMetrics {
            certificate_expiry: registry.add(
                "certificate_expiry_timestamp_seconds",
                "When a certificate ocifit serves expires (notAfter, seconds since the epoch), by certificate (serving: the webhook's, from files or managed; ca: the managed CA that signed it)",
                Family::default(),
            ),
        }
    }
}

impl Metrics {
    /// Records when `certificate` expires, in seconds since the epoch.
    pub fn set_certificate_expiry(&self, certificate: Certificate, not_after: i64) {
        // Seconds since the epoch are exact in an f64 for the next 285 million years.
        let seconds = not_after as f64;
        self.own
            .certificate_expiry
            .get_or_create(&CertificateLabels {
                certificate: certificate.as_str(),
            })
            .set(seconds);
    }
}

/// The `process_*` metrics, read when scraped; left out of the scrape when `/proc` cannot be read
/// (another OS, a sandbox without it) rather than written as 0.
#[derive(Debug)]
pub(super) struct ProcessCollector;

/// The figures, read at once.
struct Figures {
    cpu_seconds: f64,
    resident_bytes: u64,
    virtual_bytes: u64,
    open_fds: usize,
    max_fds: Option<u64>,
    start_time_seconds: f64,
}

fn read() -> procfs::ProcResult<Figures> {
    let me = procfs::process::Process::myself()?;
    let stat = me.stat()?;
    // Clock ticks are exact in an f64 far beyond a process's life.
    let ticks = procfs::ticks_per_second() as f64;
    let seconds = |t: u64| t as f64 / ticks;
    let max_fds = match me.limits()?.max_open_files.soft_limit {
        procfs::process::LimitValue::Value(n) => Some(n),
        procfs::process::LimitValue::Unlimited => None,
    };
    let boot = procfs::boot_time_secs()? as f64;
    Ok(Figures {
        cpu_seconds: seconds(stat.utime + stat.stime),
        resident_bytes: stat.rss * procfs::page_size(),
        virtual_bytes: stat.vsize,
        open_fds: me.fd_count()?,
        max_fds,
        start_time_seconds: boot + seconds(stat.starttime),
    })
}

fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: impl Into<i64>,
) -> std::fmt::Result {
    let gauge = ConstGauge::new(value.into());
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

fn whole(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Ok(figures) = read() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(figures.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        gauge(
            &mut encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            whole(figures.resident_bytes),
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            whole(figures.virtual_bytes),
        )?;
        gauge(
            &mut encoder,
            "process_open_fds",
            "Number of open file descriptors",
            i64::try_from(figures.open_fds).unwrap_or(i64::MAX),
        )?;
        if let Some(max) = figures.max_fds {
            gauge(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors",
                whole(max),
            )?;
        }
        let start = ConstGauge::new(figures.start_time_seconds);
        start.encode(encoder.encode_descriptor(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            None,
            start.metric_type(),
        )?)
    }
}
