//! The moves of a pool's HTTP/2 sessions over the `agent.request()`s that wait for their
//! streams: routing a request (a stream now, a wait, or the pool's checkout), and what a
//! session's opening, a stream's end, a refused or failed connect and a session's close do
//! for the requests that wait. [`Sessions`] keeps the counts; these say in which order the
//! requests are served, routed again or failed, and when a session closes or idles.
//!
//! The requests are `client::driver`'s, reached through [`Waiting`] by id; the tests' are records.
//! The sessions are borrowed for one step at a time, never across a call to a request, which
//! may come back here (a request routed again may take a stream).

use std::cell::RefMut;
use std::time::Instant;

use super::multiplex::{Idleness, Room, Route, Sessions};
use super::KeyId;
use crate::error::Error;

/// The requests of a pool that may wait for a stream, by id, and its sessions.
pub trait Waiting {
    /// The pool's sessions.
    fn sessions(&self) -> RefMut<'_, Sessions<u32>>;
    /// How many streams session `conn` takes at once now (none when it is gone), and how
    /// many its server said it takes.
    fn room(&self, conn: u32) -> Room;
    /// Whether session `conn` is past its time (`socketActiveTTL`): it takes no new stream,
    /// and closes once it carries none.
    fn retired(&self, conn: u32) -> bool;
    /// Whether a slot of `key` freed now would serve a checkout waiting in the pool.
    fn slot_wanted(&self, key: KeyId) -> bool;
    /// Takes request `req` out of its wait for a stream: true if it was still waiting (it
    /// may have been aborted meanwhile).
    fn claim(&self, req: u64) -> bool;
    /// Request `req` waits for a stream now (or for the connect that may give one).
    fn wait(&self, req: u64);
    /// Starts request `req` on a new stream of session `conn` (counted already).
    fn stream_on(&self, req: u64, conn: u32);
    /// Sends request `req` to the pool's checkout.
    fn checkout(&self, req: u64);
    /// Fails request `req`, which waited for a connect that failed with `err`.
    fn fail(&self, req: u64, err: &Error);
    /// Closes session `conn`: its slot goes back to the pool.
    fn close_session(&self, conn: u32);
    /// Sets the pool's timer for a session that idles now.
    fn idles(&self, conn: u32);
}

/// Sends request `req` of `key` where the sessions say: a stream now, a wait for one (or for
/// the connection being set up), or the pool's checkout. Sessions past their time close first
/// if they carry no stream: their slots serve the request instead.
pub fn route<W: Waiting + ?Sized>(w: &W, key: KeyId, req: u64) {
    retire(w, key);
    let routed = w.sessions().route(key, req, |c| w.room(c));
    match routed {
        Route::Stream(conn) => w.stream_on(req, conn),
        Route::Wait => w.wait(req),
        Route::Checkout => w.checkout(req),
    }
}

/// A stream of session `conn` ended: a waiting request takes its place. A session left with no
/// stream closes if it takes no more (GOAWAY, or past its time) or if its slot serves a
/// checkout waiting in the pool (as an idle connection's would), or idles until the pool's
/// timer.
pub fn stream_done<W: Waiting + ?Sized>(w: &W, key: KeyId, conn: u32, now: Instant) {
    // One past its time serves no waiter (they wait on for another session, or are routed
    // again once none is left), and closes with its last stream.
    if w.retired(conn) {
        w.sessions().close_gracefully(key, conn);
    }
    // Bounded: each turn takes a waiter off the queue; one that is gone gives its stream back.
    loop {
        let next = w.sessions().stream_done(key, conn, now);
        let Some(next) = next else { break };
        if w.claim(next) {
            return w.stream_on(next, conn);
        }
    }
    let idleness = w.sessions().idleness(key, conn);
    match idleness {
        Some(Idleness::Spent) => {
            session_closed(w, key, conn);
        }
        Some(Idleness::Idle) if w.slot_wanted(key) => {
            session_closed(w, key, conn);
        }
        Some(Idleness::Idle) => w.idles(conn),
        None => {}
    }
}

/// A stream of session `conn` was given up (its request aborted) while the connection held its
/// request's body back: hyper's task that sends the body waits for the server's window without
/// looking at the body again, and holds the stream open while it waits, for as long as the
/// server reads none of it. The session takes no new stream and closes once its last ends,
/// which stops that task (see `client::handshake`'s `Spawned`).
pub fn stream_abandoned<W: Waiting + ?Sized>(w: &W, key: KeyId, conn: u32, now: Instant) {
    w.sessions().close_gracefully(key, conn);
    stream_done(w, key, conn, now);
}

/// The connect of `conn` came up speaking HTTP/2: the requests that waited for it take streams
/// on it as it has room; one more, if any waits still, opens the next connection.
pub fn session_opened<W: Waiting + ?Sized>(w: &W, key: KeyId, conn: u32, now: Instant) {
    let opened = w.sessions().opened(key, conn, |c| w.room(c));
    for req in opened.streams {
        if w.claim(req) {
            w.stream_on(req, conn);
        } else {
            stream_done(w, key, conn, now);
        }
    }
    if let Some(req) = opened.checkout.filter(|&req| w.claim(req)) {
        route(w, key, req);
    }
}

/// The connect of `key` came up speaking HTTP/1.1: the requests that waited for it go on as
/// HTTP/1.1 requests do.
pub fn session_refused<W: Waiting + ?Sized>(w: &W, key: KeyId) {
    let waiting = w.sessions().plain(key);
    reroute(w, key, waiting);
}

/// The connect of `key` ended without a connection (closed first: aborted, or its server's name
/// refused): the requests that waited for it are routed again.
pub fn connect_abandoned<W: Waiting + ?Sized>(w: &W, key: KeyId) {
    let waiting = w.sessions().connect_failed(key);
    reroute(w, key, waiting);
}

/// The connect of `key` failed with `err`: the requests that waited for it fail with it too,
/// unless another connect or session may serve them.
pub fn connect_failed<W: Waiting + ?Sized>(w: &W, key: KeyId, err: &Error) {
    let waiting = w.sessions().connect_failed(key);
    for req in waiting {
        if w.claim(req) {
            w.fail(req, err);
        }
    }
}

/// Session `conn` ended (its server closed it, or it failed): its slot goes back to the pool
/// and the requests that waited for its streams are routed again; its streams in flight fail
/// with their exchanges. False if it was not a session.
pub fn session_closed<W: Waiting + ?Sized>(w: &W, key: KeyId, conn: u32) -> bool {
    if !w.sessions().is_session(key, conn) {
        return false;
    }
    let said = w.room(conn).said;
    let waiting = w.sessions().closed(key, conn, said);
    w.close_session(conn);
    reroute(w, key, waiting);
    true
}

/// Closes the sessions of `key` past their time that carry no stream (see
/// [`Sessions::retire`]); those that still do take no new one.
fn retire<W: Waiting + ?Sized>(w: &W, key: KeyId) {
    let spent = w.sessions().retire(key, |c| w.retired(c));
    for conn in spent {
        session_closed(w, key, conn);
    }
}

fn reroute<W: Waiting + ?Sized>(w: &W, key: KeyId, waiting: Vec<u64>) {
    for req in waiting {
        if w.claim(req) {
            route(w, key, req);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::HashSet;
    use std::time::Duration;

    use super::*;

    const KEY: KeyId = KeyId(0);

    /// Requests and sessions as records, and what was done to them, in order.
    #[derive(Default)]
    struct Fake {
        sessions: RefCell<Sessions<u32>>,
        /// Streams each session takes at once.
        room: usize,
        /// Sessions past their time.
        retired: RefCell<HashSet<u32>>,
        /// A checkout waits in the pool for a slot.
        slot_wanted: std::cell::Cell<bool>,
        waiting: RefCell<HashSet<u64>>,
        log: RefCell<Vec<String>>,
    }

    impl Fake {
        fn new(room: usize) -> Fake {
            Fake {
                room,
                ..Fake::default()
            }
        }

        fn said(&self, what: String) {
            self.log.borrow_mut().push(what);
        }

        fn take_log(&self) -> Vec<String> {
            std::mem::take(&mut *self.log.borrow_mut())
        }

        /// A connect of `KEY` that may speak HTTP/2 is under way, for request 1, and
        /// requests 2..=n wait for it.
        fn connecting(&self, n: u64) {
            self.sessions.borrow_mut().connecting(KEY);
            for req in 2..=n {
                route(self, KEY, req);
            }
            assert_eq!(self.take_log().len() as u64, n - 1, "each waits");
        }
    }

    impl Waiting for Fake {
        fn sessions(&self) -> RefMut<'_, Sessions<u32>> {
            self.sessions.borrow_mut()
        }

        fn room(&self, conn: u32) -> Room {
            Room {
                streams: match self.retired.borrow().contains(&conn) {
                    true => 0,
                    false => self.room,
                },
                said: Some(self.room),
            }
        }

        fn retired(&self, conn: u32) -> bool {
            self.retired.borrow().contains(&conn)
        }

        fn slot_wanted(&self, _key: KeyId) -> bool {
            self.slot_wanted.get()
        }

        fn claim(&self, req: u64) -> bool {
            self.waiting.borrow_mut().remove(&req)
        }

        fn wait(&self, req: u64) {
            self.waiting.borrow_mut().insert(req);
            self.said(format!("{req} waits"));
        }

        fn stream_on(&self, req: u64, conn: u32) {
            self.said(format!("{req} on {conn}"));
        }

        fn checkout(&self, req: u64) {
            self.said(format!("{req} to checkout"));
        }

        fn fail(&self, req: u64, err: &Error) {
            self.said(format!("{req} fails {}", err.code()));
        }

        fn close_session(&self, conn: u32) {
            self.said(format!("close {conn}"));
        }

        fn idles(&self, conn: u32) {
            self.said(format!("{conn} idles"));
        }
    }

    #[test]
    fn waiters_take_streams_on_the_session_that_opens_and_one_opens_the_next() {
        let f = Fake::new(2);
        f.connecting(4);
        let now = Instant::now();
        session_opened(&f, KEY, 7, now);
        // Request 1 opened it and holds a stream: one more fits; the next opens another.
        assert_eq!(f.take_log(), ["2 on 7", "3 to checkout"]);
        stream_done(&f, KEY, 7, now);
        assert_eq!(f.take_log(), ["4 on 7"]);
    }

    #[test]
    fn a_stream_abandoned_with_its_body_held_back_closes_its_session_once_its_last_stream_ends() {
        let f = Fake::new(3);
        f.connecting(3);
        let now = Instant::now();
        session_opened(&f, KEY, 7, now);
        assert_eq!(f.take_log(), ["2 on 7", "3 on 7"]);
        stream_abandoned(&f, KEY, 7, now);
        assert!(f.take_log().is_empty(), "two streams still run");
        // A new request takes no stream on it.
        route(&f, KEY, 4);
        assert_eq!(f.take_log(), ["4 to checkout"]);
        stream_done(&f, KEY, 7, now);
        stream_done(&f, KEY, 7, now);
        assert_eq!(f.take_log(), ["close 7"]);
    }

    #[test]
    fn a_stream_given_to_a_request_gone_goes_to_the_next_then_idles() {
        let f = Fake::new(1);
        f.connecting(3);
        let now = Instant::now();
        session_opened(&f, KEY, 7, now);
        assert_eq!(f.take_log(), ["2 to checkout"], "no room beside request 1");
        f.waiting.borrow_mut().remove(&3);
        stream_done(&f, KEY, 7, now);
        assert_eq!(f.take_log(), ["7 idles"], "request 3 was aborted");
    }

    #[test]
    fn an_http1_answer_sends_the_waiters_to_the_checkout() {
        let f = Fake::new(100);
        f.connecting(3);
        session_refused(&f, KEY);
        assert_eq!(f.take_log(), ["2 to checkout", "3 to checkout"]);
        route(&f, KEY, 4);
        assert_eq!(
            f.take_log(),
            ["4 to checkout"],
            "no more waiting for connects"
        );
    }

    #[test]
    fn a_failed_connect_fails_its_waiters_and_an_abandoned_one_routes_them_again() {
        let f = Fake::new(100);
        f.connecting(3);
        f.waiting.borrow_mut().remove(&3);
        connect_failed(&f, KEY, &Error::tls("ECONNREFUSED", "refused"));
        assert_eq!(f.take_log(), ["2 fails ECONNREFUSED"], "3 was aborted");

        let f = Fake::new(100);
        f.connecting(2);
        connect_abandoned(&f, KEY);
        assert_eq!(f.take_log(), ["2 to checkout"]);
    }

    #[test]
    fn a_closed_session_frees_its_slot_and_its_waiters_are_routed_again() {
        let f = Fake::new(1);
        f.connecting(3);
        session_opened(&f, KEY, 7, Instant::now());
        f.take_log();
        assert!(!session_closed(&f, KEY, 8), "not a session");
        assert!(session_closed(&f, KEY, 7));
        assert_eq!(f.take_log(), ["close 7", "3 to checkout"]);
        assert!(!session_closed(&f, KEY, 7), "once");
    }

    #[test]
    fn a_session_past_its_time_takes_no_stream_and_closes_once_it_carries_none() {
        let f = Fake::new(10);
        f.connecting(1);
        let now = Instant::now();
        session_opened(&f, KEY, 7, now);
        route(&f, KEY, 2);
        assert_eq!(f.take_log(), ["2 on 7"]);
        // 7 is past its time with two streams: a request goes to the checkout, and 7 serves
        // no waiter; it closes with its last stream.
        f.retired.borrow_mut().insert(7);
        route(&f, KEY, 3);
        assert_eq!(f.take_log(), ["3 to checkout"]);
        assert!(
            !f.sessions.borrow_mut().wait(KEY, 4),
            "no session to wait on"
        );
        stream_done(&f, KEY, 7, now);
        assert_eq!(f.take_log(), Vec::<String>::new());
        stream_done(&f, KEY, 7, now);
        assert_eq!(f.take_log(), ["close 7"]);

        // One idle when its time passes closes at the next request, which takes its slot.
        let f = Fake::new(10);
        f.connecting(1);
        session_opened(&f, KEY, 8, now);
        stream_done(&f, KEY, 8, now);
        assert_eq!(f.take_log(), ["8 idles"]);
        f.retired.borrow_mut().insert(8);
        route(&f, KEY, 2);
        assert_eq!(f.take_log(), ["close 8", "2 to checkout"]);
    }

    #[test]
    fn a_session_left_idle_closes_when_a_checkout_waits_for_its_slot() {
        let f = Fake::new(10);
        f.connecting(1);
        let now = Instant::now();
        session_opened(&f, KEY, 7, now);
        route(&f, KEY, 2);
        f.take_log();
        f.slot_wanted.set(true);
        stream_done(&f, KEY, 7, now);
        assert_eq!(f.take_log(), Vec::<String>::new(), "a stream still open");
        stream_done(&f, KEY, 7, now);
        assert_eq!(f.take_log(), ["close 7"]);
    }

    #[test]
    fn a_session_that_takes_no_more_streams_closes_when_its_last_ends() {
        let f = Fake::new(10);
        f.connecting(1);
        let now = Instant::now();
        session_opened(&f, KEY, 7, now);
        f.sessions.borrow_mut().close_gracefully(KEY, 7);
        stream_done(&f, KEY, 7, now + Duration::from_millis(1));
        assert_eq!(f.take_log(), ["close 7"]);
    }
}
