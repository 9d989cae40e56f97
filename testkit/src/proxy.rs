//! A TCP forwarder that can be switched off (connections refused, open ones cut) and on again on
//! the same port: an outage of what it fronts (a registry, say) without losing its content. It can
//! also cut a connection once it has carried so many bytes: a transfer broken mid-body, as when the
//! server behind it dies, which a real server cannot be made to do at a chosen byte.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::error::{Error, Result};
use crate::net::free_port;

/// A forwarder on 127.0.0.1 to `target`.
pub struct Proxy {
    /// Where clients connect (`127.0.0.1:PORT`).
    pub addr: String,
    targets: Vec<String>,
    next: Arc<AtomicU64>,
    task: Option<JoinHandle<()>>,
    cuts: Arc<Cuts>,
}

/// Which connections to cut: after how many bytes (0: none), how many more cuts (`u64::MAX`:
/// every connection), and how many were cut.
#[derive(Default)]
struct Cuts {
    after: AtomicU64,
    left: AtomicU64,
    made: AtomicU64,
}

impl Cuts {
    /// Whether a connection that has carried `moved` bytes is cut now (and counts it).
    fn now(&self, moved: u64) -> bool {
        let after = self.after.load(Ordering::SeqCst);
        if after == 0 || moved < after {
            return false;
        }
        let taken = self
            .left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| match left {
                0 => None,
                u64::MAX => Some(u64::MAX),
                n => Some(n - 1),
            });
        if taken.is_ok() {
            self.made.fetch_add(1, Ordering::SeqCst);
        }
        taken.is_ok()
    }
}

impl Proxy {
    /// A forwarder to `target`, accepting.
    pub async fn start(target: &str) -> Result<Proxy> {
        Proxy::balancing(&[target]).await
    }

    /// A forwarder sending each new connection to the next of `targets` in turn, as a Service
    /// balances over its endpoints.
    pub async fn balancing(targets: &[&str]) -> Result<Proxy> {
        let mut proxy = Proxy {
            addr: format!("127.0.0.1:{}", free_port()?),
            targets: targets.iter().map(|t| (*t).to_owned()).collect(),
            next: Arc::default(),
            task: None,
            cuts: Arc::default(),
        };
        proxy.up().await?;
        Ok(proxy)
    }

    /// Accepts and forwards connections again.
    pub async fn up(&mut self) -> Result<()> {
        let listener = TcpListener::bind(&self.addr).await.map_err(Error::Port)?;
        let (targets, next) = (self.targets.clone(), Arc::clone(&self.next));
        let cuts = Arc::clone(&self.cuts);
        self.task = Some(tokio::spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((inbound, _)) = listener.accept().await {
                let turn = next.fetch_add(1, Ordering::SeqCst) as usize;
                let Some(target) = targets.get(turn % targets.len().max(1)).cloned() else {
                    continue;
                };
                let cuts = Arc::clone(&cuts);
                connections.spawn(async move {
                    if let Ok(outbound) = TcpStream::connect(&target).await {
                        forward(inbound, outbound, &cuts).await;
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

    /// Cuts the next `times` connections (`u64::MAX`: every one) that carry `bytes` or more,
    /// both ways together, as soon as they have: the client sees its request or answer end
    /// midway. Connections already open count too.
    pub fn cut_after(&self, bytes: u64, times: u64) {
        self.cuts.left.store(times, Ordering::SeqCst);
        self.cuts.after.store(bytes.max(1), Ordering::SeqCst);
    }

    /// How many connections were cut by [`Proxy::cut_after`].
    pub fn cuts(&self) -> u64 {
        self.cuts.made.load(Ordering::SeqCst)
    }
}

/// Copies both ways until both sides are done, or until the connection is to be cut.
async fn forward(inbound: TcpStream, outbound: TcpStream, cuts: &Cuts) {
    let (mut client_read, mut client_write) = inbound.into_split();
    let (mut server_read, mut server_write) = outbound.into_split();
    let (mut up, mut down) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    let (mut client_open, mut server_open) = (true, true);
    let mut moved = 0u64;
    while client_open || server_open {
        let n = tokio::select! {
            read = client_read.read(&mut up), if client_open => {
                pass(read, &up, &mut server_write, &mut client_open).await
            }
            read = server_read.read(&mut down), if server_open => {
                pass(read, &down, &mut client_write, &mut server_open).await
            }
        };
        moved += n;
        if cuts.now(moved) {
            // Dropping both sockets with data unread resets them: the transfer breaks off.
            return;
        }
    }
}

/// Writes what was read to the other side; at the end of what was read, shuts the other side's
/// writing and marks this side done. The bytes passed.
async fn pass(
    read: std::io::Result<usize>,
    buffer: &[u8],
    to: &mut OwnedWriteHalf,
    open: &mut bool,
) -> u64 {
    match read {
        Ok(n) if n > 0 && to.write_all(&buffer[..n]).await.is_ok() => n as u64,
        _ => {
            *open = false;
            let _ = to.shutdown().await;
            0
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
