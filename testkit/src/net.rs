//! Networking for the components: free ports, this machine's own address (where a cluster with a
//! real node listens, so that pods reach it), and plain-HTTP probes of health endpoints. Nothing
//! here knows which component it talks to.

use std::net::{IpAddr, Ipv4Addr, TcpListener, UdpSocket};

use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::error::{Error, Result};

/// A port on 127.0.0.1 that was free a moment ago ([`free_port_on`]).
pub(crate) fn free_port() -> Result<u16> {
    free_port_on(Ipv4Addr::LOCALHOST)
}

/// A port on `address` that was free a moment ago, probed on the address the component binds: a
/// port free on 127.0.0.1 can be held on this machine's own address, by one of the many
/// connections a cluster with real nodes makes from it (a registry failed to bind one so). If
/// another process takes it before the component binds it, the component exits and the start
/// fails with its log.
pub(crate) fn free_port_on(address: Ipv4Addr) -> Result<u16> {
    let listener = TcpListener::bind((address, 0)).map_err(Error::Port)?;
    Ok(listener.local_addr().map_err(Error::Port)?.port())
}

/// This machine's own IPv4 address on its default route (not loopback: a pod cannot reach the
/// host's loopback): the source address of a UDP socket connected to a documentation address,
/// which sends no packet.
pub fn host_ipv4() -> Result<Ipv4Addr> {
    let failed = |message: String| Error::Format {
        action: "find this machine's IPv4 address on its default route".into(),
        message,
    };
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| failed(e.to_string()))?;
    socket
        .connect((Ipv4Addr::new(198, 51, 100, 1), 9))
        .map_err(|e| failed(format!("no default route: {e}")))?;
    match socket.local_addr().map_err(|e| failed(e.to_string()))?.ip() {
        IpAddr::V4(ip) if !ip.is_loopback() && !ip.is_unspecified() => Ok(ip),
        other => Err(failed(format!("the default route's source is {other}"))),
    }
}

/// The status code of a plain-HTTP GET of `url`, or None if there was no answer.
pub(crate) async fn http_status(url: &str) -> Option<u16> {
    let uri: hyper::Uri = url.parse().ok()?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let response = client.get(uri).await.ok()?;
    Some(response.status().as_u16())
}

/// A server on 127.0.0.1 that accepts connections and never answers, as a registry that stalls
/// looks to its clients: its address, and how many connections are open now (each is held until
/// the client closes it). It serves until the runtime it was started on ends.
pub async fn silent_server() -> std::io::Result<(String, tokio::sync::watch::Receiver<usize>)> {
    use tokio::io::AsyncReadExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    let (open, count) = tokio::sync::watch::channel(0usize);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            open.send_modify(|open| *open += 1);
            let open = open.clone();
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                while matches!(socket.read(&mut buffer).await, Ok(n) if n > 0) {}
                open.send_modify(|open| *open -= 1);
            });
        }
    });
    Ok((address, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_can_be_bound() {
        let port = free_port().unwrap();
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }

    #[test]
    fn the_host_address_can_be_bound_and_is_not_loopback() {
        let ip = host_ipv4().unwrap();
        assert!(!ip.is_loopback());
        TcpListener::bind((ip, 0)).unwrap();
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
