use super::*;

#[test]
fn reconciles_writes_policies_and_leader_appear_in_the_exposition() {
    let metrics = Metrics::new(None);
    metrics.reconciled(Controller::ImageSelection, ReconcileResult::Ok, 0.002);
    metrics.reconciled(
        Controller::ImageSelection,
        ReconcileResult::ArtifactError,
        0.5,
    );
    metrics.reconciled(Controller::Placement, ReconcileResult::Error, 0.01);
    metrics.reconciled(Controller::ArtifactCache, ReconcileResult::NotLeader, 0.0);
    metrics.artifact_fetched("RegistryUnavailable");
    metrics.status_written();
    metrics.set_policies([(("Ready", "True"), 2), (("Degraded", "True"), 1)]);
    metrics.set_leader(true);
    let text = metrics.encode().unwrap();
    for line in [
        "ocifit_reconciles_total{controller=\"image_selection\",result=\"ok\"} 1",
        "ocifit_reconciles_total{controller=\"image_selection\",result=\"artifact_error\"} 1",
        "ocifit_reconciles_total{controller=\"placement\",result=\"error\"} 1",
        "ocifit_reconciles_total{controller=\"artifact_cache\",result=\"not_leader\"} 1",
        "ocifit_reconcile_duration_seconds_count{controller=\"image_selection\"} 2",
        "ocifit_reconcile_duration_seconds_count{controller=\"placement\"} 1",
        "ocifit_image_selection_artifact_fetches_total{result=\"registry_unavailable\"} 1",
        "ocifit_status_writes_total 1",
        "ocifit_image_selection_policies{condition=\"ready\",status=\"true\"} 2",
        "ocifit_image_selection_policies{condition=\"degraded\",status=\"true\"} 1",
        "ocifit_leader 1",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    assert!(
        !text.contains("ocifit_reconcile_duration_seconds_count{controller=\"artifact_cache\"}"),
        "a reconcile skipped for not leading has no duration: {text}"
    );
    assert_eq!(metrics.status_writes(), 1);
}

#[test]
fn admissions_by_route_store_sizes_and_rebuilds_appear_with_sub_millisecond_buckets() {
    let metrics = Metrics::new(None);
    metrics.admitted("/mutate", "pinned", "ImagePinned", 0.0001);
    metrics.admitted("/mutate", "denied", "Unpinned", 0.0002);
    metrics.admitted("/placement", "skipped", "Timeout", 2.0);
    metrics.set_store_sizes(2, 5000, 0);
    metrics.index_rebuilt();
    let text = metrics.encode().unwrap();
    for line in [
        "ocifit_admissions_total{route=\"/mutate\",outcome=\"pinned\",reason=\"image_pinned\"} 1",
        "ocifit_admissions_total{route=\"/mutate\",outcome=\"denied\",reason=\"unpinned\"} 1",
        "ocifit_admissions_total{route=\"/placement\",outcome=\"skipped\",reason=\"timeout\"} 1",
        "ocifit_admission_duration_seconds_count{route=\"/mutate\"} 2",
        "ocifit_admission_duration_seconds_bucket{le=\"0.0001\",route=\"/mutate\"} 1",
        // A request near the 2 s deadline falls in a bucket of its own, not in +Inf.
        "ocifit_admission_duration_seconds_bucket{le=\"1.6384\",route=\"/placement\"} 0",
        "ocifit_admission_duration_seconds_bucket{le=\"3.2768\",route=\"/placement\"} 1",
        "ocifit_store_objects{store=\"nodes\"} 5000",
        "ocifit_store_objects{store=\"node_features\"} 0",
        "ocifit_webhook_index_rebuilds_total 1",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[test]
fn policy_gauges_are_replaced_not_accumulated() {
    let metrics = Metrics::new(None);
    metrics.set_policies([(("Ready", "False"), 1)]);
    metrics.set_policies([(("Ready", "True"), 1)]);
    let text = metrics.encode().unwrap();
    assert!(!text.contains("status=\"false\""), "{text}");
}

#[test]
fn scrape_time_metrics_are_included() {
    use prometheus_client::encoding::EncodeMetric;
    use prometheus_client::metrics::counter::ConstCounter;
    let metrics = Metrics::new(Some(Box::new(|encoder| {
        let counter = ConstCounter::new(7u64);
        let metric = encoder.encode_descriptor(
            "registry_requests",
            "Registry requests",
            None,
            counter.metric_type(),
        )?;
        counter.encode(metric)
    })));
    let text = metrics.encode().unwrap();
    assert!(text.contains("ocifit_registry_requests_total 7"), "{text}");
}

#[test]
fn placement_gauges_are_per_policy_and_replaced_whole() {
    let metrics = Metrics::new(None);
    metrics.set_placement([
        (
            "arm",
            PolicyGates {
                gated: 2,
                held: 1,
                oldest_gated_created: Some(1_700_000_000.0),
                bound_seconds: Some(120.0),
            },
        ),
        ("gone", PolicyGates::default()),
    ]);
    metrics.set_placement_policies(1, 0);
    let text = metrics.encode().unwrap();
    for line in [
        "ocifit_placement_pods{policy=\"arm\",state=\"gated\"} 2",
        "ocifit_placement_pods{policy=\"arm\",state=\"held\"} 1",
        "ocifit_placement_oldest_gated_pod_created_timestamp_seconds{policy=\"arm\"} 1700000000.0",
        "ocifit_placement_gate_bound_seconds{policy=\"arm\"} 120.0",
        "ocifit_placement_policies{ready=\"true\"} 1",
        "ocifit_placement_policies{ready=\"false\"} 0",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    assert!(
        !text.contains("placement_oldest_gated_pod_created_timestamp_seconds{policy=\"gone\"}"),
        "a policy with nothing waiting has no oldest pod: {text}"
    );
    metrics.set_placement([("arm", PolicyGates::default())]);
    let text = metrics.encode().unwrap();
    assert!(!text.contains("policy=\"gone\""), "{text}");
    assert!(!text.contains("1700000000"), "{text}");
    metrics.clear_placement();
    assert!(!metrics.encode().unwrap().contains("policy=\"arm\""));
}

#[test]
fn caches_by_readiness_inspection_failures_and_last_successful_reconciles_appear() {
    let metrics = Metrics::new(None);
    metrics.set_artifact_caches(3, 1);
    metrics.inspection_failed("transport");
    metrics.inspection_failed("transport");
    metrics.reconcile_succeeded(Controller::Placement);
    metrics.placement_decided("Constrained");
    let text = metrics.encode().unwrap();
    for line in [
        "ocifit_artifact_caches{ready=\"true\"} 3",
        "ocifit_artifact_caches{ready=\"false\"} 1",
        "ocifit_placement_inspection_failures_total{kind=\"transport\"} 2",
        "ocifit_last_successful_reconcile_timestamp_seconds{controller=\"placement\"} ",
        "ocifit_placement_decisions_total{outcome=\"constrained\"} 1",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    assert!(!text.contains("controller=\"artifact_cache\""), "{text}");
}

fn transfer(cache: &str) -> StepTransfer<'_> {
    StepTransfer {
        cache,
        direction: "pull",
        ok: true,
        bytes: 42,
        seconds: 0.25,
    }
}

#[test]
fn a_quote_and_a_newline_in_a_label_value_are_escaped_in_the_scrape() {
    let metrics = Metrics::new(None);
    metrics.step_transferred(&transfer("team\"a/ca\nche"));
    let text = metrics.encode().unwrap();
    assert!(
        text.contains(
            "ocifit_artifact_steps_total{cache=\"team\\\"a/ca\\nche\",direction=\"pull\",outcome=\"ok\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.lines().all(|line| !line.starts_with("che")),
        "no label value breaks a line: {text}"
    );
}

#[test]
fn step_series_are_capped_by_cache_and_go_with_their_cache() {
    let metrics = Metrics::new(None);
    let caches: Vec<String> = (0..=steps::STEP_CACHE_SERIES)
        .map(|n| format!("ns/cache-{n}"))
        .collect();
    for cache in &caches {
        metrics.step_transferred(&transfer(cache));
    }
    let text = metrics.encode().unwrap();
    let series = |text: &str| {
        text.lines()
            .filter(|line| line.starts_with("ocifit_artifact_steps_total{"))
            .count()
    };
    assert_eq!(series(&text), steps::STEP_CACHE_SERIES + 1, "{text}");
    let last = &caches[steps::STEP_CACHE_SERIES];
    assert!(!text.contains(&format!("cache=\"{last}\"")), "{text}");
    assert!(
        text.contains(
            "ocifit_artifact_steps_total{cache=\"(other)\",direction=\"pull\",outcome=\"ok\"} 1"
        ),
        "{text}"
    );
    let live = std::collections::BTreeSet::from([caches[1].clone()]);
    metrics.keep_step_caches(&live);
    let text = metrics.encode().unwrap();
    assert!(
        !text.contains("cache=\"ns/cache-0\""),
        "a deleted cache's series go: {text}"
    );
    assert!(!text.contains("cache=\"ns/cache-2\""), "{text}");
    assert!(text.contains("cache=\"ns/cache-1\""), "{text}");
    metrics.step_transferred(&transfer(last));
    let text = metrics.encode().unwrap();
    assert!(
        text.contains(&format!(
            "ocifit_artifact_step_bytes_total{{cache=\"{last}\",direction=\"pull\"}} 42"
        )),
        "room made by the removal is used: {text}"
    );
}

#[test]
fn the_build_the_process_and_the_certificates_expiry_are_served() {
    let metrics = Metrics::new(None);
    metrics.set_certificate_expiry(Certificate::Serving, 1_900_000_000);
    metrics.set_certificate_expiry(Certificate::Ca, 2_100_000_000);
    let text = metrics.encode().unwrap();
    for line in [
        &format!(
            "ocifit_build_info{{version=\"{}\",revision=\"",
            env!("CARGO_PKG_VERSION")
        ),
        "ocifit_certificate_expiry_timestamp_seconds{certificate=\"serving\"} 1900000000.0",
        "ocifit_certificate_expiry_timestamp_seconds{certificate=\"ca\"} 2100000000.0",
        "# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total ",
        "\nprocess_resident_memory_bytes ",
        "\nprocess_open_fds ",
        "\nprocess_start_time_seconds ",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    let value = |name: &str| -> f64 {
        let prefix = format!("\n{name} ");
        let start = text.find(&prefix).unwrap() + prefix.len();
        text[start..].lines().next().unwrap().parse().unwrap()
    };
    assert!(value("process_resident_memory_bytes") > 1_000_000.0);
    assert!(
        value("process_open_fds") >= 3.0,
        "stdin, stdout, stderr at least"
    );
    let started = value("process_start_time_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        started <= now + 1.0 && started > now - 3600.0,
        "started within the hour: {started} (now {now})"
    );
}

#[test]
fn every_metric_served_has_a_prometheus_text_form() {
    let metrics = Metrics::new(None);
    metrics.reconciled(Controller::Placement, ReconcileResult::Ok, 0.01);
    metrics.set_leader(true);
    let openmetrics = metrics.encode().unwrap();
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    let text = exposition::prometheus_text(&openmetrics).unwrap();
    assert!(
        text.contains("# TYPE ocifit_reconciles_total counter\n")
            && text.contains("# TYPE process_cpu_seconds_total counter\n")
            && !text.contains("# EOF"),
        "{text}"
    );
}

#[test]
fn camel_case_names_become_snake_case_and_snake_case_stays() {
    for (name, label) in [
        ("Ok", "ok"),
        ("ArtifactError", "artifact_error"),
        ("NodeNameSet", "node_name_set"),
        ("TLSError", "tls_error"),
        ("Step2Held", "step2_held"),
        ("True", "true"),
        ("not_found", "not_found"),
        ("/placement", "/placement"),
        ("ÉtatPrêt", "État_prêt"),
        ("éA", "éa"),
    ] {
        assert_eq!(snake_case(name), label, "{name}");
    }
}
