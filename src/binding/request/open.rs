//! The mechanics of an `agent.request()` on tokio: its start, its exchange run on an idle
//! connection, on a new connection with the connect, or on a stream of a session; the user's
//! `lookup` asked for a new connection; the views `agent.destroy()` takes of a pool's requests.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use napi::sys;

use super::{pool_of, sink_of, JsFace, JsSide, ReqState};
use crate::binding::conn::{Mode, State};
use crate::binding::inbox::{post_keys, Completion, Inbox};
use crate::binding::js::{self, AsyncContext, Ref};
use crate::binding::pool::PoolCell;
use crate::binding::protocol::kind;
use crate::binding::registry::Registry;
use crate::client::driver::{self, Exchange, Request};
use crate::client::open::{Facts, Open, Progress};
use crate::client::plan::Plan;
use crate::client::{self, Control, Event, Sink};
use crate::error::Error;
use crate::pool::origins::Destination;
use crate::pool::place::Place;
use crate::pool::{ConnEnd, KeyId};
use crate::runtime::spawn_soon;
use crate::transport::establish::Secure;

/// Starts `agent.request()`: a connection of the promise path now, a new one, or a place
/// in the queue (see `driver::route`).
pub fn start(
    pool: &Rc<PoolCell>,
    key: KeyId,
    js_side: JsSide,
    plan: Plan,
    ctl: Arc<Control>,
) -> Rc<ReqState> {
    let env = pool.ctx.env;
    let face = JsFace {
        pool: pool.clone(),
        // SAFETY (both): js invariant 1: the handle object and the context's name are
        // arguments of the current `request` call, so the context captured is this call's;
        // `Request::finish` releases them once, through `JsFace::release` (js invariant 2). Tests:
        // __test__/context.test.js "promise and stream events run in the context of the
        // request() call"; __test__/safety.test.js "an end reached twice ends once: aborts
        // and destroys from inside listeners, in every order".
        handle: unsafe { Ref::new(env, js_side.handle, 1) },
        ctx: unsafe { AsyncContext::named_by(env, js_side.handle, js_side.context_name) },
        hold: RefCell::new(None),
        tells_sending: js_side.tells_sending,
    };
    let id = super::REQUESTS.with(Registry::next_id);
    let req = Rc::new(Request::new(id, key, face, ctl, plan));
    super::REQUESTS.with(|t| t.insert(req.id, req.clone()));
    driver::route(pool, &req);
    req
}

/// The JavaScript handles of this pool's `agent.request()`s waiting in its queue, for
/// `agent.destroy()` to fail.
pub fn requests_queued(pool: &PoolCell) -> Vec<sys::napi_value> {
    let env = pool.ctx.env;
    super::all()
        .into_iter()
        .filter(|r| pool_of(r).id == pool.id && r.place().waiting())
        .map(|r| r.face.handle.get(env))
        .collect()
}

/// `agent.destroy()`: the JavaScript handles of this pool's `agent.request()`s that are on
/// a connection (or connecting), for JavaScript to abort, which closes their connections
/// as the drop-in path's sockets are destroyed.
pub fn requests_in_flight(pool: &PoolCell) -> Vec<sys::napi_value> {
    let env = pool.ctx.env;
    super::all()
        .into_iter()
        .filter(|r| pool_of(r).id == pool.id && r.place().conn().is_some())
        .map(|r| r.face.handle.get(env))
        .collect()
}

/// The keys of this pool's `agent.request()`s in flight or queued.
pub fn request_keys(pool: &PoolCell) -> Vec<KeyId> {
    super::all()
        .into_iter()
        .filter(|r| pool_of(r).id == pool.id)
        .map(|r| r.key)
        .collect()
}

/// Sends a request on an idle connection of the promise path.
pub fn dispatch(pool: &Rc<PoolCell>, req: &Rc<ReqState>, conn_id: u32) {
    let Some(conn) = pool.conn(conn_id) else {
        return;
    };
    let sender = conn.take_sender();
    let Some(spec) = req.begin(Place::Conn(conn_id)) else {
        return;
    };
    let sink = sink_of(req);
    conn.course.set_state(State::Active);
    let ctl = req.ctl.clone();
    let running = match sender {
        // The stopper is one for the connection, shared by the requests it serves: no count
        // of the connection's shared state to change on each request.
        Some((sender, stopper)) => {
            match sender.start(spec, ctl, sink) {
                // In the connection's task, which boxes the exchange on tokio's thread.
                Ok(()) => Exchange::InConnection(stopper),
                // The connection's task has ended since: the exchange finds it closed.
                Err(queued) => {
                    Exchange::Task(spawn_soon(Box::pin(async move { queued.start().await })))
                }
            }
        }
        None => {
            // Closed since the checkout looked: the exchange reports a hang-up.
            sink.post(Event::Error(Error::tls("ECONNRESET", "socket hang up")));
            sink.post(Event::Done(None));
            return;
        }
    };
    req.runs(running);
    req.arm(pool);
}

/// Connects `req`'s new promise-path connection `conn_id` and runs the exchange of `spec` on
/// it in the same task (see `driver::Lanes::run_connect`). The headers timeout starts with the
/// exchange, once connected (`driver::connected`).
pub fn run_connect(pool: &Rc<PoolCell>, req: &Rc<ReqState>, conn_id: u32, spec: client::Spec) {
    crate::binding::debug::debug!("request {}: create connection {}", req.id, conn_id);
    if let Some(conn) = pool.conn(conn_id) {
        conn.course.set_mode(Mode::Promise);
    }
    let http2 = pool.http2.get();
    let destination = pool.origins.borrow().destination(req.key).cloned();
    let Some(Destination {
        target,
        identity,
        js_lookup,
    }) = destination
    else {
        let sink = sink_of(req);
        sink.post(Event::Error(Error::tls(
            "ERR_HYPERAGENT_INTERNAL",
            "no connect target for this origin",
        )));
        sink.post(Event::Done(None));
        return;
    };
    let opts = pool.state.borrow().connect_opts;
    let tls = pool.tls_config(req.key);
    let keylog = pool.keylog.clone();
    let inbox = pool.ctx.inbox.clone();
    let (pool_id, req_id) = (pool.id, req.id);
    let ctl = req.ctl.clone();
    let max_header_size = pool.max_header_size.get();
    let timeout = pool.connect_timeout.get();
    let task = spawn_soon(Box::pin(async move {
        let sink: Arc<dyn Sink> = Arc::new(super::ReqSink {
            inbox: inbox.clone(),
            req: req_id,
        });
        // The user's `lookup` resolves the host, in JavaScript, as on the drop-in path;
        // should it fail, JavaScript fails the request and closes this connection.
        let lookup = js_lookup.then(|| {
            let inbox = inbox.clone();
            async move {
                let (reply, resolved) = tokio::sync::oneshot::channel();
                inbox.post(Completion::HyperLookup {
                    pool: pool_id,
                    conn: conn_id,
                    req: req_id,
                    reply,
                });
                resolved
                    .await
                    .map_err(|_| Error::tls("ERR_HYPERAGENT_INTERNAL", "the lookup gave no answer"))
            }
        });
        let secure = tls.as_deref().map(|config| Secure {
            config,
            servername: identity.servername.as_deref(),
            node_name_check: identity.node_check,
            keylog,
            offer_h2: http2,
        });
        let on_keys = |lines| post_keys(&inbox, pool_id, conn_id, lines);
        let to = Open {
            target,
            opts,
            secure,
            http2,
            max_header_size,
            timeout,
        };
        let progress = Arc::new(Told {
            inbox: inbox.clone(),
            pool: pool_id,
            conn: conn_id,
            req: req_id,
        });
        // Boxed: made here on tokio's thread, while the spawned future, which the JavaScript
        // thread allocates for every connection, stays small.
        Box::pin(client::open::open_and_exchange(
            to, lookup, on_keys, spec, ctl, sink, progress,
        ))
        .await;
    }));
    req.runs(Exchange::Task(task));
}

/// What a new promise-path connection tells this thread, through its inbox.
struct Told {
    inbox: Arc<Inbox>,
    pool: u32,
    conn: u32,
    req: u32,
}

impl Progress for Told {
    fn opened(&self, result: Result<Facts, Error>) {
        self.inbox.post(Completion::HyperConnected {
            pool: self.pool,
            conn: self.conn,
            req: self.req,
            result,
        });
    }

    fn closed(&self, end: ConnEnd) {
        self.inbox.post(Completion::HyperClosed {
            pool: self.pool,
            conn: self.conn,
            end,
        });
    }
}

/// A new connection of `req` waits for the user's `lookup`: JavaScript runs it and answers
/// through `lookupDone` (or fails the request, which closes the connection).
pub fn hyper_lookup(
    pool: &Rc<PoolCell>,
    conn_id: u32,
    req_id: u32,
    reply: tokio::sync::oneshot::Sender<Vec<std::net::IpAddr>>,
) {
    let Some(conn) = pool.conn(conn_id) else {
        return;
    };
    let Some(req) = super::by_id(req_id).filter(|req| req.place().conn() == Some(conn_id)) else {
        return;
    };
    *conn.lookup.borrow_mut() = Some(reply);
    let env = pool.ctx.env;
    if let Some(face) = req.face() {
        face.emit(
            kind::LOOKUP,
            &[
                js::number(env, conn_id as f64),
                js::number(env, req.key.0 as f64),
            ],
        );
    }
}

/// hyper's connection task ended (the server closed it, or it failed, as `end` says).
pub fn hyper_closed(pool: &Rc<PoolCell>, conn_id: u32, end: ConnEnd) {
    if let Some(conn) = pool.conn(conn_id) {
        let idle = conn.course.state() == State::Idle;
        if idle {
            // Its end is told as the server's doing (see `PoolCell::evict_idle`).
            conn.end_told
                .set(crate::binding::protocol::connection::DISCONNECT_OTHER_SIDE);
        }
        driver::closed(pool, conn_id, idle, end);
    }
}

/// Starts the exchange of `req` on a new stream of session `conn_id` (counted already), in a
/// task of its own: aborting the task resets only its stream.
pub fn stream_on(pool: &Rc<PoolCell>, req: &Rc<ReqState>, conn_id: u32) {
    let Some(spec) = req.begin(Place::Stream(conn_id)) else {
        return;
    };
    let sink = sink_of(req);
    let Some(sender) = pool.conn(conn_id).and_then(|c| c.stream()) else {
        // Closed since it was counted: the request was not sent, and goes elsewhere.
        sink.post(Event::Refused(Error::tls("ECONNRESET", "socket hang up")));
        sink.post(Event::Done(None));
        return;
    };
    let task = spawn_soon(client::exchange(sender, spec, req.ctl.clone(), sink));
    req.runs(Exchange::Task(task));
    req.arm(pool);
}
