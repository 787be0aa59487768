//! `agent.request()` over HTTP/2 on the JavaScript thread: the requests of a pool as
//! `crate::pool::streams` moves them (routed to a stream, a wait or the checkout; served,
//! routed again or failed as sessions open, free streams and close), and the start of an
//! exchange on a stream.

use std::rc::Rc;
use std::time::Instant;

use super::{open, pool_of, sink_of, ReqState};
use crate::binding::pool::PoolCell;
use crate::client::driver::Exchange;
use crate::client::{self, Event};
use crate::error::Error;
use crate::pool::multiplex::Sessions;
use crate::pool::place::Place;
use crate::pool::streams::{self as moves, Waiting};
use crate::pool::KeyId;
use crate::runtime::runtime;

/// A pool's requests and sessions, for `crate::pool::streams`.
struct Requests<'a>(&'a Rc<PoolCell>);

impl Requests<'_> {
    /// Request `id` of this pool, while it is in flight or queued.
    fn get(&self, id: u64) -> Option<Rc<ReqState>> {
        super::by_id(u32::try_from(id).ok()?).filter(|r| pool_of(r).id == self.0.id)
    }
}

impl Waiting for Requests<'_> {
    fn sessions(&self) -> std::cell::RefMut<'_, Sessions<u32>> {
        self.0.sessions.borrow_mut()
    }

    /// As its server's settings say; none once it is past `socketActiveTTL` (it idles out once
    /// its own streams are done).
    fn room(&self, conn: u32) -> usize {
        let policy = self.0.policy.get();
        self.0.conn(conn).map_or(0, |c| {
            policy.session_room(c.created.elapsed(), c.max_streams())
        })
    }

    fn claim(&self, req: u64) -> bool {
        let Some(req) = self.get(req) else {
            return false;
        };
        let waits = req.place() == Place::StreamWait;
        if waits {
            req.set_place(Place::Nowhere);
        }
        waits
    }

    fn wait(&self, req: u64) {
        if let Some(req) = self.get(req) {
            req.set_place(Place::StreamWait);
        }
    }

    fn stream_on(&self, req: u64, conn: u32) {
        if let Some(req) = self.get(req) {
            stream_on(self.0, &req, conn);
        }
    }

    fn checkout(&self, req: u64) {
        if let Some(req) = self.get(req) {
            open::checkout(self.0, &req);
        }
    }

    fn fail(&self, req: u64, err: &Error) {
        if let Some(req) = self.get(req) {
            req.fail(err);
        }
    }

    fn close_session(&self, conn: u32) {
        let grant = crate::pool::moves::closed_in_use(self.0, conn);
        self.0.notify_grants(grant);
    }

    fn idles(&self, _conn: u32) {
        self.0.expire_sessions();
    }
}

/// Sends `req` (its exchange not started) where the pool's sessions say: a stream now, a wait
/// for one (or for the connection being set up), or the pool's checkout.
pub fn route(pool: &Rc<PoolCell>, req: &Rc<ReqState>) {
    if pool.http2.get() {
        moves::route(&Requests(pool), req.key, u64::from(req.id));
    } else {
        open::checkout(pool, req);
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
    let task = runtime().spawn(client::exchange(sender, spec, req.ctl.clone(), sink));
    req.runs(Exchange::Task(task.abort_handle()));
    req.arm(pool);
}

/// A stream of session `conn_id` ended: a waiting request takes its place, or the session
/// closes or idles (see `crate::pool::streams::stream_done`).
pub fn stream_done(pool: &Rc<PoolCell>, key: KeyId, conn_id: u32) {
    moves::stream_done(&Requests(pool), key, conn_id, Instant::now());
}

/// The connect of `conn_id` came up speaking HTTP/2: the requests that waited for it take
/// streams on it.
pub fn session_opened(pool: &Rc<PoolCell>, key: KeyId, conn_id: u32) {
    moves::session_opened(&Requests(pool), key, conn_id, Instant::now());
}

/// The connect of `key` came up speaking HTTP/1.1: the requests that waited for it go on as
/// HTTP/1.1 requests do.
pub fn session_refused(pool: &Rc<PoolCell>, key: KeyId) {
    moves::session_refused(&Requests(pool), key);
}

/// The connect of `key` ended without a connection: the requests that waited for it are
/// routed again.
pub fn connect_abandoned(pool: &Rc<PoolCell>, key: KeyId) {
    moves::connect_abandoned(&Requests(pool), key);
}

/// The connect of `key` failed with `err`: the requests that waited for it fail with it too,
/// unless another connect or session may serve them.
pub fn connect_failed(pool: &Rc<PoolCell>, key: KeyId, err: &Error) {
    moves::connect_failed(&Requests(pool), key, err);
}

/// Session `conn_id` ended: its slot goes back, its waiters are routed again. False if it was
/// not a session.
pub fn session_closed(pool: &Rc<PoolCell>, key: KeyId, conn_id: u32) -> bool {
    moves::session_closed(&Requests(pool), key, conn_id)
}

/// Session `conn_id` takes no new streams (its server refused one, or sent GOAWAY): its
/// streams in flight go on; it closes once they are done, or when its server closes it.
pub fn session_draining(pool: &Rc<PoolCell>, key: KeyId, conn_id: u32) {
    pool.sessions.borrow_mut().close_gracefully(key, conn_id);
}
