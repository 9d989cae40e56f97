//! The first yardstick: an HTTPS server on the same stack as ocifit's webhook (actix-web over rustls,
//! the same certificate and TLS configuration from `ServingCert::server_config`, actix's default
//! worker count as ocifit's) whose `POST /mutate` reads the body and returns a canned
//! AdmissionReview of under 150 bytes. Whatever ocifit costs beyond it is the webhook's own work
//! and the size of its answer ([`crate::floor`] is the yardstick with the answer's size).

use std::net::{SocketAddr, TcpListener};

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::Result;

const CANNED: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":true}}"#;

async fn mutate(_body: web::Bytes) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(CANNED)
}

/// Starts the no-op server on a free loopback port; returns its address and a handle to stop it.
pub fn start(tls: rustls::ServerConfig) -> Result<(SocketAddr, ServerHandle)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let server = HttpServer::new(|| App::new().route("/mutate", web::post().to(mutate)))
        .listen_rustls_0_23(listener, tls)?
        .run();
    let handle = server.handle();
    tokio::spawn(server);
    Ok((address, handle))
}
