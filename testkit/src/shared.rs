//! One cluster shared by all the tests of a test binary. Each `#[tokio::test]` has its own runtime
//! that ends with the test, so the cluster is started on a thread of its own and holds nothing bound
//! to a runtime; each test makes its own client ([`Cluster::client`]) and works in its own
//! namespace and names. The cluster lives in a static and is never dropped: its components die with
//! the test process (see `process`) and its directory is removed by a later start (see `workdir`).
//! So a cluster with real nodes cannot be shared: a real node gives the machine back (its cgroup,
//! host rules, kernel sysctls) on Drop; give each such test its own cluster.

use std::ops::Deref;

use tokio::sync::OnceCell;

use crate::cluster::{Cluster, ClusterBuilder};
use crate::error::{Error, Result};

/// A lazily started cluster for a test binary:
///
/// ```no_run
/// use ocifit_testkit::{Cluster, SharedCluster};
///
/// static CLUSTER: SharedCluster = SharedCluster::new(|| Cluster::builder().with_all_controllers());
///
/// #[tokio::test]
/// async fn something() {
///     let cluster = CLUSTER.get().await.unwrap();
///     let client = cluster.client().unwrap();
///     // …
/// }
/// ```
pub struct SharedCluster {
    cell: OnceCell<std::result::Result<Cluster, String>>,
    builder: fn() -> ClusterBuilder,
}

impl SharedCluster {
    /// A cluster that `builder` describes, started by the first [`SharedCluster::get`].
    pub const fn new(builder: fn() -> ClusterBuilder) -> Self {
        Self {
            cell: OnceCell::const_new(),
            builder,
        }
    }

    /// The cluster, started on first use; a failed start is reported to every test, and not retried.
    pub async fn get(&'static self) -> Result<SharedClusterGuard> {
        let started = self
            .cell
            .get_or_init(|| async {
                let builder = self.builder;
                if builder().has_real_nodes() {
                    return Err("a cluster with real nodes cannot be shared: it gives the machine \
                                back (cgroups, host firewall rules, kernel sysctls) only when dropped, \
                                and a shared cluster never is; start one per test with \
                                ClusterBuilder::start"
                        .to_owned());
                }
                let (sender, receiver) = tokio::sync::oneshot::channel();
                let thread = std::thread::Builder::new()
                    .name("ocifit-testkit-cluster".into())
                    .spawn(move || {
                        let started = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .map_err(|e| format!("failed to build a tokio runtime: {e}"))
                            .and_then(|runtime| {
                                runtime
                                    .block_on(builder().start())
                                    .map_err(|e| e.to_string())
                            });
                        let _ = sender.send(started);
                    });
                match thread {
                    Ok(_) => receiver
                        .await
                        .unwrap_or_else(|_| Err("the start-up thread panicked".into())),
                    Err(e) => Err(format!("failed to start the start-up thread: {e}")),
                }
            })
            .await;
        match started {
            Ok(cluster) => Ok(SharedClusterGuard { cluster }),
            Err(message) => Err(Error::SharedStart(message.clone())),
        }
    }
}

/// A test's handle on the shared cluster; when a test fails (its thread panics), dropping the
/// handle prints the end of every component's log.
pub struct SharedClusterGuard {
    cluster: &'static Cluster,
}

impl Deref for SharedClusterGuard {
    type Target = Cluster;

    fn deref(&self) -> &Cluster {
        self.cluster
    }
}

impl Drop for SharedClusterGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "ocifit-testkit: the test failed; the shared cluster's logs end with:\n{}",
                self.cluster.log_tails()
            );
        }
    }
}
