//! `agent.request()` on the JavaScript thread, as `client::driver` runs it: its JavaScript face
//! (events marshalled to the request's handle, in the async context of the `request()` call;
//! its hold on the event loop), and its pool's side of the driver (`Lanes`): the pool's
//! connections, sessions and requests, and the mechanics of running exchanges on tokio.
//!
//! Crossings per request: one into tokio (the exchange, handed over with the others of the
//! loop's turn in one wake-up of the worker: `runtime::wake_soon`), and back through the thread's
//! inbox the response head with the body bytes already there (a small response is one
//! crossing), then body chunks as the JavaScript stream asks for them, then the connection's
//! return. Many events of many requests share one wake-up of the JavaScript thread.

mod events;
mod open;

pub use events::{on_request_event, on_sending, sweep_headers_deadlines};
pub use open::{
    hyper_closed, hyper_lookup, request_keys, requests_in_flight, requests_queued, start,
};

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use napi::sys;

use super::env::Hold;
use super::inbox::{Completion, Inbox};
use super::js::{self, AsyncContext, Ref};
use super::pool::PoolCell;
use super::protocol::{connection, kind, name, verdict};
use super::registry::Registry;
use crate::binding::conn::State;
use crate::client::driver::{self, Face, Headed, Lanes, Request, Settled};
use crate::client::{self, Event, HeaderLines, Sink, WriteResult};
use crate::error::Error;
use crate::pool::{Grant, KeyId, ReleasePolicy, Wear};
use crate::transport::connect::Peer;
use crate::transport::tls::{NameCheck, TlsInfo};

/// The most values an event carries after its kind (the head's: status, reason, headers,
/// body, trailers, and the verdict and connection of an exchange over with its head).
const MAX_EVENT_ARGS: usize = 7;

/// One `agent.request()` in flight (or waiting for a connection), as `client::driver` runs it.
pub type ReqState = Request<JsFace>;

/// A request's JavaScript side: its pool, the handle its events go to, the async context of
/// its `request()` call, and its hold on the event loop.
pub struct JsFace {
    pool: Rc<PoolCell>,
    handle: Ref,
    ctx: AsyncContext,
    /// Taken while its exchange or connect runs on tokio (see `Face::hold`).
    hold: RefCell<Option<Hold>>,
    /// JavaScript hears which connection the request goes out on (see `Face::sending`).
    tells_sending: bool,
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
pub fn drain_to(inbox: &Arc<Inbox>, id: Arc<AtomicU32>) -> impl Fn() + Send + Sync + 'static {
    let inbox = inbox.clone();
    move || {
        inbox.post(Completion::Req {
            req: id.load(Ordering::Acquire),
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

impl JsFace {
    fn env(&self) -> sys::napi_env {
        self.pool.ctx.env
    }

    /// Calls `handle.onEvent(kind, ...args)` in the request's async context; returns what it
    /// returned (None if it threw). Only while the request is not over (`Request::tell`).
    fn emit(&self, kind: u32, args: &[sys::napi_value]) -> Option<sys::napi_value> {
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

    fn body(&self, chunks: &[Bytes]) -> sys::napi_value {
        self.pool.ctx.chunks.chunk_concat(chunks)
    }

    /// The request goes out on connection `conn` (see `events::on_sending`).
    fn tell_sending(&self, conn: u32) {
        self.emit(kind::SENDING, &[js::number(self.env(), conn as f64)]);
    }
}

impl Face for JsFace {
    fn info(&self, status: u16, headers: &HeaderLines) {
        let env = self.env();
        self.emit(
            kind::INFO,
            &[js::number(env, status as f64), header_string(env, headers)],
        );
    }

    fn head(&self, head: Headed<'_>) {
        let env = self.env();
        let body = match head.chunks.is_empty() {
            true => js::null(env),
            false => self.body(head.chunks),
        };
        let trailers = head
            .trailers
            .map_or_else(|| js::null(env), |t| header_string(env, t));
        // HTTP/2 has no reason phrase: a null says the response came over it.
        let reason = head
            .reason
            .map_or_else(|| js::null(env), |r| js::latin1(env, r));
        let mut args = [
            js::number(env, head.status as f64),
            reason,
            header_string(env, head.headers),
            body,
            trailers,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        ];
        let given = match head.settled {
            Some(settled) => {
                args[5] = js::number(env, verdict::of(settled.verdict));
                args[6] = js::number(env, settled.conn as f64);
                7
            }
            None => 5,
        };
        self.emit(kind::HEAD, &args[..given]);
    }

    fn data(&self, chunks: &[Bytes]) {
        self.emit(kind::DATA, &[self.body(chunks)]);
    }

    fn end(&self, trailers: &HeaderLines) {
        self.emit(kind::END, &[header_string(self.env(), trailers)]);
    }

    fn error(&self, err: &Error) {
        self.emit(kind::ERROR, &[js::error_descriptor(self.env(), err)]);
    }

    fn drain(&self) {
        self.emit(kind::DRAIN, &[]);
    }

    fn answered(&self) {
        self.emit(kind::ANSWERED, &[]);
    }

    /// Only for a request that asked (`flags::SENDING`); `later` through the inbox.
    fn sending(&self, req: u32, conn: u32, later: bool) {
        if !self.tells_sending {
            return;
        }
        if later {
            self.pool.ctx.inbox.post(Completion::Sending { req, conn });
        } else {
            self.tell_sending(conn);
        }
    }

    /// JavaScript checks the name (`checkServerIdentity`) and answers how it stands; a wrong
    /// one it fails the request with, closing the connection.
    fn check_name(&self, conn: u32, key: KeyId) -> NameCheck {
        let env = self.env();
        let info = crate::binding::conn::by_id(conn)
            .and_then(|c| {
                c.tls
                    .borrow()
                    .as_deref()
                    .map(|info| js::tls_info(env, info))
            })
            .unwrap_or_else(|| js::null(env));
        name::check(
            self.emit(kind::VERIFY, &[info, js::number(env, key.0 as f64)])
                .and_then(|v| js::to_f64(env, v)),
        )
    }

    fn done(&self, settled: Settled) {
        let env = self.env();
        self.emit(
            kind::DONE,
            &[
                js::number(env, verdict::of(settled.verdict)),
                js::number(env, settled.conn as f64),
            ],
        );
    }

    fn hold(&self) {
        let mut hold = self.hold.borrow_mut();
        if hold.is_none() {
            *hold = Some(self.pool.ctx.hold());
        }
    }

    fn unhold(&self) {
        self.hold.borrow_mut().take();
    }

    /// Its handle and async context are let go of (once: see `Request::finish`). Guarded by
    /// __test__/safety.test.js.
    fn release(&self, id: u32) {
        let env = self.env();
        REQUESTS.with(|t| t.remove(id));
        self.handle.delete(env);
        self.ctx.destroy(env);
    }
}

/// The pool of `agent.request()`s, as `client::driver` moves them.
impl Lanes for Rc<PoolCell> {
    type Face = JsFace;

    fn request(&self, id: u32) -> Option<Rc<ReqState>> {
        by_id(id).filter(|r| r.face.pool.id == self.id)
    }

    fn run_connect(&self, req: &Rc<ReqState>, conn: u32, spec: client::Spec) {
        open::run_connect(self, req, conn, spec);
    }

    fn dispatch(&self, req: &Rc<ReqState>, conn: u32) {
        open::dispatch(self, req, conn);
    }

    fn stream_on(&self, req: &Rc<ReqState>, conn: u32) {
        open::stream_on(self, req, conn);
    }

    fn http2(&self) -> bool {
        self.http2.get()
    }

    fn session(&self, conn: u32) -> Option<(Duration, usize, Option<usize>)> {
        let conn = self.conn(conn)?;
        let (max_streams, said) = conn.max_streams();
        Some((conn.created.elapsed(), max_streams, said))
    }

    fn expire_sessions(&self) {
        PoolCell::expire_sessions(self);
    }

    fn notify_grants(&self, grant: Option<Grant>) {
        PoolCell::notify_grants(self, grant);
    }

    fn pend_session(&self, conn: u32) {
        if let Some(conn) = self.conn(conn) {
            conn.h2_pending.set(true);
        }
    }

    fn take_pending_session(&self, conn: u32) -> bool {
        self.conn(conn).is_some_and(|c| c.h2_pending.take())
    }

    fn in_use(&self, conn: u32) -> Option<Wear> {
        let conn = self.conn(conn)?;
        (conn.course.state() == State::Active).then(|| Wear {
            age: conn.created.elapsed(),
            // Its requests finished before (each counted as it went back), and this one.
            requests: conn.course.stamp().finished.saturating_add(1),
        })
    }

    fn keep(&self, conn: u32, sender: client::Sender) {
        if let Some(conn) = self.conn(conn) {
            // Kept: what its exchange said of an end no longer holds.
            conn.end_told.set(connection::DISCONNECT);
            conn.end_error.borrow_mut().take();
            conn.keep_sender(sender);
        }
    }

    fn policy(&self) -> ReleasePolicy {
        self.policy.get()
    }

    fn drained(&self, req: u32) -> impl Fn() + Send + Sync + 'static {
        drain_to(&self.ctx.inbox, Arc::new(AtomicU32::new(req)))
    }

    fn watch_deadlines(&self) {
        self.ctx.schedule_sweep();
    }

    fn established(
        &self,
        conn: u32,
        local: Option<SocketAddr>,
        remote: Peer,
        tls: Option<Box<TlsInfo>>,
    ) {
        if let Some(conn) = self.conn(conn) {
            conn.local.set(local);
            *conn.remote.borrow_mut() = Some(remote);
            *conn.tls.borrow_mut() = tls;
            conn.course.set_state(State::Active);
        }
    }

    fn make_session(&self, conn: u32, sender: client::Sender) {
        if let Some(conn) = self.conn(conn) {
            conn.make_session(sender);
        }
    }

    fn name_checked(&self, conn: u32, check: NameCheck) {
        if let Some(conn) = self.conn(conn) {
            conn.with_tls(|config, info| config.name_checked(info, check));
        }
    }

    fn announce(&self, conn: u32) {
        if let Some(conn) = self.conn(conn).filter(|_| self.watch_connections.get()) {
            conn.announced.set(true);
            self.post_connection(connection::CONNECT, conn.key, None);
        }
    }

    fn ending(&self, conn: u32, why: driver::Ending<'_>) {
        let Some(conn) = self.conn(conn) else { return };
        if conn.end_told.get() != connection::DISCONNECT || conn.end_error.borrow().is_some() {
            return;
        }
        match why {
            driver::Ending::Failed(err) => *conn.end_error.borrow_mut() = Some(err.clone()),
            driver::Ending::Aborted => conn.end_told.set(connection::DISCONNECT_ABORTED),
            driver::Ending::Reset => conn.end_told.set(connection::DISCONNECT_RESET),
        }
    }

    fn lost(&self, conn: u32, err: &Error) {
        if let Some(conn) = self.remove_conn(conn) {
            conn.close(self.ctx.env);
            self.post_connection(connection::CONNECTION_ERROR, conn.key, Some(err.clone()));
        }
    }
}

/// The pool of `req`.
pub fn pool_of(req: &ReqState) -> &Rc<PoolCell> {
    &req.face.pool
}

/// The sink of `req`'s exchange: its events come back through the thread's inbox.
fn sink_of(req: &ReqState) -> Arc<dyn Sink> {
    Arc::new(ReqSink {
        inbox: req.face.pool.ctx.inbox.clone(),
        req: req.id,
    })
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
    /// It hears which connection it goes out on.
    pub tells_sending: bool,
}

/// `bodyRead`: the response stream wants one more chunk.
pub fn grant(req: &ReqState) {
    req.granted();
    req.ctl.grant();
}

/// `abort`: stops the exchange; a connection in the middle of one is closed. Returns the
/// verdict of the close (a waiter may connect).
pub fn abort(req: &Rc<ReqState>) -> f64 {
    verdict::of(driver::abort(pool_of(req), req))
}

/// The trailers of `req`, known now that its body's source has ended.
pub fn set_trailers(req: &ReqState, trailers: http::HeaderMap) {
    req.set_trailers(trailers);
}

/// A chunk of `req`'s streamed body (copied); None when the request has no writer any more.
pub fn body_write(req: &ReqState, data: &[u8]) -> Option<WriteResult> {
    let mut attempt = req.attempt();
    let writer = attempt.writer()?;
    Some(writer.write(crate::client::recycle::copy(data)))
}

/// The source of `req`'s streamed body ended.
pub fn body_end(req: &ReqState) {
    req.source_ended();
}

/// The source of `req`'s streamed body failed with `message`.
pub fn body_fail(req: &ReqState, message: String) {
    if let Some(writer) = req.attempt().writer() {
        writer.fail(message);
    }
}
