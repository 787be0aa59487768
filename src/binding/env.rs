//! What one JavaScript thread (the main thread or a worker) shares among its agents: its
//! Node-API env and libuv loop, the JavaScript functions Rust calls, and the inbox through which
//! tokio hands results back.
//!
//! It keeps what keeps the process alive for work on tokio ([`Hold`]) and wakes for the inbox's
//! batches ([`inbox`]), which [`Hooks`] deliver to the pools, connections and requests they are
//! for: those sit above the env, which names none of them (each keeps its own table by id, see
//! `registry`).
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

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::sync::Arc;

use napi::sys;

use super::inbox::{Completion, Inbox, LoopSignal};
use super::js::{self, HandleScope, Ref};
use super::slab::Chunks;
use super::uv::{self, Handle};
use crate::guard;

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
    /// `setSlab(arrayBuffer)`: the slab later small chunks are cut from (see [`Chunks::chunk`]).
    pub set_slab: Ref,
    /// `onKeylog(target, lines)`: a TLS handshake's key material (NSS key log lines, once
    /// `NativePool::log_keys` asked for it); `target` is the connection's socket, or the agent
    /// for a connection of `agent.request()`.
    pub on_keylog: Ref,
    /// `onConnection(agent, kind, key, error)`: an `agent.request()` connection opened, closed
    /// or failed to open (see `PoolCell::watch_connections`).
    pub on_connection: Ref,
    /// `onStep(socket, host | null, addresses | null)`: a step of a drop-in socket's connect (see
    /// `PoolCell::emit_step`).
    pub on_step: Ref,
}

/// The most completions a batch's vector is kept for the next batch with room for.
const SPARE_MAX: usize = 256;

/// How often the sweep of long headers timeouts runs (see `client::COARSE_TIMEOUT`).
pub const SWEEP_EVERY_MS: u64 = 500;

/// What the layers above the env do for it: it names none of their types.
pub struct Hooks {
    /// Takes one item of the inbox to what it is for, on this thread (a panic there fails
    /// that owner alone).
    pub deliver: fn(&EnvCtx, Completion),
    /// The sweep of long headers timeouts (see [`EnvCtx::schedule_sweep`]).
    pub sweep: fn(&EnvCtx),
    /// The env is going away: every pool shuts down, every request stops, every connection
    /// closes, before the env's own handles do.
    pub teardown: fn(&EnvCtx),
}

pub struct EnvCtx {
    pub env: sys::napi_env,
    pub uv_loop: *mut uv::Loop,
    pub callbacks: Callbacks,
    hooks: Hooks,
    pub inbox: Arc<Inbox>,
    wake: RefCell<Option<Handle>>,
    /// Releases the tasks woken from this thread once per turn of its loop, before it waits
    /// for I/O (see `crate::runtime::wake_soon`).
    turn: RefCell<Option<Handle>>,
    /// How many batches of the inbox this thread has delivered (see `on_wake`).
    pub wakes: Cell<u64>,
    /// Operations in flight on tokio that must keep the process alive (connects, requests,
    /// TLS connections in use).
    in_flight: Cell<usize>,
    /// Releases of a hold that was not taken: each one is a bug that let the process exit
    /// under work in flight (see [`EnvCtx::held`]).
    unheld_extra: Cell<u32>,
    /// The reusable buffer plain sockets read into before copying into a JavaScript Buffer.
    #[cfg(unix)]
    pub read_buf: RefCell<Box<[u8]>>,
    /// The slab small chunks are copied into.
    pub chunks: Chunks,
    /// The async context of a batch of completions: each event still runs in its own
    /// request's or socket's context, inside this one (see `on_wake`).
    batch: js::AsyncContext,
    /// The vector of the last batch, emptied: the worker queues the next batch into it, so
    /// that a batch does not grow a new vector (a reallocation and a copy of every completion
    /// at each doubling) while the last one's memory goes back to the allocator.
    spare: RefCell<Vec<Completion>>,
    /// The timer of the sweep for long headers timeouts (see `client::COARSE_TIMEOUT`), made
    /// on first use, and whether a sweep is due.
    sweep: RefCell<Option<Handle>>,
    sweep_due: Cell<bool>,
}

/// Bytes read per `read(2)`: as much as a loaded socket usually holds, like libuv's 64 KiB.
#[cfg(unix)]
const READ_BUF: usize = 64 * 1024;

thread_local! {
    static CTX: RefCell<Option<Rc<EnvCtx>>> = const { RefCell::new(None) };
}

/// The context of the calling JavaScript thread, if `init` ran on it.
pub fn current() -> Option<Rc<EnvCtx>> {
    CTX.with(|c| c.borrow().clone())
}

/// Sets up the calling thread: called once per env by the binding's `init`.
pub fn init(env: sys::napi_env, callbacks: Callbacks, hooks: Hooks) -> napi::Result<Rc<EnvCtx>> {
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
            callbacks.on_connection,
            callbacks.on_step,
        ] {
            r.delete(env);
        }
        return Ok(ctx);
    }
    uv::check_abi().map_err(napi::Error::from_reason)?;
    let mut uv_loop = std::ptr::null_mut();
    // SAFETY: js invariant 1: a plain query on this env, during the `init` call from it.
    unsafe { sys::napi_get_uv_event_loop(env, &mut uv_loop) };
    let set_slab = callbacks.set_slab;
    let ctx = Rc::new(EnvCtx {
        env,
        uv_loop: uv_loop.cast(),
        callbacks,
        hooks,
        inbox: Arc::new(Inbox::default()),
        wake: RefCell::new(None),
        turn: RefCell::new(None),
        wakes: Cell::new(0),
        in_flight: Cell::new(0),
        unheld_extra: Cell::new(0),
        #[cfg(unix)]
        read_buf: RefCell::new(vec![0u8; READ_BUF].into_boxed_slice()),
        chunks: Chunks::new(env, set_slab),
        // SAFETY: js invariant 1: a fresh object of this env, in the `init` call's scope,
        // as the resource; destroyed once, in `teardown` (js invariant 2).
        batch: unsafe { js::AsyncContext::new(env, js::object(env), "hyperagent:batch") },
        spare: RefCell::new(Vec::new()),
        sweep: RefCell::new(None),
        sweep_due: Cell::new(false),
    });
    // SAFETY: this thread's running loop, from its env; the data is the context, a mark that
    // `on_wake` does not dereference, and `teardown` closes the handle (invariant 1, and
    // inbox.rs invariant 1).
    let wake = unsafe { Handle::async_(ctx.uv_loop, on_wake, Rc::as_ptr(&ctx) as *mut _) };
    wake.set_ref(false);
    // SAFETY: inbox.rs invariant 1: `teardown` closes the handle only after the inbox's
    // `close`.
    let signal = unsafe { LoopSignal::new(wake.raw()) };
    ctx.inbox.attach(Arc::new(signal));
    *ctx.wake.borrow_mut() = Some(wake);
    // SAFETY: invariant 1: this thread's running loop; the data is the context, a mark that
    // `on_turn` does not dereference, and `teardown` closes the handle. Test:
    // __test__/process.test.js "agent.request() on a reused connection goes out from every
    // phase of the loop, and the process exits when done".
    let turn = unsafe { Handle::prepare(ctx.uv_loop, on_turn, Rc::as_ptr(&ctx) as *mut _) };
    turn.set_ref(false);
    *ctx.turn.borrow_mut() = Some(turn);
    crate::runtime::hold_wakes();
    CTX.with(|c| *c.borrow_mut() = Some(ctx.clone()));
    // SAFETY: js invariant 1; `cleanup` takes no data and is registered once per env (a
    // second `init` returns above), and Node runs it on this thread when the env is torn down.
    unsafe { sys::napi_add_env_cleanup_hook(env, Some(cleanup), std::ptr::null_mut()) };
    Ok(ctx)
}

impl EnvCtx {
    /// Has the headers-timeout sweep (`request::sweep_headers_deadlines`) run in
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
        timer.timer_start(on_sweep, SWEEP_EVERY_MS);
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
        (ctx.hooks.deliver)(&ctx, item);
    }
    // A burst's vector is not kept: its memory goes back.
    if batch.capacity() <= SPARE_MAX {
        *ctx.spare.borrow_mut() = batch;
    }
}

/// # Safety
/// Called by libuv alone, on this thread's loop, for the open prepare handle; it dereferences
/// nothing it is given, and calls no JavaScript.
unsafe extern "C" fn on_turn(_: *mut uv::RawHandle) {
    if let Err(panic) = guard::catch(crate::runtime::release_held) {
        super::debug::debug!("waking tokio failed: {panic}");
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
    if let Err(panic) = guard::catch(|| (ctx.hooks.sweep)(&ctx)) {
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

/// The env's teardown: what is above the env ends ([`Hooks::teardown`]), then its handles close.
fn teardown() {
    let Some(ctx) = CTX.with(|c| c.borrow_mut().take()) else {
        return;
    };
    ctx.inbox.close();
    drop(ctx.inbox.swap(Vec::new()));
    // A panic there cannot fail anything: what it left is freed with the env.
    let _ = guard::catch(|| (ctx.hooks.teardown)(&ctx));
    if let Some(wake) = ctx.wake.borrow_mut().take() {
        wake.close();
    }
    if let Some(sweep) = ctx.sweep.borrow_mut().take() {
        sweep.close();
    }
    if let Some(turn) = ctx.turn.borrow_mut().take() {
        turn.close();
    }
    // The connections closed; any task woken for them meanwhile runs now, and this thread,
    // its loop gone, holds no more wake-ups.
    crate::runtime::stop_holding();
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
        cb.on_connection,
        cb.on_step,
    ] {
        r.delete(ctx.env);
    }
    ctx.chunks.teardown();
    ctx.batch.destroy(ctx.env);
}
