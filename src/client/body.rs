//! Request bodies that stream from JavaScript: a bounded channel (back-pressure on the writer),
//! a recording of what was written for a replay, and an `expect: 100-continue` gate.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use super::ReqBody;

/// Chunks that may wait in the channel before the writer is told to pause.
const DEPTH: usize = 8;

/// The JavaScript side of a streamed request body.
pub struct BodyWriter {
    tx: Option<mpsc::Sender<Result<Bytes, std::io::Error>>>,
    /// Set when a write filled the channel: the body then reports the drain.
    full: Arc<AtomicBool>,
    /// Set when the source has ended (see [`ChannelBody`]'s end).
    ended: Arc<AtomicBool>,
    /// Set while the connection waits on the source (it asked for more, and none had come).
    asked: Arc<AtomicBool>,
    /// What was written, kept while the request may be sent again.
    recording: Option<Arc<Recording>>,
}

/// Every chunk a streamed body's writer took, and how the source ended, up to a limit: what a
/// replay sends again before the rest of the source (see `crate::replay`). A body that grows
/// past the limit, or whose request can no longer be replayed, keeps nothing.
pub struct Recording(Mutex<RecState>);

#[derive(Default)]
struct RecState {
    chunks: Vec<Bytes>,
    size: usize,
    limit: usize,
    /// Nothing is kept (past the limit, or no replay wanted any more).
    off: bool,
    ended: bool,
    failed: Option<String>,
}

impl RecState {
    fn stop(&mut self) {
        self.off = true;
        self.chunks = Vec::new();
    }
}

/// What a replay takes from a [`Recording`].
pub struct RecordedBody {
    pub chunks: Vec<Bytes>,
    pub ended: bool,
    pub failed: Option<String>,
}

impl Recording {
    pub fn new(limit: usize) -> Arc<Recording> {
        Arc::new(Recording(Mutex::new(RecState {
            limit,
            ..RecState::default()
        })))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, RecState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether it holds the whole body so far: it can be sent again, and the writer keeps
    /// chunks the connection refuses.
    pub fn is_complete(&self) -> bool {
        !self.state().off
    }

    /// Keeps nothing from now on, and lets go of what it kept.
    pub fn stop(&self) {
        self.state().stop();
    }

    /// What was written (and how the source ended); keeps nothing from now on.
    pub fn take(&self) -> Option<RecordedBody> {
        let mut st = self.state();
        if st.off {
            return None;
        }
        st.off = true;
        Some(RecordedBody {
            chunks: std::mem::take(&mut st.chunks),
            ended: st.ended,
            failed: st.failed.take(),
        })
    }

    /// What was written, as [`Recording::take`] gives it, and a new recording that starts with
    /// the same chunks (within the same limit), for the writer of the attempt that sends them
    /// again: the request can then go again after that attempt too.
    pub fn take_renewed(&self) -> Option<(RecordedBody, Arc<Recording>)> {
        let limit = self.state().limit;
        let recorded = self.take()?;
        let size = recorded.chunks.iter().map(Bytes::len).sum();
        let renewed = Arc::new(Recording(Mutex::new(RecState {
            chunks: recorded.chunks.clone(),
            size,
            limit,
            ..RecState::default()
        })));
        Some((recorded, renewed))
    }

    fn push(&self, chunk: &Bytes) {
        let mut st = self.state();
        if st.off {
            return;
        }
        if st.size + chunk.len() > st.limit {
            st.stop();
            return;
        }
        st.size += chunk.len();
        st.chunks.push(chunk.clone());
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum WriteResult {
    /// Written; more may follow at once.
    Ready,
    /// Written; wait for the drain before the next write.
    Full,
    /// The request is over (sent, failed or aborted): nothing more is wanted.
    Closed,
}

impl BodyWriter {
    /// Keeps what is written in `recording` while it may be sent again.
    pub fn record(mut self, recording: Arc<Recording>) -> BodyWriter {
        self.recording = Some(recording);
        self
    }

    pub fn write(&self, chunk: Bytes) -> WriteResult {
        let Some(tx) = &self.tx else {
            return WriteResult::Closed;
        };
        if let Some(rec) = &self.recording {
            rec.push(&chunk);
        }
        match tx.try_send(Ok(chunk)) {
            Ok(()) if tx.capacity() == 0 => {
                self.full.store(true, Ordering::Release);
                WriteResult::Full
            }
            Ok(()) => WriteResult::Ready,
            // The writer ignored a Full answer: the body keeps order by refusing, never drops.
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.full.store(true, Ordering::Release);
                WriteResult::Full
            }
            // The connection took no more of it. Kept for a replay, the chunk waits in the
            // recording, and so does the writer, for the drain a replay sends.
            Err(mpsc::error::TrySendError::Closed(_))
                if self.recording.as_ref().is_some_and(|r| r.is_complete()) =>
            {
                self.full.store(true, Ordering::Release);
                WriteResult::Full
            }
            Err(mpsc::error::TrySendError::Closed(_)) => WriteResult::Closed,
        }
    }

    /// The source has not ended (or failed): more of the body may come.
    pub fn is_open(&self) -> bool {
        self.tx.is_some()
    }

    /// The writer waits for a drain (a write filled the channel).
    pub fn is_waiting(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    /// The connection holds the body back: the source has not ended, and the connection has
    /// not asked it for more since the last chunk it took (it waits to send that one, for an
    /// HTTP/2 server's window, say). Dropping the writer then reaches nobody until it asks.
    pub fn held_back(&self) -> bool {
        !self.ended.load(Ordering::Acquire) && !self.asked.load(Ordering::Acquire)
    }

    /// The source ended: the body ends after what was written.
    pub fn end(&mut self) {
        if let Some(rec) = &self.recording {
            rec.state().ended = true;
        }
        self.ended.store(true, Ordering::Release);
        self.tx = None;
    }

    /// The source failed: the request fails with it.
    pub fn fail(&mut self, message: String) {
        if let Some(rec) = &self.recording {
            rec.state().failed = Some(message.clone());
        }
        if let Some(tx) = self.tx.take() {
            let _ = tx.try_send(Err(std::io::Error::other(message)));
        }
    }
}

struct ChannelBody {
    /// Sent before what comes through the channel (a replay's recorded chunks).
    prefix: VecDeque<Bytes>,
    rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
    full: Arc<AtomicBool>,
    ended: Arc<AtomicBool>,
    asked: Arc<AtomicBool>,
    drained: Box<dyn Fn() + Send + Sync>,
    len: Option<u64>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if let Some(chunk) = self.prefix.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        let polled = self.rx.poll_recv(cx);
        self.asked.store(polled.is_pending(), Ordering::Release);
        match polled {
            Poll::Ready(Some(chunk)) => {
                if self.full.swap(false, Ordering::AcqRel) {
                    (self.drained)();
                }
                Poll::Ready(Some(chunk.map(Frame::data)))
            }
            // The writer is gone. Without the source's end (the request was aborted, or its
            // exchange is over), what was sent is not the whole body: an error, which makes
            // hyper reset an HTTP/2 stream (a clean end would hand the server a cut body as
            // whole) and close an HTTP/1.1 connection.
            Poll::Ready(None) if self.ended.load(Ordering::Acquire) => Poll::Ready(None),
            Poll::Ready(None) => Poll::Ready(Some(Err(std::io::Error::other(
                "the request body was given up before its end",
            )))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.len
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

/// A streamed body and its writer. `len` is the declared `content-length`, if any; `drained`
/// runs (on tokio) when a full channel has room again. The body sends `prefix` first.
pub fn channel_body(
    prefix: Vec<Bytes>,
    len: Option<u64>,
    drained: impl Fn() + Send + Sync + 'static,
) -> (ReqBody, BodyWriter) {
    let (tx, rx) = mpsc::channel(DEPTH);
    let full = Arc::new(AtomicBool::new(false));
    let ended = Arc::new(AtomicBool::new(false));
    // Not held back before the connection first asks: a request aborted that early has sent
    // nothing the server may be holding back.
    let asked = Arc::new(AtomicBool::new(true));
    let body = ChannelBody {
        prefix: prefix.into(),
        rx,
        full: full.clone(),
        ended: ended.clone(),
        asked: asked.clone(),
        drained: Box::new(drained),
        len,
    };
    (
        body.boxed(),
        BodyWriter {
            tx: Some(tx),
            full,
            ended,
            asked,
            recording: None,
        },
    )
}

/// Where a streamed request body stands, for the headers timeout: when it last gave the
/// connection something (a chunk, its trailers, its end), and whether the connection is
/// waiting on its source now. The headers timeout runs while the request waits on the
/// connection (to take more of the body, or to answer), from the body's last progress, and not
/// while the connection waits on a slow source: a long upload is not a late answer. undici's
/// is the same: its headers timer does not fire while a body is being written and the socket
/// takes it, and starts again when the body has all been written. Its instants are tokio's
/// (std's, but where a test pauses time).
pub struct SourceClock {
    base: Instant,
    /// Nanoseconds after `base` of the body's last progress.
    last: AtomicU64,
    /// The connection asked the body for more and its source had nothing yet.
    waiting: AtomicBool,
}

impl SourceClock {
    pub fn new() -> Arc<SourceClock> {
        Arc::new(SourceClock {
            base: Instant::now(),
            last: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
        })
    }

    fn progressed(&self) {
        let since = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.store(since, Ordering::Release);
        self.waiting.store(false, Ordering::Release);
    }

    /// A headers timeout `t` armed at `armed`, looked at `now`: None when it has run out, else
    /// when to look again. It runs from `armed` or the body's last progress, whichever is
    /// later, and not at all while the connection waits on the source.
    pub fn deadline(&self, armed: Instant, t: Duration, now: Instant) -> Option<Instant> {
        // Far enough not to matter, where adding would overflow what an Instant holds.
        let later = |from: Instant| {
            from.checked_add(t)
                .unwrap_or(now + Duration::from_secs(3600))
        };
        if self.waiting.load(Ordering::Acquire) {
            return Some(later(now));
        }
        let last = self.base + Duration::from_nanos(self.last.load(Ordering::Acquire));
        let deadline = later(armed.max(last));
        (deadline > now).then_some(deadline)
    }
}

/// `body`, its progress kept on `clock` (see [`SourceClock`]).
pub fn clocked(body: ReqBody, clock: Arc<SourceClock>) -> ReqBody {
    struct Clocked {
        inner: ReqBody,
        clock: Arc<SourceClock>,
    }
    impl Body for Clocked {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            let polled = Pin::new(&mut self.inner).poll_frame(cx);
            match polled {
                Poll::Pending => self.clock.waiting.store(true, Ordering::Release),
                Poll::Ready(_) => self.clock.progressed(),
            }
            polled
        }
        fn is_end_stream(&self) -> bool {
            self.inner.is_end_stream()
        }
        fn size_hint(&self) -> SizeHint {
            self.inner.size_hint()
        }
    }
    Clocked { inner: body, clock }.boxed()
}

type TrailersFuture = dyn std::future::Future<Output = Option<http::HeaderMap>> + Send + Sync;

/// A request's trailers: given with the request, or set when its body's source has ended (by
/// then its last bytes are written). Kept for a replay, which sends them too.
pub struct Trailers(tokio::sync::watch::Sender<Option<http::HeaderMap>>);

impl Trailers {
    pub fn new(known: Option<http::HeaderMap>) -> Arc<Trailers> {
        Arc::new(Trailers(tokio::sync::watch::Sender::new(known)))
    }

    /// The trailers are known now (once: later calls change nothing).
    pub fn set(&self, trailers: http::HeaderMap) {
        self.0.send_if_modified(|slot| {
            let unset = slot.is_none();
            if unset {
                *slot = Some(trailers);
            }
            unset
        });
    }

    /// `body`, then the trailers once they are known. Its length is never exact: over
    /// HTTP/1.1 trailers follow only a chunked body.
    pub fn after(self: &Arc<Self>, body: ReqBody) -> ReqBody {
        struct WithTrailers {
            inner: Option<ReqBody>,
            /// Taken once they have come (or are known not to): the body has ended.
            trailers: Option<Pin<Box<TrailersFuture>>>,
        }
        impl Body for WithTrailers {
            type Data = Bytes;
            type Error = std::io::Error;
            fn poll_frame(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
                if let Some(inner) = self.inner.as_mut() {
                    match Pin::new(inner).poll_frame(cx) {
                        Poll::Ready(None) => self.inner = None,
                        other => return other,
                    }
                }
                let Some(trailers) = self.trailers.as_mut() else {
                    return Poll::Ready(None);
                };
                let trailers = std::task::ready!(trailers.as_mut().poll(cx));
                self.trailers = None;
                Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))))
            }
            fn is_end_stream(&self) -> bool {
                self.trailers.is_none()
            }
            fn size_hint(&self) -> SizeHint {
                let mut hint = SizeHint::new();
                hint.set_lower(self.inner.as_ref().map_or(0, |b| b.size_hint().lower()));
                hint
            }
        }
        let mut rx = self.0.subscribe();
        let trailers = async move {
            // The request ended without them (its writer failed, or it was aborted): none.
            rx.wait_for(Option::is_some).await.ok()?.clone()
        };
        WithTrailers {
            inner: Some(body),
            trailers: Some(Box::pin(trailers)),
        }
        .boxed()
    }
}

/// How long a body waits for `100 Continue` before it is sent anyway (as curl does).
const CONTINUE_WAIT: Duration = Duration::from_secs(1);

/// Holds `body` back until `gate` opens (the server's `100 Continue`) or a second passes.
pub fn gated(body: ReqBody, gate: Arc<Notify>) -> ReqBody {
    struct Gated {
        wait: Option<Pin<Box<dyn std::future::Future<Output = ()> + Send + Sync>>>,
        inner: ReqBody,
    }
    impl Body for Gated {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            Pin::new(&mut self.inner).poll_frame(cx)
        }
        fn size_hint(&self) -> SizeHint {
            self.inner.size_hint()
        }
        fn is_end_stream(&self) -> bool {
            self.inner.is_end_stream()
        }
    }
    let wait = async move {
        let _ = tokio::time::timeout(CONTINUE_WAIT, gate.notified()).await;
    };
    Gated {
        wait: Some(Box::pin(wait)),
        inner: body,
    }
    .boxed()
}
