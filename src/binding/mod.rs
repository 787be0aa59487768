//! The napi surface: the only Rust code that touches Node-API. It converts and validates
//! arguments and forwards to [`pool::PoolCell`]; option validation with Node's error codes is
//! done once, in `index.js`, before anything reaches here.

#![cfg_attr(test, allow(dead_code))]

mod conn;
pub(crate) mod debug;
mod env;
mod js;
mod pool;
mod request;
mod uv;

use std::borrow::Cow;
use std::cell::RefCell;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use crate::client;
use crate::guard;
use crate::pool::{KeyId, Limits, Scheduling};
use crate::transport::dns::{parse_ip, Family};
use crate::transport::tls::{TlsConfig, TlsOptions, Trust};
use crate::transport::{AddressChoice, ConnectOptions, Order, Peer, ProxyTls, Target, Tunnel};
use pool::PoolCell;

/// Registers the JavaScript functions Rust calls on this thread. Called once by `index.js`.
#[napi(js_name = "init", catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn init(
    env: Env,
    on_read: Unknown,
    on_write: Unknown,
    on_error: Unknown,
    on_connect: Unknown,
    on_grant: Unknown,
    on_request: Unknown,
    set_slab: Unknown,
    on_keylog: Unknown,
) -> Result<()> {
    let raw = env.raw();
    // SAFETY: js.rs invariant 1: arguments of this call; each reference is deleted once, by
    // env.rs `teardown`, or at once when the thread was set up already (js.rs invariant 2).
    // Test: __test__/chunks.test.js "a second load of the package on the same thread gets its
    // small chunks right".
    let r = |v: &Unknown| unsafe { js::Ref::new(raw, v.raw(), 1) };
    env::init(
        raw,
        env::Callbacks {
            on_read: r(&on_read),
            on_write: r(&on_write),
            on_error: r(&on_error),
            on_connect: r(&on_connect),
            on_grant: r(&on_grant),
            on_request: r(&on_request),
            set_slab: r(&set_slab),
            on_keylog: r(&on_keylog),
        },
    )?;
    Ok(())
}

#[napi(object)]
pub struct PoolOptions {
    pub max_sockets: f64,
    pub max_free_sockets: f64,
    pub max_total_sockets: f64,
    pub lifo: bool,
    pub no_delay: bool,
    /// SO_KEEPALIVE's initial delay for new connections; absent when keep-alive is off.
    pub keep_alive_msecs: Option<f64>,
    /// The largest drop-in request kept for a replay after the keep-alive race (0: off).
    pub replay_limit: Option<f64>,
    /// Whether freed connections are kept (`keepAlive`); the promise path applies this,
    /// `idle_ms` and `active_ttl_ms` in Rust when an exchange ends.
    pub keep_alive: Option<bool>,
    /// How long a freed connection may idle (`freeSocketTimeout`); absent or infinite: no limit.
    pub idle_ms: Option<f64>,
    /// `socketActiveTTL`: a connection older than this is not reused; absent: no limit.
    pub active_ttl_ms: Option<f64>,
    /// The agent's `timeout`: how long a promise-path connection may take to open (the drop-in
    /// path's sockets time out in JavaScript); absent: no limit.
    pub connect_timeout_ms: Option<f64>,
    /// `agentKeepAliveTimeoutBuffer` (ms, default 1000).
    pub hint_buffer_ms: Option<f64>,
}

/// A duration in milliseconds from JavaScript: none unless positive and finite.
fn millis(ms: Option<f64>) -> Option<Duration> {
    ms.filter(|ms| *ms > 0.0 && ms.is_finite())
        .map(|ms| Duration::from_micros((ms * 1000.0) as u64))
}

/// When a promise-path connection goes back to the pool, and for how long.
fn release_policy(opts: &PoolOptions) -> pool::ReleasePolicy {
    pool::ReleasePolicy {
        keep_alive: opts.keep_alive.unwrap_or(true),
        idle: millis(opts.idle_ms),
        ttl: millis(opts.active_ttl_ms),
        hint_buffer: opts
            .hint_buffer_ms
            .filter(|ms| *ms >= 0.0 && ms.is_finite())
            .map_or(Duration::from_secs(1), |ms| {
                Duration::from_micros((ms * 1000.0) as u64)
            }),
    }
}

#[napi(object)]
pub struct ConnectTarget {
    pub host: Option<String>,
    pub port: Option<u32>,
    pub family: Option<u32>,
    pub local_address: Option<String>,
    pub local_port: Option<u32>,
    /// A Unix socket path (`socketPath`).
    pub path: Option<String>,
    /// Addresses from a user's `lookup`, in order.
    pub addresses: Option<Vec<String>>,
    /// For TLS: the SNI name (empty or absent for none).
    pub servername: Option<String>,
    /// The promise path resolves the host through the user's `lookup` function (in
    /// JavaScript) before each connection.
    pub js_lookup: Option<bool>,
    /// Through an HTTP proxy (`host` and `port` name it): the `CONNECT` request that opens the
    /// tunnel to the origin, and what a refusal's message starts with.
    pub tunnel_request: Option<String>,
    pub tunnel_refused: Option<String>,
    /// The proxy (`host`, `port`) is reached over TLS; `rejectUnauthorized` for its session
    /// (Node's default for `tls.connect`: the environment may turn it off).
    pub proxy_tls: Option<bool>,
    pub proxy_reject_unauthorized: Option<bool>,
    /// How a name's addresses are tried, as net.connect tries them: Happy Eyeballs with this
    /// attempt timeout (`autoSelectFamilyAttemptTimeout`), or 0 for the first address only
    /// (`autoSelectFamily: false`); absent: Node's defaults.
    pub attempt_delay_ms: Option<u32>,
    /// `dns.getDefaultResultOrder()` for the resolver's answers.
    pub order: Option<String>,
}

/// `tls.connect` options of an HTTPS key, already normalised by `lib/tls.js`.
#[napi(object)]
pub struct TlsOptionsJs {
    pub ca: Option<Vec<Buffer>>,
    pub certs: Option<Vec<Buffer>>,
    pub keys: Option<Vec<Buffer>>,
    pub pfx: Option<Vec<PfxJs>>,
    pub crl: Option<Vec<Buffer>>,
    pub reject_unauthorized: bool,
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    pub ciphers: Option<String>,
    pub alpn: Option<Vec<Buffer>>,
    pub max_cached_sessions: u32,
}

/// One `pfx` entry: a PKCS#12 file and its passphrase (empty when none was given).
#[napi(object)]
pub struct PfxJs {
    pub buf: Buffer,
    pub passphrase: String,
}

/// A configuration error, for JavaScript to throw with its code.
#[napi(object)]
pub struct ErrorInfo {
    pub code: String,
    pub message: String,
}

#[napi(object)]
pub struct PoolStats {
    pub create_socket_count: f64,
    pub create_socket_error_count: f64,
    pub close_socket_count: f64,
    pub error_socket_count: f64,
    pub timeout_socket_count: f64,
    pub request_count: f64,
    pub replay_count: f64,
}

/// See [`conn_stamp`].
#[napi(object)]
pub struct ConnStamp {
    pub created: f64,
    pub number: f64,
    pub finished: u32,
    pub idle_ms: f64,
}

/// The numbers JavaScript and Rust exchange, declared once here and read by `lib/` at load
/// ([`protocol`]): the pool's verdicts, agent.request()'s event kinds and flags, and what a
/// write answers.
#[napi(object)]
pub struct Protocol {
    /// A verdict is `id * verdict_base + kind` when not negative.
    pub verdict_base: u32,
    pub reuse: u32,
    pub connect: u32,
    pub queued: u32,
    pub handoff: u32,
    pub grant: u32,
    pub none: f64,
    pub idle: f64,
    pub closed: f64,
    /// `release`: the connection closed for an `agent.request()` that waited.
    pub retired: f64,
    /// agent.request()'s event kinds, in `request::kind` order.
    pub events: Vec<String>,
    pub expect_continue: u32,
    pub informational: u32,
    /// Answers to a `VERIFY` event (`request::name`).
    pub name_right: f64,
    pub name_let_pass: f64,
    pub write_done: i32,
    pub write_pending: i32,
    /// The request function's arguments, by name, in the order it takes them (see `arg`).
    pub request_args: Vec<String>,
}

/// See [`Protocol`].
#[napi(catch_unwind)]
pub fn protocol() -> Protocol {
    use pool::verdict;
    Protocol {
        verdict_base: verdict::BASE,
        reuse: verdict::REUSE,
        connect: verdict::CONNECT,
        queued: verdict::QUEUED,
        handoff: verdict::HANDOFF,
        grant: verdict::GRANT,
        none: verdict::NONE,
        idle: verdict::IDLE,
        closed: verdict::CLOSED,
        retired: verdict::RETIRED,
        events: request::kind::NAMES.iter().map(|n| n.to_string()).collect(),
        expect_continue: EXPECT_CONTINUE,
        informational: INFORMATIONAL,
        name_right: request::name::RIGHT,
        name_let_pass: request::name::LET_PASS,
        write_done: conn::WRITE_DONE,
        write_pending: conn::WRITE_PENDING,
        request_args: arg::NAMES.iter().map(|n| n.to_string()).collect(),
    }
}

/// An idle connection, for the `freeSockets` view.
#[napi(object)]
pub struct IdleConn {
    pub id: u32,
    pub name: String,
    /// Serves `http.request()` (else `agent.request()`).
    pub drop_in: bool,
    pub created: f64,
    pub number: f64,
    pub finished: u32,
    pub idle_ms: f64,
}

#[napi(object)]
pub struct KeyCounts {
    pub key: u32,
    pub name: String,
    pub busy: u32,
    pub idle: u32,
    pub waiting: u32,
    /// The queued waiters, in the order they will be served.
    pub waiters: Vec<f64>,
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
}

fn limits(opts: &PoolOptions) -> Limits {
    let count = |n: f64| {
        if n.is_finite() && n >= 0.0 {
            n as usize
        } else {
            usize::MAX
        }
    };
    Limits {
        max_sockets: count(opts.max_sockets),
        max_free_sockets: count(opts.max_free_sockets),
        max_total_sockets: count(opts.max_total_sockets),
        scheduling: if opts.lifo {
            Scheduling::Lifo
        } else {
            Scheduling::Fifo
        },
    }
}

fn connect_target(target: ConnectTarget) -> Result<Target> {
    if let Some(path) = target.path {
        return Ok(Target::Unix { path });
    }
    let local_address =
        match target.local_address {
            Some(s) => Some(parse_ip(&s).ok_or_else(|| {
                Error::new(Status::InvalidArg, format!("invalid localAddress: {s}"))
            })?),
            None => None,
        };
    let addresses = match target.addresses {
        Some(list) => Some(
            list.iter()
                .map(|s| {
                    parse_ip(s).ok_or_else(|| {
                        Error::new(Status::InvalidArg, format!("invalid address: {s}"))
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        ),
        None => None,
    };
    let host = target.host.unwrap_or_else(|| "localhost".into());
    let proxy_tls = match target.proxy_tls {
        Some(true) => Some(ProxyTls {
            config: proxy_tls_config(target.proxy_reject_unauthorized != Some(false))?,
            host: host.clone(),
        }),
        _ => None,
    };
    Ok(Target::Tcp {
        host,
        port: target.port.unwrap_or(80) as u16,
        family: Family::from_node(target.family.unwrap_or(0)),
        local_address,
        local_port: target.local_port.map(|p| p as u16),
        addresses,
        proxy_tls,
        tunnel: target.tunnel_request.map(|request| Tunnel {
            request,
            refused: target.tunnel_refused.unwrap_or_default(),
        }),
        choice: match target.attempt_delay_ms {
            None => AddressChoice::default(),
            Some(ms) => AddressChoice {
                attempt_delay: (ms > 0).then(|| Duration::from_millis(ms as u64)),
                order: Order::from_node(target.order.as_deref()),
            },
        },
    })
}

fn family_name(ip: &IpAddr) -> String {
    if ip.is_ipv4() { "IPv4" } else { "IPv6" }.to_owned()
}

/// One agent's connection pool. The object anchors the pool's lifetime (collected with its
/// agent); the calls made for every request are plain functions below that name the pool or
/// the connection by number: no wrapper object, no `this` to unwrap (a third of the cost of a
/// method call here).
#[napi]
pub struct NativePool {
    cell: Rc<PoolCell>,
}

fn ctx() -> Result<Rc<env::EnvCtx>> {
    env::current().ok_or_else(|| Error::from_reason("hyperagent: the binding was not initialised"))
}

fn conn(id: u32) -> Option<Rc<conn::Conn>> {
    env::current()?.conn(id)
}

fn undefined(env: &Env) -> sys::napi_value {
    let mut value = std::ptr::null_mut();
    // SAFETY: js.rs invariant 1 (a plain value lookup on this env, during a call from it).
    unsafe { sys::napi_get_undefined(env.raw(), &mut value) };
    value
}

/// `id * 4 + verdict` (see `pool::verdict`), or, for an idle connection whose socket is still
/// alive, that socket itself, now serving the caller.
#[napi(ts_return_type = "number | object", catch_unwind)]
pub fn checkout(env: &Env, pool: u32, key: u32) -> Result<Unknown<'_>> {
    guard::point("checkout");
    let cell = ctx()?
        .pool(pool)
        .ok_or_else(|| Error::from_reason("hyperagent: unknown pool"))?;
    let verdict = cell.checkout(KeyId(key));
    let base = f64::from(pool::verdict::BASE);
    if verdict % base == f64::from(pool::verdict::REUSE) {
        let socket = cell.take((verdict / base) as u32);
        if !socket.is_null() {
            // SAFETY: js.rs invariants 1 and 2: a non-null value, just read from the
            // connection's live socket reference, in this call's scope. Test:
            // __test__/reuse.test.js "30 sequential requests share one connection".
            return Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), socket) });
        }
    }
    verdict.into_unknown(env)
}

/// The socket of connection `id`, now serving the caller's checkout; `undefined` when it was
/// collected while idle.
#[napi(ts_return_type = "object | undefined", catch_unwind)]
pub fn take(env: &Env, id: u32) -> Result<Unknown<'_>> {
    let socket = conn(id).map_or(std::ptr::null_mut(), |c| c.take(env.raw()));
    let socket = if socket.is_null() {
        undefined(env)
    } else {
        socket
    };
    // SAFETY: js.rs invariants 1 and 2: `undefined`, or a non-null value just read from the
    // connection's live socket reference, in this call's scope.
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), socket) })
}

thread_local! {
    /// Node's default trust on this JavaScript thread (see [`set_default_ca`]); none until
    /// given, and on Node versions that cannot tell it.
    static DEFAULT_TRUST: RefCell<Option<Arc<Trust>>> = const { RefCell::new(None) };
    /// The TLS configurations for sessions to proxies (with and without `rejectUnauthorized`),
    /// made on first use with the default trust, and again after it changes.
    static PROXY_TLS: RefCell<[Option<Arc<TlsConfig>>; 2]> = const { RefCell::new([None, None]) };
}

/// The configuration of a session to a proxy reached over TLS: what `tls.connect` with no
/// options of its own uses (the default trust, sessions kept for resumption).
fn proxy_tls_config(reject_unauthorized: bool) -> Result<Arc<TlsConfig>> {
    PROXY_TLS.with(|configs| {
        let mut configs = configs.borrow_mut();
        let slot = &mut configs[usize::from(reject_unauthorized)];
        if let Some(config) = slot {
            return Ok(config.clone());
        }
        let opts = TlsOptions {
            default_trust: DEFAULT_TRUST.with(|t| t.borrow().clone()),
            reject_unauthorized,
            max_cached_sessions: 100,
            ..TlsOptions::default()
        };
        let config = Arc::new(
            TlsConfig::new(&opts).map_err(|e| Error::new(Status::GenericFailure, e.message()))?,
        );
        *slot = Some(config.clone());
        Ok(config)
    })
}

/// Sets the trust of TLS configurations made from now on without `ca`: Node's default set
/// (`tls.getCACertificates('default')`, PEM), given again whenever it changes. Returns how
/// many certificates it holds.
#[napi(catch_unwind)]
pub fn set_default_ca(certs: Vec<String>) -> u32 {
    let trust = Trust::node_default(&certs);
    let n = trust.certificates() as u32;
    DEFAULT_TRUST.with(|t| *t.borrow_mut() = Some(Arc::new(trust)));
    PROXY_TLS.with(|configs| *configs.borrow_mut() = [None, None]);
    n
}

/// The certificates of this thread's default trust that may have issued `top` (DER, the last
/// certificate a server sent): JavaScript completes the chain with the one that did, as the
/// verified chain OpenSSL reports ends at the trusted root.
#[napi(catch_unwind)]
pub fn trusted_issuers(top: Buffer) -> Vec<Buffer> {
    DEFAULT_TRUST.with(|t| match &*t.borrow() {
        Some(trust) => trust
            .issuers_of(&top)
            .into_iter()
            .map(|c| Buffer::from(c.as_ref().to_vec()))
            .collect(),
        None => Vec::new(),
    })
}

/// Makes the next pass through the named place panic (see `guard`): for the tests of what a
/// panic does at each boundary with Node. An empty name disarms it.
#[napi(catch_unwind)]
pub fn inject_panic(site: String) {
    guard::arm(&site);
}

/// Turns the `NODE_DEBUG=hyperagent` lines of the Rust side on or off.
#[napi(catch_unwind)]
pub fn set_debug(on: bool) {
    debug::set_enabled(on);
}

/// Makes `socket` the JavaScript face of connection `id`.
#[napi(catch_unwind)]
pub fn bind(env: &Env, id: u32, socket: Unknown) -> bool {
    match conn(id) {
        Some(c) if c.state.get() != conn::State::Closed => {
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
    conn(id).map_or(-libc::EBADF, |c| c.write(&[&data[..]]))
}

#[napi(catch_unwind)]
pub fn writev(id: u32, chunks: Vec<BufferSlice>) -> i32 {
    guard::point("write");
    let Some(c) = conn(id) else {
        return -libc::EBADF;
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
    let own = if own_ms.is_infinite() && own_ms > 0.0 {
        Duration::MAX
    } else if own_ms > 0.0 {
        Duration::from_micros((own_ms * 1000.0) as u64)
    } else {
        return 0.0;
    };
    let policy = crate::pool::ReleasePolicy {
        keep_alive: true,
        idle: None,
        ttl: None,
        hint_buffer: Duration::from_micros((buffer_ms.max(0.0) * 1000.0) as u64),
    };
    let hint = hint.and_then(|h| crate::pool::keep_alive_hint(h.as_bytes()));
    match policy.idle_for(Some(own), hint) {
        Some(Duration::MAX) => f64::INFINITY,
        Some(idle) => idle.as_secs_f64() * 1000.0,
        None => 0.0,
    }
}

/// What is left of `socketActiveTTL` (`ttl_ms`, as JavaScript reads it now) for connection
/// `id`, by the agent's rule (see `ReleasePolicy::settle`): 0 once reached, infinite without
/// a TTL (or a connection).
#[napi(catch_unwind)]
pub fn ttl_left(id: u32, ttl_ms: f64) -> f64 {
    let Some(conn) = conn(id) else {
        return f64::INFINITY;
    };
    let policy = crate::pool::ReleasePolicy {
        ttl: millis(Some(ttl_ms)),
        ..crate::pool::ReleasePolicy::default()
    };
    match policy.settle(conn.created.elapsed(), Some(Duration::MAX)) {
        crate::pool::Fate::Close => 0.0,
        crate::pool::Fate::Release(Some(left)) if left != Duration::MAX => {
            left.as_secs_f64() * 1000.0
        }
        crate::pool::Fate::Release(_) => f64::INFINITY,
    }
}

/// The request on connection `id` finished. `idle_ms`: how long it may idle (negative: it may
/// only serve a waiter; infinite: no limit). Returns a verdict (see `pool::verdict`).
#[napi(catch_unwind)]
pub fn release(id: u32, idle_ms: f64) -> f64 {
    guard::point("release");
    let Some(cell) = conn(id).and_then(|c| c.pool()) else {
        return pool::verdict::NONE;
    };
    let idle = if idle_ms < 0.0 || idle_ms.is_nan() {
        None
    } else if idle_ms.is_infinite() {
        Some(Duration::MAX)
    } else {
        Some(Duration::from_micros((idle_ms * 1000.0) as u64))
    };
    cell.release(id, idle)
}

/// The socket object of idle connection `id` if a program still holds one, else `undefined`.
#[napi(ts_return_type = "object | undefined", catch_unwind)]
pub fn idle_face(env: &Env, id: u32) -> Result<Unknown<'_>> {
    let socket = conn(id)
        .filter(|c| c.state.get() == conn::State::Idle)
        .map_or(std::ptr::null_mut(), |c| c.idle_face(env.raw()));
    let socket = if socket.is_null() {
        undefined(env)
    } else {
        socket
    };
    // SAFETY: js.rs invariants 1 and 2: `undefined`, or a non-null value just read from the
    // connection's live socket reference, in this call's scope. Test: __test__/compat.test.js
    // "agent.freeSockets holds socket objects".
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), socket) })
}

/// Makes `socket` the face of idle connection `id`, held weakly (see `Conn::adopt`).
#[napi(catch_unwind)]
pub fn adopt(env: &Env, id: u32, socket: Unknown) -> bool {
    match conn(id) {
        Some(c) if c.state.get() == conn::State::Idle => {
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
    // SAFETY: js.rs invariant 1: a value made in this call's scope.
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
    let stamp = conn(id)?.stamp.get();
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
        let mut stamp = c.stamp.get();
        stamp.number = number;
        c.stamp.set(stamp);
    }
}

/// Closes connection `id` if it is idle (a program destroyed its object in `freeSockets`).
/// Returns a verdict (a waiter may connect).
#[napi(catch_unwind)]
pub fn close_idle(id: u32) -> f64 {
    match conn(id).filter(|c| c.state.get() == conn::State::Idle) {
        Some(c) => c.pool().map_or(pool::verdict::NONE, |cell| cell.close(id)),
        None => pool::verdict::NONE,
    }
}

/// The socket of connection `id` was destroyed. Returns a verdict (a waiter may connect).
#[napi(catch_unwind)]
pub fn close(id: u32) -> f64 {
    match conn(id).and_then(|c| c.pool()) {
        Some(cell) => cell.close(id),
        None => pool::verdict::NONE,
    }
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
    Some(ConnInfo {
        local_address: local.map(|a| a.ip().to_string()),
        local_port: local.map(|a| a.port() as u32),
        local_family: local.map(|a| family_name(&a.ip())),
        remote_address,
        remote_port,
        remote_family,
        bytes_read: conn.bytes_read.get() as f64,
        bytes_written: conn.bytes_written.get() as f64,
        created_at_ms_ago: conn.created.elapsed().as_secs_f64() * 1000.0,
    })
}

#[napi]
impl NativePool {
    #[napi(constructor, catch_unwind)]
    pub fn new(agent: Unknown, options: PoolOptions) -> Result<Self> {
        let connect_opts = ConnectOptions {
            no_delay: options.no_delay,
            keep_alive: options
                .keep_alive_msecs
                .map(|ms| Duration::from_millis(ms.max(0.0) as u64)),
        };
        let cell = PoolCell::new(ctx()?, agent.raw(), limits(&options), connect_opts);
        cell.policy.set(release_policy(&options));
        cell.connect_timeout.set(millis(options.connect_timeout_ms));
        cell.replay_limit.set(
            options
                .replay_limit
                .map_or(64 * 1024, |n| n.max(0.0) as usize),
        );
        Ok(NativePool { cell })
    }

    /// The number the plain functions name this pool by.
    #[napi(getter, catch_unwind)]
    pub fn id(&self) -> u32 {
        self.cell.id
    }

    /// The key for a `getName()` string.
    #[napi(catch_unwind)]
    pub fn key(&self, name: String) -> u32 {
        self.cell.state.borrow_mut().pool.key(&name).0
    }

    /// Keys in use.
    #[napi(getter, catch_unwind)]
    pub fn key_count(&self) -> u32 {
        self.cell.state.borrow().pool.key_count() as u32
    }

    /// Forgets empty keys but the `keep` most recently used; returns their ids.
    #[napi(catch_unwind)]
    pub fn sweep_keys(&self, keep: u32) -> Vec<u32> {
        self.cell.sweep_keys(keep as usize)
    }

    #[napi(catch_unwind)]
    pub fn open_granted(&self, key: u32) -> u32 {
        self.cell.open_granted(KeyId(key))
    }

    #[napi(catch_unwind)]
    pub fn connect(&self, id: u32, target: ConnectTarget) -> Result<()> {
        let servername = target.servername.clone();
        self.cell.connect(id, connect_target(target)?, servername);
        Ok(())
    }

    /// Sets key `key`'s TLS configuration; returns the error to throw, if the options are bad.
    #[napi(catch_unwind)]
    pub fn set_tls(&self, key: u32, options: TlsOptionsJs) -> Option<ErrorInfo> {
        let bytes = |v: Option<Vec<Buffer>>| {
            v.map(|list| list.into_iter().map(|b| b.to_vec()).collect::<Vec<_>>())
        };
        let certs = bytes(options.certs).unwrap_or_default();
        let keys = bytes(options.keys).unwrap_or_default();
        let opts = TlsOptions {
            ca: bytes(options.ca),
            identities: certs.into_iter().zip(keys).collect(),
            crls: bytes(options.crl).unwrap_or_default(),
            pfx: options
                .pfx
                .unwrap_or_default()
                .into_iter()
                .map(|p| (p.buf.to_vec(), p.passphrase))
                .collect(),
            default_trust: DEFAULT_TRUST.with(|t| t.borrow().clone()),
            reject_unauthorized: options.reject_unauthorized,
            min_version: options.min_version,
            max_version: options.max_version,
            ciphers: options.ciphers,
            alpn: bytes(options.alpn).unwrap_or_default(),
            max_cached_sessions: options.max_cached_sessions as usize,
        };
        self.cell
            .set_tls(KeyId(key), &opts)
            .err()
            .map(|e| ErrorInfo {
                code: e.code().to_owned(),
                message: e.message(),
            })
    }

    /// From now on, the TLS handshakes of this pool's connections report their key material
    /// (Node's 'keylog' events); for good, as Node's agents do once asked.
    #[napi(catch_unwind)]
    pub fn log_keys(&self) {
        self.cell
            .keylog
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Where the promise path connects for `key`.
    #[napi(catch_unwind)]
    pub fn set_target(&self, key: u32, target: ConnectTarget) -> Result<()> {
        let servername = target.servername.clone();
        let js_lookup = target.js_lookup == Some(true);
        self.cell
            .set_target(KeyId(key), connect_target(target)?, servername, js_lookup);
        Ok(())
    }

    /// The largest response head the promise path accepts, for new connections.
    #[napi(catch_unwind)]
    pub fn set_max_header_size(&self, bytes: u32) {
        self.cell.max_header_size.set(bytes as usize);
    }

    /// Connection `id` leaves the pool's counts (HTTP upgrade). Returns a verdict.
    #[napi(catch_unwind)]
    pub fn detach(&self, id: u32) -> f64 {
        self.cell.detach(id)
    }

    /// `[name, socket, name, socket, ...]` for every socket serving a checkout.
    #[napi(ts_return_type = "Array<string | object>", catch_unwind)]
    pub fn active_sockets<'env>(&self, env: &'env Env) -> Result<Vec<Unknown<'env>>> {
        let mut out = Vec::new();
        for (name, socket) in self.cell.active_sockets() {
            out.push(name.into_unknown(env)?);
            // SAFETY: js.rs invariants 1 and 2: a non-null socket from a live strong reference
            // (`Conn::serving`), in this call's scope. Test: __test__/errors.test.js
            // "agent.destroy() closes idle and active connections and fails queued requests".
            out.push(unsafe { Unknown::from_raw_unchecked(env.raw(), socket) });
        }
        Ok(out)
    }

    /// The idle connections, for the `freeSockets` view.
    #[napi(catch_unwind)]
    pub fn idle_connections(&self) -> Vec<IdleConn> {
        self.cell
            .idle_conns()
            .into_iter()
            .map(|(name, c)| {
                let stamp = c.stamp.get();
                IdleConn {
                    id: c.id,
                    name,
                    drop_in: c.mode.get() != conn::Mode::Promise,
                    created: stamp.created_ms,
                    number: stamp.number,
                    finished: stamp.finished,
                    idle_ms: stamp.idle_ms,
                }
            })
            .collect()
    }

    #[napi(catch_unwind)]
    pub fn set_limits(&self, options: PoolOptions) -> Vec<f64> {
        self.cell.policy.set(release_policy(&options));
        self.cell
            .connect_timeout
            .set(millis(options.connect_timeout_ms));
        self.cell.set_limits(limits(&options))
    }

    #[napi(catch_unwind)]
    pub fn destroy(&self) -> Vec<f64> {
        self.cell.destroy()
    }

    /// The handles of the `agent.request()`s on a connection (see
    /// `PoolCell::requests_in_flight`).
    #[napi(ts_return_type = "object[]", catch_unwind)]
    pub fn requests_in_flight<'env>(&self, env: &'env Env) -> Vec<Unknown<'env>> {
        self.cell
            .requests_in_flight()
            .into_iter()
            // SAFETY: js.rs invariants 1 and 2: handles from the strong references of requests
            // not finished (`finish` takes a request out of the map before deleting its
            // reference), in this call's scope. Test: __test__/request/aborts.test.js
            // "agent.destroy() ends agent.request()s: queued, waiting for the head, and mid-body".
            .map(|v| unsafe { Unknown::from_raw_unchecked(env.raw(), v) })
            .collect()
    }

    /// The handles of the `agent.request()`s waiting in the pool's queue (see
    /// `PoolCell::requests_queued`), for `agent.destroy()` to fail.
    #[napi(ts_return_type = "object[]", catch_unwind)]
    pub fn requests_queued<'env>(&self, env: &'env Env) -> Vec<Unknown<'env>> {
        self.cell
            .requests_queued()
            .into_iter()
            // SAFETY: js.rs invariants 1 and 2: handles from the strong references of requests
            // not finished (`finish` takes a request out of the map before deleting its
            // reference), in this call's scope. Test: __test__/request/aborts.test.js
            // "agent.destroy() ends agent.request()s: queued, waiting for the head, and mid-body".
            .map(|v| unsafe { Unknown::from_raw_unchecked(env.raw(), v) })
            .collect()
    }

    /// Counts an error on an established socket (`errorSocketCount`).
    #[napi(catch_unwind)]
    pub fn count_error(&self) {
        self.cell.state.borrow_mut().pool.stats.error_socket_count += 1;
    }

    /// Counts a socket that could not be made (`createSocketErrorCount`): a `createSocket()`
    /// of the program's gave an error, as agentkeepalive counts it.
    #[napi(catch_unwind)]
    pub fn count_connect_error(&self) {
        self.cell
            .state
            .borrow_mut()
            .pool
            .stats
            .create_socket_error_count += 1;
    }

    /// Counts a socket closed by its active timeout (`timeoutSocketCount`).
    #[napi(catch_unwind)]
    pub fn count_timeout(&self) {
        self.cell.state.borrow_mut().pool.stats.timeout_socket_count += 1;
    }

    #[napi(catch_unwind)]
    pub fn stats(&self) -> PoolStats {
        let s = self.cell.stats();
        PoolStats {
            create_socket_count: s.create_socket_count as f64,
            create_socket_error_count: s.create_socket_error_count as f64,
            close_socket_count: s.close_socket_count as f64,
            error_socket_count: s.error_socket_count as f64,
            timeout_socket_count: s.timeout_socket_count as f64,
            request_count: s.request_count as f64,
            replay_count: s.replay_count as f64,
        }
    }

    /// Counts per key, for the `sockets`, `freeSockets` and `requests` views.
    #[napi(catch_unwind)]
    pub fn snapshot(&self) -> Vec<KeyCounts> {
        let st = self.cell.state.borrow();
        st.pool
            .snapshot()
            .into_iter()
            .map(|k| KeyCounts {
                key: k.key.0,
                waiters: st.pool.waiters_of(k.key).map(|w| w.0 as f64).collect(),
                name: k.name,
                busy: k.busy as u32,
                idle: k.idle as u32,
                waiting: k.waiting as u32,
            })
            .collect()
    }
}

// ---- agent.request() --------------------------------------------------------------------------

fn request_state(id: u32) -> Option<Rc<request::ReqState>> {
    env::current()?.request(id)
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
/// later, needs no check).
#[napi(catch_unwind)]
pub fn tls_name_verified(id: u32) {
    if let Some(conn) = conn(id) {
        conn.with_tls(|config, info| config.name_verified(info));
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
            if let Some(pool) = conn.pool() {
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
    // SAFETY: js.rs invariant 1: the external just made, in this call's scope.
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
}

/// The request function's arguments, by position: declared here alone, and exported by name in
/// `protocol().requestArgs`, against which lib/request.js checks its call when it loads.
mod arg {
    pub const POOL: usize = 0;
    pub const KEY: usize = 1;
    pub const HANDLE: usize = 2;
    pub const METHOD: usize = 3;
    pub const PATH: usize = 4;
    pub const HEADERS: usize = 5;
    pub const BODY: usize = 6;
    pub const STREAMED: usize = 7;
    pub const CONTENT_LENGTH: usize = 8;
    pub const FLAGS: usize = 9;
    pub const HEADERS_TIMEOUT: usize = 10;
    pub const BODY_TIMEOUT: usize = 11;
    pub const REPLAY_LIMIT: usize = 12;
    pub const CONTEXT_NAME: usize = 13;
    pub const COUNT: usize = 14;
    /// Their names, in order.
    pub const NAMES: [&str; COUNT] = [
        "pool",
        "key",
        "handle",
        "method",
        "path",
        "headers",
        "body",
        "streamed",
        "contentLength",
        "flags",
        "headersTimeout",
        "bodyTimeout",
        "replayLimit",
        "contextName",
    ];
}

/// `agent.request()`'s start as a plain Node-API function, made once per thread: napi-rs's
/// conversion of its arguments (a length query and an allocation per string, a borrow scope
/// per call) took about 8% of the JavaScript thread's time per request.
/// Arguments (see [`arg`]): `(pool, key, handle, method, path, headers, body, streamed,
/// contentLength, flags, headersTimeout, bodyTimeout, replayLimit, contextName)`; `headers` is
/// `name\nvalue\n...`, already validated; `path` may instead be a head from [`prepare_head`]
/// (then `headers` is ignored); `body` a Buffer, a string (sent as UTF-8) or null;
/// `contentLength` negative when there is none; `flags` [`EXPECT_CONTINUE`] and
/// [`INFORMATIONAL`]; `replayLimit` the largest body sent again
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
        // within this call and dropped at its end (js.rs invariants 1 and 4).
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
    // SAFETY: js.rs invariant 1; a static callback without data, named by a string of 7
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
    // SAFETY: js.rs invariant 1: the function just made (status checked), in this call's
    // scope. Every `agent.request()` test calls it, e.g. __test__/request/basics.test.js "a GET
    // resolves with status, headers and a body stream".
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), func) })
}

/// A request's flags (see [`request_function`]): it says `expect: 100-continue`, and its body
/// waits for the server's 100 (or a second).
const EXPECT_CONTINUE: u32 = 1;
/// Its informational (1xx) responses are reported (undici's `onInfo`).
const INFORMATIONAL: u32 = 2;

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
    let cell = ctx
        .pool(pool)
        .ok_or_else(|| Error::from_reason("hyperagent: unknown pool"))?;
    let intent = client::plan::Intent {
        method: client::plan::method(&method).map_err(invalid)?,
        head,
        body: if streamed {
            client::plan::Source::Streamed
        } else {
            client::plan::Source::Bytes(bytes)
        },
        content_length: (content_length >= 0.0).then_some(content_length as u64),
        expect_continue: flags & EXPECT_CONTINUE != 0,
        informational: flags & INFORMATIONAL != 0,
        headers_timeout_ms,
        body_timeout_ms,
        replay_limit: (replay_limit >= 0.0).then_some(replay_limit as usize),
        max_head_size: cell.max_header_size.get(),
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
    };
    let req = cell.request(
        KeyId(key),
        js_side,
        plan.spec,
        plan.writer,
        ctl,
        plan.replay,
    );
    id_slot.store(req.id, std::sync::atomic::Ordering::Release);
    Ok(req.id as f64)
}

/// For tests: what keeps this thread's process alive for work on tokio, as `[holds,
/// releases without a hold]`. With nothing in flight both are 0; the second is never anything
/// else (each such release could have let the process exit under other work).
#[napi(catch_unwind)]
pub fn held_operations() -> Vec<f64> {
    ctx().map_or(vec![0.0, 0.0], |ctx| {
        let (held, extra) = ctx.held();
        vec![held as f64, extra as f64]
    })
}

/// Aborts request `id`. Returns a verdict (a waiter may connect in the freed slot).
#[napi(catch_unwind)]
pub fn request_abort(id: u32) -> f64 {
    request_state(id).map_or(pool::verdict::NONE, |req| request::abort(&req))
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
    let writer = req.writer.borrow();
    match writer
        .as_ref()
        .map(|w| w.write(request::body_chunk(&chunk)))
    {
        Some(crate::client::WriteResult::Ready) => 0,
        Some(crate::client::WriteResult::Full) => 1,
        _ => 2,
    }
}

#[napi(catch_unwind)]
pub fn body_end(id: u32) {
    if let Some(req) = request_state(id) {
        if let Some(w) = req.writer.borrow_mut().as_mut() {
            w.end();
        }
    }
}

#[napi(catch_unwind)]
pub fn body_fail(id: u32, message: String) {
    if let Some(req) = request_state(id) {
        if let Some(w) = req.writer.borrow_mut().as_mut() {
            w.fail(message);
        }
    }
}

/// Connection `id`, opening in a slot the pool gave it, is carried by `link`, the stream a
/// hook of the program's made (see `conn::Mode::Foreign`): it is established and serving the
/// request that opened it. False when the slot is gone (the connection was closed meanwhile).
#[napi(catch_unwind)]
pub fn foreign(env: &Env, id: u32, link: Unknown) -> bool {
    match conn(id) {
        Some(c)
            if c.state.get() == conn::State::Connecting && c.mode.get() == conn::Mode::DropIn =>
        {
            c.mode.set(conn::Mode::Foreign);
            c.bind(env.raw(), link.raw());
            c.state.set(conn::State::Active);
            true
        }
        _ => false,
    }
}
