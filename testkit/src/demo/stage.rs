//! Setting the demo's stage: cluster, registry and real node, the flavor images and artifact, the
//! nodes, ocifit installed by its chart (`helm install`, on the real node), the policy and the
//! pods.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;

use super::{
    DemoOptions, FLAVOR_LABEL, FLAVOR_PODS, OPT_IN_LABEL, REAL_FLAVOR, REAL_NODE, REAL_NODE_TAINT,
    REAL_POD, install, platform_placement, say, workflow,
};
use crate::cluster::Cluster;
use crate::dev;
use crate::error::{Error, Result, io, kube as kube_error};
use crate::flavors::{apply_flavor_policy, create_flavor_nodes, push_flavor_example};
use crate::node::RealNode;

/// Where the pods go.
pub(super) const POD_NAMESPACE: &str = "default";

/// What the stage holds once set.
pub(super) struct Staged {
    pub cluster: Cluster,
    /// Flavor → the image the artifact names for it.
    pub images: BTreeMap<String, String>,
    /// The artifact cache workflow's images.
    pub workflow_images: workflow::Images,
    /// The placement example's images.
    pub placement_images: platform_placement::Images,
}

pub(super) async fn stage(options: &DemoOptions) -> Result<Staged> {
    say(
        "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, a registry \
         and a real node (containerd, kubelet, kube-proxy)",
    );
    let cluster = dev::full_cluster(None)
        .real_node(
            RealNode::new(REAL_NODE)
                .label(FLAVOR_LABEL, REAL_FLAVOR)
                .taint(REAL_NODE_TAINT, "true", "NoSchedule"),
        )
        .start()
        .await?;
    say(dev::summary(&cluster).lines().next().unwrap_or_default());
    let client = cluster.client()?;
    let registry = cluster.registry().ok_or_else(|| Error::Format {
        action: "push the flavor example".into(),
        message: "the demo cluster has no registry".into(),
    })?;
    let example = push_flavor_example(registry, &options.repo, &options.state_dir).await?;
    for (flavor, image) in &example.images {
        say(&format!(
            "pushed {image} with crane (linux/amd64, linux/arm64; this machine's runs and prints \"flavor {flavor}\")"
        ));
    }
    say(&format!(
        "pushed example/flavor-compat.json (tags pointed at those images) as {} ({}) with the ORAS SDK",
        example.reference, example.digest
    ));
    let nodes = create_flavor_nodes(&client, &options.repo).await?;
    say(&format!(
        "created nodes {} (example/flavor-nodes.json)",
        nodes.join(", ")
    ));
    let workflow_images = workflow::push_images(registry, &options.ocifit).await?;
    let placement_images = platform_placement::push_images(registry).await?;
    install::install(
        &cluster,
        &options.repo,
        &options.state_dir,
        (&workflow_images.helper, &workflow_images.registry),
        options.timeout,
    )
    .await?;
    apply_flavor_policy(&cluster, &options.repo, &example.reference).await?;
    say(&format!(
        "applied example/policy.yaml with artifact.ref {}",
        example.reference
    ));
    super::ready::wait_ready(
        &cluster,
        ("isp", "flavors", "policy flavors"),
        options.timeout,
    )
    .await?;
    wait_webhook(&cluster, options).await?;
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
    Api::<Pod>::namespaced(client, POD_NAMESPACE)
        .create(&PostParams::default(), &real_pod()?)
        .await
        .map_err(kube_error(format!("create pod {REAL_POD}")))?;
    say(&format!(
        "created pod {REAL_POD} (placeholder image, opted in) for the real node {REAL_NODE}"
    ));
    Ok(Staged {
        cluster,
        images: example.images,
        workflow_images,
        placement_images,
    })
}

/// The pod meant for the real node: opted in with the placeholder image, pinned to the node and
/// tolerating its taint; no command, so the image's own runs.
fn real_pod() -> Result<Pod> {
    let pod = serde_json::json!({
        "metadata": {"name": REAL_POD, "labels": {OPT_IN_LABEL: "true"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": REAL_NODE},
            "tolerations": [{"key": REAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "placeholder:latest"}],
        },
    });
    serde_json::from_value(pod).map_err(|e| Error::Format {
        action: format!("build pod {REAL_POD}"),
        message: e.to_string(),
    })
}

/// Waits until the apiserver calls the webhook: a dry-run of the vanilla pod comes back with its
/// image replaced.
async fn wait_webhook(cluster: &Cluster, options: &DemoOptions) -> Result<()> {
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
                log_tails: install::operator_state(cluster).await,
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
