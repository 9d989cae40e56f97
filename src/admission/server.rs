//! The admission host's HTTPS server (actix-web over rustls, the certificate from
//! [`ServingCert`]): `POST` on each [`Route`]'s path. Every such request is answered 200 with an
//! AdmissionReview: the body is read up to [`MAX_BODY_BYTES`] within the deadline, the route's
//! planner runs inline (microseconds of CPU over memory), and whatever goes wrong becomes a
//! denial saying what. It owns the transport, the deadline and the metrics of each answer; the
//! decisions are the planners' and the review handling is [`review`](super::review)'s.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::dev::Server;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use futures_util::StreamExt;

use super::review::{Answer, MAX_BODY_BYTES, Refused};
use super::route::{Handler, Route};
use super::tls::{ServingCert, TlsError};
use crate::telemetry::Metrics;

/// The longest the request body may take to arrive before the request is denied naming the
/// deadline: well under the apiserver's webhook timeout (`timeoutSeconds`, 5 s in our chart,
/// 10 s by default), so the apiserver gets our answer rather than its own timeout error.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// What the server needs to answer.
#[derive(Clone, Debug)]
pub struct Host {
    /// The routes, by path.
    pub routes: Vec<Route>,
    /// Where admissions are counted.
    pub metrics: Arc<Metrics>,
    /// The per-request deadline, normally [`DEADLINE`].
    pub deadline: Duration,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The TLS configuration could not be built.
    #[error("failed to configure TLS for the admission server")]
    Tls(#[source] TlsError),
    /// The address could not be bound.
    #[error("failed to bind the admission server to {address}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

#[derive(Clone)]
struct Served {
    handler: Arc<dyn Handler>,
    metrics: Arc<Metrics>,
    deadline: Duration,
}

/// Binds the host on `address` (port 0 picks one); the server (runs until stopped through its
/// handle) and the address it listens on.
pub fn admission_server(
    address: SocketAddr,
    cert: Arc<ServingCert>,
    host: Host,
) -> Result<(Server, SocketAddr), ServerError> {
    let tls = ServingCert::server_config(cert).map_err(ServerError::Tls)?;
    let bind = |source| ServerError::Bind { address, source };
    let listener = std::net::TcpListener::bind(address).map_err(bind)?;
    let bound = listener.local_addr().map_err(bind)?;
    let deadline = host.deadline;
    let server = HttpServer::new(move || {
        host.routes.iter().fold(App::new(), |app, route| {
            let served = Served {
                handler: Arc::clone(&route.handler),
                metrics: Arc::clone(&host.metrics),
                deadline: host.deadline,
            };
            app.service(
                web::resource(route.path.as_str())
                    .app_data(web::Data::new(served))
                    .route(web::post().to(admit)),
            )
        })
    })
    .client_request_timeout(deadline)
    .disable_signals()
    .shutdown_timeout(5)
    .listen_rustls_0_23(listener, tls)
    .map_err(bind)?
    .run();
    Ok((server, bound))
}

async fn admit(served: web::Data<Served>, http: HttpRequest, body: web::Payload) -> HttpResponse {
    let started = Instant::now();
    let answer = answer(&served, &http, body, started + served.deadline).await;
    served.metrics.admitted(
        answer.outcome,
        answer.reason,
        started.elapsed().as_secs_f64(),
    );
    HttpResponse::Ok()
        .content_type("application/json")
        .body(answer.body)
}

async fn answer(
    served: &Served,
    http: &HttpRequest,
    body: web::Payload,
    deadline: Instant,
) -> Answer {
    let deadline = tokio::time::Instant::from_std(deadline);
    let declared = http
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    match tokio::time::timeout_at(deadline, read_capped(body, declared)).await {
        Err(_) => Answer::refuse(
            "",
            Refused::Timeout,
            format!(
                "the request body did not arrive within ocifit's deadline of {:?}: retry",
                served.deadline
            ),
        ),
        Ok(Err(answer)) => answer,
        // Planning is pure CPU over memory, microseconds per object: inline it is cheaper
        // than a hand-off to a blocking thread, which measured as much again.
        Ok(Ok(body)) => served.handler.answer(&body),
    }
}

/// The body, unless it is larger than [`MAX_BODY_BYTES`] (then the rest is read and dropped, so
/// the client gets the denial rather than a reset connection) or could not be read.
async fn read_capped(
    mut payload: web::Payload,
    declared: Option<usize>,
) -> Result<Vec<u8>, Answer> {
    let mut body = Vec::with_capacity(declared.unwrap_or(0).min(MAX_BODY_BYTES));
    let mut total = 0usize;
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|err| {
            Answer::refuse(
                "",
                Refused::UnreadableBody,
                format!("failed to read the request body: {err}"),
            )
        })?;
        total = total.saturating_add(chunk.len());
        if total <= MAX_BODY_BYTES {
            body.extend_from_slice(&chunk);
        }
    }
    if total > MAX_BODY_BYTES {
        return Err(Answer::refuse(
            "",
            Refused::BodyTooLarge,
            format!(
                "the AdmissionReview is {total} bytes, over ocifit's limit of {MAX_BODY_BYTES}: \
                 no object the apiserver accepts is that large"
            ),
        ));
    }
    Ok(body)
}

#[cfg(test)]
mod tests;
