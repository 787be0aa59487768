//! A connection's task: it polls hyper's side of the connection and, beside it, the exchange
//! the connection carries (one at a time), with the wakers that let the two meet within one
//! poll of the task, and with the one kind of wake-up hyper's side can skip.
//!
//! An exchange on a reused connection runs in the connection's task rather than in a task of
//! its own ([`ConnWake::queue`]): when hyper's side hands it its response, or it hands hyper's
//! side its request, the other is polled next in the same poll of the task, where separate
//! tasks would each be scheduled and polled once more per request. A wake-up either side
//! gives the other while the task is being polled on its thread only marks the side to poll
//! again; from anywhere else it wakes the task.
//!
//! hyper's response-body channel wakes the connection's side whenever its receiver takes a
//! chunk, even when the connection has already let go of its end of the channel because the
//! body was complete: the poll that follows finds nothing to do. A small response comes with
//! its head in one read, so each such exchange would cost its connection one poll for nothing.
//! An exchange that takes a body to its end without waiting knows that every wake-up it caused
//! meanwhile is of that kind, and holds them back ([`hold`]); any other wake-up reaches the
//! connection's side as usual.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};

use super::Queued;
use crate::pool::ConnEnd;

/// A future the task polls, boxed.
type Boxed = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Shared by a connection's task and its sender: the task's waker, and how many bytes hyper
/// has read from the connection (see [`super::Counted`]).
#[derive(Default)]
pub(super) struct ConnWake {
    task: TaskWaker,
    pub(super) received: AtomicU64,
    /// The connection's first bytes were not the start of an HTTP/1 status line (`HTTP/`):
    /// a server of another protocol, or a TLS port spoken to in plain text (see
    /// [`super::Counted`] and [`super::errors::request_error`]).
    pub(super) not_http: AtomicBool,
    /// An HTTP/2 connection's limit on streams at once (the server's setting).
    pub(super) max_streams: std::sync::atomic::AtomicUsize,
    /// An HTTP/2 server's settings have come: `max_streams` is its own, no longer the
    /// protocol's assumed limit (stored after it, with `Release`).
    pub(super) heard: AtomicBool,
    /// Set by the stream when a write took the last of a backlog (see [`run`]).
    pub(super) drained: AtomicBool,
    /// A write found the connection closed or reset by the peer: what it sent before is still
    /// read, and the connection never carries another request (see [`super::Counted`]).
    pub(super) write_failed: AtomicBool,
    /// The connection is given up: its task drops it at once (see [`ConnWake::cut`]).
    cut: AtomicBool,
    /// The exchange is stopped: the task drops it (see [`ConnWake::stop`]).
    stop: AtomicBool,
    /// hyper's side was woken during the task's poll, on its thread.
    conn_woken: AtomicBool,
    /// The exchange was woken.
    exchange_woken: AtomicBool,
    /// The exchange queued for the task to start.
    next: Mutex<Next>,
    /// An HTTP/2 connection's requests' tasks, aborted when it is cut while hyper's side runs
    /// (see [`super::handshake`]'s `Spawned`).
    pub(super) spawned: Option<Arc<super::handshake::Spawned>>,
    /// The TLS error hyper's side ended with (an alert from the server), which a request it
    /// never took fails with rather than hyper's "closed" (see [`ConnWake::failure`]).
    failure: Mutex<Option<crate::error::Error>>,
    /// How hyper's side ended (a [`ConnEnd`]'s number; see [`ConnWake::end`]).
    end: AtomicU8,
}

#[derive(Default)]
struct Next {
    queued: Option<Queued>,
    /// hyper's side has ended: the task takes no more exchanges.
    closed: bool,
}

impl ConnWake {
    /// An HTTP/2 connection's, whose requests' tasks are kept in `spawned`.
    pub(super) fn spawning(spawned: Arc<super::handshake::Spawned>) -> ConnWake {
        ConnWake {
            spawned: Some(spawned),
            ..ConnWake::default()
        }
    }

    /// Notes how hyper's side of the connection ended (see [`super::errors::conn_end`]), and
    /// with which TLS error, when one ended it.
    pub(super) fn ended(&self, result: Result<(), hyper::Error>) {
        let Err(err) = result else { return };
        self.end
            .store(super::errors::conn_end(&err) as u8, Ordering::Release);
        if let Some(err) = super::errors::tls_failure(&err) {
            *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(err);
        }
    }

    /// How hyper's side of the connection ended: closed, unless [`ConnWake::ended`] heard of
    /// an error (a connection cut was closed by the pool).
    fn end(&self) -> ConnEnd {
        match self.end.load(Ordering::Acquire) {
            e if e == ConnEnd::Failed as u8 => ConnEnd::Failed,
            e if e == ConnEnd::TimedOut as u8 => ConnEnd::TimedOut,
            _ => ConnEnd::Closed,
        }
    }

    /// The TLS error hyper's side of the connection ended with, if a TLS error ended it.
    pub(super) fn failure(&self) -> Option<crate::error::Error> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Gives the connection up: its task stops polling it and drops it, which closes it
    /// without hyper's graceful end. That end first sends what hyper still holds of a request,
    /// and would wait, holding the connection and the request's body, for as long as the
    /// server reads none of it (an aborted upload, a server that answered and stopped reading).
    pub(super) fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        self.task.wake();
    }

    /// Stops the exchange the task runs (or will start) and gives the connection up.
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.cut();
    }

    /// Hands `exchange` to the connection's task, which starts it once the one it runs is
    /// over and the task is woken ([`crate::runtime::wake_soon`]); it comes back when the task
    /// takes no more (hyper's side has ended).
    // What comes back is the exchange as given: boxing it would allocate for every request.
    #[allow(clippy::result_large_err)]
    pub(super) fn queue(&self, exchange: Queued) -> Result<(), Queued> {
        {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            if next.closed || next.queued.is_some() {
                return Err(exchange);
            }
            next.queued = Some(exchange);
        }
        self.exchange_woken.store(true, Ordering::Release);
        Ok(())
    }

    /// The queued exchange, if any; `close` marks the task as taking no more.
    fn take_next(&self, close: bool) -> Option<Queued> {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        next.closed |= close;
        next.queued.take()
    }

    /// Wakes hyper's side: a mark when the task is being polled on this thread.
    fn wake_conn(&self) {
        if std::ptr::eq(POLLING.with(Cell::get), self) {
            self.conn_woken.store(true, Ordering::Relaxed);
        } else {
            self.task.wake();
        }
    }
}

thread_local! {
    /// The connection whose wake-ups this thread holds back (null: none), and whether one
    /// came meanwhile.
    static HELD: Cell<(*const ConnWake, bool)> = const { Cell::new((std::ptr::null(), false)) };
    /// The connection whose task this thread is polling (null: none).
    static POLLING: Cell<*const ConnWake> = const { Cell::new(std::ptr::null()) };
}

/// The connection's task, woken for an exchange queued from another thread.
impl crate::runtime::Wake for ConnWake {
    fn wake(&self) {
        self.task.wake();
    }
}

/// hyper's side's waker.
impl Wake for ConnWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let me = Arc::as_ptr(self);
        let held = HELD.with(|h| {
            let (who, _) = h.get();
            if who == me {
                h.set((who, true));
            }
            who == me
        });
        if !held {
            self.wake_conn();
        }
    }
}

/// The connection task's waker, kept from its first poll: a task spawned on tokio is polled with
/// the same waker all its life, so it is not registered again at each poll (two locked
/// instructions each time, with an `AtomicWaker`), and a wake-up leaves it in place.
#[derive(Default)]
struct TaskWaker(OnceLock<Waker>);

impl TaskWaker {
    /// Keeps the waker of the task's first poll. The fence pairs with the one in
    /// [`TaskWaker::wake`]: a wake-up that came before finds the waker, or the poll that follows
    /// this finds what the wake-up marked.
    fn register(&self, waker: &Waker) {
        match self.0.get() {
            Some(kept) => debug_assert!(kept.will_wake(waker), "polled with another waker"),
            None => {
                let _ = self.0.set(waker.clone());
                fence(Ordering::SeqCst);
            }
        }
    }

    fn wake(&self) {
        if let Some(waker) = self.0.get() {
            return waker.wake_by_ref();
        }
        // Not polled yet, or being polled for the first time: see `register`.
        fence(Ordering::SeqCst);
        if let Some(waker) = self.0.get() {
            waker.wake_by_ref();
        }
    }
}

/// The exchange's waker.
struct ExchangeWake(Arc<ConnWake>);

impl Wake for ExchangeWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let conn = &*self.0;
        conn.exchange_woken.store(true, Ordering::Release);
        if !std::ptr::eq(POLLING.with(Cell::get), conn) {
            conn.task.wake();
        }
    }
}

/// Marks the task's poll on this thread for as long as it lasts.
struct Polling(*const ConnWake);

impl Polling {
    fn enter(wake: &ConnWake) -> Polling {
        Polling(POLLING.with(|p| p.replace(wake)))
    }
}

impl Drop for Polling {
    fn drop(&mut self) {
        POLLING.with(|p| p.set(self.0));
    }
}

/// How many times in a row [`run`] polls the two sides within one poll of its task, before
/// it lets other tasks have a turn.
const ROUNDS: usize = 8;

/// Runs a connection: `conn` (hyper's side of it) and the exchanges queued to it (see
/// [`ConnWake::queue`]), each polled with a waker of its own that reaches the task. `closed`
/// is called with how hyper's side ended when it ends (or is cut); an exchange still running
/// then (it will find the connection gone) runs on, and the task ends with it.
///
/// hyper's connection asks for the next request only from its write step, and only once its
/// write queue is empty; when the last of a backlog goes out in the flush that ends its poll
/// instead (a body given whole, larger than its write buffer, whose response came before it
/// had all gone: a server that answers first and reads the upload after), it returns without
/// anything left to wake it: the exchange waits for a connection that is free, until the
/// server closes it. So a poll in which a backlog went out is followed by another at once,
/// which finds the queue empty and asks for the next request.
///
/// A connection that is cut ([`ConnWake::cut`]) is dropped as it is, before it is polled
/// again.
pub(super) fn run(
    conn: Boxed,
    wake: Arc<ConnWake>,
    closed: impl FnOnce(ConnEnd) + Send + 'static,
) -> impl Future<Output = ()> + Send {
    let conn_waker = Waker::from(wake.clone());
    let exchange_waker = Waker::from(Arc::new(ExchangeWake(wake.clone())));
    let mut conn = Some(conn);
    let mut closed = Some(closed);
    let mut current: Option<Boxed> = None;
    std::future::poll_fn(move |cx| {
        // Registered before the flags are read: a cut or a queued exchange after the reads
        // wakes this registration.
        wake.task.register(cx.waker());
        let _polling = Polling::enter(&wake);
        if wake.stop.load(Ordering::Acquire) {
            current = None;
            drop(wake.take_next(true));
        }
        let mut poll_conn = true;
        let mut poll_exchange = take_shared(&wake.exchange_woken);
        for _ in 0..ROUNDS {
            if conn.is_some() && wake.cut.load(Ordering::Acquire) {
                conn = None;
                if let Some(spawned) = &wake.spawned {
                    spawned.abort();
                }
                if let Some(closed) = closed.take() {
                    closed(wake.end());
                }
            }
            // A queued exchange marks the exchange's side.
            if current.is_none() && poll_exchange {
                if let Some(queued) = wake.take_next(conn.is_none()) {
                    current = Some(queued.start());
                    poll_exchange = true;
                }
            }
            // A side's mark is cleared as it is polled: only a wake-up from then on asks for
            // another poll.
            if poll_exchange {
                take_shared(&wake.exchange_woken);
                ended(&mut current, &exchange_waker);
            }
            if poll_conn {
                take_local(&wake.conn_woken);
            }
            if poll_conn && ended(&mut conn, &conn_waker) {
                if let Some(closed) = closed.take() {
                    closed(wake.end());
                }
            }
            // Only this task's stream sets it.
            let drained = take_local(&wake.drained);
            poll_conn = conn.is_some() && (take_local(&wake.conn_woken) || drained);
            poll_exchange = take_shared(&wake.exchange_woken);
            if !poll_conn && !poll_exchange {
                if current.is_some() || conn.is_some() {
                    return Poll::Pending;
                }
                // hyper's side is gone, and no exchange runs: one queued before it ended
                // still starts (and finds the connection gone), or the task is over.
                let next = wake.take_next(true);
                if next.is_none() {
                    return Poll::Ready(());
                }
                current = next.map(Queued::start);
                poll_exchange = true;
            }
        }
        // Sides that keep waking each other: the task runs again after others have had a turn.
        cx.waker().wake_by_ref();
        Poll::Pending
    })
}

/// Takes a mark only this thread sets: a plain load and store do (no locked instruction).
fn take_local(mark: &AtomicBool) -> bool {
    let set = mark.load(Ordering::Relaxed);
    if set {
        mark.store(false, Ordering::Relaxed);
    }
    set
}

/// Takes a mark other threads set too: a swap (which makes what they did before it visible
/// here) only when it is set; a mark set just after the load stays for the next look, and its
/// wake-up polls the task again.
fn take_shared(mark: &AtomicBool) -> bool {
    mark.load(Ordering::Relaxed) && mark.swap(false, Ordering::AcqRel)
}

/// Polls `side`, if there is one, with `waker`: whether it ended (and is dropped). A side that
/// panics (a bug; the panic is reported as any other) has ended: the other goes on, so that an
/// exchange's panic still ends its connection as hyper ends it (its sender let go of) and the
/// pool hears of it, as when the exchange had a task of its own.
fn ended(side: &mut Option<Boxed>, waker: &Waker) -> bool {
    let Some(future) = side.as_mut() else {
        return false;
    };
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        future.as_mut().poll(&mut Context::from_waker(waker))
    }));
    let over = !matches!(polled, Ok(Poll::Pending));
    if over {
        *side = None;
    }
    over
}

/// Calls `take` with the wake-ups of `wake`'s connection held back on this thread. `take`
/// returns its result and whether every wake-up it caused is of the kind that finds nothing to
/// do (it took a body to its end, hyper's side of the channel already gone); if not, or if it
/// panics, a held wake-up goes on to hyper's side. Synchronous, so that nothing else runs on
/// this thread while wake-ups are held.
pub(super) fn hold<T>(wake: &Arc<ConnWake>, take: impl FnOnce() -> (T, bool)) -> T {
    struct Release<'a> {
        wake: &'a ConnWake,
        before: (*const ConnWake, bool),
        stale: bool,
    }
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            let (_, missed) = HELD.with(|h| h.replace(self.before));
            if missed && !self.stale {
                self.wake.wake_conn();
            }
        }
    }
    let before = HELD.with(|h| h.replace((Arc::as_ptr(wake), false)));
    let mut release = Release {
        wake,
        before,
        stale: false,
    };
    let (out, stale) = take();
    release.stale = stale;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its wake-ups: the connection task's own waker, as the runtime would give it.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A connection's waker (as hyper holds it) registered with a counting task waker.
    fn registered() -> (Arc<ConnWake>, Waker, Arc<Count>) {
        let wake = Arc::new(ConnWake::default());
        let count = Arc::new(Count::default());
        wake.task.register(&Waker::from(count.clone()));
        (wake.clone(), Waker::from(wake), count)
    }

    fn woken(count: &Count) -> usize {
        count.0.load(Ordering::SeqCst)
    }

    #[test]
    fn a_side_that_panics_has_ended() {
        let (_, waker, _) = registered();
        let mut side: Option<Boxed> = Some(Box::pin(async { panic!("a bug in a side") }));
        assert!(ended(&mut side, &waker));
        assert!(side.is_none());
        let mut pending: Option<Boxed> = Some(Box::pin(std::future::pending()));
        assert!(!ended(&mut pending, &waker));
        assert!(pending.is_some());
    }

    #[test]
    fn the_task_waker_is_kept_from_the_first_poll_on() {
        let task = TaskWaker::default();
        // Before the first poll: nothing to wake (that poll reads the marks).
        task.wake();
        let count = Arc::new(Count::default());
        task.register(&Waker::from(count.clone()));
        // Each wake-up reaches it, without registering again.
        task.wake();
        task.wake();
        assert_eq!(woken(&count), 2);
        task.register(&Waker::from(count.clone()));
        task.wake();
        assert_eq!(woken(&count), 3);
    }

    #[test]
    fn a_wake_outside_a_hold_reaches_the_task() {
        let (_, hyper_side, count) = registered();
        hyper_side.wake_by_ref();
        assert_eq!(woken(&count), 1);
    }

    #[test]
    fn a_hold_that_finds_its_wakes_stale_drops_them() {
        let (wake, hyper_side, count) = registered();
        let out = hold(&wake, || {
            hyper_side.wake_by_ref();
            hyper_side.wake_by_ref();
            ("taken", true)
        });
        assert_eq!(out, "taken");
        assert_eq!(woken(&count), 0);
        // The hold is over: the next wake-up goes through.
        wake.task.register(&Waker::from(count.clone()));
        hyper_side.wake_by_ref();
        assert_eq!(woken(&count), 1);
    }

    #[test]
    fn a_hold_that_does_not_find_them_stale_passes_one_on() {
        let (wake, hyper_side, count) = registered();
        hold(&wake, || {
            hyper_side.wake_by_ref();
            hyper_side.wake_by_ref();
            assert_eq!(woken(&count), 0);
            ((), false)
        });
        assert_eq!(woken(&count), 1);
        // Nothing came: nothing to pass on.
        let (wake, _, count) = registered();
        hold(&wake, || ((), false));
        assert_eq!(woken(&count), 0);
    }

    #[test]
    fn a_hold_is_for_its_own_connection_on_its_own_thread() {
        let (wake, _, _) = registered();
        let (_, other, other_count) = registered();
        let (_, remote, remote_count) = registered();
        let (same, same_remote, same_count) = registered();
        hold(&wake, || {
            other.wake_by_ref();
            assert_eq!(
                woken(&other_count),
                1,
                "another connection's wake-up is not held"
            );
            std::thread::spawn(move || remote.wake()).join().unwrap();
            assert_eq!(woken(&remote_count), 1);
            ((), true)
        });
        hold(&same, || {
            std::thread::spawn(move || same_remote.wake())
                .join()
                .unwrap();
            assert_eq!(
                woken(&same_count),
                1,
                "another thread's wake-up is not held"
            );
            ((), true)
        });
    }

    #[test]
    fn a_hold_ended_by_a_panic_passes_its_wake_on() {
        let (wake, hyper_side, count) = registered();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            hold(&wake, || -> ((), bool) {
                hyper_side.wake_by_ref();
                panic!("in the middle of a hold");
            })
        }));
        assert!(caught.is_err());
        assert_eq!(woken(&count), 1);
        // And the thread holds nothing any more.
        wake.task.register(&Waker::from(count.clone()));
        hyper_side.wake_by_ref();
        assert_eq!(woken(&count), 2);
    }

    #[test]
    fn holds_nest() {
        let (outer, outer_side, outer_count) = registered();
        let (inner, inner_side, inner_count) = registered();
        hold(&outer, || {
            hold(&inner, || {
                inner_side.wake_by_ref();
                ((), true)
            });
            outer_side.wake_by_ref();
            ((), false)
        });
        assert_eq!(woken(&inner_count), 0);
        assert_eq!(woken(&outer_count), 1);
    }
}
