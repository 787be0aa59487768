//! One exchange: a request sent on a [`Sender`] and its response posted to a [`Sink`] as
//! [`Event`]s, the head with what body had already come, then the body as its consumer grants.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::BodyExt;
use hyper::body::{Body as _, Frame, Incoming};
use tokio::sync::Notify;

use crate::error::Error;

use super::{
    errors, hyper_error, wake, Control, Event, Head, HeaderLines, Hyper, ReqBody, Scan, Sender,
    Sink, SourceClock, Spec,
};

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
            let err = errors::request_error(&e, &sender.wake).with_request_sent(false);
            // Not sent at all. An HTTP/2 connection that takes no more streams (a GOAWAY came,
            // or it closed) is one the protocol lets any request go again from, as a refusal.
            sink.post(if sender.is_multiplexed() {
                Event::Refused(err)
            } else {
                Event::Unsent(err)
            });
            sink.post(Event::Done(None));
            return;
        }
        let gate = spec.expect_continue.clone();
        let has_body = !spec.body.is_end_stream();
        let head_request = spec.method == Method::HEAD;
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
                    Some(t) => {
                        let clock = spec.body_clock.as_deref();
                        match Box::pin(within_headers(sending, Some(t), clock)).await {
                            Some(r) => r,
                            None => return headers_timed_out(&*sink, t),
                        }
                    }
                    None => sending.await,
                }
            }
            // Boxed, so that the HTTP/1.1 exchange's future stays small.
            Hyper::H2(h2) => {
                let sending = h2.0.send_request(absolute(request, h2.1));
                let clock = spec.body_clock.as_deref();
                match Box::pin(within_headers(sending, spec.headers_timeout, clock)).await {
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
                let err = errors::request_error(&e, &sender.wake);
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
        // An HTTP/2 body owes its END_STREAM and the bytes its `content-length` declares (see
        // `cut_short`).
        let owed = matches!(sender.hyper, Hyper::H2(..))
            && !head_request
            && status != http::StatusCode::NO_CONTENT
            && status != http::StatusCode::NOT_MODIFIED;

        // What is already here goes with the head. hyper hands a body over a frame at a time
        // (a chunked one: each chunk, then its end), decoding the next once the last is taken:
        // while frames come, the connection's task gets to decode the next from what it has
        // read. A body taken to its end in a round was complete before that round began:
        // hyper's side of its channel is gone, and the wake-ups that taking its chunks sends
        // to the connection's task would find nothing to do.
        let mut arrived = Arrived::default();
        let limit = spec.max_head_size;
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
                        let took = take_arrived(&mut body, cx, &mut arrived, false, limit);
                        (took, arrived.end.is_some())
                    }),
                    Hyper::H2(..) => take_arrived(&mut body, cx, &mut arrived, owed, limit),
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
            sink.post(Event::Error(e));
            sink.post(Event::Done(None));
            return;
        }
        // Boxed, as a body that did not come whole is rarer than one that did: its timer and
        // its loop would make every exchange's future larger.
        if !ended
            && !Box::pin(stream_body(
                &mut body,
                &ctl,
                &*sink,
                spec.body_timeout,
                owed,
                limit,
            ))
            .await
        {
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
        // A connection a write found closed by the peer sent none of what hyper counts as
        // written since.
        let reusable = reusable && !sender.wake.write_failed.load(Ordering::Relaxed);
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

/// The response of `sending`, or None if its head did not come within `timeout`: from the
/// exchange's start, or from its streamed body's last progress when `clock` keeps it, and not
/// while the connection waits on that body's source (see [`SourceClock`]). The timer is
/// boxed: it is large, and only a timeout shorter than the binding's own checks (see
/// `src/binding/request`) comes here.
async fn within_headers<F: Future>(
    sending: F,
    timeout: Option<Duration>,
    clock: Option<&SourceClock>,
) -> Option<F::Output> {
    let Some(t) = timeout else {
        return Some(sending.await);
    };
    let armed = tokio::time::Instant::now();
    let mut sending = std::pin::pin!(sending);
    let mut deadline = armed + t;
    loop {
        match tokio::time::timeout_at(deadline, &mut sending).await {
            Ok(r) => return Some(r),
            // Run out, unless a streamed body moves it (see SourceClock).
            Err(_) => deadline = clock?.deadline(armed, t, tokio::time::Instant::now())?,
        }
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
    failed: Option<Error>,
}

impl Arrived {
    /// Nothing more goes with the head: the body ended or failed, or the head's share of it
    /// ([`HEAD_CHUNK_BYTES`]) is taken.
    fn full(&self) -> bool {
        self.end.is_some() || self.failed.is_some() || self.gathered >= HEAD_CHUNK_BYTES
    }
}

/// Takes the frames of `body` that are here already into `out`, until it is full; whether it
/// took any. `owed`: the body must come whole (see [`cut_short`]); `limit`: the most its
/// trailers may take, as the head.
fn take_arrived(
    body: &mut Incoming,
    cx: &mut Context<'_>,
    out: &mut Arrived,
    owed: bool,
    limit: usize,
) -> bool {
    let mut took = false;
    while !out.full() {
        match Pin::new(&mut *body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match into_data_or_trailers(frame, limit) {
                Ok(data) => {
                    out.gathered += data.len();
                    out.chunks.push(owned(data));
                }
                Err(Ok(trailers)) => out.end = Some(trailers),
                Err(Err(e)) => out.failed = Some(e),
            },
            Poll::Ready(None) => match owed.then(|| cut_short(body)).flatten() {
                Some(err) => out.failed = Some(err),
                None => out.end = Some(HeaderLines::default()),
            },
            Poll::Ready(Some(Err(e))) => out.failed = Some(hyper_error(&e, true)),
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

/// Whether HTTP/2 `body`, at its end, was cut short: ended by the server's RST_STREAM before
/// its END_STREAM, or short of its declared `content-length`. hyper ends a body at a reset with
/// NO_ERROR or CANCEL as cleanly as at END_STREAM (RFC 9113 §8.1 lets a server stop a request's
/// upload with NO_ERROR once its response is complete, which h2 tells by END_STREAM having
/// come), and h2 checks the length only at END_STREAM: a response cut short so would pass as
/// whole.
fn cut_short(body: &Incoming) -> Option<Error> {
    if body.size_hint().exact().is_some_and(|left| left > 0) {
        return Some(errors::cut_short());
    }
    (!body.is_end_stream()).then(errors::reset_before_end)
}

/// Streams the rest of the body as the consumer grants; false if it failed. Frames that are
/// ready together (within the window) go as one event. `owed`: the body must come whole (see
/// [`cut_short`]); `limit`: the most its trailers may take.
async fn stream_body(
    body: &mut Incoming,
    ctl: &Control,
    sink: &dyn Sink,
    timeout: Option<Duration>,
    owed: bool,
    limit: usize,
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
                Some(Ok(frame)) => match into_data_or_trailers(frame, limit) {
                    Ok(data) => {
                        gathered += data.len();
                        if !data.is_empty() {
                            chunks.push(data);
                        }
                    }
                    Err(trailers) => break Some(trailers),
                },
                None => match owed.then(|| cut_short(body)).flatten() {
                    Some(err) => break Some(Err(err)),
                    None => break Some(Ok(HeaderLines::default())),
                },
                Some(Err(e)) => break Some(Err(hyper_error(&e, true))),
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
                sink.post(Event::Error(e));
                return false;
            }
        }
    }
}

/// A body's frame: its data, or its trailers, which fail as a head would when they take more
/// than `limit` (as Node's parser counts them with the head): h2 keeps of a trailer block over
/// its own limit the fields that fit and drops the others without a word.
fn into_data_or_trailers(
    frame: Frame<Bytes>,
    limit: usize,
) -> Result<Bytes, Result<HeaderLines, Error>> {
    match frame.into_data() {
        Ok(data) => Ok(data),
        Err(frame) => Err(match frame.into_trailers() {
            Ok(map) => {
                let (lines, scan) = HeaderLines::scan(&map);
                if scan.bytes + 4 * scan.lines + 2 > limit {
                    Err(errors::header_overflow())
                } else {
                    Ok(lines)
                }
            }
            Err(_) => Ok(HeaderLines::default()),
        }),
    }
}

/// The size of a response head as it came: the status line and a line per header, as the
/// limit on it counts them.
fn head_size(phrase: Option<&hyper::ext::ReasonPhrase>, scan: &Scan) -> usize {
    let reason = phrase.map_or(0, |r| r.as_bytes().len());
    // `HTTP/1.1 200 reason\r\n`, `name: value\r\n` each, and the blank line.
    13 + reason + 2 + scan.bytes + 4 * scan.lines + 2
}
