//! The configuration files of a real node's containerd, CNI, kubelet and kube-proxy, following the
//! project's real-node reference. Every path they name is inside the node's own directory, so
//! nothing they write collides with another node or with anything else on the machine. This module
//! only renders text; starting is `start`'s job.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use super::network::Link;

/// The sandbox image's name; the kit imports it into containerd, nothing pulls it.
pub(crate) const SANDBOX_IMAGE: &str = "ocifit-testkit.local/pause:latest";
/// The kubelet's port (its own namespace, so every node has it).
pub(crate) const KUBELET_PORT: u16 = 10250;
/// kube-proxy's health port, on the node's address so the kit can probe it from the host.
pub(crate) const KUBE_PROXY_HEALTH_PORT: u16 = 10256;

/// Where everything of one node lives.
#[derive(Clone, Debug)]
pub(crate) struct NodePaths {
    pub(crate) dir: PathBuf,
}

impl NodePaths {
    pub(crate) fn path(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }

    pub(crate) fn containerd_config(&self) -> PathBuf {
        self.path("containerd/config.toml")
    }

    pub(crate) fn containerd_socket(&self) -> PathBuf {
        self.path("containerd/containerd.sock")
    }

    pub(crate) fn registry_hosts(&self, registry: &str) -> PathBuf {
        self.path(&format!("containerd/certs.d/{registry}/hosts.toml"))
    }

    pub(crate) fn cni_config(&self) -> PathBuf {
        self.path("cni/net.d/10-ocifit.conflist")
    }

    pub(crate) fn kubelet_config(&self) -> PathBuf {
        self.path("kubelet/config.json")
    }

    pub(crate) fn kube_proxy_config(&self) -> PathBuf {
        self.path("kube-proxy.json")
    }
}

/// containerd's configuration (version 2): private root, state, sockets, runc root, plugin
/// directory, CNI configuration and registry hosts; cgroupfs; overlayfs; the imported sandbox image.
/// `restrict_oom_score_adj`: root here may not lower `oom_score_adj`, and Kubernetes asks -998 for
/// the sandbox. The pods' network namespaces are mounted under the state directory.
pub(crate) fn containerd_config(paths: &NodePaths) -> String {
    let p = |relative: &str| paths.path(relative).display().to_string();
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{SANDBOX_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{runc}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{certs}"
"#,
        root = p("containerd/root"),
        state = p("containerd/state"),
        socket = paths.containerd_socket().display(),
        opt = p("containerd/opt"),
        runc = p("containerd/runc"),
        cni = p("cni/net.d"),
        certs = p("containerd/certs.d"),
    )
}

/// containerd's hosts file for a plain-HTTP registry at `registry` (`HOST:PORT`).
pub(crate) fn registry_hosts(registry: &str) -> String {
    format!(
        "server = \"http://{registry}\"\n\n[host.\"http://{registry}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
    )
}

/// One bridge (`cni0`, inside the node's namespace) with host-local addresses from the node's pod
/// subnet and a default route through the bridge, which is the pods' way to the host.
pub(crate) fn cni_config(link: &Link, ipam_dir: &Path) -> serde_json::Value {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "ocifit-node",
        "plugins": [{
            "type": "bridge",
            "bridge": "cni0",
            "isGateway": true,
            "isDefaultGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": link.pod_subnet}]],
                "dataDir": ipam_dir,
            },
        }],
    })
}

/// The kubelet's configuration.
pub(crate) fn kubelet_config(
    paths: &NodePaths,
    node_ip: Ipv4Addr,
    cgroup_root: &str,
) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node_ip.to_string(),
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": node_ip.to_string(),
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": true},
            "x509": {"clientCAFile": paths.path("pki/ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": paths.path("pki/kubelet.crt"),
        "tlsPrivateKeyFile": paths.path("pki/kubelet.key"),
        "containerRuntimeEndpoint": format!("unix://{}", paths.containerd_socket().display()),
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        // These machines mount cgroup v1: a deprecation warning only.
        "failCgroupV1": false,
        "failSwapOn": false,
        "staticPodPath": paths.path("kubelet/static"),
        "podLogsDir": paths.path("kubelet/pod-logs"),
        "resolvConf": paths.path("kubelet/resolv.conf"),
        // A shared machine: evict only when it is really full, never collect images. Sizes, not
        // shares: 1% of a large disk is gigabytes a suite's own images can briefly take.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "256Mi",
            "imagefs.available": "256Mi",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": false,
        "nodeStatusUpdateFrequency": "5s",
    })
}

/// kube-proxy's configuration: iptables mode, in the node's namespace; every Service connection
/// masqueraded, so a pod reaching a Service backed by itself or a pod beside it works without the
/// bridge's netfilter hooks; conntrack sysctls left alone (they are not the node's to change).
pub(crate) fn kube_proxy_config(
    paths: &NodePaths,
    node_name: &str,
    link: &Link,
) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": paths.path("kube-proxy.kubeconfig")},
        "hostnameOverride": node_name,
        "mode": "iptables",
        "clusterCIDR": link.pod_subnet,
        "healthzBindAddress": format!("{}:{KUBE_PROXY_HEALTH_PORT}", link.node_ip),
        "metricsBindAddress": "127.0.0.1:10249",
        "iptables": {"masqueradeAll": true},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> NodePaths {
        NodePaths {
            dir: PathBuf::from("/tmp/ocifit-testkit/node-abc"),
        }
    }

    fn link() -> Link {
        Link {
            host_veth: "ocifit3h".into(),
            host_ip: Ipv4Addr::new(10, 245, 3, 1),
            node_ip: Ipv4Addr::new(10, 245, 3, 2),
            pod_subnet: "10.244.3.0/24".into(),
        }
    }

    /// Every absolute path in a rendered file, but the machine's CNI plugins.
    fn paths_in(text: &str) -> Vec<String> {
        text.split(['"', '\''])
            .filter(|s| s.starts_with('/') && !s.starts_with("/usr/lib/cni"))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn containerd_keeps_everything_it_writes_in_the_nodes_directory() {
        let config = containerd_config(&paths());
        let written = paths_in(&config);
        assert!(written.len() >= 7, "{written:?}");
        for path in written {
            assert!(path.starts_with("/tmp/ocifit-testkit/node-abc/"), "{path}");
        }
        assert!(config.contains("restrict_oom_score_adj = true"), "{config}");
        assert!(config.contains(SANDBOX_IMAGE));
    }

    #[test]
    fn kubelet_and_kube_proxy_keep_their_files_in_the_nodes_directory_and_listen_on_its_address() {
        let mut kubelet = kubelet_config(&paths(), link().node_ip, "/ocifit-node-3");
        // A cgroup, not a file.
        assert_eq!(kubelet["cgroupRoot"].take(), "/ocifit-node-3");
        let kubelet = kubelet.to_string();
        let proxy = kube_proxy_config(&paths(), "real-1", &link()).to_string();
        for path in paths_in(&kubelet).into_iter().chain(paths_in(&proxy)) {
            let path = path.trim_start_matches("unix://");
            assert!(path.starts_with("/tmp/ocifit-testkit/node-abc/"), "{path}");
        }
        assert!(kubelet.contains(r#""address":"10.245.3.2""#), "{kubelet}");
        assert!(
            proxy.contains(r#""healthzBindAddress":"10.245.3.2:10256""#),
            "{proxy}"
        );
        assert!(proxy.contains(r#""mode":"iptables""#), "{proxy}");
    }

    #[test]
    fn pods_get_addresses_from_the_nodes_subnet_and_a_default_route() {
        let cni = cni_config(&link(), Path::new("/n/ipam"));
        let ipam = &cni["plugins"][0]["ipam"];
        assert_eq!(ipam["ranges"][0][0]["subnet"], "10.244.3.0/24");
        assert_eq!(cni["plugins"][0]["isDefaultGateway"], true);
    }

    #[test]
    fn a_plain_http_registry_is_pulled_from_over_http() {
        let hosts = registry_hosts("192.0.2.2:5000");
        assert!(
            hosts.starts_with("server = \"http://192.0.2.2:5000\""),
            "{hosts}"
        );
        assert!(hosts.contains("capabilities = [\"pull\", \"resolve\"]"));
    }
}
