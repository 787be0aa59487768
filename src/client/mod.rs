//! The promise path: HTTP/1.1 spoken by hyper, on tokio, over pooled connections.
//!
//! One [`exchange`] is one request and its response. It posts what JavaScript needs as
//! [`Event`]s to a [`Sink`] (the binding's inbox): the response head together with whatever
//! body bytes are already there (a small response crosses to JavaScript once), then body
//! chunks only as far as JavaScript lets them run ahead ([`Control::grant`]), so a paused body
//! stops reading the socket. Request bodies stream from a bounded channel ([`channel_body`]); a full channel
//! tells the writer to wait for [`Event::BodyDrain`].

pub mod attempt;
mod body;
pub mod driver;
mod errors;
mod exchange;
mod handshake;
pub mod open;
pub mod plan;
pub mod recycle;
mod wake;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::client::conn::{http1, http2};
use tokio::sync::Notify;

pub use body::{
    channel_body, clocked, gated, BodyWriter, Recording, SourceClock, Trailers, WriteResult,
};
pub use errors::{headers_timeout, hyper_error};
pub use exchange::exchange;
pub use handshake::{handshake, handshake_h2, Connection, Ping};

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
        wake.queue(queued)?;
        crate::runtime::wake_soon(wake);
        Ok(())
    }

    /// How many streams the server takes at once on this HTTP/2 connection, as its latest
    /// settings say (1 for HTTP/1.1).
    pub fn max_streams(&self) -> usize {
        match self.hyper {
            Hyper::H1(_) => 1,
            Hyper::H2(..) => self.wake.max_streams.load(Ordering::Relaxed).max(1),
        }
    }

    /// How many streams the server of this HTTP/2 connection said it takes at once, once its
    /// settings have come (before, [`Sender::max_streams`] is the protocol's assumed limit,
    /// which says nothing of the server); `None` for HTTP/1.1.
    pub fn said_max_streams(&self) -> Option<usize> {
        match self.hyper {
            Hyper::H1(_) => None,
            Hyper::H2(..) => self
                .wake
                .heard
                .load(Ordering::Acquire)
                .then(|| self.wake.max_streams.load(Ordering::Relaxed)),
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
    /// A streamed body's progress, from which the headers timeout runs (see [`SourceClock`]);
    /// None for a body given whole.
    pub body_clock: Option<Arc<SourceClock>>,
    pub body_timeout: Option<Duration>,
    /// The largest response head accepted, in bytes (status line and header lines).
    pub max_head_size: usize,
}

/// Headers timeouts longer than this (the default is 300 s) are not a tokio timer around each
/// exchange: the asker keeps them (see [`Spec::take_coarse_headers_timeout`]) and fails the
/// request when it sees the deadline pass, up to its sweep's period late. Shorter ones stay
/// exact, in the exchange.
pub const COARSE_TIMEOUT: Duration = Duration::from_secs(1);

impl Spec {
    /// Takes a headers timeout longer than [`COARSE_TIMEOUT`] out of the exchange, for the
    /// asker to keep: a timer per exchange costs more than a timeout that long needs to be
    /// exact. A shorter one stays.
    pub fn take_coarse_headers_timeout(&mut self) -> Option<Duration> {
        let long = self.headers_timeout.filter(|t| *t > COARSE_TIMEOUT)?;
        self.headers_timeout = None;
        Some(long)
    }
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

#[cfg(test)]
mod tests;
