//! The admission host's HTTPS server (actix-web over rustls, the certificate from
//! [`ServingCert`]): `POST` on each [`Route`]'s path. Every such request is answered 200 with an
//! AdmissionReview: at most [`MAX_IN_FLIGHT`] requests are read and planned at once (beyond, a
//! 429 denial to retry), the body is read up to [`MAX_BODY_BYTES`] and the route's planner runs,
//! both within the deadline, and whatever goes wrong becomes a denial saying what. It owns the
//! transport, these bounds and the metrics of each answer; the decisions are the planners' and
//! the review handling is [`review`](super::review)'s.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::dev::Server;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use futures_util::StreamExt;
use tokio::sync::Semaphore;

use super::review::shape;
use super::review::{Answer, MAX_BODY_BYTES, Refused};
use super::route::{Handler, Route};
use super::tls::{ServingCert, TlsError};
use crate::telemetry::Metrics;

/// The longest the request body may take to arrive before the request is denied naming the
/// deadline: well under the apiserver's webhook timeout (`timeoutSeconds`, 5 s in our chart,
/// 10 s by default), so the apiserver gets our answer rather than its own timeout error.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// Requests read and planned at once. Each holds at most a body ([`MAX_BODY_BYTES`]), its typed
/// object and the patch (a 1 MiB pod of 20,000 containers decodes to some 20 MiB), so this
/// keeps what requests can make a replica hold well under the chart's 256 MiB limit (measured
/// by the fault suite: 16 reached 238 MiB at the peak); real requests take a millisecond, so the
/// apiserver's own concurrency stays far below it.
pub const MAX_IN_FLIGHT: usize = 8;

/// How long a request waits for one of the [`MAX_IN_FLIGHT`] places before it is denied as busy.
const BUSY_WAIT: Duration = Duration::from_millis(500);

/// How much of a busy request's body is read for its uid, and for how long: the apiserver
/// writes `request.uid` within the first 200 bytes, and a denial without it is reported as a
/// failed call rather than passed on. Bounded, so a flood of busy requests holds no more than
/// this each.
const BUSY_UID_BYTES: usize = 4096;
const BUSY_UID_WAIT: Duration = Duration::from_millis(100);

/// How long a request past its deadline waits for the uid from its streaming pass (linear over
/// at most [`MAX_BODY_BYTES`], a few milliseconds; it runs first, before decoding and
/// planning).
const LATE_UID_WAIT: Duration = Duration::from_millis(500);

/// Connections each worker holds open (beyond, the listener's backlog waits): each costs its
/// TLS state and buffers, and the apiserver keeps a few alive per replica.
const MAX_CONNECTIONS: usize = 256;

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
    in_flight: Arc<Semaphore>,
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
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let server = HttpServer::new(move || {
        host.routes.iter().fold(App::new(), |app, route| {
            let served = Served {
                handler: Arc::clone(&route.handler),
                metrics: Arc::clone(&host.metrics),
                deadline: host.deadline,
                in_flight: Arc::clone(&in_flight),
            };
            app.service(
                web::resource(route.path.as_str())
                    .app_data(web::Data::new(served))
                    .route(web::post().to(admit)),
            )
        })
    })
    // Our deadline answers first; actix's own 408 is only for a request head that never ends.
    .client_request_timeout(deadline + Duration::from_secs(1))
    .max_connections(MAX_CONNECTIONS)
    // An answer is one small write the apiserver waits for: with Nagle's algorithm on, the
    // response's last segment waits for the ACK of the previous one, which the apiserver delays
    // ~40 ms on a reused connection — every back-to-back pod creation paid that.
    .tcp_nodelay(true)
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
    let wait = tokio::time::Instant::now() + BUSY_WAIT;
    let place = Arc::clone(&served.in_flight).acquire_owned();
    let Ok(Ok(permit)) = tokio::time::timeout_at(wait.min(deadline), place).await else {
        let uid = uid_from_prefix(body).await;
        return Answer::refuse(
            &uid,
            Refused::Busy,
            format!("ocifit is answering {MAX_IN_FLIGHT} admission requests already: retry"),
        );
    };
    let declared = http
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let body = match tokio::time::timeout_at(deadline, read_capped(body, declared)).await {
        Err(_) => {
            return Answer::refuse(
                "",
                Refused::Timeout,
                format!(
                    "the request body did not arrive within ocifit's deadline of {:?}: retry",
                    served.deadline
                ),
            );
        }
        Ok(Err(answer)) => return answer,
        Ok(Ok(body)) => body,
    };
    // Planning runs off the connection's worker so the deadline holds over it too; the place
    // is held until planning ends, even after a late answer, so late work stays bounded.
    let handler = Arc::clone(&served.handler);
    let (uid_sender, uid) = tokio::sync::oneshot::channel();
    let planned = tokio::task::spawn_blocking(move || {
        let scan = shape::scan(&body);
        let _ = uid_sender.send(scan.uid.clone());
        let answer = handler.answer(&body, scan);
        drop(permit);
        answer
    });
    let late_uid = async move {
        match tokio::time::timeout(LATE_UID_WAIT, uid).await {
            Ok(Ok(Some(uid))) => uid,
            _ => String::new(),
        }
    };
    match tokio::time::timeout_at(deadline, planned).await {
        Ok(Ok(answer)) => answer,
        Err(_) => Answer::refuse(
            &late_uid.await,
            Refused::Timeout,
            format!(
                "ocifit could not decide within its deadline of {:?}: retry",
                served.deadline
            ),
        ),
        Ok(Err(failed)) => Answer::refuse(
            &late_uid.await,
            Refused::Timeout,
            format!("ocifit failed while deciding ({failed}): retry"),
        ),
    }
}

/// The uid in the first [`BUSY_UID_BYTES`] of the body, read for at most [`BUSY_UID_WAIT`];
/// empty if it is not there by then.
async fn uid_from_prefix(mut payload: web::Payload) -> String {
    let mut prefix = Vec::with_capacity(BUSY_UID_BYTES);
    let _ = tokio::time::timeout(BUSY_UID_WAIT, async {
        while prefix.len() < BUSY_UID_BYTES
            && let Some(Ok(chunk)) = payload.next().await
        {
            let room = BUSY_UID_BYTES - prefix.len();
            prefix.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
    })
    .await;
    shape::scan(&prefix).uid.unwrap_or_default()
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
