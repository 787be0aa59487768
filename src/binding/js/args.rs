//! The arguments of a plain Node-API function, read without napi-rs's conversions (see the
//! parent module's Safety note for the invariants named below).

use std::borrow::Cow;
use std::mem::MaybeUninit;
use std::ptr;

use napi::sys;

/// The arguments of a call into a plain Node-API function (one napi-rs does not wrap: see
/// `binding::request_function`); missing ones read as `undefined`. Each reader gives None for a
/// value of the wrong type.
pub struct Args<const N: usize> {
    env: sys::napi_env,
    argv: [sys::napi_value; N],
}

impl<const N: usize> Args<N> {
    /// # Safety
    /// `env` and `info` are those the runtime passed to the function being called, and the
    /// result is used only during that call (invariants 1 and 4 of js's Safety note;
    /// binding `request_function`'s `call` makes and drops it there).
    pub unsafe fn of(env: sys::napi_env, info: sys::napi_callback_info) -> Args<N> {
        let mut argc = N;
        let mut argv = [ptr::null_mut(); N];
        // SAFETY: the caller's contract above; `argv` has room for `argc` = N values, and the
        // runtime fills the missing ones with `undefined` (invariant 4).
        unsafe {
            sys::napi_get_cb_info(
                env,
                info,
                &mut argc,
                argv.as_mut_ptr(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        Args { env, argv }
    }

    pub fn value(&self, i: usize) -> sys::napi_value {
        self.argv[i]
    }

    pub fn u32(&self, i: usize) -> Option<u32> {
        let mut n = 0;
        // SAFETY: invariant 1: an argument of the call being served (a plain query).
        let status = unsafe { sys::napi_get_value_uint32(self.env, self.argv[i], &mut n) };
        (status == sys::Status::napi_ok).then_some(n)
    }

    pub fn f64(&self, i: usize) -> Option<f64> {
        let mut n = 0.0;
        // SAFETY: invariant 1: an argument of the call being served (a plain query).
        let status = unsafe { sys::napi_get_value_double(self.env, self.argv[i], &mut n) };
        (status == sys::Status::napi_ok).then_some(n)
    }

    pub fn bool(&self, i: usize) -> Option<bool> {
        let mut b = false;
        // SAFETY: invariant 1: an argument of the call being served (a plain query).
        let status = unsafe { sys::napi_get_value_bool(self.env, self.argv[i], &mut b) };
        (status == sys::Status::napi_ok).then_some(b)
    }

    /// `null` or `undefined`.
    pub fn is_nullish(&self, i: usize) -> bool {
        let mut t = 0;
        // SAFETY: invariant 1: an argument of the call being served (a plain query).
        unsafe { sys::napi_typeof(self.env, self.argv[i], &mut t) };
        t == sys::ValueType::napi_null || t == sys::ValueType::napi_undefined
    }

    /// The bytes of a Buffer (or any Uint8Array), valid until the call returns.
    pub fn bytes(&self, i: usize) -> Option<&[u8]> {
        let mut data = ptr::null_mut();
        let mut len = 0;
        // SAFETY: invariants 1 and 4: an argument of the call being served; its bytes stay put
        // while the call runs, as no JavaScript runs before it returns (the one caller, binding
        // `request`, copies them at once).
        let status =
            unsafe { sys::napi_get_buffer_info(self.env, self.argv[i], &mut data, &mut len) };
        match status {
            sys::Status::napi_ok if len == 0 => Some(&[]),
            // SAFETY: invariant 4: `len` bytes at `data`, as the runtime said, borrowed no
            // longer than `self`, which lives for the call.
            sys::Status::napi_ok => Some(unsafe { std::slice::from_raw_parts(data.cast(), len) }),
            _ => None,
        }
    }

    /// What [`external`] made with `tag`, if argument `i` is that.
    pub fn external<T: 'static>(&self, i: usize, tag: &'static sys::napi_type_tag) -> Option<&T> {
        let mut tagged = false;
        let mut data = ptr::null_mut();
        let mut t = sys::ValueType::napi_undefined;
        // SAFETY: invariants 1 and 3: an argument of the call being served. An external
        // carrying `tag` was made by `external` with the same `T`: each tag is used with one
        // type (binding `HEAD_TAG`, for `Arc<client::Head>` only). The `T` lives as long as the
        // value, which the call's scope keeps past the borrow. Test:
        // __test__/request/basics.test.js "methods, URL forms and headers reach the server"
        // (paths as strings and as heads).
        unsafe {
            // The type first: the tag check makes an object of a primitive (a string path)
            // before it finds no tag, which costs more than the rest of the call's checks.
            if sys::napi_typeof(self.env, self.argv[i], &mut t) != sys::Status::napi_ok
                || t != sys::ValueType::napi_external
                || sys::napi_check_object_type_tag(self.env, self.argv[i], tag, &mut tagged)
                    != sys::Status::napi_ok
                || !tagged
                || sys::napi_get_value_external(self.env, self.argv[i], &mut data)
                    != sys::Status::napi_ok
            {
                return None;
            }
            Some(&*data.cast::<T>())
        }
    }

    /// A string as UTF-8, written into `buf` when it fits (one copy, no length query and no
    /// allocation: the usual case for methods and paths).
    pub fn str<'b>(&self, i: usize, buf: &'b mut [MaybeUninit<u8>]) -> Option<Cow<'b, str>> {
        match self.utf8(i, buf)? {
            Cow::Borrowed(b) => std::str::from_utf8(b).ok().map(Cow::Borrowed),
            Cow::Owned(v) => String::from_utf8(v).ok().map(Cow::Owned),
        }
    }

    /// A string's UTF-8 encoding (a lone surrogate as U+FFFD, as `Buffer.from` encodes it),
    /// written into `buf` when it fits.
    pub fn utf8<'b>(&self, i: usize, buf: &'b mut [MaybeUninit<u8>]) -> Option<Cow<'b, [u8]>> {
        // A character of up to 4 bytes that did not fit would have left less room than this.
        self.string(i, buf, Encoding::Utf8, 4)
    }

    /// A string of latin1 characters (HTTP header lines, as Node writes them: a byte per
    /// character), written into `buf` when it fits.
    pub fn latin1<'b>(&self, i: usize, buf: &'b mut [MaybeUninit<u8>]) -> Option<Cow<'b, [u8]>> {
        self.string(i, buf, Encoding::Latin1, 1)
    }

    /// A string's bytes in `encoding`: into `buf` if at least `slack` bytes of it are left over
    /// (less could mean a character did not fit), else into a buffer of the length the runtime
    /// says.
    fn string<'b>(
        &self,
        i: usize,
        buf: &'b mut [MaybeUninit<u8>],
        encoding: Encoding,
        slack: usize,
    ) -> Option<Cow<'b, [u8]>> {
        let mut len = 0;
        // SAFETY: invariants 1 and 4: `buf.len()` writable bytes; the runtime writes at most
        // that many, NUL included, and only whole characters.
        if unsafe {
            encoding.get(
                self.env,
                self.argv[i],
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut len,
            )
        } != sys::Status::napi_ok
        {
            return None;
        }
        if len + slack < buf.len() {
            // SAFETY: invariant 4: the runtime wrote (initialised) the first `len` bytes.
            return Some(unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), len) }.into());
        }
        let mut full = 0;
        // SAFETY: invariant 1; a null buffer asks for the length alone.
        unsafe { encoding.get(self.env, self.argv[i], ptr::null_mut(), 0, &mut full) };
        let mut owned = vec![0u8; full + 1];
        // SAFETY: invariants 1 and 4: room for the whole string and its NUL. Test:
        // __test__/request/basics.test.js "long methods, paths and header lines cross whole; header
        // values go as latin1, as Node sends them".
        unsafe {
            encoding.get(
                self.env,
                self.argv[i],
                owned.as_mut_ptr().cast(),
                owned.len(),
                &mut len,
            )
        };
        owned.truncate(len);
        Some(owned.into())
    }
}

/// Which of the runtime's string getters reads a string: `napi_get_value_string_utf8` or
/// `napi_get_value_string_latin1`. (Named rather than passed as function pointers: where
/// napi-rs looks the runtime's functions up when the addon loads, on Windows, they are Rust
/// functions, elsewhere `extern "C"` ones.)
#[derive(Clone, Copy)]
enum Encoding {
    Utf8,
    Latin1,
}

impl Encoding {
    /// # Safety
    /// As the runtime's function: `env` the current environment, `out` null or writable for
    /// `size` bytes, `result` writable.
    #[inline]
    unsafe fn get(
        self,
        env: sys::napi_env,
        value: sys::napi_value,
        out: *mut std::ffi::c_char,
        size: usize,
        result: *mut usize,
    ) -> sys::napi_status {
        // SAFETY: the caller's contract above (kept by `string`'s invariants 1 and 4). Test:
        // __test__/request/basics.test.js "long methods, paths and header lines cross whole".
        unsafe {
            match self {
                Encoding::Utf8 => sys::napi_get_value_string_utf8(env, value, out, size, result),
                Encoding::Latin1 => {
                    sys::napi_get_value_string_latin1(env, value, out, size, result)
                }
            }
        }
    }
}
