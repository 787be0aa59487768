//! `agent.request()` on the JavaScript thread: checkout from the same pool as the drop-in
//! path, dispatch of the exchange to tokio, and delivery of its events to the request's
//! JavaScript handle, in the async context of the `request()` call.
//!
//! Crossings per request: one into tokio (the spawned exchange), and back through the thread's
//! inbox the response head with the body bytes already there (a small response is one
//! crossing), then body chunks as the JavaScript stream asks for them, then the connection's
//! return. Many events of many requests share one wake-up of the JavaScript thread.

mod events;
mod open;
mod streams;

pub use events::{on_request_event, sweep_headers_deadlines};
pub use open::{
    hyper_closed, hyper_connected, hyper_lookup, request_keys, requests_in_flight, requests_queued,
    serve_waiting, start,
};

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use napi::sys;

use super::env::Hold;
use super::inbox::{Completion, Inbox};
use super::js::{self, AsyncContext, Ref};
use super::pool::PoolCell;
use super::protocol::verdict;
use super::registry::Registry;
use crate::client::plan::Replay;
use crate::client::{self, BodyWriter, Control, Event, HeaderLines, Sink, Spec};
use crate::error::Error;
use crate::pool::KeyId;

/// The most values an event carries after its kind (the head's: status, reason, headers,
/// body, trailers, and the verdict and connection of an exchange over with its head).
const MAX_EVENT_ARGS: usize = 7;

/// A request's running exchange: in a task of its own (on a new connection, with the connect)
/// or in its connection's task.
enum Exchange {
    Task(tokio::task::AbortHandle),
    InConnection(Rc<client::Stopper>),
}

impl Exchange {
    /// Stops it where it is; its connection closes.
    fn stop(self) {
        match self {
            Exchange::Task(task) => task.abort(),
            Exchange::InConnection(stopper) => stopper.stop(),
        }
    }
}

/// One `agent.request()` in flight (or waiting for a connection).
pub struct ReqState {
    pub id: u32,
    pool: Rc<PoolCell>,
    key: KeyId,
    handle: Ref,
    ctx: AsyncContext,
    ctl: Arc<Control>,
    /// The exchange's description until it is dispatched (a queued request keeps it here).
    spec: RefCell<Option<Spec>>,
    pub writer: RefCell<Option<BodyWriter>>,
    /// The connection serving it, once it has one.
    conn: Cell<u32>,
    /// What stops its exchange while it runs.
    abort: RefCell<Option<Exchange>>,
    /// The response head has arrived (errors after it are "aborted", and the connection
    /// then cannot be reused).
    headed: Cell<bool>,
    /// What it takes to send the request again, when it may be (idempotent, body in memory
    /// and within the replay limit, replay on). Taken by the one replay allowed.
    replay: RefCell<Option<Replay>>,
    /// The current connection was reused (a fresh connection is never replayed on: the
    /// server may be refusing the request).
    reused: Cell<bool>,
    /// A replay is under way: the failed attempt's end is not the request's. Holds the
    /// attempt's error, the request's should the replay not be possible after all.
    retrying: RefCell<Option<Error>>,
    /// How long the server said it keeps the connection idle (`Keep-Alive: timeout=N`, less
    /// a second as Node takes it).
    hint: Cell<Option<std::time::Duration>>,
    /// A headers timeout this thread keeps (see `client::COARSE_TIMEOUT`) instead of the exchange,
    /// and when it runs out: set when the exchange starts on its connection.
    headers_timeout: Cell<Option<Duration>>,
    headers_deadline: Cell<Option<Instant>>,
    /// The request holds the event loop open (its exchange or connect runs on tokio): taken
    /// and let go through [`ReqState::hold`] and [`ReqState::unhold`], each at most once a turn.
    hold: RefCell<Option<Hold>>,
    /// Over (see [`ReqState::finish`]): no event reaches JavaScript any more.
    finished: Cell<bool>,
    /// Its place in the pool's queue while it waits for a connection (see
    /// `PoolCell::route`, which serves it).
    pub waiter: Cell<Option<u64>>,
    /// It waits for a stream of an HTTP/2 session, or for the connection that may give one
    /// (see `streams::route`).
    stream_wait: Cell<bool>,
    /// Its exchange runs on a stream of the HTTP/2 session `conn` (which may have closed
    /// since): its end frees that stream, not a connection.
    on_stream: Cell<bool>,
    /// Its trailers, when they come with its body's end ([`set_trailers`]).
    trailers: Option<Arc<client::Trailers>>,
}

thread_local! {
    /// `agent.request()` calls in flight or queued on this thread, by id.
    static REQUESTS: Registry<Rc<ReqState>> = const { Registry::new() };
}

/// Request `id` of this thread, while it is in flight or queued.
pub fn by_id(id: u32) -> Option<Rc<ReqState>> {
    REQUESTS.with(|t| t.get(id))
}

/// Every `agent.request()` in flight or queued.
pub fn all() -> Vec<Rc<ReqState>> {
    REQUESTS.with(Registry::values)
}

/// Takes every request out of the table: the env is going away.
pub fn take_all() -> Vec<Rc<ReqState>> {
    REQUESTS.with(|t| t.take_where(|_| true))
}

/// The drain of a streamed request body, posted through `inbox` to request `id` (the id may be
/// set once known).
pub fn drain_to(
    inbox: &Arc<Inbox>,
    id: Arc<std::sync::atomic::AtomicU32>,
) -> impl Fn() + Send + Sync + 'static {
    let inbox = inbox.clone();
    move || {
        inbox.post(Completion::Req {
            req: id.load(std::sync::atomic::Ordering::Acquire),
            event: Event::BodyDrain,
        });
    }
}

/// Posts an exchange's events through the thread's inbox.
struct ReqSink {
    inbox: Arc<Inbox>,
    req: u32,
}

impl Sink for ReqSink {
    fn post(&self, event: Event) {
        self.inbox.post(Completion::Req {
            req: self.req,
            event,
        });
    }
}

impl ReqState {
    pub fn pool(&self) -> Rc<PoolCell> {
        self.pool.clone()
    }

    fn env(&self) -> sys::napi_env {
        self.pool.ctx.env
    }

    /// Calls `handle.onEvent(kind, ...args)` in the request's async context; returns what it
    /// returned (None if it threw).
    fn emit(&self, kind: u32, args: &[sys::napi_value]) -> Option<sys::napi_value> {
        // Code an earlier event ran may have ended the request (an abort from a listener):
        // its handle is gone, and nothing more is said.
        if self.finished.get() {
            return None;
        }
        let env = self.env();
        let handle = self.handle.get(env);
        let func = self.pool.ctx.callbacks.on_request.get(env);
        // On the stack: an event has at most MAX_EVENT_ARGS values (the head's).
        let mut argv = [std::ptr::null_mut(); MAX_EVENT_ARGS + 2];
        argv[0] = handle;
        argv[1] = js::number(env, kind as f64);
        argv[2..2 + args.len()].copy_from_slice(args);
        js::make_callback(env, Some(self.ctx), handle, func, &argv[..2 + args.len()])
    }

    /// Takes a long headers timeout out of `spec` (see `client::COARSE_TIMEOUT`): this thread
    /// keeps it, and its sweep (every `env::SWEEP_EVERY_MS`) fails the request once it passed.
    fn keep_headers_timeout(&self, spec: &mut Spec) {
        if let Some(t) = spec.take_coarse_headers_timeout() {
            self.headers_timeout.set(Some(t));
        }
        self.headers_deadline.set(None);
    }

    /// The request's exchange starts on connection `conn_id`, reused (an idle one, or a stream
    /// of an HTTP/2 session): what it sends, and where its events go. None if it has started
    /// already.
    fn begin_on(&self, conn_id: u32) -> Option<(Spec, Arc<dyn Sink>)> {
        let mut spec = self.spec.borrow_mut().take()?;
        self.keep_headers_timeout(&mut spec);
        self.conn.set(conn_id);
        self.reused.set(true);
        self.hold();
        let sink: Arc<dyn Sink> = Arc::new(ReqSink {
            inbox: self.pool.ctx.inbox.clone(),
            req: self.id,
        });
        Some((spec, sink))
    }

    /// Stops the request's task, if it has one running (the env's cleanup).
    pub fn stop(&self) {
        if let Some(exchange) = self.abort.borrow_mut().take() {
            exchange.stop();
        }
    }

    /// The request's exchange (or connect) starts running on tokio: the process stays alive
    /// for it.
    fn hold(&self) {
        let mut hold = self.hold.borrow_mut();
        if hold.is_none() {
            *hold = Some(self.pool.ctx.hold());
        }
    }

    /// It stopped running there; a second call does nothing.
    fn unhold(&self) {
        self.hold.borrow_mut().take();
    }

    /// Ends the request: its handle and async context are let go of. Idempotent: an end
    /// reached twice (an abort from JavaScript inside the event that ends it, say) ends it once.
    /// Guarded by __test__/safety.test.js.
    fn finish(&self) {
        if self.finished.replace(true) {
            return;
        }
        let env = self.env();
        self.unhold();
        REQUESTS.with(|t| t.remove(self.id));
        self.handle.delete(env);
        self.ctx.destroy(env);
    }
}

/// Header lines as one latin1 string, as Rust packed them (`name\nvalue\n...`): one string
/// crosses to JavaScript instead of an array of them.
fn header_string(env: sys::napi_env, headers: &HeaderLines) -> sys::napi_value {
    js::latin1(env, headers.as_bytes())
}

/// A request's JavaScript side, from the `agent.request()` call: the object its events go to,
/// and the name of its async context.
pub struct JsSide {
    pub handle: sys::napi_value,
    pub context_name: sys::napi_value,
}

/// The server's `Keep-Alive: timeout=N` hint, from the response's headers.
fn keep_alive_hint(headers: &HeaderLines) -> Option<std::time::Duration> {
    let (_, value) = headers.pairs().find(|(k, _)| *k == b"keep-alive")?;
    crate::pool::keep_alive_hint(value)
}

/// `bodyRead`: the response stream wants one more chunk.
pub fn grant(req: &ReqState) {
    req.ctl.grant();
}

/// `abort`: stops the exchange; a connection in the middle of one is closed. Returns the
/// verdict of the close (a waiter may connect).
pub fn abort(req: &Rc<ReqState>) -> f64 {
    if let Some(exchange) = req.abort.borrow_mut().take() {
        exchange.stop();
    }
    req.writer.borrow_mut().take();
    let on_session = streams::on_session(req);
    let conn_id = req.conn.replace(0);
    let pool = req.pool.clone();
    // Its place in the queue, if it still waits.
    if let Some(w) = req.waiter.take() {
        pool.cancel(w);
    }
    if req.stream_wait.take() {
        pool.sessions
            .borrow_mut()
            .cancel(req.key, u64::from(req.id));
    }
    let in_flight = conn_id != 0;
    req.unhold();
    req.finish();
    // An HTTP/2 stream is reset alone (its task stopped): the session goes on.
    if on_session {
        streams::stream_done(&pool, req.key, conn_id);
        return verdict::NONE;
    }
    // A connection that requests wait for, closed before it could serve them.
    let abandoned = pool.conn(conn_id).is_some_and(|c| c.h2_pending.take());
    let verdict = match in_flight {
        true => pool.close(conn_id),
        false => verdict::NONE,
    };
    if abandoned {
        streams::connect_abandoned(&pool, req.key);
    }
    verdict
}

/// The trailers of `req`, known now that its body's source has ended.
pub fn set_trailers(req: &ReqState, trailers: http::HeaderMap) {
    if let Some(t) = &req.trailers {
        t.set(trailers);
    }
}

/// Bytes of a streamed request body.
pub fn body_chunk(data: &[u8]) -> Bytes {
    crate::client::recycle::copy(data)
}
