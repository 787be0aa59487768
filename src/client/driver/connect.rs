//! What a request's new connection does for it once its connect ends: up, the server's name is
//! checked (a new TLS session), watchers hear of it, and a connection that may speak HTTP/2
//! becomes a session for the requests that waited for it, or goes on as HTTP/1.1; a request
//! that ended meanwhile leaves the connection to its pool, or closed when its server was never
//! checked. Not up, the connection fails its request and its pool counts the failure. And what
//! the close of such a connection frees.

use std::rc::Rc;

use super::route::{connect_abandoned, connect_failed, session_closed, session_opened};
use super::route::{session_refused, stream_done};
use super::{on_event, Face, Lanes, Request};
use crate::client::open::Facts;
use crate::client::Event;
use crate::error::Error;
use crate::pool::moves;
use crate::pool::place::Place;
use crate::pool::{ConnEnd, KeyId};
use crate::transport::tls::NameCheck;

/// Opens a new connection for `req`, whose slot is counted, and connects it; when it may speak
/// HTTP/2, the next requests of its key wait for it (see `crate::pool::streams::route`).
pub(super) fn open<L: Lanes>(lanes: &L, req: &Rc<Request<L::Face>>) {
    let http2 = lanes.http2();
    let Some(spec) = req.connecting(http2) else {
        return;
    };
    let conn = lanes.open(req.key);
    if http2 {
        lanes.pend_session(conn);
        lanes.sessions().connecting(req.key);
    }
    req.connects(conn);
    lanes.run_connect(req, conn, spec);
}

/// The connect of connection `conn`, opened for request `req_id`, ended with `result`.
pub fn connected<L: Lanes>(lanes: &L, conn: u32, req_id: u32, result: Result<Facts, Error>) {
    let Some(key) = lanes.key_of(conn) else {
        return;
    };
    let facts = match result {
        Ok(facts) => facts,
        Err(err) => return failed(lanes, key, conn, req_id, &err),
    };
    let Facts {
        local,
        remote,
        tls,
        verify,
        session,
    } = facts;
    lanes.established(conn, local, remote, tls);
    let req = lanes
        .request(req_id)
        .filter(|req| req.place().conn() == Some(conn));
    let Some(req) = req else {
        // Its request ended meanwhile. Unchecked, it closes unused; checked, its streams serve
        // the requests that waited for it.
        if verify.is_some() {
            let grant = moves::closed_in_use(lanes, conn);
            lanes.notify_grants(grant);
            if lanes.take_pending_session(conn) {
                connect_abandoned(lanes, key);
            }
        } else if lanes.take_pending_session(conn) {
            match session {
                Some(session) => {
                    lanes.make_session(conn, session);
                    session_opened(lanes, key, conn);
                    stream_done(lanes, key, conn);
                }
                None => session_refused(lanes, key),
            }
        }
        return;
    };
    req.arm(lanes);
    if let Some(verify) = verify {
        verify_server(lanes, &req, conn, verify);
    }
    // Open, its server's name checked: watchers hear of it (and will of its end).
    let open = lanes.key_of(conn).is_some();
    if open {
        lanes.announce(conn);
    }
    if lanes.take_pending_session(conn) {
        match session {
            Some(session) if open => {
                lanes.make_session(conn, session);
                req.set_place(Place::Stream(conn));
                session_opened(lanes, key, conn);
            }
            // A name that failed closed the connection.
            Some(_) => connect_abandoned(lanes, key),
            None => session_refused(lanes, key),
        }
    }
    // The request goes out on it: told last, as the face calls out.
    if open {
        req.tell(|face| face.sending(req.id, conn, false));
    }
}

/// The connect of `conn` (of `key`) failed with `err`: the connection is gone, its request fails, and so
/// do the requests that waited for it to come up as a session (unless another connect or
/// session may serve them); the pool counts a failed connect (a timeout too, when it was not
/// open within the agent's timeout, as on the drop-in path), and its slot may serve a waiter.
fn failed<L: Lanes>(lanes: &L, key: KeyId, conn: u32, req_id: u32, err: &Error) {
    let pending = lanes.take_pending_session(conn);
    lanes.lost(conn, err);
    if pending {
        connect_failed(lanes, key, err);
    }
    let grant = lanes.pool().connect_failed(key, err.timed_out());
    if let Some(req) = lanes.request(req_id) {
        req.set_place(Place::Nowhere);
        req.fail(err);
    }
    lanes.notify_grants(grant);
}

/// Has the face check the name of the server of `req`'s new TLS connection `conn`, as Node's
/// `tls.connect` does after the handshake: the exchange starts if the name is right (or let
/// pass); otherwise the face has failed the request with the check's error and closed the
/// connection, which counts as a socket error and drops the server's cached sessions (as
/// Node's https.Agent evicts them), so that the next connection is checked anew.
fn verify_server<L: Lanes>(
    lanes: &L,
    req: &Rc<Request<L::Face>>,
    conn: u32,
    verify: tokio::sync::oneshot::Sender<()>,
) {
    let check = req
        .face()
        .map_or(NameCheck::Wrong, |face| face.check_name(conn, req.key));
    lanes.name_checked(conn, check);
    if check.goes_on() {
        let _ = verify.send(());
        return;
    }
    lanes.pool().stats.error_socket_count += 1;
    // The face fails the request with the check's error; had it not (its check threw), the
    // request would wait for ever: it fails here.
    if req.face().is_some() {
        let err = Error::tls(
            "ERR_HYPERAGENT_INTERNAL",
            "the server's name could not be checked",
        );
        on_event(lanes, req, Event::Error(err));
        on_event(lanes, req, Event::Done(None));
    }
}

/// The task of promise-path connection `conn` ended (its server closed it, or it failed, as
/// `end` says): a session's slot goes back and its waiters are routed again, and how it ended
/// counts (its streams' failures do not: see `driver::count_failure`); an `idle` connection
/// leaves the pool, its slot free for a waiter.
pub fn closed<L: Lanes>(lanes: &L, conn: u32, idle: bool, end: ConnEnd) {
    let Some(key) = lanes.key_of(conn) else {
        return;
    };
    if session_closed(lanes, key, conn) {
        lanes.pool().stats.count_end(end);
        return;
    }
    if idle {
        let grant = moves::evict(lanes, conn);
        lanes.notify_grants(grant);
    }
}
