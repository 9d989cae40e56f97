//! Chunks between the async side of a transfer (the registry) and its blocking side (files, tar,
//! gzip) through a bounded channel, so memory holds at most `CHUNKS_IN_FLIGHT` chunks whatever the
//! artifact's size; and readers and writers that hash what passes through them.

use std::io::{self, Read, Write};

use bytes::{Buf, Bytes, BytesMut};
use futures_util::Stream;
use sha2::{Digest as _, Sha256};
use tokio::sync::mpsc;

/// Size of the chunks the blocking side sends.
pub(super) const CHUNK: usize = 256 * 1024;
/// How many chunks may wait between the two sides.
pub(super) const CHUNKS_IN_FLIGHT: usize = 8;

pub(super) type Chunk = io::Result<Bytes>;

/// A bounded channel of chunks.
pub(super) fn channel() -> (mpsc::Sender<Chunk>, mpsc::Receiver<Chunk>) {
    mpsc::channel(CHUNKS_IN_FLIGHT)
}

/// The receiving end as a stream, for an upload's body.
pub(super) fn into_stream(
    receiver: mpsc::Receiver<Chunk>,
) -> impl Stream<Item = Chunk> + Send + 'static {
    futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    })
}

const STOPPED: &str = "the transfer stopped";

/// Whether a write failed only because the async side stopped taking chunks.
pub(super) fn is_stopped(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::BrokenPipe && error.to_string() == STOPPED
}

/// Reads what the async side sends, blocking; the end of the channel is the end of the data, an
/// error sent is an error read.
pub(super) struct ChannelReader {
    receiver: mpsc::Receiver<Chunk>,
    current: Bytes,
}

impl ChannelReader {
    pub(super) fn new(receiver: mpsc::Receiver<Chunk>) -> Self {
        ChannelReader {
            receiver,
            current: Bytes::new(),
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.receiver.blocking_recv() {
                Some(Ok(bytes)) => self.current = bytes,
                Some(Err(err)) => return Err(err),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current.advance(n);
        Ok(n)
    }
}

/// Sends what is written to the async side in [`CHUNK`]-sized pieces, blocking while the channel
/// is full. `flush` sends a partial chunk.
pub(super) struct ChannelWriter {
    sender: mpsc::Sender<Chunk>,
    buffer: BytesMut,
}

impl ChannelWriter {
    pub(super) fn new(sender: mpsc::Sender<Chunk>) -> Self {
        ChannelWriter {
            sender,
            buffer: BytesMut::with_capacity(CHUNK),
        }
    }

    /// Ends the stream with an error instead of its end, so the upload fails.
    pub(super) fn fail(self, error: io::Error) {
        // The upload may have stopped already; then there is no one left to tell.
        let _ = self.sender.blocking_send(Err(error));
    }

    fn send(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = self.buffer.split().freeze();
        self.buffer.reserve(CHUNK);
        self.sender
            .blocking_send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, STOPPED))
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = CHUNK - self.buffer.len();
        let n = buf.len().min(room);
        self.buffer.extend_from_slice(&buf[..n]);
        if self.buffer.len() == CHUNK {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

/// Passes reads through, hashing them (sha256).
pub(super) struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> HashingReader<R> {
    pub(super) fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
        }
    }

    /// `sha256:<hex>` of everything read.
    pub(super) fn digest(self) -> String {
        digest_of(self.hasher)
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Passes writes through, hashing them (sha256).
pub(super) struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> HashingWriter<W> {
    pub(super) fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
        }
    }

    /// The inner writer and `sha256:<hex>` of everything written.
    pub(super) fn finish(self) -> (W, String) {
        (self.inner, digest_of(self.hasher))
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn digest_of(hasher: Sha256) -> String {
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn what_the_writer_sends_the_reader_reads_in_order_and_whole() {
        let (tx, rx) = channel();
        let data: Vec<u8> = (0..CHUNK * 3 + 17).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let writer = tokio::task::spawn_blocking(move || {
            let mut writer = ChannelWriter::new(tx);
            for piece in sent.chunks(1000) {
                writer.write_all(piece).unwrap();
            }
            writer.flush().unwrap();
        });
        let reader = tokio::task::spawn_blocking(move || {
            let mut read = Vec::new();
            ChannelReader::new(rx).read_to_end(&mut read).unwrap();
            read
        });
        writer.await.unwrap();
        assert_eq!(reader.await.unwrap(), data);
    }

    #[tokio::test]
    async fn an_error_sent_is_an_error_read() {
        let (tx, rx) = channel();
        tx.send(Ok(Bytes::from_static(b"ab"))).await.unwrap();
        tx.send(Err(io::Error::other("download failed")))
            .await
            .unwrap();
        drop(tx);
        let result = tokio::task::spawn_blocking(move || {
            let mut read = Vec::new();
            ChannelReader::new(rx).read_to_end(&mut read)
        })
        .await
        .unwrap();
        assert_eq!(result.unwrap_err().to_string(), "download failed");
    }

    #[test]
    fn hashing_reader_and_writer_agree_with_the_registrys_digest() {
        let mut reader = HashingReader::new(&b"{}"[..]);
        io::copy(&mut reader, &mut io::sink()).unwrap();
        let expected = crate::registry::sha256_digest(b"{}");
        assert_eq!(reader.digest(), expected);
        let mut writer = HashingWriter::new(Vec::new());
        writer.write_all(b"{}").unwrap();
        assert_eq!(writer.finish(), (b"{}".to_vec(), expected));
    }
}
