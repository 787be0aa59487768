//! The thread's inbox: how tokio hands finished work back to the JavaScript thread. It is a
//! [`Mailbox`] (the core's batching of results into signals) whose signal is the thread's one
//! libuv async handle; the loop drains everything queued in one callback (`env.rs` `on_wake`).
//!
//! # Safety
//!
//! 1. **The inbox's async handle outlives every signal.** Other threads touch it only through
//!    `uv_async_send`, from [`LoopSignal::signal`]; the mailbox calls that only while attached,
//!    and its `close` returns once no call is running and none can start (guarded by the
//!    core's test `mailbox::tests::once_closed_nothing_is_signalled_and_a_running_signal_was_waited_for`);
//!    `teardown` closes the handle only after that. Tests: __test__/process.test.js "the addon
//!    works in several worker threads at once, and a worker terminated mid-request ends
//!    cleanly" and "process.exit() with requests in flight on both paths exits cleanly".

use std::sync::Arc;

use super::uv;
use crate::client;
use crate::client::open::Facts;
use crate::error::Error;
use crate::mailbox::{Mailbox, Signal};
use crate::pool::KeyId;
use crate::transport::carry::{Carried, Step};
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
    /// A step of drop-in connection `conn`'s connect (its link `link`), before its outcome.
    Step {
        pool: u32,
        conn: u32,
        link: u32,
        step: Step,
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
    HyperClosed {
        pool: u32,
        conn: u32,
        end: crate::pool::ConnEnd,
    },
    /// `agent.request()` `req` goes out on connection `conn` (see `Face::sending`), told a
    /// turn later: the driver tells it in the middle of its own work, where JavaScript cannot
    /// run.
    Sending { req: u32, conn: u32 },
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

/// The thread's inbox.
pub type Inbox = Mailbox<Completion>;

/// Posts TLS key log lines of connection `conn` of pool `pool` (a handshake's, as they come).
pub fn post_keys(inbox: &Arc<Inbox>, pool: u32, conn: u32, lines: Vec<u8>) {
    inbox.post(Completion::Keylog { pool, conn, lines });
}

/// Wakes the JavaScript thread's loop: its inbox's libuv async handle.
pub struct LoopSignal(*mut uv::RawHandle);

// SAFETY (both): invariant 1: other threads use the pointer only for `uv_async_send`, libuv's
// one thread-safe call, and only while the mailbox may signal (until its `close` returns).
unsafe impl Send for LoopSignal {}
unsafe impl Sync for LoopSignal {}

impl LoopSignal {
    /// # Safety
    /// `handle` is an open libuv async handle that stays open until the inbox it is attached
    /// to has been closed (invariant 1).
    pub unsafe fn new(handle: *mut uv::RawHandle) -> LoopSignal {
        LoopSignal(handle)
    }
}

impl Signal for LoopSignal {
    fn signal(&self) {
        // SAFETY: invariant 1: the handle is open while the mailbox may call this.
        unsafe { uv::async_send(self.0) };
    }
}
