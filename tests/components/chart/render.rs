//! What the chart renders: the Deployment (HA, hardening, probes, flags), the webhook configuration
//! and Services, each TLS mode's objects, and every `ocifit run` setting reaching the command line.

use serde_json::{Value, json};

use ocifit_testkit::chart::NAMESPACE;

use super::{documents, find, has, render};

fn container(rendered: &[Value]) -> &Value {
    &find(rendered, "Deployment", "ocifit-controller")["spec"]["template"]["spec"]["containers"][0]
}

fn args(rendered: &[Value]) -> Vec<String> {
    container(rendered)["args"]
        .as_array()
        .expect("the container has args")
        .iter()
        .map(|a| a.as_str().expect("args are strings").to_owned())
        .collect()
}

#[tokio::test]
async fn the_default_deployment_is_highly_available_hardened_and_probed() {
    let rendered = documents(&render(&[]).await.unwrap());
    let deployment = find(&rendered, "Deployment", "ocifit-controller");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = container(&rendered);

    assert_eq!(deployment["spec"]["replicas"], 2);
    let anti =
        &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(
        anti["podAffinityTerm"]["topologyKey"],
        "kubernetes.io/hostname"
    );
    assert_eq!(
        anti["podAffinityTerm"]["labelSelector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    let pdb = find(&rendered, "PodDisruptionBudget", "ocifit-controller");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(pdb["spec"]["selector"], deployment["spec"]["selector"]);

    assert_eq!(pod["serviceAccountName"], "ocifit-controller");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(container["resources"]["limits"]["memory"], "256Mi");
    assert_eq!(container["resources"]["requests"]["memory"], "64Mi");

    assert_eq!(
        container["livenessProbe"]["httpGet"],
        json!({"path": "/livez", "port": "admin"})
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "admin"})
    );
    let env: Vec<(&str, &str)> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?,
                e["valueFrom"]["fieldRef"]["fieldPath"].as_str()?,
            ))
        })
        .collect();
    assert_eq!(
        env,
        [
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace")
        ]
    );

    let args = args(&rendered);
    assert_eq!(args[0], "run");
    for expected in [
        "--log-format=json",
        "--admin-bind-address=0.0.0.0:8080",
        "--webhook-bind-address=0.0.0.0:8443",
        "--leader-elect=true",
        "--lease-name=ocifit-controller",
        "--manage-webhook-certificate",
        "--webhook-secret=ocifit-webhook-tls",
        "--webhook-service=ocifit-webhook",
        "--webhook-configuration=ocifit",
    ] {
        assert!(
            args.iter().any(|a| a == expected),
            "{expected} missing from {args:?}"
        );
    }
    assert!(
        !args.iter().any(|a| a.starts_with("--tls-cert-file")),
        "{args:?}"
    );
    assert!(pod.get("volumes").is_none(), "managed mode mounts nothing");
}

#[tokio::test]
async fn the_placement_gate_comes_second_fails_open_and_never_sees_opted_out_or_system_pods() {
    let rendered = documents(&render(&[]).await.unwrap());
    let configuration = find(&rendered, "MutatingWebhookConfiguration", "ocifit");
    let webhooks = configuration["webhooks"].as_array().unwrap();
    // Image selection's, the gate, then the artifact cache's two step webhooks.
    assert_eq!(webhooks.len(), 4);
    // Called after image selection's, in the order listed.
    let gate = &webhooks[1];
    assert_eq!(gate["name"], "placement.ocifit.io");
    assert_eq!(gate["failurePolicy"], "Ignore");
    assert_eq!(gate["reinvocationPolicy"], "IfNeeded");
    assert_eq!(gate["sideEffects"], "None");
    assert_eq!(
        gate["clientConfig"],
        json!({"service": {"name": "ocifit-webhook", "namespace": NAMESPACE, "path": "/placement", "port": 443}})
    );
    assert_eq!(
        gate["objectSelector"],
        json!({"matchExpressions": [{"key": "placement.ocifit.io/enabled", "operator": "NotIn", "values": ["false"]}]})
    );
    assert_eq!(
        gate["namespaceSelector"],
        json!({"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]},
            {"key": "placement.ocifit.io/enabled", "operator": "NotIn", "values": ["false"]}
        ]})
    );
    let off = documents(&render(&["placement.enabled=false"]).await.unwrap());
    let configuration = find(&off, "MutatingWebhookConfiguration", "ocifit");
    let names: Vec<&str> = configuration["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|webhook| webhook["name"].as_str())
        .collect();
    assert!(!names.contains(&"placement.ocifit.io"), "{names:?}");
    assert_eq!(names.len(), 3, "{names:?}");
}

#[tokio::test]
async fn the_gates_object_selector_and_reinvocation_are_values_that_keep_the_opt_out() {
    let rendered = documents(
        &render(&[
            "placement.webhook.reinvocationPolicy=Never",
            "placement.webhook.objectSelector.matchLabels.placement=enabled",
            "placement.webhook.objectSelector.matchExpressions[0].key=tier",
            "placement.webhook.objectSelector.matchExpressions[0].operator=In",
            "placement.webhook.objectSelector.matchExpressions[0].values={web,api}",
        ])
        .await
        .unwrap(),
    );
    let configuration = find(&rendered, "MutatingWebhookConfiguration", "ocifit");
    let gate = &configuration["webhooks"][1];
    assert_eq!(gate["name"], "placement.ocifit.io");
    assert_eq!(gate["reinvocationPolicy"], "Never");
    assert_eq!(
        gate["objectSelector"],
        json!({
            "matchLabels": {"placement": "enabled"},
            "matchExpressions": [
                {"key": "placement.ocifit.io/enabled", "operator": "NotIn", "values": ["false"]},
                {"key": "tier", "operator": "In", "values": ["web", "api"]}
            ]
        })
    );
    // Image selection's webhook keeps its own settings.
    let selection = &configuration["webhooks"][0];
    assert_eq!(selection["reinvocationPolicy"], "IfNeeded");
    assert_eq!(
        selection["objectSelector"],
        json!({"matchLabels": {"oci.image.compatibilities.selection/enabled": "true"}})
    );
}

#[tokio::test]
async fn a_placement_docker_config_secret_is_mounted_and_given_to_placement_only() {
    let rendered = documents(
        &render(&["placement.dockerConfigSecret=placement-regcred"])
            .await
            .unwrap(),
    );
    let flags = args(&rendered);
    assert!(
        flags.iter().any(|a| a
            == "--placement-docker-config=/etc/ocifit/placement-credentials/.dockerconfigjson"),
        "{flags:?}"
    );
    assert!(
        !flags.iter().any(|a| a.starts_with("--docker-config")),
        "image selection's credentials stay unset: {flags:?}"
    );
    let pod = &find(&rendered, "Deployment", "ocifit-controller")["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"],
        json!([{"name": "placement-credentials", "secret": {
            "secretName": "placement-regcred",
            "items": [{"key": ".dockerconfigjson", "path": ".dockerconfigjson"}]
        }}])
    );
    assert_eq!(
        container(&rendered)["volumeMounts"],
        json!([{"name": "placement-credentials", "mountPath": "/etc/ocifit/placement-credentials", "readOnly": true}])
    );
    let default = documents(&render(&[]).await.unwrap());
    assert!(
        !args(&default)
            .iter()
            .any(|a| a.starts_with("--placement-docker-config")),
        "no credentials of ocifit's own unless given"
    );
}

#[tokio::test]
async fn registry_mirrors_are_a_configmap_mounted_as_containerds_certs_d_that_ocifit_reads() {
    let hosts = r#"registry.mirrors.docker\.io=server = "https://registry-1.docker.io""#;
    let default = r#"registry.mirrors._default=[host."https://mirror.example.com"]"#;
    let rendered = documents(&render(&[hosts, default]).await.unwrap());
    let flags = args(&rendered);
    assert!(
        flags
            .iter()
            .any(|a| a == "--registry-mirrors-dir=/etc/ocifit/registry-mirrors"),
        "{flags:?}"
    );
    let deployment = find(&rendered, "Deployment", "ocifit-controller");
    let pod = &deployment["spec"]["template"];
    assert!(
        pod["metadata"]["annotations"]["checksum/registry-mirrors"].is_string(),
        "a change rolls the pods: {pod}"
    );
    assert_eq!(
        container(&rendered)["volumeMounts"],
        json!([{"name": "registry-mirrors", "mountPath": "/etc/ocifit/registry-mirrors", "readOnly": true}])
    );
    let volume = &pod["spec"]["volumes"][0];
    assert_eq!(volume["name"], "registry-mirrors");
    let config_map = find(&rendered, "ConfigMap", "ocifit-registry-mirrors");
    assert_eq!(volume["configMap"]["name"], "ocifit-registry-mirrors");
    // Mounted as the kubelet mounts it (each item's key at its path), ocifit reads it.
    let dir = tempfile::tempdir().unwrap();
    for item in volume["configMap"]["items"].as_array().unwrap() {
        let path = dir.path().join(item["path"].as_str().unwrap());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let key = item["key"].as_str().unwrap();
        std::fs::write(&path, config_map["data"][key].as_str().unwrap()).unwrap();
    }
    assert!(dir.path().join("docker.io/hosts.toml").is_file());
    let mirrors = ocifit::registry::Mirrors::load(dir.path()).unwrap();
    assert!(!mirrors.is_empty());
    let none = documents(&render(&[]).await.unwrap());
    assert!(!has(&none, "ConfigMap", "ocifit-registry-mirrors"));
    assert!(
        !args(&none)
            .iter()
            .any(|a| a.starts_with("--registry-mirrors-dir"))
    );
}

#[tokio::test]
async fn the_webhook_sees_only_opted_in_pods_outside_kube_system_and_its_own_namespace() {
    let rendered = documents(&render(&[]).await.unwrap());
    let configuration = find(&rendered, "MutatingWebhookConfiguration", "ocifit");
    let webhook = &configuration["webhooks"][0];

    assert_eq!(webhook["name"], "pods.ocifit.io");
    assert_eq!(webhook["failurePolicy"], "Fail");
    assert_eq!(webhook["timeoutSeconds"], 5);
    assert_eq!(webhook["reinvocationPolicy"], "IfNeeded");
    // Events are written for admitted pods, never for dry runs.
    assert_eq!(webhook["sideEffects"], "NoneOnDryRun");
    assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]));
    assert_eq!(
        webhook["clientConfig"],
        json!({"service": {"name": "ocifit-webhook", "namespace": NAMESPACE, "path": "/mutate", "port": 443}}),
        "managed mode leaves caBundle to ocifit"
    );
    assert_eq!(
        webhook["objectSelector"],
        json!({"matchLabels": {"oci.image.compatibilities.selection/enabled": "true"}})
    );
    assert_eq!(
        webhook["namespaceSelector"],
        json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]}]})
    );
    let service = find(&rendered, "Service", "ocifit-webhook");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}])
    );
    let metrics = find(&rendered, "Service", "ocifit-metrics");
    assert_eq!(metrics["spec"]["ports"][0]["port"], 8080);

    let custom = documents(
        &render(&[
            "webhook.namespaceSelector.matchExpressions[0].key=env",
            "webhook.namespaceSelector.matchExpressions[0].operator=Exists",
        ])
        .await
        .unwrap(),
    );
    let selector = &find(&custom, "MutatingWebhookConfiguration", "ocifit")["webhooks"][0]["namespaceSelector"];
    assert_eq!(
        selector["matchExpressions"][0]["values"],
        json!(["kube-system", NAMESPACE]),
        "always excluded"
    );
    assert_eq!(
        selector["matchExpressions"][1],
        json!({"key": "env", "operator": "Exists"})
    );
}

#[tokio::test]
async fn uninstall_runs_one_job_that_releases_every_gate_with_rights_on_pods_only() {
    let rendered = documents(&render(&[]).await.unwrap());
    let job = find(&rendered, "Job", "ocifit-release-gates");
    // After the webhook is gone (nothing gates any more). The rights are removed once the Job
    // ended, even when it failed; the Job stays after a failure, for its log.
    for (kind, name, deleted) in [
        (
            "ServiceAccount",
            "ocifit-release-gates",
            "before-hook-creation,hook-succeeded,hook-failed",
        ),
        (
            "ClusterRole",
            "ocifit-release-gates",
            "before-hook-creation,hook-succeeded,hook-failed",
        ),
        (
            "ClusterRoleBinding",
            "ocifit-release-gates",
            "before-hook-creation,hook-succeeded,hook-failed",
        ),
        (
            "Job",
            "ocifit-release-gates",
            "before-hook-creation,hook-succeeded",
        ),
    ] {
        let annotations = &find(&rendered, kind, name)["metadata"]["annotations"];
        assert_eq!(annotations["helm.sh/hook"], "post-delete", "{kind}");
        assert_eq!(annotations["helm.sh/hook-delete-policy"], deleted, "{kind}");
    }
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "ocifit-release-gates");
    assert_eq!(pod["containers"][0]["args"], json!(["release-gates"]));
    assert_eq!(
        pod["containers"][0]["image"],
        find(&rendered, "Deployment", "ocifit-controller")["spec"]["template"]["spec"]["containers"]
            [0]["image"]
    );
    assert_eq!(
        find(&rendered, "ClusterRole", "ocifit-release-gates")["rules"],
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch"]}])
    );
    // Its pod is not one of the operator's (the Service and the PodDisruptionBudget select those).
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"],
        "release-gates"
    );

    let off = documents(
        &render(&["placement.releaseGatesOnUninstall=false"])
            .await
            .unwrap(),
    );
    assert!(!has(&off, "Job", "ocifit-release-gates"));
    assert!(!has(&off, "ClusterRole", "ocifit-release-gates"));
    // Image selection holds pods too: with placement off, the hook still releases them.
    let no_placement = documents(&render(&["placement.enabled=false"]).await.unwrap());
    assert_eq!(
        find(&no_placement, "Job", "ocifit-release-gates")["spec"]["template"]["spec"]["containers"]
            [0]["args"],
        json!(["release-gates"])
    );
}

#[tokio::test]
async fn the_step_webhooks_see_pods_and_jobs_of_opted_in_namespaces_only_and_never_a_caches_pods() {
    let rendered = documents(&render(&["image.tag=1.2.3"]).await.unwrap());
    let webhooks = &find(&rendered, "MutatingWebhookConfiguration", "ocifit")["webhooks"];
    // After image selection's and placement's gate.
    for (at, kind, group) in [(2, "pods", ""), (3, "jobs", "batch")] {
        let webhook = &webhooks[at];
        assert_eq!(webhook["name"], format!("{kind}.steps.artifacts.ocifit.io"));
        assert_eq!(webhook["failurePolicy"], "Fail");
        assert_eq!(webhook["sideEffects"], "None");
        assert_eq!(webhook["reinvocationPolicy"], "Never");
        assert_eq!(
            webhook["clientConfig"]["service"]["path"],
            format!("/artifacts/{kind}")
        );
        assert_eq!(
            webhook["rules"],
            json!([{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": [kind], "scope": "Namespaced"}])
        );
        assert_eq!(
            webhook["namespaceSelector"],
            json!({
                "matchLabels": {"artifacts.ocifit.io/steps": "enabled"},
                "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]}]
            })
        );
        assert_eq!(
            webhook["objectSelector"],
            json!({"matchExpressions": [{"key": "app.kubernetes.io/managed-by", "operator": "NotIn", "values": ["ocifit"]}]})
        );
    }
    assert!(
        args(&rendered).contains(&"--artifact-helper-image=ghcr.io/ocifit/ocifit:1.2.3".to_owned()),
        "the helpers default to ocifit's own image"
    );

    let other = documents(
        &render(&["artifactCache.helperImage=registry.example/helper:v1"])
            .await
            .unwrap(),
    );
    assert!(
        args(&other).contains(&"--artifact-helper-image=registry.example/helper:v1".to_owned())
    );

    let off = documents(&render(&["artifactCache.enabled=false"]).await.unwrap());
    let webhooks = find(&off, "MutatingWebhookConfiguration", "ocifit")["webhooks"]
        .as_array()
        .expect("webhooks")
        .len();
    assert_eq!(
        webhooks, 2,
        "only image selection's webhook and placement's gate"
    );
    assert!(
        !args(&off)
            .iter()
            .any(|a| a.starts_with("--artifact-helper-image"))
    );
}

#[tokio::test]
async fn cert_manager_mode_issues_a_ca_and_a_serving_certificate_mounted_into_the_pods() {
    let rendered = documents(&render(&["tls.mode=certManager"]).await.unwrap());

    assert_eq!(
        find(&rendered, "Issuer", "ocifit-selfsigned")["spec"],
        json!({"selfSigned": {}})
    );
    let ca = find(&rendered, "Certificate", "ocifit-ca");
    assert_eq!(ca["spec"]["isCA"], true);
    assert_eq!(ca["spec"]["issuerRef"]["name"], "ocifit-selfsigned");
    assert_eq!(
        find(&rendered, "Issuer", "ocifit-ca")["spec"]["ca"]["secretName"],
        ca["spec"]["secretName"]
    );
    let serving = find(&rendered, "Certificate", "ocifit-webhook");
    assert_eq!(serving["spec"]["issuerRef"]["name"], "ocifit-ca");
    assert_eq!(
        serving["spec"]["dnsNames"],
        json!([
            "ocifit-webhook",
            "ocifit-webhook.ocifit-system",
            "ocifit-webhook.ocifit-system.svc",
            "ocifit-webhook.ocifit-system.svc.cluster.local"
        ])
    );
    let configuration = find(&rendered, "MutatingWebhookConfiguration", "ocifit");
    assert_eq!(
        configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "ocifit-system/ocifit-webhook"
    );
    assert!(
        configuration["webhooks"][0]["clientConfig"]
            .get("caBundle")
            .is_none()
    );

    let pod = &find(&rendered, "Deployment", "ocifit-controller")["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"][0]["secret"]["secretName"],
        serving["spec"]["secretName"]
    );
    assert_eq!(
        pod["containers"][0]["volumeMounts"][0]["mountPath"],
        "/etc/ocifit/tls"
    );
    let args = args(&rendered);
    assert!(
        args.contains(&"--tls-cert-file=/etc/ocifit/tls/tls.crt".to_owned()),
        "{args:?}"
    );
    assert!(
        args.contains(&"--tls-key-file=/etc/ocifit/tls/tls.key".to_owned()),
        "{args:?}"
    );
    assert!(
        !args.contains(&"--manage-webhook-certificate".to_owned()),
        "{args:?}"
    );
}

#[tokio::test]
async fn secret_mode_mounts_the_users_secret_and_sets_its_ca_bundle() {
    let rendered = documents(
        &render(&[
            "tls.mode=secret",
            "tls.secret.name=my-tls",
            "tls.secret.caBundle=Y2E=",
        ])
        .await
        .unwrap(),
    );

    let configuration = find(&rendered, "MutatingWebhookConfiguration", "ocifit");
    assert_eq!(
        configuration["webhooks"][0]["clientConfig"]["caBundle"],
        "Y2E="
    );
    let pod = &find(&rendered, "Deployment", "ocifit-controller")["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "my-tls");
    assert!(!rendered.iter().any(|d| d["kind"] == "Certificate"));
}

#[tokio::test]
async fn every_run_setting_reaches_the_command_line() {
    let rendered = documents(
        &render(&[
            "registry.allowed={registry.local:5000,*.example.com}",
            "registry.plainHttp={registry.local:5000}",
            "registry.caSecret=registry-ca",
            "registry.credentialsSecret=regcred",
            "registry.timeout=3s",
            "registry.tagTtl=1s",
            "registry.maxArtifactBytes=2097152",
            "leaderElection.leaseDuration=20s",
            "leaderElection.leaseGrace=7s",
            "nfd.namespace=nfd",
            "nfd.discoveryInterval=1m",
            "controller.debounce=500ms",
            "controller.concurrency=8",
            "controller.maxRetryInterval=10m",
            "extraArgs={--kubeconfig=/x}",
        ])
        .await
        .unwrap(),
    );

    let args = args(&rendered);
    for expected in [
        "--allowed-registries=registry.local:5000",
        "--allowed-registries=*.example.com",
        "--plain-http-registry=registry.local:5000",
        "--ca-file=/etc/ocifit/registry-ca/ca.crt",
        "--docker-config=/etc/ocifit/registry-credentials/.dockerconfigjson",
        "--registry-timeout=3s",
        "--registry-tag-ttl=1s",
        "--max-artifact-bytes=2097152",
        "--lease-duration=20s",
        "--lease-grace=7s",
        "--nfd-namespace=nfd",
        "--nfd-discovery-interval=1m",
        "--debounce=500ms",
        "--concurrency=8",
        "--max-retry-interval=10m",
        "--kubeconfig=/x",
    ] {
        assert!(
            args.iter().any(|a| a == expected),
            "{expected} missing from {args:?}"
        );
    }
    let mounts = &container(&rendered)["volumeMounts"];
    assert_eq!(mounts.as_array().unwrap().len(), 2, "{mounts}");
}

#[tokio::test]
async fn the_chart_creates_the_lease_and_the_role_reaches_that_lease_only() {
    let rendered = documents(
        &render(&["leaderElection.leaseName=my-lease"])
            .await
            .unwrap(),
    );
    let lease = find(&rendered, "Lease", "my-lease");
    assert_eq!(lease["metadata"]["namespace"], NAMESPACE);
    assert!(
        lease.get("spec").is_none(),
        "the operator fills in the holder"
    );
    let role = find(&rendered, "Role", "ocifit-leader-election");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "resourceNames": ["my-lease"], "verbs": ["get", "list", "watch", "update", "patch"]}]),
        "no create: RBAC cannot limit it to a name"
    );
    let single = documents(
        &render(&["leaderElection.enabled=false", "replicaCount=1"])
            .await
            .unwrap(),
    );
    assert!(!has(&single, "Lease", "ocifit-controller"));
}

/// The toleration of node tainting's taint.
fn tolerates_own_taint(pod: &Value) -> bool {
    pod["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|toleration| {
            *toleration
                == json!({"key": "placement.ocifit.io/arch", "operator": "Exists", "effect": "NoSchedule"})
        })
}

#[tokio::test]
async fn ocifits_own_pods_tolerate_the_taint_its_node_tainting_adds_beside_the_users() {
    let rendered = documents(&render(&[]).await.unwrap());
    let operator = &find(&rendered, "Deployment", "ocifit-controller")["spec"]["template"]["spec"];
    let hook = &find(&rendered, "Job", "ocifit-release-gates")["spec"]["template"]["spec"];
    for pod in [operator, hook] {
        assert!(tolerates_own_taint(pod), "{}", pod["tolerations"]);
    }
    let own = documents(
        &render(&[
            "tolerations[0].key=dedicated",
            "tolerations[0].operator=Exists",
        ])
        .await
        .unwrap(),
    );
    let operator = &find(&own, "Deployment", "ocifit-controller")["spec"]["template"]["spec"];
    assert!(tolerates_own_taint(operator));
    assert_eq!(
        operator["tolerations"][1],
        json!({"key": "dedicated", "operator": "Exists"})
    );
}

#[tokio::test]
async fn the_network_policy_opens_only_the_webhook_and_admin_ports_and_narrows_to_given_sources() {
    let rendered = documents(&render(&[]).await.unwrap());
    let deployment = find(&rendered, "Deployment", "ocifit-controller");
    let policy = find(&rendered, "NetworkPolicy", "ocifit-controller");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    // By default any source may reach the two ports (the apiserver's address is the cluster's),
    // and nothing else is open.
    assert_eq!(
        policy["spec"]["ingress"],
        json!([
            {"ports": [{"port": 8443, "protocol": "TCP"}]},
            {"ports": [{"port": 8080, "protocol": "TCP"}]},
        ])
    );

    let narrowed = documents(
        &render(&[
            "networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.0/24",
            "networkPolicy.adminFrom[0].namespaceSelector.matchLabels.name=monitoring",
        ])
        .await
        .unwrap(),
    );
    let ingress = &find(&narrowed, "NetworkPolicy", "ocifit-controller")["spec"]["ingress"];
    assert_eq!(
        ingress[0]["from"],
        json!([{"ipBlock": {"cidr": "10.0.0.0/24"}}])
    );
    assert_eq!(
        ingress[1]["from"],
        json!([{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}])
    );

    let off = documents(&render(&["networkPolicy.enabled=false"]).await.unwrap());
    assert!(!has(&off, "NetworkPolicy", "ocifit-controller"));
}

#[tokio::test]
async fn a_client_ca_secret_is_mounted_and_required_of_the_webhooks_clients() {
    let rendered = documents(
        &render(&["webhook.clientCASecret=apiserver-clients"])
            .await
            .unwrap(),
    );
    assert!(
        args(&rendered)
            .iter()
            .any(|a| a == "--webhook-client-ca=/etc/ocifit/webhook-client-ca/ca.crt"),
        "{:?}",
        args(&rendered)
    );
    let pod = &find(&rendered, "Deployment", "ocifit-controller")["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"],
        json!([{"name": "webhook-client-ca", "secret": {"secretName": "apiserver-clients"}}])
    );
    assert_eq!(
        container(&rendered)["volumeMounts"],
        json!([{"name": "webhook-client-ca", "mountPath": "/etc/ocifit/webhook-client-ca", "readOnly": true}])
    );
    let default = documents(&render(&[]).await.unwrap());
    assert!(
        !args(&default)
            .iter()
            .any(|a| a.starts_with("--webhook-client-ca")),
        "no client check unless asked"
    );
}
