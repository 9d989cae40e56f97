//! Setting the demo's stage: cluster and registry, the flavor images and artifact, the nodes, the
//! CRD, `ocifit run` with its webhook certificate and registration, the policy and the pods.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;

use super::{DemoOptions, FLAVOR_LABEL, FLAVOR_PODS, OPT_IN_LABEL, say};
use crate::cluster::Cluster;
use crate::error::{Error, Result, io};
use crate::net::free_port;
use crate::pki::CertificateAuthority;
use crate::process::Process;
use crate::registry::OrasArtifact;
use crate::{FakeNode, PodWebhook, apply_crd_dir, create_namespace, create_node, dev};

/// The ocifit compatibility layer's media type.
const COMPAT_LAYER: &str = "application/vnd.oci.image.compatibilities.v1+json";
/// Where the artifact is pushed in the demo registry.
const ARTIFACT: &str = "ocifit/flavor-compat:v1";
/// The operator's namespace (its Lease).
const NAMESPACE: &str = "ocifit-system";
/// Where the pods go.
const POD_NAMESPACE: &str = "default";

/// What the stage holds once set.
pub(super) struct Staged {
    pub cluster: Cluster,
    pub ocifit: Process,
    /// Flavor → the image the artifact names for it.
    pub images: BTreeMap<String, String>,
}

pub(super) async fn stage(options: &DemoOptions) -> Result<Staged> {
    say(
        "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and a registry",
    );
    let cluster = dev::full_cluster(None).start().await?;
    say(dev::summary(&cluster).lines().next().unwrap_or_default());
    let client = cluster.client()?;
    let images = push_flavors(&cluster, options).await?;
    create_nodes(&cluster, options).await?;
    apply_crd_dir(&client, &options.repo.join("crds")).await?;
    create_namespace(&client, NAMESPACE).await?;
    let mut ocifit = start_ocifit(&cluster, options).await?;
    apply_policy(&cluster, options).await?;
    wait_policy_ready(&cluster, &mut ocifit, options.timeout).await?;
    wait_webhook(&cluster, &mut ocifit, options).await?;
    for name in FLAVOR_PODS {
        let path = options
            .repo
            .join("example/pods")
            .join(format!("{name}.yaml"));
        cluster
            .kubectl([
                "apply",
                "-n",
                POD_NAMESPACE,
                "-f",
                &path.display().to_string(),
            ])
            .await?;
    }
    say("applied the vanilla, chocolate and strawberry pods (example/pods/)");
    Ok(Staged {
        cluster,
        ocifit,
        images,
    })
}

/// Pushes a small linux/amd64 + linux/arm64 image for each of the artifact's tags
/// (`<registry>/library/<tag>`) with crane, then the artifact with its tags pointed at them,
/// with the ORAS SDK: the demo needs no network, and the platform check reads real indexes.
async fn push_flavors(
    cluster: &Cluster,
    options: &DemoOptions,
) -> Result<BTreeMap<String, String>> {
    let registry = cluster.registry().ok_or_else(|| Error::Format {
        action: "push the flavor example".into(),
        message: "the demo cluster has no registry".into(),
    })?;
    let source = options.repo.join("example/flavor-compat.json");
    let text = std::fs::read_to_string(&source).map_err(io("read", &source))?;
    let mut artifact: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::Format {
            action: format!("read {}", source.display()),
            message: e.to_string(),
        })?;
    let mut images = BTreeMap::new();
    let sets = artifact["compatibilities"]
        .as_array_mut()
        .ok_or_else(|| Error::Format {
            action: format!("read {}", source.display()),
            message: "no compatibilities list".into(),
        })?;
    for set in sets {
        let Some(tag) = set["tag"].as_str().map(str::to_owned) else {
            continue;
        };
        let (repository, version) = tag.split_once(':').unwrap_or((tag.as_str(), "latest"));
        let pushed = registry
            .push_multi_platform(
                &format!("library/{repository}"),
                version,
                &["linux/amd64", "linux/arm64"],
            )
            .await?;
        say(&format!(
            "pushed {} (linux/amd64, linux/arm64) with crane",
            pushed.reference
        ));
        if let Some(flavor) = flavor_of(set) {
            images.insert(flavor, pushed.reference.clone());
        }
        set["tag"] = serde_json::Value::String(pushed.reference);
    }
    let file = options.state_dir.join("flavor-compat.json");
    let json = serde_json::to_string_pretty(&artifact).map_err(|e| Error::Format {
        action: "write the demo's artifact".into(),
        message: e.to_string(),
    })?;
    std::fs::write(&file, json).map_err(io("write", &file))?;
    let reference = registry.reference(ARTIFACT);
    let digest = registry
        .push_artifact(&OrasArtifact::new(&reference, &file, COMPAT_LAYER))
        .await?;
    say(&format!(
        "pushed example/flavor-compat.json (tags pointed at those images) as {reference} ({digest}) with the ORAS SDK"
    ));
    Ok(images)
}

/// The flavor a set's first rule asks for (`In [flavor]` on the flavor label).
fn flavor_of(set: &serde_json::Value) -> Option<String> {
    let expression = &set["rules"][0]["matchFeatures"][0]["matchExpressions"][0];
    (expression["key"] == FLAVOR_LABEL)
        .then(|| expression["value"][0].as_str().map(str::to_owned))
        .flatten()
}

/// The nodes of `example/flavor-nodes.json`, with their labels, kept Ready by kwok.
async fn create_nodes(cluster: &Cluster, options: &DemoOptions) -> Result<()> {
    let path = options.repo.join("example/flavor-nodes.json");
    let text = std::fs::read_to_string(&path).map_err(io("read", &path))?;
    let list: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::Format {
        action: format!("read {}", path.display()),
        message: e.to_string(),
    })?;
    let client = cluster.client()?;
    let mut names = Vec::new();
    for item in list["items"].as_array().into_iter().flatten() {
        let Some(name) = item["metadata"]["name"].as_str() else {
            continue;
        };
        let mut node = FakeNode::new(name);
        for (key, value) in item["metadata"]["labels"].as_object().into_iter().flatten() {
            node = node.label(key, value.as_str().unwrap_or_default());
        }
        create_node(&client, &node).await?;
        names.push(name.to_owned());
    }
    say(&format!(
        "created nodes {} (example/flavor-nodes.json)",
        names.join(", ")
    ));
    Ok(())
}

/// Starts `ocifit run` (controller and webhook) on the host, serving a certificate for
/// 127.0.0.1 from a demo CA, and registers the webhook for opted-in pods.
async fn start_ocifit(cluster: &Cluster, options: &DemoOptions) -> Result<Process> {
    let ca = CertificateAuthority::new("ocifit demo CA")?;
    let serving = ca.issue_server("ocifit-webhook", &["127.0.0.1"])?;
    let cert = options.state_dir.join("webhook.crt");
    let key = options.state_dir.join("webhook.key");
    std::fs::write(&cert, &serving.cert_pem).map_err(io("write", &cert))?;
    std::fs::write(&key, &serving.key_pem).map_err(io("write", &key))?;
    let webhook = format!("127.0.0.1:{}", free_port()?);
    let admin = format!("127.0.0.1:{}", free_port()?);
    let registry = cluster
        .registry()
        .map(|r| r.addr().to_owned())
        .unwrap_or_default();
    let args: Vec<OsString> = [
        "run",
        "--kubeconfig",
        &cluster.kubeconfig().display().to_string(),
        "--plain-http-registry",
        &registry,
        "--lease-namespace",
        NAMESPACE,
        "--admin-bind-address",
        &admin,
        "--webhook-bind-address",
        &webhook,
        "--tls-cert-file",
        &cert.display().to_string(),
        "--tls-key-file",
        &key.display().to_string(),
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let process = Process::spawn("ocifit", &options.ocifit, args, &options.state_dir)?;
    say(&format!(
        "started {} run (webhook https://{webhook}/mutate, metrics http://{admin}/metrics, log {})",
        options.ocifit.display(),
        options.state_dir.join("ocifit.log").display()
    ));
    let configuration = PodWebhook::new(
        "ocifit",
        &format!("https://{webhook}/mutate"),
        ca.cert_pem(),
    )
    .match_label(OPT_IN_LABEL, "true");
    crate::register_pod_webhook(&cluster.client()?, &configuration).await?;
    say(&format!(
        "registered MutatingWebhookConfiguration ocifit (objectSelector {OPT_IN_LABEL}=true)"
    ));
    Ok(process)
}

/// `example/policy.yaml` with its artifact reference pointed at the demo registry.
async fn apply_policy(cluster: &Cluster, options: &DemoOptions) -> Result<()> {
    let path = options.repo.join("example/policy.yaml");
    let text = std::fs::read_to_string(&path).map_err(io("read", &path))?;
    let mut policy: serde_json::Value =
        serde_saphyr::from_str(&text).map_err(|e| Error::Format {
            action: format!("read {}", path.display()),
            message: e.to_string(),
        })?;
    let reference = cluster
        .registry()
        .map(|r| r.reference(ARTIFACT))
        .unwrap_or_default();
    policy["spec"]["artifact"]["ref"] = serde_json::Value::String(reference.clone());
    cluster
        .kubectl_with_input(["apply", "-f", "-"], &policy.to_string())
        .await?;
    say(&format!(
        "applied example/policy.yaml with artifact.ref {reference}"
    ));
    Ok(())
}

async fn wait_policy_ready(
    cluster: &Cluster,
    ocifit: &mut Process,
    timeout: Duration,
) -> Result<()> {
    let started = Instant::now();
    loop {
        ocifit.check_running("the policy to become Ready")?;
        let ready = cluster
            .kubectl([
                "get",
                "isp",
                "flavors",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ])
            .await
            .unwrap_or_default();
        if ready.trim() == "True" {
            say(&format!(
                "policy flavors Ready after {:.1} s",
                started.elapsed().as_secs_f64()
            ));
            return Ok(());
        }
        if started.elapsed() > timeout {
            return Err(Error::Timeout {
                what: "policy flavors to become Ready".into(),
                timeout,
                log_tails: ocifit.log_tail(crate::process::LOG_TAIL_LINES),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the apiserver calls the webhook: a dry-run of the vanilla pod comes back with its
/// image replaced.
async fn wait_webhook(
    cluster: &Cluster,
    ocifit: &mut Process,
    options: &DemoOptions,
) -> Result<()> {
    let path = options.repo.join("example/pods/vanilla.yaml");
    let text = std::fs::read_to_string(&path).map_err(io("read", &path))?;
    let probe: Pod = serde_saphyr::from_str(&text).map_err(|e| Error::Format {
        action: format!("read {}", path.display()),
        message: e.to_string(),
    })?;
    let placeholder = container_image(&probe);
    let api: Api<Pod> = Api::namespaced(cluster.client()?, POD_NAMESPACE);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let started = Instant::now();
    loop {
        ocifit.check_running("the webhook to answer")?;
        let last = match api.create(&dry_run, &probe).await {
            Ok(pod) if container_image(&pod) != placeholder => {
                say(&format!(
                    "webhook active after {:.1} s",
                    started.elapsed().as_secs_f64()
                ));
                return Ok(());
            }
            Ok(_) => "the pod was admitted unchanged".to_owned(),
            Err(e) => e.to_string(),
        };
        if started.elapsed() > options.timeout {
            return Err(Error::Timeout {
                what: format!("the webhook to patch a dry-run pod (last answer: {last})"),
                timeout: options.timeout,
                log_tails: ocifit.log_tail(crate::process::LOG_TAIL_LINES),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn container_image(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
}
