//! A TCP forwarder that can be switched off (connections refused, open ones cut) and on again on
//! the same port: an outage of what it fronts (a registry, say) without losing its content.

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::error::{Error, Result};
use crate::net::free_port;

/// A forwarder on 127.0.0.1 to `target`.
pub struct Proxy {
    /// Where clients connect (`127.0.0.1:PORT`).
    pub addr: String,
    target: String,
    task: Option<JoinHandle<()>>,
}

impl Proxy {
    /// A forwarder to `target`, accepting.
    pub async fn start(target: &str) -> Result<Proxy> {
        let mut proxy = Proxy {
            addr: format!("127.0.0.1:{}", free_port()?),
            target: target.to_owned(),
            task: None,
        };
        proxy.up().await?;
        Ok(proxy)
    }

    /// Accepts and forwards connections again.
    pub async fn up(&mut self) -> Result<()> {
        let listener = TcpListener::bind(&self.addr).await.map_err(Error::Port)?;
        let target = self.target.clone();
        self.task = Some(tokio::spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                connections.spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        }));
        Ok(())
    }

    /// Closes the port and every open connection.
    pub async fn down(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A server on 127.0.0.1 that answers each connection with `hello` and closes it.
    async fn greeter() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("an address").to_string();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(b"hello").await;
            }
        });
        addr
    }

    async fn read_through(addr: &str) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(addr).await?;
        let mut text = String::new();
        stream.read_to_string(&mut text).await?;
        Ok(text)
    }

    #[tokio::test]
    async fn a_proxy_forwards_refuses_while_down_and_forwards_again_on_the_same_port() {
        let mut proxy = Proxy::start(&greeter().await).await.expect("a proxy");
        assert_eq!(read_through(&proxy.addr).await.expect("forwarded"), "hello");
        proxy.down().await;
        assert!(
            read_through(&proxy.addr).await.is_err(),
            "refused while down"
        );
        proxy.up().await.expect("up again");
        assert_eq!(read_through(&proxy.addr).await.expect("forwarded"), "hello");
    }
}
