//! The few libuv calls the JavaScript thread's byte path needs.
//!
//! Node exports libuv's symbols to addons; like the `napi_*` symbols they resolve against the
//! running `node` binary when the addon is loaded. Handles are allocated here at the size libuv
//! itself reports (`uv_handle_size`), so no libuv header or struct layout is copied; the only
//! layout relied on is libuv's public API (`uv_handle_{get,set}_data`).
//!
//! On Windows a DLL cannot leave symbols for the executable that loads it to provide: napi-rs
//! looks the `napi_*` functions up in the host process, and so does [`check_abi`] for the libuv
//! ones (in the executable, `node.exe`, or else in a loaded `libnode.dll`), once, before any
//! handle is made. The poll handle is Unix's alone: Windows has no plain socket on this thread
//! (see `transport::carry`).
//!
//! # Safety
//!
//! 1. **Handle types as libuv numbers them.** `Kind`'s values are the running libuv's: checked
//!    by [`check_abi`], which env.rs `init` runs before it makes any handle (a mismatch fails
//!    `init`). Every test that loads the addon runs the check. On Windows, the same check
//!    first looks up every libuv function this module calls, with the signature declared
//!    below (libuv's public API); a missing one fails `init` too, and a call through a table
//!    that did not load panics rather than calls anything.
//! 2. **A handle lives on its loop's thread, from init to its close callback.** A [`Handle`]
//!    is made, started, stopped, (un)referenced and closed only on the JavaScript thread
//!    whose loop it is on (it holds a raw pointer, so it is neither `Send` nor `Sync`); the
//!    one exception is [`async_send`], libuv's thread-safe call (env.rs `Inbox`, invariant 2
//!    there). [`Handle::close`] consumes the handle, so it is closed once, and its memory is
//!    freed only in the close callback, with the layout it was allocated with; a handle that
//!    is never closed leaks rather than dangles (no `Drop`). Test: __test__/process.test.js
//!    "the addon works in several worker threads at once, and a worker terminated mid-request
//!    ends cleanly" (handles of several loops, closed at a worker's teardown).
//! 3. **A handle's data pointer is null or its owner.** Owners set the data to themselves
//!    (conn `Conn`, pool `PoolCell`, env.rs `EnvCtx`) and close the handle before they
//!    go: conn `Conn::close`/`try_replay`, pool `PoolCell::shutdown` (from its `Drop`),
//!    env.rs `teardown`. [`Handle::close`] nulls the pointer before `uv_close`, so a callback
//!    that finds it non-null finds its owner alive; the callbacks then take a strong count
//!    (conn/plain.rs `on_poll`, pool `on_timer`) or do not dereference it (env.rs `on_wake`,
//!    `on_sweep`, `on_turn`). Tests: __test__/errors.test.js "agent.destroy() closes idle and active
//!    connections and fails queued requests", __test__/storm.test.js "${name}, ${protocol}: a
//!    storm of faults, aborts and queueing settles every request as it should",
//!    __test__/safety.test.js 'a panic at "poll" ...'.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::NonNull;

pub type Loop = c_void;
pub type RawHandle = c_void;
#[cfg(unix)]
pub type PollCb = unsafe extern "C" fn(handle: *mut RawHandle, status: c_int, events: c_int);
pub type CloseCb = unsafe extern "C" fn(handle: *mut RawHandle);
pub type HandleCb = unsafe extern "C" fn(handle: *mut RawHandle);

#[cfg(unix)]
pub const READABLE: c_int = 1;
#[cfg(unix)]
pub const WRITABLE: c_int = 2;
#[cfg(unix)]
pub const DISCONNECT: c_int = 4;

/// `uv_handle_type` values (stable since libuv 1.0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Kind {
    Async = 1,
    Poll = 8,
    Prepare = 9,
    Timer = 13,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Async => "async",
            Kind::Poll => "poll",
            Kind::Prepare => "prepare",
            Kind::Timer => "timer",
        }
    }
}

/// Declares the libuv functions this module calls: linked against the host on Unix, looked up
/// in it on Windows (see the module's note).
macro_rules! libuv {
    ($($(#[$attr:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)?;)*) => {
        #[cfg(unix)]
        extern "C" {
            $($(#[$attr])* fn $name($($arg: $ty),*) $(-> $ret)?;)*
        }

        /// The host's libuv functions, as looked up.
        #[cfg(windows)]
        struct Functions {
            $($(#[$attr])* $name: unsafe extern "C" fn($($ty),*) $(-> $ret)?,)*
        }

        #[cfg(windows)]
        impl Functions {
            fn look_up() -> Result<Functions, String> {
                Ok(Functions {
                    $($(#[$attr])*
                    // SAFETY: invariant 1: the host's export of this name is libuv's function
                    // of that name, whose signature (libuv's public API) is the one declared;
                    // "system" and "C" are one calling convention on x86-64 and AArch64.
                    $name: unsafe {
                        std::mem::transmute::<
                            unsafe extern "system" fn() -> isize,
                            unsafe extern "C" fn($($ty),*) $(-> $ret)?,
                        >(host::symbol(concat!(stringify!($name), "\0"))?)
                    },)*
                })
            }
        }

        $(
            $(#[$attr])*
            // Safety: as libuv documents for the function of this name.
            #[cfg(windows)]
            unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                // SAFETY: the caller's contract is the function's own; the pointer was looked up
                // by `check_abi` (invariant 1). Test: scripts/win-smoke-wine.sh.
                unsafe { (host::functions().$name)($($arg),*) }
            }
        )*
    };
}

libuv! {
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_handle_type_name(kind: c_int) -> *const c_char;
    fn uv_handle_get_data(handle: *const RawHandle) -> *mut c_void;
    fn uv_handle_set_data(handle: *mut RawHandle, data: *mut c_void);
    fn uv_close(handle: *mut RawHandle, cb: Option<CloseCb>);
    fn uv_ref(handle: *mut RawHandle);
    fn uv_unref(handle: *mut RawHandle);
    #[cfg(unix)]
    fn uv_poll_init_socket(lp: *mut Loop, handle: *mut RawHandle, fd: c_int) -> c_int;
    #[cfg(unix)]
    fn uv_poll_start(handle: *mut RawHandle, events: c_int, cb: PollCb) -> c_int;
    #[cfg(unix)]
    fn uv_poll_stop(handle: *mut RawHandle) -> c_int;
    fn uv_timer_init(lp: *mut Loop, handle: *mut RawHandle) -> c_int;
    fn uv_timer_start(handle: *mut RawHandle, cb: HandleCb, timeout: u64, repeat: u64) -> c_int;
    fn uv_async_init(lp: *mut Loop, handle: *mut RawHandle, cb: HandleCb) -> c_int;
    fn uv_prepare_init(lp: *mut Loop, handle: *mut RawHandle) -> c_int;
    fn uv_prepare_start(handle: *mut RawHandle, cb: HandleCb) -> c_int;
    fn uv_async_send(handle: *mut RawHandle) -> c_int;
}

/// Where the libuv functions come from on Windows: the host process's exports.
#[cfg(windows)]
mod host {
    use std::sync::OnceLock;

    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};

    use super::Functions;

    static FUNCTIONS: OnceLock<Result<Functions, String>> = OnceLock::new();

    /// Looks the functions up, once; what [`super::check_abi`] runs first.
    pub fn load() -> Result<(), String> {
        FUNCTIONS
            .get_or_init(Functions::look_up)
            .as_ref()
            .map(|_| ())
            .map_err(Clone::clone)
    }

    /// The functions looked up. `check_abi` has loaded them before any handle is made (a
    /// failure fails `init`); a call before that, or after a failure, panics.
    pub fn functions() -> &'static Functions {
        match FUNCTIONS.get_or_init(Functions::look_up) {
            Ok(functions) => functions,
            Err(err) => panic!("{err}"),
        }
    }

    /// The export `name` (NUL-terminated) of the executable, or else of a loaded `libnode.dll`
    /// (Node built as a library, as embedders load it).
    pub fn symbol(name: &'static str) -> Result<unsafe extern "system" fn() -> isize, String> {
        let libnode: Vec<u16> = "libnode.dll\0".encode_utf16().collect();
        // SAFETY: GetModuleHandleW with null is the executable's module, and with a
        // NUL-terminated name a loaded module or null; neither takes a reference to release.
        // GetProcAddress reads the NUL-terminated name and returns the export or None.
        // Test: scripts/win-smoke-wine.sh (init looks every function up).
        unsafe {
            [std::ptr::null(), libnode.as_ptr()]
                .into_iter()
                .map(|module| GetModuleHandleW(module))
                .filter(|module| !module.is_null())
                .find_map(|module| GetProcAddress(module, name.as_ptr()))
        }
        .ok_or_else(|| {
            let name = name.trim_end_matches('\0');
            format!("libuv's {name} is not exported by the host process")
        })
    }
}

fn layout(kind: Kind) -> Layout {
    // SAFETY: uv_handle_size is a pure lookup, callable from any thread, of a type number
    // `check_abi` has checked (invariant 1). Test: every test that loads the addon makes handles.
    let size = unsafe { uv_handle_size(kind as c_int) };
    Layout::from_size_align(size.max(1), 16).expect("libuv handle size")
}

/// Checks once that the libuv this addon runs against names the handle types as we number them
/// (on Windows, once its functions are found).
pub fn check_abi() -> Result<(), String> {
    #[cfg(windows)]
    host::load()?;
    for kind in [Kind::Async, Kind::Poll, Kind::Prepare, Kind::Timer] {
        // SAFETY: a pure lookup, returning a static NUL-terminated C string, or null for an
        // unknown type (checked before `CStr::from_ptr` reads it). Invariant 1 (see the
        // module's Safety note). Test: every test that loads the addon runs this check.
        let name = unsafe { uv_handle_type_name(kind as c_int) };
        let ok =
            !name.is_null() && unsafe { CStr::from_ptr(name) }.to_bytes() == kind.name().as_bytes();
        if !ok {
            return Err(format!(
                "libuv handle type {} is not '{}'",
                kind as i32,
                kind.name()
            ));
        }
    }
    Ok(())
}

/// A libuv handle on the heap. It must be closed with [`Handle::close`] on the loop's thread;
/// the memory is freed by libuv's close callback, after the loop is done with it.
pub struct Handle {
    ptr: NonNull<RawHandle>,
    kind: Kind,
}

impl Handle {
    fn alloc(kind: Kind) -> Handle {
        // SAFETY: `layout` has a non-zero size (at least 1) and the size libuv reports for the
        // kind (invariant 1); the init functions fill zeroed memory. Freed with the same layout
        // (invariant 2).
        let ptr = unsafe { alloc_zeroed(layout(kind)) };
        Handle {
            ptr: NonNull::new(ptr.cast()).expect("out of memory for a libuv handle"),
            kind,
        }
    }

    pub fn raw(&self) -> *mut RawHandle {
        self.ptr.as_ptr()
    }

    /// A poll handle watching `fd` on `lp`.
    #[cfg(unix)]
    ///
    /// # Safety
    /// `lp` is the running loop of this thread and `fd` an open socket not watched by it yet,
    /// kept open until the handle is closed; `data` is null or the handle's owner, which
    /// closes it before it goes (invariants 2 and 3 of the module's Safety note).
    pub unsafe fn poll(lp: *mut Loop, fd: c_int, data: *mut c_void) -> Result<Handle, c_int> {
        let h = Handle::alloc(Kind::Poll);
        // SAFETY: the caller's contract above; `h` is fresh zeroed memory of a poll handle's
        // size.
        let rc = unsafe { uv_poll_init_socket(lp, h.raw(), fd) };
        if rc != 0 {
            // SAFETY: libuv fails before it initialises the handle (it checks the descriptor
            // first), so it holds no reference: freed here with the layout of `alloc`. No test
            // reaches this (a connected socket is always accepted).
            unsafe { dealloc(h.raw().cast(), layout(Kind::Poll)) };
            return Err(rc);
        }
        // SAFETY: an initialised handle, on this thread (invariant 2).
        unsafe { uv_handle_set_data(h.raw(), data) };
        Ok(h)
    }

    /// # Safety
    /// `lp` is the running loop of this thread; `data` is null or the handle's owner, which
    /// closes it before it goes (invariants 2 and 3 of the module's Safety note).
    pub unsafe fn timer(lp: *mut Loop, data: *mut c_void) -> Handle {
        let h = Handle::alloc(Kind::Timer);
        // SAFETY: the caller's contract above; `h` is fresh zeroed memory of a timer's size
        // (`uv_timer_init` cannot fail).
        unsafe {
            uv_timer_init(lp, h.raw());
            uv_handle_set_data(h.raw(), data);
        }
        h
    }

    /// # Safety
    /// `lp` is the running loop of this thread; `data` is null or the handle's owner, which
    /// closes it before it goes (invariants 2 and 3 of the module's Safety note).
    pub unsafe fn async_(lp: *mut Loop, cb: HandleCb, data: *mut c_void) -> Handle {
        let h = Handle::alloc(Kind::Async);
        // SAFETY: the caller's contract above; `h` is fresh zeroed memory of an async handle's
        // size. `uv_async_init`'s result is not checked: it fails only when a loop's first
        // async handle cannot make the wake-up descriptor, and Node's loops have async handles
        // of their own from start-up. No test reaches a failure.
        unsafe {
            uv_async_init(lp, h.raw(), cb);
            uv_handle_set_data(h.raw(), data);
        }
        h
    }

    /// A prepare handle calling `cb` on every turn of the loop, right before it polls for I/O.
    ///
    /// # Safety
    /// `lp` is the running loop of this thread; `data` is null or the handle's owner, which
    /// closes it before it goes (invariants 2 and 3 of the module's Safety note).
    pub unsafe fn prepare(lp: *mut Loop, cb: HandleCb, data: *mut c_void) -> Handle {
        let h = Handle::alloc(Kind::Prepare);
        // SAFETY: the caller's contract above; `h` is fresh zeroed memory of a prepare
        // handle's size (`uv_prepare_init` and `uv_prepare_start` with a callback cannot fail).
        unsafe {
            uv_prepare_init(lp, h.raw());
            uv_handle_set_data(h.raw(), data);
            uv_prepare_start(h.raw(), cb);
        }
        h
    }

    #[cfg(unix)]
    pub fn poll_start(&self, events: c_int, cb: PollCb) -> c_int {
        debug_assert_eq!(self.kind, Kind::Poll);
        // SAFETY: invariant 2: an initialised, not closed poll handle (`close` consumes it), on
        // its loop's thread.
        unsafe { uv_poll_start(self.raw(), events, cb) }
    }

    #[cfg(unix)]
    pub fn poll_stop(&self) {
        // SAFETY: invariant 2, as above.
        unsafe { uv_poll_stop(self.raw()) };
    }

    pub fn timer_start(&self, cb: HandleCb, timeout_ms: u64) {
        debug_assert_eq!(self.kind, Kind::Timer);
        // SAFETY: invariant 2: an initialised, not closed timer handle, on its loop's thread.
        unsafe { uv_timer_start(self.raw(), cb, timeout_ms, 0) };
    }

    pub fn set_ref(&self, referenced: bool) {
        // SAFETY: invariant 2: an initialised, not closed handle, on its loop's thread.
        unsafe {
            if referenced {
                uv_ref(self.raw())
            } else {
                uv_unref(self.raw())
            }
        }
    }

    /// Closes the handle. libuv stops watching at once (a poll handle's descriptor may be closed
    /// right after this returns) and frees the memory on a later loop turn.
    pub fn close(self) {
        // SAFETY (the three close callbacks): invariant 2: libuv calls a handle's close
        // callback once, after it is done with the memory, which `alloc` allocated with the
        // layout of the handle's kind; each callback is chosen below by that kind.
        unsafe extern "C" fn free_poll(h: *mut RawHandle) {
            unsafe { dealloc(h.cast(), layout(Kind::Poll)) }
        }
        unsafe extern "C" fn free_timer(h: *mut RawHandle) {
            unsafe { dealloc(h.cast(), layout(Kind::Timer)) }
        }
        unsafe extern "C" fn free_async(h: *mut RawHandle) {
            unsafe { dealloc(h.cast(), layout(Kind::Async)) }
        }
        unsafe extern "C" fn free_prepare(h: *mut RawHandle) {
            unsafe { dealloc(h.cast(), layout(Kind::Prepare)) }
        }
        let cb: CloseCb = match self.kind {
            Kind::Poll => free_poll,
            Kind::Timer => free_timer,
            Kind::Async => free_async,
            Kind::Prepare => free_prepare,
        };
        // SAFETY: invariants 2 and 3: an initialised handle on its loop's thread, closed once
        // (this consumes it); its data is nulled first, so no callback finds its owner after.
        unsafe {
            uv_handle_set_data(self.raw(), std::ptr::null_mut());
            uv_close(self.raw(), Some(cb));
        }
    }
}

/// The data pointer a callback's handle carries.
///
/// # Safety
/// `handle` is a live handle (one libuv passed to its callback), on its loop's thread. The
/// result is null or the handle's owner, alive (invariant 3 of the module's Safety note).
pub unsafe fn data_of(handle: *mut RawHandle) -> *mut c_void {
    // SAFETY: the caller's contract above.
    unsafe { uv_handle_get_data(handle) }
}

/// Wakes the loop that owns an async handle; callable from any thread while the handle is open.
///
/// # Safety
/// `handle` is an async handle that has not been closed, and is not closed before this
/// returns (env.rs `Inbox`: invariant 2 of its module's Safety note).
pub unsafe fn async_send(handle: *mut RawHandle) {
    // SAFETY: the caller's contract above; libuv documents uv_async_send as thread-safe.
    unsafe { uv_async_send(handle) };
}
