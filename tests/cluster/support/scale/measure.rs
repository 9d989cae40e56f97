//! What the scale run measures: each webhook in the apiserver's own histogram, when each pod was
//! first seen released (a watch), and ocifit's, the apiserver's and etcd's RSS and CPU from
//! `/proc`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use ocifit::api::placement_pod::{POLICY_LABEL, SCHEDULING_GATE};
use ocifit_testkit::WebhookDurations;
use tokio::sync::Notify;

use crate::placement::gates;

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

/// Each webhook's calls between `before` and `after` (the apiserver's histograms, read with
/// [`webhook_durations`](ocifit_testkit::webhook_durations)).
pub fn webhooks(
    before: &BTreeMap<String, WebhookDurations>,
    after: &BTreeMap<String, WebhookDurations>,
) -> BTreeMap<String, Webhook> {
    after
        .iter()
        .map(|(name, after)| {
            let calls = after.since(&before.get(name).cloned().unwrap_or_default());
            let webhook = Webhook {
                calls: calls.count,
                mean_seconds: calls.mean_seconds(),
                p99_at_most_seconds: calls.quantile_at_most(0.99),
            };
            (name.clone(), webhook)
        })
        .collect()
}
