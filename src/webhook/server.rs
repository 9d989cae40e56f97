//! The webhook's HTTPS server: `POST /mutate` (actix-web over rustls, the certificate from
//! [`ServingCert`]). Every request to `/mutate` is answered 200 with an AdmissionReview: the
//! body is read up to [`MAX_BODY_BYTES`] within [`DEADLINE`], the planner runs on the current
//! index (microseconds of CPU), and whatever goes wrong becomes a denial saying what. It owns
//! the transport, the deadline, the metrics and Event notices of each answer; the decision is
//! the planner's and the review handling is [`review`](super::review)'s.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::dev::Server;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use futures_util::StreamExt;

use super::events::{Notices, notice};
use super::feed::SharedIndex;
use super::review::{self, Answer, MAX_BODY_BYTES, Refused};
use super::tls::{ServingCert, TlsError};
use crate::telemetry::{AdmissionOutcome, Metrics};

/// The longest the request body may take to arrive before the request is denied naming the
/// deadline: well under the apiserver's webhook timeout (`timeoutSeconds`, 5 s in our chart,
/// 10 s by default), so the apiserver gets our answer rather than its own timeout error.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// What the server needs to answer.
#[derive(Clone, Debug)]
pub struct Webhook {
    /// The planner's current index (see [`feed`](super::feed)).
    pub index: SharedIndex,
    /// Where admissions are counted.
    pub metrics: Arc<Metrics>,
    /// Where Event notices go; `None` publishes none.
    pub notices: Option<Notices>,
    /// The per-request deadline, normally [`DEADLINE`].
    pub deadline: Duration,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The TLS configuration could not be built.
    #[error("failed to configure TLS for the webhook")]
    Tls(#[source] TlsError),
    /// The address could not be bound.
    #[error("failed to bind the webhook to {address}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Binds the webhook on `address` (port 0 picks one); the server (runs until stopped through its
/// handle) and the address it listens on.
pub fn webhook_server(
    address: SocketAddr,
    cert: Arc<ServingCert>,
    webhook: Webhook,
) -> Result<(Server, SocketAddr), ServerError> {
    let tls = ServingCert::server_config(cert).map_err(ServerError::Tls)?;
    let bind = |source| ServerError::Bind { address, source };
    let listener = std::net::TcpListener::bind(address).map_err(bind)?;
    let bound = listener.local_addr().map_err(bind)?;
    let deadline = webhook.deadline;
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(webhook.clone()))
            .service(web::resource("/mutate").route(web::post().to(mutate)))
    })
    .client_request_timeout(deadline)
    .disable_signals()
    .shutdown_timeout(5)
    .listen_rustls_0_23(listener, tls)
    .map_err(bind)?
    .run();
    Ok((server, bound))
}

async fn mutate(
    webhook: web::Data<Webhook>,
    http: HttpRequest,
    body: web::Payload,
) -> HttpResponse {
    let started = Instant::now();
    let answer = answer(&webhook, &http, body, started + webhook.deadline).await;
    webhook.metrics.admitted(
        answer.outcome,
        answer.reason,
        started.elapsed().as_secs_f64(),
    );
    if answer.outcome == AdmissionOutcome::Denied {
        tracing::debug!(reason = answer.reason, message = ?answer.response.result.message, "admission denied");
    }
    HttpResponse::Ok()
        .content_type("application/json")
        .body(answer.encode())
}

async fn answer(
    webhook: &Webhook,
    http: &HttpRequest,
    body: web::Payload,
    deadline: Instant,
) -> Answer {
    let deadline = tokio::time::Instant::from_std(deadline);
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
                    webhook.deadline
                ),
            );
        }
        Ok(Err(answer)) => return answer,
        Ok(Ok(body)) => body,
    };
    let request = match review::read(&body) {
        Ok(request) => request,
        Err(answer) => return *answer,
    };
    let Some(index) = webhook.index.load() else {
        return Answer::refuse(
            &request.uid,
            Refused::NotReady,
            "ocifit is starting and has not read the policies and nodes yet: retry",
        );
    };
    // Planning is pure CPU over memory, microseconds per pod (the index memoises placements):
    // inline it is cheaper than a hand-off to a blocking thread, which measured as much again.
    let plan = index.plan(&request);
    if let Some(notices) = &webhook.notices
        && let Some(notice) = notice(&index, &request, &plan)
    {
        notices.send(notice);
    }
    Answer::planned(&request, &plan)
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
                 no pod the apiserver accepts is that large"
            ),
        ));
    }
    Ok(body)
}

#[cfg(test)]
mod tests;
