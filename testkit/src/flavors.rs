//! The flavor example (`example/flavor-compat.json`, `example/flavor-nodes.json`, `example/policy.yaml`)
//! staged in a test cluster: for each of the artifact's tags an OCI index for linux/amd64 and
//! linux/arm64 whose entry for this machine's platform really runs (it prints `flavor <name>` and
//! waits; the other entries are small stand-ins), the artifact with its tags pointed at them (ORAS
//! SDK), the nodes (kept Ready by kwok), and the policy pointed at the artifact. The demo and the
//! tests that run the example use it; the product decides everything from there.

use std::collections::BTreeMap;
use std::path::Path;

use crate::cluster::Cluster;
use crate::error::{Error, Result, io};
use crate::image::flavor_image;
use crate::objects::{FakeNode, create_node};
use crate::registry::{OrasArtifact, Registry};

/// The ocifit compatibility layer's media type.
const COMPAT_LAYER: &str = "application/vnd.oci.image.compatibilities.v1+json";
/// Where the artifact is pushed in the test registry.
pub const FLAVOR_ARTIFACT: &str = "ocifit/flavor-compat:v1";
/// The node label the flavor example's rules read.
pub const FLAVOR_LABEL: &str = "feature.node.ocifit-k8s.flavor";
/// The policy of `example/policy.yaml`.
pub const FLAVOR_POLICY: &str = "flavors";
/// The flavors of the example, in the order nodes are given them.
pub const FLAVORS: [&str; 3] = ["vanilla", "chocolate", "strawberry"];
/// The platforms of every flavor image.
const PLATFORMS: [&str; 2] = ["linux/amd64", "linux/arm64"];

/// The flavor example in a registry.
#[derive(Clone, Debug)]
pub struct FlavorArtifact {
    /// `HOST:PORT/ocifit/flavor-compat:v1`.
    pub reference: String,
    /// The artifact manifest's digest.
    pub digest: String,
    /// Each flavor's image, as the artifact names it (`HOST:PORT/library/debian:11`, …).
    pub images: BTreeMap<String, String>,
}

/// The line the image of `flavor` prints when it runs.
pub fn flavor_line(flavor: &str) -> String {
    format!("flavor {flavor}")
}

/// Pushes an image per tag of `<repo>/example/flavor-compat.json` (as `library/<tag>`) and the
/// artifact with its tags pointed at them; the rewritten artifact is kept in `scratch`.
pub async fn push_flavor_example(
    registry: &Registry,
    repo: &Path,
    scratch: &Path,
) -> Result<FlavorArtifact> {
    let source = repo.join("example/flavor-compat.json");
    let mut artifact: serde_json::Value = read_json(&source)?;
    let sets = artifact["compatibilities"]
        .as_array_mut()
        .ok_or_else(|| Error::Format {
            action: format!("read {}", source.display()),
            message: "no compatibilities list".into(),
        })?;
    let mut images = BTreeMap::new();
    for set in sets {
        let Some(tag) = set["tag"].as_str().map(str::to_owned) else {
            continue;
        };
        let flavor = flavor_of(set);
        let line = flavor_line(flavor.as_deref().unwrap_or(&tag));
        let (repository, version) = tag.split_once(':').unwrap_or((tag.as_str(), "latest"));
        let pushed = registry
            .push_runnable_multi_platform(
                &flavor_image(&line)?,
                &format!("library/{repository}"),
                version,
                &PLATFORMS,
            )
            .await?;
        if let Some(flavor) = flavor {
            images.insert(flavor, pushed.reference.clone());
        }
        set["tag"] = serde_json::Value::String(pushed.reference);
    }
    let file = scratch.join("flavor-compat.json");
    let json = serde_json::to_string_pretty(&artifact).map_err(|e| Error::Format {
        action: "write the flavor artifact".into(),
        message: e.to_string(),
    })?;
    std::fs::write(&file, json).map_err(io("write", &file))?;
    let reference = registry.reference(FLAVOR_ARTIFACT);
    let digest = registry
        .push_artifact(&OrasArtifact::new(&reference, &file, COMPAT_LAYER))
        .await?;
    Ok(FlavorArtifact {
        reference,
        digest,
        images,
    })
}

/// Creates the nodes of `<repo>/example/flavor-nodes.json` with their labels; their names.
pub async fn create_flavor_nodes(client: &kube::Client, repo: &Path) -> Result<Vec<String>> {
    let list = read_json(&repo.join("example/flavor-nodes.json"))?;
    let mut names = Vec::new();
    for item in list["items"].as_array().into_iter().flatten() {
        let Some(name) = item["metadata"]["name"].as_str() else {
            continue;
        };
        let mut node = FakeNode::new(name);
        for (key, value) in item["metadata"]["labels"].as_object().into_iter().flatten() {
            node = node.label(key, value.as_str().unwrap_or_default());
        }
        create_node(client, &node).await?;
        names.push(name.to_owned());
    }
    Ok(names)
}

/// Applies `<repo>/example/policy.yaml` with its artifact reference set to `artifact`.
pub async fn apply_flavor_policy(cluster: &Cluster, repo: &Path, artifact: &str) -> Result<()> {
    let path = repo.join("example/policy.yaml");
    let text = std::fs::read_to_string(&path).map_err(io("read", &path))?;
    let mut policy: serde_json::Value =
        serde_saphyr::from_str(&text).map_err(|e| Error::Format {
            action: format!("read {}", path.display()),
            message: e.to_string(),
        })?;
    policy["spec"]["artifact"]["ref"] = serde_json::Value::String(artifact.to_owned());
    cluster
        .kubectl_with_input(["apply", "-f", "-"], &policy.to_string())
        .await?;
    Ok(())
}

/// The flavor a set's first rule asks for (`In [flavor]` on the flavor label).
fn flavor_of(set: &serde_json::Value) -> Option<String> {
    let expression = &set["rules"][0]["matchFeatures"][0]["matchExpressions"][0];
    (expression["key"] == FLAVOR_LABEL)
        .then(|| expression["value"][0].as_str().map(str::to_owned))
        .flatten()
}

fn read_json(path: &Path) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(path).map_err(io("read", path))?;
    serde_json::from_str(&text).map_err(|e| Error::Format {
        action: format!("read {}", path.display()),
        message: e.to_string(),
    })
}

/// The flavor example's node `node-{i:05}` (flavor `i % 3` of vanilla, chocolate, strawberry)
/// with the labels of a real one: kubelet, cloud and NFD labels, 30 in all. The memory bench
/// creates thousands; the node-watch bench decodes one.
pub fn realistic_flavor_node(i: usize) -> FakeNode {
    let name = format!("node-{i:05}");
    let mut node = FakeNode::new(&name)
        .label("kubernetes.io/os", "linux")
        .label("kubernetes.io/arch", "amd64")
        .label("beta.kubernetes.io/os", "linux")
        .label("beta.kubernetes.io/arch", "amd64")
        .label("node.kubernetes.io/instance-type", "m7i.2xlarge")
        .label("topology.kubernetes.io/region", "eu-west-1")
        .label(
            "topology.kubernetes.io/zone",
            ["eu-west-1a", "eu-west-1b", "eu-west-1c"][i % 3],
        )
        .label("example.com/rack", &format!("rack-{}", i % 40))
        .label(FLAVOR_LABEL, FLAVORS[i % 3]);
    for feature in [
        "cpu-cpuid.ADX",
        "cpu-cpuid.AESNI",
        "cpu-cpuid.AVX",
        "cpu-cpuid.AVX2",
        "cpu-cpuid.AVX512F",
        "cpu-cpuid.AVX512BW",
        "cpu-cpuid.AVX512CD",
        "cpu-cpuid.AVX512DQ",
        "cpu-cpuid.FMA3",
        "cpu-cpuid.SHA",
        "cpu-cpuid.VAES",
        "cpu-cpuid.VPCLMULQDQ",
        "cpu-hardware_multithreading",
        "kernel-config.NO_HZ",
        "kernel-config.NO_HZ_IDLE",
        "kernel-version.major",
        "kernel-version.minor",
        "pci-1af4.present",
        "system-os_release.ID",
        "system-os_release.VERSION_ID",
    ] {
        node = node.label(&format!("feature.node.kubernetes.io/{feature}"), "true");
    }
    node
}
