//! How long the apiserver's calls to each admission webhook took, as the apiserver itself measures
//! them: its `apiserver_admission_webhook_admission_duration_seconds` histogram, read from its
//! `/metrics` and summed per webhook name over the other labels (operation, rejected, type).

use std::collections::BTreeMap;

use kube::Client;

use crate::error::{Error, Result, kube as kube_error};

const METRIC: &str = "apiserver_admission_webhook_admission_duration_seconds";

/// One webhook's histogram: how many calls, their total seconds, and the cumulative count at or
/// under each bucket bound (in microseconds, so bounds sort as keys; `+Inf` saturates).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WebhookDurations {
    /// Calls observed.
    pub count: f64,
    /// Their seconds in total.
    pub sum: f64,
    /// Bucket bound (µs) → calls at or under it.
    pub buckets: BTreeMap<u64, f64>,
}

impl WebhookDurations {
    /// The calls observed after `before` was read (the histogram only grows).
    pub fn since(&self, before: &WebhookDurations) -> WebhookDurations {
        WebhookDurations {
            count: self.count - before.count,
            sum: self.sum - before.sum,
            buckets: self
                .buckets
                .iter()
                .map(|(bound, n)| (*bound, n - before.buckets.get(bound).unwrap_or(&0.0)))
                .collect(),
        }
    }

    /// The mean call in seconds (0 without calls).
    pub fn mean_seconds(&self) -> f64 {
        if self.count > 0.0 {
            self.sum / self.count
        } else {
            0.0
        }
    }

    /// Calls that took at most `seconds`, a bucket bound of the histogram (0 if it is none).
    pub fn within(&self, seconds: f64) -> f64 {
        self.buckets
            .get(&micros(seconds))
            .copied()
            .unwrap_or_default()
    }

    /// The smallest bucket bound (seconds) at or under which a share `q` of the calls fall;
    /// infinite when no finite bound holds them.
    pub fn quantile_at_most(&self, q: f64) -> f64 {
        self.buckets
            .iter()
            .find(|(_, n)| **n >= self.count * q)
            .map_or(f64::INFINITY, |(bound, _)| *bound as f64 / 1e6)
    }
}

fn micros(seconds: f64) -> u64 {
    (seconds * 1e6).round() as u64
}

/// Every webhook's histogram by webhook name, from the apiserver's `/metrics`.
pub async fn webhook_durations(client: &Client) -> Result<BTreeMap<String, WebhookDurations>> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| Error::Format {
            action: "build a request for the apiserver's metrics".into(),
            message: e.to_string(),
        })?;
    let text = client
        .request_text(request)
        .await
        .map_err(kube_error("read the apiserver's metrics"))?;
    Ok(parse(&text))
}

/// The webhook histograms in a Prometheus text exposition.
fn parse(text: &str) -> BTreeMap<String, WebhookDurations> {
    let mut by_name: BTreeMap<String, WebhookDurations> = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with(METRIC)) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (Ok(value), Some(name)) = (value.parse::<f64>(), label(series, "name")) else {
            continue;
        };
        let entry = by_name.entry(name.to_owned()).or_default();
        if series.starts_with(&format!("{METRIC}_count")) {
            entry.count += value;
        } else if series.starts_with(&format!("{METRIC}_sum")) {
            entry.sum += value;
        } else if let Some(bound) = label(series, "le").and_then(|le| le.parse::<f64>().ok()) {
            *entry.buckets.entry(micros(bound)).or_default() += value;
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

#[cfg(test)]
mod tests {
    use super::*;

    const EXPOSITION: &str = r#"# HELP apiserver_admission_webhook_admission_duration_seconds [STABLE] ...
apiserver_admission_webhook_admission_duration_seconds_bucket{name="pods.ocifit.io",operation="CREATE",rejected="false",type="admit",le="0.005"} 3
apiserver_admission_webhook_admission_duration_seconds_bucket{name="pods.ocifit.io",operation="CREATE",rejected="false",type="admit",le="0.025"} 9
apiserver_admission_webhook_admission_duration_seconds_bucket{name="pods.ocifit.io",operation="CREATE",rejected="false",type="admit",le="+Inf"} 10
apiserver_admission_webhook_admission_duration_seconds_bucket{name="pods.ocifit.io",operation="UPDATE",rejected="true",type="admit",le="0.025"} 1
apiserver_admission_webhook_admission_duration_seconds_bucket{name="pods.ocifit.io",operation="UPDATE",rejected="true",type="admit",le="+Inf"} 1
apiserver_admission_webhook_admission_duration_seconds_sum{name="pods.ocifit.io",operation="CREATE",rejected="false",type="admit"} 0.5
apiserver_admission_webhook_admission_duration_seconds_sum{name="pods.ocifit.io",operation="UPDATE",rejected="true",type="admit"} 0.05
apiserver_admission_webhook_admission_duration_seconds_count{name="pods.ocifit.io",operation="CREATE",rejected="false",type="admit"} 10
apiserver_admission_webhook_admission_duration_seconds_count{name="pods.ocifit.io",operation="UPDATE",rejected="true",type="admit"} 1
apiserver_admission_webhook_admission_duration_seconds_count{name="gate.ocifit.io",operation="CREATE",rejected="false",type="admit"} 2
apiserver_request_total{code="200"} 7
"#;

    #[test]
    fn a_webhooks_calls_are_summed_over_operations_and_outcomes() {
        let read = parse(EXPOSITION);
        let pods = &read["pods.ocifit.io"];
        assert_eq!(pods.count, 11.0);
        assert!((pods.mean_seconds() - 0.05).abs() < 1e-9);
        assert_eq!(pods.within(0.025), 10.0);
        assert_eq!(pods.within(0.005), 3.0);
        assert_eq!(read["gate.ocifit.io"].count, 2.0);
        assert_eq!(read.len(), 2, "other metrics are not webhooks");
    }

    #[test]
    fn calls_since_an_earlier_read_and_their_quantile_bound() {
        let before = parse(EXPOSITION)["pods.ocifit.io"].clone();
        let mut after = before.clone();
        after.count += 100.0;
        after.sum += 1.0;
        for (bound, n) in after.buckets.iter_mut() {
            // 100 more calls, 98 of them within 25 ms and all within +Inf.
            *n += if *bound <= micros(0.005) {
                0.0
            } else if *bound <= micros(0.025) {
                98.0
            } else {
                100.0
            };
        }
        let since = after.since(&before);
        assert_eq!(since.count, 100.0);
        assert!((since.mean_seconds() - 0.01).abs() < 1e-9);
        assert_eq!(since.quantile_at_most(0.5), 0.025);
        assert_eq!(since.quantile_at_most(0.99), u64::MAX as f64 / 1e6);
        assert_eq!(WebhookDurations::default().mean_seconds(), 0.0);
    }
}
