//! The yardstick webhook: a pod webhook on the same apiserver, for the same pods, that reads
//! each review and admits the pod unchanged. The apiserver's histogram of it is what any webhook
//! costs on this apiserver at this load (its own encoding, the call, its queueing on a busy
//! machine); what ocifit's webhooks take beyond it is ocifit's.

use std::convert::Infallible;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use ocifit_testkit::pki::CertificateAuthority;
use ocifit_testkit::{PodWebhook, register_pod_webhook};

use super::super::Env;
use super::super::https::serve_https;

/// The no-op webhook's name, as the apiserver labels its histogram.
pub const NOOP: &str = "noop.scale.ocifit.io";

/// Serves the no-op webhook on a loopback port and registers it for every pod of `namespace`.
pub async fn start(env: &Env, namespace: &str) {
    let ca = CertificateAuthority::new("no-op webhook CA").expect("a CA");
    let tls = ca
        .issue_server("noop", &["127.0.0.1"])
        .and_then(|cert| cert.server_config())
        .expect("a TLS server configuration");
    let address = serve_https(tls, admit).await;
    let webhook = PodWebhook::new(
        "scale-noop",
        &format!("https://{address}/mutate"),
        ca.cert_pem(),
    )
    .named(NOOP)
    .in_namespace(namespace);
    register_pod_webhook(&env.client, &webhook)
        .await
        .expect("the no-op webhook's configuration");
}

/// Allowed unchanged, answering the request's uid.
async fn admit(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let review: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let uid = review["request"]["uid"].as_str().unwrap_or_default();
    let answer = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true},
    });
    Ok(Response::new(Full::new(Bytes::from(answer.to_string()))))
}
