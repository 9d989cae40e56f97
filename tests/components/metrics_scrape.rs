//! `/metrics` as scrapers read it: a real Prometheus (asking for OpenMetrics first, as it does)
//! gets OpenMetrics under its own content type and scrapes it without an error, the metrics
//! Prometheus's conventions expect (`ocifit_build_info`, `process_*`, counters' `_total`) arrive,
//! and the body served to a client that asks for the Prometheus text format (or asks nothing, as
//! `curl … | promtool check metrics` does) passes `promtool check metrics`.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ocifit::image_selection::RegistrySource;
use ocifit::registry::RegistryOptions;
use ocifit::telemetry::{Health, admin_server};
use ocifit_testkit::{Tool, Tools};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The `Accept` header Prometheus sends by default.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1";
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

fn free_address() -> SocketAddr {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

/// GET `path` from `address` with `accept`: the status line's code, the content type, the body.
async fn get(address: SocketAddr, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    let request = format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n{accept}\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status");
    let content_type = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    (code, content_type, body.to_owned())
}

async fn promtool_check_metrics(body: &str) -> Result<(), String> {
    let promtool = Tools::locate()
        .and_then(|tools| tools.path(Tool::Promtool))
        .map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(body.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    drop(stdin);
    let output = child.wait_with_output().await.map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn start_prometheus(dir: &Path, target: SocketAddr, address: SocketAddr) -> tokio::process::Child {
    let config = json!({
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{"job_name": "ocifit-metrics", "static_configs": [{"targets": [target.to_string()]}]}],
    });
    std::fs::write(dir.join("prometheus.json"), config.to_string()).expect("config");
    let binary = Tools::locate()
        .and_then(|tools| tools.path(Tool::Prometheus))
        .expect("prometheus (tools/install)");
    tokio::process::Command::new(binary)
        .current_dir(dir)
        .args([
            "--config.file=prometheus.json".to_owned(),
            "--storage.tsdb.path=data".to_owned(),
            format!("--web.listen-address={address}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).expect("log"))
        .kill_on_drop(true)
        .spawn()
        .expect("prometheus starts")
}

/// The one target's state as Prometheus reports it, once it has been scraped.
async fn scraped_target(prometheus: SocketAddr) -> Value {
    let start = Instant::now();
    loop {
        // Until Prometheus listens, its port refuses.
        let listening = tokio::net::TcpStream::connect(prometheus).await.is_ok();
        if listening
            && let (200, _, body) = get(prometheus, "/api/v1/targets", None).await
            && let Ok(answer) = serde_json::from_str::<Value>(&body)
            && let Some(target) = answer["data"]["activeTargets"].get(0)
            && target["health"] != "unknown"
        {
            return target.clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no scrape within a minute"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn prometheus_scrapes_openmetrics_and_the_text_format_passes_promtool() {
    let source =
        Arc::new(RegistrySource::new(RegistryOptions::default()).expect("a registry client"));
    let metrics = ocifit::startup::process_metrics(&source);
    let admin = free_address();
    let server = admin_server(admin, metrics, Health::default()).expect("the admin server binds");
    let handle = server.handle();
    tokio::spawn(server);

    let (code, content_type, body) = get(admin, "/metrics", Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!((code, content_type.as_str()), (200, OPENMETRICS));
    assert!(body.ends_with("# EOF\n"), "{body}");
    for (accept, what) in [
        (None, "no Accept"),
        (Some("text/plain"), "text/plain"),
        (Some("*/*"), "*/*"),
    ] {
        let (code, content_type, text) = get(admin, "/metrics", accept).await;
        assert_eq!((code, content_type.as_str()), (200, TEXT), "{what}");
        assert!(!text.contains("# EOF"), "{what}: {text}");
        promtool_check_metrics(&text)
            .await
            .unwrap_or_else(|problems| panic!("{what}: promtool check metrics: {problems}"));
    }

    let dir = tempfile::tempdir().expect("a directory");
    let address = free_address();
    let _prometheus = start_prometheus(dir.path(), admin, address);
    let target = scraped_target(address).await;
    assert_eq!(
        (target["health"].as_str(), target["lastError"].as_str()),
        (Some("up"), Some("")),
        "{target}"
    );
    for query in [
        "ocifit_build_info == 1",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes > 0",
        "process_start_time_seconds",
    ] {
        let path = format!(
            "/api/v1/query?query={}",
            form_urlencoded::byte_serialize(query.as_bytes()).collect::<String>()
        );
        let (_, _, answer) = get(address, &path, None).await;
        let answer: Value = serde_json::from_str(&answer).expect("JSON");
        assert_eq!(
            answer["data"]["result"].as_array().map(Vec::len),
            Some(1),
            "{query}: {answer}"
        );
    }
    handle.stop(false).await;
}
