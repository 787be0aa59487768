//! A request body given whole as a Buffer goes to hyper without a copy: its `Bytes` point into
//! the Buffer's memory, and a reference keeps the Buffer alive until both the request (on the
//! JavaScript thread) and the last of those `Bytes` (hyper's body, a replay's) have let go. As
//! with `socket.write(buffer)`, the bytes are read from the Buffer as they are sent: a Buffer
//! changed before the request is over sends what it holds then.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use napi::sys;

use super::env::{self, Completion, Inbox};
use super::js::Ref;

/// Bodies from this size on are lent; a smaller one is copied, which costs about as much as the
/// reference, its shared state and its release (1 KiB POSTs measured the same either way; 4 KiB
/// ones 4 to 9% faster lent).
pub const LEND_MIN: usize = 4 * 1024;

/// The halves of a loan: the request's, and its bytes'.
const REQUEST: u8 = 1;
const BYTES: u8 = 2;

/// The reference that keeps a lent Buffer alive, deleted by the second of its two holders to
/// let go: on the JavaScript thread at once, or, from tokio, through the inbox.
struct Loan {
    reference: Ref,
    env: sys::napi_env,
    inbox: Arc<Inbox>,
    gone: AtomicU8,
}

// SAFETY: `reference` and `env` are used on the JavaScript thread of `env` only (`let_go`
// checks the thread), or carried there through the inbox; the rest is thread-safe.
unsafe impl Send for Loan {}
unsafe impl Sync for Loan {}

impl Loan {
    fn let_go(&self, half: u8) {
        if self.gone.fetch_or(half, Ordering::AcqRel) == 0 {
            // The other half still holds it.
            return;
        }
        match env::current() {
            Some(ctx) if ctx.env == self.env => self.reference.delete(self.env),
            // After the env's cleanup the inbox drops this, and the env's teardown frees the
            // reference.
            _ => self
                .inbox
                .post(Completion::Release(Released(self.reference))),
        }
    }
}

/// A lent reference on its way to the JavaScript thread, deleted there (see `on_wake`).
pub struct Released(Ref);

// SAFETY: only deleted on the thread of its env, by `on_wake`.
unsafe impl Send for Released {}

impl Released {
    pub fn delete(self, env: sys::napi_env) {
        self.0.delete(env);
    }
}

/// The Buffer's bytes, owned by the `Bytes` made of them.
struct Lent {
    ptr: *const u8,
    len: usize,
    loan: Arc<Loan>,
}

// SAFETY: the bytes stay put while the reference keeps their Buffer alive, which it does until
// this is dropped; nothing writes through the pointer.
unsafe impl Send for Lent {}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `len` bytes at `ptr`, kept alive by the loan's reference (see above).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.loan.inbox.lent_returned();
        self.loan.let_go(BYTES);
    }
}

/// The request's half of a loan: dropping it (when the request is over) lets go.
pub struct Lender(Arc<Loan>);

impl Drop for Lender {
    fn drop(&mut self) {
        self.0.let_go(REQUEST);
    }
}

/// Lends `data`, the bytes of the Buffer `value` (an argument of the current call on `env`'s
/// thread, whose context `inbox` is), to hyper.
///
/// # Safety
/// `data` are the bytes of `value`, a live Buffer of `env`.
pub unsafe fn lend(
    env: sys::napi_env,
    inbox: &Arc<Inbox>,
    value: sys::napi_value,
    data: &[u8],
) -> (Bytes, Lender) {
    let loan = Arc::new(Loan {
        // SAFETY: a live object of the current call.
        reference: unsafe { Ref::new(env, value, 1) },
        env,
        inbox: inbox.clone(),
        gone: AtomicU8::new(0),
    });
    inbox.lent_out();
    let bytes = Bytes::from_owner(Lent {
        ptr: data.as_ptr(),
        len: data.len(),
        loan: loan.clone(),
    });
    (bytes, Lender(loan))
}
