//! The promise path: HTTP/1.1 spoken by hyper, on tokio, over pooled connections.
//!
//! One [`exchange`] is one request and its response. It posts what JavaScript needs as
//! [`Event`]s to a [`Sink`] (the binding's inbox): the response head together with whatever
//! body bytes are already there (a small response crosses to JavaScript once), then body
//! chunks only as far as JavaScript lets them run ahead ([`Control::grant`]), so a paused body
//! stops reading the socket. Request bodies stream from a bounded channel ([`channel_body`]); a full channel
//! tells the writer to wait for [`Event::BodyDrain`].

mod body;
mod errors;
pub mod open;
pub mod plan;
pub mod recycle;
mod wake;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Body as _, Frame, Incoming};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

pub use body::{channel_body, gated, BodyWriter, Recording, Trailers, WriteResult};
pub use errors::{headers_timeout, hyper_error};

use crate::error::Error;

/// Request bodies as hyper sends them.
pub type ReqBody = BoxBody<Bytes, std::io::Error>;
/// A connection's request half; the connection itself runs in its own task.
pub struct Sender {
    hyper: Hyper,
    /// The connection task's waker (see [`wake`]).
    wake: Arc<wake::ConnWake>,
}

/// hyper's request half, of the protocol the connection speaks.
enum Hyper {
    /// One request at a time: the sender goes with the exchange and comes back after it.
    H1(http1::SendRequest<ReqBody>),
    /// Many at once: each exchange has a clone ([`Sender::stream`]). Boxed, with whether it
    /// runs over TLS (its requests name the scheme `https`): the sender is in every
    /// exchange's future, which stays small (see `an_exchange_fits_a_small_allocation`).
    H2(Box<(http2::SendRequest<ReqBody>, bool)>),
}

impl Hyper {
    fn is_closed(&self) -> bool {
        match self {
            Hyper::H1(s) => s.is_closed(),
            Hyper::H2(h2) => h2.0.is_closed(),
        }
    }

    fn is_ready(&self) -> bool {
        match self {
            Hyper::H1(s) => s.is_ready(),
            Hyper::H2(h2) => h2.0.is_ready(),
        }
    }

    /// Ready for a request (an HTTP/2 connection is, while it is open).
    fn ready(&mut self) -> impl Future<Output = hyper::Result<()>> + '_ {
        std::future::poll_fn(move |cx| match self {
            Hyper::H1(s) => s.poll_ready(cx),
            Hyper::H2(h2) => h2.0.poll_ready(cx),
        })
    }
}

impl Sender {
    /// The connection has closed (or will not take another request).
    pub fn is_closed(&self) -> bool {
        self.hyper.is_closed()
    }

    /// Whether the connection speaks HTTP/2 (and carries many exchanges at once).
    pub fn is_multiplexed(&self) -> bool {
        matches!(self.hyper, Hyper::H2(..))
    }

    /// For an HTTP/2 connection, a sender for one more stream on it (an exchange of its own,
    /// run by [`exchange`] in a task of its own); None for HTTP/1.1.
    pub fn stream(&self) -> Option<Sender> {
        match &self.hyper {
            Hyper::H2(h2) => Some(Sender {
                hyper: Hyper::H2(Box::new((h2.0.clone(), h2.1))),
                wake: self.wake.clone(),
            }),
            Hyper::H1(_) => None,
        }
    }

    /// Runs one request on this connection, in the connection's own task (see [`wake`]):
    /// what [`exchange`] does, without a task of its own. When the connection's task has
    /// ended, or still has one queued, the exchange comes back, to be run by [`Queued::start`]
    /// in a task of its own (it will find the connection closed). (What comes back is the
    /// exchange as given: boxing it would allocate for every request.)
    #[allow(clippy::result_large_err)]
    pub fn start(self, spec: Spec, ctl: Arc<Control>, sink: Arc<dyn Sink>) -> Result<(), Queued> {
        let wake = self.wake.clone();
        let queued = Queued {
            sender: self,
            spec,
            ctl,
            sink,
        };
        wake.queue(queued)
    }

    /// How many streams the server takes at once on this HTTP/2 connection, as its latest
    /// settings say (1 for HTTP/1.1).
    pub fn max_streams(&self) -> usize {
        match self.hyper {
            Hyper::H1(_) => 1,
            Hyper::H2(..) => self.wake.max_streams.load(Ordering::Relaxed).max(1),
        }
    }

    /// What stops the exchanges [`Sender::start`] runs on this connection.
    pub fn stopper(&self) -> Stopper {
        Stopper(self.wake.clone())
    }
}

/// An exchange not started yet.
pub struct Queued {
    sender: Sender,
    spec: Spec,
    ctl: Arc<Control>,
    sink: Arc<dyn Sink>,
}

impl Queued {
    /// The exchange's future (see [`exchange`]).
    pub fn start(self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        exchange(self.sender, self.spec, self.ctl, self.sink)
    }
}

/// Stops the exchange running in a connection's task ([`Sender::start`]).
pub struct Stopper(Arc<wake::ConnWake>);

impl Stopper {
    /// Stops the exchange, as aborting its task would, and closes its connection at once.
    pub fn stop(&self) {
        self.0.stop();
    }
}

/// A connection's request half is dropped when the connection is not to carry another request.
/// An idle one (closed by the pool) ends as hyper ends it, gracefully (a TLS close_notify);
/// one in the middle of an exchange (aborted, failed, or answered before its request's body
/// went out) closes at once, whatever hyper still had to send (see [`wake::ConnWake::cut`]).
/// An HTTP/2 connection's streams end on their own: a sender of one is dropped with no effect
/// on the connection (which the pool closes with its [`Stopper`]).
impl Drop for Sender {
    fn drop(&mut self) {
        if matches!(self.hyper, Hyper::H1(_)) && !self.hyper.is_ready() {
            self.wake.cut();
        }
    }
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.hyper {
            Hyper::H1(s) => s.fmt(f),
            Hyper::H2(h2) => h2.0.fmt(f),
        }
    }
}

/// Response header (or trailer) names and values, in order, names lower-case (as
/// `IncomingMessage#rawHeaders` would be after lower-casing), packed as JavaScript takes them:
/// `name\nvalue\nname\nvalue`. One allocation for all of them, made on the tokio thread and
/// freed on JavaScript's; a value cannot hold a newline (hyper refuses it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeaderLines(Vec<u8>);

impl HeaderLines {
    fn of(map: &http::HeaderMap) -> HeaderLines {
        Self::scan(map).0
    }

    /// The lines, and what a response head's checks need of them, in one pass.
    fn scan(map: &http::HeaderMap) -> (HeaderLines, Scan) {
        let mut scan = Scan::default();
        for (k, v) in map {
            scan.bytes += k.as_str().len() + v.len();
            scan.lines += 1;
        }
        let mut out = Vec::with_capacity(scan.bytes + 2 * scan.lines);
        for (k, v) in map {
            if !out.is_empty() {
                out.push(b'\n');
            }
            if *k == http::header::TRANSFER_ENCODING {
                scan.transfer_encoding = true;
            } else if *k == http::header::CONTENT_LENGTH {
                scan.content_length = true;
            }
            out.extend_from_slice(k.as_str().as_bytes());
            out.push(b'\n');
            out.extend_from_slice(v.as_bytes());
        }
        (HeaderLines(out), scan)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The (name, value) pairs.
    pub fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut parts = self.0.split(|&b| b == b'\n');
        std::iter::from_fn(move || Some((parts.next()?, parts.next()?)))
    }
}

/// What [`HeaderLines::scan`] notes of a header map.
#[derive(Default)]
struct Scan {
    /// Header lines.
    lines: usize,
    /// Their names' and values' bytes, together.
    bytes: usize,
    /// A `transfer-encoding` line is there.
    transfer_encoding: bool,
    /// A `content-length` line is there.
    content_length: bool,
}

/// A request's target in origin form (`/path?query`) and its header lines, parsed once and
/// shared: by a request and its replay, and by every request without headers of its own to the
/// same URL. Each exchange sends a copy of the map (a copy needs no hashing).
#[derive(Debug)]
pub struct Head {
    pub uri: http::Uri,
    pub headers: http::HeaderMap,
}

/// What one exchange sends.
pub struct Spec {
    pub method: Method,
    pub head: Arc<Head>,
    pub body: ReqBody,
    /// `expect: 100-continue`: hold the body until the server says so (or a second passes).
    pub expect_continue: Option<Arc<Notify>>,
    /// Report the informational (1xx) responses that come before the final one
    /// ([`Event::Info`]).
    pub informational: bool,
    pub headers_timeout: Option<Duration>,
    pub body_timeout: Option<Duration>,
    /// The largest response head accepted, in bytes (status line and header lines).
    pub max_head_size: usize,
}

pub fn empty_body() -> ReqBody {
    Empty::new().map_err(|never| match never {}).boxed()
}

pub fn full_body(bytes: Bytes) -> ReqBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// What an exchange tells its consumer.
#[derive(Debug)]
pub enum Event {
    /// An informational (1xx) response ahead of the final one (when the exchange's spec
    /// asks for them).
    Info {
        status: u16,
        headers: HeaderLines,
    },
    /// The response head, with the body bytes that had already arrived; `end` holds the
    /// trailers when the body is complete too.
    Head {
        status: u16,
        /// The reason phrase's bytes as they came (JavaScript reads them as latin1, as Node's
        /// parser gives them; hyper's parser leaves a phrase with a byte over 0x7F empty);
        /// borrowed when it is the status code's usual one.
        reason: Cow<'static, [u8]>,
        headers: HeaderLines,
        chunks: Vec<Bytes>,
        end: Option<HeaderLines>,
        /// The exchange is over with the head (the body came whole and the connection was
        /// settled at once): what [`Event::Done`] would carry; no `Done` follows.
        done: Option<Option<Sender>>,
    },
    /// Body bytes: every chunk that was ready when the first came, as one event.
    Data(Vec<Bytes>),
    End(HeaderLines),
    Error(Error),
    /// The connection failed before any byte of a response: the request may or may not have
    /// been processed (the binding may send it again, see `src/binding/request`).
    Unsent(Error),
    /// The server did not process the request (HTTP/2: it refused the stream, or a GOAWAY
    /// left it out): it may be sent again whatever its method (see `src/replay.rs`).
    Refused(Error),
    /// A streamed request body can take more.
    BodyDrain,
    /// The response is complete while the request is still going out: the server answered
    /// before reading all of it (a 413, say). The response is over for its consumer, as
    /// Node's and undici's are then; `Done` follows once the rest is sent or the connection
    /// is given up.
    Answered,
    /// The exchange is over. The connection comes back when it can carry another request.
    Done(Option<Sender>),
}

pub trait Sink: Send + Sync + 'static {
    fn post(&self, event: Event);
}

/// How far the response body may run ahead of its consumer, in bytes, after a grant.
pub const BODY_WINDOW: usize = 256 * 1024;

/// How far the consumer lets the response body run ahead: each grant (the JavaScript stream
/// wants more) opens a window of [`BODY_WINDOW`] bytes again; what is posted uses it up. A
/// consumer that stops asking stops the reading once the window is spent, and the socket's
/// buffers fill: back-pressure reaches the server.
#[derive(Default)]
pub struct Control {
    credit: AtomicUsize,
    wake: Notify,
}

impl Control {
    pub fn grant(&self) {
        // Only a spent window can have the exchange waiting.
        if self.credit.swap(BODY_WINDOW, Ordering::AcqRel) == 0 {
            self.wake.notify_one();
        }
    }

    /// Waits for credit; returns how many bytes may be posted now.
    async fn take(&self) -> usize {
        loop {
            let credit = self.credit.load(Ordering::Acquire);
            if credit > 0 {
                return credit;
            }
            self.wake.notified().await;
        }
    }

    fn spend(&self, bytes: usize) {
        let _ = self
            .credit
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                Some(c.saturating_sub(bytes))
            });
    }
}

/// How much hyper reads from a connection at most per read (as libuv's reads): it bounds a
/// response head too, but a smaller limit is checked on each head (see [`head_size`]).
const READ_BUF_MAX: usize = 64 * 1024;

/// The most header lines a response head may have: as many as Node's `IncomingMessage` keeps
/// (`maxHeadersCount`). hyper's own default, 100, refused heads that Node and undici take
/// (their only limit is the head's size); past this one a head fails as too large.
const MAX_HEADERS: usize = 2000;

/// hyper's side of a connection: it reads responses and writes requests once spawned.
pub struct Connection {
    hyper: Pin<Box<dyn Future<Output = ()> + Send>>,
    wake: Arc<wake::ConnWake>,
}

impl Connection {
    /// Runs the connection in a task of its own, which calls `closed` when it ends; the
    /// exchanges [`Sender::start`] queues run in it too.
    pub fn spawn(self, closed: impl FnOnce() + Send + 'static) {
        tokio::spawn(wake::run(self.hyper, self.wake, closed));
    }
}

/// Starts HTTP/1.1 on a connected stream: nothing is read or written until the connection is
/// spawned. A response head over `max_header_size` fails the connection when it is larger
/// than a read; smaller ones are checked by [`exchange`].
pub async fn handshake<IO>(io: IO, max_header_size: usize) -> Result<(Sender, Connection), Error>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let wake = Arc::new(wake::ConnWake::default());
    let io = Counted {
        io,
        shared: wake.clone(),
        backlog: false,
    };
    let (sender, conn) = http1::Builder::new()
        // hyper's read buffer bounds the head it accepts, and the size of its reads: large
        // bodies come in reads of up to 64 KiB whatever the head limit.
        .max_buf_size(max_header_size.max(READ_BUF_MAX))
        .max_headers(MAX_HEADERS)
        .handshake::<_, ReqBody>(TokioIo::new(io))
        .await
        .map_err(|e| hyper_error(&e, false))?;
    Ok((
        Sender {
            hyper: Hyper::H1(sender),
            wake: wake.clone(),
        },
        Connection {
            hyper: Box::pin(async move {
                let _ = conn.await;
            }),
            wake,
        },
    ))
}

/// The most streams an HTTP/2 connection opens at once until the server's settings say
/// otherwise: the first requests on a new connection do not wait for its SETTINGS frame.
const H2_INITIAL_STREAMS: usize = 100;
/// Each stream's receive window: how far an unread response body runs ahead before the server
/// waits (HTTP/2's flow control is the back-pressure of its streams). The connection's window
/// holds several streams' worth, so that one unread body does not stop the others.
const H2_STREAM_WINDOW: u32 = 1024 * 1024;
const H2_CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;

/// When an HTTP/2 connection is asked for a PING: after `after` with nothing from it, idle or
/// not; one whose answer does not come within `timeout` is closed (its streams fail, and the
/// pool forgets it), so that a connection that died quietly is found before a request waits on
/// it for ever.
#[derive(Clone, Copy, Debug)]
pub struct Ping {
    pub after: Duration,
    pub timeout: Duration,
}

impl Default for Ping {
    fn default() -> Self {
        Ping {
            after: Duration::from_secs(10),
            timeout: Duration::from_secs(10),
        }
    }
}

/// Starts HTTP/2 on a connected stream (TLS that chose `h2` in ALPN, or `h2c` by prior
/// knowledge): nothing is read or written until the connection is spawned. Its request half
/// gives a sender per exchange ([`Sender::stream`]); how many streams the server takes at
/// once is kept up to date as its settings come ([`Sender::max_streams`]).
pub async fn handshake_h2<IO>(
    io: IO,
    max_header_size: usize,
    secure: bool,
    ping: Ping,
) -> Result<(Sender, Connection), Error>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let wake = Arc::new(wake::ConnWake::default());
    wake.max_streams
        .store(H2_INITIAL_STREAMS, Ordering::Relaxed);
    let io = Counted {
        io,
        shared: wake.clone(),
        backlog: false,
    };
    let (sender, mut conn) = http2::Builder::new(TokioExecutor::new())
        .initial_max_send_streams(H2_INITIAL_STREAMS)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .max_header_list_size(u32::try_from(max_header_size).unwrap_or(u32::MAX))
        .timer(TokioTimer::new())
        .keep_alive_interval(ping.after)
        .keep_alive_timeout(ping.timeout)
        .keep_alive_while_idle(true)
        .handshake::<_, ReqBody>(TokioIo::new(io))
        .await
        .map_err(|e| hyper_error(&e, false))?;
    let limit = wake.clone();
    Ok((
        Sender {
            hyper: Hyper::H2(Box::new((sender, secure))),
            wake: wake.clone(),
        },
        Connection {
            hyper: Box::pin(std::future::poll_fn(move |cx| {
                let polled = Pin::new(&mut conn).poll(cx);
                limit
                    .max_streams
                    .store(conn.current_max_send_streams(), Ordering::Relaxed);
                polled.map(|_| ())
            })),
            wake,
        },
    ))
}

/// A connection's stream, counting the bytes read from it into its [`wake::ConnWake`]: an
/// exchange that fails tells by it whether any byte of a response had come (see
/// [`run_exchange`]). It also tells the connection's task when a backlog of writes has gone
/// out ([`wake::ConnWake::drained`]; see [`wake::run`] for why).
struct Counted<IO> {
    io: IO,
    shared: Arc<wake::ConnWake>,
    /// A write was refused or taken in part: bytes are waiting.
    backlog: bool,
}

impl<IO> Counted<IO> {
    /// Notes how a write of `offered` bytes went.
    fn wrote(&mut self, offered: usize, polled: &Poll<std::io::Result<usize>>) {
        match polled {
            Poll::Ready(Ok(n)) if *n >= offered => {
                if std::mem::take(&mut self.backlog) {
                    self.shared.drained.store(true, Ordering::Relaxed);
                }
            }
            Poll::Ready(Ok(_)) | Poll::Pending => self.backlog = true,
            Poll::Ready(Err(_)) => {}
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Counted<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if read > 0 {
            self.shared
                .received
                .fetch_add(read as u64, std::sync::atomic::Ordering::Relaxed);
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Counted<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(buf.len(), &polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(bufs.iter().map(|b| b.len()).sum(), &polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Poll once: the value if the future is ready now, without waiting.
async fn now<F: std::future::Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    std::future::poll_fn(|cx| match f.as_mut().poll(cx) {
        Poll::Ready(out) => Poll::Ready(Some(out)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

/// Gathered without waiting after the head, at most this much.
const HEAD_CHUNK_BYTES: usize = 64 * 1024;
/// And in at most this many rounds of frames (see `run_exchange`), while less than
/// `HEAD_ROUNDS_BYTES` has come: a larger body streams as its consumer asks.
const HEAD_ROUNDS: usize = 16;
const HEAD_ROUNDS_BYTES: usize = 16 * 1024;

/// Runs one request on `sender` and posts its events; ends with [`Event::Done`]. Boxed: its
/// state is large (just under 1 KiB), and tokio copies a task's whole future more than once
/// as the task ends, so a task spawned for it, or awaiting it, holds only the box.
pub fn exchange(
    sender: Sender,
    spec: Spec,
    ctl: Arc<Control>,
    sink: Arc<dyn Sink>,
) -> Pin<Box<impl Future<Output = ()> + Send>> {
    Box::pin(run_exchange(sender, spec, ctl, sink))
}

// Not an `async fn`: its arguments would be kept twice in its future (once as given, once as
// its locals), which puts the future over the 1 KiB that mimalloc serves from its fast path.
#[allow(clippy::manual_async_fn)]
fn run_exchange(
    mut sender: Sender,
    spec: Spec,
    ctl: Arc<Control>,
    sink: Arc<dyn Sink>,
) -> impl Future<Output = ()> + Send {
    async move {
        if let Err(e) = sender.hyper.ready().await {
            sink.post(Event::Unsent(
                hyper_error(&e, false).with_request_sent(false),
            ));
            sink.post(Event::Done(None));
            return;
        }
        let gate = spec.expect_continue.clone();
        let has_body = !spec.body.is_end_stream();
        // What the connection had received before this request: more when it fails means
        // that a response had begun (an informational one, or part of a head).
        let received = sender.wake.received.load(Ordering::Relaxed);
        let request = request_of(
            spec.method,
            &spec.head,
            spec.body,
            spec.expect_continue,
            spec.informational.then(|| sink.clone()),
        );
        let response = match &mut sender.hyper {
            Hyper::H1(s) => {
                let sending = s.send_request(request);
                match spec.headers_timeout {
                    // Boxed: a timer is large, and only a timeout shorter than the binding's
                    // own checks (see `src/binding/request`) comes here.
                    Some(t) => match Box::pin(tokio::time::timeout(t, sending)).await {
                        Ok(r) => r,
                        Err(_) => return headers_timed_out(&*sink, t),
                    },
                    None => sending.await,
                }
            }
            // Boxed, so that the HTTP/1.1 exchange's future stays small.
            Hyper::H2(h2) => {
                let sending = h2.0.send_request(absolute(request, h2.1));
                match Box::pin(within_headers(sending, spec.headers_timeout)).await {
                    Some(r) => r,
                    None => {
                        return headers_timed_out(&*sink, spec.headers_timeout.unwrap_or_default())
                    }
                }
            }
        };
        let response = match response {
            Ok(r) => r,
            // A malformed response came, or a response had begun: the server has the request.
            // Anything else means no response byte arrived, and the request may not have been
            // processed at all. On HTTP/2, where other streams' bytes arrive too, the protocol
            // says which requests were not processed; a stream the server reset otherwise was.
            Err(e) => {
                let err = hyper_error(&e, false);
                let answering = match sender.hyper {
                    Hyper::H1(_) => sender.wake.received.load(Ordering::Relaxed) != received,
                    Hyper::H2(..) => errors::is_stream_reset(&e),
                };
                sink.post(if sender.is_multiplexed() && errors::unprocessed(&e) {
                    Event::Refused(err.with_request_sent(false))
                } else if e.is_parse() || e.is_parse_status() {
                    Event::Error(err)
                } else if answering {
                    Event::Error(err.with_request_sent(true))
                } else {
                    Event::Unsent(err.with_request_sent(true))
                });
                sink.post(Event::Done(None));
                return;
            }
        };
        // A final response that came instead of 100 Continue (a 413, say): the body held for
        // it goes now, not after the wait, so that the exchange ends and the connection stays
        // usable (RFC 9110 §10.1.1 lets the client send it).
        if let Some(gate) = gate {
            gate.notify_one();
        }
        let (headers, scan) = HeaderLines::scan(response.headers());
        let phrase = response.extensions().get::<hyper::ext::ReasonPhrase>();
        if head_size(phrase, &scan) > spec.max_head_size {
            sink.post(Event::Error(errors::header_overflow()));
            sink.post(Event::Done(None));
            return;
        }
        // Both a length and a transfer coding: hyper goes by the coding, but the message may be an
        // attempt at response splitting (RFC 9112 §6.3), which Node's parser and undici refuse.
        // So is it here, and its connection is not used again.
        if scan.transfer_encoding && scan.content_length {
            sink.post(Event::Error(errors::length_and_coding()));
            sink.post(Event::Done(None));
            return;
        }
        let status = response.status();
        // The promise path sends no upgrade (it refuses the header): a server that switches
        // protocols anyway (RFC 9110 §15.2.2 forbids it) leaves no response to give, and what
        // follows on the connection is not HTTP. The request fails, as undici's does, rather
        // than resolving with a 101 whose bytes are lost; the connection is not used again.
        if status == http::StatusCode::SWITCHING_PROTOCOLS {
            sink.post(Event::Error(errors::unasked_upgrade()));
            sink.post(Event::Done(None));
            return;
        }
        let reason = match phrase {
            Some(given) => Cow::Owned(given.as_bytes().to_vec()),
            None => Cow::Borrowed(status.canonical_reason().unwrap_or("").as_bytes()),
        };
        let mut body = response.into_body();

        // What is already here goes with the head. hyper hands a body over a frame at a time
        // (a chunked one: each chunk, then its end), decoding the next once the last is taken:
        // while frames come, the connection's task gets to decode the next from what it has
        // read. A body taken to its end in a round was complete before that round began:
        // hyper's side of its channel is gone, and the wake-ups that taking its chunks sends
        // to the connection's task would find nothing to do.
        let mut arrived = Arrived::default();
        // A failure found once the connection's task has run again (the connection cut after
        // the head's chunk, say) waits, as it would had the body streamed, for the consumer to
        // ask for more: the response reaches the consumer, and its listeners, first.
        let mut failed_later = false;
        for round in 1.. {
            // HTTP/2's wake-ups of the connection are never of the kind held back: taking a
            // body's data may let its connection send a window update.
            let took = std::future::poll_fn(|cx| {
                Poll::Ready(match sender.hyper {
                    Hyper::H1(_) => wake::hold(&sender.wake, || {
                        let took = take_arrived(&mut body, cx, &mut arrived);
                        (took, arrived.end.is_some())
                    }),
                    Hyper::H2(..) => take_arrived(&mut body, cx, &mut arrived),
                })
            })
            .await;
            failed_later = round > 1 && arrived.failed.is_some();
            // A body of known length comes in one frame per read: what has not come in this
            // one is not read yet, and goes as the consumer asks for it.
            if !took
                || arrived.full()
                || round == HEAD_ROUNDS
                || arrived.gathered >= HEAD_ROUNDS_BYTES
                || body.size_hint().exact().is_some()
            {
                break;
            }
            tokio::task::yield_now().await;
        }
        let Arrived {
            chunks,
            end,
            failed,
            ..
        } = arrived;
        let ended = end.is_some();
        // A whole response: when hyper can say at once whether the connection carries another
        // request, the head says it too, and the exchange crosses to JavaScript once.
        let settled = if ended {
            now(sender.hyper.ready()).await.map(|ready| ready.is_ok())
        } else {
            None
        };
        let head = move |done| Event::Head {
            status: status.as_u16(),
            reason,
            headers,
            chunks,
            end,
            done,
        };
        // The sender stays where it is (a copy of it in another local would take room in the
        // future's state for good).
        if let Some(reusable) = settled {
            sink.post(head(Some(reusable.then_some(sender))));
            return;
        }
        sink.post(head(None));
        if let Some(e) = failed {
            if failed_later {
                ctl.take().await;
            }
            sink.post(Event::Error(hyper_error(&e, true)));
            sink.post(Event::Done(None));
            return;
        }
        // Boxed, as a body that did not come whole is rarer than one that did: its timer and
        // its loop would make every exchange's future larger.
        if !ended && !Box::pin(stream_body(&mut body, &ctl, &*sink, spec.body_timeout)).await {
            sink.post(Event::Done(None));
            return;
        }
        // The response is complete: the connection can go back if hyper keeps it open, once
        // it has sent the request's body.
        let reusable = match now(sender.hyper.ready()).await {
            Some(ready) => ready.is_ok(),
            None if has_body => {
                sink.post(Event::Answered);
                // A server that answered early may never read the rest: the connection waits
                // for it no longer than for a body's next bytes (the timer boxed, as it is
                // rare). It counts as a body timeout; the response, complete, is not failed.
                let sent = sender.hyper.ready();
                match spec.body_timeout {
                    Some(t) => match Box::pin(tokio::time::timeout(t, sent)).await {
                        Ok(ready) => ready.is_ok(),
                        Err(_) => {
                            sink.post(Event::Error(errors::body_timeout(t)));
                            false
                        }
                    },
                    None => sent.await.is_ok(),
                }
            }
            None => sender.hyper.ready().await.is_ok(),
        };
        sink.post(Event::Done(reusable.then_some(sender)));
    }
}

/// An HTTP/2 request names its scheme and authority in its target (`:scheme` and
/// `:authority`, RFC 9113 §8.3.1): the `host` header becomes the authority. (hyper drops the
/// connection-specific headers itself.)
fn absolute(mut req: Request<ReqBody>, secure: bool) -> Request<ReqBody> {
    let Some(host) = req.headers_mut().remove(http::header::HOST) else {
        return req;
    };
    let mut parts = req.uri().clone().into_parts();
    parts.scheme = Some(match secure {
        true => http::uri::Scheme::HTTPS,
        false => http::uri::Scheme::HTTP,
    });
    parts.authority = http::uri::Authority::try_from(host.as_bytes()).ok();
    if parts.path_and_query.is_none() {
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
    }
    match http::Uri::from_parts(parts) {
        Ok(uri) => *req.uri_mut() = uri,
        // Not an authority: it goes as the header it was.
        Err(_) => {
            req.headers_mut().insert(http::header::HOST, host);
        }
    }
    req
}

/// The exchange ends: no response head came within `t`.
fn headers_timed_out(sink: &dyn Sink, t: Duration) {
    sink.post(Event::Error(errors::headers_timeout(t)));
    sink.post(Event::Done(None));
}

/// The response of `sending`, or None if its head did not come within `timeout`. The timer is
/// boxed: it is large, and only a timeout shorter than the binding's own checks (see
/// `src/binding/request`) comes here.
async fn within_headers<F: Future>(sending: F, timeout: Option<Duration>) -> Option<F::Output> {
    match timeout {
        Some(t) => Box::pin(tokio::time::timeout(t, sending)).await.ok(),
        None => Some(sending.await),
    }
}

/// The request an exchange sends. Built outside the exchange's future, which would otherwise
/// keep room for it beside the sending that takes it over.
fn request_of(
    method: Method,
    head: &Head,
    body: ReqBody,
    expect_continue: Option<Arc<Notify>>,
    info: Option<Arc<dyn Sink>>,
) -> Request<ReqBody> {
    let mut req = Request::new(body);
    *req.method_mut() = method;
    *req.uri_mut() = head.uri.clone();
    *req.headers_mut() = head.headers.clone();
    // hyper calls this for each 1xx response as it parses it, on the connection's task:
    // what it posts goes ahead of the final response's head.
    if expect_continue.is_some() || info.is_some() {
        hyper::ext::on_informational(&mut req, move |res| {
            if let Some(gate) = &expect_continue {
                if res.status() == http::StatusCode::CONTINUE {
                    gate.notify_one();
                }
            }
            if let Some(sink) = &info {
                sink.post(Event::Info {
                    status: res.status().as_u16(),
                    headers: HeaderLines::of(res.headers()),
                });
            }
        });
    }
    req
}

/// What of a body had arrived with its head.
#[derive(Default)]
struct Arrived {
    chunks: Vec<Bytes>,
    /// Their bytes.
    gathered: usize,
    /// The trailers (none: empty) when the body is complete.
    end: Option<HeaderLines>,
    /// The body failed right after the head (a malformed chunk, say): the response is
    /// answered, then its body fails.
    failed: Option<hyper::Error>,
}

impl Arrived {
    /// Nothing more goes with the head: the body ended or failed, or the head's share of it
    /// ([`HEAD_CHUNK_BYTES`]) is taken.
    fn full(&self) -> bool {
        self.end.is_some() || self.failed.is_some() || self.gathered >= HEAD_CHUNK_BYTES
    }
}

/// Takes the frames of `body` that are here already into `out`, until it is full; whether it
/// took any.
fn take_arrived(body: &mut Incoming, cx: &mut Context<'_>, out: &mut Arrived) -> bool {
    let mut took = false;
    while !out.full() {
        match Pin::new(&mut *body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match into_data_or_trailers(frame) {
                Ok(data) => {
                    out.gathered += data.len();
                    out.chunks.push(owned(data));
                }
                Err(trailers) => out.end = Some(trailers),
            },
            Poll::Ready(None) => out.end = Some(HeaderLines::default()),
            Poll::Ready(Some(Err(e))) => out.failed = Some(e),
            Poll::Pending => break,
        }
        took = true;
    }
    took
}

/// A chunk this small is copied out of hyper's read buffer at once (JavaScript copies it again,
/// into its slab): the buffer, no longer shared, takes the connection's next read in place,
/// where a chunk still held on its way to JavaScript would have it allocate a new one, and the
/// JavaScript thread free the old.
const OWNED_MAX: usize = 2 * 1024;

fn owned(data: Bytes) -> Bytes {
    match data.len() {
        1..=OWNED_MAX => Bytes::copy_from_slice(&data),
        _ => data,
    }
}

/// Streams the rest of the body as the consumer grants; false if it failed. Frames that are
/// ready together (within the window) go as one event.
async fn stream_body(
    body: &mut Incoming,
    ctl: &Control,
    sink: &dyn Sink,
    timeout: Option<Duration>,
) -> bool {
    loop {
        let window = ctl.take().await;
        let frame = match timeout {
            Some(t) => match tokio::time::timeout(t, body.frame()).await {
                Ok(f) => f,
                Err(_) => {
                    sink.post(Event::Error(errors::body_timeout(t)));
                    return false;
                }
            },
            None => body.frame().await,
        };
        let mut chunks = Vec::new();
        let mut gathered = 0;
        let mut next = frame;
        // What follows the first frame at once joins it, up to the window.
        let outcome = loop {
            match next {
                Some(Ok(frame)) => match into_data_or_trailers(frame) {
                    Ok(data) => {
                        gathered += data.len();
                        if !data.is_empty() {
                            chunks.push(data);
                        }
                    }
                    Err(trailers) => break Some(Ok(trailers)),
                },
                None => break Some(Ok(HeaderLines::default())),
                Some(Err(e)) => break Some(Err(e)),
            }
            if gathered >= window {
                break None;
            }
            // hyper's connection task reads the next chunk only once this one is taken: let it
            // run, then take what it found.
            tokio::task::yield_now().await;
            match now(body.frame()).await {
                Some(frame) => next = frame,
                None => break None,
            }
        };
        if !chunks.is_empty() {
            ctl.spend(gathered);
            sink.post(Event::Data(chunks));
        }
        match outcome {
            None => {}
            Some(Ok(trailers)) => {
                sink.post(Event::End(trailers));
                return true;
            }
            Some(Err(e)) => {
                sink.post(Event::Error(hyper_error(&e, true)));
                return false;
            }
        }
    }
}

fn into_data_or_trailers(frame: Frame<Bytes>) -> Result<Bytes, HeaderLines> {
    match frame.into_data() {
        Ok(data) => Ok(data),
        Err(frame) => Err(frame
            .into_trailers()
            .map(|t| HeaderLines::of(&t))
            .unwrap_or_default()),
    }
}

/// The size of a response head as it came: the status line and a line per header, as the
/// limit on it counts them.
fn head_size(phrase: Option<&hyper::ext::ReasonPhrase>, scan: &Scan) -> usize {
    let reason = phrase.map_or(0, |r| r.as_bytes().len());
    // `HTTP/1.1 200 reason\r\n`, `name: value\r\n` each, and the blank line.
    13 + reason + 2 + scan.bytes + 4 * scan.lines + 2
}

#[cfg(test)]
mod tests;
