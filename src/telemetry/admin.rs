//! The admin HTTP server: `/livez` (the process serves), `/readyz` (caches synced and not shutting
//! down) and `/metrics` (Prometheus text). Plain HTTP, meant for the kubelet and Prometheus.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix_web::{App, HttpResponse, HttpServer, web};

use super::Metrics;

/// Whether the process is ready to serve; flipped by its owner.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the process ready (`true`) or not.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::SeqCst);
    }

    /// Whether it is ready.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct AdminState {
    metrics: Arc<Metrics>,
    readiness: Readiness,
}

async fn livez() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok\n")
}

async fn readyz(state: web::Data<AdminState>) -> HttpResponse {
    if state.readiness.get() {
        HttpResponse::Ok().content_type("text/plain").body("ok\n")
    } else {
        HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body("not ready\n")
    }
}

async fn metrics_text(state: web::Data<AdminState>) -> HttpResponse {
    match state.metrics.encode() {
        Ok(text) => HttpResponse::Ok()
            .content_type("text/plain; version=0.0.4; charset=utf-8")
            .body(text),
        Err(_) => HttpResponse::InternalServerError().body("failed to encode the metrics\n"),
    }
}

/// Binds the admin server; the returned server runs until stopped through its handle.
pub fn admin_server(
    address: SocketAddr,
    metrics: Arc<Metrics>,
    readiness: Readiness,
) -> std::io::Result<actix_web::dev::Server> {
    let state = AdminState { metrics, readiness };
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(state.clone()))
            .route("/livez", web::get().to(livez))
            .route("/readyz", web::get().to(readyz))
            .route("/metrics", web::get().to(metrics_text))
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(5)
    .bind(address)?
    .run();
    Ok(server)
}
