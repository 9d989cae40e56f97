//! What the scale run measures: each webhook in the apiserver's own histogram, when each pod was
//! first seen released (a watch), and ocifit's, the apiserver's and etcd's RSS and CPU from
//! `/proc`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use ocifit::api::placement::pod::{POLICY_LABEL, SCHEDULING_GATE};
use tokio::sync::Notify;

use crate::support::placement::gates;

const METRIC: &str = "apiserver_admission_webhook_admission_duration_seconds";
/// The kernel's clock ticks per second in `/proc/<pid>/stat` (USER_HZ, 100 on Linux).
const TICKS: f64 = 100.0;

/// One webhook as the apiserver measured it over the run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Webhook {
    pub calls: f64,
    pub mean_seconds: f64,
    /// The histogram's bucket bound the 99th percentile falls under.
    pub p99_at_most_seconds: f64,
}

/// One `/proc` sample: seconds into the run, ocifit's RSS, and CPU seconds so far of ocifit, the
/// apiserver and etcd.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub at: f64,
    pub rss_bytes: u64,
    pub ocifit_cpu: f64,
    pub apiserver_cpu: f64,
    pub etcd_cpu: f64,
}

/// The quantile `q` of sorted `values`, 0 when empty.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let at = ((values.len() - 1) as f64 * q).round() as usize;
    values[at.min(values.len() - 1)]
}

/// CPU seconds (user + system) and RSS bytes of `pid`, from `/proc`.
pub fn usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces), from field 3 on.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let cpu = (field(14).unwrap_or(0.0) + field(15).unwrap_or(0.0)) / TICKS;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    (cpu, rss_kib * 1024)
}

/// Samples the three processes every `every` until the returned flag is set.
pub fn sample(pids: [u32; 3], every: Duration) -> (Arc<Mutex<Vec<Sample>>>, Arc<Notify>) {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(Notify::new());
    let (into, stopped) = (samples.clone(), stop.clone());
    tokio::spawn(async move {
        let start = Instant::now();
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stopped.notified() => return,
            }
            let (ocifit_cpu, rss_bytes) = usage(pids[0]);
            let s = Sample {
                at: start.elapsed().as_secs_f64(),
                rss_bytes,
                ocifit_cpu,
                apiserver_cpu: usage(pids[1]).0,
                etcd_cpu: usage(pids[2]).0,
            };
            into.lock().expect("not poisoned").push(s);
        }
    });
    (samples, stop)
}

/// When each pod of the namespace was first seen without ocifit's gate.
#[derive(Clone, Default)]
pub struct Released(Arc<Mutex<HashMap<String, Instant>>>, pub Arc<Notify>);

impl Released {
    pub fn watch(&self, pods: Api<Pod>) {
        let released = self.clone();
        tokio::spawn(async move {
            let config = watcher::Config::default().labels(POLICY_LABEL);
            let mut events = std::pin::pin!(watcher(pods, config).default_backoff());
            // Errors are retried with backoff (the last ones come as the cluster stops).
            while let Some(event) = events.next().await {
                let Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event else {
                    continue;
                };
                if !gates(&pod).iter().any(|g| g == SCHEDULING_GATE) {
                    let name = pod.metadata.name.unwrap_or_default();
                    let mut at = released.0.lock().expect("not poisoned");
                    at.entry(name).or_insert_with(Instant::now);
                    released.1.notify_waiters();
                }
            }
        });
    }

    pub fn at(&self, name: &str) -> Option<Instant> {
        self.0.lock().expect("not poisoned").get(name).copied()
    }
}

/// The apiserver's webhook histogram by webhook name: count, sum, and cumulative count per bucket
/// bound (summed over the other labels).
pub type Histograms = BTreeMap<String, (f64, f64, BTreeMap<u64, f64>)>;

pub async fn histograms(client: &Client) -> Histograms {
    // hyper re-exports the `http` types kube takes; the main crate has no `http` of its own.
    let request = hyper::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let text = client
        .request_text(request)
        .await
        .expect("the apiserver's metrics");
    let mut by_name = Histograms::new();
    for line in text.lines().filter(|l| l.starts_with(METRIC)) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (Ok(value), Some(name)) = (value.parse::<f64>(), label(series, "name")) else {
            continue;
        };
        let entry = by_name.entry(name.to_owned()).or_default();
        if series.starts_with(&format!("{METRIC}_count")) {
            entry.0 += value;
        } else if series.starts_with(&format!("{METRIC}_sum")) {
            entry.1 += value;
        } else if let Some(le) = label(series, "le").and_then(|le| le.parse::<f64>().ok()) {
            // Bounds in microseconds, so they sort as keys (+Inf saturates).
            *entry.2.entry((le * 1e6) as u64).or_default() += value;
        }
    }
    by_name
}

/// The value of label `key` in a series `name{k="v",…}`.
fn label<'s>(series: &'s str, key: &str) -> Option<&'s str> {
    let needle = format!("{key}=\"");
    let start = series.find(&needle)? + needle.len();
    let end = series[start..].find('"')?;
    Some(&series[start..start + end])
}

/// Each webhook's calls between `before` and `after`.
pub fn webhooks(before: &Histograms, after: &Histograms) -> BTreeMap<String, Webhook> {
    let mut out = BTreeMap::new();
    for (name, (count, sum, buckets)) in after {
        let empty = Default::default();
        let (count0, sum0, buckets0) = before.get(name).unwrap_or(&empty);
        let calls = count - count0;
        let p99 = buckets
            .iter()
            .find(|(le, n)| **n - buckets0.get(le).unwrap_or(&0.0) >= calls * 0.99)
            .map_or(f64::INFINITY, |(le, _)| *le as f64 / 1e6);
        let mean_seconds = if calls > 0.0 {
            (sum - sum0) / calls
        } else {
            0.0
        };
        out.insert(
            name.clone(),
            Webhook {
                calls,
                mean_seconds,
                p99_at_most_seconds: p99,
            },
        );
    }
    out
}
