//! A real Prometheus (built from the Prometheus module like the other test tools) scraping one
//! `ocifit run` every second and evaluating the chart's own alerting rules, as the chart's
//! ConfigMap renders them; the only test-time change a scenario may make is a shorter `for:` on
//! the alerts it makes fire.

#![allow(clippy::unwrap_used)] // the harness fails the test loudly on a bad set-up

use std::time::{Duration, Instant};

use ocifit_testkit::Tool;
use ocifit_testkit::chart::{documents, find, render};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use super::{Env, free_address, get};

/// How long [`Prometheus::wait_for`] waits.
pub const WAIT: Duration = Duration::from_secs(90);

/// The chart's rendered documents with `monitoring.enabled`.
pub async fn chart_documents() -> Vec<Value> {
    let manifests = render(&["monitoring.enabled=true"]).await.unwrap();
    documents(&manifests).unwrap()
}

/// The chart's alerting rules (from `docs`, [`chart_documents`]) as a rule file, with `short`
/// as the `for:` of each alert named in `alerts` (each must be in the chart).
pub fn chart_rules(docs: &[Value], alerts: &[&str], short: &str) -> String {
    let text = find(docs, "ConfigMap", "ocifit-alerts").unwrap()["data"]["ocifit-alerts.yaml"]
        .as_str()
        .unwrap();
    let mut rules: Value = documents(text).unwrap().remove(0);
    let mut shortened = 0;
    for group in rules["groups"].as_array_mut().unwrap() {
        for rule in group["rules"].as_array_mut().unwrap() {
            if alerts.iter().any(|alert| rule["alert"] == *alert) {
                rule["for"] = json!(short);
                shortened += 1;
            }
        }
    }
    assert_eq!(shortened, alerts.len(), "the chart ships {alerts:?}");
    rules.to_string()
}

/// An alert Prometheus reports firing: its name and labels.
#[derive(Debug, Clone)]
pub struct Firing {
    pub name: String,
    pub labels: Value,
}

impl Firing {
    /// The label `key`, empty when absent.
    pub fn label(&self, key: &str) -> &str {
        self.labels[key].as_str().unwrap_or_default()
    }
}

/// A Prometheus scraping one target as job `ocifit-metrics`, evaluating `rules`, every second.
pub struct Prometheus {
    _child: Child,
    pub address: String,
}

impl Prometheus {
    /// Starts Prometheus on `target` (`HOST:PORT` serving `/metrics`) with the rule file
    /// `rules` ([`chart_rules`]), and waits until it is ready with every rule loaded.
    pub async fn start(env: &Env, target: &str, rules: &str) -> Prometheus {
        let dir = env.cluster.dir().join("prometheus");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("alerts.json"), rules).unwrap();
        let config = json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": ["alerts.json"],
            "scrape_configs": [{"job_name": "ocifit-metrics", "static_configs": [{"targets": [target]}]}],
        });
        std::fs::write(dir.join("prometheus.json"), config.to_string()).unwrap();
        let address = free_address();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let binary = env.cluster.tools().path(Tool::Prometheus).unwrap();
        let child = Command::new(binary)
            .current_dir(&dir)
            .args([
                "--config.file=prometheus.json",
                "--storage.tsdb.path=data",
                &format!("--web.listen-address={address}"),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let prometheus = Prometheus {
            _child: child,
            address,
        };
        prometheus
            .wait_for("Prometheus ready", |p| async move {
                get(&p.address, "/-/ready").await.map(|(code, _)| code) == Some(200)
            })
            .await;
        let given: Value = serde_json::from_str(rules).unwrap();
        let (_, loaded) = get(&prometheus.address, "/api/v1/rules").await.unwrap();
        let loaded: Value = serde_json::from_str(&loaded).unwrap();
        assert_eq!(
            rule_count(&loaded["data"]),
            rule_count(&given),
            "every alert of the chart loaded: {loaded}"
        );
        prometheus
    }

    /// Polls `done` every second until it holds; when it first held.
    pub async fn wait_for<'a, F, Fut>(&'a self, what: &str, done: F) -> Instant
    where
        F: Fn(&'a Prometheus) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let start = Instant::now();
        loop {
            if done(self).await {
                return Instant::now();
            }
            assert!(start.elapsed() < WAIT, "{what}: not within {WAIT:?}");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Prometheus's last scrape of ocifit (OpenMetrics, which it asks for first) succeeded.
    pub async fn scraped_without_error(&self) {
        let (_, body) = get(&self.address, "/api/v1/targets").await.unwrap();
        let answer: Value = serde_json::from_str(&body).unwrap();
        let target = &answer["data"]["activeTargets"][0];
        assert_eq!(
            (target["health"].as_str(), target["lastError"].as_str()),
            (Some("up"), Some("")),
            "{target}"
        );
    }

    /// How many series `query` returns now.
    pub async fn series(&self, query: &str) -> usize {
        let path = format!(
            "/api/v1/query?query={}",
            form_urlencoded::byte_serialize(query.as_bytes()).collect::<String>()
        );
        let (code, body) = get(&self.address, &path).await.unwrap();
        assert_eq!(code, 200, "{query}: {body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        answer["data"]["result"].as_array().map_or(0, Vec::len)
    }

    /// The alerts firing now.
    pub async fn firing(&self) -> Vec<Firing> {
        let (_, body) = get(&self.address, "/api/v1/alerts").await.unwrap();
        let answer: Value = serde_json::from_str(&body).unwrap();
        answer["data"]["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|alert| alert["state"] == "firing")
            .map(|alert| Firing {
                name: alert["labels"]["alertname"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                labels: alert["labels"].clone(),
            })
            .collect()
    }

    /// The firing alert `name`, if it fires now.
    pub async fn fired(&self, name: &str) -> Option<Firing> {
        self.firing().await.into_iter().find(|f| f.name == name)
    }

    /// Those of `queries` that return series now.
    pub async fn answering(&self, queries: &[String]) -> Vec<String> {
        let mut answering = Vec::new();
        for query in queries {
            if self.series(query).await > 0 {
                answering.push(query.clone());
            }
        }
        answering
    }
}

/// The rules of every group of a rule file (or of `/api/v1/rules`' `data`).
fn rule_count(rules: &Value) -> usize {
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["rules"].as_array().unwrap().len())
        .sum()
}
