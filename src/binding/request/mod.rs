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

use napi::sys;

use super::env::Hold;
use super::inbox::{Completion, Inbox};
use super::js::{self, AsyncContext, Ref};
use super::pool::PoolCell;
use super::protocol::verdict;
use super::registry::Registry;
use crate::client::attempt::{Attempt, Connection};
use crate::client::{self, Control, Event, HeaderLines, Sink, Spec, WriteResult};
use crate::pool::place::Place;
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
    /// Its attempts: what it sends, its replay, what its exchange said so far, its body's
    /// writer and the headers deadline this thread keeps (see `client::attempt`).
    attempt: RefCell<Attempt>,
    /// Where it stands in its pool: waiting, or on a connection or a stream.
    place: Cell<Place>,
    /// What stops its exchange while it runs.
    abort: RefCell<Option<Exchange>>,
    /// The request holds the event loop open (its exchange or connect runs on tokio): taken
    /// and let go through [`ReqState::hold`] and [`ReqState::unhold`], each at most once a turn.
    hold: RefCell<Option<Hold>>,
    /// Over (see [`ReqState::finish`]): no event reaches JavaScript any more.
    finished: Cell<bool>,
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

    /// The request's exchange starts on connection `conn_id`, reused (an idle one, or a stream
    /// of an HTTP/2 session): what it sends, and where its events go. None if it has started
    /// already.
    fn begin_on(&self, conn_id: u32) -> Option<(Spec, Arc<dyn Sink>)> {
        let spec = self.attempt.borrow_mut().start(Connection::Reused)?;
        self.place.set(Place::Conn(conn_id));
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
    req.attempt.borrow_mut().over();
    let pool = req.pool.clone();
    let place = req.place.take();
    req.unhold();
    req.finish();
    let conn_id = match place {
        Place::Nowhere => return verdict::NONE,
        // Its place in the queue.
        Place::Queued(w) => {
            pool.cancel(w.0);
            return verdict::NONE;
        }
        Place::StreamWait => {
            let mut sessions = pool.sessions.borrow_mut();
            sessions.cancel(req.key, u64::from(req.id));
            return verdict::NONE;
        }
        // An HTTP/2 stream is reset alone (its task stopped): the session goes on.
        Place::Stream(conn_id) => {
            streams::stream_done(&pool, req.key, conn_id);
            return verdict::NONE;
        }
        Place::Conn(conn_id) => conn_id,
    };
    // A connection that requests wait for, closed before it could serve them.
    let abandoned = pool.conn(conn_id).is_some_and(|c| c.h2_pending.take());
    let verdict = pool.close(conn_id);
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

/// A chunk of `req`'s streamed body (copied); None when the request has no writer any more.
pub fn body_write(req: &ReqState, data: &[u8]) -> Option<WriteResult> {
    let mut attempt = req.attempt.borrow_mut();
    let writer = attempt.writer()?;
    Some(writer.write(crate::client::recycle::copy(data)))
}

/// The source of `req`'s streamed body ended.
pub fn body_end(req: &ReqState) {
    if let Some(writer) = req.attempt.borrow_mut().writer() {
        writer.end();
    }
}

/// The source of `req`'s streamed body failed with `message`.
pub fn body_fail(req: &ReqState, message: String) {
    if let Some(writer) = req.attempt.borrow_mut().writer() {
        writer.fail(message);
    }
}
