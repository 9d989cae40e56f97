//! The admission host's HTTPS server (actix-web over rustls, the certificate from
//! [`ServingCert`]): `POST` on each [`Route`]'s path, answered 200 with an AdmissionReview. A body
//! is read first, up to [`MAX_BODY_BYTES`], within the deadline and [`MAX_BODY_MEMORY`]; then it
//! takes one of its route's [`MAX_IN_FLIGHT`] places and the planner runs within the same deadline
//! (inline when [`Planner::BOUNDED`](super::route::Planner::BOUNDED)). A request it cannot decide
//! gets its route's [`Undecided`] answer; anything else that goes wrong is a denial saying what.
//! The decisions are the planners', the review handling [`review`](super::review)'s.

use std::net::{IpAddr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use actix_web::dev::Server;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use super::route::{Handler, Route, Undecided};
use super::tls::{ServingCert, TlsError, Uncertified};
use crate::admission::review::{Answer, MAX_BODY_BYTES, Refused, check, scan};
use crate::telemetry::{Metrics, review_span};
use peers::Peers;

mod peers;

/// The longest a request may take from its head to its answer, body and planning included:
/// well under the apiserver's webhook timeout (`timeoutSeconds`, 5 s in our chart, 10 s by
/// default), so the apiserver gets our answer rather than its own timeout error.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// Requests planned at once, per route, so a flood of one route (the gate sees nearly every pod)
/// never takes another's places; each holds its body, its typed object and the patch.
pub(super) const MAX_IN_FLIGHT: usize = 4;

/// Requests waiting on the apiserver at once, over every route: a request whose planner declines
/// ([`Planner::plan_now`](super::route::Planner::plan_now)) gives its place back and waits here,
/// so reviews naming objects that do not exist never take the places real reviews need.
pub(super) const MAX_WAITING: usize = 4;

/// The memory all request bodies together may hold, over every route and connection, charged by
/// the bytes that arrived (so slow bodies cost what they sent) and kept under the chart's memory
/// limit. Each peer address may hold at most its share ([`peers::PEER_SHARE`]).
pub(super) const MAX_BODY_MEMORY: usize = 48 * 1024 * 1024;

/// The largest body a bounded planner plans on the connection's worker: a body the caps still
/// allow (large, deeply nested) would take the worker long enough to stall its other
/// connections past their deadline, so it is planned on the blocking pool.
const INLINE_MAX_BYTES: usize = 64 * 1024;

/// How long a read body waits for one of its route's places, or a body for room to grow,
/// before it is undecided as busy.
const BUSY_WAIT: Duration = Duration::from_millis(500);

/// How much of a body is searched for the uid of an undecided answer: the apiserver writes
/// `request.uid` within the first 200 bytes, and an answer without it is reported as a failed
/// call rather than passed on.
const UID_PREFIX_BYTES: usize = 4096;

/// How long a request past its deadline waits for the uid from its streaming pass (linear over
/// at most [`MAX_BODY_BYTES`], a few milliseconds; it runs first, before decoding and
/// planning), when the body's first bytes did not have it.
const LATE_UID_WAIT: Duration = Duration::from_millis(500);

/// Connections each worker holds open (beyond, the listener's backlog waits): each costs its
/// TLS state and buffers, and the apiserver keeps a few alive per replica.
const MAX_CONNECTIONS: usize = 256;

/// How long an idle connection is kept: longer than the apiserver keeps its own (Go's default),
/// so the apiserver closes them, never we: our close can cross a request it sends at that
/// moment, which it reports as a failed call and, for a POST, does not retry.
const KEEP_ALIVE: Duration = Duration::from_secs(120);

/// What the server needs to answer.
#[derive(Clone, Debug)]
pub struct Host {
    /// The routes, by path.
    pub routes: Vec<Route>,
    /// Where admissions are counted.
    pub metrics: Arc<Metrics>,
    /// The per-request deadline, normally [`DEADLINE`].
    pub deadline: Duration,
    /// Set once the replica is going: every answer then closes its connection, so the client
    /// opens its next one to a replica that stays.
    pub draining: Arc<AtomicBool>,
    /// PEM CA certificates a client's certificate must be signed by; `None`: any client.
    pub client_ca: Option<Vec<u8>>,
    /// With a client CA, what a client without a certificate gets.
    pub uncertified: Uncertified,
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
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Clone)]
struct Served {
    path: String,
    handler: Arc<dyn Handler>,
    undecided: Undecided,
    metrics: Arc<Metrics>,
    deadline: Duration,
    /// The route's places.
    in_flight: Arc<Semaphore>,
    /// The host's places for requests that wait on the apiserver.
    waiting: Arc<Semaphore>,
    /// The host's room for bodies, in bytes.
    bodies: Arc<Semaphore>,
    /// Each peer address's share of it.
    peers: Arc<Peers>,
    draining: Arc<AtomicBool>,
    /// Whether a review from a client without a certificate may write Events.
    uncertified_events: bool,
}

/// Whether the connection's client presented a certificate (verified at the handshake: with a
/// client CA, any certificate not from it is refused there).
#[derive(Clone, Copy)]
struct Certified(bool);

/// Notes on each connection whether its client presented a certificate.
fn note_certificate(connection: &dyn std::any::Any, data: &mut actix_web::dev::Extensions) {
    type Tls = actix_tls::accept::rustls_0_23::TlsStream<actix_web::rt::net::TcpStream>;
    let certified = connection
        .downcast_ref::<Tls>()
        .is_some_and(|tls| tls.get_ref().1.peer_certificates().is_some());
    data.insert(Certified(certified));
}

impl Served {
    /// The route's answer to a request it cannot decide, `why` and `what` saying why.
    fn undecided(&self, uid: &str, why: Refused, what: &str) -> Answer {
        match self.undecided {
            Undecided::Deny => Answer::refuse(uid, why, format!("{what}: retry")),
            Undecided::AdmitUnchanged => {
                Answer::unchanged(uid, why, format!("{what}: admitted unchanged"))
            }
        }
    }
}

/// Binds the host on `address` (port 0 picks one); the server (runs until stopped through its
/// handle) and the address it listens on.
pub fn admission_server(
    address: SocketAddr,
    cert: Arc<ServingCert>,
    host: Host,
) -> Result<(Server, SocketAddr), ServerError> {
    let tls =
        ServingCert::server_config_for_clients(cert, host.client_ca.as_deref(), host.uncertified)
            .map_err(ServerError::Tls)?;
    let bind = |source| ServerError::Bind { address, source };
    let listener = std::net::TcpListener::bind(address).map_err(bind)?;
    let bound = listener.local_addr().map_err(bind)?;
    let deadline = host.deadline;
    // Shared by every worker: places per route, room for bodies over the host.
    let bodies = Arc::new(Semaphore::new(MAX_BODY_MEMORY));
    let waiting = Arc::new(Semaphore::new(MAX_WAITING));
    let peers = Arc::new(Peers::default());
    let served: Vec<Served> = host
        .routes
        .iter()
        .map(|route| Served {
            path: route.path.clone(),
            handler: Arc::clone(&route.handler),
            undecided: route.undecided,
            metrics: Arc::clone(&host.metrics),
            deadline: host.deadline,
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            waiting: Arc::clone(&waiting),
            bodies: Arc::clone(&bodies),
            peers: Arc::clone(&peers),
            draining: Arc::clone(&host.draining),
            uncertified_events: host.client_ca.is_none() || host.uncertified == Uncertified::Refuse,
        })
        .collect();
    let server = HttpServer::new(move || {
        served.iter().fold(App::new(), |app, served| {
            app.service(
                web::resource(served.path.as_str())
                    .app_data(web::Data::new(served.clone()))
                    .route(web::post().to(admit)),
            )
        })
    })
    .on_connect(note_certificate)
    // Our deadline answers first; actix's own 408 is only for a request head that never ends.
    .client_request_timeout(deadline + Duration::from_secs(1))
    .keep_alive(KEEP_ALIVE)
    .max_connections(MAX_CONNECTIONS)
    // An answer is one small write the apiserver waits for: with Nagle's algorithm on, its last
    // segment waits for the apiserver's delayed ACK on a reused connection (docs/performance.md).
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
    let answer = answer(&served, &http, body, started + served.deadline)
        .instrument(review_span(&served.path))
        .await;
    served.metrics.admitted(
        &served.path,
        answer.outcome,
        answer.reason,
        started.elapsed().as_secs_f64(),
    );
    let mut response = HttpResponse::Ok();
    if served.draining.load(Ordering::Relaxed) {
        // `Connection: close`: the client opens its next connection elsewhere instead of
        // sending on this one as the replica closes it.
        response.force_close();
    }
    response.content_type("application/json").body(answer.body)
}

async fn answer(
    served: &Served,
    http: &HttpRequest,
    payload: web::Payload,
    deadline: Instant,
) -> Answer {
    let deadline = tokio::time::Instant::from_std(deadline);
    let body = match whole_body(served, http, payload, deadline).await {
        Ok(body) => body,
        Err(answer) => return *answer,
    };
    let wait = tokio::time::Instant::now() + BUSY_WAIT;
    let place = Arc::clone(&served.in_flight).acquire_owned();
    let Ok(Ok(mut permit)) = tokio::time::timeout_at(wait.min(deadline), place).await else {
        let what = format!(
            "ocifit is deciding {MAX_IN_FLIGHT} admission requests for {} already",
            served.path
        );
        return served.undecided(&uid_in(&body.bytes), Refused::Busy, &what);
    };
    let handler = Arc::clone(&served.handler);
    // Events only from reviews of a client ocifit knows, when it is told to tell.
    let events = served.uncertified_events
        || http
            .conn_data::<Certified>()
            .is_some_and(|certified| certified.0);
    if handler.bounded() && body.bytes.len() <= INLINE_MAX_BYTES {
        // Small and bounded: planned on the connection's worker, as two thread hand-offs cost
        // more than planning. A planner that panics is answered as on the pool, and takes
        // neither the worker nor its other connections down with it.
        let planned = std::panic::catch_unwind(AssertUnwindSafe(|| {
            handler.answer_now(&body.bytes, check(&body.bytes), events)
        }));
        match planned {
            Ok(Some(answer)) => return answer,
            // The planner must wait for this one (a store that lags, read again): the pool,
            // in a place for waiting requests rather than the route's.
            Ok(None) => {
                drop(permit);
                let place = Arc::clone(&served.waiting).acquire_owned();
                let Ok(Ok(waiting)) = tokio::time::timeout_at(wait.min(deadline), place).await
                else {
                    let what = format!(
                        "ocifit is waiting on the apiserver for {MAX_WAITING} admission requests already"
                    );
                    return served.undecided(&uid_in(&body.bytes), Refused::Busy, &what);
                };
                permit = waiting;
            }
            Err(_) => {
                drop(permit);
                let what = "ocifit failed to decide: its planner panicked";
                return served.undecided(&uid_in(&body.bytes), Refused::Timeout, what);
            }
        }
    }
    // Any other planner runs off the connection's worker so the deadline holds over it too;
    // the place and the body's room are held until planning ends, even after a late answer, so
    // late work stays bounded.
    let body = Arc::new(body);
    let planning = Arc::clone(&body);
    let (uid_sender, uid) = tokio::sync::oneshot::channel();
    // The planner's lines belong to this review too.
    let review = tracing::Span::current();
    let planned = tokio::task::spawn_blocking(move || {
        let _review = review.enter();
        let scan = scan(&planning.bytes);
        let _ = uid_sender.send(scan.uid.clone());
        let answer = handler.answer(&planning.bytes, scan, events);
        drop(permit);
        drop(planning);
        answer
    });
    let what = match tokio::time::timeout_at(deadline, planned).await {
        Ok(Ok(answer)) => return answer,
        Err(_) => format!(
            "ocifit failed to decide within its deadline of {:?}",
            served.deadline
        ),
        Ok(Err(failed)) => format!("ocifit failed to decide: {failed}"),
    };
    served.undecided(&late_uid(&body, uid).await, Refused::Timeout, &what)
}

/// The request's body, read within the caps and charged to its peer's share and the host's
/// room; else the answer saying why not.
async fn whole_body(
    served: &Served,
    http: &HttpRequest,
    payload: web::Payload,
    deadline: tokio::time::Instant,
) -> Result<Body, Box<Answer>> {
    let declared = http
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    // A peer without an address (not over TCP) shares the unspecified address's share.
    let peer = http
        .peer_addr()
        .map_or(IpAddr::from([0, 0, 0, 0]), |peer| peer.ip());
    let rooms = [served.peers.share(peer), Arc::clone(&served.bodies)];
    match read_body(payload, declared, &rooms, &served.metrics, deadline).await {
        Read::Whole(body) => Ok(body),
        Read::Late(prefix) => {
            let what = format!(
                "the request body did not arrive within ocifit's deadline of {:?}",
                served.deadline
            );
            Err(Box::new(served.undecided(
                &uid_in(&prefix),
                Refused::Timeout,
                &what,
            )))
        }
        Read::NoRoom(prefix) => {
            let what = format!(
                "ocifit is holding {} MiB of admission request bodies from {peer}, or {} MiB \
                 from all, already",
                peers::PEER_SHARE >> 20,
                MAX_BODY_MEMORY >> 20
            );
            Err(Box::new(served.undecided(
                &uid_in(&prefix),
                Refused::Busy,
                &what,
            )))
        }
        Read::Failed(answer) => Err(answer),
    }
}

/// The uid for the undecided answer to a request whose planning did not end: the streaming
/// pass's, else the one in the body's first bytes, else the pass's once it gets there within
/// [`LATE_UID_WAIT`]. Looked for only here, so a request planned in time pays one pass.
async fn late_uid(
    body: &Body,
    mut scanned: tokio::sync::oneshot::Receiver<Option<String>>,
) -> String {
    if let Ok(uid) = scanned.try_recv() {
        return uid.unwrap_or_default();
    }
    let prefix = uid_in(&body.bytes);
    if !prefix.is_empty() {
        return prefix;
    }
    match tokio::time::timeout(LATE_UID_WAIT, scanned).await {
        Ok(Ok(Some(uid))) => uid,
        _ => String::new(),
    }
}

/// The uid in the first [`UID_PREFIX_BYTES`] of `body` (all of it or its first part); empty if
/// it is not there.
fn uid_in(body: &[u8]) -> String {
    scan(&body[..body.len().min(UID_PREFIX_BYTES)])
        .uid
        .unwrap_or_default()
}

/// A body read whole, holding its room among [`MAX_BODY_MEMORY`] until dropped.
struct Body {
    bytes: Vec<u8>,
    _room: Option<Room>,
}

/// Room taken among [`MAX_BODY_MEMORY`] and in the peer's share of it, shown in the metrics
/// while held (an operator sees how close the host is to answering busy).
struct Room {
    permit: OwnedSemaphorePermit,
    peer: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl Room {
    fn new([peer, permit]: [OwnedSemaphorePermit; 2], metrics: &Arc<Metrics>) -> Self {
        metrics.hold_admission_body_bytes(permits(&permit));
        Room {
            permit,
            peer,
            metrics: Arc::clone(metrics),
        }
    }

    fn grow(&mut self, [peer, more]: [OwnedSemaphorePermit; 2]) {
        self.metrics.hold_admission_body_bytes(permits(&more));
        self.permit.merge(more);
        self.peer.merge(peer);
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        self.metrics
            .hold_admission_body_bytes(-permits(&self.permit));
    }
}

fn permits(permit: &OwnedSemaphorePermit) -> i64 {
    i64::try_from(permit.num_permits()).unwrap_or(i64::MAX)
}

/// How reading a body ended.
enum Read {
    /// Whole, within the caps.
    Whole(Body),
    /// Not whole by the deadline: what had arrived (for its uid).
    Late(Vec<u8>),
    /// No room among [`MAX_BODY_MEMORY`] for the rest within [`BUSY_WAIT`]: what had arrived.
    NoRoom(Vec<u8>),
    /// Refused: larger than [`MAX_BODY_BYTES`] (then the rest is read and dropped, so the
    /// client gets the denial rather than a reset connection), or unreadable.
    Failed(Box<Answer>),
}

/// Reads the body by `deadline`, charging its buffer to both `rooms` (the peer's share, the
/// host's) as it grows (it waits up to [`BUSY_WAIT`] for room, reading nothing meanwhile, so
/// the client's bytes wait in the network).
async fn read_body(
    mut payload: web::Payload,
    declared: Option<usize>,
    rooms: &[Arc<Semaphore>; 2],
    metrics: &Arc<Metrics>,
    deadline: tokio::time::Instant,
) -> Read {
    let mut bytes: Vec<u8> = Vec::new();
    let mut held: Option<Room> = None;
    let mut total = 0usize;
    loop {
        let chunk = match tokio::time::timeout_at(deadline, payload.next()).await {
            Err(_) => return Read::Late(bytes),
            Ok(None) => break,
            Ok(Some(Err(err))) => {
                return Read::Failed(Box::new(Answer::refuse(
                    &uid_in(&bytes),
                    Refused::UnreadableBody,
                    format!("failed to read the request body: {err}"),
                )));
            }
            Ok(Some(Ok(chunk))) => chunk,
        };
        let within = total <= MAX_BODY_BYTES;
        total = total.saturating_add(chunk.len());
        if total > MAX_BODY_BYTES {
            if within {
                // Refused whatever follows: keep the first bytes for the uid, give back the room.
                bytes.truncate(UID_PREFIX_BYTES);
                bytes.shrink_to_fit();
                held = None;
            }
            continue;
        }
        let needed = bytes.len() + chunk.len();
        if needed > bytes.capacity() {
            // Doubling, never past what the client declared: a declared length costs nothing
            // until its bytes arrive, and an honest one is not overshot.
            let mut grown = needed.max(bytes.capacity() * 2).min(MAX_BODY_BYTES);
            if let Some(declared) = declared.filter(|d| *d >= needed) {
                grown = grown.min(declared);
            }
            let more = grown - bytes.capacity();
            let permits = u32::try_from(more).unwrap_or(u32::MAX);
            let acquired = async {
                let [peer, host] = rooms;
                let peer = Arc::clone(peer).acquire_many_owned(permits).await?;
                let host = Arc::clone(host).acquire_many_owned(permits).await?;
                Ok::<_, tokio::sync::AcquireError>([peer, host])
            };
            let wait = deadline.min(tokio::time::Instant::now() + BUSY_WAIT);
            let Ok(Ok(permit)) = tokio::time::timeout_at(wait, acquired).await else {
                // The chunk in hand may hold the uid (a first chunk always does, from the
                // apiserver): at most the prefix searched for it is kept for the answer.
                let room = UID_PREFIX_BYTES.saturating_sub(bytes.len());
                bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
                return Read::NoRoom(bytes);
            };
            match held.as_mut() {
                Some(held) => held.grow(permit),
                None => held = Some(Room::new(permit, metrics)),
            }
            bytes.reserve_exact(grown - bytes.len());
        }
        bytes.extend_from_slice(&chunk);
    }
    if total > MAX_BODY_BYTES {
        return Read::Failed(Box::new(Answer::refuse(
            &uid_in(&bytes),
            Refused::BodyTooLarge,
            format!(
                "the AdmissionReview is {total} bytes, over ocifit's limit of {MAX_BODY_BYTES}: \
                 no object the apiserver accepts is that large"
            ),
        )));
    }
    Read::Whole(Body { bytes, _room: held })
}

#[cfg(test)]
mod tests;
