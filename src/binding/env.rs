//! What one JavaScript thread (the main thread or a worker) shares among its agents: its
//! Node-API env and libuv loop, the JavaScript functions Rust calls, and the inbox through which
//! tokio hands results back.
//!
//! The inbox is one libuv async handle per thread: tokio threads push completed work into a
//! queue and wake the loop once; the loop drains everything queued in one callback. So many
//! results cost one wake-up, and the queue never grows without bound because each item is the
//! end of an operation JavaScript started.
//!
//! # Safety
//!
//! 1. **One context per thread, torn down once.** An `EnvCtx` is reached only on its own
//!    thread, through the thread-local `CTX` ([`current`]); `teardown` (the env's cleanup hook)
//!    takes it out of `CTX` first, so it runs once and no later callback finds the context or
//!    its env. The handles it owns carry its address only as a non-null mark, never
//!    dereferenced (`on_wake`, `on_sweep`), and `teardown` closes them (uv.rs invariant 3).
//!    Test: __test__/process.test.js "the addon works in several worker threads at once, and a
//!    worker terminated mid-request ends cleanly".
//! 2. **The inbox's async handle outlives every signal.** Other threads touch it only through
//!    `uv_async_send`, between reading `wake` under the inbox lock (raising `signalling` there)
//!    and lowering `signalling`; [`Inbox::close`] clears `wake` under the lock and waits for
//!    `signalling` to reach zero, and `teardown` closes the handle only after that. Tests:
//!    __test__/process.test.js "the addon works in several worker threads at once, and a worker
//!    terminated mid-request ends cleanly" and "process.exit() with requests in flight on both
//!    paths exits cleanly".
//! 3. **Rust writes only unseen bytes of an attached slab.** `chunk_of` writes past `used`
//!    (which only grows, so no byte JavaScript was given is written again) and within `SLAB`,
//!    into a slab whose ArrayBuffer its strong reference keeps alive and that is checked not
//!    detached before the write, with no JavaScript run between the check and the write.
//!    Tests: __test__/safety.test.js "a chunk whose memory a program transfers or detaches is
//!    never written again, on either path"; __test__/chunks.test.js "agent.request(): small
//!    bodies keep their bytes across slabs, kept chunks are not overwritten".

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::{Rc, Weak};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use napi::sys;

use super::conn::Conn;
use super::js::{self, HandleScope, Ref};
use super::pool::PoolCell;
use super::uv::{self, Handle};
use crate::guard;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;

use super::request::ReqState;
use crate::client;
use crate::error::Error;
use crate::runtime;
use crate::transport::pump::{Event, Remote, Sink};
use crate::transport::tls::TlsInfo;
use crate::transport::Peer;

/// The JavaScript functions Rust calls, registered once per thread by `index.js`.
pub struct Callbacks {
    /// `onRead(socket, buffer | null)`: bytes, or end of stream.
    pub on_read: Ref,
    /// `onWrite(socket, errorDescriptor | null)`: a deferred write finished.
    pub on_write: Ref,
    /// `onError(socket, errorDescriptor)`: the connection failed while in use.
    pub on_error: Ref,
    /// `onConnect(socket, errorDescriptor | null)`.
    pub on_connect: Ref,
    /// `onGrant(agent, waiterId)`: a freed slot lets a queued request connect.
    pub on_grant: Ref,
    /// `onRequest(handle, kind, ...)`: an event of an `agent.request()` exchange.
    pub on_request: Ref,
    /// `setSlab(arrayBuffer)`: the slab later small chunks are cut from (see [`EnvCtx::chunk`]).
    pub set_slab: Ref,
    /// `onKeylog(target, lines)`: a TLS handshake's key material (NSS key log lines, once
    /// `NativePool::log_keys` asked for it); `target` is the connection's socket, or the agent
    /// for a connection of `agent.request()`.
    pub on_keylog: Ref,
}

/// Work finished on tokio, to be applied on the JavaScript thread.
pub enum Completion {
    Connected {
        pool: u32,
        conn: u32,
        result: Result<Established, Error>,
    },
    /// The key material of connection `conn`'s TLS handshake (NSS key log lines), before its
    /// outcome is reported.
    Keylog {
        pool: u32,
        conn: u32,
        lines: Vec<u8>,
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
        result: Result<HyperEstablished, Error>,
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

/// Where a promise-path connection goes, its TLS session, and what lets its exchange start
/// once the server's name is found right (a new TLS session: see `PoolCell::hyper_connected`).
pub type HyperEstablished = (
    Option<SocketAddr>,
    Peer,
    Option<Box<TlsInfo>>,
    Option<tokio::sync::oneshot::Sender<()>>,
);

/// A connection ready for requests.
pub struct Established {
    pub local: Option<SocketAddr>,
    pub remote: Peer,
    pub link: Link,
}

/// How the JavaScript thread reaches an established connection's bytes.
pub enum Link {
    /// A plain socket, driven on the JavaScript thread's loop.
    Fd(OwnedFd),
    /// A connection pumped on tokio (a TLS one, with its session's details, or one through a
    /// proxy reached over TLS).
    Pumped(Arc<Remote>, Option<Box<TlsInfo>>),
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

/// The most completions a batch's vector is kept for the next batch with room for.
const SPARE_MAX: usize = 256;

struct InboxState {
    items: Vec<Completion>,
    /// The async handle to wake, `None` once the thread's env is gone.
    wake: Option<SendPtr>,
    /// When the wake-up of the queued items was deferred to the worker's park (see `post`);
    /// `None` once signalled.
    deferred: Option<Instant>,
}

struct SendPtr(*mut uv::RawHandle);
// SAFETY: invariant 2 (see the module's Safety note): other threads use the pointer only for
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
        // SAFETY: invariant 2: the handle stays open while a post is signalling: the cleanup
        // clears `wake` under the lock (so no later post gets here) and then waits for
        // `signalling` to drop to zero before it closes the handle.
        unsafe { uv::async_send(handle) };
        self.signalling.fetch_sub(1, Ordering::AcqRel);
    }

    /// Stops later posts and waits for the ones signalling the loop (see `post`).
    fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).wake = None;
        while self.signalling.load(Ordering::Acquire) != 0 {
            std::thread::yield_now();
        }
    }

    /// The queued completions, leaving `spare` (empty) to queue the next ones in.
    fn swap(&self, spare: Vec<Completion>) -> Vec<Completion> {
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

/// Maps keyed by the ids this thread hands out (pools, connections, requests): sequential
/// numbers of its own, so a multiplicative hash spreads them and nothing adversarial reaches it.
type IdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub struct EnvCtx {
    pub env: sys::napi_env,
    pub uv_loop: *mut uv::Loop,
    pub callbacks: Callbacks,
    pub inbox: Arc<Inbox>,
    wake: RefCell<Option<Handle>>,
    /// How many batches of the inbox this thread has delivered (see `on_wake`).
    pub wakes: Cell<u64>,
    /// Operations in flight on tokio that must keep the process alive (connects, requests,
    /// TLS connections in use).
    in_flight: Cell<usize>,
    /// Releases of a hold that was not taken: each one is a bug that let the process exit
    /// under work in flight (see [`EnvCtx::held`]).
    unheld_extra: Cell<u32>,
    pools: RefCell<IdMap<Weak<PoolCell>>>,
    next_pool: Cell<u32>,
    /// Every connection of every pool on this thread, by id: the hot-path calls from
    /// JavaScript name a connection by its id alone.
    conns: RefCell<IdMap<Rc<Conn>>>,
    next_conn: Cell<u32>,
    /// `agent.request()` calls in flight or queued, by id.
    requests: RefCell<IdMap<Rc<ReqState>>>,
    next_request: Cell<u32>,
    /// The reusable buffer sockets read into before copying into a JavaScript Buffer.
    pub read_buf: RefCell<Box<[u8]>>,
    /// The slab small chunks are copied into (see [`EnvCtx::chunk`]).
    slab: RefCell<Option<Slab>>,
    /// The async context of a batch of completions: each event still runs in its own
    /// request's or socket's context, inside this one (see `on_wake`).
    batch: js::AsyncContext,
    /// The vector of the last batch, emptied: the worker queues the next batch into it, so
    /// that a batch does not grow a new vector (a reallocation and a copy of every completion
    /// at each doubling) while the last one's memory goes back to the allocator.
    spare: RefCell<Vec<Completion>>,
    /// The timer of the sweep for long headers timeouts (see `request::COARSE_TIMEOUT`), made
    /// on first use, and whether a sweep is due.
    sweep: RefCell<Option<Handle>>,
    sweep_due: Cell<bool>,
}

/// The size of a slab, and the largest chunk cut from one (as Node's Buffer pool: 8 KiB, for
/// allocations under 4 KiB). A chunk that JavaScript keeps keeps its slab alive.
const SLAB: usize = 8 * 1024;
const SLAB_CHUNK: usize = SLAB / 2;

/// Body chunks from this size on cross without a copy (see [`EnvCtx::chunk_concat`]): below
/// it, a copy costs less than a Buffer with a finalizer. Batches over `SHARED_MAX` are copied
/// all the same: holding that many of hyper's reads until the garbage collector releases them
/// measured slower than the copy (1 MiB responses: 1,750–2,080 against 2,090–2,370 req/s).
const SHARED_CHUNK: usize = 32 * 1024;
const SHARED_MAX: usize = 128 * 1024;

/// An ArrayBuffer of the JavaScript heap that small chunks are copied into, one after the other:
/// JavaScript makes each chunk a Buffer view of it (`lib/slab.js`), which costs far less than
/// a Buffer of its own made through Node-API.
struct Slab {
    /// Keeps the ArrayBuffer, and so `data`, alive while chunks are written into it.
    buffer: Ref,
    data: *mut u8,
    used: usize,
}

/// Bytes read per `read(2)`: as much as a loaded socket usually holds, like libuv's 64 KiB.
const READ_BUF: usize = 64 * 1024;

thread_local! {
    static CTX: RefCell<Option<Rc<EnvCtx>>> = const { RefCell::new(None) };
}

/// The context of the calling JavaScript thread, if `init` ran on it.
pub fn current() -> Option<Rc<EnvCtx>> {
    CTX.with(|c| c.borrow().clone())
}

/// Sets up the calling thread: called once per env by the binding's `init`.
pub fn init(env: sys::napi_env, callbacks: Callbacks) -> napi::Result<Rc<EnvCtx>> {
    if let Some(ctx) = current() {
        // A second `init` on the same thread (the module loaded twice): keep the first set.
        for r in [
            callbacks.on_read,
            callbacks.on_write,
            callbacks.on_error,
            callbacks.on_connect,
            callbacks.on_grant,
            callbacks.on_request,
            callbacks.set_slab,
            callbacks.on_keylog,
        ] {
            r.delete(env);
        }
        return Ok(ctx);
    }
    uv::check_abi().map_err(napi::Error::from_reason)?;
    let mut uv_loop = std::ptr::null_mut();
    // SAFETY: js.rs invariant 1: a plain query on this env, during the `init` call from it.
    unsafe { sys::napi_get_uv_event_loop(env, &mut uv_loop) };
    let ctx = Rc::new(EnvCtx {
        env,
        uv_loop: uv_loop.cast(),
        callbacks,
        inbox: Arc::new(Inbox {
            state: Mutex::new(InboxState {
                items: Vec::new(),
                wake: None,
                deferred: None,
            }),
            signalling: std::sync::atomic::AtomicUsize::new(0),
        }),
        wake: RefCell::new(None),
        wakes: Cell::new(0),
        in_flight: Cell::new(0),
        unheld_extra: Cell::new(0),
        pools: RefCell::new(IdMap::default()),
        next_pool: Cell::new(1),
        conns: RefCell::new(IdMap::default()),
        next_conn: Cell::new(1),
        requests: RefCell::new(IdMap::default()),
        next_request: Cell::new(1),
        read_buf: RefCell::new(vec![0u8; READ_BUF].into_boxed_slice()),
        slab: RefCell::new(None),
        // SAFETY: js.rs invariant 1: a fresh object of this env, in the `init` call's scope,
        // as the resource; destroyed once, in `teardown` (js.rs invariant 2).
        batch: unsafe { js::AsyncContext::new(env, js::object(env), "hyperagent:batch") },
        spare: RefCell::new(Vec::new()),
        sweep: RefCell::new(None),
        sweep_due: Cell::new(false),
    });
    // SAFETY: this thread's running loop, from its env; the data is the context, a mark that
    // `on_wake` does not dereference, and `teardown` closes the handle (invariants 1 and 2).
    let wake = unsafe { Handle::async_(ctx.uv_loop, on_wake, Rc::as_ptr(&ctx) as *mut _) };
    wake.set_ref(false);
    ctx.inbox
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .wake = Some(SendPtr(wake.raw()));
    *ctx.wake.borrow_mut() = Some(wake);
    CTX.with(|c| *c.borrow_mut() = Some(ctx.clone()));
    // SAFETY: js.rs invariant 1; `cleanup` takes no data and is registered once per env (a
    // second `init` returns above), and Node runs it on this thread when the env is torn down.
    unsafe { sys::napi_add_env_cleanup_hook(env, Some(cleanup), std::ptr::null_mut()) };
    Ok(ctx)
}

impl Slab {
    /// Whether JavaScript detached the slab's ArrayBuffer, taking its memory.
    fn detached(&self, env: sys::napi_env) -> bool {
        let mut detached = true;
        // SAFETY: js.rs invariants 1 and 2: a plain query, on this env's thread, of the slab's
        // reference, which is deleted only after the slab is taken out of `EnvCtx::slab`.
        let status =
            unsafe { sys::napi_is_detached_arraybuffer(env, self.buffer.get(env), &mut detached) };
        status != sys::Status::napi_ok || detached
    }
}

impl EnvCtx {
    /// `data` as a value for JavaScript's `lib/slab.js` `chunk()`: a small chunk is copied
    /// into the slab and goes as a number (`offset * 65536 + length`), a larger one as a
    /// Buffer of its own.
    pub fn chunk(&self, data: &[u8]) -> sys::napi_value {
        self.chunk_of(data.len(), |at| {
            // SAFETY: invariant 3: `at` has room for `data.len()` bytes (see `chunk_of`).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), at, data.len()) }
        })
        .unwrap_or_else(|| js::buffer_copy(self.env, data))
    }

    /// As [`EnvCtx::chunk`], for chunks of a response body that go as one. Large reads go
    /// without a copy, as Buffers over hyper's own bytes (an array of them for several).
    pub fn chunk_concat(&self, chunks: &[bytes::Bytes]) -> sys::napi_value {
        let total: usize = chunks.iter().map(|c| c.len()).sum();
        if total <= SHARED_MAX
            && !chunks.is_empty()
            && chunks.iter().all(|c| c.len() >= SHARED_CHUNK)
        {
            if let Some(value) = self.shared_chunks(chunks) {
                return value;
            }
        }
        if let [one] = chunks {
            return self.chunk(one);
        }
        let len = chunks.iter().map(|c| c.len()).sum();
        self.chunk_of(len, |mut at| {
            for c in chunks {
                // SAFETY: invariant 3: `at` has room for all `len` bytes, the chunks' sum (see
                // `chunk_of`).
                unsafe {
                    std::ptr::copy_nonoverlapping(c.as_ptr(), at, c.len());
                    at = at.add(c.len());
                }
            }
        })
        .unwrap_or_else(|| js::buffer_concat(self.env, chunks))
    }

    fn shared_chunks(&self, chunks: &[bytes::Bytes]) -> Option<sys::napi_value> {
        let mut values = Vec::with_capacity(chunks.len());
        for c in chunks {
            values.push(js::buffer_external(self.env, c.clone())?);
        }
        Some(match values[..] {
            [one] => one,
            _ => js::array(self.env, &values),
        })
    }

    /// Reserves `len` bytes of the slab (a new slab when the current one is full), has `fill`
    /// write them, and returns their number; None when `len` is too large for a slab.
    fn chunk_of(&self, len: usize, fill: impl FnOnce(*mut u8)) -> Option<sys::napi_value> {
        if len == 0 || len > SLAB_CHUNK {
            return None;
        }
        let mut slab = self.slab.borrow_mut();
        // A slab JavaScript detached (`arrayBuffer.transfer()`, or a transfer Node did not
        // refuse) is no longer ours: its memory may belong to another ArrayBuffer, or be freed.
        // The check and the write below run on this thread with no JavaScript between them.
        if slab
            .as_ref()
            .is_none_or(|s| s.used + len > SLAB || s.detached(self.env))
        {
            if let Some(old) = slab.take() {
                old.buffer.delete(self.env);
            }
            let fresh = self.new_slab()?;
            // `new_slab` ran JavaScript (`setSlab`): a program that patched what it calls could
            // have detached the new slab already. Then this chunk goes as a Buffer of its own.
            if fresh.detached(self.env) {
                fresh.buffer.delete(self.env);
                return None;
            }
            *slab = Some(fresh);
        }
        let s = slab.as_mut()?;
        let offset = s.used;
        // SAFETY: invariant 3: `offset + len <= SLAB`, the ArrayBuffer's length; it is alive
        // (kept by `buffer`) and still holds the memory at `data` (not detached: checked above,
        // after any JavaScript that ran, `setSlab`'s included, and none runs between that check
        // and this write). JavaScript sees these bytes only after this write: nothing here
        // writes a byte it has been given (`used` only grows). Test: __test__/safety.test.js
        // "a chunk whose memory a program transfers or detaches is never written again, on
        // either path".
        fill(unsafe { s.data.add(offset) });
        // Eight-byte aligned, as Node's pool aligns its slices.
        s.used = (offset + len + 7) & !7;
        Some(js::number(self.env, (offset * 65536 + len) as f64))
    }

    fn new_slab(&self) -> Option<Slab> {
        let mut value = std::ptr::null_mut();
        let mut data = std::ptr::null_mut();
        // SAFETY: js.rs invariant 1: a plain allocation on this env; on success `data` points
        // at its SLAB bytes (checked non-null below), kept alive by the reference made below
        // (invariant 3).
        let status = unsafe { sys::napi_create_arraybuffer(self.env, SLAB, &mut data, &mut value) };
        if status != sys::Status::napi_ok || data.is_null() {
            return None;
        }
        js::call(self.env, self.callbacks.set_slab.get(self.env), &[value]);
        Some(Slab {
            // SAFETY: js.rs invariant 1: the ArrayBuffer just made, in the current scope; the
            // slab's owner deletes the reference once (`chunk_of`, `teardown`).
            buffer: unsafe { Ref::new(self.env, value, 1) },
            data: data.cast(),
            used: 0,
        })
    }

    pub fn alloc_pool_id(&self) -> u32 {
        let id = self.next_pool.get();
        self.next_pool.set(id.wrapping_add(1));
        id
    }

    pub fn register_pool(&self, pool: &Rc<PoolCell>) {
        self.pools.borrow_mut().insert(pool.id, Rc::downgrade(pool));
    }

    pub fn conn(&self, id: u32) -> Option<Rc<Conn>> {
        self.conns.borrow().get(&id).cloned()
    }

    /// A fresh connection id, never 0 (JavaScript's "no connection").
    pub fn next_conn_id(&self) -> u32 {
        let mut conns = self.conns.borrow_mut();
        loop {
            let id = self.next_conn.get();
            self.next_conn.set(id.wrapping_add(1).max(1));
            if !conns.contains_key(&id) {
                conns.reserve(1);
                return id;
            }
        }
    }

    pub fn insert_conn(&self, conn: Rc<Conn>) {
        self.conns.borrow_mut().insert(conn.id, conn);
    }

    pub fn remove_conn(&self, id: u32) -> Option<Rc<Conn>> {
        self.conns.borrow_mut().remove(&id)
    }

    /// Every connection of pool `pool`, in id order.
    pub fn conns_of(&self, pool: u32) -> Vec<Rc<Conn>> {
        let mut out: Vec<Rc<Conn>> = self
            .conns
            .borrow()
            .values()
            .filter(|c| c.pool_id == pool)
            .cloned()
            .collect();
        out.sort_by_key(|c| c.id);
        out
    }

    /// Removes and returns every connection of pool `pool`.
    pub fn drain_conns_of(&self, pool: u32) -> Vec<Rc<Conn>> {
        let mut conns = self.conns.borrow_mut();
        let ids: Vec<u32> = conns
            .values()
            .filter(|c| c.pool_id == pool)
            .map(|c| c.id)
            .collect();
        ids.iter().filter_map(|id| conns.remove(id)).collect()
    }

    pub fn next_request_id(&self) -> u32 {
        let id = self.next_request.get();
        self.next_request.set(id.wrapping_add(1).max(1));
        id
    }

    pub fn insert_request(&self, req: Rc<ReqState>) {
        self.requests.borrow_mut().insert(req.id, req);
    }

    pub fn remove_request(&self, id: u32) -> Option<Rc<ReqState>> {
        self.requests.borrow_mut().remove(&id)
    }

    pub fn request(&self, id: u32) -> Option<Rc<ReqState>> {
        self.requests.borrow().get(&id).cloned()
    }

    /// Every `agent.request()` in flight or queued.
    pub fn requests(&self) -> Vec<Rc<ReqState>> {
        self.requests.borrow().values().cloned().collect()
    }

    /// Has the headers-timeout sweep (`EnvCtx::sweep_headers_deadlines`) run in
    /// `SWEEP_EVERY_MS`, unless it is due already.
    pub fn schedule_sweep(&self) {
        if self.sweep_due.replace(true) {
            return;
        }
        let mut sweep = self.sweep.borrow_mut();
        let timer = sweep.get_or_insert_with(|| {
            // SAFETY: invariant 1: this thread's running loop; the data is the context, a mark
            // that `on_sweep` does not dereference, and `teardown` closes the timer. Test:
            // __test__/request/faults.test.js "a headersTimeout over a second fails a request with
            // no head, on a new or a reused connection".
            let timer = unsafe { Handle::timer(self.uv_loop, self as *const EnvCtx as *mut _) };
            // Requests in flight keep the process alive already (`hold`).
            timer.set_ref(false);
            timer
        });
        timer.timer_start(on_sweep, super::request::SWEEP_EVERY_MS);
    }

    pub fn pool(&self, id: u32) -> Option<Rc<PoolCell>> {
        self.pools.borrow().get(&id).and_then(Weak::upgrade)
    }

    pub fn unregister_pool(&self, id: u32) {
        self.pools.borrow_mut().remove(&id);
    }

    /// An operation that must keep the process alive started on tokio: the process stays
    /// alive until the returned token is dropped.
    pub fn hold(self: &Rc<Self>) -> Hold {
        self.take_hold();
        Hold(Rc::downgrade(self))
    }

    fn take_hold(&self) {
        let n = self.in_flight.get() + 1;
        self.in_flight.set(n);
        if n == 1 {
            if let Some(wake) = &*self.wake.borrow() {
                wake.set_ref(true);
            }
        }
    }

    /// Such an operation ended (completed, or abandoned by JavaScript): its [`Hold`] was
    /// dropped.
    fn unhold(&self) {
        if self.in_flight.get() == 0 {
            self.unheld_extra.set(self.unheld_extra.get() + 1);
        }
        let n = self.in_flight.get().saturating_sub(1);
        self.in_flight.set(n);
        if n == 0 {
            if let Some(wake) = &*self.wake.borrow() {
                wake.set_ref(false);
            }
        }
    }

    /// The holds taken and not released, and the releases that found none taken.
    pub fn held(&self) -> (usize, u32) {
        (self.in_flight.get(), self.unheld_extra.get())
    }
}

/// A hold on the thread's event loop for one operation running on tokio (see
/// [`EnvCtx::hold`]): released when dropped, so it is released exactly once, on every path
/// (completion, abort, close, the env's teardown). It does not keep the env alive: once the
/// env is gone there is no loop left to release.
pub struct Hold(Weak<EnvCtx>);

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(ctx) = self.0.upgrade() {
            ctx.unhold();
        }
    }
}

/// # Safety
/// Called by libuv alone, on this thread's loop, for the inbox's open async handle.
unsafe extern "C" fn on_wake(handle: *mut uv::RawHandle) {
    // SAFETY: invariant 1: libuv's own live handle, on its loop's thread; the pointer is only
    // compared, the context is reached through `current()`.
    let ptr = unsafe { uv::data_of(handle) } as *const EnvCtx;
    if ptr.is_null() {
        return;
    }
    let Some(ctx) = current() else { return };
    debug_assert!(std::ptr::eq(ptr, Rc::as_ptr(&ctx)));
    let _scope = HandleScope::open(ctx.env);
    // One callback scope around the batch: the events' own callbacks nest in it, so
    // `process.nextTick` callbacks and microtasks run once, when the batch is delivered,
    // instead of after every event.
    let _batch = js::CallbackScope::open(ctx.env, ctx.batch);
    ctx.wakes.set(ctx.wakes.get() + 1);
    let mut batch = ctx.inbox.swap(ctx.spare.take());
    for item in batch.drain(..) {
        // What a panic while handling the item fails: the request or the connection it is of.
        let owner = match &item {
            Completion::Req { req, .. } => Owner::Request(*req),
            Completion::HyperConnected {
                pool, conn, req, ..
            } => Owner::HyperConnect(*pool, *conn, *req),
            Completion::Connected { pool, conn, .. } => Owner::Connect(*pool, *conn),
            Completion::Pump { conn, .. } => Owner::Conn(*conn),
            _ => Owner::None,
        };
        if let Err(panic) = guard::catch(|| ctx.complete(item)) {
            super::debug::debug!("a completion panicked: {panic}");
            let _ = guard::catch(|| ctx.fail_owner(owner, &panic));
        }
    }
    // A burst's vector is not kept: its memory goes back.
    if batch.capacity() <= SPARE_MAX {
        *ctx.spare.borrow_mut() = batch;
    }
}

/// What an item of the inbox belongs to (see `on_wake`).
enum Owner {
    Request(u32),
    HyperConnect(u32, u32, u32),
    Connect(u32, u32),
    Conn(u32),
    None,
}

impl EnvCtx {
    /// Fails what a panic left half done: the request ends with the panic's error (its
    /// exchange stopped, its connection closed), a connect fails as one that could not be
    /// made, a connection in use fails its socket.
    fn fail_owner(&self, owner: Owner, panic: &str) {
        let err = || guard::internal(panic);
        match owner {
            Owner::Request(id) => {
                if let Some(req) = self.request(id) {
                    req.stop();
                }
                self.on_request_event(id, client::Event::Error(err()));
                self.on_request_event(id, client::Event::Done(None));
            }
            Owner::HyperConnect(pool, conn, req) => {
                if let Some(cell) = self.pool(pool) {
                    cell.hyper_connected(conn, req, Err(err()));
                }
            }
            Owner::Connect(pool, conn) => {
                if let Some(cell) = self.pool(pool) {
                    cell.finish_connect(conn, Err(err()));
                }
            }
            Owner::Conn(id) => {
                if let Some(conn) = self.conn(id) {
                    conn.fail(self, err());
                }
            }
            Owner::None => {}
        }
    }

    /// Handles one item of the inbox.
    fn complete(&self, item: Completion) {
        let ctx = self;
        guard::point("completion");
        match item {
            // A pool that is gone let go of its connects' holds as it went.
            Completion::Connected { pool, conn, result } => {
                if let Some(cell) = ctx.pool(pool) {
                    cell.finish_connect(conn, result);
                }
            }
            Completion::Pump {
                pool,
                conn,
                link,
                event,
            } => {
                if let Some(cell) = ctx.pool(pool) {
                    cell.on_pump(conn, link, event);
                }
            }
            Completion::Req { req, event } => ctx.on_request_event(req, event),
            Completion::HyperConnected {
                pool,
                conn,
                req,
                result,
            } => {
                if let Some(cell) = ctx.pool(pool) {
                    cell.hyper_connected(conn, req, result);
                }
            }
            Completion::HyperClosed { pool, conn } => {
                if let Some(cell) = ctx.pool(pool) {
                    cell.hyper_closed(conn);
                }
            }
            Completion::HyperLookup {
                pool,
                conn,
                req,
                reply,
            } => {
                if let Some(cell) = ctx.pool(pool) {
                    cell.hyper_lookup(conn, req, reply);
                }
            }
            Completion::Keylog { pool, conn, lines } => {
                if let Some(cell) = ctx.pool(pool) {
                    cell.emit_keylog(conn, &lines);
                }
            }
        }
    }
}

/// # Safety
/// Called by libuv alone, on this thread's loop, for the sweep's open timer.
unsafe extern "C" fn on_sweep(handle: *mut uv::RawHandle) {
    // SAFETY: invariant 1: libuv's own live handle, on its loop's thread; the pointer is only
    // tested for null, the context is reached through `current()`.
    if unsafe { uv::data_of(handle) }.is_null() {
        return;
    }
    let Some(ctx) = current() else { return };
    ctx.sweep_due.set(false);
    let _scope = HandleScope::open(ctx.env);
    let _batch = js::CallbackScope::open(ctx.env, ctx.batch);
    if let Err(panic) = guard::catch(|| ctx.sweep_headers_deadlines()) {
        super::debug::debug!("the headers timeout sweep failed: {panic}");
    }
}

/// # Safety
/// Called by Node alone, once, on this env's thread (registered by `init`); it dereferences
/// nothing it is given.
unsafe extern "C" fn cleanup(_: *mut std::ffi::c_void) {
    // A panic here cannot fail anything: what it left is freed with the env.
    let _ = guard::catch(teardown);
}

/// The env's teardown: every pool shuts down, every request stops, every handle closes.
fn teardown() {
    let Some(ctx) = CTX.with(|c| c.borrow_mut().take()) else {
        return;
    };
    ctx.inbox.close();
    drop(ctx.inbox.swap(Vec::new()));
    let pools: Vec<Rc<PoolCell>> = ctx
        .pools
        .borrow()
        .values()
        .filter_map(Weak::upgrade)
        .collect();
    for pool in pools {
        pool.shutdown();
    }
    // The requests' tasks stop; tokio holds no memory of this env (request bodies are copied),
    // so nothing is waited for.
    let requests: Vec<Rc<ReqState>> = ctx.requests.borrow_mut().drain().map(|(_, r)| r).collect();
    for req in &requests {
        req.stop();
    }
    drop(requests);
    if let Some(wake) = ctx.wake.borrow_mut().take() {
        wake.close();
    }
    if let Some(sweep) = ctx.sweep.borrow_mut().take() {
        sweep.close();
    }
    let cb = &ctx.callbacks;
    for r in [
        cb.on_read,
        cb.on_write,
        cb.on_error,
        cb.on_connect,
        cb.on_grant,
        cb.on_request,
        cb.set_slab,
        cb.on_keylog,
    ] {
        r.delete(ctx.env);
    }
    if let Some(slab) = ctx.slab.borrow_mut().take() {
        slab.buffer.delete(ctx.env);
    }
    ctx.batch.destroy(ctx.env);
}
