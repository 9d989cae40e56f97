//! The HTTPS servers the scenarios stand up in place of a webhook (a no-op beside ocifit's, one that
//! patches, one serving a managed certificate): HTTP/1.1 over TLS on a loopback port, each
//! request answered by the caller's handler.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Serves `handle` over HTTPS with `tls` on a free port of 127.0.0.1, for as long as the runtime
/// runs; the bound address. A connection that fails its handshake is dropped, the others served.
pub async fn serve_https<H, F>(tls: Arc<rustls::ServerConfig>, handle: H) -> SocketAddr
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + 'static,
    F: Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send + 'static,
{
    let acceptor = TlsAcceptor::from(tls);
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("the bound address");
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            // Always, as ocifit's host does: with Nagle's algorithm on, an answer's last segment
            // waits for the ACK of the previous one, which the apiserver delays ~40 ms on a
            // reused connection; a stand-in for a webhook must not pay what ocifit does not.
            let _ = tcp.set_nodelay(true);
            let (acceptor, handle) = (acceptor.clone(), handle.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(handle))
                    .await;
            });
        }
    });
    address
}
