//! One `agent.request()` on its caller's thread, from its start to its end: where it stands in
//! its pool, the exchange it runs, and what each event of that exchange does. JavaScript is
//! told; the connection goes back to the pool, closes or is retired; a failure of an
//! established connection is counted; the request is sent again after the keep-alive race or a
//! refused HTTP/2 stream, on a new connection or routed as a new request; an abort undoes what
//! its place holds; a headers deadline that passes fails it as an abort would.
//!
//! Where it goes in its pool (a stream, a wait for one, the checkout, the queue) is
//! `route.rs`; what a new connection's connect does for it and for the requests that wait,
//! `connect.rs`.
//!
//! The two sides a request meets are traits, which the binding implements and the tests
//! record: its JavaScript face ([`Face`]: the events it is told, its hold on the event loop, its
//! end) and its pool on this thread ([`Lanes`]: the pool's connections, HTTP/2 sessions and
//! requests, and the exchanges and connects that the binding's mechanics run on tokio).

mod connect;
mod route;

use std::cell::{Cell, RefCell, RefMut};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::attempt::{Attempt, Connection, Deadline, Retry};
use super::plan::Plan;
use super::{Control, Event, HeaderLines, Sender, Spec, Stopper, Trailers, BODY_WINDOW};
use crate::error::Error;
use crate::pool::moves::{self, Connections, Verdict};
use crate::pool::place::Place;
use crate::pool::{Grant, KeyId, ReleasePolicy, Wear};
use crate::transport::connect::Peer;
use crate::transport::tls::{NameCheck, TlsInfo};

pub use connect::{closed, connected};
pub use route::{route, serve};

/// A request's running exchange: in a task of its own (on a new connection, with the connect,
/// or on a stream) or in its connection's task.
pub enum Exchange {
    Task(crate::runtime::Spawned),
    InConnection(Rc<Stopper>),
}

impl Exchange {
    /// Stops it where it is; its connection (or its stream) closes.
    fn stop(self) {
        match self {
            Exchange::Task(task) => task.abort(),
            Exchange::InConnection(stopper) => stopper.stop(),
        }
    }
}

/// An exchange that is over: the connection it ran on, and what the pool did with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settled {
    /// 0 when it ran on none.
    pub conn: u32,
    pub verdict: Verdict,
}

impl Settled {
    /// Over without a connection to give back (failed, aborted, or on a stream).
    pub const NONE: Settled = Settled {
        conn: 0,
        verdict: Verdict::Nothing,
    };
}

/// A response head, as the face is told it.
pub struct Headed<'a> {
    pub status: u16,
    /// The reason phrase's bytes; None over HTTP/2, which has none.
    pub reason: Option<&'a [u8]>,
    pub headers: &'a HeaderLines,
    /// The body bytes that came with it.
    pub chunks: &'a [Bytes],
    /// The trailers, when the body came whole with the head.
    pub trailers: Option<&'a HeaderLines>,
    /// The exchange ended with its head: its connection is settled already, and no
    /// [`Face::done`] follows.
    pub settled: Option<Settled>,
}

/// A request's JavaScript side. Its events are told only while the request is not over.
pub trait Face {
    fn info(&self, status: u16, headers: &HeaderLines);
    fn head(&self, head: Headed<'_>);
    fn data(&self, chunks: &[Bytes]);
    fn end(&self, trailers: &HeaderLines);
    fn error(&self, err: &Error);
    /// A streamed request body can take more.
    fn drain(&self);
    /// The response is complete while the request still goes out.
    fn answered(&self);
    /// The exchange is over.
    fn done(&self, settled: Settled);
    /// Request `req` goes out on connection `conn` (an idle one it took, a new one once it is
    /// open and its server's name checked, or a stream of a session): its head is written
    /// now. A replay's new connection is told too. `later`: the driver is in the middle of the
    /// pool's work (it routes the request), where the face must not call out; it tells it on a
    /// later turn, which still comes before the exchange's first event (the exchange starts
    /// after this, and its events come behind). Otherwise the driver handles an event of the
    /// request's connect, and the face tells it now: its exchange's events may be queued
    /// already.
    fn sending(&self, req: u32, conn: u32, later: bool);
    /// Checks the name of the server of its new TLS connection `conn` (of pool key `key`), as
    /// `tls.checkServerIdentity` does; a wrong one fails the request with the check's error
    /// and closes the connection.
    fn check_name(&self, conn: u32, key: KeyId) -> NameCheck;
    /// The request's exchange or connect runs on tokio: the event loop stays alive for it.
    fn hold(&self);
    /// It no longer runs there. A second call does nothing.
    fn unhold(&self);
    /// The request `id` is over: its JavaScript handle is let go of (called once).
    fn release(&self, id: u32);
}

/// A request's pool, on the request's thread: its connections (see `crate::pool::moves`), its
/// HTTP/2 sessions, its requests by id, and the mechanics the binding carries out for them.
pub trait Lanes: Connections {
    type Face: Face;
    /// Request `id` of this pool, while it is in flight or queued.
    fn request(&self, id: u32) -> Option<Rc<Request<Self::Face>>>;
    /// Connects `req`'s new connection `conn` (opened for it, see `Connections::open`) and runs
    /// its exchange of `spec` on it, in a task that [`connected`] hears back from.
    fn run_connect(&self, req: &Rc<Request<Self::Face>>, conn: u32, spec: Spec);
    /// Runs `req`'s exchange on idle connection `conn` of the promise path, now its own
    /// ([`Request::begin`]).
    fn dispatch(&self, req: &Rc<Request<Self::Face>>, conn: u32);
    /// Runs `req`'s exchange on a new stream of session `conn`, counted already
    /// ([`Request::begin`]).
    fn stream_on(&self, req: &Rc<Request<Self::Face>>, conn: u32);
    /// Whether its connections may speak HTTP/2.
    fn http2(&self) -> bool;
    /// How old session `conn` is, how many streams it may carry at once, and how many its
    /// server said it takes once its settings have come (until then it may carry the
    /// protocol's assumed limit); None when it is not an open session.
    fn session(&self, conn: u32) -> Option<(Duration, usize, Option<usize>)>;
    /// Closes the sessions that idled past the agent's idle timeout, and sets the timer for
    /// the next.
    fn expire_sessions(&self);
    /// Serves the waiter a freed slot lets connect (see `crate::pool::moves::grant_all`).
    fn notify_grants(&self, grant: Option<Grant>);
    /// Requests of its key wait for connection `conn` to come up as an HTTP/2 session.
    fn pend_session(&self, conn: u32);
    /// Whether requests waited for connection `conn` to come up as an HTTP/2 session (taken:
    /// true once).
    fn take_pending_session(&self, conn: u32) -> bool;
    /// How worn connection `conn` is (its age, and the requests it carried, the one ending now
    /// included), while it is established and in use (not connecting, not idle, not gone).
    fn in_use(&self, conn: u32) -> Option<Wear>;
    /// Connection `conn` keeps hyper's `sender` for its next request.
    fn keep(&self, conn: u32, sender: Sender);
    fn policy(&self) -> ReleasePolicy;
    /// What a replayed request's new body writer calls when it may go on: request `req` is
    /// told [`Event::BodyDrain`].
    fn drained(&self, req: u32) -> impl Fn() + Send + Sync + 'static;
    /// A headers deadline runs: this thread is to [`sweep`] until none does.
    fn watch_deadlines(&self);
    /// New connection `conn` is up, with what its connect learnt.
    fn established(
        &self,
        conn: u32,
        local: Option<SocketAddr>,
        remote: Peer,
        tls: Option<Box<TlsInfo>>,
    );
    /// Connection `conn` is an HTTP/2 session: `sender` opens its streams.
    fn make_session(&self, conn: u32, sender: Sender);
    /// The server's name on connection `conn` was checked (see `TlsConfig::name_checked`).
    fn name_checked(&self, conn: u32, check: NameCheck);
    /// Connection `conn` is open and checked: those who watch the pool's connections hear of
    /// it (and will of its end).
    fn announce(&self, conn: u32);
    /// The connect of `conn` failed with `err`: the connection is gone (those who watch hear
    /// of the failure).
    fn lost(&self, conn: u32, err: &Error);
    /// Connection `conn`, in use, is to close for `why`: those who watch hear it with its end.
    /// The first reason of an exchange stands.
    fn ending(&self, conn: u32, why: Ending<'_>);
}

/// Why a connection in use closes, as those who watch the pool's connections hear it.
#[derive(Clone, Copy, Debug)]
pub enum Ending<'a> {
    /// Its exchange failed with this error.
    Failed(&'a Error),
    /// Its request was aborted.
    Aborted,
    /// Its exchange completed, but the connection may not carry another.
    Reset,
}

/// One `agent.request()` in flight, or waiting for a connection.
pub struct Request<F> {
    pub id: u32,
    pub key: KeyId,
    pub face: F,
    /// How far its response body may run ahead (the face's reads grant more).
    pub ctl: Arc<Control>,
    /// Its attempts: what it sends, its replay, what its exchange said so far, its body's
    /// writer and the headers deadline this thread keeps (see `client::attempt`).
    attempt: RefCell<Attempt>,
    /// Where it stands in its pool.
    place: Cell<Place>,
    /// What stops its exchange while it runs.
    running: RefCell<Option<Exchange>>,
    /// Over: the face is told nothing more.
    finished: Cell<bool>,
    /// Its trailers, when they come with its body's end.
    trailers: Option<Arc<Trailers>>,
    /// Its response body streams: the head came without the end.
    streaming: Cell<bool>,
    /// Bytes of the response body the face asked for (a grant opens a window of
    /// [`BODY_WINDOW`]) and has not been given yet, as this thread counts them.
    asked: Cell<usize>,
}

impl<F: Face> Request<F> {
    pub fn new(id: u32, key: KeyId, face: F, ctl: Arc<Control>, plan: Plan) -> Request<F> {
        let Plan {
            spec,
            replay,
            writer,
            trailers,
        } = plan;
        Request {
            id,
            key,
            face,
            ctl,
            attempt: RefCell::new(Attempt::new(spec, replay, writer)),
            place: Cell::new(Place::Nowhere),
            running: RefCell::new(None),
            finished: Cell::new(false),
            trailers,
            streaming: Cell::new(false),
            asked: Cell::new(0),
        }
    }

    /// The face wants more of the response body (its consumer reads): the exchange may post
    /// a window more, and the event loop stays alive for it.
    pub fn granted(&self) {
        if self.streaming.get() {
            self.asked.set(BODY_WINDOW);
            self.hold();
        }
    }

    /// `bytes` of the response body go to the face. Once what it asked for is given, the
    /// exchange waits on the face's consumer, not on the network: like a paused socket in
    /// Node, it no longer keeps the event loop alive, until the consumer asks for more. A
    /// request still streaming its own body out keeps it alive all the same.
    fn giving(&self, bytes: usize) {
        if !self.streaming.get() {
            return;
        }
        let left = self.asked.get().saturating_sub(bytes);
        self.asked.set(left);
        let sending = self
            .attempt
            .borrow_mut()
            .writer()
            .is_some_and(|w| w.is_open());
        if left == 0 && !sending {
            self.face.unhold();
        }
    }

    /// Its body's source ended: the body ends after what was written. A response already
    /// waiting on its consumer then no longer keeps the event loop alive for the upload.
    pub fn source_ended(&self) {
        if let Some(writer) = self.attempt.borrow_mut().writer() {
            writer.end();
        }
        self.giving(0);
    }

    /// Its response body has ended (or will give nothing more): the exchange's own work keeps
    /// the event loop alive again until it is done.
    fn streamed(&self) {
        if self.streaming.replace(false) {
            self.hold();
        }
    }

    pub fn place(&self) -> Place {
        self.place.get()
    }

    /// It moves to `place` in its pool (see `crate::pool::streams` and the checkout).
    pub fn set_place(&self, place: Place) {
        self.place.set(place);
    }

    /// Its face while it is not over.
    pub fn face(&self) -> Option<&F> {
        (!self.finished.get()).then_some(&self.face)
    }

    /// Tells its face `what`, unless it is over: code that an earlier event ran (a listener
    /// that aborts it) may have ended it, and its handle is gone then.
    pub fn tell(&self, what: impl FnOnce(&F)) {
        if !self.finished.get() {
            what(&self.face);
        }
    }

    /// Holds the event loop for it, unless it is over (an end lets its hold go for good).
    fn hold(&self) {
        if !self.finished.get() {
            self.face.hold();
        }
    }

    /// Its attempts (its streamed body's writer).
    pub fn attempt(&self) -> RefMut<'_, Attempt> {
        self.attempt.borrow_mut()
    }

    /// Its exchange starts at `place`, on a connection that served before (an idle one, or a
    /// stream of a session): what it sends, or None if it has started already.
    pub fn begin(&self, place: Place) -> Option<Spec> {
        let spec = self.attempt.borrow_mut().start(Connection::Reused)?;
        self.place.set(place);
        self.hold();
        if let Some(conn) = place.conn() {
            self.tell(|face| face.sending(self.id, conn, true));
        }
        Some(spec)
    }

    /// Its exchange is to start on a new connection (one that `may_refuse` it, when it may
    /// speak HTTP/2): what it sends, or None if it has started already. [`Request::connects`]
    /// follows with the connection.
    fn connecting(&self, may_refuse: bool) -> Option<Spec> {
        self.attempt
            .borrow_mut()
            .start(Connection::New { may_refuse })
    }

    /// Its new connection `conn` connects: the request is on it.
    fn connects(&self, conn: u32) {
        self.place.set(Place::Conn(conn));
        self.hold();
    }

    /// Its exchange runs, stopped by `exchange`.
    pub fn runs(&self, exchange: Exchange) {
        *self.running.borrow_mut() = Some(exchange);
    }

    /// Stops its exchange, if it runs (its connection or stream closes).
    pub fn stop(&self) {
        if let Some(exchange) = self.running.borrow_mut().take() {
            exchange.stop();
        }
    }

    /// Its exchange runs on its connection from now: its headers deadline starts, when this
    /// thread keeps its timeout.
    pub fn arm<L: Lanes<Face = F>>(&self, lanes: &L) {
        if self.attempt.borrow_mut().arm(Instant::now()) {
            lanes.watch_deadlines();
        }
    }

    /// Its trailers, known now that its body's source has ended.
    pub fn set_trailers(&self, trailers: http::HeaderMap) {
        if let Some(t) = &self.trailers {
            t.set(trailers);
        }
    }

    /// Ends it: the face is let go of. An end reached twice (an abort from a listener of the
    /// event that ends it) ends it once. Guarded by __test__/safety.test.js.
    pub fn finish(&self) {
        if self.finished.replace(true) {
            return;
        }
        self.face.unhold();
        self.face.release(self.id);
    }

    /// Fails it with `err` before any exchange of it is settled: the face is told, and it ends.
    pub fn fail(&self, err: &Error) {
        self.tell(|face| face.error(err));
        self.face.unhold();
        self.tell(|face| face.done(Settled::NONE));
        self.finish();
    }
}

/// An event of `req`'s exchange.
pub fn on_event<L: Lanes>(lanes: &L, req: &Rc<Request<L::Face>>, event: Event) {
    // Aborted meanwhile: a connection that comes back is not reused (the abort closed it).
    if req.finished.get() {
        return;
    }
    match event {
        Event::Info { status, headers } => {
            req.attempt.borrow_mut().informed();
            req.tell(|face| face.info(status, &headers));
        }
        Event::Head {
            status,
            reason,
            headers,
            chunks,
            end,
            done,
        } => {
            req.attempt.borrow_mut().headed(&headers);
            let on_stream = req.place.get().on_stream();
            // The exchange ended with its head: the connection is settled first, so that code
            // the response's end runs finds it back in the pool.
            let settled = done.map(|sender| settle(lanes, req, sender));
            // A body that goes on: nothing of it was asked for yet (the head's chunks came
            // without credit). Counted before the face hears, as the face may ask for more then.
            if end.is_none() && settled.is_none() {
                req.streaming.set(true);
                req.giving(0);
            }
            req.tell(|face| {
                face.head(Headed {
                    status,
                    reason: (!on_stream).then_some(&reason[..]),
                    headers: &headers,
                    chunks: &chunks,
                    trailers: end.as_ref(),
                    settled,
                })
            });
            if settled.is_some() {
                req.finish();
            }
        }
        Event::Data(chunks) => {
            req.giving(chunks.iter().map(Bytes::len).sum());
            req.tell(|face| face.data(&chunks));
        }
        Event::End(trailers) => {
            req.streamed();
            req.tell(|face| face.end(&trailers));
        }
        Event::Error(err) => {
            req.streamed();
            count_failure(lanes, req, &err);
            // A stream's error is its own: its session goes on.
            if let Place::Conn(conn) = req.place.get() {
                lanes.ending(conn, Ending::Failed(&err));
            }
            req.tell(|face| face.error(&err));
        }
        Event::Unsent(err) => {
            count_failure(lanes, req, &err);
            // The keep-alive race: a reused connection died before answering (see
            // `Attempt::unsent`). Its error waits while the request goes again.
            let failed = req.attempt.borrow_mut().unsent(err);
            if let Some(err) = failed {
                req.tell(|face| face.error(&err));
            }
        }
        Event::Refused(err) => {
            // The server did not process it: its session takes no more streams, and the
            // request goes again elsewhere, whatever its method.
            if let Place::Stream(conn) = req.place.get() {
                route::session_draining(lanes, req.key, conn);
            }
            let failed = req.attempt.borrow_mut().refused(err);
            if let Some(err) = failed {
                req.tell(|face| face.error(&err));
            }
        }
        Event::BodyDrain => req.tell(Face::drain),
        Event::Answered => req.tell(Face::answered),
        Event::Done(sender) if req.attempt.borrow().retrying() => {
            let retry = req.attempt.borrow_mut().retry(lanes.drained(req.id));
            match retry {
                Retry::Again { drain } => again(lanes, req, drain),
                // The request fails as it would have without a replay.
                Retry::Fails(err) => {
                    if let Some(err) = err {
                        req.tell(|face| face.error(&err));
                    }
                    on_event(lanes, req, Event::Done(sender));
                }
            }
        }
        Event::Done(sender) => {
            let settled = settle(lanes, req, sender);
            req.tell(|face| face.done(settled));
            req.finish();
        }
    }
}

/// `req`'s attempt is over and it goes again: a request that was on a stream is routed as a
/// new one (the session it met takes no more streams); one that was on a connection of its own
/// retires that connection and opens a new one. A writer held back by the lost connection goes
/// on (`drain`), into the new attempt's body.
fn again<L: Lanes>(lanes: &L, req: &Rc<Request<L::Face>>, drain: bool) {
    req.face.unhold();
    lanes.pool().stats.replay_count += 1;
    match req.place.take() {
        Place::Stream(conn) => {
            req.running.borrow_mut().take();
            route::stream_done(lanes, req.key, conn);
            route::route(lanes, req);
        }
        place => {
            if let Some(conn) = place.conn() {
                moves::retire(lanes, conn);
            }
            connect::open(lanes, req);
        }
    }
    if drain {
        req.tell(Face::drain);
    }
}

/// Counts a failure of `req`'s connection, when it is established and in use (see
/// `Stats::count_failure`). A stream's failure is not its session's: a session counts how it
/// ended when it closes (see `connect::closed`).
fn count_failure<L: Lanes>(lanes: &L, req: &Request<L::Face>, err: &Error) {
    let established = match req.place.get() {
        Place::Conn(conn) => lanes.in_use(conn).is_some(),
        _ => false,
    };
    if established {
        lanes.pool().stats.count_failure(err);
    }
}

/// `req`'s exchange is over: its connection goes back to the pool (with `sender`, if hyper
/// keeps it open) or closes, by the agent's rules (see `moves::settle`). An HTTP/2 stream's end
/// frees a stream, not the connection; one that completed counts as a request, as a released
/// connection does.
fn settle<L: Lanes>(lanes: &L, req: &Request<L::Face>, sender: Option<Sender>) -> Settled {
    // Over: stopping it now would stop what its connection runs next.
    req.running.borrow_mut().take();
    req.face.unhold();
    req.attempt.borrow_mut().over();
    let conn = match req.place.take() {
        Place::Stream(conn) => {
            if sender.is_some() {
                lanes.pool().stats.request_count += 1;
            }
            route::stream_done(lanes, req.key, conn);
            return Settled {
                conn,
                verdict: Verdict::Nothing,
            };
        }
        // The connection is the pool's again: an abort from now on does not close it.
        place => place.conn().unwrap_or(0),
    };
    let wear = lanes.in_use(conn);
    let kept = match (sender, wear) {
        (Some(sender), Some(_)) => {
            lanes.keep(conn, sender);
            true
        }
        _ => false,
    };
    if !kept && conn != 0 {
        lanes.ending(conn, Ending::Reset);
    }
    let hint = req.attempt.borrow().hint();
    // A waiting `agent.request()` takes it here (see `Connections::serve`).
    let verdict = moves::settle(
        lanes,
        conn,
        kept,
        wear.unwrap_or(Wear {
            age: Duration::ZERO,
            requests: 1,
        }),
        hint,
        &lanes.policy(),
        Instant::now(),
    );
    Settled { conn, verdict }
}

/// Aborts `req`: its exchange stops, and what its place holds is undone (its place in the
/// queue or in the wait for a stream, its stream, or its connection, which closes). Returns
/// the verdict of the close (a waiter of `http.request` may connect).
pub fn abort<L: Lanes>(lanes: &L, req: &Request<L::Face>) -> Verdict {
    req.stop();
    let held_back = req
        .attempt
        .borrow_mut()
        .writer()
        .is_some_and(|w| w.held_back());
    req.attempt.borrow_mut().over();
    let place = req.place.take();
    req.finish();
    match place {
        Place::Nowhere => Verdict::Nothing,
        Place::Queued(waiter) => {
            lanes.pool().cancel(waiter);
            Verdict::Nothing
        }
        Place::StreamWait => {
            lanes.sessions().cancel(req.key, u64::from(req.id));
            Verdict::Nothing
        }
        // A stream is reset alone (its task stopped): the session goes on, unless the
        // connection held the request's body back, which would keep the stream open.
        Place::Stream(conn) if held_back => {
            route::stream_abandoned(lanes, req.key, conn);
            Verdict::Nothing
        }
        Place::Stream(conn) => {
            route::stream_done(lanes, req.key, conn);
            Verdict::Nothing
        }
        Place::Conn(conn) => {
            // A connection that requests waited for, closed before it could serve them.
            let abandoned = lanes.take_pending_session(conn);
            lanes.ending(conn, Ending::Aborted);
            let verdict = moves::close(lanes, conn);
            if abandoned {
                route::connect_abandoned(lanes, req.key);
            }
            verdict
        }
    }
}

/// `req`'s headers deadline at `now`: one that passed before the response head fails the
/// request as its exchange would at its own timeout (stopped where it is, as an abort stops
/// it). True while it still runs.
pub fn sweep<L: Lanes>(lanes: &L, req: &Rc<Request<L::Face>>, now: Instant) -> bool {
    let deadline = req.attempt.borrow_mut().sweep(now);
    match deadline {
        Deadline::Unwatched => false,
        Deadline::Running => true,
        Deadline::Passed(t) => {
            req.stop();
            on_event(lanes, req, Event::Error(super::headers_timeout(t)));
            on_event(lanes, req, Event::Done(None));
            false
        }
    }
}

#[cfg(test)]
mod tests;
