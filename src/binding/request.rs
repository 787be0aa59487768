//! `agent.request()` on the JavaScript thread: checkout from the same pool as the drop-in
//! path, dispatch of the exchange to tokio, and delivery of its events to the request's
//! JavaScript handle, in the async context of the `request()` call.
//!
//! Crossings per request: one into tokio (the spawned exchange), and back through the thread's
//! inbox the response head with the body bytes already there (a small response is one
//! crossing), then body chunks as the JavaScript stream asks for them, then the connection's
//! return. Many events of many requests share one wake-up of the JavaScript thread.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use napi::sys;

use super::conn::{Conn, Mode, State};
use super::env::{EnvCtx, Hold};
use super::inbox::{Completion, HyperEstablished, Inbox};
use super::js::{self, AsyncContext, Ref};
use super::pool::{verdict, PoolCell};
use crate::client::plan::Replay;
use crate::client::{self, BodyWriter, Control, Event, HeaderLines, Sink, Spec};
use crate::error::Error;
use crate::pool::{Checkout, Fit, KeyId, WaiterId};
use crate::runtime::runtime;
use crate::transport::establish::{establish, Established as Opened, Secure};
use crate::transport::{tls, Connected, Socket, Target};

/// The most values an event carries after its kind (the head's: status, reason, headers,
/// body, trailers, and the verdict and connection of an exchange over with its head).
const MAX_EVENT_ARGS: usize = 7;

/// The JavaScript side's event codes (`lib/request.js` reads them).
pub mod kind {
    pub const HEAD: u32 = 0;
    pub const DATA: u32 = 1;
    pub const END: u32 = 2;
    pub const ERROR: u32 = 3;
    pub const DRAIN: u32 = 4;
    pub const DONE: u32 = 5;
    /// A new TLS session: JavaScript checks the server's name (`checkServerIdentity`) and
    /// answers true for the exchange to start.
    pub const VERIFY: u32 = 6;
    /// A new connection's host is to be resolved by the user's `lookup` (JavaScript answers
    /// through `lookupDone`).
    pub const LOOKUP: u32 = 7;
    /// The response is complete before the request has all gone out (see
    /// [`Event::Answered`]): its body ends now.
    pub const ANSWERED: u32 = 8;
    /// An informational (1xx) response.
    pub const INFO: u32 = 9;
    /// Their names, each at its number: JavaScript reads them (`binding.protocol()`).
    pub const NAMES: [&str; 10] = [
        "HEAD", "DATA", "END", "ERROR", "DRAIN", "DONE", "VERIFY", "LOOKUP", "ANSWERED", "INFO",
    ];
}

/// What JavaScript answers to [`kind::VERIFY`] when the exchange may start.
pub mod name {
    /// The server's name is right.
    pub const RIGHT: f64 = 1.0;
    /// It is not, but `rejectUnauthorized: false` lets it pass.
    pub const LET_PASS: f64 = 2.0;
}

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
    /// A headers timeout this thread keeps (see [`COARSE_TIMEOUT`]) instead of the exchange,
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
}

/// Headers timeouts longer than this (the default is 300 s) are not a tokio timer around each
/// exchange: a sweep of the requests in flight every [`SWEEP_EVERY_MS`] fails those whose
/// deadline passed, so such a timeout fires up to that much late. Shorter ones stay exact.
pub const COARSE_TIMEOUT: Duration = Duration::from_secs(1);
pub const SWEEP_EVERY_MS: u64 = 500;

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

    /// Takes a long headers timeout out of `spec`: this thread keeps it.
    fn keep_headers_timeout(&self, spec: &mut Spec) {
        if let Some(t) = spec.headers_timeout.filter(|t| *t > COARSE_TIMEOUT) {
            spec.headers_timeout = None;
            self.headers_timeout.set(Some(t));
        }
        self.headers_deadline.set(None);
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
        self.pool.ctx.remove_request(self.id);
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

impl PoolCell {
    /// Starts `agent.request()`: a connection of the promise path now, a new one, or a place
    /// in the queue (served by [`PoolCell::route`]).
    pub fn request(
        self: &Rc<Self>,
        key: KeyId,
        js_side: JsSide,
        spec: Spec,
        writer: Option<BodyWriter>,
        ctl: Arc<Control>,
        replay: Option<Replay>,
    ) -> Rc<ReqState> {
        let env = self.ctx.env;
        let req = Rc::new(ReqState {
            id: self.ctx.next_request_id(),
            pool: self.clone(),
            key,
            // SAFETY (both): js.rs invariant 1: the handle object and the context's name are
            // arguments of the current `request` call, so the context captured is this call's;
            // `finish` deletes and destroys them once (js.rs invariant 2). Tests:
            // __test__/context.test.js "promise and stream events run in the context of the
            // request() call"; __test__/safety.test.js "an end reached twice ends once: aborts
            // and destroys from inside listeners, in every order".
            handle: unsafe { Ref::new(env, js_side.handle, 1) },
            ctx: unsafe { AsyncContext::named_by(env, js_side.handle, js_side.context_name) },
            ctl,
            spec: RefCell::new(Some(spec)),
            writer: RefCell::new(writer),
            conn: Cell::new(0),
            abort: RefCell::new(None),
            headed: Cell::new(false),
            replay: RefCell::new(replay),
            reused: Cell::new(false),
            retrying: RefCell::new(None),
            hint: Cell::new(None),
            headers_timeout: Cell::new(None),
            headers_deadline: Cell::new(None),
            hold: RefCell::new(None),
            finished: Cell::new(false),
            waiter: Cell::new(None),
        });
        self.ctx.insert_request(req.clone());
        let mut discard = Vec::new();
        let checkout = {
            let ctx = &self.ctx;
            let mut st = self.state.borrow_mut();
            st.pool.checkout(
                key,
                |&id| ctx.conn(id).map_or(Fit::Dead, |c| c.fit(Mode::Promise)),
                &mut discard,
            )
        };
        for (id, _) in discard {
            // A socket object (or a hook's stream) a program holds for it hears of its end.
            self.drop_idle(id, false);
        }
        match checkout {
            Checkout::Reuse(conn) => self.dispatch(&req, conn),
            Checkout::Connect => self.connect_for(&req),
            Checkout::Queued(WaiterId(w)) => {
                req.waiter.set(Some(w));
                self.promise_waiters.borrow_mut().insert(w, (req.id, key));
            }
        }
        req
    }

    /// Serves waiter `w`, an `agent.request()`, with what the pool gave it: connection
    /// `conn_id` (a handoff: the request goes on it, or, if it belongs to the other path, on a
    /// new connection in its slot) or a slot (a grant: a new connection).
    pub(super) fn serve_promise(self: &Rc<Self>, req: &Rc<ReqState>, handoff: Option<u32>) {
        req.waiter.set(None);
        match handoff.and_then(|id| self.conn(id)) {
            Some(conn) if conn.mode.get() == Mode::Promise => self.dispatch(req, conn.id),
            Some(conn) => {
                self.retire(conn.id);
                self.connect_for(req);
            }
            None => self.connect_for(req),
        }
    }

    /// The JavaScript handles of this pool's `agent.request()`s waiting in its queue, for
    /// `agent.destroy()` to fail.
    pub fn requests_queued(&self) -> Vec<sys::napi_value> {
        let env = self.ctx.env;
        self.ctx
            .requests()
            .into_iter()
            .filter(|r| r.pool.id == self.id && r.waiter.get().is_some())
            .map(|r| r.handle.get(env))
            .collect()
    }

    /// `agent.destroy()`: the JavaScript handles of this pool's `agent.request()`s that are on
    /// a connection (or connecting), for JavaScript to abort, which closes their connections
    /// as the drop-in path's sockets are destroyed.
    pub fn requests_in_flight(&self) -> Vec<sys::napi_value> {
        let env = self.ctx.env;
        self.ctx
            .requests()
            .into_iter()
            .filter(|r| r.pool.id == self.id && r.conn.get() != 0)
            .map(|r| r.handle.get(env))
            .collect()
    }

    /// The keys of this pool's `agent.request()`s in flight or queued.
    pub fn request_keys(&self) -> Vec<KeyId> {
        self.ctx
            .requests()
            .into_iter()
            .filter(|r| r.pool.id == self.id)
            .map(|r| r.key)
            .collect()
    }

    /// Sends a request on an idle connection of the promise path.
    pub fn dispatch(self: &Rc<Self>, req: &Rc<ReqState>, conn_id: u32) {
        let Some(conn) = self.conn(conn_id) else {
            return;
        };
        let sender = conn.take_sender();
        let Some(mut spec) = req.spec.borrow_mut().take() else {
            return;
        };
        req.keep_headers_timeout(&mut spec);
        conn.state.set(State::Active);
        req.conn.set(conn_id);
        req.reused.set(true);
        req.hold();
        let sink: Arc<dyn Sink> = Arc::new(ReqSink {
            inbox: self.ctx.inbox.clone(),
            req: req.id,
        });
        let ctl = req.ctl.clone();
        let running = match sender {
            // The stopper is one for the connection, shared by the requests it serves: no count
            // of the connection's shared state to change on each request.
            Some((sender, stopper)) => {
                match sender.start(spec, ctl, sink) {
                    // In the connection's task, which boxes the exchange on tokio's thread.
                    Ok(()) => Exchange::InConnection(stopper),
                    // The connection's task has ended since: the exchange finds it closed.
                    Err(queued) => Exchange::Task(
                        runtime()
                            .spawn(async move { queued.start().await })
                            .abort_handle(),
                    ),
                }
            }
            None => {
                // Closed since the checkout looked: the exchange reports a hang-up.
                sink.post(Event::Error(Error::tls("ECONNRESET", "socket hang up")));
                sink.post(Event::Done(None));
                return;
            }
        };
        *req.abort.borrow_mut() = Some(running);
        self.ctx.arm_headers_deadline(req);
    }

    /// Opens a new promise-path connection for `req` (its slot is already counted) and runs
    /// the exchange on it in the same task.
    pub fn connect_for(self: &Rc<Self>, req: &Rc<ReqState>) {
        let Some(mut spec) = req.spec.borrow_mut().take() else {
            return;
        };
        // The headers timeout starts with the exchange, once connected (`hyper_connected`).
        req.keep_headers_timeout(&mut spec);
        // A request on a fresh connection is never sent again: a streamed body need not be
        // kept for it (a replay's own body keeps nothing either).
        if let Some(replay) = req.replay.borrow().as_ref() {
            replay.drop_recording();
        }
        let conn: Rc<Conn> = self.new_conn(req.key);
        super::debug::debug!("request {}: create connection {}", req.id, conn.id);
        conn.mode.set(Mode::Promise);
        req.conn.set(conn.id);
        req.reused.set(false);
        req.hold();
        let Some((target, servername)) = self.target(req.key) else {
            let sink = ReqSink {
                inbox: self.ctx.inbox.clone(),
                req: req.id,
            };
            sink.post(Event::Error(Error::tls(
                "ERR_HYPERAGENT_INTERNAL",
                "no connect target for this origin",
            )));
            sink.post(Event::Done(None));
            return;
        };
        let opts = self.state.borrow().connect_opts;
        let tls = self.tls_config(req.key);
        let keylog = self.keylog.clone();
        let js_lookup = self.js_lookup(req.key);
        let inbox = self.ctx.inbox.clone();
        let (pool, conn_id, req_id) = (self.id, conn.id, req.id);
        let ctl = req.ctl.clone();
        let max_header = self.max_header_size.get();
        let connect_timeout = self.connect_timeout.get();
        let tunneled = matches!(
            &target,
            Target::Tcp {
                tunnel: Some(_),
                ..
            }
        );
        let task = runtime().spawn(async move {
            // Set once the connect (through a proxy's tunnel, when there is one) is done.
            let connected = AtomicBool::new(false);
            let sink: Arc<dyn Sink> = Arc::new(ReqSink {
                inbox: inbox.clone(),
                req: req_id,
            });
            // Boxed, as the connect's steps are: made here on tokio's thread, while the spawned
            // future, which the JavaScript thread allocates for every connection, stays small.
            let established = Box::pin(async {
                let mut target = target;
                // The user's `lookup` resolves the host, in JavaScript, as on the drop-in path;
                // should it fail, JavaScript fails the request and closes this connection.
                if let (true, Target::Tcp { addresses, .. }) = (js_lookup, &mut target) {
                    let (reply, resolved) = tokio::sync::oneshot::channel();
                    inbox.post(Completion::HyperLookup {
                        pool,
                        conn: conn_id,
                        req: req_id,
                        reply,
                    });
                    let ips = resolved.await.map_err(|_| {
                        Error::tls("ERR_HYPERAGENT_INTERNAL", "the lookup gave no answer")
                    })?;
                    *addresses = Some(ips);
                }
                let secure = tls.as_deref().map(|config| Secure {
                    config,
                    servername: servername.as_deref(),
                    keylog: keylog.clone(),
                });
                let on_keys = |lines| {
                    inbox.post(Completion::Keylog {
                        pool,
                        conn: conn_id,
                        lines,
                    })
                };
                let mark = || connected.store(true, Ordering::Relaxed);
                let established =
                    Box::pin(establish(target, opts, secure, None, mark, on_keys)).await?;
                let ((sender, connection), info, local, remote) = match established {
                    Opened::Secure {
                        stream,
                        info,
                        local,
                        remote,
                    } => {
                        let http = Box::pin(client::handshake(stream, max_header)).await?;
                        (http, Some(info), local, remote)
                    }
                    Opened::Plain(Connected {
                        socket,
                        local,
                        remote,
                    }) => {
                        let http = match socket {
                            Socket::Tcp(tcp) => {
                                Box::pin(client::handshake(tcp, max_header)).await?
                            }
                            Socket::Unix(unix) => {
                                Box::pin(client::handshake(unix, max_header)).await?
                            }
                            Socket::Proxied(stream) => {
                                Box::pin(client::handshake(*stream, max_header)).await?
                            }
                        };
                        (http, None, local, remote)
                    }
                };
                Ok::<_, Error>((sender, connection, local, remote, info))
            });
            // Opening the connection (resolving, connecting, the TLS handshake) is bounded by
            // the agent's timeout, failing as a drop-in socket with nobody listening would; a
            // proxy's tunnel not open by then fails as Node's agent fails it.
            let established = match connect_timeout {
                Some(t) => tokio::time::timeout(t, established)
                    .await
                    .unwrap_or_else(|_| {
                        Err(match tunneled && !connected.load(Ordering::Relaxed) {
                            true => Error::proxy_tunnel_timeout(t),
                            false => Error::socket_timeout(t),
                        })
                    }),
                None => established.await,
            };
            match established {
                Ok((sender, connection, local, remote, info)) => {
                    // As Node's: the server of a new TLS session is checked by name before a
                    // byte of HTTP is read or written; not a resumed one (checked when it was
                    // made), nor one whose chain already failed (`rejectUnauthorized: false`).
                    let unchecked = info.as_ref().is_some_and(tls::TlsConfig::needs_name_check);
                    let (verify, verified) = match unchecked {
                        true => {
                            let (tx, rx) = tokio::sync::oneshot::channel();
                            (Some(tx), Some(rx))
                        }
                        false => (None, None),
                    };
                    inbox.post(Completion::HyperConnected {
                        pool,
                        conn: conn_id,
                        req: req_id,
                        result: Ok((local, remote, info.map(Box::new), verify)),
                    });
                    // A name that fails closes the connection (this task stops here).
                    if let Some(verified) = verified {
                        if verified.await.is_err() {
                            return;
                        }
                    }
                    connection.spawn(move || {
                        inbox.post(Completion::HyperClosed {
                            pool,
                            conn: conn_id,
                        })
                    });
                    client::exchange(sender, spec, ctl, sink).await;
                }
                Err(err) => inbox.post(Completion::HyperConnected {
                    pool,
                    conn: conn_id,
                    req: req_id,
                    result: Err(err),
                }),
            }
        });
        *req.abort.borrow_mut() = Some(Exchange::Task(task.abort_handle()));
    }

    /// A promise-path connect finished (on success the exchange is already running).
    pub fn hyper_connected(
        self: &Rc<Self>,
        conn_id: u32,
        req_id: u32,
        result: Result<HyperEstablished, Error>,
    ) {
        let Some(conn) = self.conn(conn_id) else {
            return;
        };
        match result {
            Ok((local, remote, info, verify)) => {
                conn.local.set(local);
                *conn.remote.borrow_mut() = Some(remote);
                *conn.tls.borrow_mut() = info;
                conn.state.set(State::Active);
                let Some(req) = self
                    .ctx
                    .request(req_id)
                    .filter(|req| req.conn.get() == conn_id)
                else {
                    // Nobody to check it for (its request ended meanwhile): it closes unused.
                    if verify.is_some() {
                        self.ctx.remove_conn(conn_id);
                        conn.close(self.ctx.env);
                        let grant = self.state.borrow_mut().pool.closed(conn.key);
                        self.notify_grants(grant.into_iter());
                    }
                    return;
                };
                self.ctx.arm_headers_deadline(&req);
                if let Some(verify) = verify {
                    self.verify_server(&req, &conn, verify);
                }
            }
            Err(err) => {
                self.ctx.remove_conn(conn_id);
                conn.close(self.ctx.env);
                // Not open within the agent's timeout: a timeout, as on the drop-in path.
                let grant = self
                    .state
                    .borrow_mut()
                    .pool
                    .connect_failed(conn.key, err.timed_out());
                if let Some(req) = self.ctx.request(req_id) {
                    req.conn.set(0);
                    let desc = js::error_descriptor(self.ctx.env, &err);
                    req.emit(kind::ERROR, &[desc]);
                    req.unhold();
                    req.emit(
                        kind::DONE,
                        &[
                            js::number(self.ctx.env, verdict::NONE),
                            js::number(self.ctx.env, 0.0),
                        ],
                    );
                    req.finish();
                }
                self.notify_grants(grant.into_iter());
            }
        }
    }

    /// Has JavaScript check the name of the server of `req`'s new TLS connection, as Node's
    /// `tls.connect` does after the handshake: its exchange starts if the name is right;
    /// otherwise JavaScript has failed the request with the check's error and closed the
    /// connection, which counts as a socket error and drops the server's cached sessions (as
    /// Node's https.Agent evicts them), so that the next connection is checked anew.
    fn verify_server(
        &self,
        req: &Rc<ReqState>,
        conn: &Conn,
        verify: tokio::sync::oneshot::Sender<()>,
    ) {
        let env = self.ctx.env;
        let info = conn
            .tls
            .borrow()
            .as_deref()
            .map_or_else(|| js::null(env), |info| js::tls_info(env, info));
        let verdict = req
            .emit(kind::VERIFY, &[info, js::number(env, req.key.0 as f64)])
            .and_then(|v| js::to_f64(env, v));
        if verdict == Some(name::RIGHT) {
            conn.with_tls(|config, info| config.name_verified(info));
        }
        if matches!(verdict, Some(v) if v == name::RIGHT || v == name::LET_PASS) {
            let _ = verify.send(());
            return;
        }
        self.state.borrow_mut().pool.stats.error_socket_count += 1;
        conn.with_tls(|config, info| config.forget_sessions(&info.server));
        // JavaScript fails the request with the check's error; had it not (it threw), the
        // request would wait for ever: it fails here.
        if self.ctx.request(req.id).is_some() {
            let err = Error::tls(
                "ERR_HYPERAGENT_INTERNAL",
                "the server's name could not be checked",
            );
            self.ctx.on_request_event(req.id, Event::Error(err));
            self.ctx.on_request_event(req.id, Event::Done(None));
        }
    }

    /// A new connection of `req` waits for the user's `lookup`: JavaScript runs it and answers
    /// through `lookupDone` (or fails the request, which closes the connection).
    pub fn hyper_lookup(
        self: &Rc<Self>,
        conn_id: u32,
        req_id: u32,
        reply: tokio::sync::oneshot::Sender<Vec<std::net::IpAddr>>,
    ) {
        let Some(conn) = self.conn(conn_id) else {
            return;
        };
        let Some(req) = self
            .ctx
            .request(req_id)
            .filter(|req| req.conn.get() == conn_id)
        else {
            return;
        };
        *conn.lookup.borrow_mut() = Some(reply);
        let env = self.ctx.env;
        req.emit(
            kind::LOOKUP,
            &[
                js::number(env, conn_id as f64),
                js::number(env, req.key.0 as f64),
            ],
        );
    }

    /// hyper's connection task ended (the server closed it, or it failed).
    pub fn hyper_closed(self: &Rc<Self>, conn_id: u32) {
        let Some(conn) = self.conn(conn_id) else {
            return;
        };
        if conn.state.get() == State::Idle {
            self.evict_idle(&conn);
        }
    }
}

impl EnvCtx {
    /// Starts the headers deadline of `req`, whose exchange just started, when this thread
    /// keeps its timeout.
    pub fn arm_headers_deadline(&self, req: &ReqState) {
        // A deadline past what an Instant holds never comes.
        if let Some(deadline) = req
            .headers_timeout
            .get()
            .and_then(|t| Instant::now().checked_add(t))
        {
            req.headers_deadline.set(Some(deadline));
            self.schedule_sweep();
        }
    }

    /// Fails the requests whose headers deadline passed before their response head came, as
    /// the exchange would at its own timeout; sweeps again while other deadlines run.
    pub fn sweep_headers_deadlines(&self) {
        let now = Instant::now();
        // Deadlines armed meanwhile (by code the failures run) schedule a sweep themselves.
        let mut running = false;
        for req in self.requests() {
            let Some(deadline) = req.headers_deadline.get() else {
                continue;
            };
            if req.headed.get() || req.retrying.borrow().is_some() {
                continue;
            }
            if deadline > now {
                running = true;
                continue;
            }
            req.headers_deadline.set(None);
            let t = req.headers_timeout.get().unwrap_or_default();
            super::debug::debug!("request {}: no response head within {t:?}", req.id);
            // Stopped where it is, as an abort stops it: its connection closes.
            if let Some(exchange) = req.abort.borrow_mut().take() {
                exchange.stop();
            }
            self.on_request_event(req.id, Event::Error(client::headers_timeout(t)));
            self.on_request_event(req.id, Event::Done(None));
        }
        if running {
            self.schedule_sweep();
        }
    }

    /// What the replay of `req` sends (taken: a request goes again once), and whether its body's
    /// writer waits for a drain; None when the replay is no longer possible. A streamed body's
    /// new writer takes the old one's place.
    fn replay_spec(&self, req: &ReqState) -> Option<(Spec, bool)> {
        let replay = req.replay.borrow_mut().take()?;
        let id = Arc::new(std::sync::atomic::AtomicU32::new(req.id));
        let resend = replay.resend(drain_to(&self.inbox, id))?;
        let drain = match resend.writer {
            Some(writer) => {
                let old = req.writer.borrow_mut().replace(writer);
                old.is_some_and(|w| w.is_waiting()) && !resend.ended
            }
            None => false,
        };
        Some((resend.spec, drain))
    }

    /// An event of request `req`'s exchange, on the JavaScript thread.
    pub fn on_request_event(&self, req_id: u32, event: Event) {
        let Some(req) = self.request(req_id) else {
            // Aborted meanwhile: a connection that comes back is not reused (the abort
            // already closed it), so there is nothing to do.
            return;
        };
        let env = self.env;
        match event {
            Event::Info { status, headers } => {
                // The server has the request: no replay will send it again (the exchange
                // fails as answered if the connection dies now), so a streamed body's
                // recording stops.
                if let Some(replay) = req.replay.borrow_mut().take() {
                    replay.drop_recording();
                }
                req.emit(
                    kind::INFO,
                    &[js::number(env, status as f64), header_string(env, &headers)],
                );
            }
            Event::Head {
                status,
                reason,
                headers,
                chunks,
                end,
                done,
            } => {
                req.headed.set(true);
                if let Some(replay) = req.replay.borrow_mut().take() {
                    replay.drop_recording();
                }
                req.hint.set(keep_alive_hint(&headers));
                let body = if chunks.is_empty() {
                    js::null(env)
                } else {
                    self.chunks.chunk_concat(&chunks)
                };
                let trailers = end
                    .as_ref()
                    .map_or_else(|| js::null(env), |t| header_string(env, t));
                let mut args = [
                    js::number(env, status as f64),
                    js::latin1(env, &reason),
                    header_string(env, &headers),
                    body,
                    trailers,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                ];
                // The exchange ended with its head: the connection is settled first, so that
                // code the response's end runs finds it back in the pool.
                let finished = done.map(|sender| self.settle(&req, sender));
                let given = match finished {
                    Some((conn_id, verdict)) => {
                        args[5] = js::number(env, verdict);
                        args[6] = js::number(env, conn_id as f64);
                        7
                    }
                    None => 5,
                };
                req.emit(kind::HEAD, &args[..given]);
                if finished.is_some() {
                    req.finish();
                }
            }
            Event::Data(chunks) => {
                req.emit(kind::DATA, &[self.chunks.chunk_concat(&chunks)]);
            }
            Event::End(trailers) => {
                req.emit(kind::END, &[header_string(env, &trailers)]);
            }
            Event::Error(err) => {
                self.count_failure(&req, &err);
                let desc = js::error_descriptor(env, &err);
                req.emit(kind::ERROR, &[desc]);
            }
            Event::Unsent(err) => {
                self.count_failure(&req, &err);
                // The keep-alive race: a reused connection died before answering. An
                // idempotent request is sent once more, on a fresh connection (RFC 9110
                // §9.2.2); anything else fails, saying whether it went out.
                let possible = req.replay.borrow().as_ref().is_some_and(Replay::possible);
                if crate::replay::replays_after_race(req.reused.get(), possible) {
                    *req.retrying.borrow_mut() = Some(err);
                } else {
                    let desc = js::error_descriptor(env, &err);
                    req.emit(kind::ERROR, &[desc]);
                }
            }
            Event::BodyDrain => {
                req.emit(kind::DRAIN, &[]);
            }
            Event::Answered => {
                req.emit(kind::ANSWERED, &[]);
            }
            Event::Done(sender) if req.retrying.borrow().is_some() => {
                let err = req.retrying.borrow_mut().take();
                match self.replay_spec(&req) {
                    Some((spec, drain)) => {
                        super::debug::debug!("replay request {} on a new connection", req.id);
                        req.unhold();
                        let pool = req.pool();
                        pool.retire(req.conn.get());
                        pool.state.borrow_mut().pool.stats.replay_count += 1;
                        *req.spec.borrow_mut() = Some(spec);
                        pool.connect_for(&req);
                        // A writer held back while the connection was lost goes on, into the
                        // new connection's body.
                        if drain {
                            req.emit(kind::DRAIN, &[]);
                        }
                    }
                    // The streamed body outgrew what a replay keeps meanwhile: the request
                    // fails as it would have without one.
                    None => {
                        if let Some(err) = err {
                            req.emit(kind::ERROR, &[js::error_descriptor(env, &err)]);
                        }
                        self.on_request_event(req.id, Event::Done(sender));
                    }
                }
            }
            Event::Done(sender) => {
                let (conn_id, verdict) = self.settle(&req, sender);
                req.emit(
                    kind::DONE,
                    &[js::number(env, verdict), js::number(env, conn_id as f64)],
                );
                req.finish();
            }
        }
    }

    /// Counts a failure of the established connection of `req` (see `Stats::count_failure`).
    fn count_failure(&self, req: &ReqState, err: &Error) {
        let established = self
            .conn(req.conn.get())
            .is_some_and(|c| c.state.get() == State::Active);
        if !established {
            return;
        }
        req.pool.state.borrow_mut().pool.stats.count_failure(err);
    }

    /// The exchange of `req` is over: its connection goes back to the pool (with `sender`, if
    /// hyper keeps it open) or closes, by the agent's rules. Returns the connection and the
    /// pool's verdict (a waiter the JavaScript side serves, when not negative).
    fn settle(&self, req: &Rc<ReqState>, sender: Option<client::Sender>) -> (u32, f64) {
        // The exchange is over: stopping it now would stop what its connection runs next.
        req.abort.borrow_mut().take();
        req.unhold();
        req.writer.borrow_mut().take();
        // The connection is the pool's again: an abort from now on does not close it.
        let conn_id = req.conn.replace(0);
        let Some(conn) = self.conn(conn_id) else {
            return (conn_id, verdict::NONE);
        };
        let pool = req.pool();
        let sender = match sender {
            Some(sender) if conn.state.get() == State::Active => sender,
            _ => return (conn_id, pool.close(conn_id)),
        };
        conn.keep_sender(sender);
        let policy = pool.policy.get();
        let idle = policy.idle_for(None, req.hint.get());
        let verdict = match policy.settle(conn.created.elapsed(), idle) {
            crate::pool::Fate::Close => pool.close(conn_id),
            // A waiting `agent.request()` takes it here (`route`).
            crate::pool::Fate::Release(idle) => pool.release(conn_id, idle),
        };
        (conn_id, verdict)
    }
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
    let conn_id = req.conn.replace(0);
    let pool = req.pool.clone();
    // Its place in the queue, if it still waits.
    if let Some(w) = req.waiter.take() {
        pool.promise_waiters.borrow_mut().remove(&w);
        pool.cancel(w);
    }
    let in_flight = conn_id != 0;
    req.unhold();
    req.finish();
    if in_flight {
        pool.close(conn_id)
    } else {
        verdict::NONE
    }
}

/// Bytes of a streamed request body.
pub fn body_chunk(data: &[u8]) -> Bytes {
    crate::client::recycle::copy(data)
}
