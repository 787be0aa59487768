//! Raw Node-API helpers for calling into JavaScript from libuv callbacks: handle scopes,
//! references, async contexts and `napi_make_callback` with Node's uncaught-exception handling.
//!
//! Everything here runs on the JavaScript thread that owns `env`.
//!
//! # Safety
//!
//! The raw Node-API calls below rely on four invariants; each `SAFETY:` note names the ones
//! it uses.
//!
//! 1. **One env, its own thread, inside a scope.** `env` is the env of the calling JavaScript
//!    thread, alive, and every `napi_value` passed in was made on it and is still in the handle
//!    scope it was made in: the Node-API call being served, or the [`HandleScope`] each libuv
//!    callback opens first (env.rs `on_wake`/`on_sweep`, conn/plain.rs `on_poll`, pool
//!    `on_timer`). Kept by where the env comes from: env.rs `EnvCtx` is a thread-local (`CTX`)
//!    taken out by the cleanup hook (env.rs `teardown`) before the env goes, and the types here
//!    are not `Send`. Every test that loads the addon runs these calls; other threads' envs:
//!    __test__/process.test.js "the addon works in several worker threads at once, and a worker
//!    terminated mid-request ends cleanly".
//! 2. **References and async contexts end once.** A [`Ref`] is only read, weakened or
//!    strengthened before its owner deletes it, and deleted once; an [`AsyncContext`] likewise.
//!    Both are `Copy`, so this is kept by their owners: env.rs `Callbacks` and the slab
//!    (`teardown` runs once, as it takes the context; `chunk_of` takes the old slab out before
//!    deleting its reference), conn `Owner` (`forget_owner` takes it out of its cell; the
//!    `strong` flag pairs `weaken` with `strengthen`), request `JsFace::release` (called once,
//!    by `client::driver::Request::finish`, behind its `finished` flag) and pool `PoolCell`'s
//!    `Drop`. Test: __test__/safety.test.js "an end reached twice ends once: aborts and
//!    destroys from inside listeners, in every order".
//! 3. **Memory handed to the runtime is freed by its finalizer alone.** A box given to
//!    `napi_create_external_buffer` or `napi_create_external` is freed by the finalizer the
//!    runtime calls once, or by us when the call failed and the runtime never took it
//!    ([`buffer_external`], [`external`]). Tests: __test__/chunks.test.js "agent.request():
//!    large reads, which cross without a copy, keep their bytes and take writes as their own"
//!    (external Buffers); __test__/request/basics.test.js "a GET resolves with status, headers
//!    and a body stream" (request heads from `prepareHead`).
//! 4. **Pointers and lengths the runtime gives describe live memory for the call.** A Buffer's
//!    bytes, an argument list, a string written into our buffer: `len` bytes at the pointer,
//!    valid until JavaScript runs again, so they are copied (or used) before the call returns
//!    and no JavaScript runs in between (binding `request` copies the body at once). Tests:
//!    __test__/request/bodies.test.js "a large body given whole is sent as it was when
//!    request() was called, and its Buffer is let go of whatever ends the request", and
//!    __test__/request/basics.test.js "long methods, paths and header lines cross whole; header
//!    values go as latin1, as Node sends them".

use std::ffi::CString;
use std::ptr;

use napi::sys;

use crate::error::Error;
use crate::transport::tls::TlsInfo;

mod args;

pub use args::Args;

/// A handle scope for the duration of a libuv callback.
pub struct HandleScope {
    env: sys::napi_env,
    scope: sys::napi_handle_scope,
}

impl HandleScope {
    pub fn open(env: sys::napi_env) -> HandleScope {
        let mut scope = ptr::null_mut();
        // SAFETY: invariant 1 (see the module's Safety note): opened on the env's thread, first
        // thing in a libuv callback.
        unsafe { sys::napi_open_handle_scope(env, &mut scope) };
        HandleScope { env, scope }
    }
}

impl Drop for HandleScope {
    fn drop(&mut self) {
        // SAFETY: invariant 1; the scope `open` made, closed once by this drop, innermost first
        // (the callbacks drop their `CallbackScope` before it, in reverse declaration order).
        unsafe { sys::napi_close_handle_scope(self.env, self.scope) };
    }
}

/// A strong reference to a JavaScript value, deleted explicitly with [`Ref::delete`].
#[derive(Clone, Copy)]
pub struct Ref(sys::napi_ref);

impl Ref {
    /// # Safety
    /// Invariant 1 (see the module's Safety note): `value` is a live value of `env`, in scope,
    /// on its thread; the caller owns the result and deletes it once (invariant 2).
    pub unsafe fn new(env: sys::napi_env, value: sys::napi_value, count: u32) -> Ref {
        let mut r = ptr::null_mut();
        // SAFETY: the caller's contract above.
        unsafe { sys::napi_create_reference(env, value, count, &mut r) };
        Ref(r)
    }

    /// The value, or null if a weak reference's object was collected.
    pub fn get(self, env: sys::napi_env) -> sys::napi_value {
        let mut value = ptr::null_mut();
        // SAFETY: invariants 1 and 2: a reference of this env, not deleted yet.
        unsafe { sys::napi_get_reference_value(env, self.0, &mut value) };
        value
    }

    /// Makes a weak reference strong again (count 0 -> 1).
    pub fn strengthen(self, env: sys::napi_env) {
        let mut count = 0;
        // SAFETY: invariants 1 and 2: a live reference of this env (conn `take` strengthens
        // only a weak one, per `Owner.strong`).
        unsafe { sys::napi_reference_ref(env, self.0, &mut count) };
    }

    /// Makes a strong reference weak (count 1 -> 0): the object may now be collected.
    pub fn weaken(self, env: sys::napi_env) {
        let mut count = 0;
        // SAFETY: invariants 1 and 2: a live reference with a count of 1 (conn `park`
        // weakens only a strong one, per `Owner.strong`).
        unsafe { sys::napi_reference_unref(env, self.0, &mut count) };
    }

    pub fn delete(self, env: sys::napi_env) {
        // SAFETY: invariants 1 and 2: deleted once, by the reference's owner.
        unsafe { sys::napi_delete_reference(env, self.0) };
    }
}

/// An async context: the `AsyncLocalStorage` store and async_hooks ids that callbacks into a
/// socket see, captured where the socket was bound to its request.
#[derive(Clone, Copy)]
pub struct AsyncContext(sys::napi_async_context);

impl AsyncContext {
    /// # Safety
    /// Invariant 1 (see the module's Safety note): `resource` is a live object of `env`, in
    /// scope, on its thread; called from the JavaScript call that causes the later callbacks,
    /// so that its context is the one captured. The caller destroys the result once
    /// (invariant 2).
    pub unsafe fn new(env: sys::napi_env, resource: sys::napi_value, name: &str) -> AsyncContext {
        // The binding's names are ASCII: a byte per character.
        // SAFETY: the caller's contract above, passed on.
        unsafe { AsyncContext::named_by(env, resource, latin1(env, name.as_bytes())) }
    }

    /// The same, named by a JavaScript string: a caller that makes one per call passes its
    /// name in, instead of a string made here each time.
    ///
    /// # Safety
    /// As [`AsyncContext::new`]; `name` is a live string of `env` (request.rs passes the one
    /// JavaScript keeps for this).
    pub unsafe fn named_by(
        env: sys::napi_env,
        resource: sys::napi_value,
        name: sys::napi_value,
    ) -> AsyncContext {
        let mut ctx = ptr::null_mut();
        // SAFETY: the caller's contract above. Test: __test__/context.test.js (each request's
        // events run in its own async context).
        unsafe { sys::napi_async_init(env, resource, name, &mut ctx) };
        AsyncContext(ctx)
    }

    pub fn destroy(self, env: sys::napi_env) {
        // SAFETY: invariants 1 and 2: made by `new` on this env, destroyed once by its owner.
        unsafe { sys::napi_async_destroy(env, self.0) };
    }
}

/// A callback scope: `process.nextTick` callbacks and microtasks queued inside it run when the
/// outermost one closes (on drop).
pub struct CallbackScope {
    env: sys::napi_env,
    scope: sys::napi_callback_scope,
}

impl CallbackScope {
    pub fn open(env: sys::napi_env, ctx: AsyncContext) -> CallbackScope {
        let mut scope = ptr::null_mut();
        // SAFETY: invariants 1 and 2: a live context of this env, on its thread, inside the
        // callback's handle scope (the callbacks open the `HandleScope` first).
        unsafe { sys::napi_open_callback_scope(env, object(env), ctx.0, &mut scope) };
        CallbackScope { env, scope }
    }
}

impl Drop for CallbackScope {
    fn drop(&mut self) {
        if self.scope.is_null() {
            return;
        }
        // SAFETY: invariant 1; opened by `open` on this env (null when that failed, skipped
        // above) and closed once, by this drop. A failure of code run at the close (a microtask
        // or tick that threw) is reported as uncaught: __test__/context.test.js
        // "agent.request(): an exception in one body handler is uncaught and spares the other
        // requests".
        if unsafe { sys::napi_close_callback_scope(self.env, self.scope) } != sys::Status::napi_ok {
            rethrow_pending(self.env);
        }
    }
}

/// Calls `func` on `recv` as Node calls into JavaScript from its own handles: inside a callback
/// scope (so `process.nextTick` callbacks and microtasks run when it returns) and with an
/// exception thrown by user code reported as uncaught, never swallowed.
pub fn make_callback(
    env: sys::napi_env,
    ctx: Option<AsyncContext>,
    recv: sys::napi_value,
    func: sys::napi_value,
    args: &[sys::napi_value],
) -> Option<sys::napi_value> {
    let mut result = ptr::null_mut();
    // SAFETY: invariants 1 and 2: live values of this env in the callback's scope, `args` a
    // live slice with its length; a null context means "no async context" to Node-API.
    // Tests: __test__/context.test.js "response callbacks see the store of their request on
    // fresh, reused and queued connections".
    let status = unsafe {
        sys::napi_make_callback(
            env,
            ctx.map_or(ptr::null_mut(), |c| c.0),
            recv,
            func,
            args.len(),
            args.as_ptr(),
            &mut result,
        )
    };
    if status != sys::Status::napi_ok {
        rethrow_pending(env);
        return None;
    }
    Some(result)
}

/// `value` as a number, if it is one.
pub fn to_f64(env: sys::napi_env, value: sys::napi_value) -> Option<f64> {
    let mut n = 0.0;
    // SAFETY: invariant 1 (a plain query; anything but a number fails with a status).
    let status = unsafe { sys::napi_get_value_double(env, value, &mut n) };
    (status == sys::Status::napi_ok).then_some(n)
}

/// Calls `func(...args)` plainly: for the binding's own helpers, which run no user code.
pub fn call(env: sys::napi_env, func: sys::napi_value, args: &[sys::napi_value]) {
    let mut recv = ptr::null_mut();
    let mut result = ptr::null_mut();
    // SAFETY: invariant 1: live values of this env, `args` a live slice with its length.
    let status = unsafe {
        sys::napi_get_undefined(env, &mut recv);
        sys::napi_call_function(env, recv, func, args.len(), args.as_ptr(), &mut result)
    };
    if status != sys::Status::napi_ok {
        rethrow_pending(env);
    }
}

/// Hands a pending JavaScript exception to Node's `uncaughtException` machinery.
pub fn rethrow_pending(env: sys::napi_env) {
    let mut pending = false;
    // SAFETY: invariant 1: plain queries on this env; the exception handed on is the one just
    // taken. Test: __test__/context.test.js "an exception in one request handler does not
    // disturb other requests or the pool".
    unsafe {
        sys::napi_is_exception_pending(env, &mut pending);
        if pending {
            let mut exc = ptr::null_mut();
            sys::napi_get_and_clear_last_exception(env, &mut exc);
            sys::napi_fatal_exception(env, exc);
        }
    }
}

pub fn string(env: sys::napi_env, s: &str) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: invariant 1; a live UTF-8 slice with its length (copied by the call).
    unsafe { sys::napi_create_string_utf8(env, s.as_ptr().cast(), s.len() as isize, &mut value) };
    value
}

/// A string of latin1 bytes (HTTP header values, as Node's parser makes them).
pub fn latin1(env: sys::napi_env, bytes: &[u8]) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: invariant 1; a live byte slice with its length (copied by the call).
    unsafe {
        sys::napi_create_string_latin1(env, bytes.as_ptr().cast(), bytes.len() as isize, &mut value)
    };
    value
}

pub fn number(env: sys::napi_env, n: f64) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: invariant 1 (plain value creation).
    unsafe { sys::napi_create_double(env, n, &mut value) };
    value
}

pub fn null(env: sys::napi_env) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: invariant 1 (plain value lookup).
    unsafe { sys::napi_get_null(env, &mut value) };
    value
}

/// A new Buffer holding a copy of `data` (small reads are cheaper copied than shared).
pub fn buffer_copy(env: sys::napi_env, data: &[u8]) -> sys::napi_value {
    let mut value = ptr::null_mut();
    let mut out = ptr::null_mut();
    // SAFETY: invariant 1; copies `data.len()` bytes from a live slice.
    unsafe {
        sys::napi_create_buffer_copy(env, data.len(), data.as_ptr().cast(), &mut out, &mut value)
    };
    value
}

/// A Buffer over the bytes of `data` itself, without a copy: the Buffer keeps them alive, and
/// its finalizer releases them. `data` must be bytes read from a connection (never static
/// memory) that Rust does not read again: JavaScript may write into them. None where the
/// runtime refuses external buffers.
pub fn buffer_external(env: sys::napi_env, data: bytes::Bytes) -> Option<sys::napi_value> {
    /// # Safety
    /// Called by the runtime alone, once, as the finalizer of the Buffer made below.
    unsafe extern "C" fn release(
        _env: sys::napi_env,
        _data: *mut std::ffi::c_void,
        hint: *mut std::ffi::c_void,
    ) {
        // SAFETY: invariant 3 (see the module's Safety note): `hint` is the box made below,
        // which the runtime hands to this finalizer once; nothing else frees it.
        drop(unsafe { Box::from_raw(hint.cast::<bytes::Bytes>()) });
    }
    let len = data.len();
    let at = data.as_ptr().cast_mut().cast();
    let hint = Box::into_raw(Box::new(data));
    let mut value = ptr::null_mut();
    // SAFETY: invariants 1 and 3: `at` points at `len` bytes that the boxed `Bytes` keeps
    // alive until `release`. JavaScript may write them: the caller (env.rs `shared_chunks`)
    // passes only reads of hyper's (never static memory) and reads them no more. Test:
    // __test__/chunks.test.js "agent.request(): large reads, which cross without a copy, keep
    // their bytes and take writes as their own".
    let status = unsafe {
        sys::napi_create_external_buffer(env, len, at, Some(release), hint.cast(), &mut value)
    };
    if status != sys::Status::napi_ok {
        // SAFETY: invariant 3: the call failed before the runtime took the box (Node calls the
        // finalizer itself only for a length past `buffer.constants.MAX_LENGTH`, which no read
        // reaches). No test reaches this: Node refuses external buffers only in V8-sandbox
        // builds.
        drop(unsafe { Box::from_raw(hint) });
        return None;
    }
    Some(value)
}

/// One Buffer holding `chunks` one after the other (a single copy of each).
pub fn buffer_concat(env: sys::napi_env, chunks: &[bytes::Bytes]) -> sys::napi_value {
    if let [one] = chunks {
        return buffer_copy(env, one);
    }
    let len = chunks.iter().map(|c| c.len()).sum();
    let mut value = ptr::null_mut();
    let mut data: *mut std::ffi::c_void = ptr::null_mut();
    // SAFETY: invariant 1; napi_create_buffer gives `len` writable bytes at `data` (a fresh
    // Buffer no JavaScript has seen), or fails (checked, falling back to a copy); the chunks
    // fill exactly `len` bytes, their sum. Test: __test__/request/bodies.test.js "large bodies both
    // ways arrive intact".
    unsafe {
        if sys::napi_create_buffer(env, len, &mut data, &mut value) != sys::Status::napi_ok
            || (data.is_null() && len > 0)
        {
            return buffer_copy(env, &chunks.concat());
        }
        let mut at = data.cast::<u8>();
        for chunk in chunks {
            ptr::copy_nonoverlapping(chunk.as_ptr(), at, chunk.len());
            at = at.add(chunk.len());
        }
    }
    value
}

pub fn set(env: sys::napi_env, obj: sys::napi_value, name: &str, value: sys::napi_value) {
    let name = CString::new(name).expect("property names have no NUL");
    // SAFETY: invariant 1: a live object and value of this env; `name` NUL-terminated.
    unsafe { sys::napi_set_named_property(env, obj, name.as_ptr(), value) };
}

/// `obj[name]` (undefined when absent; null when `obj` is not an object).
pub fn get(env: sys::napi_env, obj: sys::napi_value, name: &std::ffi::CStr) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: a live value of this env and a NUL-terminated name; a failure leaves null.
    unsafe { sys::napi_get_named_property(env, obj, name.as_ptr(), &mut value) };
    value
}

pub fn object(env: sys::napi_env) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: invariant 1 (plain value creation).
    unsafe { sys::napi_create_object(env, &mut value) };
    value
}

/// The fields `lib/errors.js` turns into a Node-style `Error`.
pub fn error_descriptor(env: sys::napi_env, err: &Error) -> sys::napi_value {
    let obj = object(env);
    set(env, obj, "code", string(env, err.code()));
    if let Some(errno) = err.errno() {
        set(env, obj, "errno", number(env, errno as f64));
        set(env, obj, "syscall", string(env, err.syscall()));
    }
    set(env, obj, "message", string(env, &err.message()));
    if let Some(address) = err.address() {
        set(env, obj, "address", string(env, address));
    }
    if let Some(port) = err.port() {
        set(env, obj, "port", number(env, port as f64));
    }
    if let Some(hostname) = err.hostname() {
        set(env, obj, "hostname", string(env, hostname));
    }
    if let Some(sent) = err.request_sent() {
        set(env, obj, "requestSent", boolean(env, sent));
    }
    if let Some(ms) = err.timeout_ms() {
        set(env, obj, "timeout", number(env, ms as f64));
    }
    if let Some(status) = err.status_code() {
        set(env, obj, "statusCode", number(env, status as f64));
    }
    if let Some((address, port)) = err.local() {
        set(env, obj, "localAddress", string(env, address));
        set(env, obj, "localPort", number(env, port as f64));
    }
    if let Some((host, chain)) = err.name_check() {
        set(env, obj, "checkedHost", string(env, host));
        let certs: Vec<_> = chain.iter().map(|cert| buffer_copy(env, cert)).collect();
        set(env, obj, "peerChain", array(env, &certs));
    }
    obj
}

pub fn boolean(env: sys::napi_env, b: bool) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: invariant 1 (plain value lookup).
    unsafe { sys::napi_get_boolean(env, b, &mut value) };
    value
}

pub fn array(env: sys::napi_env, items: &[sys::napi_value]) -> sys::napi_value {
    let mut arr = ptr::null_mut();
    // SAFETY: invariant 1 (plain value creation and element stores on this env).
    unsafe {
        sys::napi_create_array_with_length(env, items.len(), &mut arr);
        for (i, item) in items.iter().enumerate() {
            sys::napi_set_element(env, arr, i as u32, *item);
        }
    }
    arr
}

/// What a TLS socket reports of its session (`lib/socket.js` NativeTlsSocket reads it).
pub fn tls_info(env: sys::napi_env, info: &TlsInfo) -> sys::napi_value {
    let obj = object(env);
    set(env, obj, "protocol", string(env, info.protocol));
    set(env, obj, "cipherName", string(env, info.cipher.0));
    set(env, obj, "cipherStandardName", string(env, info.cipher.1));
    let alpn = match &info.alpn {
        Some(p) => string(env, &String::from_utf8_lossy(p)),
        None => boolean(env, false),
    };
    set(env, obj, "alpnProtocol", alpn);
    let chain: Vec<sys::napi_value> = info
        .peer_chain
        .iter()
        .map(|der| buffer_copy(env, der))
        .collect();
    set(env, obj, "peerChain", array(env, &chain));
    set(env, obj, "resumed", boolean(env, info.resumed));
    set(env, obj, "nameKnown", boolean(env, info.name_known));
    set(
        env,
        obj,
        "nameKnownByNode",
        boolean(env, info.name_known_by_node),
    );
    let auth = match &info.authorization_error {
        Some(failure) => {
            let e = object(env);
            set(env, e, "code", string(env, failure.code));
            set(env, e, "message", string(env, failure.message));
            e
        }
        None => null(env),
    };
    set(env, obj, "authorizationError", auth);
    let servername = match &info.servername {
        Some(name) => string(env, name),
        None => boolean(env, false),
    };
    set(env, obj, "servername", servername);
    let name_error = match &info.name_error {
        Some(code) => string(env, code),
        None => null(env),
    };
    set(env, obj, "nameError", name_error);
    let ephemeral = object(env);
    let kx = info
        .key_exchange
        .and_then(crate::transport::tls::ephemeral_key);
    if let Some((kind, name, size)) = kx {
        set(env, ephemeral, "type", string(env, kind));
        set(env, ephemeral, "name", string(env, name));
        set(env, ephemeral, "size", number(env, f64::from(size)));
    }
    set(env, obj, "ephemeral", ephemeral);
    let local = match &info.local_cert {
        Some(der) => buffer_copy(env, der),
        None => null(env),
    };
    set(env, obj, "localCert", local);
    obj
}

/// Throws an `Error` with `code` from a plain Node-API function; returns what the function then
/// returns (nothing).
pub fn throw_error(env: sys::napi_env, code: &str, message: &str) -> sys::napi_value {
    let code = CString::new(code).unwrap_or_default();
    let message = CString::new(message).unwrap_or_default();
    // SAFETY: invariant 1; NUL-terminated strings; no exception is pending (the function threw
    // none yet). Tests: __test__/request/bodies.test.js "a string body whose bytes were miscounted
    // fails at once, and the agent goes on"; __test__/safety.test.js 'a panic at "request" ...'.
    unsafe { sys::napi_throw_error(env, code.as_ptr(), message.as_ptr()) };
    ptr::null_mut()
}

/// A JavaScript value that owns `value` (dropped when the value is collected), tagged with
/// `tag` so that [`Args::external`] takes back only what was made with the same tag.
pub fn external<T: 'static>(
    env: sys::napi_env,
    value: T,
    tag: &'static sys::napi_type_tag,
) -> Option<sys::napi_value> {
    /// # Safety
    /// Called by the runtime alone, once, as the finalizer of the external made below.
    unsafe extern "C" fn release<T>(
        _env: sys::napi_env,
        data: *mut std::ffi::c_void,
        _hint: *mut std::ffi::c_void,
    ) {
        // SAFETY: invariant 3: `data` is the box of a `T` made below, which the runtime hands
        // to this finalizer once; nothing else frees it.
        drop(unsafe { Box::from_raw(data.cast::<T>()) });
    }
    let data = Box::into_raw(Box::new(value));
    let mut out = ptr::null_mut();
    // SAFETY: invariants 1 and 3: the box lives until the runtime calls `release` for it.
    let made = unsafe {
        sys::napi_create_external(
            env,
            data.cast(),
            Some(release::<T>),
            ptr::null_mut(),
            &mut out,
        )
    } == sys::Status::napi_ok;
    if !made {
        // SAFETY: invariant 3: `napi_create_external` failed, so the runtime never took the
        // box. No test reaches this (it fails only with an exception already pending).
        drop(unsafe { Box::from_raw(data) });
        return None;
    }
    // SAFETY: invariant 1: a fresh external of this env, not tagged yet (a failure leaves it
    // to the collector, whose finalizer frees the box: invariant 3).
    (unsafe { sys::napi_type_tag_object(env, out, tag) } == sys::Status::napi_ok).then_some(out)
}
