//! A mailbox from the runtime's threads to one other thread (a JavaScript thread's loop): what
//! tokio finishes is posted here, and the other thread, signalled, takes everything queued at
//! once. So many results cost one signal, and the queue never grows without bound because each
//! item is the end of an operation the other thread started.
//!
//! The signal is deferred on the runtime's worker: posted during one of its turns, items cross
//! in one batch when the worker is about to park (see [`crate::runtime::defer_wake`]), instead
//! of the other thread being woken (and, on a shared core, switched to) for the first of them.
//! A worker kept busy signals all the same at a post that finds [`DEFER_MAX`] items queued, or
//! the first of them queued for [`DEFER_FOR`]; without further posts, the queued ones wait for
//! the end of the turn.
//!
//! Once [`Mailbox::close`] has returned, the signal is never called again and no call of it
//! is still running, so its owner may free what it signals (a libuv handle).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::runtime;

/// Items, and time, after which a worker that has not parked signals all the same.
pub const DEFER_MAX: usize = 64;
pub const DEFER_FOR: Duration = Duration::from_micros(200);

/// How the receiving thread is told that items wait: called from any thread.
pub trait Signal: Send + Sync {
    fn signal(&self);
}

struct State<T> {
    items: Vec<T>,
    /// `None` until attached, and once closed.
    signal: Option<Arc<dyn Signal>>,
    /// When the signal of the queued items was deferred to the worker's park (see
    /// [`Mailbox::post`]); `None` once signalled.
    deferred: Option<Instant>,
}

/// The sending side, shared with tokio's tasks; the receiving thread takes the items with
/// [`Mailbox::swap`].
pub struct Mailbox<T> {
    state: Mutex<State<T>>,
    /// Signals running outside the lock (see `signal_locked`); `close` waits for them.
    signalling: AtomicUsize,
}

impl<T: Send + 'static> Default for Mailbox<T> {
    fn default() -> Self {
        Mailbox {
            state: Mutex::new(State {
                items: Vec::new(),
                signal: None,
                deferred: None,
            }),
            signalling: AtomicUsize::new(0),
        }
    }
}

impl<T: Send + 'static> Mailbox<T> {
    /// Posts are delivered, and signalled with `signal`, from now on (they were dropped
    /// before).
    pub fn attach(&self, signal: Arc<dyn Signal>) {
        self.lock().signal = Some(signal);
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `item` and signals the receiving thread, at once or, on the runtime's worker,
    /// when its turn ends (see the module's note). Unattached or closed, the item is dropped.
    pub fn post(self: &Arc<Self>, item: T) {
        let mut state = self.lock();
        if state.signal.is_none() {
            return;
        }
        let first = state.items.is_empty();
        state.items.push(item);
        let defer = if first {
            runtime::on_worker()
        } else {
            match state.deferred {
                // Signalled already, not taken yet.
                None => return,
                Some(since) => state.items.len() < DEFER_MAX && since.elapsed() < DEFER_FOR,
            }
        };
        if defer {
            if first {
                state.deferred = Some(Instant::now());
                drop(state);
                runtime::defer_wake(self.clone());
            }
            return;
        }
        self.signal_locked(state);
    }

    fn signal_locked(&self, mut state: MutexGuard<'_, State<T>>) {
        state.deferred = None;
        let Some(signal) = state.signal.clone() else {
            return;
        };
        // Signalled after the lock is released: the signal may switch this core to the
        // receiving thread at once, which then takes the items without waiting for us.
        self.signalling.fetch_add(1, Ordering::AcqRel);
        drop(state);
        signal.signal();
        drop(signal);
        self.signalling.fetch_sub(1, Ordering::AcqRel);
    }

    /// Stops later posts and waits for the signals running; the signal is dropped. Items
    /// queued stay for [`Mailbox::swap`].
    pub fn close(&self) {
        let signal = self.lock().signal.take();
        while self.signalling.load(Ordering::Acquire) != 0 {
            std::thread::yield_now();
        }
        drop(signal);
    }

    /// The queued items, leaving `spare` (empty) to queue the next ones in.
    pub fn swap(&self, spare: Vec<T>) -> Vec<T> {
        debug_assert!(spare.is_empty());
        std::mem::replace(&mut self.lock().items, spare)
    }
}

impl<T: Send + 'static> runtime::Wake for Mailbox<T> {
    fn wake(&self) {
        self.signal_locked(self.lock());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    /// Tells a channel of each signal.
    struct Told(Mutex<mpsc::Sender<()>>);

    impl Signal for Told {
        fn signal(&self) {
            let _ = self.0.lock().unwrap().send(());
        }
    }

    fn mailbox() -> (Arc<Mailbox<u32>>, mpsc::Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        let mailbox = Arc::new(Mailbox::default());
        mailbox.attach(Arc::new(Told(Mutex::new(tx))));
        (mailbox, rx)
    }

    /// Runs `f` on the runtime's worker once it counts as one (it has parked before).
    fn on_the_worker<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
        let rt = runtime::runtime();
        let mut tries = 0;
        while !rt
            .block_on(rt.spawn(async { runtime::on_worker() }))
            .unwrap()
        {
            tries += 1;
            assert!(tries < 1000, "the runtime's worker never parked");
        }
        rt.block_on(rt.spawn(async move { f() })).unwrap()
    }

    #[test]
    fn off_the_worker_each_batch_is_signalled_at_once_and_taken_whole() {
        let (mailbox, told) = mailbox();
        mailbox.post(1);
        assert_eq!(told.try_recv(), Ok(()));
        // Not taken yet: a second post adds to the batch signalled already.
        mailbox.post(2);
        assert!(told.try_recv().is_err());
        assert_eq!(mailbox.swap(Vec::new()), vec![1, 2]);
        mailbox.post(3);
        assert_eq!(told.try_recv(), Ok(()));
        assert_eq!(mailbox.swap(Vec::new()), vec![3]);
    }

    #[test]
    fn on_the_worker_a_turns_posts_are_signalled_once_when_it_ends() {
        let (mailbox, told) = mailbox();
        let posting = mailbox.clone();
        let (early, told) = on_the_worker(move || {
            for n in 0..3 {
                posting.post(n);
            }
            (told.try_recv().is_ok(), told)
        });
        // Nothing was signalled during the turn; once the worker parks, one signal for all.
        assert!(!early, "a signal before the turn ended");
        told.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(mailbox.swap(Vec::new()), vec![0, 1, 2]);
        assert!(told.try_recv().is_err());
    }

    #[test]
    fn a_busy_worker_signals_at_the_most_items_a_batch_waits_with() {
        let (mailbox, told) = mailbox();
        let posting = mailbox.clone();
        let signalled_at = on_the_worker(move || {
            let mut at = None;
            for n in 0..DEFER_MAX as u32 {
                posting.post(n);
                if at.is_none() && told.try_recv().is_ok() {
                    at = Some(n);
                }
            }
            at
        });
        // Signalled within the turn, at the DEFER_MAX-th item or earlier (when the first item
        // had waited DEFER_FOR), never at the first.
        let at = signalled_at.expect("a signal while the worker was busy");
        assert!(
            (1..DEFER_MAX as u32).contains(&at),
            "signalled at item {at}"
        );
        assert_eq!(mailbox.swap(Vec::new()).len(), DEFER_MAX);
    }

    #[test]
    fn once_closed_nothing_is_signalled_and_a_running_signal_was_waited_for() {
        /// A signal that waits to be let go, logging its start and end.
        struct Held {
            log: Arc<Mutex<Vec<&'static str>>>,
            started: Mutex<mpsc::Sender<()>>,
            go: Mutex<mpsc::Receiver<()>>,
        }
        impl Signal for Held {
            fn signal(&self) {
                self.log.lock().unwrap().push("signal");
                let _ = self.started.lock().unwrap().send(());
                let _ = self.go.lock().unwrap().recv();
                self.log.lock().unwrap().push("signalled");
            }
        }
        let log = Arc::new(Mutex::new(Vec::new()));
        let (started_tx, started) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let mailbox = Arc::new(Mailbox::default());
        mailbox.attach(Arc::new(Held {
            log: log.clone(),
            started: Mutex::new(started_tx),
            go: Mutex::new(go_rx),
        }));
        let posting = mailbox.clone();
        let poster = std::thread::spawn(move || posting.post(1u32));
        started.recv().unwrap();
        let (closing, closer_log) = (mailbox.clone(), log.clone());
        let closer = std::thread::spawn(move || {
            closing.close();
            closer_log.lock().unwrap().push("closed");
        });
        go.send(()).unwrap();
        poster.join().unwrap();
        closer.join().unwrap();
        // `close` returned after the signal it found running had ended.
        assert_eq!(*log.lock().unwrap(), ["signal", "signalled", "closed"]);
        // Posts after the close are dropped, unsignalled; what was queued stays to be taken.
        mailbox.post(2);
        assert_eq!(mailbox.swap(Vec::new()), vec![1]);
        assert_eq!(log.lock().unwrap().len(), 3);
    }
}
