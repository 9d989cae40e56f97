//! The command lines of the control plane's components and the files they share (certificates,
//! keys, the admin kubeconfig), following the recipe in the project's control-plane reference.
//! Starting and waiting is the cluster module's job; this one only decides arguments and writes files.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

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

/// Certificates, keys and kubeconfig on disk, where the components read them.
#[derive(Debug)]
pub(crate) struct Files {
    pub(crate) ca_cert: PathBuf,
    pub(crate) serving_cert: PathBuf,
    pub(crate) serving_key: PathBuf,
    pub(crate) service_account_public: PathBuf,
    pub(crate) service_account_private: PathBuf,
    pub(crate) kubeconfig: PathBuf,
}

/// The cluster's minted credentials.
pub(crate) struct Credentials {
    pub(crate) ca: CertificateAuthority,
    pub(crate) serving: IssuedCert,
    pub(crate) admin: IssuedCert,
    pub(crate) service_account: ServiceAccountKeys,
}

impl Credentials {
    pub(crate) fn mint() -> Result<Self> {
        let ca = CertificateAuthority::new("ocifit test cluster CA")?;
        let serving = ca.issue_server(
            "kube-apiserver",
            &[
                "127.0.0.1",
                SERVICE_IP,
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
            ],
        )?;
        let admin = ca.issue_client("ocifit-admin", Some("system:masters"))?;
        let service_account = ServiceAccountKeys::generate()?;
        Ok(Self {
            ca,
            serving,
            admin,
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

pub(crate) fn apiserver(files: &Files, ports: Ports) -> Vec<OsString> {
    let url = format!("https://127.0.0.1:{}/", ports.apiserver);
    vec![
        flag(
            "--etcd-servers=",
            format!("http://127.0.0.1:{}", ports.etcd_client),
        ),
        flag("--secure-port=", ports.apiserver.to_string()),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
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
        "--authorization-mode=RBAC".into(),
        "--allow-privileged=true".into(),
        // No kubelets mount tokens, and the not-ready taint would keep the fake Nodes empty.
        "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition".into(),
        "--profiling=false".into(),
    ]
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

pub(crate) fn kwok(files: &Files, stages: &[PathBuf]) -> Vec<OsString> {
    let mut args = vec![
        flag("--kubeconfig=", &files.kubeconfig),
        "--manage-all-nodes=true".into(),
    ];
    args.extend(stages.iter().map(|stage| flag("--config=", stage)));
    args
}

/// `--name=value` without assuming the value is UTF-8.
fn flag(name: &str, value: impl AsRef<OsStr>) -> OsString {
    let mut flag = OsString::from(name);
    flag.push(value);
    flag
}
