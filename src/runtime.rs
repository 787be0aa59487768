//! The process-wide tokio runtime that connects, resolves and (later) speaks TLS and HTTP.
//!
//! One worker thread: on a loaded machine the JavaScript thread needs a core of its own, and a
//! single worker avoids the wake-ups between workers that cost more than the work they carry.
//! DNS lookups run on tokio's blocking pool (`getaddrinfo` blocks), bounded like libuv's pool.
//! The runtime's threads never keep Node alive: Node waits on its own handles, not on these.
//! The worker defers the wake-ups of JavaScript threads until it parks (see [`defer_wake`]),
//! and a JavaScript thread holds the wake-ups of tasks it gives work until its loop's turn
//! ends (see [`wake_soon`]): each side wakes the other once for a batch, not once per request.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::runtime::{Builder, Runtime};

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

pub fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(8)
            .thread_name("hyperagent-io")
            .on_thread_unpark(|| {
                PARKING.with(|p| {
                    p.borrow_mut().get_or_insert_with(Vec::new);
                })
            })
            .on_thread_park(wake_deferred)
            .enable_all()
            .build()
            .expect("hyperagent: cannot start the tokio runtime")
    })
}

/// Something to wake once the worker has nothing left to run: a JavaScript thread's loop.
pub trait Wake: Send + Sync {
    fn wake(&self);
}

thread_local! {
    /// On a JavaScript thread whose loop releases them (see [`hold_wakes`]): the wake-ups of
    /// tasks given since the loop's last turn.
    static HELD: Held = const { RefCell::new(None) };
    /// On such a thread: the tasks given to [`spawn_soon`] since the loop's last turn.
    static SPAWNS: RefCell<Vec<(Boxed, Spawned)>> = const { RefCell::new(Vec::new()) };
    /// On a worker (set when it first unparks): the wake-ups deferred until it parks again.
    static PARKING: Held = const { RefCell::new(None) };
}

/// Whether the calling thread is a worker of the runtime that has parked before (and so will
/// again, calling the wake-ups given to [`defer_wake`]).
pub fn on_worker() -> bool {
    PARKING.with(|p| p.borrow().is_some())
}

/// Defers `wake` until the calling thread, a worker of the runtime (see [`on_worker`]), is
/// about to park; on any other thread, wakes at once. A worker parks when it has run every
/// task that was ready, so what one of its turns completes reaches the woken thread in one
/// batch.
pub fn defer_wake(wake: Arc<dyn Wake>) {
    hold_or_wake(&PARKING, wake);
}

/// The calling thread (a JavaScript thread) holds the wake-ups of tasks given to
/// [`wake_soon`] until its loop calls [`release_held`], which it does before it waits for
/// I/O.
pub fn hold_wakes() {
    HELD.with(|h| {
        h.borrow_mut().get_or_insert_with(Vec::new);
    });
}

/// Wakes a task, at once or, on a thread that holds them ([`hold_wakes`]), with the others
/// of its loop's turn: the worker is woken once for them all, and not in the middle of the
/// JavaScript that gives them.
pub fn wake_soon(wake: Arc<dyn Wake>) {
    hold_or_wake(&HELD, wake);
}

type Held = RefCell<Option<Vec<Arc<dyn Wake>>>>;

/// Puts `wake` on the calling thread's `list` while it keeps one; wakes it at once otherwise.
fn hold_or_wake(list: &'static std::thread::LocalKey<Held>, wake: Arc<dyn Wake>) {
    let rest = list.with(|l| match l.borrow_mut().as_mut() {
        Some(held) => {
            held.push(wake);
            None
        }
        None => Some(wake),
    });
    if let Some(wake) = rest {
        wake.wake();
    }
}

/// A future for the runtime to run, boxed.
pub type Boxed = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A task given to [`spawn_soon`], spawned or still held: what aborts it.
#[derive(Clone, Default)]
pub struct Spawned(Arc<Mutex<Slot>>);

#[derive(Default)]
struct Slot {
    aborted: bool,
    /// Once spawned.
    task: Option<tokio::task::AbortHandle>,
}

impl Spawned {
    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Aborts the task: a spawned one as tokio aborts it, a held one is never spawned.
    pub fn abort(&self) {
        let mut slot = self.slot();
        slot.aborted = true;
        if let Some(task) = slot.task.take() {
            task.abort();
        }
    }

    /// Spawns `future` on the runtime (on the worker's own queue when called from a task of
    /// it), unless the task was aborted meanwhile.
    fn spawn(&self, future: Boxed) {
        let mut slot = self.slot();
        if slot.aborted {
            return;
        }
        slot.task = Some(runtime().spawn(future).abort_handle());
    }
}

/// Spawns `future` on the runtime: at once or, on a thread that holds its wake-ups
/// ([`hold_wakes`]), with the other work of its loop's turn, in one wake-up of the worker.
/// Boxed by the caller: a future that is a box already (an exchange's) is not boxed again.
pub fn spawn_soon(future: Boxed) -> Spawned {
    let spawned = Spawned::default();
    let holding = HELD.with(|h| h.borrow().is_some());
    if holding {
        SPAWNS.with(|s| s.borrow_mut().push((future, spawned.clone())));
    } else {
        spawned.spawn(future);
    }
    spawned
}

/// Wakes the tasks held since the last call and spawns those given meanwhile, with one
/// wake-up of the worker.
pub fn release_held() {
    let list = HELD.with(|h| h.borrow_mut().as_mut().map(std::mem::take));
    let spawns = SPAWNS.with(|s| std::mem::take(&mut *s.borrow_mut()));
    release(list.unwrap_or_default(), spawns);
}

/// The calling thread holds wake-ups no more (its loop is going away): those it held are
/// released.
pub fn stop_holding() {
    let list = HELD.with(|h| h.borrow_mut().take());
    let spawns = SPAWNS.with(|s| std::mem::take(&mut *s.borrow_mut()));
    release(list.unwrap_or_default(), spawns);
}

/// Spawns `spawns` and wakes `wakes` with one wake-up of the worker: one task is woken as it
/// is, more from a task on the worker, where spawning and waking wake nothing more.
fn release(wakes: Vec<Arc<dyn Wake>>, spawns: Vec<(Boxed, Spawned)>) {
    match (wakes.len(), spawns.len()) {
        (0, 0) => {}
        (1, 0) => wakes.into_iter().for_each(|w| w.wake()),
        _ => {
            runtime().spawn(async move {
                for (future, spawned) in spawns {
                    spawned.spawn(future);
                }
                for wake in wakes {
                    wake.wake();
                }
            });
        }
    }
}

fn wake_deferred() {
    let list = PARKING.with(|p| p.borrow_mut().as_mut().map(std::mem::take));
    for wake in list.into_iter().flatten() {
        wake.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Sends on a channel when woken.
    struct Signal(std::sync::Mutex<mpsc::Sender<&'static str>>);

    impl Wake for Signal {
        fn wake(&self) {
            let _ = self.0.lock().unwrap().send("woken");
        }
    }

    fn signal() -> (Arc<Signal>, mpsc::Receiver<&'static str>) {
        let (tx, rx) = mpsc::channel();
        (Arc::new(Signal(std::sync::Mutex::new(tx))), rx)
    }

    #[test]
    fn a_thread_that_holds_wakes_releases_them_together() {
        // Each test runs on a thread of its own: this one holds.
        let (first, first_woken) = signal();
        let (second, second_woken) = signal();
        wake_soon(first.clone());
        assert_eq!(
            first_woken.try_recv(),
            Ok("woken"),
            "not holding yet: at once"
        );
        hold_wakes();
        wake_soon(first.clone());
        wake_soon(second);
        assert!(first_woken.try_recv().is_err() && second_woken.try_recv().is_err());
        release_held();
        let wait = Duration::from_secs(10);
        assert_eq!(first_woken.recv_timeout(wait), Ok("woken"));
        assert_eq!(second_woken.recv_timeout(wait), Ok("woken"));
        // Released once: a second release has nothing to wake.
        release_held();
        assert!(first_woken.try_recv().is_err());

        // One held alone is woken as it is; a thread that stops holding releases what it held
        // and wakes at once from then on.
        let (third, third_woken) = signal();
        wake_soon(third.clone());
        assert!(third_woken.try_recv().is_err());
        stop_holding();
        assert_eq!(third_woken.try_recv(), Ok("woken"));
        wake_soon(third);
        assert_eq!(third_woken.try_recv(), Ok("woken"));
    }

    #[test]
    fn a_thread_that_holds_wakes_spawns_its_tasks_at_the_release_and_none_aborted_before() {
        let (tx, rx) = mpsc::channel();
        let run = |name: &'static str| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(name);
            }
        };
        hold_wakes();
        let _kept = spawn_soon(Box::pin(run("kept")));
        let aborted = spawn_soon(Box::pin(run("aborted")));
        aborted.abort();
        assert!(rx.try_recv().is_err(), "held until the release");
        release_held();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok("kept"));
        // A task that never ends, aborted once spawned: its future is dropped.
        let (dropped_tx, dropped) = mpsc::channel::<()>();
        let endless = spawn_soon(Box::pin(async move {
            let _guard = dropped_tx;
            std::future::pending::<()>().await;
        }));
        release_held();
        endless.abort();
        assert_eq!(
            dropped.recv_timeout(Duration::from_secs(10)),
            Err(mpsc::RecvTimeoutError::Disconnected)
        );
        stop_holding();
        // Not holding: spawned at once.
        let _now = spawn_soon(Box::pin(run("now")));
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok("now"));
        assert!(rx.try_recv().is_err(), "the aborted task never ran");
    }

    #[test]
    fn off_the_runtime_a_wake_is_at_once() {
        let (wake, woken) = signal();
        assert!(!on_worker());
        defer_wake(wake);
        assert_eq!(woken.try_recv(), Ok("woken"));
    }

    #[test]
    fn on_the_worker_a_wake_waits_for_its_park() {
        let rt = runtime();
        // The worker counts as one once it has parked and been woken for a task.
        let mut tries = 0;
        while !rt.block_on(rt.spawn(async { on_worker() })).unwrap() {
            tries += 1;
            assert!(tries < 1000, "the runtime's worker never parked");
        }
        let (wake, woken) = signal();
        let (early, woken) = rt
            .block_on(rt.spawn(async move {
                defer_wake(wake);
                // Still running (after a yield, too): the wake-up waits for the worker to run
                // out of tasks.
                tokio::task::yield_now().await;
                (woken.try_recv().ok(), woken)
            }))
            .unwrap();
        assert_eq!(early, None);
        assert_eq!(woken.recv_timeout(Duration::from_secs(10)), Ok("woken"));
    }
}
