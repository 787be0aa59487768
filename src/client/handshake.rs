//! Starting HTTP on a connected stream: hyper's HTTP/1.1 or HTTP/2 handshake, and the
//! connection's side that reads responses and writes requests once spawned.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::AbortHandle;

use crate::error::Error;

use super::{hyper_error, wake, Hyper, ReqBody, Sender};

/// How much hyper reads from a connection at most per read (as libuv's reads): it bounds a
/// response head too, but a smaller limit is checked on each head (see `exchange::head_size`).
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
    /// Runs the connection in a task of its own, which calls `closed` with how it ended when
    /// it ends; the exchanges [`Sender::start`] queues run in it too.
    pub fn spawn(self, closed: impl FnOnce(crate::pool::ConnEnd) + Send + 'static) {
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
        gone: false,
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
            hyper: {
                let wake = wake.clone();
                Box::pin(async move { wake.ended(conn.await) })
            },
            wake,
        },
    ))
}

/// The header list h2 decodes at most: past it, h2 fails a head (as a stream error) and keeps
/// of trailers the fields that fit, dropping the others without a word. Above the limit on a
/// head, which the exchange checks itself for heads and trailers alike (with Node's error), so
/// that what h2 drops is past what the exchange would have refused anyway (but for a single
/// field larger than this margin); still a bound on what a server makes it decode.
fn h2_header_list_limit(max_header_size: usize) -> u32 {
    let limit = max_header_size.saturating_mul(4).max(256 * 1024);
    u32::try_from(limit).unwrap_or(u32::MAX)
}

/// The most streams an HTTP/2 connection opens at once until the server's settings say
/// otherwise: the first requests on a new connection do not wait for its SETTINGS frame.
const H2_INITIAL_STREAMS: usize = 100;
/// Each stream's receive window: how far an unread response body runs ahead before the server
/// waits (HTTP/2's flow control is the back-pressure of its streams). The connection's window
/// holds several streams' worth, so that one unread body does not stop the others.
const H2_STREAM_WINDOW: u32 = 1024 * 1024;
/// The connection's window: as large as HTTP/2 allows, so that unread bodies, each holding its
/// stream's window, never hold the others back (what a connection buffers is bounded by its
/// streams' windows).
const H2_CONNECTION_WINDOW: u32 = (1 << 31) - 1;

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
/// once ([`Sender::max_streams`], [`Sender::said_max_streams`]) is read when its first settings
/// come (see [`Settling`]) and whenever a request is sent.
pub async fn handshake_h2<IO>(
    io: IO,
    max_header_size: usize,
    secure: bool,
    ping: Ping,
) -> Result<(Sender, Connection), Error>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let spawned = Arc::new(Spawned::default());
    let wake = Arc::new(wake::ConnWake::spawning(spawned.clone()));
    wake.max_streams
        .store(H2_INITIAL_STREAMS, Ordering::Relaxed);
    let io = Counted {
        io,
        shared: wake.clone(),
        backlog: false,
        gone: false,
    };
    let (sender, mut conn) = http2::Builder::new(StreamTasks(spawned.clone(), wake.clone()))
        .initial_max_send_streams(H2_INITIAL_STREAMS)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .max_header_list_size(h2_header_list_limit(max_header_size))
        .timer(TokioTimer::new())
        .keep_alive_interval(ping.after)
        .keep_alive_timeout(ping.timeout)
        .keep_alive_while_idle(true)
        .handshake::<_, ReqBody>(TokioIo::new(io))
        .await
        .map_err(|e| hyper_error(&e, false))?;
    // What hyper spawns from now on is a request's.
    spawned.armed.store(true, Ordering::Relaxed);
    let limit = wake.clone();
    Ok((
        Sender {
            hyper: Hyper::H2(Box::new((sender, secure))),
            wake: wake.clone(),
        },
        Connection {
            hyper: Box::pin(std::future::poll_fn(move |cx| {
                let polled = Pin::new(&mut conn).poll(cx);
                // Read here, when a request is sent, and when the server's first bytes came
                // (see `Settling`). hyper does not say when the server's settings came: a
                // limit other than the assumed one is the server's. A server that says the
                // assumed limit itself is not heard, and is treated as saying it, which it does.
                let max = conn.current_max_send_streams();
                limit.max_streams.store(max, Ordering::Relaxed);
                if max != H2_INITIAL_STREAMS {
                    limit.heard.store(true, Ordering::Release);
                }
                polled.map(|result| limit.ended(result))
            })),
            wake,
        },
    ))
}

/// The tasks hyper spawns for an HTTP/2 connection. During the handshake it spawns one, which
/// holds the connection itself (its socket) and ends it gracefully, with a GOAWAY, once its
/// request half and every request's tasks are gone. After it, it spawns tasks for requests: one
/// that sends a request's streamed body and one that hands on its response. A body task waits
/// for the server's flow-control window without looking at its body, and holds the connection
/// open while it waits: a server that never reads the body kept the connection open for ever,
/// after its exchange was stopped, after `agent.destroy()`, after its Worker was gone. So the
/// requests' tasks are kept here, and when the connection is given up while hyper's side is
/// still running ([`wake::ConnWake::cut`]) they are aborted: their streams are reset, and the
/// connection's own task, with no request left, closes the connection.
#[derive(Default)]
pub(super) struct Spawned {
    /// Set once the handshake is over: what is spawned from then on is a request's.
    armed: AtomicBool,
    requests: Mutex<Requests>,
}

#[derive(Default)]
struct Requests {
    tasks: Vec<AbortHandle>,
    /// How many tasks the list holds before those over are taken out: twice as many as were
    /// left running last time (and at least a few), so that each task costs a constant share.
    prune_at: usize,
}

impl Spawned {
    /// Aborts the requests' tasks still running.
    pub(super) fn abort(&self) {
        let tasks = std::mem::take(
            &mut self
                .requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .tasks,
        );
        for task in tasks {
            task.abort();
        }
    }
}

/// hyper's executor of an HTTP/2 connection: tokio's, keeping the requests' tasks in
/// [`Spawned`]. The task of the handshake, which reads the connection, is spawned
/// [`Settling`].
#[derive(Clone)]
struct StreamTasks(Arc<Spawned>, Arc<wake::ConnWake>);

impl<F> hyper::rt::Executor<F> for StreamTasks
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, fut: F) {
        if !self.0.armed.load(Ordering::Relaxed) {
            tokio::spawn(Settling {
                task: Box::pin(fut),
                wake: self.1.clone(),
                seen: 0,
            });
            return;
        }
        let task = tokio::spawn(fut);
        let mut requests = self.0.requests.lock().unwrap_or_else(|e| e.into_inner());
        if requests.tasks.len() >= requests.prune_at {
            requests.tasks.retain(|t| !t.is_finished());
            requests.prune_at = (requests.tasks.len() * 2).max(16);
        }
        requests.tasks.push(task.abort_handle());
    }
}

/// How much of what a server sends first is watched for its settings (see [`Settling`]).
const SETTLING_BYTES: u64 = 4096;

/// hyper's task that reads an HTTP/2 connection, which applies the server's settings as they
/// come. hyper tells the limit they set on streams only in the connection's own task (see
/// [`handshake_h2`]), which is polled when a request is sent: a session that had sent its
/// first requests before the settings came would go on saying the protocol's assumed limit,
/// and requests sent again after the server refused those past its own would go out under it
/// once more. So until the limit is heard, a poll of this task that read more of the server's
/// first bytes wakes the connection's task, which reads the limit.
struct Settling {
    task: Pin<Box<dyn Future<Output = ()> + Send>>,
    wake: Arc<wake::ConnWake>,
    /// How many bytes had been read when the connection's task was last woken.
    seen: u64,
}

impl Future for Settling {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let polled = self.task.as_mut().poll(cx);
        if self.seen < SETTLING_BYTES && !self.wake.heard.load(Ordering::Relaxed) {
            let received = self.wake.received.load(Ordering::Relaxed);
            if received != self.seen {
                self.seen = received;
                crate::runtime::Wake::wake(&*self.wake);
            }
        }
        polled
    }
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
    /// A write found the peer gone (see [`Counted::outcome`]): nothing more is written.
    gone: bool,
}

/// How an HTTP/1 response begins: a connection whose first bytes are not these speaks
/// something else.
const STATUS_LINE_START: &[u8] = b"HTTP/";

/// Whether `got`, the bytes read from a connection from offset `at` on (less than
/// `STATUS_LINE_START`'s length), go on as that start does, as far as they reach.
pub(super) fn fits_status_line(at: usize, got: &[u8]) -> bool {
    let want = &STATUS_LINE_START[at..];
    let n = got.len().min(want.len());
    got[..n] == want[..n]
}

/// Whether a write failed because the peer closed or reset the connection.
fn peer_gone(err: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    matches!(err.kind(), BrokenPipe | ConnectionReset | ConnectionAborted)
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

    /// A write's outcome as hyper is to see it. One the peer's close or reset refused
    /// (`EPIPE`, `ECONNRESET`) is reported done as `done`, and so is every later one: hyper
    /// fails an exchange at its first write error, and would lose a response the server sent
    /// before it closed (a 413 to an upload it will not read, say), which is still there to
    /// read, as Node's and undici's clients read it. The reads end at the peer's close or reset
    /// as they would have (a request with no response fails as before, with the read's error),
    /// and the connection carries no other request (`write_failed`).
    fn outcome<T>(
        &mut self,
        polled: Poll<std::io::Result<T>>,
        done: T,
    ) -> Poll<std::io::Result<T>> {
        match polled {
            Poll::Ready(Err(e)) if peer_gone(&e) => {
                self.gone = true;
                self.shared.write_failed.store(true, Ordering::Relaxed);
                Poll::Ready(Ok(done))
            }
            other => other,
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
            let earlier = self
                .shared
                .received
                .fetch_add(read as u64, std::sync::atomic::Ordering::Relaxed);
            if earlier < STATUS_LINE_START.len() as u64
                && !fits_status_line(earlier as usize, &buf.filled()[before..])
            {
                self.shared.not_http.store(true, Ordering::Relaxed);
            }
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
        if self.gone {
            return Poll::Ready(Ok(buf.len()));
        }
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(buf.len(), &polled);
        self.outcome(polled, buf.len())
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let offered = bufs.iter().map(|b| b.len()).sum();
        if self.gone {
            return Poll::Ready(Ok(offered));
        }
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(offered, &polled);
        self.outcome(polled, offered)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.gone {
            return Poll::Ready(Ok(()));
        }
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.outcome(polled, ())
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.gone {
            return Poll::Ready(Ok(()));
        }
        let polled = Pin::new(&mut self.io).poll_shutdown(cx);
        self.outcome(polled, ())
    }
}
