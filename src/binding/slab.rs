//! The slab small chunks are copied into for JavaScript: one ArrayBuffer of the JavaScript
//! heap at a time, of which `lib/slab.js` makes each chunk a Buffer view (far cheaper than a
//! Buffer of its own made through Node-API); large chunks cross as Buffers of their own.
//!
//! # Safety
//!
//! 1. **Rust writes only unseen bytes of an attached slab.** `chunk_of` writes past `used`
//!    (which only grows, so no byte JavaScript was given is written again) and within `SLAB`,
//!    into a slab whose ArrayBuffer its strong reference keeps alive and that is checked not
//!    detached before the write, with no JavaScript run between the check and the write.
//!    Tests: __test__/safety.test.js "a chunk whose memory a program transfers or detaches is
//!    never written again, on either path"; __test__/chunks.test.js "agent.request(): small
//!    bodies keep their bytes across slabs, kept chunks are not overwritten".

use std::cell::RefCell;

use napi::sys;

use super::js::{self, Ref};

/// The size of a slab, and the largest chunk cut from one (as Node's Buffer pool: 8 KiB, for
/// allocations under 4 KiB). A chunk that JavaScript keeps keeps its slab alive.
const SLAB: usize = 8 * 1024;
const SLAB_CHUNK: usize = SLAB / 2;

/// Body chunks from this size on cross without a copy (see [`Chunks::chunk_concat`]): below
/// it, a copy costs less than a Buffer with a finalizer. Batches over `SHARED_MAX` are copied
/// all the same: holding that many of hyper's reads until the garbage collector releases them
/// measured slower than the copy (1 MiB responses: 1,750–2,080 against 2,090–2,370 req/s).
const SHARED_CHUNK: usize = 32 * 1024;
const SHARED_MAX: usize = 128 * 1024;

/// The thread's chunks: the current slab, and the JavaScript function that is told of each new
/// one (`setSlab(arrayBuffer)`).
pub struct Chunks {
    env: sys::napi_env,
    set_slab: Ref,
    slab: RefCell<Option<Slab>>,
}

/// An ArrayBuffer of the JavaScript heap that small chunks are copied into, one after the other:
/// JavaScript makes each chunk a Buffer view of it (`lib/slab.js`), which costs far less than
/// a Buffer of its own made through Node-API.
struct Slab {
    /// Keeps the ArrayBuffer, and so `data`, alive while chunks are written into it.
    buffer: Ref,
    data: *mut u8,
    used: usize,
}

impl Slab {
    /// Whether JavaScript detached the slab's ArrayBuffer, taking its memory.
    fn detached(&self, env: sys::napi_env) -> bool {
        let mut detached = true;
        // SAFETY: js invariants 1 and 2: a plain query, on this env's thread, of the slab's
        // reference, which is deleted only after the slab is taken out of `Chunks::slab`.
        let status =
            unsafe { sys::napi_is_detached_arraybuffer(env, self.buffer.get(env), &mut detached) };
        status != sys::Status::napi_ok || detached
    }
}

impl Chunks {
    pub fn new(env: sys::napi_env, set_slab: Ref) -> Chunks {
        Chunks {
            env,
            set_slab,
            slab: RefCell::new(None),
        }
    }

    /// Lets go of the current slab (the env's teardown).
    pub fn teardown(&self) {
        if let Some(slab) = self.slab.borrow_mut().take() {
            slab.buffer.delete(self.env);
        }
    }

    /// `data` as a value for JavaScript's `lib/slab.js` `chunk()`: a small chunk is copied
    /// into the slab and goes as a number (`offset * 65536 + length`), a larger one as a
    /// Buffer of its own.
    pub fn chunk(&self, data: &[u8]) -> sys::napi_value {
        self.chunk_of(data.len(), |at| {
            // SAFETY: invariant 1: `at` has room for `data.len()` bytes (see `chunk_of`).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), at, data.len()) }
        })
        .unwrap_or_else(|| js::buffer_copy(self.env, data))
    }

    /// As [`Chunks::chunk`], for chunks of a response body that go as one. Large reads go
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
                // SAFETY: invariant 1: `at` has room for all `len` bytes, the chunks' sum (see
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
        // SAFETY: invariant 1: `offset + len <= SLAB`, the ArrayBuffer's length; it is alive
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
        // SAFETY: js invariant 1: a plain allocation on this env; on success `data` points
        // at its SLAB bytes (checked non-null below), kept alive by the reference made below
        // (invariant 1).
        let status = unsafe { sys::napi_create_arraybuffer(self.env, SLAB, &mut data, &mut value) };
        if status != sys::Status::napi_ok || data.is_null() {
            return None;
        }
        js::call(self.env, self.set_slab.get(self.env), &[value]);
        Some(Slab {
            // SAFETY: js invariant 1: the ArrayBuffer just made, in the current scope; the
            // slab's owner deletes the reference once (`chunk_of`, `teardown`).
            buffer: unsafe { Ref::new(self.env, value, 1) },
            data: data.cast(),
            used: 0,
        })
    }
}
