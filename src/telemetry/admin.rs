//! The admin HTTP server: `/livez` (every long-lived task of the process is running),
//! `/readyz` (caches synced, not shutting down) and `/metrics` (OpenMetrics to a scraper that
//! asks for it, as Prometheus does, else the Prometheus text format). Plain HTTP, meant for the
//! kubelet and Prometheus.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};

use super::Metrics;
use super::metrics::exposition::{Format, prometheus_text};

/// Whether the process is live (every supervised task running) and ready to serve; flipped by
/// its owner. Starts live and not ready.
#[derive(Clone, Debug)]
pub struct Health {
    live: Arc<AtomicBool>,
    ready: Arc<AtomicBool>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            live: Arc::new(AtomicBool::new(true)),
            ready: Arc::new(AtomicBool::default()),
        }
    }
}

impl Health {
    /// Marks the process ready (`true`) or not.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Marks the process dead (a task it needs has ended): neither live nor ready, for good.
    pub fn set_dead(&self) {
        self.live.store(false, Ordering::SeqCst);
        self.ready.store(false, Ordering::SeqCst);
    }

    pub fn live(&self) -> bool {
        self.live.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct AdminState {
    metrics: Arc<Metrics>,
    health: Health,
}

fn flag(ok: bool, failed: &'static str) -> HttpResponse {
    if ok {
        HttpResponse::Ok().content_type("text/plain").body("ok\n")
    } else {
        HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body(failed)
    }
}

async fn livez(state: web::Data<AdminState>) -> HttpResponse {
    flag(state.health.live(), "a task ended; see the log\n")
}

async fn readyz(state: web::Data<AdminState>) -> HttpResponse {
    flag(state.health.ready(), "not ready\n")
}

async fn metrics_text(state: web::Data<AdminState>, request: HttpRequest) -> HttpResponse {
    let accept = request
        .headers()
        .get(actix_web::http::header::ACCEPT)
        .and_then(|value| value.to_str().ok());
    let Ok(openmetrics) = state.metrics.encode() else {
        return HttpResponse::InternalServerError().body("failed to encode the metrics\n");
    };
    let (format, body) = match Format::negotiate(accept) {
        Format::OpenMetrics => (Format::OpenMetrics, openmetrics),
        Format::PrometheusText => match prometheus_text(&openmetrics) {
            Ok(text) => (Format::PrometheusText, text),
            // Still a body the content type describes, in the format Prometheus reads first.
            Err(err) => {
                tracing::warn!(error = %err, "serving OpenMetrics to a client that asked for text");
                (Format::OpenMetrics, openmetrics)
            }
        },
    };
    HttpResponse::Ok()
        .content_type(format.content_type())
        .body(body)
}

/// Binds the admin server; the returned server runs until stopped through its handle.
pub fn admin_server(
    address: SocketAddr,
    metrics: Arc<Metrics>,
    health: Health,
) -> std::io::Result<actix_web::dev::Server> {
    let state = AdminState { metrics, health };
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
