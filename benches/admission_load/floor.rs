//! The second yardstick, one per route: a no-op doing the route's I/O. On the same stack as the
//! no-op and ocifit's host (actix-web over rustls, the same certificate, Nagle's algorithm off
//! as the host has it), each floor reads the review whole and answers, unplanned, the very bytes
//! ocifit answered to that review (found by the body's length), so the answer has the size of
//! ocifit's patch. What a route costs beyond its floor is decoding, planning and encoding.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::Result;
use bytes::Bytes;

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

async fn answer(canned: web::Data<Canned>, body: web::Bytes) -> HttpResponse {
    match canned.answer(&body) {
        Some(answer) => HttpResponse::Ok()
            .content_type("application/json")
            .body(answer.clone()),
        None => HttpResponse::BadRequest().finish(),
    }
}

/// Starts one server on a free loopback port with a floor at each `(path, answers)`; its
/// address and a handle to stop it.
pub fn start(
    tls: rustls::ServerConfig,
    floors: Vec<(String, Canned)>,
) -> Result<(SocketAddr, ServerHandle)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let server = HttpServer::new(move || {
        floors.iter().fold(App::new(), |app, (path, canned)| {
            app.service(
                web::resource(path.as_str())
                    .app_data(web::Data::new(canned.clone()))
                    .route(web::post().to(answer)),
            )
        })
    })
    .tcp_nodelay(true)
    .listen_rustls_0_23(listener, tls)?
    .run();
    let handle = server.handle();
    tokio::spawn(server);
    Ok((address, handle))
}
