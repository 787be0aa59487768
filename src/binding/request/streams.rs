//! `agent.request()` over HTTP/2: routing a request to a stream of a session, to a wait for
//! one, or to the pool's checkout, as `pool::multiplex` decides; starting an exchange on a
//! stream; what a session's opening, its streams' ends and its close do for the requests that
//! wait.

use std::rc::Rc;
use std::time::Instant;

use super::{open, Exchange, ReqState};
use crate::binding::js;
use crate::binding::pool::PoolCell;
use crate::binding::protocol::{kind, verdict};
use crate::client::{self, Event};
use crate::error::Error;
use crate::pool::multiplex::{Idleness, Route};
use crate::pool::{moves, KeyId};
use crate::runtime::runtime;

/// Sends `req` (its exchange not started) where the pool's sessions say: a stream now, a wait
/// for one (or for the connection being set up), or the pool's checkout.
pub fn route(pool: &Rc<PoolCell>, req: &Rc<ReqState>) {
    if pool.http2.get() {
        let routed = pool
            .sessions
            .borrow_mut()
            .route(req.key, u64::from(req.id), |c| room(pool, c));
        match routed {
            Route::Stream(conn) => return stream_on(pool, req, conn),
            Route::Wait => return req.stream_wait.set(true),
            Route::Checkout => {}
        }
    }
    open::checkout(pool, req);
}

/// How many streams session `conn` takes at once: as its server's settings say, none once it
/// is past `socketActiveTTL` (it idles out once its own streams are done).
fn room(pool: &PoolCell, conn: u32) -> usize {
    let policy = pool.policy.get();
    pool.conn(conn).map_or(0, |c| {
        policy.session_room(c.created.elapsed(), c.max_streams())
    })
}

/// Whether `req` runs on a stream of an HTTP/2 session (which may have closed since).
pub fn on_session(req: &ReqState) -> bool {
    req.on_stream.get()
}

/// Starts the exchange of `req` on a new stream of session `conn_id` (counted already), in a
/// task of its own: aborting the task resets only its stream.
pub fn stream_on(pool: &Rc<PoolCell>, req: &Rc<ReqState>, conn_id: u32) {
    req.stream_wait.set(false);
    let Some((spec, sink)) = req.begin_on(conn_id) else {
        return;
    };
    req.on_stream.set(true);
    let Some(sender) = pool.conn(conn_id).and_then(|c| c.stream()) else {
        // Closed since it was counted: the request was not sent, and goes elsewhere.
        sink.post(Event::Refused(Error::tls("ECONNRESET", "socket hang up")));
        sink.post(Event::Done(None));
        return;
    };
    let task = runtime().spawn(client::exchange(sender, spec, req.ctl.clone(), sink));
    *req.abort.borrow_mut() = Some(Exchange::Task(task.abort_handle()));
    super::events::arm_headers_deadline(&pool.ctx, req);
}

/// A stream of session `conn_id` ended: a waiting request takes its place. A session left
/// with no stream closes if it takes no more (GOAWAY), or idles until the pool's timer.
pub fn stream_done(pool: &Rc<PoolCell>, key: KeyId, conn_id: u32) {
    // Bounded: each turn takes a waiter off the queue.
    loop {
        let next = pool
            .sessions
            .borrow_mut()
            .stream_done(key, conn_id, Instant::now());
        let Some(next) = next else { break };
        // A waiter that is gone gives its stream back (the next turn).
        if let Some(req) = waiter(pool, next) {
            return stream_on(pool, &req, conn_id);
        }
    }
    // Only a session left with no stream has anything to close or to time.
    let idleness = pool.sessions.borrow().idleness(key, conn_id);
    match idleness {
        Some(Idleness::Spent) => {
            session_closed(pool, key, conn_id);
        }
        Some(Idleness::Idle) => pool.expire_sessions(),
        None => {}
    }
}

/// The connect of `conn_id` came up speaking HTTP/2: the requests that waited for it take
/// streams on it, as it has room.
pub fn session_opened(pool: &Rc<PoolCell>, key: KeyId, conn_id: u32) {
    let opened = pool
        .sessions
        .borrow_mut()
        .opened(key, conn_id, |c| room(pool, c));
    for id in opened.streams {
        match waiter(pool, id) {
            Some(req) => stream_on(pool, &req, conn_id),
            None => stream_done(pool, key, conn_id),
        }
    }
    if let Some(req) = opened.checkout.and_then(|id| waiter(pool, id)) {
        route(pool, &req);
    }
}

/// The connect of `key` came up speaking HTTP/1.1: the requests that waited for it go on as
/// HTTP/1.1 requests do.
pub fn session_refused(pool: &Rc<PoolCell>, key: KeyId) {
    let waiting = pool.sessions.borrow_mut().plain(key);
    reroute(pool, waiting);
}

/// The connect of `key` ended without a connection (closed first: aborted, or its server's
/// name refused): the requests that waited for it are routed again.
pub fn connect_abandoned(pool: &Rc<PoolCell>, key: KeyId) {
    let waiting = pool.sessions.borrow_mut().connect_failed(key);
    reroute(pool, waiting);
}

/// The connect of `key` failed with `err`: the requests that waited for it fail with it too,
/// unless another connect or session may serve them.
pub fn connect_failed(pool: &Rc<PoolCell>, key: KeyId, err: &Error) {
    let waiting = pool.sessions.borrow_mut().connect_failed(key);
    let env = pool.ctx.env;
    for req in waiting.into_iter().filter_map(|id| waiter(pool, id)) {
        req.emit(kind::ERROR, &[js::error_descriptor(env, err)]);
        req.unhold();
        req.emit(
            kind::DONE,
            &[js::number(env, verdict::NONE), js::number(env, 0.0)],
        );
        req.finish();
    }
}

/// Session `conn_id` ended (its server closed it, or it failed): its slot goes back to the pool
/// and the requests that waited for its streams are routed again. Its streams in flight fail
/// with their exchanges. False if it was not a session.
pub fn session_closed(pool: &Rc<PoolCell>, key: KeyId, conn_id: u32) -> bool {
    if !pool.sessions.borrow().is_session(key, conn_id) {
        return false;
    }
    let waiting = pool.sessions.borrow_mut().closed(key, conn_id);
    let grant = moves::closed_in_use(pool, conn_id);
    pool.notify_grants(grant);
    reroute(pool, waiting);
    true
}

/// Session `conn_id` takes no new streams (its server refused one, or sent GOAWAY): its
/// streams in flight go on; it closes once they are done, or when its server closes it.
pub fn session_draining(pool: &Rc<PoolCell>, key: KeyId, conn_id: u32) {
    pool.sessions.borrow_mut().close_gracefully(key, conn_id);
}

fn reroute(pool: &Rc<PoolCell>, waiting: Vec<u64>) {
    for req in waiting.into_iter().filter_map(|id| waiter(pool, id)) {
        route(pool, &req);
    }
}

/// Request `id` of this pool, if it still waits for a stream (no longer waiting, as it is
/// routed now).
fn waiter(pool: &PoolCell, id: u64) -> Option<Rc<ReqState>> {
    let req = super::by_id(u32::try_from(id).ok()?).filter(|r| r.pool.id == pool.id)?;
    req.stream_wait.replace(false).then_some(req)
}
