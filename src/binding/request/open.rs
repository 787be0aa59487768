//! Opening the way for an `agent.request()`: the checkout that gives it a connection of the
//! promise path, a new connection or a place in the queue; the dispatch of its exchange on a
//! connection; a new connection's connect, its TLS server check and the user's `lookup`.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use napi::sys;

use super::{pool_of, sink_of, JsFace, JsSide, ReqState};
use crate::binding::conn::{Conn, Mode, State};
use crate::binding::inbox::{post_keys, Completion, Inbox};
use crate::binding::js::{self, AsyncContext, Ref};
use crate::binding::pool::PoolCell;
use crate::binding::protocol::{connection, kind, name};
use crate::binding::registry::Registry;
use crate::client::driver::{Exchange, Request};
use crate::client::open::{Facts, Open, Progress};
use crate::client::plan::Plan;
use crate::client::{self, Control, Event, Sink};
use crate::error::Error;
use crate::pool::origins::Destination;
use crate::pool::place::Place;
use crate::pool::{moves, Checkout, KeyId, Waiter, WaiterId};
use crate::runtime::runtime;
use crate::transport::establish::Secure;

/// Starts `agent.request()`: a connection of the promise path now, a new one, or a place
/// in the queue (served by [`PoolCell::route`]).
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
        // `finish` deletes and destroys them once (js invariant 2). Tests:
        // __test__/context.test.js "promise and stream events run in the context of the
        // request() call"; __test__/safety.test.js "an end reached twice ends once: aborts
        // and destroys from inside listeners, in every order".
        handle: unsafe { Ref::new(env, js_side.handle, 1) },
        ctx: unsafe { AsyncContext::named_by(env, js_side.handle, js_side.context_name) },
        hold: RefCell::new(None),
    };
    let id = super::REQUESTS.with(Registry::next_id);
    let req = Rc::new(Request::new(id, key, face, ctl, plan));
    super::REQUESTS.with(|t| t.insert(req.id, req.clone()));
    super::streams::route(pool, &req);
    req
}

/// The pool's checkout for `req`: an idle connection of the promise path, a new one, or a place
/// in the pool's queue (or, when the key has HTTP/2 sessions, a wait for a stream on one).
pub(super) fn checkout(pool: &Rc<PoolCell>, req: &Rc<ReqState>) {
    let key = req.key;
    match moves::checkout(pool, key, Waiter::Promise(req.id)) {
        Checkout::Reuse(conn) => dispatch(pool, req, conn),
        Checkout::Connect => connect_for(pool, req),
        // A full HTTP/2 session frees a stream sooner than the pool frees a slot.
        Checkout::Queued(WaiterId(w))
            if pool.http2.get() && pool.sessions.borrow_mut().wait(key, u64::from(req.id)) =>
        {
            pool.cancel(w);
            req.set_place(Place::StreamWait);
        }
        Checkout::Queued(w) => req.set_place(Place::Queued(w)),
    }
}

/// Serves `req`, which waited, with what the pool gave it: connection `handoff` (of its
/// path), or a slot for a new connection.
fn serve_promise(pool: &Rc<PoolCell>, req: &Rc<ReqState>, handoff: Option<u32>) {
    req.set_place(Place::Nowhere);
    match handoff.and_then(|id| pool.conn(id)) {
        Some(conn) => dispatch(pool, req, conn.id),
        None => connect_for(pool, req),
    }
}

/// Serves waiting `agent.request()` `req_id` with what the pool gave it (see
/// [`PoolCell::serve`]'s field); false when the request is gone.
pub fn serve_waiting(pool: &Rc<PoolCell>, req_id: u32, handoff: Option<u32>) -> bool {
    match super::by_id(req_id) {
        Some(req) => {
            serve_promise(pool, &req, handoff);
            true
        }
        None => false,
    }
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
    req.runs(running);
    req.arm(pool);
}

/// Opens a new promise-path connection for `req` (its slot is already counted) and runs
/// the exchange on it in the same task.
pub fn connect_for(pool: &Rc<PoolCell>, req: &Rc<ReqState>) {
    // The headers timeout starts with the exchange, once connected (`hyper_connected`).
    let Some(spec) = req.connecting(pool.http2.get()) else {
        return;
    };
    let conn: Rc<Conn> = pool.new_conn(req.key);
    crate::binding::debug::debug!("request {}: create connection {}", req.id, conn.id);
    conn.course.set_mode(Mode::Promise);
    // One that may speak HTTP/2: its key's next requests wait for it (`streams::route`).
    let http2 = pool.http2.get();
    if http2 {
        conn.h2_pending.set(true);
        pool.sessions.borrow_mut().connecting(req.key);
    }
    req.connects(conn.id);
    let destination = pool.origins.borrow().destination(req.key).cloned();
    let Some(Destination {
        target,
        servername,
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
    let (pool_id, conn_id, req_id) = (pool.id, conn.id, req.id);
    let ctl = req.ctl.clone();
    let max_header_size = pool.max_header_size.get();
    let timeout = pool.connect_timeout.get();
    let task = runtime().spawn(async move {
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
            servername: servername.as_deref(),
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
    });
    req.runs(Exchange::Task(task.abort_handle()));
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

    fn closed(&self) {
        self.inbox.post(Completion::HyperClosed {
            pool: self.pool,
            conn: self.conn,
        });
    }
}

/// A promise-path connect finished (on success the exchange runs, or waits for the server's
/// name to be checked here).
pub fn hyper_connected(
    pool: &Rc<PoolCell>,
    conn_id: u32,
    req_id: u32,
    result: Result<Facts, Error>,
) {
    let Some(conn) = pool.conn(conn_id) else {
        return;
    };
    match result {
        Ok(Facts {
            local,
            remote,
            tls,
            verify,
            session,
        }) => {
            conn.local.set(local);
            *conn.remote.borrow_mut() = Some(remote);
            *conn.tls.borrow_mut() = tls;
            conn.course.set_state(State::Active);
            let Some(req) = super::by_id(req_id).filter(|req| req.place().conn() == Some(conn_id))
            else {
                // Nobody to check it for (its request ended meanwhile): it closes unused.
                if verify.is_some() {
                    let grant = moves::closed_in_use(pool, conn_id);
                    pool.notify_grants(grant);
                    if conn.h2_pending.take() {
                        super::streams::connect_abandoned(pool, conn.key);
                    }
                } else if conn.h2_pending.take() {
                    match session {
                        // Its streams serve the requests that waited for it.
                        Some(session) => {
                            conn.make_session(session);
                            super::streams::session_opened(pool, conn.key, conn_id);
                            super::streams::stream_done(pool, conn.key, conn_id);
                        }
                        None => super::streams::session_refused(pool, conn.key),
                    }
                }
                return;
            };
            req.arm(pool);
            if let Some(verify) = verify {
                verify_server(pool, &req, &conn, verify);
            }
            // Open, its server's name checked: watchers hear of it (and will of its end).
            if pool.conn(conn_id).is_some() && pool.watch_connections.get() {
                conn.announced.set(true);
                pool.post_connection(connection::CONNECT, conn.key, None);
            }
            if !conn.h2_pending.take() {
                return;
            }
            // A name that failed closed the connection.
            let open = pool.conn(conn_id).is_some();
            match session {
                Some(session) if open => {
                    conn.make_session(session);
                    req.set_place(Place::Stream(conn_id));
                    super::streams::session_opened(pool, conn.key, conn_id);
                }
                Some(_) => super::streams::connect_abandoned(pool, conn.key),
                None => super::streams::session_refused(pool, conn.key),
            }
        }
        Err(err) => {
            pool.remove_conn(conn_id);
            conn.close(pool.ctx.env);
            pool.post_connection(connection::CONNECTION_ERROR, conn.key, Some(err.clone()));
            if conn.h2_pending.take() {
                super::streams::connect_failed(pool, conn.key, &err);
            }
            // Not open within the agent's timeout: a timeout, as on the drop-in path.
            let grant = pool
                .state
                .borrow_mut()
                .pool
                .connect_failed(conn.key, err.timed_out());
            if let Some(req) = super::by_id(req_id) {
                req.set_place(Place::Nowhere);
                req.fail(&err);
            }
            pool.notify_grants(grant);
        }
    }
}

/// Has JavaScript check the name of the server of `req`'s new TLS connection, as Node's
/// `tls.connect` does after the handshake: its exchange starts if the name is right;
/// otherwise JavaScript has failed the request with the check's error and closed the
/// connection, which counts as a socket error and drops the server's cached sessions (as
/// Node's https.Agent evicts them), so that the next connection is checked anew.
pub(super) fn verify_server(
    pool: &PoolCell,
    req: &Rc<ReqState>,
    conn: &Conn,
    verify: tokio::sync::oneshot::Sender<()>,
) {
    let env = pool.ctx.env;
    let info = conn
        .tls
        .borrow()
        .as_deref()
        .map_or_else(|| js::null(env), |info| js::tls_info(env, info));
    let answer = req
        .face()
        .and_then(|face| face.emit(kind::VERIFY, &[info, js::number(env, req.key.0 as f64)]))
        .and_then(|v| js::to_f64(env, v));
    let check = name::check(answer);
    conn.with_tls(|config, info| config.name_checked(info, check));
    if check.goes_on() {
        let _ = verify.send(());
        return;
    }
    pool.state.borrow_mut().pool.stats.error_socket_count += 1;
    // JavaScript fails the request with the check's error; had it not (it threw), the
    // request would wait for ever: it fails here.
    if super::by_id(req.id).is_some() {
        let err = Error::tls(
            "ERR_HYPERAGENT_INTERNAL",
            "the server's name could not be checked",
        );
        super::events::on_request_event(req.id, Event::Error(err));
        super::events::on_request_event(req.id, Event::Done(None));
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

/// hyper's connection task ended (the server closed it, or it failed).
pub fn hyper_closed(pool: &Rc<PoolCell>, conn_id: u32) {
    let Some(conn) = pool.conn(conn_id) else {
        return;
    };
    if super::streams::session_closed(pool, conn.key, conn_id) {
        return;
    }
    if conn.course.state() == State::Idle {
        pool.evict_idle(&conn);
    }
}
