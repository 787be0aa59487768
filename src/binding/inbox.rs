//! The thread's inbox: how tokio hands finished work back to the JavaScript thread.
//!
//! It is one libuv async handle per thread: tokio threads push completed work into a queue
//! and wake the loop once; the loop drains everything queued in one callback (`env.rs`
//! `on_wake`). So many results cost one wake-up, and the queue never grows without bound
//! because each item is the end of an operation JavaScript started.
//!
//! # Safety
//!
//! 1. **The inbox's async handle outlives every signal.** Other threads touch it only through
//!    `uv_async_send`, between reading `wake` under the inbox lock (raising `signalling` there)
//!    and lowering `signalling`; [`Inbox::close`] clears `wake` under the lock and waits for
//!    `signalling` to reach zero, and `teardown` closes the handle only after that. Tests:
//!    __test__/process.test.js "the addon works in several worker threads at once, and a worker
//!    terminated mid-request ends cleanly" and "process.exit() with requests in flight on both
//!    paths exits cleanly".

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::uv;
use crate::client;
use crate::client::open::Facts;
use crate::error::Error;
use crate::pool::KeyId;
use crate::runtime;
use crate::transport::carry::Carried;
use crate::transport::pump::{Event, Sink};

/// Work finished on tokio, to be applied on the JavaScript thread.
pub enum Completion {
    Connected {
        pool: u32,
        conn: u32,
        result: Result<Carried, Error>,
    },
    /// The key material of connection `conn`'s TLS handshake (NSS key log lines), before its
    /// outcome is reported.
    Keylog {
        pool: u32,
        conn: u32,
        lines: Vec<u8>,
    },
    /// An `agent.request()` connection of key `key` opened, closed or failed to open (a
    /// `protocol::connection` kind), told to the agent's watchers on a later turn, never in the
    /// middle of the pool's own work.
    Connection {
        pool: u32,
        key: KeyId,
        kind: u32,
        error: Option<Error>,
    },
    /// Something happened on a connection whose bytes stay on tokio (TLS).
    Pump {
        pool: u32,
        conn: u32,
        /// Which link of the connection (a replay replaces it).
        link: u32,
        event: Event,
    },
    /// An event of an `agent.request()` exchange.
    Req { req: u32, event: client::Event },
    /// A promise-path connection was established (its exchange is running, or waits for the
    /// server's name to be checked), or failed for the request that opened it.
    HyperConnected {
        pool: u32,
        conn: u32,
        /// The request the connection was opened for.
        req: u32,
        result: Result<Facts, Error>,
    },
    /// A promise-path connection ended.
    HyperClosed { pool: u32, conn: u32 },
    /// A promise-path connection waits for the user's `lookup` to give its addresses.
    HyperLookup {
        pool: u32,
        conn: u32,
        req: u32,
        reply: tokio::sync::oneshot::Sender<Vec<std::net::IpAddr>>,
    },
}

/// Delivers a pumped connection's events through the thread's inbox.
pub struct PumpSink {
    pub inbox: Arc<Inbox>,
    pub pool: u32,
    pub conn: u32,
    pub link: u32,
}

impl Sink for PumpSink {
    fn post(&self, event: Event) {
        self.inbox.post(Completion::Pump {
            pool: self.pool,
            conn: self.conn,
            link: self.link,
            event,
        });
    }
}

/// Completions, and time, after which a worker that has not parked wakes the loop all the same.
const DEFER_MAX: usize = 64;
const DEFER_FOR: Duration = Duration::from_micros(200);

struct InboxState {
    items: Vec<Completion>,
    /// The async handle to wake, `None` once the thread's env is gone.
    wake: Option<SendPtr>,
    /// When the wake-up of the queued items was deferred to the worker's park (see `post`);
    /// `None` once signalled.
    deferred: Option<Instant>,
}

struct SendPtr(*mut uv::RawHandle);
// SAFETY: invariant 1 (see the module's Safety note): other threads use the pointer only for
// uv_async_send, libuv's one thread-safe call, and only while `teardown` has not closed the
// handle (the lock and `signalling` order the two).
unsafe impl Send for SendPtr {}

/// The sending side, shared with tokio tasks.
pub struct Inbox {
    state: Mutex<InboxState>,
    /// Posts signalling the loop outside the lock (see `post`); the cleanup waits for them
    /// before it closes the handle.
    signalling: std::sync::atomic::AtomicUsize,
}

impl Inbox {
    /// An inbox that wakes no loop yet (see [`Inbox::attach`]).
    pub fn new() -> Inbox {
        Inbox {
            state: Mutex::new(InboxState {
                items: Vec::new(),
                wake: None,
                deferred: None,
            }),
            signalling: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Posts wake `handle` from now on.
    ///
    /// # Safety
    /// `handle` is an open libuv async handle that stays open until [`Inbox::close`] has
    /// returned (invariant 1).
    pub unsafe fn attach(&self, handle: *mut uv::RawHandle) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).wake = Some(SendPtr(handle));
    }

    /// Posts TLS key log lines of connection `conn` of pool `pool` (a handshake's, as they come).
    pub fn post_keys(self: &Arc<Self>, pool: u32, conn: u32, lines: Vec<u8>) {
        self.post(Completion::Keylog { pool, conn, lines });
    }

    /// Queues a completion and wakes the loop. After the env is gone the completion is dropped
    /// (dropping a connected socket closes it).
    ///
    /// On the runtime's worker the wake-up waits until the worker is about to park (see
    /// [`runtime::defer_wake`]), so that what one turn of the worker completes crosses in one
    /// batch, instead of the JavaScript thread being woken (and, on a shared core, switched to)
    /// for the first completion of the turn. A worker kept busy wakes the loop all the same
    /// at a post that finds [`DEFER_MAX`] completions queued, or the first of them queued for
    /// [`DEFER_FOR`]; without further posts, the queued ones wait for the end of the turn.
    pub fn post(self: &Arc<Self>, item: Completion) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.wake.is_none() {
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

    /// Wakes the loop, unless the env is gone.
    fn signal(&self) {
        self.signal_locked(self.state.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn signal_locked(&self, mut state: std::sync::MutexGuard<'_, InboxState>) {
        state.deferred = None;
        let Some(wake) = &state.wake else { return };
        let handle = wake.0;
        // The loop is signalled after the lock is released: the signal may switch this core to
        // the JavaScript thread at once, which then takes the items without waiting for us.
        self.signalling.fetch_add(1, Ordering::AcqRel);
        drop(state);
        // SAFETY: invariant 1: the handle stays open while a post is signalling: the cleanup
        // clears `wake` under the lock (so no later post gets here) and then waits for
        // `signalling` to drop to zero before it closes the handle.
        unsafe { uv::async_send(handle) };
        self.signalling.fetch_sub(1, Ordering::AcqRel);
    }

    /// Stops later posts and waits for the ones signalling the loop (see `post`).
    pub fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).wake = None;
        while self.signalling.load(Ordering::Acquire) != 0 {
            std::thread::yield_now();
        }
    }

    /// The queued completions, leaving `spare` (empty) to queue the next ones in.
    pub fn swap(&self, spare: Vec<Completion>) -> Vec<Completion> {
        debug_assert!(spare.is_empty());
        std::mem::replace(
            &mut self.state.lock().unwrap_or_else(|e| e.into_inner()).items,
            spare,
        )
    }
}

impl runtime::Wake for Inbox {
    fn wake(&self) {
        self.signal();
    }
}
