//! The command lines of the control plane's components and the files they share (certificates,
//! keys, the admin kubeconfig), following the recipe in the project's control-plane reference.
//! Starting and waiting is the cluster module's job; this one only decides arguments and writes files.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use crate::command::flag;
use crate::error::{Result, io};
use crate::pki::{CertificateAuthority, IssuedCert, ServiceAccountKeys};

/// The service network; the apiserver's own Service gets its first address.
const SERVICE_CIDR: &str = "10.0.0.0/24";
const SERVICE_IP: &str = "10.0.0.1";

/// The loopback ports of one cluster.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ports {
    pub(crate) etcd_client: u16,
    pub(crate) etcd_peer: u16,
    pub(crate) apiserver: u16,
}

/// Where the apiserver listens: loopback, or, for a cluster with real nodes, this machine's own
/// address (pods reach it there, through the `kubernetes` Service too).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Listen {
    Loopback,
    Host(Ipv4Addr),
}

impl Listen {
    pub(crate) fn address(self) -> Ipv4Addr {
        match self {
            Listen::Loopback => Ipv4Addr::LOCALHOST,
            Listen::Host(address) => address,
        }
    }

    fn serves_real_nodes(self) -> bool {
        matches!(self, Listen::Host(_))
    }
}

/// Certificates, keys and kubeconfig on disk, where the components read them.
#[derive(Debug)]
pub(crate) struct Files {
    pub(crate) ca_cert: PathBuf,
    pub(crate) serving_cert: PathBuf,
    pub(crate) serving_key: PathBuf,
    pub(crate) kubelet_client_cert: PathBuf,
    pub(crate) kubelet_client_key: PathBuf,
    pub(crate) service_account_public: PathBuf,
    pub(crate) service_account_private: PathBuf,
    pub(crate) kubeconfig: PathBuf,
}

/// The cluster's minted credentials.
pub(crate) struct Credentials {
    pub(crate) ca: CertificateAuthority,
    pub(crate) serving: IssuedCert,
    pub(crate) admin: IssuedCert,
    /// The apiserver's client certificate towards kubelets (a cluster admin, as kubelets authorize
    /// it through the apiserver).
    pub(crate) kubelet_client: IssuedCert,
    pub(crate) service_account: ServiceAccountKeys,
}

impl Credentials {
    pub(crate) fn mint(listen: Listen) -> Result<Self> {
        let ca = CertificateAuthority::new("ocifit test cluster CA")?;
        let address = listen.address().to_string();
        let serving = ca.issue_server(
            "kube-apiserver",
            &[
                "127.0.0.1",
                &address,
                SERVICE_IP,
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
            ],
        )?;
        let admin = ca.issue_client("ocifit-admin", Some("system:masters"))?;
        let kubelet_client =
            ca.issue_client("kube-apiserver-kubelet-client", Some("system:masters"))?;
        let service_account = ServiceAccountKeys::generate()?;
        Ok(Self {
            ca,
            serving,
            admin,
            kubelet_client,
            service_account,
        })
    }

    /// Writes the certificates and keys into `dir/pki`; the kubeconfig path is reserved beside it.
    pub(crate) fn write(&self, dir: &Path) -> Result<Files> {
        let pki = dir.join("pki");
        std::fs::create_dir_all(&pki).map_err(io("create directory", &pki))?;
        let write = |name: &str, content: &str| -> Result<PathBuf> {
            let path = pki.join(name);
            std::fs::write(&path, content).map_err(io("write", &path))?;
            Ok(path)
        };
        Ok(Files {
            ca_cert: write("ca.crt", self.ca.cert_pem())?,
            serving_cert: write("apiserver.crt", &self.serving.cert_pem)?,
            serving_key: write("apiserver.key", &self.serving.key_pem)?,
            kubelet_client_cert: write("kubelet-client.crt", &self.kubelet_client.cert_pem)?,
            kubelet_client_key: write("kubelet-client.key", &self.kubelet_client.key_pem)?,
            service_account_public: write("sa.pub", &self.service_account.public_pem)?,
            service_account_private: write("sa.key", &self.service_account.private_pem)?,
            kubeconfig: dir.join("kubeconfig"),
        })
    }
}

pub(crate) fn etcd(data_dir: &Path, ports: Ports) -> Vec<OsString> {
    let client = format!("http://127.0.0.1:{}", ports.etcd_client);
    let peer = format!("http://127.0.0.1:{}", ports.etcd_peer);
    vec![
        flag("--data-dir=", data_dir),
        flag("--listen-client-urls=", &client),
        flag("--advertise-client-urls=", &client),
        flag("--listen-peer-urls=", &peer),
        flag("--initial-advertise-peer-urls=", &peer),
        flag("--initial-cluster=default=", &peer),
        // Throwaway state: durability only costs start-up and test time.
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
    ]
}

pub(crate) fn apiserver(files: &Files, ports: Ports, listen: Listen) -> Vec<OsString> {
    let address = listen.address();
    let url = format!("https://{address}:{}/", ports.apiserver);
    let mut args = vec![
        flag(
            "--etcd-servers=",
            format!("http://127.0.0.1:{}", ports.etcd_client),
        ),
        flag("--secure-port=", ports.apiserver.to_string()),
        flag("--bind-address=", address.to_string()),
        flag("--advertise-address=", address.to_string()),
        flag("--service-cluster-ip-range=", SERVICE_CIDR),
        flag("--tls-cert-file=", &files.serving_cert),
        flag("--tls-private-key-file=", &files.serving_key),
        flag("--client-ca-file=", &files.ca_cert),
        flag("--service-account-issuer=", url),
        flag("--service-account-key-file=", &files.service_account_public),
        flag(
            "--service-account-signing-key-file=",
            &files.service_account_private,
        ),
        "--allow-privileged=true".into(),
        "--profiling=false".into(),
    ];
    if listen.serves_real_nodes() {
        args.extend([
            // Kubelets are authorized as nodes, and may change only their own Node and pods.
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            // Real pods need their ServiceAccount tokens; the not-ready taint would keep the fake
            // Nodes empty.
            "--disable-admission-plugins=TaintNodesByCondition".into(),
            flag("--kubelet-client-certificate=", &files.kubelet_client_cert),
            flag("--kubelet-client-key=", &files.kubelet_client_key),
            flag("--kubelet-certificate-authority=", &files.ca_cert),
            "--kubelet-preferred-address-types=InternalIP,Hostname".into(),
            // Webhooks and aggregated APIs are dialled at their Service's endpoints (pod
            // addresses, routed to the node), as a control plane outside the cluster network does.
            "--enable-aggregator-routing=true".into(),
        ]);
    } else {
        args.extend([
            "--authorization-mode=RBAC".into(),
            // No kubelets mount tokens, and the not-ready taint would keep the fake Nodes empty.
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition".into(),
        ]);
    }
    args
}

pub(crate) fn controller_manager(files: &Files) -> Vec<OsString> {
    vec![
        flag("--kubeconfig=", &files.kubeconfig),
        "--leader-elect=false".into(),
        "--secure-port=0".into(),
        // No cloud, no node IPAM and no node lifecycle: the Nodes are fakes the tests create.
        "--controllers=*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller".into(),
        flag(
            "--service-account-private-key-file=",
            &files.service_account_private,
        ),
        flag("--root-ca-file=", &files.ca_cert),
    ]
}

pub(crate) fn scheduler(files: &Files) -> Vec<OsString> {
    vec![
        flag("--kubeconfig=", &files.kubeconfig),
        "--leader-elect=false".into(),
        "--secure-port=0".into(),
    ]
}

/// The label a real node registers with; kwok leaves such nodes (and their pods) alone.
pub(crate) const REAL_NODE_LABEL: &str = "testkit.ocifit.io/real-node";

pub(crate) fn kwok(files: &Files, stages: &[PathBuf], listen: Listen) -> Vec<OsString> {
    let manage = if listen.serves_real_nodes() {
        flag("--manage-nodes-with-label-selector=!", REAL_NODE_LABEL)
    } else {
        "--manage-all-nodes=true".into()
    };
    let mut args = vec![flag("--kubeconfig=", &files.kubeconfig), manage];
    args.extend(stages.iter().map(|stage| flag("--config=", stage)));
    args
}
