//! The exports of one connection by its id, for the drop-in path's socket (lib/socket.js):
//! bytes in and out, release to the pool, socket options and what the socket shows.

use std::net::IpAddr;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::binding::pool::PoolCell;
use crate::binding::{conn, js, protocol, undefined};
use crate::error::uv_errno;
use crate::guard;
use crate::pool::{moves, settings, Wear};
use crate::transport::Peer;

/// See [`conn_stamp`].
#[napi(object)]
pub struct ConnStamp {
    pub created: f64,
    pub number: f64,
    pub finished: u32,
    pub idle_ms: f64,
}

#[napi(object)]
pub struct ConnInfo {
    pub local_address: Option<String>,
    pub local_port: Option<u32>,
    pub local_family: Option<String>,
    pub remote_address: Option<String>,
    pub remote_port: Option<u32>,
    pub remote_family: Option<String>,
    pub bytes_read: f64,
    pub bytes_written: f64,
    pub created_at_ms_ago: f64,
    /// The protocol its TLS session agreed on by ALPN (`h2`, `http/1.1`); none without TLS
    /// or ALPN.
    pub alpn_protocol: Option<String>,
}

fn family_name(ip: &IpAddr) -> String {
    if ip.is_ipv4() { "IPv4" } else { "IPv6" }.to_owned()
}

/// `socket`, a connection's socket just read in this call, or `undefined` when it is null.
fn socket_or_undefined(env: &Env, socket: sys::napi_value) -> Unknown<'_> {
    let socket = if socket.is_null() {
        undefined(env)
    } else {
        socket
    };
    // SAFETY: js invariants 1 and 2: `undefined`, or a non-null value the caller just read
    // from the connection's live socket reference, in this call's scope. Tests:
    // __test__/compat.test.js "agent.freeSockets holds socket objects"; every drop-in request.
    unsafe { Unknown::from_raw_unchecked(env.raw(), socket) }
}

/// The socket of connection `id`, now serving the caller's checkout; `undefined` when it was
/// collected while idle.
#[napi(ts_return_type = "object | undefined", catch_unwind)]
pub fn take(env: &Env, id: u32) -> Result<Unknown<'_>> {
    let socket = conn(id).map_or(std::ptr::null_mut(), |c| c.take(env.raw()));
    Ok(socket_or_undefined(env, socket))
}

/// Makes `socket` the JavaScript face of connection `id`.
#[napi(catch_unwind)]
pub fn bind(env: &Env, id: u32, socket: Unknown) -> bool {
    match conn(id) {
        Some(c) if c.course.state() != conn::State::Closed => {
            c.bind(env.raw(), socket.raw());
            true
        }
        _ => false,
    }
}

/// 0: written; 1: pending (`onWrite` follows); negative: `-errno`.
#[napi(catch_unwind)]
pub fn write(id: u32, data: BufferSlice) -> i32 {
    guard::point("write");
    conn(id).map_or(uv_errno(libc::EBADF), |c| c.write(&[&data[..]]))
}

#[napi(catch_unwind)]
pub fn writev(id: u32, chunks: Vec<BufferSlice>) -> i32 {
    guard::point("write");
    let Some(c) = conn(id) else {
        return uv_errno(libc::EBADF);
    };
    let slices: Vec<&[u8]> = chunks.iter().map(|c| &c[..]).collect();
    c.write(&slices)
}

#[napi(catch_unwind)]
pub fn read_start(id: u32) {
    if let Some(c) = conn(id) {
        c.set_reading(true);
    }
}

#[napi(catch_unwind)]
pub fn read_stop(id: u32) {
    if let Some(c) = conn(id) {
        c.set_reading(false);
    }
}

#[napi(catch_unwind)]
pub fn shutdown(id: u32) -> i32 {
    conn(id).map_or(0, |c| c.shutdown())
}

/// How long a drop-in connection its request freed may idle, by the agent's rule (see
/// `ReleasePolicy::idle_for`): `own_ms` the socket's free timeout or the agent's, as
/// JavaScript reads them now (infinite: no limit); `hint` the response's `Keep-Alive` header;
/// `buffer_ms` the agent's `agentKeepAliveTimeoutBuffer`. 0: not kept.
#[napi(catch_unwind)]
pub fn idle_for(own_ms: f64, hint: Option<String>, buffer_ms: f64) -> f64 {
    let hint = hint.as_deref().map(str::as_bytes);
    settings::drop_in_idle(own_ms, hint, buffer_ms).map_or(0.0, settings::as_ms)
}

/// How much longer drop-in connection `id`, whose request just finished, may serve, by the
/// agent's rule (see `ReleasePolicy::settle`) with `socketActiveTTL` (`ttl_ms`) and
/// `maxRequestsPerSocket` (`max_requests`) as JavaScript reads them now: 0 once either is
/// reached, infinite without a limit (or a connection). At 0 the connection closes (its
/// socket is destroyed) rather than go back: its request is counted here (see
/// `moves::retired`), as `release` counts one whose connection goes back.
#[napi(catch_unwind)]
pub fn use_left(id: u32, ttl_ms: f64, max_requests: f64) -> f64 {
    let Some(conn) = conn(id) else {
        return f64::INFINITY;
    };
    let wear = Wear {
        age: conn.created.elapsed(),
        // Its requests finished before, and this one.
        requests: conn.course.stamp().finished.saturating_add(1),
    };
    let left = settings::use_left(ttl_ms, max_requests, wear);
    if left == Some(Duration::ZERO) {
        if let Some(cell) = PoolCell::of(&conn) {
            moves::retired(&cell);
        }
    }
    left.map_or(f64::INFINITY, settings::as_ms)
}

/// The request on connection `id` finished. `idle_ms`: how long it may idle (negative: it may
/// only serve a waiter; infinite: no limit). Returns a verdict (see `protocol::verdict`).
#[napi(catch_unwind)]
pub fn release(id: u32, idle_ms: f64) -> f64 {
    guard::point("release");
    let Some(cell) = conn(id).and_then(|c| PoolCell::of(&c)) else {
        return protocol::verdict::NONE;
    };
    cell.release(id, settings::idle_ms(idle_ms))
}

/// The socket object of idle connection `id` if a program still holds one, else `undefined`.
#[napi(ts_return_type = "object | undefined", catch_unwind)]
pub fn idle_face(env: &Env, id: u32) -> Result<Unknown<'_>> {
    let socket = conn(id)
        .filter(|c| c.course.state() == conn::State::Idle)
        .map_or(std::ptr::null_mut(), |c| c.idle_face(env.raw()));
    Ok(socket_or_undefined(env, socket))
}

/// Makes `socket` the face of idle connection `id`, held weakly (see `Conn::adopt`).
#[napi(catch_unwind)]
pub fn adopt(env: &Env, id: u32, socket: Unknown) -> bool {
    match conn(id) {
        Some(c) if c.course.state() == conn::State::Idle => {
            c.adopt(env.raw(), socket.raw());
            true
        }
        _ => false,
    }
}

/// What connection `id`'s socket was told of its TLS session at its connect (see
/// `js::tls_info`), for a socket made for it later; `undefined` for a connection without TLS.
#[napi(ts_return_type = "object | undefined", catch_unwind)]
pub fn tls_session(env: &Env, id: u32) -> Result<Unknown<'_>> {
    let value = conn(id)
        .and_then(|c| {
            c.tls
                .borrow()
                .as_deref()
                .map(|info| js::tls_info(env.raw(), info))
        })
        .unwrap_or_else(|| undefined(env));
    // SAFETY: js invariant 1: a value made in this call's scope.
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
}

/// The server's name did not check out on connection `id`, which goes on
/// (`rejectUnauthorized: false`): `code` is its socket's `authorizationError`.
#[napi(catch_unwind)]
pub fn tls_name_rejected(id: u32, code: String) {
    if let Some(c) = conn(id) {
        c.set_name_error(code);
    }
}

/// The number of connection `id` among its agent's sockets (its name's), its creation time,
/// the requests it finished and its free timeout, for a socket made for it later.
#[napi(catch_unwind)]
pub fn conn_stamp(id: u32) -> Option<ConnStamp> {
    let stamp = conn(id)?.course.stamp();
    Some(ConnStamp {
        created: stamp.created_ms,
        number: stamp.number,
        finished: stamp.finished,
        idle_ms: stamp.idle_ms,
    })
}

/// Records the number of connection `id` among its agent's sockets (its name's).
#[napi(catch_unwind)]
pub fn number_conn(id: u32, number: f64) {
    if let Some(c) = conn(id) {
        c.course.set_number(number);
    }
}

/// Closes connection `id` if it is idle (a program destroyed its object in `freeSockets`).
/// Returns a verdict (a waiter may connect).
#[napi(catch_unwind)]
pub fn close_idle(id: u32) -> f64 {
    match conn(id).filter(|c| c.course.state() == conn::State::Idle) {
        Some(c) => PoolCell::of(&c).map_or(protocol::verdict::NONE, |cell| cell.close(id)),
        None => protocol::verdict::NONE,
    }
}

/// The socket of connection `id`, in use, was destroyed: its bytes stop now; its slot is freed
/// by `close` at the socket's 'close'.
#[napi(catch_unwind)]
pub fn halt(env: &Env, id: u32) {
    if let Some(c) = conn(id) {
        c.halt(env.raw());
    }
}

/// The socket of connection `id` was destroyed. Returns a verdict (a waiter may connect).
#[napi(catch_unwind)]
pub fn close(id: u32) -> f64 {
    match conn(id).and_then(|c| PoolCell::of(&c)) {
        Some(cell) => cell.close(id),
        None => protocol::verdict::NONE,
    }
}

/// `socket.resetAndDestroy()`: connection `id` resets when it closes. 0 or a negative errno.
#[napi(catch_unwind)]
pub fn reset_on_close(id: u32) -> i32 {
    conn(id).map_or(0, |c| c.reset_on_close())
}

#[napi(catch_unwind)]
pub fn set_ref(id: u32, on: bool) {
    if let Some(c) = conn(id) {
        c.set_ref(on);
    }
}

#[napi(catch_unwind)]
pub fn set_no_delay(id: u32, on: bool) -> i32 {
    conn(id).map_or(0, |c| c.set_no_delay(on))
}

#[napi(catch_unwind)]
pub fn set_keep_alive(id: u32, on: bool, initial_delay_ms: u32) -> i32 {
    conn(id).map_or(0, |c| c.set_keep_alive(on, initial_delay_ms))
}

/// `socket.setTypeOfService(tos)` (0 to 255): 0 or a negative errno.
#[napi(catch_unwind)]
pub fn set_type_of_service(id: u32, tos: u32) -> i32 {
    let Ok(tos) = u8::try_from(tos) else {
        return uv_errno(libc::EINVAL);
    };
    conn(id).map_or(0, |c| c.set_type_of_service(tos))
}

/// `socket.getTypeOfService()`: the byte, or a negative errno.
#[napi(catch_unwind)]
pub fn get_type_of_service(id: u32) -> i32 {
    conn(id).map_or(0, |c| c.type_of_service())
}

/// `socket.bytesRead` of connection `id`; none once it is gone. A call of its own: `info`
/// builds the addresses' strings too, and a socket reads its counts as it closes.
#[napi(catch_unwind)]
pub fn bytes_read(id: u32) -> Option<f64> {
    conn(id).map(|c| c.course.bytes_read() as f64)
}

/// `socket.bytesWritten` of connection `id`, as [`bytes_read`].
#[napi(catch_unwind)]
pub fn bytes_written(id: u32) -> Option<f64> {
    conn(id).map(|c| c.course.bytes_written() as f64)
}

#[napi(catch_unwind)]
pub fn info(id: u32) -> Option<ConnInfo> {
    let conn = conn(id)?;
    let local = conn.local.get();
    let remote = conn.remote.borrow().clone();
    let (remote_address, remote_port, remote_family) = match remote {
        Some(Peer::Tcp(addr)) => (
            Some(addr.ip().to_string()),
            Some(addr.port() as u32),
            Some(family_name(&addr.ip())),
        ),
        Some(Peer::Unix(_)) | None => (None, None, None),
    };
    let alpn_protocol = conn
        .tls
        .borrow()
        .as_deref()
        .and_then(|info| info.alpn.as_deref())
        .map(|p| String::from_utf8_lossy(p).into_owned());
    Some(ConnInfo {
        local_address: local.map(|a| a.ip().to_string()),
        local_port: local.map(|a| a.port() as u32),
        local_family: local.map(|a| family_name(&a.ip())),
        remote_address,
        remote_port,
        remote_family,
        bytes_read: conn.course.bytes_read() as f64,
        bytes_written: conn.course.bytes_written() as f64,
        created_at_ms_ago: conn.created.elapsed().as_secs_f64() * 1000.0,
        alpn_protocol,
    })
}

/// Drops the TLS sessions cached for the server of connection `id`, whose name failed the
/// check after the handshake: as Node's https.Agent evicts the session of a socket closed by an
/// error, so that the next connection makes a new session and is checked again (a resumed
/// session is not).
#[napi(catch_unwind)]
pub fn forget_tls_sessions(id: u32) {
    if let Some(conn) = conn(id) {
        conn.with_tls(|config, info| config.forget_sessions(&info.server));
    }
}

/// Remembers that the server of connection `id` has the right name (its session, resumed
/// later, needs no check), as Node's own check found it (`by_node`) or one of the program's.
#[napi(catch_unwind)]
pub fn tls_name_verified(id: u32, by_node: bool) {
    if let Some(conn) = conn(id) {
        conn.with_tls(|config, info| config.name_verified(info, by_node));
    }
}

/// Connection `id`, opening in a slot the pool gave it, is carried by `link`, the stream a
/// hook of the program's made (see `conn::Mode::Foreign`): it is established and serving the
/// request that opened it. False when the slot is gone (the connection was closed meanwhile).
#[napi(catch_unwind)]
pub fn foreign(env: &Env, id: u32, link: Unknown) -> bool {
    match conn(id) {
        Some(c)
            if c.course.state() == conn::State::Connecting
                && c.course.mode() == conn::Mode::DropIn =>
        {
            c.course.set_mode(conn::Mode::Foreign);
            c.bind(env.raw(), link.raw());
            c.course.set_state(conn::State::Active);
            true
        }
        _ => false,
    }
}
