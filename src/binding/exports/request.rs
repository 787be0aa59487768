//! `agent.request()`'s exports: the request function (its arguments read here, planned by
//! `client::plan`), its streamed body, abort and the user's `lookup` answer.

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use crate::binding::pool::PoolCell;
use crate::binding::protocol::{arg, flags};
use crate::binding::{conn, ctx, js, protocol, request};
use crate::pool::KeyId;
use crate::transport::dns::parse_ip;
use crate::{client, guard};

fn request_state(id: u32) -> Option<Rc<request::ReqState>> {
    request::by_id(id)
}

/// A request head, or its input's error as Node-API's.
fn head_of(path: &str, lines: &[u8]) -> Result<client::Head> {
    client::Head::parse(path, lines).map_err(invalid)
}

/// A request's input that cannot be planned, as the error the call throws.
fn invalid(e: client::plan::Invalid) -> Error {
    if e.is_argument() {
        Error::new(Status::InvalidArg, e.to_string())
    } else {
        Error::from_reason(e.to_string())
    }
}

/// The user's `lookup` gave `addresses` for the promise-path connection `id`, which connects
/// to them in order; `null` when it failed. Either failure (the other: an address that is not
/// an IP address, then false is returned) counts as a failed connect, and JavaScript fails the
/// request, which closes the connection.
#[napi(catch_unwind)]
pub fn lookup_done(id: u32, addresses: Option<Vec<String>>) -> bool {
    let Some(conn) = conn(id) else { return true };
    let Some(reply) = conn.lookup.borrow_mut().take() else {
        return true;
    };
    let ips = addresses.map(|list| list.iter().map(|a| parse_ip(a)).collect::<Option<Vec<_>>>());
    match ips {
        Some(Some(ips)) => {
            let _ = reply.send(ips);
            true
        }
        failed => {
            // As a lookup's failure on a socket: an error (the close follows as JavaScript
            // fails the request).
            if let Some(pool) = PoolCell::of(&conn) {
                pool.state.borrow_mut().pool.stats.error_socket_count += 1;
            }
            failed.is_none()
        }
    }
}

/// Marks the heads [`prepare_head`] makes.
static HEAD_TAG: sys::napi_type_tag = sys::napi_type_tag {
    lower: 0x6879_7065_7261_6765,
    upper: 0x6e74_2d68_6561_6401,
};

/// A request head (target and header lines) parsed once, for the `agent.request()` calls
/// without headers of their own to one URL: `request_function` takes it in place of the path.
#[napi(catch_unwind)]
pub fn prepare_head<'env>(env: &'env Env, path: String, lines: String) -> Result<Unknown<'env>> {
    let head = Arc::new(head_of(&path, lines.as_bytes())?);
    let value = js::external(env.raw(), head, &HEAD_TAG)
        .ok_or_else(|| Error::from_reason("hyperagent: cannot make a request head"))?;
    // SAFETY: js invariant 1: the external just made, in this call's scope.
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
}

/// `agent.request()`'s start as a plain Node-API function, made once per thread: napi-rs's
/// conversion of its arguments (a length query and an allocation per string, a borrow scope
/// per call) took about 8% of the JavaScript thread's time per request.
/// Arguments (see `protocol::arg`): `(pool, key, handle, method, path, headers, body, streamed,
/// contentLength, flags, headersTimeout, bodyTimeout, replayLimit, contextName, trailers)`; `headers` is
/// `name\nvalue\n...`, already validated; `path` may instead be a head from [`prepare_head`]
/// (then `headers` is ignored); `body` a Buffer, a string (sent as UTF-8) or null;
/// `contentLength` negative when there is none; `flags` [`flags::EXPECT_CONTINUE`],
/// [`flags::INFORMATIONAL`] and [`flags::SENDING`]; `replayLimit` the largest body sent again
/// after the keep-alive race (negative: never); `contextName` the name of the request's async
/// context (a string JavaScript keeps, rather than one made here per request).
/// Returns the request id (a request that waits in the pool's queue is served there).
#[napi(catch_unwind)]
pub fn request_function(env: &Env) -> Result<Unknown<'_>> {
    /// # Safety
    /// Called by Node alone, as the function made below, with its own `env` and `info`.
    unsafe extern "C" fn call(
        env: sys::napi_env,
        info: sys::napi_callback_info,
    ) -> sys::napi_value {
        // SAFETY: the runtime's own arguments to this function; `args` is used by `request`
        // within this call and dropped at its end (js invariants 1 and 4).
        let args = unsafe { js::Args::<{ arg::COUNT }>::of(env, info) };
        match guard::catch(|| request(&args)) {
            Ok(Ok(id)) => js::number(env, id),
            Ok(Err(e)) => js::throw_error(env, e.status.as_ref(), &e.reason),
            Err(panic) => {
                let err = guard::internal(&panic);
                js::throw_error(env, err.code(), &err.to_string())
            }
        }
    }
    let mut func = std::ptr::null_mut();
    // SAFETY: js invariant 1; a static callback without data, named by a string of 7
    // bytes (its length given).
    let status = unsafe {
        sys::napi_create_function(
            env.raw(),
            c"request".as_ptr(),
            7,
            Some(call),
            std::ptr::null_mut(),
            &mut func,
        )
    };
    if status != sys::Status::napi_ok {
        return Err(Error::from_reason(
            "hyperagent: cannot make the request function",
        ));
    }
    // SAFETY: js invariant 1: the function just made (status checked), in this call's
    // scope. Every `agent.request()` test calls it, e.g. __test__/request/basics.test.js "a GET
    // resolves with status, headers and a body stream".
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), func) })
}

/// Starts `agent.request()` (see [`request_function`] for the arguments).
fn request<const N: usize>(args: &js::Args<N>) -> Result<f64> {
    guard::point("request");
    use std::mem::MaybeUninit;
    let bad = |what: &str| {
        Error::new(
            Status::InvalidArg,
            format!("hyperagent: request: bad {what}"),
        )
    };
    let pool = args.u32(arg::POOL).ok_or_else(|| bad("pool"))?;
    let key = args.u32(arg::KEY).ok_or_else(|| bad("key"))?;
    let handle = args.value(arg::HANDLE);
    // A method is a token (checked in JavaScript): ASCII, read a byte per character.
    let mut method_buf = [MaybeUninit::uninit(); 32];
    let method = args
        .latin1(arg::METHOD, &mut method_buf)
        .ok_or_else(|| bad("method"))?;
    let head = match args.external::<Arc<client::Head>>(arg::PATH, &HEAD_TAG) {
        Some(head) => head.clone(),
        None => {
            let mut path_buf = [MaybeUninit::uninit(); 512];
            let path = args
                .str(arg::PATH, &mut path_buf)
                .ok_or_else(|| bad("path"))?;
            // Header lines are latin1, a byte per character, as Node and undici write them.
            let mut headers_buf = [MaybeUninit::uninit(); 1024];
            let headers = args
                .latin1(arg::HEADERS, &mut headers_buf)
                .ok_or_else(|| bad("headers"))?;
            Arc::new(head_of(&path, &headers)?)
        }
    };
    let ctx = ctx()?;
    // The body's bytes, copied (a string encoded once); the request and its replay share them.
    // A Buffer's memory is not lent to tokio, which reads it later on another thread: whatever
    // the program does meanwhile (detach or transfer its ArrayBuffer, shrink a resizable one,
    // end the worker that owns it) could free it under the read, and Node-API has no way to
    // keep a backing store alive. Large copies go into buffers used again (`recycle`).
    let mut body_buf = [MaybeUninit::uninit(); 1024];
    let bytes = match args.bytes(arg::BODY) {
        Some(b) => crate::client::recycle::copy(b),
        None if args.is_nullish(arg::BODY) => bytes::Bytes::new(),
        None => match args
            .utf8(arg::BODY, &mut body_buf)
            .ok_or_else(|| bad("body"))?
        {
            Cow::Borrowed(b) => bytes::Bytes::copy_from_slice(b),
            Cow::Owned(v) => bytes::Bytes::from(v),
        },
    };
    let streamed = args.bool(arg::STREAMED).ok_or_else(|| bad("streamed"))?;
    let content_length = args
        .f64(arg::CONTENT_LENGTH)
        .ok_or_else(|| bad("content length"))?;
    let flags = args.u32(arg::FLAGS).ok_or_else(|| bad("flags"))?;
    let headers_timeout_ms = args
        .f64(arg::HEADERS_TIMEOUT)
        .ok_or_else(|| bad("headersTimeout"))?;
    let body_timeout_ms = args
        .f64(arg::BODY_TIMEOUT)
        .ok_or_else(|| bad("bodyTimeout"))?;
    let replay_limit = args
        .f64(arg::REPLAY_LIMIT)
        .ok_or_else(|| bad("replayLimit"))?;
    let cell = PoolCell::get(pool).ok_or_else(|| Error::from_reason("hyperagent: unknown pool"))?;
    let trailers = if args.is_nullish(arg::TRAILERS) {
        None
    } else if args.bool(arg::TRAILERS) == Some(true) {
        Some(client::Trailers::new(None))
    } else {
        let mut buf = [MaybeUninit::uninit(); 256];
        let lines = args
            .latin1(arg::TRAILERS, &mut buf)
            .ok_or_else(|| bad("trailers"))?;
        let map = client::plan::header_map(&lines).map_err(invalid)?;
        Some(client::Trailers::new(Some(map)))
    };
    let intent = client::plan::Intent {
        method: client::plan::method(&method).map_err(invalid)?,
        head,
        body: if streamed {
            client::plan::Source::Streamed
        } else {
            client::plan::Source::Bytes(bytes)
        },
        content_length: (content_length >= 0.0).then_some(content_length as u64),
        expect_continue: flags & flags::EXPECT_CONTINUE != 0,
        informational: flags & flags::INFORMATIONAL != 0,
        headers_timeout_ms,
        body_timeout_ms,
        replay_limit: (replay_limit >= 0.0).then_some(replay_limit as usize),
        max_head_size: cell.max_header_size.get(),
        refusable: cell.http2.get(),
        trailers,
    };
    // A streamed body's drain reaches the request through the inbox; its id is known once
    // registered.
    let id_slot = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let plan = client::plan::plan(intent, request::drain_to(&ctx.inbox, id_slot.clone()))
        .map_err(invalid)?;
    let ctl = Arc::new(crate::client::Control::default());
    let js_side = request::JsSide {
        handle,
        context_name: args.value(arg::CONTEXT_NAME),
        tells_sending: flags & flags::SENDING != 0,
    };
    let req = request::start(&cell, KeyId(key), js_side, plan, ctl);
    id_slot.store(req.id, std::sync::atomic::Ordering::Release);
    Ok(req.id as f64)
}

/// Aborts request `id`. Returns a verdict (a waiter may connect in the freed slot).
#[napi(catch_unwind)]
pub fn request_abort(id: u32) -> f64 {
    request_state(id).map_or(protocol::verdict::NONE, |req| request::abort(&req))
}

/// The response stream wants one more chunk.
#[napi(catch_unwind)]
pub fn body_read(id: u32) {
    if let Some(req) = request_state(id) {
        request::grant(&req);
    }
}

/// A chunk of a streamed request body. 0: more may follow; 1: wait for the drain event;
/// 2: the request no longer wants it.
#[napi(catch_unwind)]
pub fn body_write(id: u32, chunk: BufferSlice) -> u32 {
    guard::point("body-write");
    let Some(req) = request_state(id) else {
        return 2;
    };
    match request::body_write(&req, &chunk) {
        Some(crate::client::WriteResult::Ready) => 0,
        Some(crate::client::WriteResult::Full) => 1,
        _ => 2,
    }
}

/// The body's source ended; `trailers` (`name\nvalue...`) are its trailers, when they come
/// with the end. Throws on trailers that are not valid header lines.
#[napi(catch_unwind)]
pub fn body_end(id: u32, trailers: Option<String>) -> Result<()> {
    if let Some(req) = request_state(id) {
        if let Some(lines) = trailers {
            let map = client::plan::header_map(lines.as_bytes()).map_err(invalid)?;
            request::set_trailers(&req, map);
        }
        request::body_end(&req);
    }
    Ok(())
}

#[napi(catch_unwind)]
pub fn body_fail(id: u32, message: String) {
    if let Some(req) = request_state(id) {
        request::body_fail(&req, message);
    }
}
