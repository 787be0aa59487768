//! Raw Node-API helpers for calling into JavaScript from libuv callbacks: handle scopes,
//! references, async contexts and `napi_make_callback` with Node's uncaught-exception handling.
//!
//! Everything here runs on the JavaScript thread that owns `env`.

use std::ffi::CString;
use std::ptr;

use napi::sys;

use crate::error::Error;

/// A handle scope for the duration of a libuv callback.
pub struct HandleScope {
    env: sys::napi_env,
    scope: sys::napi_handle_scope,
}

impl HandleScope {
    pub fn open(env: sys::napi_env) -> HandleScope {
        let mut scope = ptr::null_mut();
        // SAFETY: called on the env's thread outside any other napi call.
        unsafe { sys::napi_open_handle_scope(env, &mut scope) };
        HandleScope { env, scope }
    }
}

impl Drop for HandleScope {
    fn drop(&mut self) {
        // SAFETY: the scope opened in `open`, closed once.
        unsafe { sys::napi_close_handle_scope(self.env, self.scope) };
    }
}

/// A strong reference to a JavaScript value, deleted explicitly with [`Ref::delete`].
#[derive(Clone, Copy)]
pub struct Ref(sys::napi_ref);

impl Ref {
    /// # Safety
    /// `value` is a live object of `env`.
    pub unsafe fn new(env: sys::napi_env, value: sys::napi_value, count: u32) -> Ref {
        let mut r = ptr::null_mut();
        unsafe { sys::napi_create_reference(env, value, count, &mut r) };
        Ref(r)
    }

    /// The value, or null if a weak reference's object was collected.
    pub fn get(self, env: sys::napi_env) -> sys::napi_value {
        let mut value = ptr::null_mut();
        // SAFETY: a reference created on this env and not deleted yet.
        unsafe { sys::napi_get_reference_value(env, self.0, &mut value) };
        value
    }

    /// Makes a weak reference strong again (count 0 -> 1).
    pub fn strengthen(self, env: sys::napi_env) {
        let mut count = 0;
        // SAFETY: a live reference of this env.
        unsafe { sys::napi_reference_ref(env, self.0, &mut count) };
    }

    /// Makes a strong reference weak (count 1 -> 0): the object may now be collected.
    pub fn weaken(self, env: sys::napi_env) {
        let mut count = 0;
        // SAFETY: a live reference of this env with a count above zero.
        unsafe { sys::napi_reference_unref(env, self.0, &mut count) };
    }

    pub fn delete(self, env: sys::napi_env) {
        // SAFETY: deleted once, by the owner of the reference.
        unsafe { sys::napi_delete_reference(env, self.0) };
    }
}

/// An async context: the `AsyncLocalStorage` store and async_hooks ids that callbacks into a
/// socket see, captured where the socket was bound to its request.
#[derive(Clone, Copy)]
pub struct AsyncContext(sys::napi_async_context);

impl AsyncContext {
    /// # Safety
    /// `resource` is a live object of `env`; called from the JavaScript call that causes the
    /// later callbacks, so that its context is the one captured.
    pub unsafe fn new(env: sys::napi_env, resource: sys::napi_value, name: &str) -> AsyncContext {
        let mut ctx = ptr::null_mut();
        let name = string(env, name);
        unsafe { sys::napi_async_init(env, resource, name, &mut ctx) };
        AsyncContext(ctx)
    }

    pub fn destroy(self, env: sys::napi_env) {
        // SAFETY: created by `new` on this env, destroyed once.
        unsafe { sys::napi_async_destroy(env, self.0) };
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
) {
    let mut result = ptr::null_mut();
    // SAFETY: live values of this env; a null context means "no async context" to Node-API.
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
    }
}

/// Hands a pending JavaScript exception to Node's `uncaughtException` machinery.
pub fn rethrow_pending(env: sys::napi_env) {
    let mut pending = false;
    // SAFETY: plain queries on this env.
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
    // SAFETY: a UTF-8 slice with its length.
    unsafe { sys::napi_create_string_utf8(env, s.as_ptr().cast(), s.len() as isize, &mut value) };
    value
}

pub fn number(env: sys::napi_env, n: f64) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: plain value creation.
    unsafe { sys::napi_create_double(env, n, &mut value) };
    value
}

pub fn null(env: sys::napi_env) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: plain value lookup.
    unsafe { sys::napi_get_null(env, &mut value) };
    value
}

/// A new Buffer holding a copy of `data` (small reads are cheaper copied than shared).
pub fn buffer_copy(env: sys::napi_env, data: &[u8]) -> sys::napi_value {
    let mut value = ptr::null_mut();
    let mut out = ptr::null_mut();
    // SAFETY: copies `data.len()` bytes from a live slice.
    unsafe {
        sys::napi_create_buffer_copy(env, data.len(), data.as_ptr().cast(), &mut out, &mut value)
    };
    value
}

pub fn set(env: sys::napi_env, obj: sys::napi_value, name: &str, value: sys::napi_value) {
    let name = CString::new(name).expect("property names have no NUL");
    // SAFETY: a live object and value of this env.
    unsafe { sys::napi_set_named_property(env, obj, name.as_ptr(), value) };
}

pub fn object(env: sys::napi_env) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: plain value creation.
    unsafe { sys::napi_create_object(env, &mut value) };
    value
}

/// The fields `lib/errors.js` turns into a Node-style `Error`.
pub fn error_descriptor(env: sys::napi_env, err: &Error) -> sys::napi_value {
    let obj = object(env);
    set(env, obj, "code", string(env, err.code()));
    set(env, obj, "errno", number(env, err.errno() as f64));
    set(env, obj, "syscall", string(env, err.syscall()));
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
    obj
}
