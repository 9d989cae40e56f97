//! The yardstick webhook: a pod webhook on the same apiserver, for the same pods, that reads
//! each review and admits the pod unchanged. The apiserver's histogram of it is what any webhook
//! costs on this apiserver at this load (its own encoding, the call, its queueing on a busy
//! machine); what ocifit's webhooks take beyond it is ocifit's.

use std::convert::Infallible;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::Api;
use kube::api::PostParams;
use ocifit_testkit::PodWebhook;
use ocifit_testkit::pki::CertificateAuthority;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::super::Env;

/// The no-op webhook's name, as the apiserver labels its histogram.
pub const NOOP: &str = "noop.scale.ocifit.io";

/// Serves the no-op webhook on a loopback port and registers it for every pod of `namespace`.
pub async fn start(env: &Env, namespace: &str) {
    let ca = CertificateAuthority::new("no-op webhook CA").expect("a CA");
    let tls = TlsAcceptor::from(
        ca.issue_server("noop", &["127.0.0.1"])
            .and_then(|cert| cert.server_config())
            .expect("a TLS server configuration"),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            // As ocifit's host does: an answer never waits for the previous segment's ACK.
            let _ = tcp.set_nodelay(true);
            let tls = tls.clone();
            tokio::spawn(async move {
                let Ok(stream) = tls.accept(tcp).await else {
                    return;
                };
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(admit))
                    .await;
            });
        }
    });
    let mut configuration = PodWebhook::new(
        "scale-noop",
        &format!("https://{address}/mutate"),
        ca.cert_pem(),
    )
    .in_namespace(namespace)
    .to_configuration();
    if let Some(webhook) = configuration.webhooks.as_mut().and_then(|w| w.first_mut()) {
        webhook.name = NOOP.to_owned();
    }
    Api::<MutatingWebhookConfiguration>::all(env.client.clone())
        .create(&PostParams::default(), &configuration)
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
