//! A real local control plane (etcd, kube-apiserver, and optionally kube-controller-manager,
//! kube-scheduler and kwok) and an OCI registry on loopback, for ocifit's tests and demo.
