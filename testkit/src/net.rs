//! Loopback networking for the components: free ports, and plain-HTTP probes of etcd's and the
//! registry's health endpoints. Nothing here knows which component it talks to.

use std::net::{Ipv4Addr, TcpListener};

use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::error::{Error, Result};

/// A port on 127.0.0.1 that was free a moment ago. The kernel hands out ephemeral ports in turn, so
/// another process taking it before the component binds it is unlikely; if it happens, the
/// component exits and the start fails with its log.
pub(crate) fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(Error::Port)?;
    Ok(listener.local_addr().map_err(Error::Port)?.port())
}

/// The status code of a plain-HTTP GET of `url`, or None if there was no answer.
pub(crate) async fn http_status(url: &str) -> Option<u16> {
    let uri: hyper::Uri = url.parse().ok()?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let response = client.get(uri).await.ok()?;
    Some(response.status().as_u16())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_can_be_bound() {
        let port = free_port().unwrap();
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }

    #[tokio::test]
    async fn nothing_listening_is_no_answer() {
        let port = free_port().unwrap();
        assert_eq!(
            http_status(&format!("http://127.0.0.1:{port}/health")).await,
            None
        );
    }
}
