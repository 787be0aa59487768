//! Where an `agent.request()` goes in its pool: a stream of an HTTP/2 session, a wait for one,
//! or the pool's checkout (an idle connection of the promise path, a new one, or a place in the
//! queue); served from the queue; and what its pool's sessions do for the requests that wait
//! for streams, as `crate::pool::streams` moves them.

use std::cell::RefMut;
use std::rc::Rc;
use std::time::Instant;

use super::{Lanes, Request};
use crate::error::Error;
use crate::pool::moves;
use crate::pool::multiplex::{Room, Sessions};
use crate::pool::place::Place;
use crate::pool::streams::{self, Waiting};
use crate::pool::{Checkout, KeyId, Waiter};

/// A pool's requests and sessions, as `crate::pool::streams` moves them.
struct Streams<'a, L>(&'a L);

impl<L: Lanes> Streams<'_, L> {
    fn get(&self, id: u64) -> Option<Rc<Request<L::Face>>> {
        self.0.request(u32::try_from(id).ok()?)
    }
}

impl<L: Lanes> Waiting for Streams<'_, L> {
    fn sessions(&self) -> RefMut<'_, Sessions<u32>> {
        self.0.sessions()
    }

    /// As its server's settings say; none once it is past `socketActiveTTL` (it idles out once
    /// its own streams are done).
    fn room(&self, conn: u32) -> Room {
        self.0
            .session(conn)
            .map_or(Room::default(), |(age, max_streams, said)| Room {
                streams: self.0.policy().session_room(age, max_streams),
                said,
            })
    }

    fn retired(&self, conn: u32) -> bool {
        let policy = self.0.policy();
        policy.ttl.is_some()
            && self
                .0
                .session(conn)
                .is_some_and(|(age, ..)| policy.outlived(age))
    }

    fn slot_wanted(&self, key: KeyId) -> bool {
        self.0.pool().wants_slot_of(key)
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
            self.0.stream_on(&req, conn);
        }
    }

    fn checkout(&self, req: u64) {
        if let Some(req) = self.get(req) {
            checkout(self.0, &req);
        }
    }

    fn fail(&self, req: u64, err: &Error) {
        if let Some(req) = self.get(req) {
            req.fail(err);
        }
    }

    fn close_session(&self, conn: u32) {
        let grant = moves::closed_in_use(self.0, conn);
        self.0.notify_grants(grant);
    }

    fn idles(&self, _conn: u32) {
        self.0.expire_sessions();
    }
}

/// Sends `req` (its exchange not started) where its pool says: a stream now, a wait for one
/// (or for the connection being set up), or the pool's checkout.
pub fn route<L: Lanes>(lanes: &L, req: &Rc<Request<L::Face>>) {
    if lanes.http2() {
        streams::route(&Streams(lanes), req.key, u64::from(req.id));
    } else {
        checkout(lanes, req);
    }
}

/// The pool's checkout for `req`: an idle connection of the promise path, a new one, or a place
/// in the pool's queue; or, when its key has HTTP/2 sessions, a wait for a stream, since a full
/// session frees a stream sooner than the pool frees a slot.
fn checkout<L: Lanes>(lanes: &L, req: &Rc<Request<L::Face>>) {
    let key = req.key;
    match moves::checkout(lanes, key, Waiter::Promise(req.id)) {
        Checkout::Reuse(conn) => lanes.dispatch(req, conn),
        Checkout::Connect => super::connect::open(lanes, req),
        Checkout::Queued(w) if lanes.http2() && lanes.sessions().wait(key, u64::from(req.id)) => {
            lanes.pool().cancel(w);
            req.set_place(Place::StreamWait);
        }
        Checkout::Queued(w) => req.set_place(Place::Queued(w)),
    }
}

/// Serves waiting request `id` with what the pool gave it: connection `handoff` (of its path),
/// or a slot for a new connection. False when the request is gone (see
/// `moves::Connections::serve`).
pub fn serve<L: Lanes>(lanes: &L, id: u32, handoff: Option<u32>) -> bool {
    let Some(req) = lanes.request(id) else {
        return false;
    };
    req.set_place(Place::Nowhere);
    match handoff.filter(|&conn| lanes.key_of(conn).is_some()) {
        Some(conn) => lanes.dispatch(&req, conn),
        None => super::connect::open(lanes, &req),
    }
    true
}

/// A stream of session `conn` ended: a waiting request takes its place, or the session closes
/// or idles (see `crate::pool::streams::stream_done`).
pub fn stream_done<L: Lanes>(lanes: &L, key: KeyId, conn: u32) {
    streams::stream_done(&Streams(lanes), key, conn, Instant::now());
}

/// A stream of session `conn` given up while the connection held its request's body back: the
/// session closes once its streams end (see `crate::pool::streams::stream_abandoned`).
pub fn stream_abandoned<L: Lanes>(lanes: &L, key: KeyId, conn: u32) {
    streams::stream_abandoned(&Streams(lanes), key, conn, Instant::now());
}

/// The connect of `conn` came up speaking HTTP/2: the requests that waited for it take streams
/// on it.
pub fn session_opened<L: Lanes>(lanes: &L, key: KeyId, conn: u32) {
    streams::session_opened(&Streams(lanes), key, conn, Instant::now());
}

/// The connect of `key` came up speaking HTTP/1.1: the requests that waited for it go on as
/// HTTP/1.1 requests do.
pub fn session_refused<L: Lanes>(lanes: &L, key: KeyId) {
    streams::session_refused(&Streams(lanes), key);
}

/// The connect of `key` ended without a connection: the requests that waited for it are
/// routed again.
pub fn connect_abandoned<L: Lanes>(lanes: &L, key: KeyId) {
    streams::connect_abandoned(&Streams(lanes), key);
}

/// The connect of `key` failed with `err`: the requests that waited for it fail with it too,
/// unless another connect or session may serve them.
pub fn connect_failed<L: Lanes>(lanes: &L, key: KeyId, err: &Error) {
    streams::connect_failed(&Streams(lanes), key, err);
}

/// Session `conn` ended: its slot goes back, its waiters are routed again. False if it was not
/// a session.
pub fn session_closed<L: Lanes>(lanes: &L, key: KeyId, conn: u32) -> bool {
    streams::session_closed(&Streams(lanes), key, conn)
}

/// Session `conn` takes no new streams (its server refused one, or sent GOAWAY): its streams
/// in flight go on; it closes once they are done, or when its server closes it.
pub fn session_draining<L: Lanes>(lanes: &L, key: KeyId, conn: u32) {
    lanes.sessions().close_gracefully(key, conn);
}
