//! Managed TLS for the webhook: the operator keeps its own CA and serving certificate in a
//! `kubernetes.io/tls` Secret (`ca.crt`, `ca.key`, `tls.crt`, `tls.key`) and keeps the CA in the
//! `caBundle` of its MutatingWebhookConfiguration. The decision (keep, reissue, rotate, start
//! over) is pure, in [`plan()`]; minting is [`Plan::carry_out`]. The adapters write only as leader
//! and read on every replica. It must not serve HTTP nor decide admissions (the webhook's HTTP
//! side and planner do): it only hands PEM to whoever serves.

mod inspect;
mod issue;
mod plan;

pub use issue::{IssueError, Material};
pub use plan::{
    Action, CA_RENEW_BEFORE, CA_VALIDITY, Plan, SERVING_VALIDITY, ServingReason, Stored, Unusable,
    plan,
};

/// The DNS names a Service is reached by from inside the cluster, as the serving certificate
/// must carry them: `S`, `S.NS`, `S.NS.svc`, `S.NS.svc.cluster.local`.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}
