//! Helm's conventions in what the chart renders: names that follow `nameOverride` and
//! `fullnameOverride` everywhere (and the flags that tell `ocifit run` those names), the
//! `serviceAccount` block, the security contexts as values with today's hardening as defaults,
//! `hostNetwork`, the extra volumes, and the ServiceMonitor under `monitoring.serviceMonitor` (the
//! old `metrics.serviceMonitor` still read for one release).

use ocifit_testkit::chart::{HOST_NETWORK_AND_EXTRAS, SERVICE_MONITOR};
use serde_json::{Value, json};

use super::{documents, find, has, render};

fn deployment_pod(rendered: &[Value], name: &str) -> Value {
    find(rendered, "Deployment", name)["spec"]["template"]["spec"].clone()
}

fn args(pod: &Value) -> Vec<String> {
    pod["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_owned())
        .collect()
}

/// The names of the objects `ocifit run` and Kubernetes look up by name: each flag the Deployment
/// passes names an object the chart rendered.
fn assert_flags_name_rendered_objects(rendered: &[Value], deployment: &str) {
    let args = args(&deployment_pod(rendered, deployment));
    let flag = |name: &str| -> String {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("--{name}=")))
            .unwrap_or_else(|| panic!("--{name} in {args:?}"))
            .to_owned()
    };
    assert!(has(
        rendered,
        "MutatingWebhookConfiguration",
        &flag("webhook-configuration")
    ));
    assert!(has(rendered, "Service", &flag("webhook-service")));
    assert!(has(rendered, "Lease", &flag("lease-name")));
    let secret = flag("webhook-secret");
    let role = rendered
        .iter()
        .find(|d| d["kind"] == "Role" && d["rules"][1]["resourceNames"] == json!([secret]))
        .expect("a Role on the webhook Secret");
    assert!(role["metadata"]["name"].as_str().is_some());
}

#[tokio::test]
async fn every_object_is_named_after_fullname_override_and_the_flags_follow() {
    let rendered = documents(
        &render(&["fullnameOverride=acme", "monitoring.enabled=true"])
            .await
            .unwrap(),
    );
    let mut names = Vec::new();
    for document in &rendered {
        let name = document["metadata"]["name"].as_str().expect("a name");
        if document["kind"] == "CustomResourceDefinition" {
            continue;
        }
        assert!(
            name == "acme" || name.starts_with("acme-"),
            "{} {name} does not follow fullnameOverride",
            document["kind"]
        );
        names.push(name);
    }
    assert!(names.contains(&"acme-controller"), "{names:?}");
    assert_flags_name_rendered_objects(&rendered, "acme-controller");
    let pod = deployment_pod(&rendered, "acme-controller");
    assert_eq!(pod["serviceAccountName"], "acme-controller");
    let webhook = &find(&rendered, "MutatingWebhookConfiguration", "acme")["webhooks"][0];
    assert_eq!(webhook["clientConfig"]["service"]["name"], "acme-webhook");
    // The replica-down alert counts the scrape job a ServiceMonitor names after the metrics Service.
    let rules = find(&rendered, "ConfigMap", "acme-alerts")["data"]["ocifit-alerts.yaml"]
        .as_str()
        .expect("the rules")
        .to_owned();
    assert!(rules.contains("job=\"acme-metrics\""), "{rules}");
    assert!(has(&rendered, "Service", "acme-metrics"));
}

#[tokio::test]
async fn another_release_name_prefixes_every_name_and_name_override_renames_the_label() {
    let rendered = documents(
        &ocifit_testkit::chart::helm(
            &[
                "template",
                "team",
                ocifit_testkit::chart::chart_dir().to_str().unwrap(),
                "--namespace",
                "tools",
                "--set",
                "nameOverride=fit",
            ],
            None,
        )
        .await
        .unwrap(),
    );
    let deployment = find(&rendered, "Deployment", "team-fit-controller");
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
        "fit"
    );
    assert_flags_name_rendered_objects(&rendered, "team-fit-controller");
    let binding = find(&rendered, "ClusterRoleBinding", "team-fit-controller");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "team-fit-controller", "namespace": "tools"}])
    );
    // The default release name keeps the names every install had.
    let default = documents(&render(&[]).await.unwrap());
    assert!(has(&default, "Deployment", "ocifit-controller"));
    assert!(has(&default, "MutatingWebhookConfiguration", "ocifit"));
}

#[tokio::test]
async fn the_service_account_block_creates_annotates_or_names_an_existing_one() {
    let annotated = documents(
        &render(&[
            "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/r",
        ])
        .await
        .unwrap(),
    );
    assert_eq!(
        find(&annotated, "ServiceAccount", "ocifit-controller")["metadata"]["annotations"],
        json!({"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"})
    );

    let existing = documents(
        &render(&[
            "serviceAccount.create=false",
            "serviceAccount.name=platform-ocifit",
        ])
        .await
        .unwrap(),
    );
    assert!(!has(&existing, "ServiceAccount", "ocifit-controller"));
    assert_eq!(
        deployment_pod(&existing, "ocifit-controller")["serviceAccountName"],
        "platform-ocifit"
    );
    for document in existing.iter().filter(|d| {
        d.get("subjects").is_some()
            && !["ocifit-release-gates", "ocifit-test"]
                .contains(&d["metadata"]["name"].as_str().unwrap())
    }) {
        assert_eq!(
            document["subjects"][0]["name"], "platform-ocifit",
            "{}",
            document["metadata"]["name"]
        );
    }
    let policy = find(&existing, "ValidatingAdmissionPolicy", "ocifit-least-power");
    assert!(
        policy["spec"]["matchConditions"][0]["expression"]
            .as_str()
            .unwrap()
            .contains("system:serviceaccount:ocifit-system:platform-ocifit")
    );

    let err = render(&["serviceAccount.create=false"]).await.unwrap_err();
    assert!(err.contains("serviceAccount.name is required"), "{err}");
}

#[tokio::test]
async fn security_contexts_are_values_hardened_by_default_and_the_old_run_as_user_is_refused() {
    let rendered = documents(
        &render(&[
            "podSecurityContext.runAsUser=1001",
            "podSecurityContext.fsGroup=1001",
            "securityContext.runAsUser=1001",
        ])
        .await
        .unwrap(),
    );
    let pod = deployment_pod(&rendered, "ocifit-controller");
    assert_eq!(pod["securityContext"]["runAsUser"], 1001);
    assert_eq!(pod["securityContext"]["fsGroup"], 1001);
    // Keys not overridden keep their hardened defaults.
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0]["securityContext"];
    assert_eq!(container["runAsUser"], 1001);
    assert_eq!(container["readOnlyRootFilesystem"], true);
    assert_eq!(container["capabilities"]["drop"], json!(["ALL"]));
    let hook = &find(&rendered, "Job", "ocifit-release-gates")["spec"]["template"]["spec"];
    assert_eq!(hook["securityContext"], pod["securityContext"]);
    assert_eq!(hook["containers"][0]["securityContext"], *container);

    let err = render(&["runAsUser=1001"]).await.unwrap_err();
    assert!(
        err.contains("podSecurityContext.runAsUser") && err.contains("securityContext.runAsUser"),
        "{err}"
    );
}

#[tokio::test]
async fn host_network_and_the_extra_volumes_env_and_args_reach_the_pod() {
    let rendered = documents(&render(HOST_NETWORK_AND_EXTRAS).await.unwrap());
    let pod = deployment_pod(&rendered, "ocifit-controller");
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["dnsPolicy"], "ClusterFirstWithHostNet");
    assert_eq!(
        pod["volumes"],
        json!([{"name": "bundle", "configMap": {"name": "ca-bundle"}}])
    );
    let container = &pod["containers"][0];
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": "bundle", "mountPath": "/etc/bundle"}])
    );
    assert!(
        container["env"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "HTTPS_PROXY", "value": "http://proxy:3128"}))
    );
    assert!(args(&pod).contains(&"--concurrency=8".to_owned()));

    let default = deployment_pod(&documents(&render(&[]).await.unwrap()), "ocifit-controller");
    assert_eq!(default.get("hostNetwork"), None);
}

#[tokio::test]
async fn the_service_monitor_lives_under_monitoring_with_its_scrape_settings() {
    let rendered = documents(&render(SERVICE_MONITOR).await.unwrap());
    let monitor = find(&rendered, "ServiceMonitor", "ocifit");
    assert_eq!(monitor["metadata"]["namespace"], "monitoring");
    assert_eq!(
        monitor["spec"]["namespaceSelector"],
        json!({"matchNames": ["ocifit-system"]})
    );
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["interval"], "30s");
    assert_eq!(endpoint["scrapeTimeout"], "10s");
    assert_eq!(
        endpoint["relabelings"],
        json!([{"targetLabel": "cluster", "replacement": "east"}])
    );
    assert_eq!(endpoint["metricRelabelings"][0]["action"], "drop");
    assert!(!has(
        &documents(&render(&[]).await.unwrap()),
        "ServiceMonitor",
        "ocifit"
    ));
}

#[tokio::test]
async fn the_old_service_monitor_keys_still_work_for_one_release() {
    let rendered = documents(
        &render(&[
            "metrics.serviceMonitor.enabled=true",
            "metrics.serviceMonitor.interval=15s",
            "metrics.serviceMonitor.labels.release=prometheus",
        ])
        .await
        .unwrap(),
    );
    let monitor = find(&rendered, "ServiceMonitor", "ocifit");
    assert_eq!(monitor["spec"]["endpoints"][0]["interval"], "15s");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    let err = render(&["metrics.serviceMonitor.scrapeTimout=5s"])
        .await
        .unwrap_err();
    assert!(err.contains("scrapeTimout"), "{err}");
}

#[tokio::test]
async fn artifact_cache_rights_are_aggregated_into_the_default_roles() {
    let rendered = documents(&render(&[]).await.unwrap());
    let edit = find(&rendered, "ClusterRole", "ocifit-artifactcaches-edit");
    let labels = &edit["metadata"]["labels"];
    assert_eq!(
        labels["rbac.authorization.k8s.io/aggregate-to-edit"],
        "true"
    );
    assert_eq!(
        labels["rbac.authorization.k8s.io/aggregate-to-admin"],
        "true"
    );
    assert_eq!(
        edit["rules"],
        json!([{"apiGroups": ["ocifit.io"], "resources": ["artifactcaches"],
                "verbs": ["create", "update", "patch", "delete", "deletecollection"]}])
    );
    let view = find(&rendered, "ClusterRole", "ocifit-artifactcaches-view");
    assert_eq!(
        view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"],
        "true"
    );
    assert_eq!(
        view["rules"],
        json!([{"apiGroups": ["ocifit.io"], "resources": ["artifactcaches", "artifactcaches/status"],
                "verbs": ["get", "list", "watch"]}])
    );
    let off = documents(
        &render(&["artifactCache.aggregateRoles=false"])
            .await
            .unwrap(),
    );
    assert!(!has(&off, "ClusterRole", "ocifit-artifactcaches-edit"));
    assert!(!has(&off, "ClusterRole", "ocifit-artifactcaches-view"));
}
