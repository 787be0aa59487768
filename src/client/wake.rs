//! The waker hyper's side of a connection is polled with, and the one kind of wake-up it can
//! skip.
//!
//! hyper's response-body channel wakes the connection's task whenever its receiver takes a
//! chunk, even when the connection has already let go of its end of the channel because the
//! body was complete: the poll that follows finds nothing to do. A small response comes with
//! its head in one read, so each such exchange would cost its connection one poll for nothing.
//! An exchange that takes a body to its end without waiting knows that every wake-up it caused
//! meanwhile is of that kind, and holds them back ([`hold`]); any other wake-up reaches the
//! task as usual.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use atomic_waker::AtomicWaker;

/// Shared by a connection's task and its sender: the task's waker, as of its latest poll, and
/// how many bytes hyper has read from the connection (see [`super::Counted`]).
#[derive(Default)]
pub(super) struct ConnWake {
    task: AtomicWaker,
    pub(super) received: AtomicU64,
    /// Set by the stream when a write took the last of a backlog (see [`run`]).
    pub(super) drained: AtomicBool,
    /// The connection is given up: its task drops it at once (see [`ConnWake::cut`]).
    cut: AtomicBool,
}

impl ConnWake {
    /// Gives the connection up: its task stops polling it and drops it, which closes it
    /// without hyper's graceful end. That end first sends what hyper still holds of a request,
    /// and would wait, holding the connection and the request's body, for as long as the
    /// server reads none of it (an aborted upload, a server that answered and stopped reading).
    pub(super) fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        self.task.wake();
    }
}

thread_local! {
    /// The connection whose wake-ups this thread holds back (null: none), and whether one
    /// came meanwhile.
    static HELD: Cell<(*const ConnWake, bool)> = const { Cell::new((std::ptr::null(), false)) };
}

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
            self.task.wake();
        }
    }
}

/// How many times in a row [`run`] polls a connection whose write backlog went out.
const DRAINED_POLLS: usize = 4;

/// Runs `conn` (hyper's connection future) polled with a waker of `wake`'s, which forwards
/// to the task running it.
///
/// hyper's connection asks for the next request only from its write step, and only once its
/// write queue is empty; when the last of a backlog goes out in the flush that ends its poll
/// instead (a body given whole, larger than its write buffer, whose response came before it
/// had all gone: a server that answers first and reads the upload after), it returns without
/// anything left to wake it: the exchange waits for a connection that is free, until the
/// server closes it. So a poll in which a backlog went out is followed by another at once,
/// which finds the queue empty and asks for the next request.
///
/// A connection that is cut ([`ConnWake::cut`]) is dropped as it is: `None`.
pub(super) async fn run<F: Future>(conn: F, wake: Arc<ConnWake>) -> Option<F::Output> {
    let waker = Waker::from(wake.clone());
    let mut conn = std::pin::pin!(conn);
    std::future::poll_fn(|cx| {
        // Registered before the flag is read: a cut after the read wakes this registration.
        wake.task.register(cx.waker());
        if wake.cut.load(Ordering::Acquire) {
            return Poll::Ready(None);
        }
        let mut inner = Context::from_waker(&waker);
        for _ in 0..DRAINED_POLLS {
            let polled = conn.as_mut().poll(&mut inner);
            // Only this task's stream sets it: a plain load and store do.
            if polled.is_ready() || !wake.drained.load(Ordering::Relaxed) {
                return polled.map(Some);
            }
            wake.drained.store(false, Ordering::Relaxed);
        }
        // Backlogs that keep going out: the task runs again after others have had a turn.
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// Calls `take` with the wake-ups of `wake`'s connection held back on this thread. `take`
/// returns its result and whether every wake-up it caused is of the kind that finds nothing to
/// do (it took a body to its end, hyper's side of the channel already gone); if not, or if it
/// panics, a held wake-up goes on to the task. Synchronous, so that nothing else runs on this
/// thread while wake-ups are held.
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
                self.wake.task.wake();
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
