//! A connection whose bytes must stay on tokio (TLS: the handshake and every record's
//! encryption run off the JavaScript thread), bridged to a consumer on another thread.
//!
//! The consumer ([`Remote`]) writes plaintext into a shared buffer and wakes the pump; the pump
//! task encrypts and sends it, and reads, decrypts and posts what arrives to a [`Sink`] (the
//! binding's inbox, which delivers many events per wake-up of the JavaScript thread).
//! Back-pressure both ways: the consumer stops reads with [`Remote::set_reading`], which leaves
//! the kernel's receive window to fill; writes beyond [`HIGH_WATER`] report "pending" and the
//! sink hears [`Event::Drained`] once the pump has caught up.

use std::cell::RefCell;
use std::future::poll_fn;
#[cfg(unix)]
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::Notify;

use crate::error::Error;

/// Bytes the consumer may queue before a write reports "pending".
pub const HIGH_WATER: usize = 64 * 1024;
/// The most one read takes.
const READ_BUF: usize = 64 * 1024;

thread_local! {
    /// The buffer every pump on this thread reads into: what a read gets is copied out at once,
    /// so a connection holds no buffer of its own while it waits (an idle one costs no 64 KiB).
    static READ_SCRATCH: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_BUF].into_boxed_slice());
}

/// Reads what has arrived, up to [`READ_BUF`] bytes, as bytes of its own (none at the end of
/// the stream).
fn poll_read_owned<R: AsyncRead + Unpin>(
    rd: &mut R,
    cx: &mut Context<'_>,
) -> Poll<std::io::Result<Vec<u8>>> {
    READ_SCRATCH.with(|scratch| {
        let mut own;
        let mut held = scratch.try_borrow_mut();
        // Nothing reads from inside a read, so the buffer is free; a buffer of its own if not.
        let space: &mut [u8] = match &mut held {
            Ok(scratch) => scratch,
            Err(_) => {
                own = vec![0; READ_BUF];
                &mut own
            }
        };
        let mut buf = ReadBuf::new(space);
        ready!(Pin::new(rd).poll_read(cx, &mut buf))?;
        Poll::Ready(Ok(buf.filled().to_vec()))
    })
}

/// What the pump tells its consumer.
#[derive(Debug)]
pub enum Event {
    Data(Vec<u8>),
    /// The peer ended its side (a FIN, or TLS close_notify).
    Eof,
    /// Queued writes went below the high-water mark after a write reported "pending".
    Drained,
    /// The connection failed; the pump has stopped.
    Error(Error),
}

pub trait Sink: Send + 'static {
    fn post(&self, event: Event);
}

#[derive(Default)]
struct Outbound {
    buf: Vec<u8>,
    /// A write reported "pending": the consumer waits for [`Event::Drained`].
    waiting: bool,
    shutdown: bool,
    closed: bool,
}

/// The consumer's handle on a pumped connection.
pub struct Remote {
    out: Mutex<Outbound>,
    wake: Notify,
    reading: AtomicBool,
    dead: AtomicBool,
    /// The pump ended with an error, posted to the sink.
    failed: AtomicBool,
    /// The descriptor of the TCP socket under the connection while an [`Attached`] owns it
    /// (None for a Unix socket, and once the stream is dropped).
    #[cfg(unix)]
    tcp: Mutex<Option<RawFd>>,
}

/// The result of [`Remote::write`].
#[derive(Debug, PartialEq, Eq)]
pub enum Write {
    Done,
    Pending,
    Closed,
}

impl Default for Remote {
    fn default() -> Self {
        Self::new()
    }
}

impl Remote {
    pub fn new() -> Remote {
        Remote {
            out: Mutex::new(Outbound::default()),
            wake: Notify::new(),
            reading: AtomicBool::new(true),
            dead: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            #[cfg(unix)]
            tcp: Mutex::new(None),
        }
    }

    fn out(&self) -> std::sync::MutexGuard<'_, Outbound> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `chunks` for the pump. "Pending" past the high-water mark.
    pub fn write(&self, chunks: &[&[u8]]) -> Write {
        let mut out = self.out();
        if out.closed || out.shutdown || self.is_dead() {
            return Write::Closed;
        }
        let was_empty = out.buf.is_empty();
        for chunk in chunks {
            out.buf.extend_from_slice(chunk);
        }
        let pending = out.buf.len() > HIGH_WATER;
        out.waiting |= pending;
        drop(out);
        if was_empty {
            self.wake.notify_one();
        }
        if pending {
            Write::Pending
        } else {
            Write::Done
        }
    }

    /// Ends the sending side once everything queued is sent.
    pub fn shutdown(&self) {
        self.out().shutdown = true;
        self.wake.notify_one();
    }

    /// Stops the pump; the connection closes.
    pub fn close(&self) {
        self.out().closed = true;
        self.wake.notify_one();
    }

    pub fn set_reading(&self, on: bool) {
        if self.reading.swap(on, Ordering::AcqRel) != on && on {
            self.wake.notify_one();
        }
    }

    /// The pump has seen the end of the connection (or stopped).
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// The pump ended with an error, which its sink has been given ([`Event::Error`]): a write
    /// it refuses is to fail with that error, not one of its own.
    pub fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Nothing queued, nothing shut: the connection can carry another request.
    pub fn is_clean(&self) -> bool {
        let out = self.out();
        out.buf.is_empty() && !out.shutdown && !out.closed && !self.is_dead()
    }

    /// `socket.setNoDelay(on)` on the TCP socket under the connection, at once; done when it
    /// has none (a Unix socket, or a stream already dropped), as `net.Socket`'s setters take a
    /// socket that cannot have the option. Errors are errnos.
    #[cfg(unix)]
    pub fn set_no_delay(&self, on: bool) -> Result<(), i32> {
        self.with_tcp(|fd| super::raw::set_no_delay(fd, on))
            .unwrap_or(Ok(()))
    }

    /// `socket.setKeepAlive(on, initialDelay)` on the TCP socket under the connection (see
    /// [`Remote::set_no_delay`]).
    #[cfg(unix)]
    pub fn set_keep_alive(&self, on: bool, initial_delay: std::time::Duration) -> Result<(), i32> {
        self.with_tcp(|fd| super::raw::set_keep_alive(fd, on, initial_delay))
            .unwrap_or(Ok(()))
    }

    /// `socket.setTypeOfService(tos)` on the TCP socket under the connection (see
    /// [`Remote::set_no_delay`]).
    #[cfg(unix)]
    pub fn set_type_of_service(&self, tos: u8) -> Result<(), i32> {
        self.with_tcp(|fd| super::raw::set_type_of_service(fd, tos))
            .unwrap_or(Ok(()))
    }

    /// `socket.resetAndDestroy()`: the TCP socket under the connection resets it when closed
    /// (see [`Remote::set_no_delay`]).
    #[cfg(unix)]
    pub fn set_reset_on_close(&self) -> Result<(), i32> {
        self.with_tcp(super::raw::set_reset_on_close)
            .unwrap_or(Ok(()))
    }

    /// `socket.getTypeOfService()` of the TCP socket under the connection: None when it has
    /// none.
    #[cfg(unix)]
    pub fn type_of_service(&self) -> Result<Option<u8>, i32> {
        self.with_tcp(super::raw::type_of_service)
            .unwrap_or(Ok(None))
    }

    /// `get` on the connection's TCP socket; None when it has none.
    #[cfg(unix)]
    fn with_tcp<R>(&self, get: impl FnOnce(BorrowedFd<'_>) -> R) -> Option<R> {
        let tcp = self.tcp.lock().unwrap_or_else(|e| e.into_inner());
        let fd = (*tcp)?;
        // SAFETY: `fd` is open for as long as the lock is held. It is registered by
        // `Attached::new`, taken from the stream that `Attached` owns, and cleared by
        // `Attached`'s `drop` under this lock before its stream (and so the descriptor) is
        // dropped: a descriptor number closed, then reused by another socket, is never used
        // here. Guarded by `tests::options_reach_the_tcp_socket_while_its_stream_lives`.
        Some(get(unsafe { BorrowedFd::borrow_raw(fd) }))
    }
}

/// A stream that may have a TCP socket under it, whose options a program sets on its socket
/// (`setNoDelay`, `setKeepAlive`, `setTypeOfService`).
pub trait TcpOf {
    /// The TCP socket's descriptor, owned by this stream (open while the stream lives).
    #[cfg(unix)]
    fn tcp_fd(&self) -> Option<RawFd>;
}

impl TcpOf for tokio::net::TcpStream {
    #[cfg(unix)]
    fn tcp_fd(&self) -> Option<RawFd> {
        Some(self.as_raw_fd())
    }
}

impl TcpOf for super::connect::PathStream {
    #[cfg(unix)]
    fn tcp_fd(&self) -> Option<RawFd> {
        None
    }
}

impl<T: TcpOf> TcpOf for super::tls::ClientStream<T> {
    #[cfg(unix)]
    fn tcp_fd(&self) -> Option<RawFd> {
        self.io().tcp_fd()
    }
}

impl<T: TcpOf + ?Sized> TcpOf for Box<T> {
    #[cfg(unix)]
    fn tcp_fd(&self) -> Option<RawFd> {
        (**self).tcp_fd()
    }
}

/// A pumped stream, whose TCP socket its [`Remote`] sets options on while it lives (see
/// [`Remote::set_no_delay`]).
pub struct Attached<S: TcpOf> {
    stream: S,
    // Read on Unix alone, where the descriptor is registered.
    #[cfg_attr(not(unix), allow(dead_code))]
    remote: Arc<Remote>,
}

impl<S: TcpOf> Attached<S> {
    pub fn new(stream: S, remote: Arc<Remote>) -> Attached<S> {
        #[cfg(unix)]
        {
            *remote.tcp.lock().unwrap_or_else(|e| e.into_inner()) = stream.tcp_fd();
        }
        Attached { stream, remote }
    }
}

impl<S: TcpOf> Drop for Attached<S> {
    // Runs before the stream's own drop closes the descriptor.
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            *self.remote.tcp.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }
}

impl<S: TcpOf + AsyncRead + Unpin> AsyncRead for Attached<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: TcpOf + AsyncWrite + Unpin> AsyncWrite for Attached<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Runs the connection until it ends or the consumer closes it.
pub async fn pump<S, K>(stream: S, remote: Arc<Remote>, sink: K)
where
    S: AsyncRead + AsyncWrite + Unpin,
    K: Sink,
{
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut eof = false;
    let mut shut = false;
    loop {
        let (data, shutdown, closed, waiting) = {
            let mut out = remote.out();
            let data = std::mem::take(&mut out.buf);
            let waiting = std::mem::take(&mut out.waiting) && !data.is_empty();
            (data, out.shutdown, out.closed, waiting)
        };
        if closed {
            break;
        }
        if !data.is_empty() {
            let written = async {
                wr.write_all(&data).await?;
                wr.flush().await
            }
            .await;
            if let Err(e) = written {
                remote.failed.store(true, Ordering::Release);
                remote.dead.store(true, Ordering::Release);
                // A peer that refused us (a TLS 1.3 server asking for a client certificate,
                // say) closed with an alert: what is already received names the real cause.
                let received = refusal(&mut rd).await;
                let err = match received {
                    Some(r) if r.get_ref().is_some_and(|i| i.is::<rustls::Error>()) => {
                        stream_error(&r, "read")
                    }
                    _ => stream_error(&e, "write"),
                };
                sink.post(Event::Error(err));
                return;
            }
            if waiting {
                sink.post(Event::Drained);
            }
            continue;
        }
        if shutdown && !shut {
            shut = true;
            let _ = wr.shutdown().await;
        }
        let reading = !eof && remote.reading.load(Ordering::Acquire);
        tokio::select! {
            biased;
            _ = remote.wake.notified() => {}
            read = poll_fn(|cx| poll_read_owned(&mut rd, cx)), if reading => match read {
                Ok(data) if data.is_empty() => {
                    eof = true;
                    remote.dead.store(true, Ordering::Release);
                    sink.post(Event::Eof);
                }
                Ok(data) => sink.post(Event::Data(data)),
                Err(e) => {
                    remote.failed.store(true, Ordering::Release);
                    remote.dead.store(true, Ordering::Release);
                    sink.post(Event::Error(stream_error(&e, "read")));
                    return;
                }
            },
        }
    }
    remote.dead.store(true, Ordering::Release);
}

/// How long a connection a write found closed may take to give what it received before.
const REFUSAL_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// The most reads that wait takes.
const REFUSAL_READS: usize = 64;

/// The error that ends what a connection a write found closed or reset had received (a TLS
/// alert sent before the peer closed: its bytes come before the reset), or None when it ends
/// cleanly. Waited for, not only taken if it is there: the reset can reach the write before
/// the runtime has seen that the bytes before it are readable. Bounded, for a write error
/// that leaves the connection open for reading.
async fn refusal<R: AsyncRead + Unpin>(rd: &mut R) -> Option<std::io::Error> {
    let reads = async {
        for _ in 0..REFUSAL_READS {
            match poll_fn(|cx| poll_read_owned(rd, cx)).await {
                Ok(data) if data.is_empty() => return None,
                Ok(_) => {}
                Err(e) => return Some(e),
            }
        }
        None
    };
    tokio::time::timeout(REFUSAL_WAIT, reads)
        .await
        .ok()
        .flatten()
}

/// How an I/O error of the pumped stream reads in Node's terms (TLS alerts keep their names).
pub fn stream_error(err: &std::io::Error, syscall: &'static str) -> Error {
    match err
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    {
        Some(_) => crate::transport::tls::read_error(err),
        None => Error::io(err, syscall),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tokio::io::{duplex, AsyncReadExt};
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

    /// A sink that sends what it gets down a channel.
    pub(crate) struct Chan(pub UnboundedSender<Event>);
    impl Sink for Chan {
        fn post(&self, event: Event) {
            let _ = self.0.send(event);
        }
    }

    fn start<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
        stream: S,
        remote: &Arc<Remote>,
    ) -> (tokio::task::JoinHandle<()>, UnboundedReceiver<Event>) {
        let (tx, rx) = unbounded_channel();
        (tokio::spawn(pump(stream, remote.clone(), Chan(tx))), rx)
    }

    /// A connection the peer refused with a TLS alert and then reset: a write fails, and the
    /// alert, read before the reset, is not readable at the first poll after the write (the
    /// runtime has yet to see it), only at the next.
    #[derive(Default)]
    struct Refused {
        wrote: bool,
        polled_since: bool,
    }

    impl AsyncRead for Refused {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            _buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            if !self.wrote {
                return Poll::Pending;
            }
            if !std::mem::replace(&mut self.polled_since, true) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let alert = rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired);
            Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                alert,
            )))
        }
    }

    impl AsyncWrite for Refused {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            _buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.wrote = true;
            Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_write_the_peer_refused_fails_with_the_alert_it_sent_before() {
        let remote = Arc::new(Remote::new());
        let (task, mut rx) = start(Refused::default(), &remote);
        assert_eq!(remote.write(&[b"GET / HTTP/1.1\r\n\r\n"]), Write::Done);
        let Some(Event::Error(err)) = rx.recv().await else {
            panic!("an error expected")
        };
        assert_eq!(err.code(), "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED");
        task.await.unwrap();
        // A later write is refused; the consumer is to fail with the error it was sent.
        assert_eq!(remote.write(&[b"x"]), Write::Closed);
        assert!(remote.has_failed());
    }

    #[tokio::test]
    async fn bytes_flow_both_ways_and_eof_is_reported() {
        let (client, mut server) = duplex(1024);
        let remote = Arc::new(Remote::new());
        let (_task, mut rx) = start(client, &remote);
        assert_eq!(remote.write(&[b"GET / ", b"HTTP/1.1\r\n\r\n"]), Write::Done);
        let mut got = [0u8; 18];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"GET / HTTP/1.1\r\n\r\n");
        server.write_all(b"HTTP/1.1 200 OK\r\n").await.unwrap();
        let Some(Event::Data(d)) = rx.recv().await else {
            panic!("data expected")
        };
        assert_eq!(d, b"HTTP/1.1 200 OK\r\n");
        drop(server);
        assert!(matches!(rx.recv().await, Some(Event::Eof)));
        assert!(remote.is_dead());
        assert!(!remote.is_clean());
    }

    #[tokio::test]
    async fn a_write_past_the_high_water_mark_is_pending_until_drained() {
        let (client, mut server) = duplex(1 << 20);
        let remote = Arc::new(Remote::new());
        let (_task, mut rx) = start(client, &remote);
        let big = vec![7u8; HIGH_WATER + 1];
        assert_eq!(remote.write(&[&big]), Write::Pending);
        assert!(matches!(rx.recv().await, Some(Event::Drained)));
        let mut got = vec![0u8; big.len()];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(got, big);
    }

    // Paused time: the timeout below fires only once every task is idle, that is when the
    // server's write is truly stuck, not after a wall-clock wait.
    #[tokio::test(start_paused = true)]
    async fn reads_stop_while_the_consumer_is_paused() {
        let (client, mut server) = duplex(64);
        let remote = Arc::new(Remote::new());
        remote.set_reading(false);
        let (_task, mut rx) = start(client, &remote);
        // The pipe holds 64 bytes: with nobody reading, the server's write stalls.
        let stalled = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            server.write_all(&[1u8; 1000]),
        )
        .await;
        assert!(
            stalled.is_err(),
            "the server must stall while reads are off"
        );
        assert!(rx.try_recv().is_err());
        remote.set_reading(true);
        assert!(matches!(rx.recv().await, Some(Event::Data(_))));
    }

    // Every pump of a thread reads through one buffer: two connections on one thread, each
    // sent more than a read takes, in turns, get their own bytes and all of them.
    #[tokio::test]
    async fn pumps_on_one_thread_each_get_their_own_bytes() {
        let mut servers = Vec::new();
        let mut pumps = Vec::new();
        for _ in 0..2 {
            let (client, server) = duplex(READ_BUF * 4);
            let remote = Arc::new(Remote::new());
            servers.push(server);
            pumps.push((start(client, &remote), remote));
        }
        let total = READ_BUF * 3 + 5;
        let sent: Vec<Vec<u8>> = (0..2u8)
            .map(|c| (0..total).map(|i| (i % 251) as u8 ^ (c * 0x55)).collect())
            .collect();
        for (a, b) in sent[0].chunks(7000).zip(sent[1].chunks(7000)) {
            servers[0].write_all(a).await.unwrap();
            servers[1].write_all(b).await.unwrap();
            tokio::task::yield_now().await;
        }
        // The servers' ends close: each pump reads the rest, then the end.
        drop(servers);
        for (i, ((_task, rx), _remote)) in pumps.iter_mut().enumerate() {
            let mut got = Vec::new();
            loop {
                match rx.recv().await {
                    Some(Event::Data(d)) => {
                        assert!(!d.is_empty() && d.len() <= READ_BUF);
                        got.extend_from_slice(&d);
                    }
                    Some(Event::Eof) => break,
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert_eq!(got, sent[i], "connection {i}");
        }
    }

    #[tokio::test]
    async fn close_ends_the_pump_and_the_connection() {
        let (client, mut server) = duplex(64);
        let remote = Arc::new(Remote::new());
        let (task, _rx) = start(client, &remote);
        remote.close();
        task.await.unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(server.read(&mut buf).await.unwrap(), 0);
        assert_eq!(remote.write(&[b"x"]), Write::Closed);
    }

    /// The options a program sets reach the TCP socket under a pumped stream while the stream
    /// lives, and nothing is set once it has dropped (its descriptor's number may be another
    /// socket's by then).
    #[cfg(unix)]
    #[tokio::test]
    async fn options_reach_the_tcp_socket_while_its_stream_lives() {
        use std::time::Duration;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (_server, _) = listener.accept().await.unwrap();
        let fd = client.as_raw_fd();
        let remote = Arc::new(Remote::new());
        let (task, _rx) = start(Attached::new(client, remote.clone()), &remote);
        // SAFETY (test): the pump owns the stream, and so the descriptor, until `close` below.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let sock = || socket2::SockRef::from(&borrowed);
        assert_eq!(remote.set_no_delay(false), Ok(()));
        assert!(!sock().tcp_nodelay().unwrap());
        assert_eq!(remote.set_no_delay(true), Ok(()));
        assert!(sock().tcp_nodelay().unwrap());
        assert_eq!(remote.set_keep_alive(true, Duration::from_secs(7)), Ok(()));
        assert!(sock().keepalive().unwrap());
        assert_eq!(sock().tcp_keepalive_time().unwrap(), Duration::from_secs(7));
        assert_eq!(remote.set_keep_alive(false, Duration::ZERO), Ok(()));
        assert!(!sock().keepalive().unwrap());
        assert_eq!(remote.set_type_of_service(0x28), Ok(()));
        assert_eq!(sock().tos_v4().unwrap(), 0x28);
        assert_eq!(remote.type_of_service(), Ok(Some(0x28)));
        remote.close();
        task.await.unwrap();
        assert_eq!(*remote.tcp.lock().unwrap(), None);
        assert_eq!(remote.set_no_delay(false), Ok(()));
        assert_eq!(remote.set_type_of_service(0x10), Ok(()));
        assert_eq!(remote.type_of_service(), Ok(None));
    }

    /// A stream with no TCP socket under it (a Unix socket) takes the options as done.
    #[cfg(unix)]
    #[tokio::test]
    async fn options_on_a_unix_socket_are_taken_as_done() {
        let (client, _server) = tokio::net::UnixStream::pair().unwrap();
        let remote = Arc::new(Remote::new());
        let attached = Attached::new(client, remote.clone());
        assert_eq!(*remote.tcp.lock().unwrap(), None);
        assert_eq!(remote.set_no_delay(false), Ok(()));
        assert_eq!(
            remote.set_keep_alive(true, std::time::Duration::from_secs(1)),
            Ok(())
        );
        assert_eq!(remote.set_type_of_service(0x10), Ok(()));
        assert_eq!(remote.type_of_service(), Ok(None));
        drop(attached);
    }
}
