//! Request bodies that stream from JavaScript: a bounded channel (back-pressure on the writer)
//! and an `expect: 100-continue` gate.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{mpsc, Notify};

use super::ReqBody;

/// Chunks that may wait in the channel before the writer is told to pause.
const DEPTH: usize = 8;

/// The JavaScript side of a streamed request body.
pub struct BodyWriter {
    tx: Option<mpsc::Sender<Result<Bytes, std::io::Error>>>,
    /// Set when a write filled the channel: the body then reports the drain.
    full: Arc<AtomicBool>,
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
    pub fn write(&self, chunk: Bytes) -> WriteResult {
        let Some(tx) = &self.tx else {
            return WriteResult::Closed;
        };
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
            Err(mpsc::error::TrySendError::Closed(_)) => WriteResult::Closed,
        }
    }

    /// The source ended: the body ends after what was written.
    pub fn end(&mut self) {
        self.tx = None;
    }

    /// The source failed: the request fails with it.
    pub fn fail(&mut self, message: String) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.try_send(Err(std::io::Error::other(message)));
        }
    }
}

struct ChannelBody {
    rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
    full: Arc<AtomicBool>,
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
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(chunk)) => {
                if self.full.swap(false, Ordering::AcqRel) {
                    (self.drained)();
                }
                Poll::Ready(Some(chunk.map(Frame::data)))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.len
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

/// A streamed body and its writer. `len` is the declared `content-length`, if any; `drained`
/// runs (on tokio) when a full channel has room again.
pub fn channel_body(
    len: Option<u64>,
    drained: impl Fn() + Send + Sync + 'static,
) -> (ReqBody, BodyWriter) {
    let (tx, rx) = mpsc::channel(DEPTH);
    let full = Arc::new(AtomicBool::new(false));
    let body = ChannelBody {
        rx,
        full: full.clone(),
        drained: Box::new(drained),
        len,
    };
    (body.boxed(), BodyWriter { tx: Some(tx), full })
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
