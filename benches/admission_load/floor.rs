//! The yardsticks doing the route's I/O, three per route. On the same stack as the no-op and
//! ocifit's host (actix-web over rustls, the same certificate, Nagle's algorithm off as the host
//! has it), each reads the review whole and answers, unplanned, what ocifit answered to that
//! review (found by the body's length). The equal-I/O floor answers those bytes as they came; the
//! decoding floor first decodes the review as a webhook on kube-rs does (kube's
//! `AdmissionReview<DynamicObject>` into its `AdmissionRequest`); the webhook floor decodes it so
//! and encodes the same answer as such a webhook does with serde_json and base64: all a webhook
//! does but decide.

use std::collections::HashMap;
use std::hint::black_box;
use std::net::{SocketAddr, TcpListener};

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::Result;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use serde_json::Value;

/// A floor's answers, by the length of the review they answer (reviews of one length told
/// apart by their bytes).
#[derive(Clone, Default)]
pub struct Canned(HashMap<usize, Vec<(Bytes, Known)>>);

/// One answer: its bytes, and for the webhook floor what it says apart (the response without
/// its patch, and the patch as a webhook builds it).
#[derive(Clone)]
struct Known {
    bytes: Bytes,
    response: Value,
    patch: Option<json_patch::Patch>,
}

impl Canned {
    /// Answers `answer` to `review`; an error if `answer` is not an AdmissionReview whose patch,
    /// if any, is a JSON patch in base64.
    pub fn add(&mut self, review: Bytes, answer: Bytes) -> Result<()> {
        let mut response = serde_json::from_slice::<Value>(&answer)?["response"].take();
        let patch = match response.get_mut("patch").map(Value::take) {
            Some(Value::String(encoded)) => {
                Some(serde_json::from_slice(&STANDARD.decode(encoded)?)?)
            }
            Some(other) => anyhow::bail!("a patch that is not base64: {other}"),
            None => None,
        };
        if let Some(fields) = response.as_object_mut() {
            fields.remove("patch");
        }
        let known = Known {
            bytes: answer,
            response,
            patch,
        };
        self.0
            .entry(review.len())
            .or_default()
            .push((review, known));
        Ok(())
    }

    fn answer(&self, review: &[u8]) -> Option<&Known> {
        match self.0.get(&review.len())?.as_slice() {
            [(_, answer)] => Some(answer),
            several => several
                .iter()
                .find_map(|(known, answer)| (known == review).then_some(answer)),
        }
    }
}

/// What a floor does with the review before answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Floor {
    /// Nothing: the bytes are read and answered.
    Io,
    /// Decoded as kube-rs's admission types; a review they refuse is answered 400.
    Decoding,
    /// Decoded so, and the answer encoded: its patch (built anew) with serde_json, then
    /// base64, then the review holding it with serde_json.
    Webhook,
}

async fn answer(canned: web::Data<Canned>, body: web::Bytes) -> HttpResponse {
    answer_canned(&canned, &body)
}

async fn decode_and_answer(canned: web::Data<Canned>, body: web::Bytes) -> HttpResponse {
    match decode(&body) {
        Some(request) => {
            black_box(request);
            answer_canned(&canned, &body)
        }
        None => HttpResponse::BadRequest().finish(),
    }
}

async fn decode_and_encode(canned: web::Data<Canned>, body: web::Bytes) -> HttpResponse {
    let (Some(request), Some(known)) = (decode(&body), canned.answer(&body)) else {
        return HttpResponse::BadRequest().finish();
    };
    let mut response = known.response.clone();
    response["uid"] = Value::String(request.uid);
    if let Some(patch) = known.patch.clone() {
        match serde_json::to_vec(&patch) {
            Ok(json) => response["patch"] = Value::String(STANDARD.encode(json)),
            Err(_) => return HttpResponse::InternalServerError().finish(),
        }
    }
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    });
    match serde_json::to_vec(&review) {
        Ok(answer) => HttpResponse::Ok()
            .content_type("application/json")
            .body(answer),
        Err(_) => HttpResponse::InternalServerError().finish(),
    }
}

/// The review decoded as kube-rs's admission types; `None` if they refuse it.
fn decode(body: &[u8]) -> Option<AdmissionRequest<DynamicObject>> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).ok()?;
    review.try_into().ok()
}

fn answer_canned(canned: &Canned, body: &[u8]) -> HttpResponse {
    match canned.answer(body) {
        Some(answer) => HttpResponse::Ok()
            .content_type("application/json")
            .body(answer.bytes.clone()),
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
                    Floor::Webhook => resource.route(web::post().to(decode_and_encode)),
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
