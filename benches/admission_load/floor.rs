//! The second and third yardsticks, one of each per route: a no-op doing the route's I/O. On the
//! same stack as the no-op and ocifit's host (actix-web over rustls, the same certificate,
//! Nagle's algorithm off as the host has it), each floor reads the review whole and answers,
//! unplanned, the very bytes ocifit answered to that review (found by the body's length), so the
//! answer has the size of ocifit's patch. The equal-I/O floor answers the bytes as they came; the
//! decoding floor first decodes the review as a webhook on kube-rs does (kube's
//! `AdmissionReview<DynamicObject>` into its `AdmissionRequest`), the least any webhook does
//! before deciding. What a route costs beyond the first is decoding, planning and encoding; beyond
//! the second, planning and encoding, and how much cheaper its own decoding is than kube's.

use std::collections::HashMap;
use std::hint::black_box;
use std::net::{SocketAddr, TcpListener};

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::Result;
use bytes::Bytes;
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};

/// A floor's answers, by the length of the review they answer (reviews of one length told
/// apart by their bytes).
#[derive(Clone, Default)]
pub struct Canned(HashMap<usize, Vec<(Bytes, Bytes)>>);

impl Canned {
    /// Answers `answer` to `review`.
    pub fn add(&mut self, review: Bytes, answer: Bytes) {
        self.0
            .entry(review.len())
            .or_default()
            .push((review, answer));
    }

    fn answer(&self, review: &[u8]) -> Option<&Bytes> {
        match self.0.get(&review.len())?.as_slice() {
            [(_, answer)] => Some(answer),
            several => several
                .iter()
                .find_map(|(known, answer)| (known == review).then_some(answer)),
        }
    }
}

/// What a floor does with the review before answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Floor {
    /// Nothing: the bytes are read and answered.
    Io,
    /// Decoded as kube-rs's admission types; a review they refuse is answered 400.
    Decoding,
}

async fn answer(canned: web::Data<Canned>, body: web::Bytes) -> HttpResponse {
    answer_canned(&canned, &body)
}

async fn decode_and_answer(canned: web::Data<Canned>, body: web::Bytes) -> HttpResponse {
    let review: Result<AdmissionReview<DynamicObject>, _> = serde_json::from_slice(&body);
    match review.map(TryInto::<AdmissionRequest<DynamicObject>>::try_into) {
        Ok(Ok(request)) => {
            black_box(request);
            answer_canned(&canned, &body)
        }
        _ => HttpResponse::BadRequest().finish(),
    }
}

fn answer_canned(canned: &Canned, body: &[u8]) -> HttpResponse {
    match canned.answer(body) {
        Some(answer) => HttpResponse::Ok()
            .content_type("application/json")
            .body(answer.clone()),
        None => HttpResponse::BadRequest().finish(),
    }
}

/// Starts one server on a free loopback port with a floor at each `(path, answers, floor)`; its
/// address and a handle to stop it.
pub fn start(
    tls: rustls::ServerConfig,
    floors: Vec<(String, Canned, Floor)>,
) -> Result<(SocketAddr, ServerHandle)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let server = HttpServer::new(move || {
        floors
            .iter()
            .fold(App::new(), |app, (path, canned, floor)| {
                let resource =
                    web::resource(path.as_str()).app_data(web::Data::new(canned.clone()));
                app.service(match floor {
                    Floor::Io => resource.route(web::post().to(answer)),
                    Floor::Decoding => resource.route(web::post().to(decode_and_answer)),
                })
            })
    })
    .tcp_nodelay(true)
    .listen_rustls_0_23(listener, tls)?
    .run();
    let handle = server.handle();
    tokio::spawn(server);
    Ok((address, handle))
}
